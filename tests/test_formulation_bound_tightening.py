"""Bound tightening of the ReLU big-M constants (:mod:`cfopt.formulations.bound_tightening`)
on a tiny network over a triangle (the unit box cut by x0 + x1 <= 1): the first layer's
LP bounds are the extremes at the triangle's vertices, widened by the tolerance; the
later layers' only shrink and still hold every point; stable neurons are fixed and
counted; integrality is restored; a side the LP does not solve keeps its bound."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest

import cfopt
from cfopt.formulations.bound_tightening import relax_integrality, tighten_relu_bounds
from cfopt.formulations.robustness import ShiftedNetwork
from cfopt.models import ReLUNetwork
from cfopt.solvers import SolverSettings, make_solver

#: first layer over the unit box: [-1, 1] (x0 - x1), [0, 4] (2 x0 + 2 x1: lb exactly 0),
#: [-2, 0.5] (-1.5 x0 - x1 + 0.5), [-1, 0] (inactive: ub exactly 0), [1, 1.75] (active),
#: [-2.6, 0.4], [-0.5, 1.5]; over the triangle x0 + x1 <= 1: [-1, 1], [0, 2], [-1, 0.5],
#: [-0.5, 0], [1, 1.75], [-1.1, 0.4], [-0.5, 0.5]
PARAMS = [(np.array([[1.0, -1.0], [2.0, 2.0], [-1.5, -1.0], [-0.5, -0.5], [0.75, 0.0],
                     [-1.5, -1.5], [1.0, 1.0]]),
           np.array([0.0, 0.0, 0.5, 0.0, 1.0, 0.4, -0.5])),
          (np.array([[1.0, -2.0, 0.5, 1.0, -0.5, 0.3, -0.2],
                     [-1.0, 1.0, 1.0, 0.0, 0.25, -0.4, 0.6]]),
           np.array([0.1, -0.2])),
          (np.array([[1.0, -1.0]]), np.array([0.05]))]
VERTICES = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])


def triangle(cut: bool = True):
    """The features x in the unit box (x0 + x1 <= 1 when ``cut``) and the network's
    block on them."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(2), bounds=(0.0, 1.0))
    if cut:
        m.cut = pyo.Constraint(expr=m.x[0] + m.x[1] <= 1.0)
    pred = cfopt.formulations.add_predictor(m, ShiftedNetwork(PARAMS), [m.x[0], m.x[1]])
    return m, pred


def widened(value: float, side: int) -> float:
    return value + side * 1e-6 * max(1.0, abs(value))


def hidden_bounds(pred) -> list[tuple[float, float]]:
    return [(float(lb), float(ub)) for lbs, ubs in pred.layer_bounds()[:-1]
            for lb, ub in zip(lbs, ubs)]


def test_lp_tightening_gives_the_first_layers_extremes_over_the_triangle():
    m, pred = triangle()
    net = ReLUNetwork.from_parameters(PARAMS)
    before = pred.layer_bounds()
    report = tighten_relu_bounds(m, pred, "lp")
    at_vertices = net.pre_activations(VERTICES)[0]
    lb, ub = pred.layer_bounds()[0]
    for j in range(7):
        lo, hi = at_vertices[:, j].min(), at_vertices[:, j].max()
        expected_lb = max(before[0][0][j], widened(lo, -1))
        expected_ub = min(before[0][1][j], widened(hi, 1))
        assert lb[j] == pytest.approx(expected_lb, abs=1e-9), j
        assert ub[j] == pytest.approx(expected_ub, abs=1e-9), j
    assert ub[2] == 0.5  # the box's bound, tighter than the widened LP's
    assert ub[1] == pytest.approx(2.0 + 2e-6, abs=1e-9)  # the box's 4 cut to 2 (widened)
    assert lb[5] == pytest.approx(-1.1 - 1.1e-6, abs=1e-9)  # -2.6 cut to -1.1
    assert ub[6] == pytest.approx(0.5 + 1e-6, abs=1e-9)  # 1.5 cut to 0.5
    points = np.random.default_rng(0).dirichlet(np.ones(3), 300) @ VERTICES
    for (lo, hi), (blo, bhi), values in zip(pred.layer_bounds(), before,
                                            net.pre_activations(points)):
        assert (values >= lo - 1e-9).all() and (values <= hi + 1e-9).all()
        assert (lo >= blo - 1e-9).all() and (hi <= bhi + 1e-9).all()
    last = pred.dense_layers()[-1]
    assert pred.outputs[0].bounds == last.zhat[0].bounds
    assert pred.layer_bounds()[-1][1][0] < before[-1][1][0] - 0.1
    assert report.method == "lp" and report.neurons == 9 and report.lp_solves == 2 * 10
    assert report.seconds > 0.0
    assert report.mean_width_after < report.mean_width_before
    assert report.to_dict()["neurons"] == 9


def test_the_report_counts_stable_neurons_and_mean_widths():
    """Interval bounds: neurons 1 (lb = 0), 3 (ub = 0) and 4 are stable; widths averaged
    over the hidden neurons only; the interval method changes no bound and solves
    nothing; LP tightening is the default method."""
    m, pred = triangle(cut=False)
    before = hidden_bounds(pred)
    report = tighten_relu_bounds(m, pred, "interval")
    assert hidden_bounds(pred) == before
    assert report.lp_solves == 0 and report.method == "interval"
    assert report.stable_before == report.stable_after == 3
    widths = [ub - lb for lb, ub in before]
    assert report.mean_width_before == pytest.approx(np.mean(widths))
    assert report.mean_width_after == report.mean_width_before
    lp = tighten_relu_bounds(m, pred)
    assert lp.method == "lp" and lp.lp_solves == 20
    assert lp.stable_before == 3 and lp.stable_after >= 3


def test_the_interval_method_fixes_the_stable_binaries_again():
    m, pred = triangle(cut=False)
    q = pred.dense_layers()[0].q_relu
    stable = [j for j in q if q[j].fixed]
    assert stable == [1, 3, 4]
    for j in stable:
        q[j].unfix()
    pred.outputs[0].setlb(None)
    tighten_relu_bounds(m, pred, "interval")
    assert [(q[j].fixed, q[j].value) for j in stable] == [(True, 1), (True, 0), (True, 1)]
    assert pred.outputs[0].lb == pred.dense_layers()[-1].zhat[0].lb


def test_integrality_is_restored_and_the_answer_kept():
    """After LP tightening every binary is binary again (fixed ones fixed), and the
    MILP's least and greatest logit over the triangle are unchanged."""
    m, pred = triangle()
    extremes = []
    for tighten in (False, True):
        m, pred = triangle()
        if tighten:
            tighten_relu_bounds(m, pred, "lp")
            binaries = [v for v in m.component_data_objects(pyo.Var) if v.is_binary()]
            assert len(binaries) == 9
        found = []
        for sense in (pyo.minimize, pyo.maximize):
            m.objective = pyo.Objective(expr=pred.outputs[0], sense=sense)
            outcome = make_solver("highs").solve(m, SolverSettings(mip_gap=0.0))
            assert outcome.status is cfopt.Status.OPTIMAL
            found.append(pyo.value(m.objective))
            m.del_component(m.objective)
        extremes.append(found)
    np.testing.assert_allclose(extremes[0], extremes[1], atol=1e-7)


def test_relax_integrality_keeps_bounds_and_fixed_values():
    """Every integer variable, in sub-blocks too, becomes continuous within its bounds;
    fixed ones stay fixed; the saved domains and bounds restore them."""
    m = pyo.ConcreteModel()
    m.sub = pyo.Block()
    m.sub.q = pyo.Var(domain=pyo.Binary)
    m.q = pyo.Var(range(3), domain=pyo.Binary)
    m.k = pyo.Var(domain=pyo.Integers, bounds=(-2, 5))
    m.y = pyo.Var(bounds=(0.5, 1.5))
    m.q[2].fix(1)
    saved = relax_integrality(m)
    assert sorted(v.name for v, *_ in saved) == ["k", "q[0]", "q[1]", "q[2]", "sub.q"]
    assert all(v.domain is pyo.Reals for v, *_ in saved)
    assert all(v.bounds == ((-2, 5) if v is m.k else (0, 1)) for v, *_ in saved)
    assert m.q[2].fixed and m.q[2].value == 1
    assert [s[1:] for s in saved if s[0] is m.k] == [(pyo.Integers, -2, 5)]
    assert m.y.domain is pyo.Reals and m.y.bounds == (0.5, 1.5)


def test_a_side_the_lp_does_not_solve_keeps_its_bound():
    """An infeasible model (no optimum on either side): every bound stays."""
    m, pred = triangle()
    m.impossible = pyo.Constraint(expr=m.x[0] >= 2.0)
    before = hidden_bounds(pred)
    tighten_relu_bounds(m, pred, "lp")
    assert hidden_bounds(pred) == before


def test_an_encoding_without_layers_and_an_unknown_method():
    m = pyo.ConcreteModel()
    pred = cfopt.formulations.add_predictor(m, ShiftedNetwork([PARAMS[-1]]),
                                            input_bounds=[(0.0, 1.0)] * 2)
    bounds = pred.output_bounds()
    report = tighten_relu_bounds(m, pred, "lp")
    assert report.neurons == 0 and report.lp_solves == 0
    assert report.mean_width_before == report.mean_width_after == 0.0
    assert pred.output_bounds() == bounds
    with pytest.raises(ValueError, match=r"bound_tightening must be one of \('lp', "
                                         r"'interval'\) or None, got 'obbt'"):
        tighten_relu_bounds(m, pred, "obbt")
