"""PROPLACE's plausible region (:mod:`cfopt.methods.plausible_region`) on a tiny
hand-built network of two inputs and a 5 x 5 grid of data rows: the factual and its
k nearest Δ-robust target-class rows (each checked on its own by the exact checker,
in order of Euclidean distance), the checker per network, the hull, its weights and
its box."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
import torch

import cfopt
from cfopt.methods.adversaries.model_shift import RobustnessChecker
from cfopt.methods.plausible_region import RobustPlausibleRegion

#: 1·relu(10a - 10b - 3) - 2·relu(a + b - 0.5) + 0.5·relu(0.5a + 2) + 0.25 (class 1 iff > 0)
BINARY = [(np.array([[10.0, -10.0], [1.0, 1.0], [0.5, 0.0]]), np.array([-3.0, -0.5, 2.0])),
          (np.array([[1.0, -2.0, 0.5]]), np.array([0.25]))]
#: the same with another output bias (another network: its own checker)
OTHER = [BINARY[0], (BINARY[1][0], np.array([0.5]))]
GRID = pd.DataFrame([(i / 4, j / 4) for i, j in itertools.product(range(5), repeat=2)],
                    columns=["a", "b"])
#: class 1 (logit 4.925 - 1.08 + 1.2275 + 0.25); no two grid rows equally far from it
FACTUAL = pd.DataFrame({"a": [0.91], "b": [0.13]})
#: class 0 (logit -1.2275): for the target 1
FACTUAL0 = pd.DataFrame({"a": [0.97], "b": [0.89]})


def torch_net(params) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for k, (w, b) in enumerate(params):
        linear = torch.nn.Linear(w.shape[1], w.shape[0]).double()
        with torch.no_grad():
            linear.weight.copy_(torch.tensor(w))
            linear.bias.copy_(torch.tensor(b))
        layers += [linear] + ([torch.nn.ReLU()] if k < len(params) - 1 else [])
    return torch.nn.Sequential(*layers)


def reference(params, factual: pd.DataFrame, target: int, delta: float, k: int
              ) -> np.ndarray:
    """The factual, then the k grid rows nearest it (Euclidean) that the network
    predicts as ``target`` and the exact checker proves Δ-robust, one at a time."""
    net = torch_net(params)
    checker = RobustnessChecker(net, delta)
    Z = GRID.to_numpy()
    with torch.no_grad():
        logits = net(torch.tensor(Z)).numpy()[:, 0]
    z0 = factual.to_numpy()[0]
    d = np.linalg.norm(Z - z0, axis=1)
    assert len(np.unique(np.round(d, 12))) == len(d)
    keep = [r for r in np.argsort(d) if (logits[r] > 0) == bool(target)
            and checker.check(Z[r], target, screen=False).robust]
    assert len(keep) > k
    return np.vstack([z0, Z[keep[:k]]])


def model(region: RobustPlausibleRegion, params=BINARY, factual=FACTUAL, target=0
          ) -> cfopt.CounterfactualModel:
    space = cfopt.FeatureSpace.from_frame(GRID)
    m = cfopt.CounterfactualModel(torch_net(params), space, constraints=[region])
    m.set_factual(factual)
    m.set_target(target)
    return m


@pytest.mark.parametrize("k", [0, -1, True, False, 2.0, "3", None])
def test_k_must_be_a_positive_integer(k):
    with pytest.raises(ValueError) as err:
        RobustPlausibleRegion(GRID, 0.05, k=k)
    assert str(err.value) == (f"k must be a positive integer (number of Δ-robust neighbours), "
                              f"got {k!r}")


def test_the_options():
    region = RobustPlausibleRegion(GRID, np.float64(0.05), k=np.int64(3), solver="cbc",
                                   epsilon=0.1, norm="linf", name="plaus")
    assert region.k == 3 and type(region.k) is int
    assert region.max_points == 3 and type(region.max_points) is int
    assert region.delta == 0.05 and type(region.delta) is float
    assert region.solver == "cbc" and region.epsilon == 0.1 and region.norm == "linf"
    assert region.name == "plaus" and region.include_factual and region.report is None
    assert RobustPlausibleRegion(GRID, 0.05).k == 20
    with pytest.raises(ValueError, match="^delta must be a positive number"):
        RobustPlausibleRegion(GRID, 0.0)


@pytest.mark.parametrize("params, factual, target, delta, k", [
    (BINARY, FACTUAL, 0, 0.05, 3), (BINARY, FACTUAL, 0, 0.02, 2),
    (BINARY, FACTUAL0, 1, 0.05, 4), (OTHER, FACTUAL0, 1, 0.1, 1)])
def test_the_points_are_the_factual_and_its_nearest_robust_rows(params, factual, target,
                                                                 delta, k):
    region = RobustPlausibleRegion(GRID, delta, k=k, name="plaus")
    m = model(region, params, factual, target)
    expected = reference(params, factual, target, delta, k)
    np.testing.assert_allclose(region.points(m), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(region.hull(m), expected, rtol=0, atol=1e-12)
    assert region.report.neighbours == k
    block = m.component("plaus")
    assert list(block.POINTS) == list(range(k + 1))
    weights = region.hull_weights(m)
    assert [w.name for w in weights] == [block.weight[i].name for i in range(k + 1)]
    assert all(w is block.weight[i] for i, w in enumerate(weights))
    low, high = region.box(m)
    np.testing.assert_array_equal(low, expected.min(axis=0))
    np.testing.assert_array_equal(high, expected.max(axis=0))


def test_a_solve_lies_in_the_hull():
    region = RobustPlausibleRegion(GRID, 0.05, k=3, name="plaus")
    m = model(region)
    outcome = cfopt.solvers.make_solver("highs").solve(m, cfopt.solvers.SolverSettings())
    assert outcome.status is cfopt.Status.OPTIMAL
    lam = np.array([pyo.value(w) for w in region.hull_weights(m)])
    z = np.array([pyo.value(m.predictor_constr.inputs[i]) for i in range(2)])
    np.testing.assert_allclose(lam @ region.hull(m), z, atol=1e-6)


def test_a_slack_ball_has_no_hull_and_widens_the_box():
    region = RobustPlausibleRegion(GRID, 0.05, k=3, epsilon=0.125, name="plaus")
    m = model(region)
    expected = reference(BINARY, FACTUAL, 0, 0.05, 3)
    assert region.hull(m) is None and region.hull_weights(m) is None
    np.testing.assert_allclose(region.points(m), expected, rtol=0, atol=1e-12)
    low, high = region.box(m)
    np.testing.assert_allclose(low, expected.min(axis=0) - 0.125, rtol=0, atol=1e-15)
    np.testing.assert_allclose(high, expected.max(axis=0) + 0.125, rtol=0, atol=1e-15)


def test_labels_choose_the_candidates():
    """Row 23 (a = 1, b = 0.5), the nearest Δ-robust class-0 row, labelled 1: the
    region's rows are then the next ones."""
    net = torch_net(BINARY)
    with torch.no_grad():
        labels = (net(torch.tensor(GRID.to_numpy())).numpy()[:, 0] > 0).astype(int)
    assert labels[23] == 0
    labels[23] = 1
    region = RobustPlausibleRegion(GRID, 0.05, k=3, labels=labels, name="plaus")
    m = model(region)
    expected = reference(BINARY, FACTUAL, 0, 0.05, 4)
    np.testing.assert_allclose(expected[1], GRID.iloc[23].to_numpy())
    np.testing.assert_allclose(region.points(m), expected[[0, 2, 3, 4]], rtol=0, atol=1e-12)


def test_the_checker_takes_the_regions_solver():
    region = RobustPlausibleRegion(GRID, 0.05, k=2, solver="cbc", name="plaus")
    assert region.checker(model(region)).backend.name == "cbc"


def test_one_checker_per_network_at_the_regions_delta():
    region = RobustPlausibleRegion(GRID, 0.05, k=2, solver="highs", name="plaus")
    m = model(region)
    checker = region.checker(m)
    assert isinstance(checker, RobustnessChecker) and checker.delta == 0.05
    assert checker.backend.name == "highs"
    assert region.checker(m) is checker and list(region._checkers.values()) == [checker]
    # its verdicts are filed under this region (another user of the checker has its own)
    assert {key[0] for key in checker._verdicts} == {(id(region), "plaus")}
    other = model(RobustPlausibleRegion(GRID, 0.05, k=2), OTHER, FACTUAL0, 1)
    second = region.checker(other)
    assert second is not checker and region.checker(other) is second
    assert len(region._checkers) == 2
    assert region.checker(model(RobustPlausibleRegion(GRID, 0.05, k=2))) is checker
    # a new query reuses the checker's cache: no exact check twice
    m.set_factual(FACTUAL0.assign(a=0.95))
    m.set_target(1)
    checks = checker.milp_checks
    m.set_factual(FACTUAL0.assign(a=0.95))
    m.set_target(1)
    assert checker.milp_checks == checks
