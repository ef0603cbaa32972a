"""The high-level API: ``Explainer(model, space).explain(x)``.

An :class:`Explainer` builds the counterfactual MILP once for its (model, feature
space, options) and answers each query by changing mutable parameters (the factual,
the target) and re-solving, with a persistent solver where one exists. Every
returned counterfactual is decoded to raw units and re-checked with the real model
(:mod:`cfopt.query.solution`); if no decoded point passes, the query is re-solved with a
10x larger validity margin (at most ``verify_retries`` times), else it is reported as
``VERIFICATION_FAILED`` without a point. What the answer claims is decided in one
place, :mod:`cfopt.query.claims`: a re-solve with a larger margin is a different problem,
so its point is reported ``OPTIMAL`` only within the gap of the first solve's bound.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal

import pandas as pd
import pyomo.environ as pyo

from .batch.runner import BatchResult, explain_batch
from .constraints.blocks import ConstraintBlock
from .errors import InfeasibleError
from .formulations.tree_regions import BUILD_SECONDS_PER_LEAF, RegionTooLarge
from .problem import CounterfactualModel
from .query.claims import claim
from .query.diagnosis import diagnose
from .query.inner_radius import after, inner_stage, with_floor
from .query.restrictions import Restriction, restriction_of
from .query.restrictions.relu import objective_value
from .query.restrictions.trees import (
    build_box_region,
    build_query_region,
    per_query,
)
from .query.solution import (
    Verification,
    start_of,
    unchecked_components,
    verified_solution,
    verify_row,
)
from .results.counterfactual import Counterfactual, CounterfactualSet
from .results.status import Status
from .solvers import SolveOutcome, SolverBackend, SolverSettings, make_solver
from .solvers.base import time_left
from .solvers.cpsat import CpSatBackend, check_supported
from .solvers.options import check_options
from .space.space import FeatureSpace

_QUERY_OPTIONS = ("time_limit", "mip_gap", "max_changes")


class Explainer:
    """Counterfactual explanations of one learned model over one feature space.

    Args:
        model: the fitted model (torch ``nn.Sequential``, ONNX file or ModelProto,
            sklearn ``MLPClassifier`` or linear classifier); it must consume
            ``space.transform(X)``.
        space: the :class:`~cfopt.FeatureSpace`.
        solver: ``"highs"`` (default), ``"gurobi"``, ``"cbc"``, any Pyomo solver name,
            or a :class:`~cfopt.solvers.SolverBackend`; for tree ensembles also
            ``"cpsat"`` (OR-Tools CP-SAT on OCEAN's exact CP model of each query, no MILP
            solve: :mod:`cfopt.solvers.cpsat`; ``pip install cfopt[cpsat]``).
        objective, weights, max_changes, margin, bound_tightening: see
            :class:`~cfopt.CounterfactualModel`.
        time_limit: seconds per query (``None``: no limit); on expiry the incumbent is
            returned with status ``FEASIBLE`` (not proven optimal), or none with
            ``NO_SOLUTION``. The query's re-solves (verification retries, the fallback
            after a per-query restriction) share the limit.
        mip_gap: relative gap at which the solver stops; an answer is ``OPTIMAL`` when
            its verified objective is within this gap (plus 1e-6 absolute) of the bound.
        threads: solver threads per query (default 1: no oversubscription when
            queries run in parallel processes).
        seed: solver random seed (determinism).
        solver_options: raw solver options passed through by name (HiGHS, Gurobi and
            CBC refuse unknown names and values here: :mod:`cfopt.solvers.options`).
        verify_retries: re-solves with a 10x margin when verification fails (their
            points are proven optimal only against the first solve's bound).
        tighten_per_query: restrict each solve around a heuristic counterfactual
            (exact; see :mod:`cfopt.query.restrictions.relu` for networks and
            :mod:`cfopt.query.restrictions.trees` for tree ensembles).
        verbose: print solver logs.
        constraints: declared constraint blocks (rules, causal equations, trust
            regions), see :class:`~cfopt.CounterfactualModel`.
        tree_formulation: tree ensembles: ``"leaf"`` (default: binary leaves) or
            ``"threshold"`` (continuous leaves); see :mod:`cfopt.formulations.predictors.trees`.
        features_to_vary: the only features a counterfactual may change (DiCE's
            allow-list; the others become immutable in a copy of ``space``, see
            :meth:`FeatureSpace.vary_only`); ``None``: as the space declares.

    Attributes:
        milp: the :class:`~cfopt.CounterfactualModel` (a Pyomo ``ConcreteModel``);
            constraints added to it apply to every later query.
    """

    def __init__(self, model: Any, space: FeatureSpace, *, solver: str | SolverBackend = "highs",
                 objective: str | Mapping[str, float] = "l1",
                 weights: str | Mapping[str, float] = "range", max_changes: int | None = None,
                 margin: float = 1e-3, bound_tightening: str | None = "lp",
                 time_limit: float | None = None, mip_gap: float = 1e-4,
                 threads: int | None = 1, seed: int | None = 0,
                 solver_options: Mapping[str, Any] | None = None, verify_retries: int = 3,
                 tighten_per_query: bool = True, verbose: bool = False,
                 constraints: Sequence[ConstraintBlock] = (),
                 tree_formulation: str | None = None,
                 features_to_vary: Sequence[str] | None = None) -> None:
        self.settings = SolverSettings(time_limit=time_limit, mip_gap=mip_gap, threads=threads,
                                       seed=seed, options=dict(solver_options or {}),
                                       verbose=verbose)
        if isinstance(verify_retries, bool) or not isinstance(verify_retries, int) or \
                verify_retries < 0:
            raise ValueError(f"verify_retries must be a non-negative integer, "
                             f"got {verify_retries!r}")
        self.verify_retries = verify_retries
        self.tighten_per_query = bool(tighten_per_query)
        self.backend = make_solver(solver)
        check_options(self.backend.name, self.settings.options)
        if features_to_vary is not None:
            if isinstance(features_to_vary, str):
                raise TypeError(f"features_to_vary must be a list of feature names, got the "
                                f"string {features_to_vary!r}")
            space = copy.deepcopy(space).vary_only(*features_to_vary)
        self.milp = CounterfactualModel(model, space, objective=objective, weights=weights,
                                        max_changes=max_changes, margin=margin,
                                        bound_tightening=bound_tightening,
                                        constraints=constraints,
                                        tree_formulation=tree_formulation)
        #: CP-SAT builds its own model of each query (:mod:`cfopt.solvers.cpsat`)
        self._cpsat = isinstance(self.backend, CpSatBackend)
        if self._cpsat:
            check_supported(self.milp)
        if per_query(self.milp) and (self.tighten_per_query or self._cpsat):
            self.milp.predictor_constr.deferred = True  # each query builds its trees
        self.margin = margin
        self._max_changes = max_changes
        self._build_pending = True
        self._build_arguments = {"model": model, "space": space, "objective": objective,
                                 "weights": weights, "max_changes": max_changes,
                                 "margin": margin, "bound_tightening": bound_tightening,
                                 "tree_formulation": tree_formulation}

    @property
    def space(self) -> FeatureSpace:
        return self.milp.space

    @property
    def build_arguments(self) -> dict[str, Any]:
        """The arguments the MILP was built from: ``model``, ``space`` (with
        ``features_to_vary`` applied), ``objective``, ``weights``, ``max_changes``,
        ``margin``, ``bound_tightening``, ``tree_formulation``.
        ``Explainer(**e.build_arguments, solver=..., constraints=...)`` builds the same
        MILP: parallel batch workers do (:mod:`cfopt.batch.runner`), and a batch journal
        records them (:mod:`cfopt.batch.journal`). A new dict each time."""
        return dict(self._build_arguments)

    def explain(self, x: pd.DataFrame | pd.Series | Mapping, target: Any = None, *,
                n: int | None = None, diversity: str | None = None,
                **options: Any) -> Counterfactual | CounterfactualSet:
        """The closest counterfactual of one raw row ``x``, or a diverse set of ``n``.

        Args:
            x: one row (DataFrame, Series or dict) in raw units with category labels.
            target: a class label, a list of labels, or ``None`` / ``"opposite"`` (any
                other class); for a regressor, the interval ``(low, high)`` (``None``:
                open side).
            n: give it (or ``diversity``) for a :class:`~cfopt.CounterfactualSet` of up to
                ``n`` counterfactuals (default 5 when only ``diversity`` is given).
            diversity: ``"nogood"`` (default for sets), ``"distance"``, ``"epsilon"`` or
                ``"pool"``, see :func:`cfopt.query.diverse.explain_diverse`.
            **options: ``time_limit``, ``mip_gap`` (this query only), ``max_changes``
                (if the explainer was built with a cap); for sets also
                ``min_distance``, ``epsilon``, ``hamming``, ``pool_mode``, ``pool_gap``.

        Raises:
            ValueError: bad input (columns, NaN, categories, bounds, target);
                :class:`~cfopt.errors.AlreadyTargetError` (a ``ValueError``) when the factual
                already meets the target.
            InfeasibleError: no counterfactual exists; the message names the
                conflicting constraint groups.
        """
        if n is not None or diversity is not None:
            from .query.diverse import explain_diverse

            if self._cpsat:
                raise ValueError("diverse sets (n=, diversity=) are not supported with "
                                 "solver='cpsat'; use solver='highs'")
            return explain_diverse(self, x, target, n=5 if n is None else n,
                                   method=diversity or "nogood", **options)
        unknown = sorted(set(options) - set(_QUERY_OPTIONS))
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for explain(); accepted: "
                            f"{list(_QUERY_OPTIONS)} (and n, diversity)")
        t0 = time.perf_counter()
        settings = self.start_query(x, target, options)
        return self.answer(settings, t0)

    def start_query(self, x: pd.DataFrame | pd.Series | Mapping, target: Any,
                    options: Mapping[str, Any]) -> SolverSettings:
        """Set the factual, the target and this query's options on the model; returns
        the query's solver settings."""
        settings = dataclasses.replace(
            self.settings, **{k: v for k, v in options.items() if k in ("time_limit", "mip_gap")})
        m = self.milp
        m.set_factual(x)
        m.set_target(target)
        if "max_changes" in options or m.capped:
            m.set_max_changes(options.get("max_changes", self._max_changes))
        return settings

    def answer(self, settings: SolverSettings, t0: float, *,
               diagnose_infeasible: bool = True) -> Counterfactual:
        """Solve the model as it stands (factual and target set), verify and decode.

        ``t0`` is when the query started (for the total time, and the start of
        ``settings.time_limit``, which every solve of the query shares). An infeasible model
        raises :class:`InfeasibleError` with the diagnosis, or, with
        ``diagnose_infeasible=False``, returns a result with status ``INFEASIBLE``.

        The claim (:func:`claim`) rests on the first solve, which is of the declared
        problem: its bound is the reported bound, a re-solve with a larger margin (a
        different problem) only supplies a point.
        """
        m = self.milp
        factual, target_labels = m.factual, m.target
        build_time = time.perf_counter() - t0
        one_off = 0.0
        if self._build_pending:
            one_off = m.build_time
            self._build_pending = False

        outcomes: list[SolveOutcome] = []
        details: dict[str, Any] = {}
        point: Verification | None = None
        heuristic: list[Verification] = []  # the first restriction's verified candidate
        margin_used = pyo.value(m.margin)
        try:
            for _ in range(self.verify_retries + 1):
                budget = time_left(settings, t0)
                if budget is None:  # the query's time is up: no (further) solve
                    if not outcomes:
                        outcomes.append(SolveOutcome(Status.NO_SOLUTION, None, None, None, 0.0,
                                                     "maxTimeLimit"))
                    break
                margin_used = pyo.value(m.margin)
                if self._cpsat:
                    outcome, row = self._solve_cpsat(m, settings, t0, details, heuristic)
                else:
                    outcome, row = self._solve(m, settings, t0, details, heuristic), None
                outcomes.append(outcome)
                if not outcome.status.has_solution:
                    break
                point = verified_solution(m) if row is None else verify_row(m, row)
                if point.verified:
                    break
                m.margin = margin_used * 10
        finally:
            m.margin = self.margin
        verdict = claim(outcomes, point, m, settings.mip_gap, margin_used,
                        heuristic[0] if heuristic else None)
        if verdict.status is Status.INFEASIBLE and diagnose_infeasible:
            if per_query(m) and not self._cpsat:  # a diagnosis relaxes actionability
                build_box_region(m)
                self.backend.reset()
            diagnosis = diagnose(m, self.backend, settings)
            raise InfeasibleError(diagnosis.message(m.describe_target()),
                                  groups=diagnosis.groups, details=diagnosis.members)
        solver_times = [o.solver_time for o in outcomes if o.solver_time is not None]
        if outcomes[-1].objective is not None:
            details["solver_objective"] = outcomes[-1].objective
        row = verdict.row
        return Counterfactual(
            factual=factual, counterfactual=row, target=target_labels,
            factual_class=m.factual_class,
            predicted_class=verdict.predicted,
            status=verdict.status, verified=row is not None, objective=verdict.objective,
            bound=verdict.bound, distances=m.distances(row) if row is not None else {},
            build_time=build_time + one_off, solve_time=sum(o.wall_time for o in outcomes),
            solver_time=sum(solver_times) if solver_times else None,
            total_time=time.perf_counter() - t0 + one_off, solver=self.backend.name,
            margin=margin_used, attempts=len(outcomes), message=verdict.message,
            details=details, space=m.space)

    def _solve(self, m: CounterfactualModel, settings: SolverSettings, t0: float,
               details: dict[str, Any], heuristic: list[Verification]) -> SolveOutcome:
        """One solve within the time left of the query started at ``t0``, restricted
        around a heuristic counterfactual of objective ``r`` when possible
        (:mod:`cfopt.query.restrictions`; trees built per query from the inside out,
        :mod:`cfopt.query.inner_radius`) and started from it; the verified heuristic point
        is kept in ``heuristic`` (the answer when no solve finds one in time). The
        restriction keeps every point of objective at most ``r``, so it is exact when the
        optimum is: the full problem is solved instead when the restricted one is
        infeasible or its best point lies beyond ``r`` (the heuristic point broke a
        constraint raw rows cannot show, e.g. a raw Pyomo one). Out of time for that, the
        restricted point is kept with the bound ``min(bound, r)``, valid for the full
        problem."""
        limit = settings.time_limit
        deadline = math.inf if limit is None else t0 + limit
        no_time = SolveOutcome(Status.NO_SOLUTION, None, None, None, 0.0, "maxTimeLimit")
        first, floor, radius = None, None, math.inf  # the inside-out stage's bound
        try:
            found = (self._restriction(m, details, heuristic, deadline)
                     if self.tighten_per_query else None)
            budget = self._load_budget(m, settings, t0, details)
            if found is None or budget is None:
                return no_time if budget is None else self.backend.solve(m, budget)
            restriction, radius = found
            if per_query(m) and heuristic and math.isfinite(radius):  # from the inside out
                stage = inner_stage(m, self.backend, budget, radius, heuristic, details,
                                    deadline)
                if stage.final:
                    return stage.outcome
                first, floor, radius = stage.outcome, stage.floor, stage.radius
                details["region_leaves"] = build_query_region(m, radius, deadline)
                self.backend.reset()
                budget = self._load_budget(m, settings, t0, details)
        except RegionTooLarge:  # the query's trees took the time left to build
            return with_floor(after(first, no_time), floor, radius)
        if budget is None:
            return with_floor(no_time, floor, radius)
        start = start_of(m, heuristic[0].row) if heuristic else None  # within the radius
        with restriction:
            outcome = after(first, self.backend.solve(m, budget, start))
        details["restricted"] = True
        beyond = outcome.objective is not None and outcome.objective > radius * (
            1 + 1e-6) + 1e-9
        if math.isinf(radius) or (outcome.status is not Status.INFEASIBLE and not beyond):
            return with_floor(outcome, floor, radius)
        details["fallback"] = True
        try:
            if per_query(m):  # the whole declared problem's trees
                details["region_leaves"] = build_query_region(m, math.inf, deadline)
                self.backend.reset()
            budget = self._budget(m, settings, t0)
        except RegionTooLarge:
            budget = None
        if budget is None:
            bound = radius if outcome.bound is None else min(outcome.bound, radius)
            return with_floor(dataclasses.replace(
                outcome, status=Status.FEASIBLE if beyond else Status.NO_SOLUTION,
                bound=bound if beyond else outcome.bound), floor, radius)
        return with_floor(after(outcome, self.backend.solve(m, budget, start)), floor,
                          math.inf)

    def _load_budget(self, m: CounterfactualModel, settings: SolverSettings, t0: float,
                     details: dict[str, Any]) -> SolverSettings | None:
        """:meth:`_budget` less the time to load this query's trees (``None``: no time)."""
        budget = self._budget(m, settings, t0)
        load = details.get("region_leaves", 0) * BUILD_SECONDS_PER_LEAF
        if budget is None or budget.time_limit is None or not load:
            return budget
        return (None if budget.time_limit <= 2 * load else
                dataclasses.replace(budget, time_limit=budget.time_limit - load))

    def _solve_cpsat(self, m: CounterfactualModel, settings: SolverSettings, t0: float,
                     details: dict[str, Any], heuristic: list[Verification]
                     ) -> tuple[SolveOutcome, pd.DataFrame | None]:
        """One CP-SAT solve within the time left of the query started at ``t0`` (its model
        built on the leaves within the radius of a verified heuristic point, which starts
        the search: exact, see :meth:`CpSatBackend.solve_query`); the decoded point."""
        budget = time_left(settings, t0)
        restriction = restriction_of(m)  # the trees' (CP-SAT takes tree ensembles only)
        found = self._heuristic(m, details, heuristic, restriction) \
            if budget is not None and self.tighten_per_query and restriction is not None \
            else None
        budget = time_left(settings, t0)
        if budget is None:
            return SolveOutcome(Status.NO_SOLUTION, None, None, None, 0.0, "maxTimeLimit"), None
        candidate, radius = found if found is not None else (None, math.inf)
        return self.backend.solve_query(m, budget, radius, candidate)

    def _heuristic(self, m: CounterfactualModel, details: dict[str, Any],
                   heuristic: list[Verification], restriction: Restriction
                   ) -> tuple[pd.DataFrame | None, float]:
        """A heuristic counterfactual of the query meeting the declared constraints and
        its objective ``r`` (``inf`` without one); the first such point the real model
        verifies joins ``heuristic``."""
        candidate = _admissible(m, restriction.heuristic(m))
        radius = math.inf if candidate is None else objective_value(m, candidate)
        if candidate is not None:
            details["heuristic_objective"] = radius
            checked = verify_row(m, candidate)
            # a point of the declared problem: verification sees every constraint, and
            # it is within the objective cutoff (diverse sets' ε window)
            if checked.verified and not heuristic and not unchecked_components(m) and \
                    radius <= pyo.value(m.cutoff):
                heuristic.append(checked)
        return candidate, radius

    def _budget(self, m: CounterfactualModel, settings: SolverSettings, t0: float
                ) -> SolverSettings | None:
        """The settings of a solve with the time left of the query started at ``t0``, or
        ``None`` when less time is left than the backend spends outside the solver on
        this model (a solve started then would overrun the limit)."""
        budget = time_left(settings, t0)
        if budget is not None and budget.time_limit is not None and \
                budget.time_limit <= self.backend.overhead(m):
            return None
        return budget

    def _restriction(self, m: CounterfactualModel, details: dict[str, Any],
                     heuristic: list[Verification], deadline: float = math.inf
                     ) -> tuple[AbstractContextManager[None], float] | None:
        """The per-query restriction of this query (:mod:`cfopt.query.restrictions`, by
        the predictor's kind) and the objective ``r`` of the heuristic point it is built
        around (infinite: actionability only, exact), or ``None``; the first heuristic
        point the real model verifies joins ``heuristic``. Trees built per query are
        built here, within ``r`` (by ``deadline``), unless a verified heuristic point
        lets :meth:`_solve` build them from the inside out."""
        restriction = restriction_of(m)
        if restriction is None or not restriction.applies(m):
            return None
        candidate, radius = self._heuristic(m, details, heuristic, restriction)
        restricted = restriction.restrict(m, candidate, radius, details, deadline,
                                          verified=bool(heuristic))
        if restricted is None:
            return None
        if restricted.rebuilt:
            self.backend.reset()  # loading the new trees beats removing the old ones
        return restricted.context, radius

    def explain_many(self, X: pd.DataFrame, target: Any = None, *,
                     errors: Literal["raise", "record"] = "record", n_jobs: int | None = None,
                     backend: str | None = None, solver_threads: int | None = None,
                     client: Any = None, progress: bool | None = None,
                     out: str | os.PathLike | None = None, **options: Any) -> BatchResult:
        """Explain every row of ``X``: serially on this explainer's model (built once), or
        in parallel (:mod:`cfopt.batch.runner`).

        Args:
            X: the raw rows.
            target: as :meth:`explain`, for every row (``"opposite"``: the other class
                of each row); a row already in its target gets the status
                ``ALREADY_TARGET``.
            errors: ``"record"`` (default): a row that fails (infeasible, a bad value, a
                solver failure) gets its status (``INFEASIBLE`` with the diagnosis, else
                ``ERROR``) and a message naming its index label, and the batch goes on;
                ``"raise"``: the first failing row raises, its label noted.
            n_jobs: parallel workers (``-1``: every core, or every Dask worker thread);
                ``None`` (default) or 1 with no ``backend`` runs serially in this
                process; ``None`` with a backend means -1.
            backend: ``None`` (serial unless ``n_jobs`` > 1 or -1, then ``"loky"``), ``"loky"``
                (joblib processes on this machine) or ``"dask"`` (joblib's Dask backend
                on the current ``dask.distributed`` client, or ``client``). Each worker
                builds the model once from this explainer's arguments and declared
                constraints, then re-solves it per row.
            solver_threads: solver threads per worker (default: 1 in parallel, so that
                workers × threads stays within the cores; the explainer's ``threads``
                serially).
            client: a ``dask.distributed.Client`` for ``backend="dask"``.
            progress: show a tqdm bar of rows done, found, failed and left, with the
                rate and an ETA (``None``: ``CFOPT_PROGRESS`` if set, else only when
                stderr is a terminal or in a notebook).
            out: a JSON Lines file: every answer is appended to it as it arrives, and
                a run with the same ``out`` (same explainer, target and options) reads
                the answered rows back and solves only the others — answers with
                status ``error`` are solved again (:mod:`cfopt.batch.journal`).
            **options: ``time_limit``, ``mip_gap``, ``max_changes`` per query.

        Returns:
            a :class:`~cfopt.batch.runner.BatchResult` (a sequence of
            :class:`~cfopt.Counterfactual`, in the order of ``X``; ``to_frame()`` keeps
            ``X``'s index). Ctrl-C stops the
            batch and returns the finished answers, the others with status
            ``INTERRUPTED``. A dead worker process is replaced and its unanswered
            rows are sent again.
        """
        return explain_batch(self, X, target, errors=errors, n_jobs=n_jobs, backend=backend,
                             solver_threads=solver_threads, client=client, progress=progress,
                             out=out, **options)


def _admissible(m: CounterfactualModel, candidate: pd.DataFrame | None
                ) -> pd.DataFrame | None:
    """The heuristic candidate if it meets the declared constraints (else its objective
    would not bound the constrained optimum)."""
    if candidate is None or m.violations(candidate):
        return None
    return candidate
