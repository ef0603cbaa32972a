"""The ReLU network encoding (:mod:`cfopt.formulations.predictors.network`) on tiny
hand-built networks whose bounds, scales and worst cases are known by hand or by
numpy alone (:mod:`tests.robust_oracles`): the encoding reproduces the network on a
raw-unit box, its bounds are interval arithmetic in the network's units, the binaries
of stable neurons are fixed, the vertex envelope is tight at the points, and the
shifted networks reach exactly the least logit over the model shift."""

from __future__ import annotations

import logging

import numpy as np
import pyomo.environ as pyo
import pytest
import torch

import cfopt
from cfopt.formulations.predictors.network import (
    NetworkPredictorConstr,
    _initial_zero_outside_bounds,
    build_shifted_network,
    neuron_scales,
)
from cfopt.formulations.robustness import AdversaryModel, ShiftedNetwork, target_margins
from cfopt.models import ReLUNetwork
from cfopt.solvers import SolverSettings, make_solver

from .robust_oracles import delta_worst

#: 2 inputs, 3 hidden neurons, 1 logit; over the unit box the hidden pre-activations
#: lie in [-13, 7] (scale 7), [-0.5, 1.5] (scale 1) and [2, 2.5] (scale 2, stable)
HIDDEN = (np.array([[10.0, -10.0], [1.0, 1.0], [0.5, 0.0]]), np.array([-3.0, -0.5, 2.0]))
PARAMS = [HIDDEN, (np.array([[1.0, -2.0, 0.5]]), np.array([0.25]))]
#: two hidden layers and three logits (argmax)
DEEP = [(np.array([[1.0, -1.0], [2.0, 0.5], [-1.5, 1.0]]), np.array([0.1, -0.8, 0.3])),
        (np.array([[1.0, -2.0, 0.5], [-0.5, 1.0, 1.5]]), np.array([0.2, -0.1])),
        (np.array([[1.0, -1.0], [-0.5, 2.0], [0.3, 0.3]]), np.array([0.0, 0.1, -0.2]))]
UNIT = [(0.0, 1.0), (0.0, 1.0)]
#: a raw-unit box (offsets and widths far from the unit box's)
RAW = [(-5.0, 15.0), (100.0, 300.0)]


def embed(params, bounds, decision: str = "sign") -> NetworkPredictorConstr:
    classes = (0, 1) if decision == "sign" else tuple(range(len(params[-1][1])))
    m = pyo.ConcreteModel()
    pred = cfopt.formulations.add_predictor(
        m, ShiftedNetwork(params, decision, classes), input_bounds=bounds)
    assert isinstance(pred, NetworkPredictorConstr)
    return pred


def raw_params() -> list[tuple[np.ndarray, np.ndarray]]:
    """DEEP's first layer read on RAW's units: pre-activations of magnitude ~100."""
    w, b = DEEP[0]
    return [(w * np.array([0.5, 0.2]), b - 10.0)] + DEEP[1:]


def box_points(bounds, n: int, seed: int) -> np.ndarray:
    lo, hi = np.array(bounds).T
    corners = np.array([[lo[0], lo[1]], [lo[0], hi[1]], [hi[0], lo[1]], [hi[0], hi[1]]])
    return np.vstack([corners, lo + (hi - lo) * np.random.default_rng(seed).random((n, 2))])


def minimise(m: pyo.Block, expr) -> float:
    """The least value of ``expr`` over ``m`` (HiGHS, gap 0)."""
    m.test_objective = pyo.Objective(expr=expr)
    outcome = make_solver("highs").solve(m, SolverSettings(mip_gap=0.0))
    assert outcome.status is cfopt.Status.OPTIMAL, outcome.status
    value = pyo.value(m.test_objective)
    m.del_component("test_objective")
    return value


# ----------------------------------------------------------------- the encoding
@pytest.mark.parametrize("params, bounds, decision", [
    (PARAMS, UNIT, "sign"), (PARAMS, RAW, "sign"), (raw_params(), RAW, "argmax")])
def test_the_encoding_is_the_network_at_every_point_of_its_box(params, bounds, decision):
    """Inputs fixed at corners and inner points of the box, the encoding's logits are the
    network's, minimised and maximised (get_error), on a raw-unit box too."""
    pred = embed(params, bounds, decision)
    assert pred.get_error(box_points(bounds, 4, seed=1)) <= 1e-7


def test_neuron_scales_are_the_smaller_side_at_least_one():
    """s_j = max(1, min(|l_j|, |u_j|)) per hidden neuron, 1 for the logits; the block's
    scales are the same and the logits' bounds are the interval bounds."""
    net = ReLUNetwork.from_parameters(PARAMS)
    scales = neuron_scales(net, UNIT)
    np.testing.assert_array_equal(scales[0], [7.0, 1.0, 2.0])
    np.testing.assert_array_equal(scales[1], [1.0])
    pred = embed(PARAMS, UNIT)
    for got, expected in zip(pred.neuron_scales(), scales):
        np.testing.assert_array_equal(got, expected)
    low, high = net.box_bounds(np.zeros(2), np.ones(2))[-1]
    assert pred.output_bounds() == [(float(low[0]), float(high[0]))]


@pytest.mark.parametrize("params, bounds", [(PARAMS, UNIT), (raw_params(), RAW)])
def test_layer_bounds_are_interval_arithmetic_in_the_networks_units(params, bounds):
    """Every layer's bounds, read back in network units (block units times scales), are
    the interval bounds over the box, and each neuron's output has the bounds
    [0, max(0, u)] in the block's units (the logits: their own)."""
    pred = embed(params, bounds)
    net = pred.adapter.structure
    lo, hi = np.array(bounds).T
    expected = net.box_bounds(lo, hi)
    for (lb, ub), (elb, eub) in zip(pred.layer_bounds(), expected):
        np.testing.assert_allclose(lb, elb, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ub, eub, rtol=1e-12, atol=1e-12)
    for k, (layer, scale, (elb, eub)) in enumerate(zip(pred.dense_layers(),
                                                       pred.neuron_scales(), expected)):
        for j in layer.z:
            if k < len(expected) - 1:
                assert layer.z[j].lb == 0.0
                assert layer.z[j].ub == pytest.approx(max(0.0, eub[j] / scale[j]), abs=1e-12)
            else:
                assert layer.z[j].bounds == pytest.approx((elb[j], eub[j]), abs=1e-12)


def test_set_layer_bounds_fixes_the_stable_binaries_and_counts_them():
    """Bounds with a neuron at lb = 0 (active), one at ub = 0 (inactive) and one across 0:
    the stable ones' binaries are fixed to their side and counted, the other freed; the
    logits' bounds are the last layer's (not counted, however signed); a neuron made
    unstable again is freed."""
    pred = embed(PARAMS, UNIT)
    hidden = (np.array([0.0, -2.0, -1.0]), np.array([7.0, 0.0, 3.0]))
    stable = pred.set_layer_bounds([hidden, (np.array([0.5]), np.array([4.0]))])
    assert stable == 2
    layer, scale = pred.dense_layers()[0], pred.neuron_scales()[0]
    q = layer.q_relu
    assert (q[0].fixed, q[0].value) == (True, 1)
    assert (q[1].fixed, q[1].value) == (True, 0)
    assert not q[2].fixed
    for j in range(3):
        assert layer.zhat[j].bounds == pytest.approx((hidden[0][j] / scale[j],
                                                      hidden[1][j] / scale[j]))
    assert layer.z[0].bounds == pytest.approx((0.0, 1.0))  # 7 / scale 7
    assert layer.z[1].bounds == (0.0, 0.0)
    assert pred.outputs[0].bounds == (0.5, 4.0)
    for (lb, ub), (elb, eub) in zip(pred.layer_bounds(), [hidden, ([0.5], [4.0])]):
        np.testing.assert_allclose(lb, elb)
        np.testing.assert_allclose(ub, eub)
    assert pred.set_layer_bounds([(np.array([-1.0, -2.0, 1.0]), np.array([7.0, 1.0, 3.0])),
                                  (np.array([-4.0]), np.array([-0.5]))]) == 1
    assert not q[0].fixed and not q[1].fixed
    assert (q[2].fixed, q[2].value) == (True, 1)
    assert pred.outputs[0].bounds == (-4.0, -0.5)


def test_a_sub_box_keeps_the_encoding_exact_inside_it():
    """set_input_box over a sub-box (and over a hull's points): the layer bounds are the
    network's interval bounds there and the encoding is still the network inside."""
    pred = embed(raw_params(), RAW, "argmax")
    net = pred.adapter.structure
    lo, hi = np.array([0.0, 150.0]), np.array([10.0, 220.0])
    stable = pred.set_input_box(lo, hi)
    expected = net.box_bounds(lo, hi)
    assert stable == sum(int(((elb >= 0) | (eub <= 0)).sum()) for elb, eub in expected[:-1])
    for (lb, ub), (elb, eub) in zip(pred.layer_bounds(), expected):
        np.testing.assert_allclose(lb, elb, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(ub, eub, rtol=1e-12, atol=1e-9)
    assert pred.get_error(box_points(list(zip(lo, hi)), 3, seed=2)) <= 1e-7
    hull = np.array([[1.0, 160.0], [9.0, 170.0], [5.0, 215.0]])
    pred.set_input_box(lo, hi, hull=hull)
    expected = net.box_bounds(lo, hi, hull=hull)
    for (lb, ub), (elb, eub) in zip(pred.layer_bounds(), expected):
        np.testing.assert_allclose(lb, elb, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(ub, eub, rtol=1e-12, atol=1e-9)
    inside = np.random.default_rng(3).dirichlet(np.ones(3), 4) @ hull
    assert pred.get_error(np.vstack([hull, inside])) <= 1e-7


def test_fix_pattern_fixes_the_free_binaries_to_their_side_at_the_point():
    """fix_pattern(z): each free binary fixed to 1 where the pre-activation at z is > 0
    (0 where it is 0 or below), stable binaries untouched; the encoding then gives the
    network's logit at z and admits no input of another piece."""
    params = [(np.array([[1.0, -1.0], [1.0, 1.0], [0.5, 0.0]]), np.array([0.0, -1.0, 2.0])),
              PARAMS[1]]
    pred = embed(params, UNIT)
    q = pred.dense_layers()[0].q_relu
    assert (q[2].fixed, q[2].value) == (True, 1)  # pre-activation in [2, 2.5]
    z = np.array([0.75, 0.25])  # pre-activations 0.5, 0, 2.375
    fixed = pred.fix_pattern(z)
    assert sorted(v.index() for v in fixed) == [0, 1]
    assert [q[j].value for j in range(3)] == [1, 0, 1]
    net = pred.adapter.structure
    block = pred.block
    for i in range(2):
        block.inputs[i].fix(float(z[i]))
    logit = float(net.logits(z[None, :])[0, 0])
    assert minimise(block, block.outputs[0]) == pytest.approx(logit)
    block.inputs[1].fix(0.9)  # first pre-activation -0.15: another piece
    outcome = make_solver("highs").solve(_with_objective(block), SolverSettings())
    assert not outcome.status.has_solution


def test_a_linear_first_layer_has_no_binaries_to_fix_and_no_envelope():
    """A torch Linear-Linear-ReLU-Linear network (a linear bottleneck first): fix_pattern
    skips the linear layer and fixes the ReLU layer after it; there is no envelope (the
    first layer is not convex-piecewise); the encoding is exact."""
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 3), torch.nn.ReLU(),
                              torch.nn.Linear(3, 1)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1.0, 0.5], [-0.5, 1.0]]))
        net[0].bias.copy_(torch.tensor([0.0, 0.1]))
        net[1].weight.copy_(torch.tensor([[1.0, -1.0], [0.5, 1.0], [-1.0, -0.2]]))
        net[1].bias.copy_(torch.tensor([0.1, -0.6, 0.4]))
        net[3].weight.copy_(torch.tensor([[1.0, -1.0, 2.0]]))
        net[3].bias.copy_(torch.tensor([0.05]))
    m = pyo.ConcreteModel()
    pred = cfopt.formulations.add_predictor(m, net, input_bounds=UNIT)
    assert isinstance(pred, NetworkPredictorConstr)
    z = np.array([0.8, 0.1])
    pres = pred.adapter.structure.pre_activations(z[None, :])[1][0]
    free = [j for j, q in pred.dense_layers()[1].q_relu.items() if not q.fixed]
    fixed = pred.fix_pattern(z)
    assert free and sorted(v.index() for v in fixed) == free
    assert [pred.dense_layers()[1].q_relu[j].value for j in free] == [
        int(pres[j] > 0) for j in free]
    m.weights = pyo.Var(range(2))
    assert pred.vertex_envelope(np.eye(2), [m.weights[0], m.weights[1]]) is None
    for v in fixed:
        v.unfix()
    assert pred.get_error(box_points(UNIT, 3, seed=4)) <= 1e-7


def test_the_envelope_has_rows_only_for_neurons_across_zero():
    """Neurons in [0, 2] (active), [-2, 0] (inactive) and [-0.5, 0.5], [-1, 1.5] (across
    0) over the unit box: rows for the last two only."""
    params = [(np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, 0.0], [1.0, 1.5]]),
               np.array([0.0, 0.0, -0.5, -1.0])), (np.ones((1, 4)), np.zeros(1))]
    pred = embed(params, UNIT)
    lb, ub = pred.layer_bounds()[0]
    np.testing.assert_array_equal(lb, [0.0, -2.0, -0.5, -1.0])
    np.testing.assert_array_equal(ub, [2.0, 0.0, 0.5, 1.5])
    m = pred.block.model()
    m.weights = pyo.Var(range(3))
    points = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    m.envelope = pred.vertex_envelope(points, [m.weights[k] for k in range(3)])
    assert list(m.envelope) == [2, 3]


def _with_objective(block: pyo.Block) -> pyo.Block:
    block.test_objective = pyo.Objective(expr=block.outputs[0])
    return block


def test_vertex_envelope_is_tight_at_the_points_and_holds_inside():
    """With the inputs the convex combination of three points, the envelope has a row per
    neuron across 0; at each point its row is an equality (the neuron's output there),
    it holds at inner combinations, and the maximal first-layer output over the hull is
    the points' largest."""
    pred = embed(PARAMS, UNIT)
    points = np.array([[0.1, 0.9], [0.9, 0.1], [0.8, 0.6]])
    m = pred.block.model()
    m.weights = pyo.Var(range(3), bounds=(0.0, 1.0))
    m.sum_one = pyo.Constraint(expr=sum(m.weights[i] for i in range(3)) == 1.0)
    m.combination = pyo.Constraint(range(2), rule=lambda b, i: pred.inputs[i] == sum(
        float(points[k, i]) * m.weights[k] for k in range(3)))
    with pytest.raises(ValueError, match="3 points need as many weights, got 2"):
        pred.vertex_envelope(points, [m.weights[0], m.weights[1]])
    m.envelope = pred.vertex_envelope(points, [m.weights[k] for k in range(3)])
    assert list(m.envelope) == [0, 1]  # neuron 2 (in [2, 2.5]) is stable
    first, scale = pred.dense_layers()[0], pred.neuron_scales()[0]
    net = pred.adapter.structure
    outputs = np.maximum(net.pre_activations(points)[0], 0.0) / scale
    for k in range(3):
        for i in range(3):
            m.weights[i].set_value(float(i == k))
        for j in m.envelope:
            first.z[j].set_value(float(outputs[k, j]))
            assert pyo.value(m.envelope[j].body) == pytest.approx(
                pyo.value(m.envelope[j].upper), abs=1e-12)
    lam = np.array([0.2, 0.5, 0.3])
    inner = np.maximum(net.pre_activations((lam @ points)[None, :])[0][0], 0.0) / scale
    for i in range(3):
        m.weights[i].set_value(float(lam[i]))
    for j in m.envelope:
        first.z[j].set_value(float(inner[j]))
        assert pyo.value(m.envelope[j].body) <= pyo.value(m.envelope[j].upper) + 1e-12
    for q in first.q_relu.values():  # the LP relaxation: only the envelope bounds z
        q.domain = pyo.UnitInterval
    for j in m.envelope:
        top = -minimise(m, -first.z[j])
        assert top == pytest.approx(outputs[:, j].max(), abs=1e-7)


def test_vertex_envelope_of_a_first_layer_without_relu_is_none():
    """A network without hidden layer encoded by the shifted rule has no envelope."""
    m = pyo.ConcreteModel()
    pred = build_shifted_network(m, "net", ShiftedNetwork([PARAMS[1]]), np.ones(3), 0.1)
    m.weights = pyo.Var(range(2))
    assert pred.vertex_envelope(np.eye(3)[:2], [m.weights[0], m.weights[1]]) is None


def test_a_linear_network_gets_the_linear_encoding():
    pred = cfopt.formulations.add_predictor(pyo.ConcreteModel(), ShiftedNetwork([PARAMS[1]]),
                                            input_bounds=[(0.0, 1.0)] * 3)
    assert not isinstance(pred, NetworkPredictorConstr)
    assert pred.get_error(np.array([[0.0, 0.5, 1.0], [1.0, 0.0, 0.25]])) <= 1e-9


# ----------------------------------------------------------- the shifted networks
@pytest.mark.parametrize("params, target", [(PARAMS, 1), (PARAMS, 0), (DEEP[:2] + [
    (np.array([[1.0, -1.5]]), np.array([0.3]))], 1), (DEEP, 0), (DEEP, 2)])
def test_the_adversary_reaches_the_least_margin_over_the_shift(params, target):
    """AdversaryModel (the shifted networks' encoding of each margin): its optimum is the
    exact least margin over Δ (numpy oracle), at two points, moved by set_point."""
    net = ReLUNetwork.from_parameters(params)
    points = np.array([[0.3, 0.7], [-0.6, 0.2]])
    worst = delta_worst(params, points, 0.05, target)
    found = []
    for margin in target_margins(net, target):
        adversary = AdversaryModel(net, points[0], 0.05, margin)
        values = []
        for z in points:
            adversary.set_point(z)
            outcome = make_solver("highs").solve(adversary, SolverSettings(mip_gap=0.0))
            assert outcome.status is cfopt.Status.OPTIMAL
            values.append(pyo.value(adversary.objective))
        found.append(values)
    np.testing.assert_allclose(np.min(found, axis=0), worst, atol=1e-6)


#: one hidden layer, then two; the logit of each is least with a neuron of negative
#: outgoing weight at the top of its reach at Z_SHIFT
SHIFT_NETS = [PARAMS, DEEP[:2] + [(np.array([[1.0, -1.5]]), np.array([0.3]))]]
#: a float32 row: read in float64 (its float32 sum |0.95| + |-0.6| is another number)
Z_SHIFT = np.array([[0.95, -0.6]], dtype=np.float32)


@pytest.mark.parametrize("params", SHIFT_NETS)
def test_a_shifted_network_reaches_the_least_logit_with_its_own_bounds(params):
    """build_shifted_network alone (output radius δ by default, bounds from its own rule):
    the least logit over Δ at the fixed input is the oracle's, the first layer's bounds
    are its exact reach in float64; with an output radius of 0 the output layer no longer
    moves, which only raises it."""
    z, delta = Z_SHIFT.astype(np.float64)[0], 0.1
    worst = float(delta_worst(params, z, delta, 1)[0])
    m = pyo.ConcreteModel()
    pred = build_shifted_network(m, "net", ShiftedNetwork(params), Z_SHIFT, delta)
    lb, ub = pred.layer_bounds()[0]
    reach = ReLUNetwork.from_parameters(params).shifted_bounds(z, delta)[0]
    np.testing.assert_allclose(lb, reach[0][0], rtol=1e-15, atol=0)
    np.testing.assert_allclose(ub, reach[1][0], rtol=1e-15, atol=0)
    assert minimise(m, pred.outputs[0]) == pytest.approx(worst, abs=1e-6)
    assert pred.dense_layers()[-1].zhat[0].lb <= worst + 1e-9
    fixed = pyo.ConcreteModel()
    pred = build_shifted_network(fixed, "net", ShiftedNetwork(params), z, delta, 0.0)
    assert minimise(fixed, pred.outputs[0]) > worst + 1e-3


def test_a_shifted_networks_logit_is_the_least_one_reachable_from_its_hidden_layer():
    """The logit is tied to the low end of its reach (not free within it): its largest
    value over the hidden layer's reach is max_h (w - δ) h + b - δ, an end per neuron."""
    z, delta = np.array([0.9, -0.6]), 0.1
    m = pyo.ConcreteModel()
    pred = build_shifted_network(m, "net", ShiftedNetwork(PARAMS), z, delta)
    (w1, b1), (w2, b2) = PARAMS
    pre, r = w1 @ z + b1, delta * (np.abs(z).sum() + 1.0)
    low, high = np.maximum(pre - r, 0.0), np.maximum(pre + r, 0.0)
    c = w2[0] - delta
    best = float(np.where(c >= 0, c * high, c * low).sum() + b2[0] - delta)
    assert -minimise(m, -pred.outputs[0]) == pytest.approx(best, abs=1e-6)


def test_the_filter_drops_only_the_initial_zero_warning():
    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("pyomo.core", logging.WARNING, __file__, 1, message, None,
                                 None)

    assert not _initial_zero_outside_bounds(record(
        "W1002: Setting Var 'x' to a numeric value `0` outside the bounds (1, 2)."))
    assert _initial_zero_outside_bounds(record("another warning"))
