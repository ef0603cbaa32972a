"""The cuts of a tree ensemble (:mod:`cfopt.formulations.tree_cuts`): the library's
decision at a split (float64 and float32, ``<=`` and ``<``), the sides of a cut on a
grid and on a continuous input, and the rows tying the cut binaries to the inputs."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest

from cfopt.formulations.tree_cuts import (
    _EPS,
    TOLERANCE_BAND,
    Cut,
    _boundary,
    _float32_sides,
    _goes_left,
    _grid_sides,
    add_cut_rows,
    default_rounding,
    make_cut,
)


def test_constants():
    assert TOLERANCE_BAND == 1e-4 and _EPS == 2.0 ** -52


def test_the_librarys_decision():
    assert _goes_left(1.0, 1.0, "le", False) and not _goes_left(1.0, 1.0, "lt", False)
    assert _goes_left(0.5, 1.0, "lt", False) and not _goes_left(1.5, 1.0, "le", False)
    theta = 0.1  # not a float32: float32(0.1) > 0.1
    assert float(np.float32(theta)) > theta
    assert _goes_left(theta, theta, "le", False)
    assert not _goes_left(theta, theta, "le", True)  # float32(0.1) > 0.1
    cut = Cut(0, 0.0, 0.0, 0.0, 0.0, theta, "le", True)
    assert not cut.goes_left(theta) and cut.goes_left(0.09)


def test_float32_sides_and_boundary():
    theta = 0.1
    t32 = np.float32(theta)
    below = float(np.nextafter(t32, np.float32(-np.inf)))
    assert _float32_sides(theta, "le") == (below, float(t32))
    assert _float32_sides(theta, "lt") == (below, float(t32))
    exact = 0.5  # a float32: <= keeps it left, < sends it right
    up = float(np.nextafter(np.float32(0.5), np.float32(np.inf)))
    down = float(np.nextafter(np.float32(0.5), np.float32(-np.inf)))
    assert _float32_sides(exact, "le") == (0.5, up)
    assert _float32_sides(exact, "lt") == (down, 0.5)
    theta = float(np.float32(0.3)) + 1e-9  # float32 below theta
    t32 = np.float32(theta)
    assert float(t32) < theta
    assert _float32_sides(theta, "le") == (float(t32), float(np.nextafter(t32, np.float32(1))))
    assert _boundary(0.7, "le", False) == 0.7
    assert _boundary(0.5, "le", True) == (0.5 + up) / 2
    assert _boundary(0.5, "lt", True) == (down + 0.5) / 2


def test_grid_sides():
    grid = (0.0, 1.0)
    assert _grid_sides(2.5, "le", grid, False, 0.0) == (2.0, 3.0)
    assert _grid_sides(2.0, "le", grid, False, 0.0) == (2.0, 3.0)
    assert _grid_sides(2.0, "lt", grid, False, 0.0) == (1.0, 2.0)
    assert _grid_sides(2.999, "le", grid, False, 0.0) == (2.0, 3.0)
    assert _grid_sides(0.5, "le", (0.25, 0.5), False, 0.0) == (0.25, 0.75)
    # a grid value within rounding of theta takes the library's side of its value
    assert _grid_sides(3.0 + 1e-12, "le", grid, False, 1e-9) == (3.0, 4.0)
    assert _grid_sides(3.0 - 1e-12, "le", grid, False, 1e-9) == (3.0, 4.0)  # seen as theta
    assert _grid_sides(3.0 - 1e-12, "le", grid, False, 1e-9,
                       lambda v: v + 1e-11) == (2.0, 3.0)
    assert _grid_sides(3.0 - 1e-12, "le", grid, False, 0.0) == (2.0, 3.0)
    assert _grid_sides(3.0 + 1e-12, "lt", grid, False, 1e-9, lambda v: v) == (3.0, 4.0)
    # within 4 ulps of theta even without rounding
    assert _grid_sides(3.0 - 2 * _EPS * 3, "le", grid, False, 0.0) == (3.0, 4.0)
    with pytest.raises(AssertionError, match="^no grid value near threshold 2.0 goes left$"):
        _grid_sides(2.0, "le", (0.0, 1e-12), False, 1.0, lambda v: 10.0)


def test_make_cut():
    cut = make_cut(3, 2.5, "le", False, (0.0, 1.0), 0.0)
    assert cut == Cut(3, 2.0, 3.0, 2.0, 3.0, 2.5, "le", False)
    lib = make_cut(0, 3.0 - 1e-12, "le", False, (0.0, 1.0), 1e-9, lambda v: v + 1e-11)
    assert (lib.left, lib.right) == (2.0, 3.0)
    cont = make_cut(1, 0.5, "le", False, None, 1e-10)
    delta = 1e-10 + 4 * _EPS * 0.5
    assert cont == Cut(1, 0.5 + delta, 0.5 - delta, 0.5 - delta, 0.5 + delta, 0.5, "le", False)
    neg = make_cut(1, -0.5, "le", False, None, 0.0)
    assert neg.left == -0.5 + 4 * _EPS * 0.5 and neg.right == -0.5 - 4 * _EPS * 0.5
    f32 = make_cut(0, 0.5, "lt", True, None, 0.0)
    beta = _boundary(0.5, "lt", True)
    assert f32.left == beta + 4 * _EPS * beta and f32.sure_left == beta - 4 * _EPS * beta
    assert f32.rule == "lt" and f32.float32 and f32.theta == 0.5


def test_default_rounding():
    assert default_rounding([(-3.0, 2.0), (0.0, 0.0), (1.0, 8.0)]) == [
        16 * _EPS * 3.0, 0.0, 16 * _EPS * 8.0]


def rows_model(cuts, bounds):
    sub = pyo.ConcreteModel()
    sub.inputs = pyo.Var(range(len(bounds)), bounds=(0, 1))
    sub.cuts = cuts
    add_cut_rows(sub, bounds)
    return sub


def holds(row):
    body = pyo.value(row.body)
    return bool((row.lower is None or body >= pyo.value(row.lower) - 1e-12) and (
        row.upper is None or body <= pyo.value(row.upper) + 1e-12))


def test_the_cut_rows():
    bounds = [(10.0, 20.0), (0.0, 4.0)]
    cuts = {(0, 1): Cut(0, 12.0, 13.0, 12.0, 13.0, 12.5, "le", False),
            (0, 2): Cut(0, 15.0, 16.0, 15.0, 16.0, 15.5, "le", False),
            (1, 1): Cut(1, 4.0, 0.0, 4.0, 0.0, 4.0, "le", False)}  # no row on either side
    sub = rows_model(cuts, bounds)
    assert list(sub.CUTS) == [(0, 1), (0, 2), (1, 1)]
    assert set(sub.cut_below) == {(0, 1), (0, 2)} and set(sub.cut_above) == {(0, 1), (0, 2)}
    assert list(sub.cut_order) == [(0, 1)]
    left, right = sub.cut_below[0, 1], sub.cut_above[0, 1]

    def at(x, s):
        sub.inputs[0].set_value((x - 10.0) / 10.0)
        sub.left_of[0, 1].set_value(s)
        return holds(left), holds(right)

    assert at(12.0, 1) == (True, True) and at(12.1, 1)[0] is False
    assert at(13.0, 0) == (True, True) and at(12.9, 0)[1] is False
    assert at(20.0, 0) == (True, True) and at(10.0, 1) == (True, True)
    assert at(20.0, 1)[0] is False and at(10.0, 0)[1] is False
    order = sub.cut_order[0, 1]
    sub.left_of[0, 2].set_value(0)
    sub.left_of[0, 1].set_value(1)
    assert not holds(order)
    sub.left_of[0, 2].set_value(1)
    assert holds(order)
    assert sub.left_of[0, 1].domain is pyo.Binary


def test_the_rule_and_float32_reach_the_sides():
    theta = float(np.float32(0.3)) + 1e-9  # float32(theta) < theta
    t32 = float(np.float32(theta))
    assert _float32_sides(theta, "lt") == (t32, float(np.nextafter(np.float32(t32),
                                                                   np.float32(1))))
    on_grid = make_cut(0, 2.0, "le", False, (0.0, 1.0), 0.0)
    assert (on_grid.left, on_grid.right) == (2.0, 3.0)
    assert (make_cut(0, 2.0, "lt", False, (0.0, 1.0), 0.0).left) == 1.0
    # float32(0.1) > 0.1: the grid value 0.1 goes right when compared in float32
    assert (make_cut(0, 0.1, "le", True, (0.0, 0.1), 0.0).left,
            make_cut(0, 0.1, "le", False, (0.0, 0.1), 0.0).left) == (0.0, 0.1)
    up = float(np.nextafter(np.float32(0.5), np.float32(np.inf)))
    beta = (0.5 + up) / 2
    cut = make_cut(0, 0.5, "le", True, None, 0.0)
    assert cut.sure_left == beta - 4 * _EPS * beta and cut.sure_right == beta + 4 * _EPS * beta


def test_the_candidates_of_a_grid_split():
    assert Cut(0, 0.0, 0.0, 0.0, 0.0, 1.0, "le", False).goes_left(1.0)
    assert not Cut(0, 0.0, 0.0, 0.0, 0.0, 1.0, "lt", False).goes_left(1.0)
    assert _grid_sides(12.5, "le", (10.0, 1.0), False, 0.0) == (12.0, 13.0)
    assert _grid_sides(1.0, "le", (0.25, 0.5), False, 0.0) == (0.75, 1.25)
    # three candidates within rounding that the library sends right: the fourth
    assert _grid_sides(2.0, "lt", (0.0, 1.0), False, 1.5, lambda v: 5.0) == (0.0, 1.0)
    # a grid value exactly at the rounding's reach is the library's
    assert _grid_sides(0.0, "le", (0.5, 1.0), False, 0.5, lambda v: -1.0) == (0.5, 1.5)
    # ... and 5 ulps away from theta = 1 is beyond the 4 of the default reach
    offset = 1.0 + 5 * _EPS
    assert _grid_sides(1.0, "lt", (offset, 1.0), False, 0.0, lambda v: 0.0) == (
        offset - 1.0, offset)


@pytest.mark.parametrize("bounds, left, right", [((0.0, 0.5), 0.2, 0.3),
                                                 ((-20.0, -10.0), -12.0, -11.0)])
def test_the_cut_rows_leave_every_point_on_the_chosen_side(bounds, left, right):
    sub = rows_model({(0, 1): Cut(0, left, right, left, right, (left + right) / 2, "le",
                                  False)}, [bounds])
    lo, hi = bounds
    for x in np.linspace(lo, hi, 11):
        sub.inputs[0].set_value((x - lo) / (hi - lo))
        sub.left_of[0, 1].set_value(1)
        assert holds(sub.cut_below[0, 1]) == (x <= left + 1e-12), x
        assert holds(sub.cut_above[0, 1])
        sub.left_of[0, 1].set_value(0)
        assert holds(sub.cut_above[0, 1]) == (x >= right - 1e-12), x
        assert holds(sub.cut_below[0, 1])
