"""The query engine behind :class:`cfopt.Explainer`: one query of a counterfactual MILP,
from its start to its answer.

:meth:`QueryRunner.start` sets the factual, the target and the query's options on the
model; :meth:`QueryRunner.answer` solves it within the query's time (restricted around a
heuristic counterfactual where the predictor's kind allows, :mod:`.restrictions`; trees
built per query from the inside out, :mod:`.inner_radius`), re-checks every decoded
point with the real model (:mod:`.solution`) and re-solves with a 10x larger validity
margin when none passes (at most ``verify_retries`` times), then states what the answer
claims in one place, :mod:`.claims` (a re-solve with a larger margin is a different
problem, so its point is ``OPTIMAL`` only within the gap of the first solve's bound),
and diagnoses an infeasible query (:mod:`.diagnosis`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

import pandas as pd
import pyomo.environ as pyo

from ..errors import InfeasibleError
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
from .ladder import can_climb, climb
from .restrictions import Restriction, restriction_of
from .restrictions.relu import objective_value
from .restrictions.trees import build_box_region, build_query_region, per_query
from .solution import (
    Verification,
    start_of,
    unchecked_components,
    verified_solution,
    verify_row,
)

#: the options of one query (``explain``, ``explain_many``, a diverse set's solves)
QUERY_OPTIONS = ("time_limit", "mip_gap", "max_changes")


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
        verify_retries: re-solves with a 10x margin when verification fails.
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
        self._build_pending = False

    def start(self, x: pd.DataFrame | pd.Series | Mapping, target: Any,
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
                        self._heuristic_only(m, details, heuristic)
                        outcomes.append(SolveOutcome(Status.NO_SOLUTION, None, None, None, 0.0,
                                                     "maxTimeLimit"))
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
                point = verified_solution(m) if row is None else verify_row(m, row)
                if point.verified:
                    break
                m.margin = margin_used * 10
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
        problem. With a proven lower bound ``lower``, the solve climbs from it instead
        (:func:`.ladder.climb`)."""
        if self.tighten_per_query and can_climb(m, lower):
            assert lower is not None
            return climb(m, self.backend, lambda: self._budget(m, settings, t0), lower,
                         details)
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

    def _heuristic_only(self, m: CounterfactualModel, details: dict[str, Any],
                        heuristic: list[Verification]) -> None:
        """The query's verified heuristic point (into ``heuristic``) when its time ran
        out before the first solve, e.g. in a pause of the process: a greedy walk of
        a fraction of a second, so that a short limit still returns a verified point
        wherever the predictor's kind has a heuristic. It runs past the limit; with
        components that verification cannot see, no heuristic point could be returned,
        so none is sought."""
        restriction = restriction_of(m)
        if self.tighten_per_query and restriction is not None and \
                restriction.applies(m) and not unchecked_components(m):
            self._heuristic(m, details, heuristic, restriction)

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


def _admissible(m: CounterfactualModel, candidate: pd.DataFrame | None
                ) -> pd.DataFrame | None:
    """The heuristic candidate if it meets the declared constraints (else its objective
    would not bound the constrained optimum)."""
    if candidate is None or m.violations(candidate):
        return None
    return candidate
