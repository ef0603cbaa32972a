"""A linear model's block (:mod:`cfopt.formulations.predictors.linear`): outputs equal
the model's decision values at any point of the input box, written on the inputs
normalized to the box, with the outputs' bounds over the box."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest
from pyomo.repn.standard_repn import generate_standard_repn
from sklearn.linear_model import LinearRegression, LogisticRegression

from cfopt.formulations.predictors.linear import build_linear
from cfopt.models import parse_model

RNG = np.random.default_rng(0)
X = np.column_stack([RNG.uniform(1e5, 1e6, 60), RNG.uniform(-2, 3, 60), RNG.uniform(0, 1, 60)])
BOUNDS = [(1e5, 1e6), (-2.0, 3.0), (0.5, 0.5)]  # the last input fixed


def block_of(model, bounds=BOUNDS):
    m = pyo.ConcreteModel()
    constr = build_linear(m, "lin", parse_model(model), bounds)
    return m, constr


def solved_outputs(m, z, bounds=BOUNDS):
    """The outputs the block's rows force at model inputs ``z``."""
    out = []
    for i, (lb, ub) in enumerate(bounds):
        m.lin.inputs[i].set_value((z[i] - lb) / (ub - lb) if ub > lb else 0.0)
    for j in sorted(m.lin.affine):
        repn = generate_standard_repn(m.lin.affine[j].body, compute_values=True)
        coef = {v.name: float(a) for a, v in zip(repn.linear_coefs, repn.linear_vars)}
        name = m.lin.outputs[j].name
        rest = sum(a * v.value for a, v in zip(repn.linear_coefs, repn.linear_vars)
                   if v.name != name) + float(repn.constant)
        rhs = pyo.value(m.lin.affine[j].upper)
        out.append((rhs - rest) / coef[name])
    return np.array(out)


def test_binary_classifier_outputs_are_its_decision_values():
    y = (X[:, 0] * 1e-5 + X[:, 1] > 6).astype(int)
    model = LogisticRegression(max_iter=5000).fit(X, y)
    m, constr = block_of(model)
    assert constr.block is m.lin
    points = np.column_stack([RNG.uniform(1e5, 1e6, 5), RNG.uniform(-2, 3, 5), np.full(5, 0.5)])
    for z in points:
        assert solved_outputs(m, z)[0] == pytest.approx(model.decision_function([z])[0],
                                                        rel=1e-9, abs=1e-9)
    assert [m.lin.inputs[i].bounds for i in range(3)] == [(0, 1), (0, 1), (0, 0)]
    names = {v.name for v in generate_standard_repn(m.lin.affine[0].body).linear_vars}
    assert "lin.inputs[2]" not in names  # a fixed input is a constant of the row
    # the output's bounds are the decision values' range over the box
    corners = np.array([[a, b, 0.5] for a in (1e5, 1e6) for b in (-2.0, 3.0)])
    values = model.decision_function(corners)
    lb, ub = m.lin.outputs[0].bounds
    assert lb == pytest.approx(values.min()) and ub == pytest.approx(values.max())


def test_coefficients_are_scaled_to_the_box_and_zero_weights_dropped():
    model = LinearRegression().fit(X[:, :2], 2e-6 * X[:, 0] + 0.0 * X[:, 1] + 1.0)
    model.coef_ = np.array([2e-6, 0.0])
    model.intercept_ = 1.0
    bounds = BOUNDS[:2]
    m, _ = block_of(model, bounds)
    repn = generate_standard_repn(m.lin.affine[0].body, compute_values=True)
    coef = {v.name: float(a) for a, v in zip(repn.linear_coefs, repn.linear_vars)}
    assert set(coef) == {"lin.inputs[0]", "lin.outputs[0]"}
    # 2e-6 per unit over a width of 9e5: 1.8 per unit of the normalized input
    assert abs(coef["lin.inputs[0]"] / coef["lin.outputs[0]"]) == pytest.approx(1.8)
    assert solved_outputs(m, [1e5, 0.0], bounds)[0] == pytest.approx(1.2)
    assert solved_outputs(m, [1e6, 3.0], bounds)[0] == pytest.approx(3.0)
    assert m.lin.outputs[0].bounds == pytest.approx((1.2, 3.0))


def test_a_multiclass_model_has_one_output_per_class():
    y = np.digitize(X[:, 1], [-0.5, 1.5])
    model = LogisticRegression(max_iter=5000).fit(X, y)
    m, _ = block_of(model)
    assert len(m.lin.outputs) == 3 and len(m.lin.affine) == 3
    z = np.array([5e5, 0.7, 0.5])
    assert solved_outputs(m, z) == pytest.approx(model.decision_function([z])[0], abs=1e-9)


def test_a_weight_of_one_is_kept():
    model = LinearRegression().fit(X[:, :2], X[:, 0])
    model.coef_ = np.array([1.0, 0.0])
    model.intercept_ = 0.0
    m, _ = block_of(model, BOUNDS[:2])
    assert solved_outputs(m, [4e5, 1.0], BOUNDS[:2])[0] == pytest.approx(4e5)
