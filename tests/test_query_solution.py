"""Decoding a solver's solution into raw rows (:mod:`cfopt.query.solution`).

The solver's values are set by hand on the MILP's variables, as a solver at its
tolerances could leave them, and each decoded row is compared with what the module
docstring prescribes: codes clipped into the feature's bounds and into the predictor's
region, integral codes rounded, float round-off of the factual's code no move, a
continuous move within ``SNAP`` of the range snapped back in the first candidate only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
import torch

import cfopt
from cfopt.constraints.blocks import ConstraintBlock
from cfopt.formulations.features import code_variable
from cfopt.formulations.validity import MARGIN_TOLERANCE
from cfopt.query.solution import (
    SNAP,
    candidates,
    failed_checks,
    region_intervals,
    start_of,
    verified_solution,
    verify_row,
)

FACTUAL = pd.DataFrame({"a": [2.0], "n": [1], "c": ["red"]})


def space_and_net():
    """a continuous in [0, 10], n integer in [0, 5], c categorical; a linear model
    whose logit is 10·a/10 - 5 = a - 5 (class 1 where a > 5)."""
    frame = pd.DataFrame({"a": [0.0, 10.0, 5.5], "n": [0, 5, 2],
                          "c": ["red", "green", "blue"]})
    space = cfopt.FeatureSpace.from_frame(frame)
    net = torch.nn.Sequential(torch.nn.Linear(space.transform(frame).shape[1], 1))
    with torch.no_grad():
        net[0].weight.zero_()
        net[0].weight[0, 0] = 10.0
        net[0].bias.fill_(-5.0)
    return space, net


@pytest.fixture(scope="module")
def milp():
    space, net = space_and_net()
    m = cfopt.Explainer(net, space).milp
    m.set_factual(FACTUAL)
    m.set_target(1)
    return m


def hold(m, a: float, n: float, c=(0.0, 0.0, 1.0)) -> None:
    """The solver's values: codes of a and n, one-hots of c (blue, green, red)."""
    for name, code in (("a", a), ("n", n)):
        var, offset, width = code_variable(m, m.space, name)
        var.set_value((code - offset) / width, skip_validation=True)
    for level, value in zip(("blue", "green", "red"), c):
        m.onehot["c", level].set_value(value, skip_validation=True)


def decoded(m) -> list[dict]:
    return [row.iloc[0].to_dict() for row in candidates(m)]


def test_no_factual_or_no_solution_raises():
    space, net = space_and_net()
    m = cfopt.Explainer(net, space).milp
    with pytest.raises(RuntimeError, match="^no factual set$"):
        candidates(m)
    m.set_factual(FACTUAL)
    m.set_target(1)
    no_solution = "^the model holds no solution to decode$"
    with pytest.raises(RuntimeError, match=no_solution):  # no values at all
        candidates(m)
    hold(m, 6.0, 1.0)
    m.onehot["c", "green"].set_value(None)
    with pytest.raises(RuntimeError, match=no_solution):  # a one-hot without a value
        candidates(m)
    hold(m, 6.0, 1.0)
    code_variable(m, m.space, "a")[0].set_value(None)
    with pytest.raises(RuntimeError, match=no_solution):
        candidates(m)


def test_a_plain_move_is_one_row(milp):
    hold(milp, 6.25, 3.0, (0.0, 1.0, 0.0))
    assert decoded(milp) == [{"a": 6.25, "n": 3, "c": "green"}]


def test_categories_by_the_largest_one_hot(milp):
    for values, level in (((0.9, 0.1, 0.0), "blue"), ((0.2, 0.7, 0.1), "green"),
                          ((0.0, 1e-7, 0.9999), "red")):
        hold(milp, 6.0, 1.0, values)
        assert [r["c"] for r in decoded(milp)] == [level]


def test_codes_are_clipped_into_the_bounds(milp):
    hold(milp, 10.0 + 1e-7, 5.0 + 4e-7)
    assert decoded(milp) == [{"a": 10.0, "n": 5, "c": "red"}]
    hold(milp, -1e-7, -3e-7)
    assert decoded(milp) == [{"a": 0.0, "n": 0, "c": "red"}]


def test_integral_codes_are_rounded(milp):
    hold(milp, 6.0, 2.9999996)
    assert decoded(milp)[0]["n"] == 3
    hold(milp, 6.0, 1.0000004)  # the factual's code within a solver's tolerance
    (row,) = decoded(milp)
    assert row["n"] == 1 and isinstance(row["n"], int)


def test_a_move_within_snap_is_undone_in_the_first_candidate_only(milp):
    """A continuous move up to ``SNAP`` × range (1e-5 here) is snapped back to the
    factual in the first candidate; the second keeps it. A larger move is kept."""
    for move in (4e-6, -9e-6, 0.99 * SNAP * 10):
        hold(milp, 2.0 + move, 1.0)
        rows = decoded(milp)
        assert rows == [{"a": 2.0, "n": 1, "c": "red"}, {"a": 2.0 + move, "n": 1, "c": "red"}]
    for move in (1.01 * SNAP * 10, -2e-5, 0.5):
        hold(milp, 2.0 + move, 1.0)
        assert decoded(milp) == [{"a": pytest.approx(2.0 + move, abs=1e-12), "n": 1,
                                  "c": "red"}]


def test_float_round_off_of_the_factual_is_no_move(milp):
    """A difference within 64 ulps of the factual's code is the factual in every
    candidate (one row), and the value is the factual's exactly."""
    x0 = pyo.value(milp.x0["a"])
    for move in (4e-15, -1e-14):
        hold(milp, x0 + move, 1.0)
        (row,) = decoded(milp)
        assert row["a"] == 2.0
    hold(milp, x0 + 1e-12, 1.0)  # above round-off, within SNAP: two candidates
    assert len(decoded(milp)) == 2


def test_verify_row_margin(milp):
    """The margin is met at ``margin - MARGIN_TOLERANCE·(1 + |score|)`` and above."""
    for a, ok in ((6.0, True), (5.0 + 0.01, True), (5.0 + 0.0005, False), (4.0, False)):
        v = verify_row(milp, pd.DataFrame({"a": [a], "n": [1], "c": ["red"]}), margin=0.001)
        assert v.verified is ok, a
        if a > 5.0:
            assert v.score == pytest.approx(a - 5.0, abs=1e-6)
            assert v.short_of == (None if ok else 0.001)
        else:  # not the target: no score, no margin checked
            assert v.predicted == 0 and v.score is None and v.short_of is None
    v = verify_row(milp, pd.DataFrame({"a": [5.0005], "n": [1], "c": ["red"]}))
    assert v.verified and v.score is None  # without a margin, none is checked
    tol = MARGIN_TOLERANCE * (1.0 + 0.001)
    for score, ok in ((0.001 - 0.5 * tol, True), (0.001 - 2 * tol, False)):
        v = verify_row(milp, pd.DataFrame({"a": [5.0 + score], "n": [1], "c": ["red"]}),
                       margin=0.001)
        assert v.verified is ok, score


def test_verify_row_margin_tolerance_grows_with_the_score(milp):
    """The tolerance is MARGIN_TOLERANCE·(1 + |score|): at a score near 4, a point
    2e-6 short of μ = 4 meets it (the tolerance is 5e-6), one 6e-6 short does not; near
    μ = 0.001 a point 1.5e-6 short does not (the tolerance is 1.001e-6)."""
    def at(a, margin):
        return verify_row(milp, pd.DataFrame({"a": [a], "n": [1], "c": ["red"]}),
                          margin=margin)

    assert at(9.0 - 2e-6, 4.0).verified
    assert at(9.0 - 6e-6, 4.0).short_of == 4.0
    assert at(5.0 + 0.001 - 1.5e-6, 0.001).short_of == 0.001
    assert at(5.0 + 0.001 - 0.5e-6, 0.001).verified


def test_verify_row_margin_met_exactly_at_the_tolerance(milp):
    """A score exactly μ − MARGIN_TOLERANCE·(1 + |score|) meets the margin (found among
    a few points whose float arithmetic lands on it exactly)."""
    found = 0
    for a in np.linspace(5.5, 9.5, 41):
        row = pd.DataFrame({"a": [a], "n": [1], "c": ["red"]})
        score = milp.target_score(row)
        margin = score + MARGIN_TOLERANCE * (1.0 + abs(score))
        if margin - MARGIN_TOLERANCE * (1.0 + abs(score)) != score:
            continue
        found += 1
        assert verify_row(milp, row, margin=margin).verified, a
    assert found


def test_verify_row_with_a_broken_constraint():
    space, net = space_and_net()
    space.immutable("n")
    m = cfopt.Explainer(net, space).milp
    m.set_factual(FACTUAL)
    m.set_target(1)
    v = verify_row(m, pd.DataFrame({"a": [6.0], "n": [2], "c": ["red"]}), margin=0.001)
    assert v.predicted == 1 and v.problems and not v.verified
    assert v.score == pytest.approx(1.0, abs=1e-6) and v.short_of is None
    assert "breaks the declared constraint(s)" in failed_checks(m, 1, v.problems)


def test_verified_solution_takes_the_first_verified_candidate(milp):
    """The snapped candidate first; the plain one when only it verifies; the snapped
    one, unverified, when neither does."""
    hold(milp, 6.0, 1.0)
    v = verified_solution(milp, 0.001)
    assert v.verified and v.row["a"].iloc[0] == 6.0
    x0 = pyo.value(milp.x0["a"])
    hold(milp, x0 + 5e-6, 1.0)  # snapped: the factual (class 0); plain: class 0 too
    v = verified_solution(milp, 0.001)
    assert not v.verified and v.row["a"].iloc[0] == 2.0 and v.predicted == 0


def test_verified_solution_falls_back_to_the_unsnapped_point():
    """A model whose class changes within SNAP of the factual: the snapped candidate is
    the factual (not the target); the plain one is returned."""
    space, _ = space_and_net()
    net = torch.nn.Sequential(torch.nn.Linear(5, 1))
    with torch.no_grad():  # logit 1e6·(a/10) - 2e5 - 0.5: class 1 from a = 2 + 5e-6
        net[0].weight.zero_()
        net[0].weight[0, 0] = 1e6
        net[0].bias.fill_(-2e5 - 0.5)
    m = cfopt.Explainer(net, space).milp
    m.set_factual(FACTUAL)
    m.set_target(1)
    hold(m, 2.0 + 9e-6, 1.0)
    v = verified_solution(m, 0.001)
    assert v.verified and v.row["a"].iloc[0] == pytest.approx(2.0 + 9e-6, abs=1e-12)


def test_start_of_sets_codes_and_one_hots(milp):
    start = start_of(milp, pd.DataFrame({"a": [7.5], "n": [4], "c": ["green"]}))
    a, a_offset, a_width = code_variable(milp, milp.space, "a")
    n, n_offset, n_width = code_variable(milp, milp.space, "n")
    assert start[a] == pytest.approx((7.5 - a_offset) / a_width) == pytest.approx(0.75)
    assert start[n] == 4.0
    assert [start[milp.onehot["c", level]] for level in ("blue", "green", "red")] \
        == [0.0, 1.0, 0.0]
    assert len(start) == 5


def test_region_intervals_map_inputs_back_to_codes(milp):
    """An affine input a·x + b of a region [lo, hi] allows the codes (lo - b)/a to
    (hi - b)/a (sorted for a negative slope), intersected over the inputs of one
    feature; an end on the factual's own input is the factual's code exactly."""
    from cfopt.space.encoding import InputSpec

    own = np.array([0.2, 0.2, 0.0])
    specs = [InputSpec("affine", "a", a=0.1, b=0.0), InputSpec("affine", "n", a=-0.5, b=3.0),
             InputSpec("affine", "a", a=0.2, b=-1.0)]
    region = [(0.2, 0.7), (0.5, 2.0), (-1.0, 0.6)]
    out = region_intervals(milp, specs, region, own)
    assert out["a"] == (2.0, pytest.approx(7.0))
    assert out["n"] == (pytest.approx(2.0), pytest.approx(5.0))
    flat = [InputSpec("affine", "a", a=0.0, b=1.0), InputSpec("indicator", "c", level="red"),
            InputSpec("affine", "n", a=1.0, b=0.0)]
    assert region_intervals(milp, flat, [(0.0, 1.0), (0.0, 1.0), (1.0, 3.0)],
                            np.array([1.0, 1.0, 1.0])) == {"n": (1.0, 3.0)}
    # 0.17 · 2 + 0.1 mapped back is 2.0000000000000004: the factual's own input is 2.0
    spec = [InputSpec("affine", "a", a=0.17, b=0.1)]
    own = np.array([0.17 * 2.0 + 0.1])
    assert (own[0] - 0.1) / 0.17 != 2.0
    assert region_intervals(milp, spec, [(own[0], 1.5)], own)["a"][0] == 2.0


class Confine(ConstraintBlock):
    """A block whose own choices hold on given code intervals (records its calls)."""

    def __init__(self, intervals, witness: bool = False):
        super().__init__("confine")
        self.intervals, self.witness, self.seen = intervals, witness, []

    def build(self, m, block):
        pass

    def violations(self, m, factual, row):
        return []

    @property
    def needs_witness(self) -> bool:
        return self.witness

    def feature_intervals(self, m, block):
        self.seen.append((m, block))
        return self.intervals


def confined(intervals, witness=False, net=None):
    space, own_net = space_and_net()
    block = Confine(intervals, witness)
    m = cfopt.Explainer(net or own_net, space, constraints=[block]).milp
    m.set_factual(FACTUAL)
    m.set_target(1)
    return m, block


@pytest.mark.parametrize("interval, solver, decoded_n", [
    ((1 + 1.5e-9, 5.0), 1.0, 2),   # 1.5e-9 above 1: not 1 within 1e-9·max(1, |lo|)
    ((3 + 2e-9, 5.0), 3.0, 3),     # within 1e-9·3 of 3
    ((0.0, 3 - 2e-9), 4.0, 3),
    ((0.0, 1 - 1.5e-9), 1.0, 0),
    ((2.0, 2.0), 3.0, 2),          # a one-point interval
    ((2.5, 2.6), 4.0, 4),          # no integer inside: the value is left as it is
])
def test_integral_codes_are_moved_into_a_blocks_interval(interval, solver, decoded_n):
    m, block = confined({"n": interval})
    hold(m, 6.0, solver)
    assert [r["n"] for r in decoded(m)] == [decoded_n]
    assert block.seen and all(seen == (m, m.component("confine")) for seen in block.seen)


def test_continuous_codes_are_moved_into_a_blocks_interval():
    m, _ = confined({"a": (6.5, 7.0)})
    hold(m, 6.0, 1.0)
    assert decoded(m)[0]["a"] == 6.5


@pytest.mark.parametrize("interval, solver", [((2.0, 7.0), 2.0 + 5e-6),
                                              ((0.0, 2.0), 2.0 - 5e-6)])
def test_snapping_to_a_factual_on_an_end_of_the_interval(interval, solver):
    """The factual's code on an end of the decoded interval is inside it: snapped."""
    m, _ = confined({"a": interval})
    hold(m, solver, 1.0)
    assert [r["a"] for r in decoded(m)] == [2.0, pytest.approx(solver, abs=1e-12)]


def test_a_witness_block_is_checked_at_the_solvers_point():
    """A block that reads the solver's values verifies the solver's decoded point
    (``witness=True``), never a raw row alone."""
    m, _ = confined({}, witness=True)
    hold(m, 6.0, 1.0)
    v = verified_solution(m, 0.001)
    assert v.verified and not v.problems
    assert not verify_row(m, v.row, margin=0.001).verified


def test_verified_solution_checks_the_margin(milp):
    hold(milp, 5.0005, 1.0)  # class 1 by a score of 0.0005 < 0.001
    v = verified_solution(milp, 0.001)
    assert not v.verified and v.short_of == 0.001 and v.predicted == 1
    assert verified_solution(milp).verified


def wide_model():
    """Continuous p in [0, 1], q in [-1000, -500], r in [500, 1000], s in [-500, 500]
    and a categorical c first, at the factual (x, 0.5, -999, 999, 0)."""
    frame = pd.DataFrame({"c": ["x", "y", "z"], "p": [0.0, 1.0, 0.5],
                          "q": [-1000.0, -500.0, -700.5], "r": [500.0, 1000.0, 700.5],
                          "s": [-500.0, 500.0, 0.5]})
    space = cfopt.FeatureSpace.from_frame(frame)
    net = torch.nn.Sequential(torch.nn.Linear(space.transform(frame).shape[1], 1))
    m = cfopt.Explainer(net, space).milp
    m.set_factual(pd.DataFrame({"c": ["x"], "p": [0.5], "q": [-999.0], "r": [999.0],
                                "s": [0.0]}))
    return m, space


def test_snap_is_relative_to_the_range():
    """A move of exactly SNAP × range is snapped (p from 0 to 1e-6 on [0, 1]); on q
    (range 500) a move of 1e-4 < 5e-4 is snapped too."""
    for name, factual, move in (("p", 0.0, 1e-6), ("q", -999.0, 1e-4)):
        m, space = wide_model()
        m.x0["p"] = 0.0  # the factual's p on its lower bound
        values = {"p": 0.0, "q": -999.0, "r": 999.0, "s": 0.0, name: factual + move}
        for other, value in values.items():
            var, offset, w = code_variable(m, space, other)
            var.set_value((value - offset) / w)
        for level in ("x", "y", "z"):
            m.onehot["c", level].set_value(float(level == "x"))
        rows = [r.iloc[0].to_dict() for r in candidates(m)]
        assert [r[name] for r in rows] == [factual, pytest.approx(factual + move, abs=1e-12)]


def test_round_off_is_relative_to_the_largest_magnitude():
    """No move within 64 ulps of max(|lower|, |upper|, range): exactly 2**-46 on [0, 1]
    is no move; on [-1000, -500] and [500, 1000] a move of 1e-11 (< 64 ulps of 1000,
    > 64 ulps of 500) is no move either."""
    m, space = wide_model()
    for level in ("x", "y", "z"):
        m.onehot["c", level].set_value(float(level == "y"))
    for name, value in (("p", 0.5 + 2.0**-46), ("q", -999.0 + 1e-11), ("r", 999.0 - 1e-11),
                        ("s", 1e-11)):
        var, offset, w = code_variable(m, space, name)
        var.set_value((value - offset) / w)
    (row,) = [r.iloc[0].to_dict() for r in candidates(m)]
    assert row == {"c": "y", "p": 0.5, "q": -999.0, "r": 999.0, "s": 0.0}
    start = start_of(m, pd.DataFrame({"c": ["y"], "p": [0.25], "q": [-600.0], "r": [750.0],
                                      "s": [0.0]}))
    assert start[m.onehot["c", "y"]] == 1.0 and start[m.onehot["c", "x"]] == 0.0
    assert start[code_variable(m, space, "q")[0]] == pytest.approx(0.8)  # (-600 + 1000) / 500
    assert start[code_variable(m, space, "r")[0]] == pytest.approx(0.5)


def test_failed_checks_joins_every_failure(milp):
    assert failed_checks(milp, 1, []) == "it passed every check"
    said = failed_checks(milp, 0, ["a broke"], 0.0002, 0.001)
    assert said.count(" and ") == 2 and said.startswith("the real model predicts 0")
    assert said.endswith("and it breaks the declared constraint(s) ['a broke']")
