"""Multiclass PROPLACE: Δ-robustness of networks with one logit per class (the target's
logit beats every other class's under every shift of Δ), against exhaustive vertex
enumeration on networks small enough to enumerate."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import cfopt
from cfopt.formulations.robustness import max_shift, target_margins
from cfopt.methods import MILPR, NonRobustMILP, Proplace, RobustnessChecker
from cfopt.models.network import ReLUNetwork
from cfopt.results.robust import RobustStatus

from .conftest import train_torch
from .test_proplace import _net, _params


def target_wins(params: list, z: np.ndarray, target: int) -> float:
    """How much the target's logit beats the best other class's (< 0: flipped)."""
    logits = ReLUNetwork.from_parameters(params).logits(z[None, :])[0]
    return float(logits[target] - np.delete(logits, target).max())


def _vertices(n: int, delta: float) -> np.ndarray:
    return delta * np.array(list(itertools.product((-1.0, 1.0), repeat=n)))


def vertex_minimum(params: list, z: np.ndarray, delta: float, target: int) -> float:
    """The least ``logit_t - max_j logit_j`` over *every* vertex of Δ (every weight and
    bias at ±δ) of a network with one hidden layer: all 2^(h(d+1)) hidden vertices
    times all 2^(k(h+1)) output vertices. With one hidden layer this is the exact
    minimum over Δ: the output is linear in the output parameters, and each hidden
    neuron's ReLU(w·z + b) is monotone in an affine function of its own parameters."""
    (w1, b1), (w2, b2) = params
    width, d = w1.shape
    per_neuron = _vertices(d + 1, delta)                       # (2^(d+1), d+1)
    # each neuron's reachable values at the vertices of its own parameters
    h_neuron = np.maximum((w1[:, None, :] + per_neuron[None, :, :d]) @ z
                          + b1[:, None] + per_neuron[None, :, d], 0.0)   # (width, 2^(d+1))
    H = np.array(list(itertools.product(*h_neuron)))           # (2^(width(d+1)), width)
    k = w2.shape[0]
    out = _vertices(k * (width + 1), delta).reshape(-1, k, width + 1)
    W, b = w2[None] + out[:, :, :width], b2[None] + out[:, :, width]    # (V, k, width)
    logits = np.einsum("hw,vkw->hvk", H, W) + b[None]          # (hidden, output, k)
    others = np.delete(logits, target, axis=2).max(axis=2)
    return float((logits[:, :, target] - others).min())


def test_margins_of_a_target() -> None:
    net = ReLUNetwork.from_parameters(_params(_net((2, 3, 3), 0)))
    margins = target_margins(net, 1)
    assert [m.coefficients for m in margins] == [(-1.0, 1.0, 0.0), (0.0, 1.0, -1.0)]
    assert [m.competitor for m in margins] == [0, 2] and margins[0].scale == 2.0
    with pytest.raises(ValueError, match="class index"):
        target_margins(net, 3)


@pytest.mark.parametrize("seed", range(3))
def test_adversary_equals_exhaustive_vertex_enumeration(seed: int) -> None:
    net = _net((2, 3, 3), seed)
    params = _params(net)
    delta = 0.1
    checker = RobustnessChecker(net, delta)
    rng = np.random.default_rng(seed)
    for _ in range(2):
        z = rng.uniform(-1.5, 1.5, 2)  # negative inputs: the first layer uses |z|
        for target in range(3):
            verdict = checker.exact(z, target)
            expected = vertex_minimum(params, z, delta, target)
            assert verdict.bound == pytest.approx(expected, abs=1e-6)
            assert verdict.value == pytest.approx(expected, abs=1e-6)
            assert verdict.robust is (expected >= 0)
            # the screen brackets it, and its verdict agrees wherever it decides
            lower, upper = checker.screen(z[None, :], target)
            assert lower[0] <= expected + 1e-9 and expected <= upper[0] + 1e-9
            screened = checker.check(z, target)
            assert screened.robust is (expected >= 0)


def test_not_robust_means_the_returned_model_flips_the_point() -> None:
    net = _net((3, 5, 4, 3), 11)
    delta = 0.08
    checker = RobustnessChecker(net, delta)
    rng = np.random.default_rng(5)
    refuted = certified = 0
    for _ in range(15):
        z = rng.uniform(-1, 1, 3)
        for target in range(3):
            for verdict in (checker.exact(z, target), checker.check(z, target)):
                if verdict.robust is False:
                    refuted += 1
                    assert max_shift(checker.net, verdict.parameters) <= delta * (1 + 1e-12)
                    wins = target_wins(verdict.parameters, z, target)
                    assert wins < 0  # a forward pass of the returned model: flipped
                    logits = ReLUNetwork.from_parameters(verdict.parameters).logits(
                        z[None, :])[0]
                    assert logits[target] - logits[verdict.competitor] == pytest.approx(
                        verdict.value, abs=1e-9)
                else:
                    assert verdict.robust is True
                    certified += 1
    assert refuted > 10 and certified > 10


# ------------------------------------------------------------------- the loop
def _three_class_data(seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.uniform(0, 1, (300, 2)), columns=["a", "b"])
    scores = np.stack([X.a - X.b, X.b - X.a, 0.6 - 0.5 * (X.a + X.b)], axis=1)
    return X, scores.argmax(axis=1)


@pytest.fixture(scope="module")
def tiny():
    X, y = _three_class_data()
    space = cfopt.FeatureSpace.from_frame(X)
    net = train_torch(space.transform(X), y, hidden=(3,), n_classes=3, epochs=300)
    return X, space, net


def certified_answers(method: Proplace, X: pd.DataFrame, rows: int):
    """(x, target, z) for the first ``rows`` rows and every other class: PROPLACE's
    answer ``z`` (model inputs), which must be certified."""
    for i in range(rows):
        x = X.iloc[[i]]
        for target in range(3):
            if target == method.milp.classify(x)[0]:
                continue
            r = method.explain(x, target=target)
            assert r.status is RobustStatus.CERTIFIED, r.message
            assert r.certified and r.verified and r.certificate.bound >= 0
            yield x, target, r


def test_proplace_certified_points_survive_every_vertex_shift(tiny) -> None:
    X, space, net = tiny
    delta = 0.02
    params = _params(net)
    plain = NonRobustMILP(net, space, delta=delta)
    checker = RobustnessChecker(net, delta)
    certified = flipped_plain = 0
    for x, target, r in certified_answers(Proplace(net, space, X, delta=delta, k=10), X, 4):
        z = space.transform(r.counterfactual)[0]
        assert vertex_minimum(params, z, delta, target) >= 0
        worst = checker.exact(z, target).parameters  # the adversary's own worst model
        assert target_wins(worst, z, target) >= 0
        certified += 1
        # the closest (non-robust) counterfactual is flipped by some vertex shift
        p = plain.explain(x, target=target)
        zp = space.transform(p.counterfactual)[0]
        flipped_plain += vertex_minimum(params, zp, delta, target) < 0
        assert p.objective <= r.objective + 1e-6
    assert certified == 8 and flipped_plain >= 4


def test_proplace_deeper_network_against_sampled_vertex_shifts() -> None:
    X, y = _three_class_data(1)
    X["c"] = np.random.default_rng(2).uniform(0, 1, len(X))
    space = cfopt.FeatureSpace.from_frame(X)
    net = train_torch(space.transform(X), y, hidden=(6, 6), n_classes=3, epochs=300)
    params = _params(net)
    delta = 0.01
    method = Proplace(net, space, X, delta=delta, k=10)
    checker = RobustnessChecker(net, delta)
    rng = np.random.default_rng(0)
    signs = [[(rng.choice([-1.0, 1.0], w.shape), rng.choice([-1.0, 1.0], b.shape))
              for w, b in params] for _ in range(2000)]
    done = 0
    for _, target, r in certified_answers(method, X, 3):
        z = space.transform(r.counterfactual)[0]
        for s in signs:
            shifted = [(w + delta * sw, b + delta * sb) for (w, b), (sw, sb) in zip(params, s)]
            assert target_wins(shifted, z, target) >= 0
        assert target_wins(checker.exact(z, target).parameters, z, target) >= 0
        done += 1
    assert done == 6


def test_multiclass_baselines_and_bad_targets(tiny) -> None:
    X, space, net = tiny
    x = X.iloc[[0]]
    r = MILPR(net, space, delta=0.02).explain(x, 2)
    assert r.certified, r.message
    assert RobustnessChecker(net, 0.02).exact(space.transform(r.counterfactual)[0], 2).robust
    with pytest.raises(ValueError, match="single target class"):
        Proplace(net, space, X, delta=0.02, k=5).explain(x, target=None)  # two classes
