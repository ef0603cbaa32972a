"""Distance terms and objectives (:mod:`cfopt.formulations.distances`).

The constraints are checked on fixed values, without a solver: at a point, the least
``dev``, ``changed`` and ``linf`` the constraints admit must be the normalized move, its
0/1 indicator and the largest weighted move, and the objective must be the weighted
sum of the norms computed here from the raw rows.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest

import cfopt
from cfopt.formulations.distances import (
    feature_weights,
    objective_expression,
    parse_objective,
    row_distances,
)
from cfopt.formulations.features import add_feature_variables, code_variable

FRAME = pd.DataFrame({"a": [0.0, 10.0, 2.5, 2.5], "n": [0, 4, 1, 1],
                      "c": ["red", "green", "blue", "red"], "k": [3.0, 3.0, 3.0, 3.0]})


@pytest.fixture(scope="module")
def space():
    return cfopt.FeatureSpace.from_frame(FRAME)


def block(space, terms, weights=None, indicators=False):
    m = pyo.ConcreteModel()
    add_feature_variables(m, space)
    if indicators:
        from cfopt.formulations.distances import add_change_indicators

        add_change_indicators(m, space)
    m.cost = pyo.Expression(expr=objective_expression(
        m, space, terms, weights or feature_weights(space), indicators))
    return m


def place(m, space, factual: dict, row: dict) -> None:
    for f in space:
        if f.is_onehot:
            for level in f.categories:
                m.onehot0[f.name, level] = float(factual[f.name] == level)
                m.onehot[f.name, level].set_value(float(row[f.name] == level))
        else:
            m.x0[f.name] = f.to_code(factual[f.name])
            var, offset, w = code_variable(m, space, f.name)
            var.set_value((f.to_code(row[f.name]) - offset) / w, skip_validation=True)


def satisfied(m) -> bool:
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        if (c.lower is not None and body < pyo.value(c.lower) - 1e-9) or \
                (c.upper is not None and body > pyo.value(c.upper) + 1e-9):
            return False
    return True


def least(m, var, grid) -> float:
    """The least value of ``var`` on ``grid`` that satisfies every constraint."""
    for v in grid:
        var.set_value(v, skip_validation=True)
        if satisfied(m):
            return v
    return math.inf


FACTUAL = {"a": 2.5, "n": 1, "c": "blue", "k": 3.0}
ROW = {"a": 7.5, "n": 0, "c": "red", "k": 3.0}


def test_weights(space):
    base = {"a": 0.1, "n": 0.25, "c": 1.0, "k": 1.0}  # a constant feature: range 1
    assert feature_weights(space) == pytest.approx(base)
    assert feature_weights(space, "range") == pytest.approx(base)
    mad = feature_weights(space, "mad")
    for f in space:
        expected = 1.0 / f.mad if (f.mad or 0) > 0 else base[f.name]
        assert mad[f.name] == pytest.approx(expected)
    assert mad["k"] == 1.0 and mad["c"] == 1.0  # no MAD: the range weight
    assert feature_weights(space, {"a": 2, "c": 0}) == pytest.approx(
        {**base, "a": 2.0, "c": 0.0})
    assert type(feature_weights(space, {"a": np.int64(2)})["a"]) is float


@pytest.mark.parametrize("weights, error, words", [
    ("manhattan", ValueError, "'range', 'mad' or a mapping"),
    ([1.0, 2.0], TypeError, "got list"),
    ({"a": 1.0, "zz": 1.0, "aa": 2.0}, ValueError, r"unknown feature\(s\) \['aa', 'zz'\]"),
    ({"a": -1.0}, ValueError, r"weights\['a'\] must be a finite non-negative"),
    ({"a": math.inf}, ValueError, "finite"),
    ({"a": math.nan}, ValueError, "finite"),
    ({"a": True}, ValueError, "finite"),
    ({"a": "1"}, ValueError, "finite"),
])
def test_bad_weights(space, weights, error, words):
    with pytest.raises(error, match=words):
        feature_weights(space, weights)


def test_parse_objective():
    assert parse_objective("l1") == {"l1": 1.0}
    assert parse_objective("linf") == {"linf": 1.0}
    assert parse_objective({"l1": 1, "l0": 0.5, "linf": 0}) == {"l1": 1.0, "l0": 0.5}
    assert all(type(v) is float for v in parse_objective({"l0": np.int64(2)}).values())
    for bad, words in (("l2", r"unknown objective term\(s\) \['l2'\]"),
                       ({"l1": 1, "x": 1, "b": 1}, r"\['b', 'x'\]"),
                       ({}, "at least one of l1, l0, linf"),
                       ({"l1": -1.0}, r"objective\['l1'\] must be a finite non-negative"),
                       ({"l1": math.inf}, "finite"), ({"l1": True}, "finite"),
                       ({"l1": 0, "l0": 0.0}, "at least one objective coefficient")):
        with pytest.raises(ValueError, match=words):
            parse_objective(bad)


def test_row_distances(space):
    w = {"a": 0.1, "n": 0.25, "c": 2.0, "k": 1.0}
    d = row_distances(space, w, pd.Series(FACTUAL), pd.Series(ROW))
    assert d == pytest.approx({"l1": 0.5 + 0.25 + 2.0, "l0": 3.0, "linf": 2.0})
    same = row_distances(space, w, pd.Series(FACTUAL), pd.Series(FACTUAL))
    assert same == {"l1": 0.0, "l0": 0.0, "linf": 0.0}
    d = row_distances(space, w, pd.Series(FACTUAL), pd.Series({**FACTUAL, "a": 0.0}))
    assert d == pytest.approx({"l1": 0.25, "l0": 1.0, "linf": 0.25})


def test_deviations_are_the_normalized_moves(space):
    m = block(space, {"l1": 1.0})
    place(m, space, FACTUAL, ROW)
    grid = np.round(np.arange(0.0, 1.0001, 0.05), 10)
    for name in m.NUMERIC:
        m.dev[name].set_value(1.0)
    expected = {"a": 0.5, "n": 0.25, "k": 0.0}  # |7.5 - 2.5| / 10, |0 - 1| / 4, none
    for name, value in expected.items():
        assert least(m, m.dev[name], grid) == pytest.approx(value), name
        m.dev[name].set_value(value)
    assert m.dev["a"].bounds == (0.0, 1.0)
    place(m, space, FACTUAL, {**ROW, "a": 0.0})  # a move down
    assert least(m, m.dev["a"], grid) == pytest.approx(0.25)
    m.dev["a"].set_value(0.25)
    assert pyo.value(m.cost) == pytest.approx(0.1 * 10 * 0.25 + 0.25 * 4 * 0.25 + 1.0)


def test_change_indicators_and_l0(space):
    m = block(space, {"l0": 2.0})
    assert not hasattr(m, "dev") and not hasattr(m, "linf")
    place(m, space, FACTUAL, ROW)
    for name, moved in (("a", True), ("n", True), ("k", False)):
        m.changed[name].set_value(1.0)
    for name, moved in (("a", True), ("n", True), ("k", False)):
        assert least(m, m.changed[name], (0.0, 1.0)) == float(moved), name
        m.changed[name].set_value(float(moved))
    place(m, space, FACTUAL, {**ROW, "a": 0.0, "n": 4})
    for name in ("a", "n"):
        assert least(m, m.changed[name], (0.0, 1.0)) == 1.0
    assert pyo.value(m.cost) == pytest.approx(2.0 * 3)  # a, n and c changed
    m2 = block(space, {"l0": 1.0}, indicators=True)  # declared before: not again
    assert isinstance(m2.changed, pyo.Var)


def test_linf_is_the_largest_weighted_move(space):
    w = {"a": 0.1, "n": 0.25, "c": 0.3, "k": 1.0}
    m = block(space, {"linf": 1.5}, weights=w)
    assert m.linf.bounds == (0.0, 1.0)  # the largest of 1, w·R and the categories' w
    place(m, space, FACTUAL, ROW)
    for name, dev in (("a", 0.5), ("n", 0.25), ("k", 0.0)):
        m.dev[name].set_value(dev)
    grid = np.round(np.arange(0.0, 1.0001, 0.05), 10)
    assert least(m, m.linf, grid) == pytest.approx(0.5)  # a: 0.1 · 10 · 0.5
    place(m, space, FACTUAL, {**ROW, "a": 3.5})
    m.dev["a"].set_value(0.1)
    assert least(m, m.linf, grid) == pytest.approx(0.3)  # c's change, weight 0.3
    assert pyo.value(m.cost) == pytest.approx(1.5 * 0.3)
    heavy = block(space, {"linf": 1.0}, weights={**w, "c": 4.0, "a": 0.5})
    assert heavy.linf.bounds == (0.0, 5.0)  # a: 0.5 · 10


def test_objective_sums_the_terms(space):
    w = {"a": 0.1, "n": 0.25, "c": 2.0, "k": 1.0}
    m = block(space, {"l1": 3.0, "l0": 0.5, "linf": 2.0}, weights=w)
    place(m, space, FACTUAL, ROW)
    for name, dev, changed in (("a", 0.5, 1), ("n", 0.25, 1), ("k", 0.0, 0)):
        m.dev[name].set_value(dev)
        m.changed[name].set_value(changed)
    m.linf.set_value(2.0)
    assert satisfied(m)
    d = row_distances(space, w, pd.Series(FACTUAL), pd.Series(ROW))
    assert pyo.value(m.cost) == pytest.approx(3.0 * d["l1"] + 0.5 * d["l0"] + 2.0 * d["linf"])
