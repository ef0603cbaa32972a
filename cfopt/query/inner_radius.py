r"""Default forests solved from the inside out (issue 17): a per-query tree model is
first built and solved within half the radius of the verified incumbent.

The size of a query's trees (:mod:`cfopt.formulations.tree_regions`) grows fast with
the radius :math:`r`: on a default ExtraTrees forest on Adult the greedy incumbent often
costs about one category switch (:math:`r \approx 1`, thousands of leaves, a model on
which HiGHS spends the whole limit in presolve) where the optimum costs a fifth of it.
So the query is solved in two stages:

1. Build :math:`P_{r/2}` (the leaves within :math:`r/2`) and solve it with half the
   time left. If its optimum :math:`z \le r/2` is proven, it is the declared problem's
   optimum (lemma (ii) of :mod:`~cfopt.formulations.tree_regions`): done. Otherwise
   :math:`\min(b, r/2)` bounds the declared problem's optimum from below, for the bound
   :math:`b` of :math:`P_{r/2}` (``r/2`` itself when :math:`P_{r/2}` is infeasible or
   its optimum exceeds ``r/2``: no point of objective :math:`\le r/2` exists).
2. A point of the first stage that the real model verifies and that costs less than
   :math:`r` becomes the incumbent, and :math:`r` its objective (a smaller model);
   the caller builds :math:`P_r` and solves it from the incumbent (a MIP start), the
   first stage's bound kept as a floor of the answer's bound.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from ..results.status import Status
from ..solvers import SolveOutcome, SolverBackend, SolverSettings
from .restrictions.relu import objective_value
from .restrictions.trees import build_query_region
from .solution import Verification, verified_solution

if TYPE_CHECKING:
    from ..problem import CounterfactualModel

#: the first stage's radius, as a fraction of the incumbent's
INNER = 0.5


@dataclasses.dataclass(frozen=True)
class InnerStage:
    """What the first stage gives: its outcome, whether that outcome is the answer (a
    proven optimum within the inner radius), the lower bound it proves on the declared
    problem's optimum (``None``: none) and the radius of the second stage."""

    outcome: SolveOutcome
    final: bool
    floor: float | None
    radius: float


def inner_stage(m: CounterfactualModel, backend: SolverBackend, budget: SolverSettings,
                radius: float, incumbent: list[Verification], details: dict[str, Any],
                deadline: float) -> InnerStage:
    """Stage 1 of the module docstring for the verified incumbent ``incumbent[0]`` of
    objective ``radius``, with half of ``budget``; a better verified point replaces the
    incumbent. Raises :class:`~cfopt.formulations.tree_regions.RegionTooLarge` past
    ``deadline`` (the caller answers with the incumbent)."""
    inner = INNER * radius
    details["inner_leaves"] = build_query_region(m, inner, deadline)
    backend.reset()
    half = budget if budget.time_limit is None else dataclasses.replace(
        budget, time_limit=budget.time_limit / 2)
    outcome = backend.solve(m, half)
    beyond = outcome.objective is not None and outcome.objective > inner * (1 + 1e-6) + 1e-9
    if outcome.status is Status.OPTIMAL and not beyond:
        return InnerStage(outcome, True, None, radius)
    if outcome.status is Status.INFEASIBLE or (outcome.status is Status.OPTIMAL and beyond):
        floor: float | None = inner
    else:
        floor = None if outcome.bound is None else min(outcome.bound, inner)
    if outcome.status.has_solution:
        point = verified_solution(m, m.declared_margin)
        if point.verified and objective_value(m, point.row) < radius:
            incumbent[0] = point
            radius = objective_value(m, point.row)
    return InnerStage(outcome, False, floor, radius)


def with_floor(outcome: SolveOutcome, floor: float | None, radius: float) -> SolveOutcome:
    """``outcome`` of the second stage (or of the full problem after it) with the first
    stage's lower bound: the larger of the two valid bounds (the second stage's own
    bound counts up to ``radius``, lemma (ii))."""
    if floor is None or outcome.status in (Status.INFEASIBLE, Status.ERROR):
        return outcome
    own = -math.inf if outcome.bound is None else min(outcome.bound, radius)
    return dataclasses.replace(outcome, bound=max(floor, own))


def after(earlier: SolveOutcome | None, outcome: SolveOutcome) -> SolveOutcome:
    """``outcome`` with the times of an earlier solve of the same query added."""
    if earlier is None:
        return outcome
    times = [o.solver_time for o in (earlier, outcome) if o.solver_time is not None]
    return dataclasses.replace(outcome, wall_time=outcome.wall_time + earlier.wall_time,
                               solver_time=sum(times) if times else None)
