"""What a query's answer may claim: the one place that turns solves into a status.

The *declared problem* is the user's: the real model's own prediction in the target
with the validity margin (on the model's scores in exact arithmetic of its parameters,
what the MILP encodes; a float32 network's own logits differ by a rounding that depends
on its kernels' summation order), the feature space, actionability, declared
constraints, and the objective. cfopt's MILP is a relaxation of it up to the solvers'
tolerances (tree splits admit either side within rounding;
:mod:`cfopt.formulations.trees`), so

* the first solve's proven bound is a lower bound on the declared problem's optimum;
  a re-solve with a larger margin (after a point failed verification) is a different,
  smaller problem, whose bound is never reported;
* ``INFEASIBLE`` is claimed only when the first solve proved it;
* ``OPTIMAL`` is claimed only for a verified point (:mod:`cfopt.query.solution`) whose
  objective, recomputed from its raw values, is within the requested gap of that
  bound: ``objective - bound <= mip_gap * |objective| + ABS_GAP``. The solver's own
  claim is not enough (a solver can stop on a gap it computes on its own scaled model,
  or a repaired point can cost a little more than the solver's);
* a verified point without that proof is ``FEASIBLE``, with the valid bound and the
  reason in the message;
* every verified point of the query (the solver's, the heuristic's) is a point of the
  declared problem: the cheapest is returned, and one cheaper than the proven bound
  (or any, against a proof of infeasibility) refutes the solver's proof, which is then
  not reported at all (``FEASIBLE``, no bound).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..results.status import Status
from ..solvers import SolveOutcome
from .restrictions.relu import objective_value
from .solution import failed_checks

if TYPE_CHECKING:
    from ..problem import CounterfactualModel
    from .solution import Verification

#: absolute optimality tolerance on the objective (HiGHS's default absolute MIP gap)
ABS_GAP = 1e-6

#: the termination of a query whose tree region could not be built by its deadline
REGION_TOO_LARGE = "regionTooLarge"


@dataclass(frozen=True)
class Verdict:
    """A query's status, returned point (``None`` without a verified one), objective,
    valid bound, message, the real model's prediction on the point, and why less than
    optimality was proven (one of :data:`REASONS`; ``None`` for ``OPTIMAL``)."""

    status: Status
    row: pd.DataFrame | None
    objective: float | None
    bound: float | None
    message: str
    predicted: Any = None
    reason: str | None = None


#: why a query's answer is not a proof of optimality, as ``details["reason"]`` names it
REASONS = {
    "time_limit": "the query's time limit was reached",
    "region_too_large": "the trees' region could not be built in the time left",
    "no_bound": "the solver gave no bound",
    "gap": "the point is above the proven bound by more than the requested gap",
    "margin_retry": "the point comes from a re-solve with a larger margin",
    "refuted": "a verified point refutes the solver's proof",
    "solver_stopped": "the solver stopped without a verified point",
    "verification_failed": "no point passed verification",
    "infeasible": "no point exists",
    "error": "the solver failed",
}


def stop_reason(outcome: SolveOutcome) -> str:
    """Why a solve without a proof stopped: its region too large to build, else its
    time limit (a solver stops early on nothing else here)."""
    return "region_too_large" if outcome.termination == REGION_TOO_LARGE else "time_limit"


def stop_words(outcome: SolveOutcome) -> str:
    """:func:`stop_reason` in words, with the outcome's own message."""
    if outcome.termination == REGION_TOO_LARGE:
        return outcome.message
    return "time limit reached"


def proven_optimal(objective: float, bound: float | None, mip_gap: float) -> bool:
    """Whether ``bound`` proves ``objective`` optimal within the requested gap."""
    return bound is not None and objective - bound <= mip_gap * abs(objective) + ABS_GAP


def contradicted(objective: float, bound: float | None, mip_gap: float) -> bool:
    """Whether a verified point of ``objective`` refutes a solver's proven ``bound``
    (cheaper than the bound beyond the tolerances that :func:`proven_optimal` grants)."""
    return bound is not None and bound - objective > mip_gap * abs(objective) + ABS_GAP


def claim(outcomes: list[SolveOutcome], point: Verification | None, m: CounterfactualModel,
          mip_gap: float, margin: float, heuristic: Verification | None = None) -> Verdict:
    """The verdict of a query from its solves (the first of the declared problem, the
    others re-solves with larger margins), the last decoded point, and the verified
    heuristic point of the query.

    Every verified point is a point of the declared problem, so the cheapest is returned,
    and one that contradicts the solver's claim (cheaper than its proven bound, or any
    at all when it proved infeasibility) shows that the solver's proof is false (its
    numerics on this model): the verdict is then ``FEASIBLE`` without a bound, never the
    refuted claim (differential seed 41771: HiGHS proved 2 optimal where the heuristic
    verified 1)."""
    first, last = outcomes[0], outcomes[-1]
    bound = first.bound if first.status not in (Status.ERROR, Status.INFEASIBLE) else None
    solved = point is not None and point.verified
    known = [p for p in (point if solved else None, heuristic) if p is not None]
    if known:
        costs = [objective_value(m, p.row) for p in known]
        objective = min(costs)
        best = known[costs.index(objective)]
        if first.status is Status.INFEASIBLE or contradicted(objective, bound, mip_gap):
            refuted = ("infeasible" if first.status is Status.INFEASIBLE
                       else f"a bound of {bound:.6g}")
            return Verdict(Status.FEASIBLE, best.row, objective, None,
                           f"the solver proved {refuted}, but a verified counterfactual of "
                           f"objective {objective:.6g} refutes it (the solver's numerics on "
                           f"this model): no valid bound, optimality not proven",
                           best.predicted, "refuted")
        bound = None if bound is None else min(bound, objective)
        if proven_optimal(objective, bound, mip_gap):
            return Verdict(Status.OPTIMAL, best.row, objective, bound, "", best.predicted)
        if not solved:
            stopped = last.status in (Status.NO_SOLUTION, Status.FEASIBLE)
            reason = stop_reason(last) if stopped else "solver_stopped"
            why = (f"{stop_words(last)}: the verified heuristic counterfactual is returned, "
                   f"optimality not proven" if stopped else
                   f"the solver ended {last.status.value} without a verified point"
                   f"{f' ({last.message})' if last.message else ''}: the verified "
                   f"heuristic counterfactual is returned, optimality not proven")
        elif len(outcomes) > 1:
            reason = "margin_retry"
            why = (f"the solver's point failed verification and the re-solve with margin "
                   f"{margin:g} (a smaller problem) found this one; optimality is not proven "
                   f"for the declared problem")
        elif first.status is Status.FEASIBLE:
            reason = stop_reason(first)
            why = f"{stop_words(first)}: best incumbent returned, optimality not proven"
        elif bound is None:
            reason = "no_bound"
            why = "the solver gave no bound: optimality not proven"  # pragma: no mutate (message)
        else:
            reason = "gap"
            why = (f"the verified point's objective {objective:.6g} is above the proven bound "
                   f"{bound:.6g} by more than the requested gap {mip_gap:g}: optimality not "
                   f"proven")
        return Verdict(Status.FEASIBLE, best.row, objective, bound, why, best.predicted,
                       reason)
    if point is not None:  # a solution that never verified
        failed = failed_checks(m, point.predicted, point.problems, point.score,
                               point.short_of)
        return Verdict(Status.VERIFICATION_FAILED, None, None, None,
                       f"the solver's point failed verification: {failed}; the last "
                       f"solve with margin {margin:g} ended "
                       f"{last.status.value}; no counterfactual returned",
                       reason="verification_failed")
    if first.status is Status.INFEASIBLE:
        # pragma: no mutate start (message text)
        why = "the solver proved that no counterfactual satisfies the constraints"
        # pragma: no mutate end
        return Verdict(Status.INFEASIBLE, None, None, None, why, reason="infeasible")
    if first.status is Status.NO_SOLUTION:
        return Verdict(Status.NO_SOLUTION, None, None, bound,
                       f"{stop_words(first)} before any counterfactual was found",
                       reason=stop_reason(first))
    return Verdict(Status.ERROR, None, None, None,
                   last.message or f"solver terminated with {last.termination}",
                   reason="error")
