"""Linear rules as sums of one function per feature (:mod:`cfopt.query.separable`) by
hand on the tree walk's space: the form read off expressions of each kind of variable
(codes through ``x_unit`` and ``x_steps``, ``dev``, ``changed``, ``onehot``), refused
for a non-linear expression or a foreign variable; its parts, value and sum; a rule's
excess beyond its tolerance; and the rules and cost a walk keeps."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.tree import DecisionTreeClassifier

import cfopt
from cfopt.query.separable import Rule, SeparableForm, separable_form, walk_rules

from .test_query_tree_walk import FACTUAL, query

# a in [0, 10] (x_unit, width 10), k in {0..5} (x_steps, width 5), c one-hot; the
# factual a = 5, k = 2, c = y


def test_the_form_of_each_kind_of_variable():
    m = query(max_changes=2)
    expr = (2.0 * m.x["a"] + 3.0 * m.x["k"] + 4.0 * m.dev["a"] + 0.5 * m.dev["k"]
            + 6.0 * m.changed["a"] + 7.0 * m.onehot["c", "x"] - 1.0 * m.onehot["c", "z"]
            + 5.0)
    form = separable_form(m, expr)
    # dev[a] = |a - a0| / 10, dev[k] = |k - k0| / 5
    assert form.numeric == {"a": [pytest.approx(2.0), pytest.approx(0.4), 6.0],
                            "k": [pytest.approx(3.0), pytest.approx(0.1), 0.0]}
    assert form.categorical["c"].tolist() == [7.0, 0.0, -1.0]
    assert form.constant == pytest.approx(5.0)
    assert form.features == ["a", "k", "c"]
    codes = {"a": 8.0, "k": 4.0, "c": 2.0}
    assert form.value(m, codes) == pytest.approx(
        5.0 + 16.0 + 12.0 + 0.4 * 3 + 0.1 * 2 + 6.0 - 1.0)
    assert form.value(m, {"a": 5.0, "k": 2.0, "c": 1.0}) == pytest.approx(5.0 + 10 + 6)
    assert form.part(m, "u", np.array([1.0, 2.0])).tolist() == [0.0, 0.0]
    assert form.part(m, "c", np.array([0.0, 2.0])).tolist() == [7.0, -1.0]


def test_the_form_of_a_shifted_lower_bound():
    space = cfopt.FeatureSpace([
        cfopt.Feature("a", "continuous", lower=2.0, upper=12.0),
        cfopt.Feature("k", "integer", lower=1, upper=6)])
    X = np.array([[2.0, 1], [12.0, 6], [7.0, 3], [3.0, 5]])
    tree = DecisionTreeClassifier(max_depth=1, random_state=0).fit(X, [0, 1, 1, 0])
    m = cfopt.Explainer(tree, space).milp
    m.set_factual(pd.DataFrame({"a": [5.0], "k": [2]}))
    form = separable_form(m, 2.0 * m.x["a"] + 3.0 * m.x["k"])
    assert form.numeric["a"][0] == pytest.approx(2.0)
    assert form.numeric["k"][0] == pytest.approx(3.0)
    assert form.constant == pytest.approx(0.0, abs=1e-12)
    assert form.value(m, {"a": 5.0, "k": 2.0}) == pytest.approx(16.0)
    form = separable_form(m, m.x_unit["a"] + m.x_steps["k"])
    assert form.constant == pytest.approx(-2.0 / 10 - 1.0)
    assert form.numeric["a"][0] == pytest.approx(0.1)


def test_no_form_of_a_nonlinear_expression_or_a_foreign_variable():
    m = query()
    assert separable_form(m, m.x["a"] * m.x["k"]) is None
    m.mine = pyo.Var()
    assert separable_form(m, m.x["a"] + m.mine) is None
    other = pyo.ConcreteModel()
    other.x_unit = pyo.Var(["a"])
    assert separable_form(m, m.x["a"] + other.x_unit["a"]) is None
    assert separable_form(m, pyo.quicksum([m.x["a"], 1.0])).numeric == {
        "a": [pytest.approx(1.0), 0.0, 0.0]}


def test_plus_adds_forms_without_changing_them():
    one = SeparableForm(1.0, {"a": [1.0, 2.0, 3.0]}, {"c": np.array([1.0, 0.0, 0.0])})
    two = SeparableForm(0.5, {"a": [0.5, 0.0, 1.0], "k": [1.0, 0.0, 0.0]},
                        {"c": np.array([0.0, 2.0, 0.0]), "e": np.array([1.0, 1.0])})
    got = one.plus(two)
    assert got.constant == 1.5
    assert got.numeric == {"a": [1.5, 2.0, 4.0], "k": [1.0, 0.0, 0.0]}
    assert got.categorical["c"].tolist() == [1.0, 2.0, 0.0]
    assert got.categorical["e"].tolist() == [1.0, 1.0]
    assert one.numeric == {"a": [1.0, 2.0, 3.0]} and one.categorical["c"].tolist() == [
        1.0, 0.0, 0.0]
    assert two.numeric["a"] == [0.5, 0.0, 1.0]


def test_a_rules_excess_beyond_its_tolerance():
    rule = Rule(SeparableForm(), 1.0, 3.0, 0.25)
    got = rule.excess(np.array([0.5, 0.75, 1.0, 2.0, 3.0, 3.25, 4.0]))
    assert got.tolist() == [0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.75]


def test_walk_rules_of_declared_blocks_raw_constraints_and_the_users_term():
    block = cfopt.LinearConstraint({"k": 1.0}, "<=", 0.0, relative=True, name="no_k")
    m = query(constraints=[block])
    m.square = pyo.Constraint(expr=m.x["a"] * m.x["a"] <= 50.0)  # not separable: skipped
    m.cap_a = pyo.Constraint(expr=pyo.inequality(-20.0, 2.0 * m.x["a"], 16.0))
    m.objective.set_value(m.objective.expr + 3.0 * m.dev["k"])
    m.set_factual(FACTUAL)
    rules, term = walk_rules(m)
    assert len(rules) == 2
    mine = [r for r in rules if r.lower == -20.0][0]
    assert (mine.upper, mine.tolerance) == (16.0, pytest.approx(1e-6 * 20.0))
    assert mine.form.numeric == {"a": [pytest.approx(2.0), 0.0, 0.0]}
    declared = [r for r in rules if r is not mine][0]
    assert declared.lower == -np.inf and declared.tolerance == pytest.approx(
        1e-6 * max(1.0, abs(declared.upper)))
    assert term.numeric == {"k": [0.0, pytest.approx(0.6), 0.0]}
    plain = query()
    assert walk_rules(plain) == ([], None)


def test_the_walks_cost_sums_the_declared_costs_and_the_users_term(monkeypatch):
    m = query()
    m.objective.set_value(m.objective.expr + 3.0 * m.dev["k"])
    m.set_factual(FACTUAL)
    monkeypatch.setattr(m, "declared_costs", lambda: [2.0 * m.dev["a"], m.x["a"] * m.x["k"]])
    _, term = walk_rules(m)
    assert term.numeric == {"a": [0.0, pytest.approx(0.2), 0.0],
                            "k": [0.0, pytest.approx(0.6), 0.0]}


def test_a_rule_with_a_lower_bound_only():
    m = query()
    m.floor_a = pyo.Constraint(expr=m.x["a"] >= 0.5)
    m.set_factual(FACTUAL)
    (rule,), _ = walk_rules(m)
    assert (rule.lower, rule.upper, rule.tolerance) == (0.5, np.inf, pytest.approx(1e-6))
