"""Δ-robustness under model shift (:mod:`cfopt.formulations.robustness`) on tiny
hand-built networks: δ and model checks, the margins of a target, the concrete attack
(an upper bound realised by concrete parameters within δ), the exact adversary (the
least margin of the numpy oracle, :mod:`tests.robust_oracles`, realised by concrete
parameters) and the shifted copies of a counterfactual MILP."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
import torch
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.tree import DecisionTreeClassifier

import cfopt
from cfopt.formulations.robustness import (
    AdversaryModel,
    Margin,
    ShiftedNetwork,
    add_shifted_copy,
    attack,
    attack_targets,
    check_delta,
    max_shift,
    recover_parameters,
    robust_network,
    target_margins,
)
from cfopt.models import ReLUNetwork
from cfopt.solvers import SolverSettings, make_solver

from .robust_oracles import delta_worst

#: one hidden layer, one logit (class 1 iff > 0)
BINARY = [(np.array([[10.0, -10.0], [1.0, 1.0], [0.5, 0.0]]), np.array([-3.0, -0.5, 2.0])),
          (np.array([[1.0, -2.0, 0.5]]), np.array([0.25]))]
#: two hidden layers, three logits (argmax)
DEEP = [(np.array([[1.0, -1.0], [2.0, 0.5], [-1.5, 1.0]]), np.array([0.1, -0.8, 0.3])),
        (np.array([[1.0, -2.0, 0.5], [-0.5, 1.0, 1.5]]), np.array([0.2, -0.1])),
        (np.array([[1.0, -1.0], [-0.5, 2.0], [0.3, 0.3]]), np.array([0.0, 0.1, -0.2]))]
POINTS = np.array([[0.3, 0.7], [-0.6, 0.2], [0.95, 0.1]])
#: two numeric features in [0, 1]
SPACE_FRAME = pd.DataFrame({"a": [0.0, 0.5, 1.0], "b": [0.0, 0.25, 1.0]})


def torch_net(params) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for k, (w, b) in enumerate(params):
        linear = torch.nn.Linear(w.shape[1], w.shape[0]).double()
        with torch.no_grad():
            linear.weight.copy_(torch.tensor(w))
            linear.bias.copy_(torch.tensor(b))
        layers += [linear] + ([torch.nn.ReLU()] if k < len(params) - 1 else [])
    return torch.nn.Sequential(*layers)


def margins_of(params, Z: np.ndarray, margin: Margin) -> np.ndarray:
    """The margin ``c^T y`` of the network ``params`` at the rows of ``Z`` (numpy)."""
    return margin.of(ReLUNetwork.from_parameters(params).logits(Z))


# ------------------------------------------------------------------ the checks
@pytest.mark.parametrize("delta", [1, 0.05, np.float32(0.25), np.float64(2.0)])
def test_check_delta_takes_positive_finite_numbers(delta):
    value = check_delta(delta)
    assert type(value) is float and value == float(delta)


@pytest.mark.parametrize("delta", [True, False, 0, 0.0, -0.1, math.inf, math.nan, "0.1", None])
def test_check_delta_rejects_anything_else(delta):
    with pytest.raises(ValueError, match=r"delta must be a positive number \(the radius"):
        check_delta(delta)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_robust_network_takes_relu_classifiers_only():
    assert robust_network(torch_net(BINARY)).n_logits == 1
    assert robust_network(torch_net(DEEP)).n_logits == 3
    two = robust_network(torch_net([BINARY[0], (np.ones((2, 3)), np.zeros(2))]))
    assert two.decision == "argmax" and two.n_logits == 2
    X = np.random.default_rng(0).random((30, 2))
    tree = DecisionTreeClassifier(max_depth=2).fit(X, X[:, 0] > 0.5)
    structure = type(cfopt.models.parse_model(tree).structure).__name__
    with pytest.raises(ValueError, match=f"needs a ReLU network .*got a DecisionTreeClassifier "
                                         f"\\({structure}\\)"):
        robust_network(tree)
    regressor = MLPRegressor(hidden_layer_sizes=(3,), max_iter=5).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="defined for classifiers .* has 1 outputs"):
        robust_network(regressor)
    two_outputs = ShiftedNetwork([BINARY[0], (np.ones((2, 3)), np.zeros(2))], "regression", ())
    with pytest.raises(ValueError, match="has 2 outputs \\(decision 'regression'\\)"):
        robust_network(two_outputs)


def test_margins_of_a_target():
    """The signed logit of a one-logit network, the target's logit minus each other
    class's otherwise; ‖c‖₁ and the margins of rows of logits."""
    net1, net3 = ReLUNetwork.from_parameters(BINARY), ReLUNetwork.from_parameters(DEEP)
    assert target_margins(net1, 1) == [Margin((1.0,))]
    assert target_margins(net1, np.int64(0)) == [Margin((-1.0,))]
    assert target_margins(net3, 1) == [Margin((-1.0, 1.0, 0.0), 0), Margin((0.0, 1.0, -1.0), 2)]
    assert target_margins(net3, 0)[1] == Margin((1.0, 0.0, -1.0), 2)
    for bad, n in ((2, "1"), (-1, "1"), (True, "1"), (1.0, "1")):
        with pytest.raises(ValueError, match=f"class index of the network \\(0 to {n}\\)"):
            target_margins(net1, bad)
    with pytest.raises(ValueError, match=r"\(0 to 2\), got 3"):
        target_margins(net3, 3)
    margin = Margin((1.0, -1.0, 0.0), 1)
    assert margin.scale == 2.0 and Margin((-1.0,)).scale == 1.0
    np.testing.assert_array_equal(margin.of(np.array([3.0, 1.0, 7.0])), [2.0])
    np.testing.assert_array_equal(margin.of(np.array([[3.0, 1.0, 7.0], [0.0, 2.0, 0.0]])),
                                  [2.0, -2.0])


# ------------------------------------------------------------------ the attack
#: three hidden layers, one logit
DEEPER = [DEEP[0], (np.array([[1.0, -2.0, 0.5], [-0.5, 1.0, 1.5]]), np.array([0.2, 0.4])),
          (np.array([[1.0, -1.0], [0.5, 2.0]]), np.array([0.1, -0.3])),
          (np.array([[1.0, -1.5]]), np.array([0.2]))]


@pytest.mark.parametrize("params, target", [(BINARY, 1), (BINARY, 0), (DEEP, 0), (DEEP, 2),
                                            (DEEPER, 1)])
def test_the_attack_is_a_shifted_networks_margin_above_the_least(params, target):
    """attack: per row, the margin of concrete parameters within δ (recovered from
    attack_targets), at least the exact least margin; the nominal margin is above."""
    net, delta = ReLUNetwork.from_parameters(params), 0.05
    worst = (delta_worst(params, POINTS, delta, target) if len(params) <= 3
             else np.full(len(POINTS), -np.inf))
    for margin in target_margins(net, target):
        upper = attack(net, POINTS, delta, margin)
        targets = attack_targets(net, POINTS, delta, margin)
        assert len(targets) == len(params) - 1
        for row, z in enumerate(POINTS):
            shifted = recover_parameters(net, z[None, :], delta, [t[row] for t in targets],
                                         margin)
            assert max_shift(net, shifted) <= delta * (1 + 1e-12)
            assert margins_of(shifted, z[None, :], margin)[0] == pytest.approx(upper[row],
                                                                               abs=1e-12)
        assert (upper >= worst - 1e-9).all()
        assert (upper < margins_of(params, POINTS, margin) - delta).all()


def test_the_attack_on_one_hidden_layer_moves_each_neuron_against_the_margin():
    """One hidden layer, every neuron active at z: the attack is the exact least margin
    (each neuron pushed against its outgoing weight, the output row down by δ)."""
    net, delta, z = ReLUNetwork.from_parameters(BINARY), 0.05, np.array([[0.6, 0.2]])
    (w1, b1), (w2, b2) = BINARY
    pre = (z @ w1.T + b1)[0]
    assert (pre > 0).all()
    reach = delta * (np.abs(z).sum() + 1.0)
    h = np.maximum(pre - np.sign(w2[0]) * reach, 0.0)
    expected = float(h @ w2[0] + b2[0] - delta * (h.sum() + 1.0))
    assert attack(net, z, delta, Margin((1.0,)))[0] == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(delta_worst(BINARY, z, delta, 1)[0], abs=1e-12)
    np.testing.assert_allclose(attack_targets(net, z, delta, Margin((1.0,)))[0][0],
                               pre - np.sign(w2[0]) * reach)


def test_the_attack_follows_the_nominal_pattern_and_its_derivatives():
    """Two hidden layers at z = 1: the second layer's pre-activations 0.5 (active), 0
    (inactive: ReLU'(0) = 0) and 1 (its logit weight 0: not moved); the first neuron's
    derivative through the active one is +1, so it moves down by δ(|z| + 1) = 0.2, then
    each second-layer neuron against its own logit weight."""
    params = [(np.array([[1.0]]), np.array([0.0])),
              (np.array([[1.0], [2.0], [1.0]]), np.array([-0.5, -2.0, 0.0])),
              (np.array([[1.0, -3.0, 0.0]]), np.array([0.0]))]
    net, delta, z = ReLUNetwork.from_parameters(params), 0.1, np.array([[1.0]])
    first, second = attack_targets(net, z, delta, Margin((1.0,)))
    np.testing.assert_allclose(first, [[0.8]])
    np.testing.assert_allclose(second, [[0.8 - 0.5 - 0.18, 1.6 - 2.0 + 0.18, 0.8]])
    assert attack(net, z, delta, Margin((1.0,)))[0] == pytest.approx(0.12 - 0.1 * 1.92)


def test_float32_rows_are_read_in_float64():
    """Rows of float32 model inputs: the attack and the recovered parameters are those of
    the same values in float64 (a float32 sum |z|₁ is another number)."""
    z32 = np.array([[0.95, -0.6]], dtype=np.float32)
    z64 = z32.astype(np.float64)
    assert float(np.abs(z32).sum()) != float(np.abs(z64).sum())
    for params in (BINARY, [(np.array([[1.0, -2.0]]), np.array([0.3]))]):  # and linear
        net = ReLUNetwork.from_parameters(params)
        margin = Margin((1.0,))
        assert attack(net, z32, 0.1, margin)[0] == attack(net, z64, 0.1, margin)[0]
    net = ReLUNetwork.from_parameters(BINARY)
    targets = [t[0] for t in attack_targets(net, z64, 0.1, Margin((1.0,)))]
    np.testing.assert_array_equal(attack_targets(net, z32, 0.1, Margin((1.0,)))[0][0],
                                  targets[0])
    for (w32, b32), (w64, b64) in zip(recover_parameters(net, z32, 0.1, targets, Margin((1.0,))),
                                      recover_parameters(net, z64, 0.1, targets, Margin((1.0,)))):
        np.testing.assert_array_equal(w32, w64)
        np.testing.assert_array_equal(b32, b64)


def test_the_attack_on_a_linear_model_is_its_closed_form():
    """No hidden layer: the least margin is c(w z + b) - ‖c‖₁ δ(‖z‖₁ + 1)."""
    w, b = np.array([[1.0, -2.0], [0.5, 1.0]]), np.array([0.3, -0.1])
    net, delta = ReLUNetwork.from_parameters([(w, b)]), 0.1
    margin = target_margins(net, 0)[0]  # y0 - y1
    expected = (POINTS @ (w[0] - w[1]) + b[0] - b[1]
                - 2 * delta * (np.abs(POINTS).sum(axis=1) + 1.0))
    np.testing.assert_allclose(attack(net, POINTS, delta, margin), expected, atol=1e-12)
    assert attack_targets(net, POINTS, delta, margin) == []


def test_max_shift_is_the_largest_change_of_any_weight_or_bias():
    net = ReLUNetwork.from_parameters(BINARY)
    (w1, b1), (w2, b2) = BINARY
    assert max_shift(net, [(w1 + 0.03, b1), (w2, b2 - 0.05)]) == pytest.approx(0.05)
    assert max_shift(net, [(w1 - 0.07, b1 + 0.01), (w2, b2)]) == pytest.approx(0.07)
    assert max_shift(net, [(w1, b1), (w2, b2)]) == 0.0


# ----------------------------------------------------------------- the adversary
@pytest.mark.parametrize("params, target", [(BINARY, 1), (BINARY, 0), (DEEP, 1)])
def test_the_adversarys_optimum_is_realised_by_parameters_within_delta(params, target):
    """AdversaryModel at each point: its optimum is the exact least margin and its
    targets() give, through recover_parameters, a network within δ of that margin."""
    net, delta = ReLUNetwork.from_parameters(params), 0.05
    worst = delta_worst(params, POINTS, delta, target)
    least = np.full(len(POINTS), np.inf)
    for margin in target_margins(net, target):
        adversary = AdversaryModel(net, np.zeros(2), delta, margin)
        assert isinstance(adversary.network, pyo.Block)
        for row, z in enumerate(POINTS):
            adversary.set_point(z[None, :])  # a row of one model input
            outcome = make_solver("highs").solve(adversary, SolverSettings(mip_gap=0.0))
            assert outcome.status is cfopt.Status.OPTIMAL
            value = pyo.value(adversary.objective)
            shifted = recover_parameters(net, z, delta, adversary.targets(), margin)
            assert max_shift(net, shifted) <= delta * (1 + 1e-9)
            assert margins_of(shifted, z[None, :], margin)[0] == pytest.approx(value, abs=1e-6)
            least[row] = min(least[row], value)
    np.testing.assert_allclose(least, worst, atol=1e-6)


def test_the_adversary_rejects_a_linear_network_and_a_wrong_input():
    linear = ReLUNetwork.from_parameters([BINARY[1]])
    with pytest.raises(ValueError, match="no hidden layer"):
        AdversaryModel(linear, np.zeros(3), 0.1, Margin((1.0,)))
    adversary = AdversaryModel(ReLUNetwork.from_parameters(BINARY), np.zeros(2), 0.1,
                               Margin((1.0,)))
    with pytest.raises(ValueError, match="takes 2 inputs, got 3"):
        adversary.set_point(np.zeros(3))


def test_recover_parameters_clips_to_the_box():
    """Targets out of reach: each neuron's shift is clipped at ±δ (the closest reachable
    pre-activation), the output row moved by -sign(c) δ on its active inputs."""
    net, delta, z = ReLUNetwork.from_parameters(BINARY), 0.05, np.array([0.6, -0.2])
    (w1, b1), (w2, b2) = BINARY
    pre = w1 @ z + b1
    far = pre + np.array([10.0, -10.0, 0.01])
    (w, b), (wo, bo) = recover_parameters(net, z, delta, [far], Margin((-1.0,)))
    np.testing.assert_allclose(b - b1, [delta, -delta, 0.01 / 1.8])
    np.testing.assert_allclose(w - w1, np.outer([delta, -delta, 0.01 / 1.8], [1.0, -1.0]))
    np.testing.assert_allclose(bo - b2, [delta])
    active = (w @ z + b > 0).astype(float)
    np.testing.assert_allclose(wo - w2, delta * active[None, :])


# ------------------------------------------------------------ the shifted networks
def test_a_shifted_network_decides_as_the_trained_one():
    net = ShiftedNetwork(BINARY, "sign", ("no", "yes"))
    Z = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    logits = ReLUNetwork.from_parameters(BINARY).logits(Z)
    np.testing.assert_array_equal(net.output(Z), logits)
    np.testing.assert_array_equal(net.predict(Z), np.where(logits[:, 0] > 0, "yes", "no"))
    default = ShiftedNetwork(BINARY)
    assert default.decision == "sign" and default.classes == (0, 1)
    assert default.model is default.structure and default.kind == "ReLUNetwork"
    multi = ShiftedNetwork(DEEP, "argmax", ("a", "b", "c"))
    expected = np.array(["a", "b", "c"])[ReLUNetwork.from_parameters(DEEP).logits(Z).argmax(1)]
    np.testing.assert_array_equal(multi.predict(Z), expected)
    np.testing.assert_array_equal(net.output(np.array([1.0, 0.0])), logits[[1]])


def sklearn_binary() -> MLPClassifier:
    """BINARY as an sklearn MLP of classes "no" / "yes" (logit > 0: "yes")."""
    X = np.array([[0.0, 0.0], [1.0, 1.0], [0.5, 0.2], [0.2, 0.9]])
    model = MLPClassifier(hidden_layer_sizes=(3,), max_iter=1).fit(
        X, ["no", "yes", "no", "yes"])
    model.coefs_ = [w.T.copy() for w, _ in BINARY]
    model.intercepts_ = [b.copy() for _, b in BINARY]
    return model


#: per case: the model, the factual (its class), the target, shifted parameters that
#: make the target harder to reach (BINARY's neuron 2 dead over the unit box)
CASES = {
    "binary": (sklearn_binary, {"a": 0.9, "b": 0.1}, "no",
               [(BINARY[0][0] + 0.2, BINARY[0][1] - np.array([0.3, 0.3, 5.0])),
                (BINARY[1][0] + 0.1, BINARY[1][1] + 1.5)]),
    "3-class": (lambda: torch_net(DEEP), {"a": 0.9, "b": 0.1}, 0,
                [DEEP[0], DEEP[1], (DEEP[2][0], DEEP[2][1] + np.array([-0.1, 0.1, 0.0]))]),
}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("case", list(CASES))
def test_a_shifted_copy_makes_the_counterfactual_valid_for_the_shifted_model(case):
    """add_shifted_copy: the solution's margin under the shifted model (dead neurons left
    out, the trained model's decision and classes) is at least the MILP's margin, which
    costs a longer move than the trained model alone; the copy is cfopt's own block (not
    a user constraint), deleted to drop it."""
    model, factual, target, shifted = CASES[case]
    space = cfopt.FeatureSpace.from_frame(SPACE_FRAME)
    m = cfopt.CounterfactualModel(model(), space, margin=0.05)
    m.set_factual(pd.DataFrame({k: [v] for k, v in factual.items()}))
    m.set_target(target)
    outcome = make_solver("highs").solve(m, SolverSettings(mip_gap=0.0))
    assert outcome.status is cfopt.Status.OPTIMAL
    nominal = pyo.value(m.objective)
    box = (np.zeros(2), np.ones(2))
    copy, pred = add_shifted_copy(m, shifted, box, "copy")
    assert m.copy is copy and isinstance(pred.adapter, ShiftedNetwork)
    assert m.user_components() == []
    assert pred.adapter.decision == m.adapter.decision
    assert pred.adapter.classes == m.adapter.classes
    full = ReLUNetwork.from_parameters(shifted)
    live = [int((ub > 0).sum()) for _, ub in full.box_bounds(*box)[:-1]]
    assert [layer.weight.shape[0] for layer in pred.adapter.structure.layers[:-1]] == live
    outcome = make_solver("highs").solve(m, SolverSettings(mip_gap=0.0))
    assert outcome.status is cfopt.Status.OPTIMAL
    z = np.array([pyo.value(m.predictor_constr.inputs[i]) for i in range(2)])
    index = m.adapter.class_index(target)
    assert min(margin.of(full.logits(z[None, :]))[0]
               for margin in target_margins(full, index)) >= 0.05 - 1e-6
    assert pyo.value(m.objective) > nominal + 1e-3
    m.del_component(copy)
    outcome = make_solver("highs").solve(m, SolverSettings(mip_gap=0.0))
    assert pyo.value(m.objective) == pytest.approx(nominal, abs=1e-7)


def test_a_shifted_copy_over_a_hull_prunes_and_envelopes_with_the_hull():
    """With the points of a hull that holds the inputs: the neurons dead over the hull
    (not over its box) are left out, the layer bounds are the hull's, and the first
    layer's envelope rows come with the hull's weights only."""
    space = cfopt.FeatureSpace.from_frame(SPACE_FRAME)
    m = cfopt.CounterfactualModel(torch_net(BINARY), space, margin=0.05)
    m.set_factual(pd.DataFrame({"a": [0.9], "b": [0.1]}))
    m.set_target(0)
    hull = np.array([[0.2, 0.2], [0.6, 0.6], [0.3, 0.6]])  # neuron 0 <= -3 over it
    box = (hull.min(axis=0), hull.max(axis=0))  # neuron 0 up to 1 over its box
    net = ReLUNetwork.from_parameters(BINARY)
    assert net.box_bounds(*box)[0][1][0] > 0 >= net.box_bounds(*box, hull=hull)[0][1][0]
    m.hull_weights = pyo.Var(range(3), bounds=(0.0, 1.0))
    weights = [m.hull_weights[k] for k in range(3)]
    copy, pred = add_shifted_copy(m, BINARY, box, "hulled", hull, weights)
    assert pred.adapter.structure.layers[0].weight.shape[0] == 2
    kept = net.without_dead_neurons(net.box_bounds(*box, hull=hull))[1]
    for (lb, ub), (klb, kub) in zip(pred.layer_bounds(), kept):
        np.testing.assert_allclose(lb, klb, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ub, kub, rtol=1e-12, atol=1e-12)
    lb, ub = pred.layer_bounds()[0]
    rows = [j for j in range(len(lb)) if lb[j] < 0 < ub[j]]
    assert rows and list(copy.vertex_envelope) == rows
    only_hull, _ = add_shifted_copy(m, BINARY, box, "only_hull", hull)
    assert only_hull.component("vertex_envelope") is None
    only_weights, _ = add_shifted_copy(m, BINARY, box, "only_weights", None, weights)
    assert only_weights.component("vertex_envelope") is None


