"""The threshold levels of CP-SAT's features (:mod:`cfopt.solvers.cpsat.levels`), by hand,
with no solver: a level's codes, which levels are admissible from the factual's, their
distances and decoded points, the library's level of an input, and the breaks built
from a forest index's cuts (affine inputs of either sign, integer features)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cfopt.formulations.tree_regions import ForestIndex
from cfopt.solvers.cpsat.levels import (
    INSIDE,
    Break,
    NumericLevels,
    actionable,
    category_levels,
    goes_left,
    numeric_levels,
)
from cfopt.space.feature import Feature

U = Feature("u", "continuous", 0.0, 10.0)
K = Feature("k", "integer", 0, 9)
#: splits near 3 and 6: the MILP's sides overlap by 0.01, the library's are 0.02 off
B3 = Break(3.01, 2.99, 2.98, 3.02)
B6 = Break(6.01, 5.99, 5.98, 6.02)


def levels(x0=4.0, own=1, lo=0.0, hi=10.0, w=2.0, feature=U, breaks=(B3, B6)):
    return NumericLevels(feature, x0, own, lo, hi, w, list(breaks))


def index(theta, left_of=None, rule="le"):
    """A forest index of cuts on input 0 at ``theta`` (no tree: the cuts only)."""
    theta = np.asarray(theta, dtype=float)
    return ForestIndex((), np.zeros(len(theta), dtype=np.int64), theta + 0.02, theta - 0.02,
                       theta - 0.04, theta + 0.04, theta, theta, rule, False, {})


def test_intervals_of_the_milp_and_of_the_library():
    lv = levels()
    assert lv.n_levels == 3
    assert lv.interval(0, sure=False) == (0.0, 3.01) and lv.interval(0, sure=True) == (0.0, 2.98)
    assert lv.interval(1, sure=False) == (2.99, 6.01)
    assert lv.interval(1, sure=True) == (3.02, 5.98)
    assert lv.interval(2, sure=False) == (5.99, 10.0)
    assert lv.interval(2, sure=True) == (6.02, 10.0)
    narrow = levels(lo=1.0, hi=8.0)  # within the admissible codes
    assert narrow.interval(0, False) == (1.0, 3.01) and narrow.interval(2, True) == (6.02, 8.0)
    assert levels(lo=7.0).interval(0, False) == (7.0, 3.01)  # empty


def test_integer_intervals_are_whole_codes_within_a_tolerance():
    lv = levels(5, 1, 0, 9, 1.0, K, [Break(3, 4, 3, 4), Break(6, 7, 6, 7)])
    assert lv.interval(0, False) == (0, 3) and lv.interval(2, True) == (7, 9)
    assert all(isinstance(v, int) for v in lv.interval(1, False))
    off = levels(5, 1, 2.5, 8.9999999, 1.0, K, [Break(3.00000001, 4, 3, 4)])
    assert off.interval(0, False) == (3, 3) and off.interval(1, False) == (4, 9)
    assert levels(5, 1, 3.0000002, 9, 1.0, K, []).interval(0, False) == (4, 9)


def test_admissible_levels_lie_on_their_side_of_the_factual():
    assert levels().admissible() == [0, 1, 2]
    assert levels(lo=4.0).admissible() == [1, 2]  # increase-only: nothing below
    assert levels(lo=4.0, hi=4.0).admissible() == [1]
    # the factual at 3.0, on the low side; decrease-only: level 1's MILP interval
    # [2.99, 3.0] is not empty, but a point of it is above the factual's code
    assert levels(x0=3.0, own=0, hi=3.0).admissible() == [0]
    assert levels(x0=3.0, own=1, lo=3.0).admissible() == [1, 2]
    # admissible by the MILP's sides, where the library's leave nothing
    assert levels(x0=3.0, own=0, hi=3.01).admissible() == [0, 1]
    # a level of one code is admissible
    ints = levels(5, 1, 0, 7, 1.0, K, [Break(3, 4, 3, 4), Break(6, 7, 6, 7)])
    assert ints.admissible() == [0, 1, 2]
    assert levels(5, 1, 3, 9, 1.0, K, [Break(3, 4, 3, 4), Break(6, 7, 6, 7)]).admissible() \
        == [0, 1, 2]
    assert levels(5, 1, 4, 9, 1.0, K, [Break(3, 4, 3, 4), Break(6, 7, 6, 7)]).admissible() \
        == [1, 2]


def test_distances_are_weighted_and_zero_at_the_factuals_level():
    lv = levels()
    assert lv.distance(1) == 0.0
    assert lv.distance(0) == pytest.approx(2.0 * (4.0 - 3.01))
    assert lv.distance(2) == pytest.approx(2.0 * (5.99 - 4.0))
    # within rounding of a split the MILP's sides overlap: no distance, not a negative one
    assert levels(x0=3.0, own=0).distance(1) == 0.0
    assert levels(x0=3.0, own=1).distance(0) == 0.0


def test_decoded_points_are_surely_on_their_level():
    lv = levels()
    assert lv.decode(1) == 4.0
    inside = INSIDE * 10.0
    assert lv.decode(0) == 2.98 - inside and lv.decode(2) == 6.02 + inside
    assert lv.decode(0) < 2.98 < 3.02 < lv.decode(2)
    # the factual inside a level it is not sent to (by hand): the factual itself
    assert levels(x0=4.5, own=0).decode(1) == 4.5
    # at the feature's own bound (no split there) the point stays on the bound
    assert levels(x0=0.0, own=1).decode(0) == 0.0
    assert levels(x0=10.0, own=1).decode(2) == 10.0
    # the magnitude is the feature's largest bound or width
    for lower, upper, size in ((-20.0, 10.0, 30.0), (-40.0, -30.0, 40.0), (5.0, 30.0, 30.0)):
        f = Feature("v", "continuous", lower, upper)
        m = (lower + upper) / 2
        lv = NumericLevels(f, lower, 0, lower, upper, 1.0, [Break(m, m, m - 0.5, m + 0.5)])
        assert lv.decode(1) == m + 0.5 + INSIDE * size


def test_decoding_between_close_splits_and_in_a_narrow_level():
    # splits within rounding of each other: no sure interval, the MILP's
    close = levels(x0=5.0, own=2, breaks=[B3, Break(3.03, 3.0, 3.0, 3.04)])
    assert close.decode(1) == 3.03 - INSIDE * 10.0
    close = levels(x0=1.0, own=0, breaks=[B3, Break(3.03, 3.0, 3.0, 3.04)])
    assert close.decode(1) == 2.99 + INSIDE * 10.0
    # the library's sides leave one point: that point
    one = levels(x0=5.0, own=2, breaks=[B3, Break(3.03, 3.0, 3.02, 3.04)])
    assert one.decode(1) == 3.02
    # a level narrower than the margin: its middle
    big = Feature("v", "continuous", 0.0, 1e9)
    lv = NumericLevels(big, 0.0, 0, 0.0, 1e9, 1.0,
                       [Break(100.0, 100.0, 100.0, 100.0), Break(101, 101, 100.000001, 101)])
    assert lv.decode(1) == pytest.approx(100.0000005, abs=1e-12)


def test_integer_decoding_is_a_whole_code():
    lv = levels(5, 1, 0, 9, 1.0, K, [Break(3, 4, 3, 4), Break(6, 7, 6, 7)])
    assert (lv.decode(0), lv.decode(1), lv.decode(2)) == (3, 5, 7)


def test_the_library_level_of_an_input():
    idx = index([3.0, 6.0])
    lv = levels(breaks=[Break(3.01, 2.99, 2.98, 3.02, [(0, 0, True)]),
                        Break(6.01, 5.99, 5.98, 6.02, [(1, 0, True)])])
    assert [lv.level_of(np.array([v]), idx) for v in (2.0, 3.0, 3.5, 6.0, 6.5)] == \
        [0, 0, 1, 1, 2]
    # an input whose left side is the high side of the code
    flipped = levels(breaks=[Break(3.01, 2.99, 2.98, 3.02, [(0, 0, False)])])
    assert flipped.level_of(np.array([2.0]), idx) == 1
    assert flipped.level_of(np.array([4.0]), idx) == 0
    # the library's sides out of order: refused, naming the feature
    wrong = levels(breaks=[Break(3.01, 2.99, 2.98, 3.02, [(1, 0, True)]),
                           Break(6.01, 5.99, 5.98, 6.02, [(0, 0, True)])])
    with pytest.raises(AssertionError, match="feature 'u': the library's sides of its splits "
                                             "are not monotone in its code"):
        wrong.level_of(np.array([4.0]), idx)
    # ``<``: an input at the threshold goes right
    assert lv.level_of(np.array([3.0]), index([3.0, 6.0], rule="lt")) == 1


def test_breaks_of_an_increasing_input():
    """Input 0 = 2 code + 1; cuts at inputs 7 and 13 (codes 3 and 6), and a second cut at
    the same switching point as the first: one break with both cuts."""
    idx = index([7.0, 13.0, 7.0])
    idx.cut_switch[2] = 7.0
    idx.cut_input[:] = [0, 0, 0]
    lv = numeric_levels(U, [(0, 2.0, 1.0)], [1, 0, 2], idx, 4.0, (0.0, 10.0), 0.5,
                        np.array([9.0]))
    assert [v for b in lv.breaks for v in (b.low_end, b.high_start, b.sure_low_end,
                                           b.sure_high_start)] == \
        pytest.approx([3.01, 2.99, 2.98, 3.02, 6.01, 5.99, 5.98, 6.02])
    assert [b.cuts for b in lv.breaks] == [[(0, 0, True), (2, 0, True)], [(1, 0, True)]]
    assert (lv.own, lv.x0, lv.lo, lv.hi, lv.w, lv.feature) == (1, 4.0, 0.0, 10.0, 0.5, U)
    assert numeric_levels(U, [(0, 2.0, 1.0)], [0, 1], idx, 8.0, (0.0, 10.0), 1.0,
                          np.array([17.0])).own == 2


def test_breaks_of_two_inputs_of_one_feature_in_code_order():
    """Input 0 = 2 code + 1 (cuts at codes 3 and 6), input 1 = code / 2 - 1 (a cut at
    code 5): the breaks in the order of their codes."""
    idx = index([7.0, 13.0, 1.5])
    idx.cut_input[:] = [0, 0, 1]
    lv = numeric_levels(U, [(0, 2.0, 1.0), (1, 0.5, -1.0)], [0, 1, 2], idx, 4.0, (0.0, 10.0),
                        1.0, np.array([9.0, 1.0]))
    assert [b.cuts for b in lv.breaks] == [[(0, 0, True)], [(2, 1, True)], [(1, 0, True)]]
    assert lv.breaks[1].low_end == pytest.approx(5.04) and lv.own == 1


def test_breaks_of_a_decreasing_input():
    """Input 0 = -2 code + 1: its left side is the high side of the code."""
    idx = index([-5.0, -11.0])
    lv = numeric_levels(U, [(0, -2.0, 1.0)], [0, 1], idx, 4.0, (0.0, 10.0), 1.0,
                        np.array([-7.0]))
    assert [v for b in lv.breaks for v in (b.low_end, b.high_start, b.sure_low_end,
                                           b.sure_high_start)] == \
        pytest.approx([3.01, 2.99, 2.98, 3.02, 6.01, 5.99, 5.98, 6.02])
    assert [b.cuts for b in lv.breaks] == [[(0, 0, False)], [(1, 0, False)]]
    assert lv.own == 1


def test_breaks_of_an_integer_feature_are_whole_codes():
    idx = index([3.5, 6.5])
    idx.cut_sure_left[:] = [3.4, 6 - 1e-13]  # within float64 rounding of 6
    lv = numeric_levels(K, [(0, 1.0, 0.0)], [0, 1], idx, 4.0, (0.0, 9.0), 1.0,
                        np.array([4.0]))
    assert [(b.low_end, b.high_start, b.sure_low_end, b.sure_high_start) for b in lv.breaks] \
        == [(3, 4, 3, 4), (6, 7, 6, 7)]
    assert lv.own == 1
    # an end within float64 rounding of the feature's magnitude of a code is that code
    # (a relative tolerance of 1e-7 put the break of a split of codes near 5e7 five codes
    # up: the CP model then sent codes the library sends right to the low side)
    for top, end, last in ((1e4, 1000 - 1e-12, 1000), (1e4, 1000 - 1e-6, 999),
                           (1e8, 50000004.0, 50000004), (1e8, 50000004.0 - 1e-6, 50000004),
                           (1e8, 50000004.5, 50000004), (1e8, 50000004.0 - 1e-3, 50000003),
                           (1.0, 1 - 1e-13, 1), (1.0, 1 - 1e-9, 0)):
        big = Feature("n", "integer", 0, top)
        idx = index([end + 0.5])
        idx.cut_sure_left[:] = [end]
        lv = numeric_levels(big, [(0, 1.0, 0.0)], [0], idx, 0.0, (0.0, top), 1.0,
                            np.array([0.0]))
        assert (lv.breaks[0].low_end, lv.breaks[0].high_start) == (last, last + 1), end


def test_categories_sides_and_actionability():
    f = Feature("c", "categorical", categories=("p", "q", "r"))
    assert category_levels(f, 1, immutable=False).allowed == [0, 1, 2]
    fixed = category_levels(f, 1, immutable=True)
    assert (fixed.allowed, fixed.own, fixed.feature) == ([1], 1, f)
    idx = index([3.0])  # sure sides 2.96 and 3.04: the middle is 3.0
    assert goes_left(idx, 0, 3.0) and not goes_left(idx, 0, 3.0 + 1e-9)
    assert actionable(U, 4.0, False, "any") == (0.0, 10.0)
    assert actionable(U, 4.0, True, "any") == (4.0, 4.0)
    assert actionable(U, 4.0, False, "increase") == (4.0, 10.0)
    assert actionable(U, 4.0, False, "decrease") == (0.0, 4.0)
    assert math.isclose(INSIDE, 64 * np.finfo(np.float64).eps)
