"""Optimality by brute force: on a feature space whose whole grid can be enumerated,
the MILP optimum equals the enumerated minimum (L1, L0, L∞; with actionability)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier

import cfopt

from .conftest import grid_norms, logit_valid_grid_points, train_torch

MARGIN = 1e-3


def enumerate_minimum(explainer: cfopt.Explainer, x, target_index: int, norm: str,
                      space: cfopt.FeatureSpace):
    """Minimum distance over all grid points valid for the MILP's definition:
    target logit beats the others (or 0) by the margin, actionability respected (the
    cheapest first, checked with ``violations`` until one passes)."""
    m = explainer.milp
    points = logit_valid_grid_points(explainer, x, target_index, space, MARGIN)
    values = grid_norms(m, points)[norm]
    for k in np.argsort(values, kind="stable"):
        row = points.iloc[[k]].reset_index(drop=True)
        if not m.violations(row):
            assert m.distances(row)[norm] == pytest.approx(values[k], rel=1e-9, abs=1e-12)
            return m.distances(row)[norm]
    return np.inf


def toy_space(toy, immutable=(), increase=()):
    frame, _ = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    space.immutable(*immutable).increase_only(*increase)
    return space


@pytest.mark.parametrize("norm", ["l1", "l0", "linf"])
@pytest.mark.parametrize("family", ["torch", "sklearn-mlp", "logistic"])
def test_milp_equals_enumeration(toy, norm, family):
    frame, y = toy
    space = toy_space(toy)
    Z = space.transform(frame)
    if family == "torch":
        model = train_torch(Z, y, hidden=(8, 8), epochs=200)
    elif family == "sklearn-mlp":
        model = MLPClassifier((8,), max_iter=600, random_state=0).fit(Z, y)
    else:
        model = LogisticRegression().fit(Z, y)
    explainer = cfopt.Explainer(model, space, objective=norm, margin=MARGIN, mip_gap=0.0)
    predictions = explainer.milp.predict(frame)
    checked = 0
    for i in range(len(frame)):
        if checked == 6:
            break
        x = frame.iloc[[i]]
        target = 1 - int(predictions[i])
        expected = enumerate_minimum(explainer, x, target, norm, space)
        if not np.isfinite(expected):
            continue
        ce = explainer.explain(x, target=target)
        assert ce.verified and ce.status is cfopt.Status.OPTIMAL
        assert ce.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
        assert ce.distances[norm] == pytest.approx(expected, rel=1e-6, abs=1e-9)
        checked += 1
    assert checked >= 4


def test_enumeration_with_actionability(toy):
    frame, y = toy
    space = toy_space(toy, immutable=("c",), increase=("b",))
    model = train_torch(space.transform(frame), y, hidden=(8,), epochs=200, seed=3)
    explainer = cfopt.Explainer(model, space, margin=MARGIN, mip_gap=0.0)
    predictions = explainer.milp.predict(frame)
    solved = infeasible = 0
    for i in range(40):
        x = frame.iloc[[i]]
        target = 1 - int(predictions[i])
        expected = enumerate_minimum(explainer, x, target, "l1", space)
        if np.isfinite(expected):
            ce = explainer.explain(x, target=target)
            assert ce.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
            assert ce.counterfactual["c"].iloc[0] == x["c"].iloc[0]
            assert ce.counterfactual["b"].iloc[0] >= x["b"].iloc[0]
            solved += 1
        else:
            with pytest.raises(cfopt.InfeasibleError):
                explainer.explain(x, target=target)
            infeasible += 1
    assert solved >= 10


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(widths=st.lists(st.integers(2, 10), min_size=1, max_size=2),
       n_out=st.sampled_from([1, 3]), seed=st.integers(0, 10_000), row=st.integers(0, 399),
       norm=st.sampled_from(["l1", "l0"]))
def test_random_models_match_enumeration(toy, widths, n_out, seed, row, norm):
    frame, _ = toy
    space = toy_space(toy)
    torch.manual_seed(seed)
    layers, width = [], space.n_inputs
    for w in widths:
        layers += [torch.nn.Linear(width, w), torch.nn.ReLU()]
        width = w
    net = torch.nn.Sequential(*layers, torch.nn.Linear(width, n_out)).eval()
    explainer = cfopt.Explainer(net, space, objective=norm, margin=MARGIN, mip_gap=0.0)
    x = frame.iloc[[row]]
    current = explainer.milp.predict(x)[0]
    classes = explainer.milp.adapter.classes
    target = next(c for c in classes if c != current)
    expected = enumerate_minimum(explainer, x, classes.index(target), norm, space)
    if np.isfinite(expected):
        ce = explainer.explain(x, target=target)
        assert ce.verified
        assert ce.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
    else:
        with pytest.raises(cfopt.InfeasibleError):
            explainer.explain(x, target=target)
