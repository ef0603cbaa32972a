"""The verdict of a query (:func:`cfopt.query.claims.claim`) on each of its branches.

The solves are given (:class:`~cfopt.solvers.SolveOutcome` as a solver would return
them) and the points are real: rows of a small linear model that
:func:`~cfopt.query.solution.verify_row` checks. What each verdict must say is read off
the rules of the module docstring, never off cfopt's own answer: the status, the point
(the cheapest verified one), its objective (the range-weighted L1 distance to the
factual, computed here), the bound (the first solve's, never above the objective, and
none once refuted or after an error) and the reason of :data:`~cfopt.query.claims.REASONS`.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

import cfopt
from cfopt import Status
from cfopt.query.claims import (
    ABS_GAP,
    REASONS,
    REGION_TOO_LARGE,
    claim,
    contradicted,
    proven_optimal,
    stop_reason,
    stop_words,
)
from cfopt.query.solution import Verification, verify_row
from cfopt.solvers import SolveOutcome

from .claims_common import MU

GAP = 1e-4


@pytest.fixture(scope="module")
def milp():
    """A linear model on a, b in [0, 10] (range 10 each), class 1 where a + b > 10, at
    the factual (2, 2) with target 1: a row's objective is (|a - 2| + |b - 2|) / 10."""
    space = cfopt.FeatureSpace.from_frame(pd.DataFrame({"a": [0.0, 10.0], "b": [0.0, 10.0]}))
    net = torch.nn.Sequential(torch.nn.Linear(2, 1))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[10.0, 10.0]]))  # inputs scaled to [0, 1]
        net[0].bias.copy_(torch.tensor([-10.0]))
    m = cfopt.Explainer(net, space).milp
    m.set_factual(pd.DataFrame({"a": [2.0], "b": [2.0]}))
    m.set_target(1)
    return m


def point(m, a: float, b: float):
    """The verification of the row (a, b) with the margin μ."""
    return verify_row(m, pd.DataFrame({"a": [a], "b": [b]}), margin=MU)


def cost(a: float, b: float) -> float:
    return (abs(a - 2.0) + abs(b - 2.0)) / 10.0


def outcome(status: Status, bound: float | None = None, termination: str = "",
            message: str = "") -> SolveOutcome:
    return SolveOutcome(status, None, bound, 0.0, 0.0, termination or status.value, message)


def test_gap_rule_at_its_boundaries():
    """``objective - bound <= mip_gap·|objective| + ABS_GAP`` proves optimality; a
    bound above the objective by more than that refutes it (numbers exact in floats)."""
    assert proven_optimal(0.0, -ABS_GAP, 0.0)            # equal to the tolerance
    assert not proven_optimal(0.0, -2 * ABS_GAP, 0.0)
    assert proven_optimal(1.0, 0.5, 0.5)                 # 0.5 <= 0.5·1 + 1e-6
    assert proven_optimal(1.0, 1.5, 0.5)                 # a bound above: proven too
    assert proven_optimal(2.0, 1.1, 0.5)                 # 0.9 <= 0.5·2, not 0.5 / 2
    assert not proven_optimal(-2.0, -3.1, 0.5)           # 1.1 > 0.5·|-2|
    assert not proven_optimal(1.0, None, 0.5)
    assert not contradicted(0.0, ABS_GAP, 0.0)           # equal to the tolerance
    assert contradicted(0.0, 2 * ABS_GAP, 0.0)
    assert not contradicted(2.0, 2.9, 0.5)               # 0.9 <= 0.5·2, not 0.5 / 2
    assert contradicted(2.0, 3.1, 0.5)
    assert not contradicted(1.0, None, 0.5)


def test_stop_reason_and_words():
    region = outcome(Status.NO_SOLUTION, termination=REGION_TOO_LARGE,
                     message="the region of 9 trees could not be built in 3 s")
    limit = outcome(Status.NO_SOLUTION, termination="maxTimeLimit", message="ignored")
    assert stop_reason(region) == "region_too_large" and stop_reason(limit) == "time_limit"
    assert stop_words(region) == region.message
    assert stop_words(limit) == "time limit reached"
    assert {stop_reason(region), stop_reason(limit)} <= set(REASONS)


def test_optimal_keeps_the_bound_below_the_objective(milp):
    """A first solve proven within the gap is OPTIMAL at the verified point; a bound a
    tolerance above the objective is lowered to it."""
    p = point(milp, 7.0, 5.0)
    assert p.verified
    for bound, expected in ((cost(7, 5) - 1e-5, cost(7, 5) - 1e-5),
                            (cost(7, 5) + 1e-7, cost(7, 5))):
        v = claim([outcome(Status.OPTIMAL, bound)], p, milp, GAP, MU)
        assert v.status is Status.OPTIMAL and v.reason is None and v.message == ""
        assert v.objective == pytest.approx(cost(7, 5), abs=1e-12)
        assert v.bound == pytest.approx(expected, abs=1e-12)
        assert v.row is p.row and v.predicted == p.predicted == 1


def test_the_cheapest_verified_point_is_returned(milp):
    """The heuristic's point is returned when it is cheaper than the solver's, and an
    unverified point of the solver is never a candidate, however cheap."""
    solver, heuristic = point(milp, 9.0, 5.0), point(milp, 7.0, 5.0)
    v = claim([outcome(Status.FEASIBLE, 0.1)], solver, milp, GAP, MU, heuristic)
    assert v.row is heuristic.row and v.objective == pytest.approx(cost(7, 5))
    v = claim([outcome(Status.FEASIBLE, 0.1)], heuristic, milp, GAP, MU, solver)
    assert v.row is heuristic.row
    unverified = point(milp, 3.0, 3.0)  # classified 0: not a counterfactual
    assert not unverified.verified
    v = claim([outcome(Status.FEASIBLE, 0.1, "maxTimeLimit")], unverified, milp, GAP, MU,
              heuristic)
    assert v.status is Status.FEASIBLE and v.row is heuristic.row
    assert v.objective == pytest.approx(cost(7, 5)) and v.reason == "time_limit"


@pytest.mark.parametrize("first", [outcome(Status.INFEASIBLE, 0.5),
                                   outcome(Status.OPTIMAL, 0.9)])
def test_a_verified_point_refutes_the_solver(milp, first):
    """Against a proof of infeasibility, or a bound above a verified point's objective:
    FEASIBLE, no bound, reason ``refuted``, the cheapest point and its prediction."""
    p, heuristic = point(milp, 9.0, 5.0), point(milp, 7.0, 5.0)
    v = claim([first], p, milp, GAP, MU, heuristic)
    assert v.status is Status.FEASIBLE and v.bound is None and v.reason == "refuted"
    assert v.row is heuristic.row and v.predicted == 1
    assert v.objective == pytest.approx(cost(7, 5))
    said = "infeasible" if first.status is Status.INFEASIBLE else "a bound of 0.9"
    assert f"the solver proved {said}" in v.message and "refutes" in v.message


def test_an_error_gives_no_bound(milp):
    """A first solve that errs gives no bound, even one it reported: a verified point is
    FEASIBLE for want of a bound (not refuting a bound that was never valid)."""
    v = claim([outcome(Status.ERROR, 5.0)], point(milp, 7.0, 5.0), milp, GAP, MU)
    assert v.status is Status.FEASIBLE and v.bound is None and v.reason == "no_bound"
    assert v.objective == pytest.approx(cost(7, 5)) and "no bound" in v.message


def test_a_point_above_the_gap(milp):
    p = point(milp, 7.0, 5.0)
    v = claim([outcome(Status.OPTIMAL, 0.5)], p, milp, GAP, MU)
    assert v.status is Status.FEASIBLE and v.reason == "gap" and v.bound == 0.5
    assert v.row is p.row and v.predicted == 1 and v.objective == pytest.approx(cost(7, 5))
    assert "0.8" in v.message and "0.5" in v.message


@pytest.mark.parametrize("termination, reason", [("maxTimeLimit", "time_limit"),
                                                 (REGION_TOO_LARGE, "region_too_large")])
def test_a_stopped_solve_with_a_point(milp, termination, reason):
    """A first solve stopped with a verified incumbent: FEASIBLE with its valid bound,
    the reason its stop."""
    v = claim([outcome(Status.FEASIBLE, 0.5, termination, "the region is too large")],
              point(milp, 7.0, 5.0), milp, GAP, MU)
    assert v.status is Status.FEASIBLE and v.reason == reason and v.bound == 0.5
    words = "the region is too large" if reason == "region_too_large" else "time limit"
    assert v.message.startswith(words)


def test_a_point_of_a_margin_retry(milp):
    """A point from a re-solve with a larger margin is FEASIBLE against the first
    solve's bound, unless that bound proves it optimal."""
    p = point(milp, 7.0, 5.0)
    first, retry = outcome(Status.OPTIMAL, 0.5), outcome(Status.OPTIMAL, 0.8)
    v = claim([first, retry], p, milp, GAP, 2 * MU)
    assert v.status is Status.FEASIBLE and v.reason == "margin_retry" and v.bound == 0.5
    assert f"margin {2 * MU:g}" in v.message
    v = claim([outcome(Status.OPTIMAL, cost(7, 5)), retry], p, milp, GAP, 2 * MU)
    assert v.status is Status.OPTIMAL


@pytest.mark.parametrize("last, reason", [
    (outcome(Status.NO_SOLUTION, 0.5, "maxTimeLimit"), "time_limit"),
    (outcome(Status.FEASIBLE, 0.5, REGION_TOO_LARGE, "no region in 3 s"), "region_too_large"),
    (outcome(Status.ERROR, None, "numerical", "HiGHS failed"), "solver_stopped"),
    (outcome(Status.ERROR, None, "numerical"), "solver_stopped"),
])
def test_only_the_heuristic_point(milp, last, reason):
    """Without a verified point of the solver the heuristic's is returned (FEASIBLE),
    the reason how the last solve ended."""
    h = point(milp, 7.0, 5.0)
    v = claim([last], None, milp, GAP, MU, h)
    assert v.status is Status.FEASIBLE and v.reason == reason and v.row is h.row
    assert v.predicted == 1 and v.objective == pytest.approx(cost(7, 5))
    assert "heuristic" in v.message
    if reason == "solver_stopped":
        assert f"ended {last.status.value}" in v.message
        said = " (HiGHS failed)" if last.message else ""
        assert f"without a verified point{said}: the verified heuristic" in v.message
    else:
        assert v.message.startswith(stop_words(last))


def test_a_point_that_never_verified(milp):
    """VERIFICATION_FAILED, no point, and the message says which checks failed: the
    model's class, the declared constraints, the margin (each from the point)."""
    p = point(milp, 3.0, 3.0)
    v = claim([outcome(Status.OPTIMAL, 0.1), outcome(Status.OPTIMAL, 0.2)], p, milp,
              GAP, 4 * MU)
    assert v.status is Status.VERIFICATION_FAILED and v.reason == "verification_failed"
    assert v.row is None and v.objective is None and v.bound is None
    assert f"predicts {p.predicted!r}, which misses the target" in v.message
    assert f"margin {4 * MU:g}" in v.message and "breaks" not in v.message
    row = pd.DataFrame({"a": [7.0], "b": [5.0]})
    broken = Verification(row, 1, ["b is immutable"])
    v = claim([outcome(Status.OPTIMAL, 0.1)], broken, milp, GAP, MU)
    assert "breaks the declared constraint(s) ['b is immutable']" in v.message
    assert "predicts" not in v.message and "below the margin" not in v.message
    short = Verification(row, 1, [], score=0.000375, short_of=0.001)
    v = claim([outcome(Status.OPTIMAL, 0.1)], short, milp, GAP, MU)
    assert "its target score 0.000375" in v.message and "below the margin 0.001 " in v.message
    assert "predicts" not in v.message and "breaks" not in v.message


def test_no_point(milp):
    v = claim([outcome(Status.INFEASIBLE, 0.3)], None, milp, GAP, MU)
    assert (v.status, v.reason, v.bound, v.row) == (Status.INFEASIBLE, "infeasible", None, None)
    assert "no counterfactual" in v.message
    v = claim([outcome(Status.NO_SOLUTION, 0.3, "maxTimeLimit")], None, milp, GAP, MU)
    assert (v.status, v.reason, v.bound) == (Status.NO_SOLUTION, "time_limit", 0.3)
    assert v.message.startswith("time limit reached")
    v = claim([outcome(Status.NO_SOLUTION, None, REGION_TOO_LARGE, "no region in 2 s")],
              None, milp, GAP, MU)
    assert v.reason == "region_too_large" and v.message.startswith("no region in 2 s")
    v = claim([outcome(Status.ERROR, None, "weird", "HiGHS crashed")], None, milp, GAP, MU)
    assert (v.status, v.reason, v.message) == (Status.ERROR, "error", "HiGHS crashed")
    v = claim([outcome(Status.ERROR, None, "weird")], None, milp, GAP, MU)
    assert v.message == "solver terminated with weird" and v.objective is None
