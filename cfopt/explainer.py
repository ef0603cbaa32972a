"""The high-level API: ``Explainer(model, space).explain(x)``.

An :class:`Explainer` checks its options, builds the counterfactual MILP once for its
(model, feature space, options) and hands each query to its engine,
:class:`~cfopt.query.runner.QueryRunner`, which changes mutable parameters (the factual,
the target) and re-solves, with a persistent solver where one exists. Every returned
counterfactual is decoded to raw units and re-checked with the real model
and against the declared validity margin (:mod:`cfopt.query.solution`); if no decoded
point passes, the query is re-solved with a larger validity margin
(:func:`~cfopt.query.runner.retry_margin`; at most ``verify_retries`` times), else it is
reported as
``VERIFICATION_FAILED`` without a point. What the answer claims is decided in one
place, :mod:`cfopt.query.claims`: a re-solve with a larger margin is a different problem,
so its point is reported ``OPTIMAL`` only within the gap of the first solve's bound.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from .batch.runner import BatchResult, explain_batch
from .constraints.blocks import ConstraintBlock
from .problem import CounterfactualModel
from .query.runner import QUERY_OPTIONS, QueryRunner
from .results.counterfactual import Counterfactual, CounterfactualSet
from .results.display import card, model_size
from .solvers import SolverBackend, SolverSettings, make_solver
from .solvers.options import check_options
from .space.space import FeatureSpace

if TYPE_CHECKING:
    from .groups import GroupCounterfactuals


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
        verify_retries: re-solves with a larger margin when verification fails (their
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
        runner: the query engine (:class:`~cfopt.query.runner.QueryRunner`), which
            holds the model, the solver, ``settings``, ``margin``, ``verify_retries`` and
            ``tighten_per_query`` (the explainer's attributes of those names are its).
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
        settings = SolverSettings(time_limit=time_limit, mip_gap=mip_gap, threads=threads,
                                  seed=seed, options=dict(solver_options or {}),
                                  verbose=verbose)
        if isinstance(verify_retries, bool) or not isinstance(verify_retries, int) or \
                verify_retries < 0:
            raise ValueError(f"verify_retries must be a non-negative integer, "
                             f"got {verify_retries!r}")
        backend = make_solver(solver)
        check_options(backend.name, settings.options)
        if features_to_vary is not None:
            if isinstance(features_to_vary, str):
                raise TypeError(f"features_to_vary must be a list of feature names, got the "
                                f"string {features_to_vary!r}")
            space = copy.deepcopy(space).vary_only(*features_to_vary)
        milp = CounterfactualModel(model, space, objective=objective, weights=weights,
                                   max_changes=max_changes, margin=margin,
                                   bound_tightening=bound_tightening, constraints=constraints,
                                   tree_formulation=tree_formulation)
        #: the query engine (:mod:`cfopt.query.runner`)
        self.runner = QueryRunner(milp, backend, settings, margin=margin,
                                  max_changes=max_changes, verify_retries=verify_retries,
                                  tighten_per_query=bool(tighten_per_query))
        self._build_arguments = {"model": model, "space": space, "objective": objective,
                                 "weights": weights, "max_changes": max_changes,
                                 "margin": margin, "bound_tightening": bound_tightening,
                                 "tree_formulation": tree_formulation}

    @property
    def milp(self) -> CounterfactualModel:
        return self.runner.milp

    @property
    def space(self) -> FeatureSpace:
        return self.milp.space

    @property
    def backend(self) -> SolverBackend:
        return self.runner.backend

    @property
    def margin(self) -> float:
        return self.runner.margin

    @property
    def settings(self) -> SolverSettings:
        """The solver settings of every query."""
        return self.runner.settings

    @settings.setter
    def settings(self, settings: SolverSettings) -> None:
        self.runner.settings = settings

    @property
    def verify_retries(self) -> int:
        return self.runner.verify_retries

    @verify_retries.setter
    def verify_retries(self, retries: int) -> None:
        self.runner.verify_retries = retries

    @property
    def tighten_per_query(self) -> bool:
        return self.runner.tighten_per_query

    @tighten_per_query.setter
    def tighten_per_query(self, tighten: bool) -> None:
        self.runner.tighten_per_query = tighten

    @property
    def build_arguments(self) -> dict[str, Any]:
        """The arguments the MILP was built from: ``model``, ``space`` (with
        ``features_to_vary`` applied), ``objective``, ``weights``, ``max_changes``,
        ``margin``, ``bound_tightening``, ``tree_formulation``.
        ``Explainer(**e.build_arguments, solver=..., constraints=...)`` builds the same
        MILP: parallel batch workers do (:mod:`cfopt.batch.runner`), and a batch journal
        records them (:mod:`cfopt.batch.journal`). A new dict each time."""
        return dict(self._build_arguments)

    def _repr_html_(self) -> str:
        """A card for notebooks: the model, the MILP's size, the solver and its
        settings, the objective, the declared constraints and the feature space."""
        milp = self.milp
        objective = " + ".join(f"{c:g}·{norm}" for norm, c in milp.objective_terms.items())
        fields = {"model": milp.adapter.kind, "model inputs": milp.adapter.n_inputs,
                  **model_size(milp), "solver": self.backend.name,
                  "time limit (s)": self.settings.time_limit,
                  "mip gap": self.settings.mip_gap, "margin": self.margin,
                  "objective": objective,
                  "declared constraints": ", ".join(milp.constraints) or None}
        return card("Explainer", None, None, fields, [("feature space", self.space.summary())])

    def __repr__(self) -> str:
        return (f"Explainer({self.milp.adapter.kind}, {len(self.space)} features, "
                f"solver={self.backend.name!r}, margin={self.margin:g})")

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
                (if the explainer was built with a cap); DiCE's ``features_to_vary``
                (a list: the others keep the factual's value) and ``permitted_range``
                (feature → ``(low, high)`` in raw units, ``None`` an open side, or a
                list of levels), for this query only, as bounds on the built model
                (:mod:`cfopt.constraints.query_range`); for sets also
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

            if self.runner.cpsat:
                raise ValueError("diverse sets (n=, diversity=) are not supported with "
                                 "solver='cpsat'; use solver='highs'")
            return explain_diverse(self.runner, x, target, n=5 if n is None else n,
                                   method=diversity or "nogood", **options)
        unknown = sorted(set(options) - set(QUERY_OPTIONS))
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for explain(); accepted: "
                            f"{list(QUERY_OPTIONS)} (and n, diversity)")
        t0 = time.perf_counter()
        settings = self.runner.start(x, target, options)
        return self.runner.answer(settings, t0)

    def explain_group(self, X: pd.DataFrame, target: Any = None, *, max_changes: int = 2,
                      objective: str = "count", n_actions: int | None = None,
                      max_cost: float | None = None, method: str = "column_generation",
                      time_limit: float | None = None, row_time_limit: float | None = 30.0,
                      max_iterations: int = 500) -> GroupCounterfactuals:
        """Actions for a whole group (one-for-many counterfactuals): the fewest change
        vectors such that each row of ``X`` is moved to the target by one of them, or the
        most rows moved by at most ``n_actions`` (:mod:`cfopt.groups`).

        Args:
            X: the group's raw rows.
            target: a class label or labels, or ``None`` / ``"opposite"`` (the other class
                of the group, whose rows must then share one class).
            max_changes: the most features one action changes (a shift per numeric
                feature, a new level per categorical; actionability holds for every row).
            objective: ``"count"`` (fewest actions covering every row any action can
                move), ``"coverage"`` (most rows with at most ``n_actions``) or
                ``"cost"`` (the most rows ``n_actions`` can move, at the least total cost,
                each row paying its cheapest chosen action).
            n_actions: the budget of ``"coverage"`` and ``"cost"`` (for
                ``method="direct_milp"``: its action slots).
            max_cost: the most an action may cost a row it moves (the explainer's
                weighted L1); ``None``: no cap.
            method: ``"column_generation"`` (exact: a proof of optimality or a bound),
                ``"greedy"`` (no bound) or ``"direct_milp"`` (the compact MILP).
            time_limit: seconds for the whole query (``None``: none).
            row_time_limit: seconds for each row's own counterfactual (the first columns).
            max_iterations: the most pricing rounds.

        Returns:
            a :class:`~cfopt.groups.GroupCounterfactuals` (status, actions, per-row
            assignment and costs, the bound, ``to_json``). Every action is verified on
            every row it is given to with the real model's ``predict``, and with the
            explainer's declared blocks and the constraints added to its model by hand,
            the row as the factual (:mod:`cfopt.groups.declared`, which names what a
            group cannot hold, before any solve).
        """
        from .groups import explain_group

        return explain_group(self, X, target, max_changes=max_changes, objective=objective,
                             n_actions=n_actions, max_cost=max_cost, method=method,
                             time_limit=time_limit, row_time_limit=row_time_limit,
                             max_iterations=max_iterations)

    def explain_many(self, X: pd.DataFrame, target: Any = None, *,
                     n: int | None = None, diversity: str | None = None,
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
            n, diversity: as :meth:`explain`: a :class:`~cfopt.CounterfactualSet` of up
                to ``n`` per row (DiCE's ``total_CFs``; the set options too), checked
                before any solve.
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
            **options: ``time_limit``, ``mip_gap``, ``max_changes``,
                ``features_to_vary``, ``permitted_range`` (as :meth:`explain`), for
                every row.

        Returns:
            a :class:`~cfopt.batch.runner.BatchResult` (a sequence of
            :class:`~cfopt.Counterfactual`, or of sets with ``n``, in the order of
            ``X``; ``to_frame()`` keeps ``X``'s index). Ctrl-C stops the
            batch and returns the finished answers, the others with status
            ``INTERRUPTED``. A dead worker process is replaced and its unanswered
            rows are sent again.
        """
        return explain_batch(self, X, target, n=n, diversity=diversity, errors=errors,
                             n_jobs=n_jobs, backend=backend, solver_threads=solver_threads,
                             client=client, progress=progress, out=out, **options)
