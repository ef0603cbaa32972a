"""The query engine behind :class:`cfopt.Explainer`: one query of a counterfactual MILP,
from its start to its answer.

:meth:`QueryRunner.start` sets the factual, the target and the query's options on the
model; :meth:`QueryRunner.answer` solves it within the query's time (restricted around a
heuristic counterfactual where the predictor's kind allows, :mod:`.restrictions`; trees
built per query from the inside out, :mod:`.inner_radius`), re-checks every decoded
point with the real model and against the declared validity margin (:mod:`.solution`)
and re-solves with a larger margin when none passes (:func:`retry_margin`; at most
``verify_retries`` times), then states what the answer
claims in one place, :mod:`.claims` (a re-solve with a larger margin is a different
problem, so its point is ``OPTIMAL`` only within the gap of the first solve's bound),
and diagnoses an infeasible query (:mod:`.diagnosis`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from typing import Any

import pandas as pd
import pyomo.environ as pyo

from ..constraints.query_range import OPTIONS as NARROWING
from ..constraints.query_range import QueryRange, QueryRequest, query_request
from ..errors import InfeasibleError
from ..formulations.predictors import TreePredictorConstr
from ..formulations.tree_regions import BUILD_SECONDS_PER_LEAF, RegionTooLarge
from ..problem import CounterfactualModel
from ..results.counterfactual import Counterfactual
from ..results.status import Status
from ..solvers import SolveOutcome, SolverBackend, SolverSettings
from ..solvers.base import time_left
from ..solvers.cpsat import CpSatBackend, check_supported
from .claims import claim
from .diagnosis import diagnose
from .inner_radius import after, inner_stage, with_floor
from .ladder import NO_TIME, ascend, can_climb, climb, too_large, too_large_to_load
from .restrictions import Restriction, restriction_of
from .restrictions.relu import distance_value, objective_value
from .restrictions.trees import build_box_region, build_query_region, per_query
from .solution import Verification, start_of, verified_solution, verify_row

#: the options of one query (``explain``, ``explain_many``, a diverse set's solves)
QUERY_OPTIONS = ("time_limit", "mip_gap", "max_changes", *NARROWING)


def retry_margin(point: Verification, margin: float) -> float:
    """The margin of the re-solve after ``point``, solved with ``margin``, failed
    verification: raised by twice the point's shortfall when it is of the target class
    and meets every declared constraint but falls short of the declared margin (the
    solver's tolerances left it short: the nearest repair), else 10x (a point of another
    class, or breaking a constraint: the tolerances misled the solver further)."""
    if point.short_of is not None and not point.problems:
        return margin + 2.0 * (point.short_of - point.score)
    return margin * 10


class QueryRunner:
    """Answers the queries of one counterfactual MILP.

    Args:
        milp: the :class:`~cfopt.CounterfactualModel`.
        backend: the solver.
        settings: the solver settings of every query (a query's options override
            ``time_limit`` and ``mip_gap``).
        margin: the validity margin the model was built with (restored after
            re-solves with a larger one).
        max_changes: the cap the model was built with (a query may change it).
        verify_retries: re-solves with a larger margin when verification fails
            (:func:`retry_margin`).
        tighten_per_query: restrict each solve around a heuristic counterfactual.

    The arguments are kept as attributes of the same names; ``cpsat``: the backend is
    CP-SAT, which builds its own model of each query (:mod:`cfopt.solvers.cpsat`). The
    first answer's ``build_time`` and ``total_time`` include the model's build
    (:meth:`exclude_build_time` leaves it out).
    """

    def __init__(self, milp: CounterfactualModel, backend: SolverBackend,
                 settings: SolverSettings, *, margin: float, max_changes: int | None,
                 verify_retries: int, tighten_per_query: bool) -> None:
        self.milp, self.backend, self.settings = milp, backend, settings
        self.margin = margin
        self.verify_retries = verify_retries
        self.tighten_per_query = tighten_per_query
        self.cpsat = isinstance(backend, CpSatBackend)
        if self.cpsat:
            check_supported(milp)
        if per_query(milp) and (tighten_per_query or self.cpsat):
            milp.predictor_constr.deferred = True  # each query builds its trees
        self._max_changes = max_changes
        self._build_pending = True

    def exclude_build_time(self) -> None:
        """Charge no answer with the model's build
        (:attr:`~cfopt.CounterfactualModel.build_time`), for a caller that reports it
        apart (a benchmark's build column); by default the first answer includes it."""
        self._build_pending = False  # pragma: no mutate (None is as false)

    def start(self, x: pd.DataFrame | pd.Series | Mapping, target: Any,
              options: Mapping[str, Any]) -> SolverSettings:
        """Set the factual, the target and this query's options on the model; returns
        the query's solver settings. ``features_to_vary`` and ``permitted_range`` narrow
        this query alone (:mod:`cfopt.constraints.query_range`); they are checked before
        anything changes."""
        request = self.narrowing(options)
        settings = dataclasses.replace(
            self.settings, **{k: v for k, v in options.items() if k in ("time_limit", "mip_gap")})
        if isinstance(self.milp.predictor_constr, TreePredictorConstr):  # the user's win
            settings = dataclasses.replace(settings, options={
                **self.backend.tree_options(), **settings.options})
        m = self.milp
        m.set_factual(x)
        box = m.constraints.get(QueryRange.kind)
        if box is None and request.narrows:
            box = QueryRange()
            m.add_constraint(box)
        if isinstance(box, QueryRange):
            box.request = request
        m.set_target(target)
        if "max_changes" in options or m.capped:
            m.set_max_changes(options.get("max_changes", self._max_changes))
        return settings

    def narrowing(self, options: Mapping[str, Any]) -> QueryRequest:
        """The query's ``features_to_vary`` / ``permitted_range``, validated
        (:func:`~cfopt.constraints.query_range.query_request`); ``ValueError`` when
        this runner cannot apply them (CP-SAT, or a declared block of another type
        named ``query_range``)."""
        m = self.milp
        request = query_request(m.space, options.get("features_to_vary"),
                                options.get("permitted_range"))
        if not request.narrows:
            return request
        if self.cpsat:
            # pragma: no mutate start (message text)
            raise ValueError("solver='cpsat' does not take features_to_vary or "
                             "permitted_range per query; use solver='highs', or "
                             "Explainer(..., features_to_vary=...) for every query")
            # pragma: no mutate end
        box = m.constraints.get(QueryRange.kind)
        if box is not None and not isinstance(box, QueryRange):
            raise ValueError(f"the model has a declared block named {QueryRange.kind!r} "
                             f"of type {type(box).__name__}; rename it to use "
                             f"features_to_vary or permitted_range per query")
        return request

    def answer(self, settings: SolverSettings, t0: float, *,
               diagnose_infeasible: bool = True, floor: float | None = None
               ) -> Counterfactual:
        """Solve the model as it stands (factual and target set), verify and decode.

        ``floor``: a proven lower bound on the optimum (a cutting-set loop's previous
        master); the solve then climbs a ladder of radii from it (:mod:`.ladder`) when
        ``tighten_per_query`` is on and the predictor allows.

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
            self._build_pending = False  # pragma: no mutate (None is as false)

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
                        self._heuristic_only(m, details, heuristic)
                        outcomes.append(NO_TIME)
                    break
                margin_used = pyo.value(m.margin)
                if self.cpsat:
                    outcome, row = self._solve_cpsat(m, settings, t0, details, heuristic)
                else:
                    outcome, row = self._solve(m, settings, t0, details, heuristic,
                                               floor), None
                outcomes.append(outcome)
                if not outcome.status.has_solution:
                    break
                point = (verified_solution(m, m.declared_margin) if row is None
                         else verify_row(m, row, margin=m.declared_margin))
                if point.verified:
                    break
                m.margin = retry_margin(point, margin_used)
        finally:
            m.margin = self.margin
        verdict = claim(outcomes, point, m, settings.mip_gap, margin_used,
                        heuristic[0] if heuristic else None)
        if verdict.status is Status.INFEASIBLE and diagnose_infeasible:
            if per_query(m) and not self.cpsat:  # a diagnosis relaxes actionability
                build_box_region(m)
                self.backend.reset()
            diagnosis = diagnose(m, self.backend, settings)
            raise InfeasibleError(diagnosis.message(m.describe_target()),
                                  groups=diagnosis.groups, details=diagnosis.members)
        solver_times = [o.solver_time for o in outcomes if o.solver_time is not None]
        if outcomes[-1].objective is not None:
            details["solver_objective"] = outcomes[-1].objective
        if verdict.reason is not None:
            details["reason"] = verdict.reason
        if m.raw.names:
            details["raw_constraints"] = m.raw.names
        if m.raw.term is not None:
            details["raw_objective_term"] = str(m.raw.term)
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
               details: dict[str, Any], heuristic: list[Verification],
               lower: float | None = None) -> SolveOutcome:
        """One solve within the time left of the query started at ``t0``, by the first
        stage that applies (each exact, :mod:`cfopt.query.claims` states what it proves):

        1. with a proven lower bound ``lower``, up the ladder of radii from it
           (:func:`.ladder.climb`) where the predictor allows;
        2. around the query's verified heuristic point of objective ``r`` (kept in
           ``heuristic``, the answer when no solve finds a better one in time): the
           problem restricted to the points of objective at most ``r``
           (:mod:`cfopt.query.restrictions`; per-query trees from the inside out,
           :mod:`cfopt.query.inner_radius`), started from it (:meth:`_around`);
        3. from a heuristic point the declared problem does not admit (it breaks a
           declared block or a constraint of the user's own, or the real model does not
           verify it), up a ladder of radii from its objective (:func:`.ladder.ascend`);
        4. else the declared problem whole (:meth:`_whole`)."""
        if self.tighten_per_query and can_climb(m, lower):
            assert lower is not None
            return climb(m, self.backend, lambda: self._budget(m, settings, t0), lower,
                         details)
        limit = settings.time_limit
        deadline = math.inf if limit is None else t0 + limit
        restriction = restriction_of(m) if self.tighten_per_query else None
        if restriction is None or not restriction.applies(m):
            return self._whole(m, settings, t0, details, deadline)
        candidate, guess = self._heuristic(m, details, heuristic, restriction)
        if heuristic:
            return self._around(m, settings, t0, details, heuristic, restriction, deadline)
        if candidate is None:
            details["heuristic"] = "none found"
            return self._whole(m, settings, t0, details, deadline, restriction)
        details["restricted"] = True
        return ascend(m, self.backend, lambda: self._load_budget(m, settings, t0, details),
                      restriction, candidate, guess, details, deadline, heuristic,
                      lambda: self._no_budget(settings, t0, details))

    def _whole(self, m: CounterfactualModel, settings: SolverSettings, t0: float,
               details: dict[str, Any], deadline: float,
               restriction: Restriction | None = None) -> SolveOutcome:
        """The declared problem whole (per-query trees: built on every leaf the query's
        actionability admits, by ``deadline``)."""
        budget, stop = self._whole_budget(m, settings, t0, details, deadline, restriction)
        return stop if budget is None else self.backend.solve(m, budget)

    def _whole_budget(self, m: CounterfactualModel, settings: SolverSettings, t0: float,
                      details: dict[str, Any], deadline: float,
                      restriction: Restriction | None
                      ) -> tuple[SolverSettings | None, SolveOutcome]:
        """Make ``m`` the declared problem whole (:meth:`Restriction.whole`); the settings
        of its solve, or ``None`` with why it cannot be solved (no time left, its trees
        too large to build in it)."""
        try:
            if restriction is not None and restriction.whole(m, details, deadline):
                self.backend.reset()
        except RegionTooLarge:
            return None, too_large(math.inf)
        budget = self._load_budget(m, settings, t0, details)
        if budget is None:
            return None, self._no_budget(settings, t0, details)
        return budget, NO_TIME

    def _around(self, m: CounterfactualModel, settings: SolverSettings, t0: float,
                details: dict[str, Any], heuristic: list[Verification],
                restriction: Restriction, deadline: float) -> SolveOutcome:
        """Stage 2 of :meth:`_solve`: the restriction to the points of objective at most
        the verified heuristic point's ``r`` keeps every point of the declared problem
        that is at least as good, so it is exact; its best point beyond ``r``, or none,
        is only numerics (a point the MILP's margin or tolerances exclude): the whole
        problem is solved then. Without the time for that, the restricted point is kept
        with the bound ``min(bound, r)``, valid for the declared problem."""
        radius = objective_value(m, heuristic[0].row)
        first, floor = None, None  # the inside-out stage's outcome and bound
        try:
            restricted = restriction.restrict(m, heuristic[0].row, radius, details, deadline,
                                              verified=True)
            if restricted is None:
                return self._whole(m, settings, t0, details, deadline, restriction)
            budget = self._load_budget(m, settings, t0, details)
            if budget is None:
                return self._no_budget(settings, t0, details)
            if per_query(m):  # from the inside out
                stage = inner_stage(m, self.backend, budget, radius, heuristic, details,
                                    deadline)
                if stage.final:
                    return stage.outcome
                first, floor, radius = stage.outcome, stage.floor, stage.radius
                details["region_leaves"] = build_query_region(m, radius, deadline)
                self.backend.reset()
            elif restricted.rebuilt:
                self.backend.reset()
        except RegionTooLarge:  # the query's trees took the time left to build
            return with_floor(after(first, too_large(radius)), floor,
                              radius)  # pragma: no mutate (too_large has no bound to cap)
        budget = self._load_budget(m, settings, t0, details)
        if budget is None:
            return with_floor(after(first, self._no_budget(settings, t0, details)), floor,
                              radius)  # pragma: no mutate (no budget: no bound to cap)
        start = start_of(m, heuristic[0].row)
        with restricted.context:
            outcome = after(first, self.backend.solve(m, budget, start))
        details["restricted"] = True
        beyond = outcome.objective is not None and outcome.objective > radius * (
            1 + 1e-6) + 1e-9
        if outcome.status is not Status.INFEASIBLE and not beyond:
            return with_floor(outcome, floor, radius)
        details["fallback"] = True
        budget, stop = self._whole_budget(m, settings, t0, details, deadline, restriction)
        if budget is None:
            bound = radius if outcome.bound is None else min(outcome.bound, radius)
            return with_floor(dataclasses.replace(
                outcome, status=Status.FEASIBLE if beyond else Status.NO_SOLUTION,
                bound=bound if beyond else outcome.bound, termination=stop.termination,
                message=stop.message), floor, radius)
        return with_floor(after(outcome, self.backend.solve(m, budget, start)), floor,
                          math.inf)

    def _load_budget(self, m: CounterfactualModel, settings: SolverSettings, t0: float,
                     details: dict[str, Any]) -> SolverSettings | None:
        """:meth:`_budget` less the time to load this query's trees, unless the backend
        counts the loading in its limit (:meth:`SolverBackend.limit_counts_loading`: a
        reserve would count it twice and leave that time unused); ``None``: no time, or
        less than twice the loading (:meth:`_no_budget` says which)."""
        budget = self._budget(m, settings, t0)
        leaves = details.get("region_leaves", 0)
        load = leaves * BUILD_SECONDS_PER_LEAF
        if budget is None or budget.time_limit is None or not load:
            return budget
        if budget.time_limit <= 2 * load:
            return None
        if self.backend.limit_counts_loading(leaves):
            return budget
        return dataclasses.replace(budget, time_limit=budget.time_limit - load)

    def _solve_cpsat(self, m: CounterfactualModel, settings: SolverSettings, t0: float,
                     details: dict[str, Any], heuristic: list[Verification]
                     ) -> tuple[SolveOutcome, pd.DataFrame | None]:
        """One CP-SAT solve within the time left of the query started at ``t0`` (its model
        built on the leaves within the radius of a verified heuristic point, which starts
        the search: exact, see :meth:`CpSatBackend.solve_query`); the decoded point."""
        check_supported(m)  # components added since the build
        budget = time_left(settings, t0)
        restriction = restriction_of(m)  # the trees' (CP-SAT takes tree ensembles only)
        found = self._heuristic(m, details, heuristic, restriction) \
            if budget is not None and self.tighten_per_query and restriction is not None \
            else None
        budget = time_left(settings, t0)
        if budget is None:
            return NO_TIME, None
        candidate, radius = found if found is not None else (None, math.inf)
        return self.backend.solve_query(m, budget, radius, candidate)

    def _heuristic(self, m: CounterfactualModel, details: dict[str, Any],
                   heuristic: list[Verification], restriction: Restriction
                   ) -> tuple[pd.DataFrame | None, float]:
        """A heuristic counterfactual of the query and its distance (``inf`` without
        one). It joins ``heuristic`` when it is a point of the declared problem: the
        real model verifies it, it meets every declared constraint and the user's own
        (:meth:`CounterfactualModel.violations`), and it lies within the objective's
        cutoff (a diverse set's ε window); otherwise its distance is a guess of the
        radius at which points are found (``details["heuristic_guess"]``)."""
        candidate = restriction.heuristic(m)
        if candidate is None:
            return None, math.inf
        checked = verify_row(m, candidate, margin=m.declared_margin)
        if checked.verified and not heuristic:
            value = objective_value(m, candidate)
            if value <= pyo.value(m.cutoff):
                details["heuristic_objective"] = value
                heuristic.append(checked)
                return candidate, distance_value(m, candidate)
        details["heuristic_guess"] = distance_value(m, candidate)
        return candidate, details["heuristic_guess"]

    def _heuristic_only(self, m: CounterfactualModel, details: dict[str, Any],
                        heuristic: list[Verification]) -> None:
        """The query's verified heuristic point (into ``heuristic``) when its time ran
        out before the first solve, e.g. in a pause of the process: a greedy walk of
        a fraction of a second, so that a short limit still returns a verified point
        wherever the predictor's kind has a heuristic. It runs past the limit."""
        restriction = restriction_of(m)
        if self.tighten_per_query and restriction is not None and restriction.applies(m):
            self._heuristic(m, details, heuristic, restriction)

    def _no_budget(self, settings: SolverSettings, t0: float, details: dict[str, Any]
                   ) -> SolveOutcome:
        """Why :meth:`_load_budget` gave no settings: the query's time is up, or what is
        left of it is too short to load the query's trees (or the model's changes) into
        the solver and solve."""
        left = time_left(settings, t0)
        leaves = details.get("region_leaves", 0)  # pragma: no mutate (None is as false)
        if left is None or not leaves:
            return NO_TIME
        return too_large_to_load(leaves, left.time_limit)

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
