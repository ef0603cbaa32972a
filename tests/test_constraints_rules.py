"""Actionability rules (:mod:`cfopt.constraints.rules`) on a tiny space (income and savings
continuous, age integer, colour categorical): for hand-chosen rows, the MILP block admits
a row (its feature variables fixed there, some value of the block's own binary or step
count) exactly when the rule's checker passes it, and both say what the rule means."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt import IfCategory, IfIncreases, LinearConstraint, Step
from cfopt.formulations.features import code_variable

X = pd.DataFrame({"income": [10.0, 40.0, 100.0, 70.0], "savings": [0.0, 5.0, 2.5, 1.0],
                  "age": [20, 35, 70, 50], "colour": ["red", "green", "blue", "red"],
                  "balance": [-50.0, -10.0, 10.0, 0.0]})
SPACE = cfopt.FeatureSpace.from_frame(X)
MODEL = LogisticRegression().fit(SPACE.transform(X), [0, 1, 1, 0])
#: balance in [-50, 10]: its bounds' sum is not its width; at 0, a change is its value
FACTUAL = {"income": 40.0, "savings": 2.0, "age": 30, "colour": "red", "balance": 0.0}


def milp(rule):
    m = cfopt.CounterfactualModel(MODEL, SPACE, constraints=[rule])
    m.set_factual(pd.DataFrame([FACTUAL]))
    return m, m.component(rule.name)


def admits(m, block, row: dict) -> bool:
    """Whether the block's rows hold at ``row`` for some value of its own variables."""
    for f in m.space:
        if f.is_onehot:
            for level in f.categories:
                m.onehot[f.name, level].fix(1.0 if row[f.name] == level else 0.0)
        else:
            var, offset, scale = code_variable(m, m.space, f.name)
            var.fix((row[f.name] - offset) / scale)
    own = list(block.component_data_objects(pyo.Var))
    choices = [list(range(int(v.lb), int(v.ub) + 1)) for v in own]
    for values in (np.array(np.meshgrid(*choices)).reshape(len(own), -1).T if own else [[]]):
        for v, value in zip(own, values):
            v.set_value(int(value))
        if all(_holds(c) for c in block.component_data_objects(pyo.Constraint, active=True)):
            return True
    return False


def _holds(c) -> bool:
    body = pyo.value(c.body)
    return ((c.lower is None or body >= pyo.value(c.lower) - 1e-9)
            and (c.upper is None or body <= pyo.value(c.upper) + 1e-9))


def check(rule, cases) -> None:
    m, block = milp(rule)
    for changes, ok in cases:
        row = {**FACTUAL, **changes}
        assert admits(m, block, row) is ok, changes
        said = rule.violations(m, pd.Series(FACTUAL), pd.Series(row))
        assert (said == []) is ok, (changes, said)


# ---------------------------------------------------------------- declarations
@pytest.mark.parametrize("make, message", [
    (lambda: LinearConstraint({"income": 1}, "<", 1), r"sense must be one of \('<=', '>=', "
                                                      r"'=='\), got '<'"),
    (lambda: LinearConstraint({}, "<=", 1), "^a linear constraint needs at least one "
                                           "coefficient$"),
    (lambda: LinearConstraint({"income": math.inf}, "<=", 1),
     "coefficient of 'income' must be a finite number, got inf"),
    (lambda: LinearConstraint({"income": "2"}, "<=", 1), "coefficient of 'income' must be"),
    (lambda: LinearConstraint({"income": 1}, "<=", math.nan), "rhs must be a finite number"),
    (lambda: LinearConstraint({"income": 1}, "<=", "1"), "rhs must be a finite number"),
    (lambda: IfIncreases("income", "age", by=-1), "by must be a non-negative number, got -1"),
    (lambda: IfIncreases("income", "age", by=math.inf), "by must be a non-negative number"),
    (lambda: IfIncreases("income", "age", by="1"), "by must be a non-negative number"),
    (lambda: IfCategory("colour", "red", fixed=[]), "^give at least one feature to keep "
                                                    "fixed$"),
    (lambda: Step("income", 0), "step must be a positive number, got 0"),
    (lambda: Step("income", math.inf), "step must be a positive number"),
    (lambda: Step("income", "5"), "step must be a positive number"),
])
def test_declarations_are_checked(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("rule, message", [
    (LinearConstraint({"colour": 1}, "<=", 1, name="r"),
     "^linear constraint 'r': feature 'colour' is categorical"),
    (LinearConstraint({("colour", "pink"): 1}, "<=", 1, name="r"),
     r"linear constraint 'r': \('colour', 'pink'\) is not a level of a categorical"),
    (LinearConstraint({("age", 30): 1}, "<=", 1, name="r"), r"\('age', 30\) is not a level"),
    (LinearConstraint({("salary", "x"): 1}, "<=", 1, name="r"),
     "^linear constraint 'r': unknown feature 'salary'"),
    (IfIncreases("income", "salary", name="r"), "^rule 'r': unknown feature 'salary'"),
    (IfIncreases("income", "income", name="r"), "rule 'r': a feature cannot condition itself"),
    (IfIncreases("income", "colour", name="r"), "feature 'colour' is categorical"),
    (IfCategory("colour", "pink", fixed=["age"], name="r"),
     "rule 'r': 'pink' is not a level of categorical feature 'colour'"),
    (IfCategory("income", 10.0, fixed=["age"], name="r"), "is not a level of categorical"),
    (IfCategory("colour", "red", fixed=["colour"], name="r"),
     "rule 'r': 'colour' cannot fix itself"),
    (IfCategory("colour", "red", fixed=["salary"], name="r"),
     "^rule 'r': unknown feature 'salary'"),
    (Step("colour", 1, name="r"), "step 'r': feature 'colour' is categorical"),
])
def test_rules_are_checked_against_the_space(rule, message):
    with pytest.raises(ValueError, match=message):
        rule.validate(SPACE)


# ---------------------------------------------------------------- the rules
@pytest.mark.parametrize("sense, cases", [
    ("<=", [({}, True), ({"income": 50.0}, True), ({"income": 51.0}, False),
            ({"income": 46.0, "savings": 4.0}, True), ({"colour": "green"}, True),
            ({"colour": "blue", "income": 45.0}, True), ({"colour": "blue", "income": 46.0}, False)]),
    (">=", [({}, False), ({"income": 50.0}, True), ({"income": 49.0}, False),
            ({"income": 46.0, "colour": "blue"}, True)]),
    ("==", [({}, False), ({"income": 50.0}, True), ({"income": 50.5}, False),
            ({"income": 49.5}, False), ({"income": 44.0, "savings": 5.0}, True)]),
])
def test_an_absolute_linear_rule(sense, cases):
    """income + 2 savings + 5 [colour = blue] (sense) 54."""
    check(LinearConstraint({"income": 1, "savings": 2.0, ("colour", "blue"): 5}, sense, 54),
          cases)


def test_a_relative_linear_rule():
    """Δincome - Δage + 3 Δ[colour = red] <= 0 (a rise of income paid in years, leaving
    red costs nothing)."""
    rule = LinearConstraint({"income": 1, "age": -1, ("colour", "red"): 3}, "<=", 0,
                            relative=True, name="budget")
    assert rule.rhs == 0.0 and type(rule.rhs) is float and rule.relative is True
    check(rule, [({}, True), ({"income": 45.0}, False), ({"income": 45.0, "age": 35}, True),
                 ({"colour": "green", "income": 43.0}, True),
                 ({"colour": "green", "income": 43.5}, False)])


def test_a_linear_rules_message_and_tolerance():
    rule = LinearConstraint({"income": 1, "savings": 1}, "<=", 50, name="cap")
    m, _ = milp(rule)
    row = pd.Series({**FACTUAL, "income": 48.0 + 1e-5})
    assert rule.violations(m, pd.Series(FACTUAL), row) == []  # within 1e-6 x max(50, 2)
    row = pd.Series({**FACTUAL, "income": 48.0 + 1e-4})
    assert rule.violations(m, pd.Series(FACTUAL), row) == [
        f"linear constraint 'cap': {50.0001:g} <= {50.0:g} does not hold"]
    small = LinearConstraint({"savings": 0.5}, ">=", 0.5, name="small")
    m, _ = milp(small)
    assert small.violations(m, pd.Series(FACTUAL),
                            pd.Series({**FACTUAL, "savings": 1.0 - 1.5e-6})) == []
    assert small.violations(m, pd.Series(FACTUAL),
                            pd.Series({**FACTUAL, "savings": 1.0 - 3e-6})) != []


def test_if_increases():
    """If income increases, age increases by at least 5."""
    check(IfIncreases("income", "age", by=5, name="older"),
          [({}, True), ({"income": 41.0}, False), ({"income": 41.0, "age": 34}, False),
           ({"income": 41.0, "age": 35}, True), ({"income": 100.0, "age": 70}, True),
           ({"income": 10.0, "age": 20}, True), ({"age": 22}, True)])
    rule = IfIncreases("income", "age", name="any")
    assert rule.by == 0.0
    check(rule, [({"income": 41.0}, True), ({"income": 41.0, "age": 29}, False)])
    m, _ = milp(IfIncreases("income", "age", by=5, name="said"))
    said = m.constraints["said"].violations(m, pd.Series(FACTUAL),
                                             pd.Series({**FACTUAL, "income": 41.0, "age": 32}))
    assert said == [f"rule 'said': 'income' increases but 'age' changes by {2:g} (< {5.0:g})"]


def test_if_category():
    """If colour changes to blue, income and age stay fixed."""
    rule = IfCategory("colour", "blue", fixed=["income", "age"], name="blue")
    check(rule, [({}, True), ({"income": 50.0}, True), ({"colour": "blue"}, True),
                 ({"colour": "blue", "income": 50.0}, False),
                 ({"colour": "blue", "income": 30.0}, False),
                 ({"colour": "blue", "age": 29}, False),
                 ({"colour": "green", "income": 50.0}, True)])
    m, _ = milp(rule)
    said = rule.violations(m, pd.Series(FACTUAL),
                           pd.Series({**FACTUAL, "colour": "blue", "age": 31}))
    assert said == ["rule 'blue': 'colour' changed to 'blue' but ['age'] changed"]
    assert IfCategory("colour", "blue", "age").fixed == ["age"]


def test_if_category_keeps_a_categorical_level():
    """If colour changes to green, savings stays; a rule already at its level is void."""
    space = cfopt.FeatureSpace.from_frame(X.assign(shade=["dark", "light", "dark", "pale"]))
    model = LogisticRegression().fit(space.transform(X.assign(
        shade=["dark", "light", "dark", "pale"])), [0, 1, 1, 0])
    rule = IfCategory("colour", "green", fixed=["shade", "savings"], name="green")
    m = cfopt.CounterfactualModel(model, space, constraints=[rule])
    factual = {**FACTUAL, "shade": "dark"}
    m.set_factual(pd.DataFrame([factual]))
    block = m.component("green")
    for changes, ok in (({"shade": "pale"}, True), ({"colour": "green"}, True),
                        ({"colour": "green", "shade": "pale"}, False),
                        ({"colour": "green", "savings": 3.0}, False)):
        row = {**factual, **changes}
        assert admits(m, block, row) is ok, changes
        assert (rule.violations(m, pd.Series(factual), pd.Series(row)) == []) is ok
    at_red = IfCategory("colour", "red", fixed=["income"], name="red")
    check(at_red, [({"income": 50.0}, True)])


def test_step():
    """Savings change in whole steps of 0.75 within its range [0, 5] (6 steps each way)."""
    rule = Step("savings", 0.75, name="steps")
    m, block = milp(rule)
    assert block.steps.bounds == (-6, 6) and block.steps.domain is pyo.Integers
    check(rule, [({}, True), ({"savings": 2.75}, True), ({"savings": 0.5}, True),
                 ({"savings": 2.5}, False), ({"savings": 2.0 + 0.75 * 4}, True)])
    said = rule.violations(m, pd.Series(FACTUAL), pd.Series({**FACTUAL, "savings": 3.0}))
    assert said == [f"step 'steps': 'savings' changed by {1.0:g}, not a multiple of {0.75:g}"]
    assert rule.violations(m, pd.Series(FACTUAL),
                           pd.Series({**FACTUAL, "savings": 2.75 + 1e-9})) == []


def test_a_categorical_term_of_an_absolute_rule_is_the_indicator_itself():
    """[colour = red] >= 1: staying red holds (the indicator, not its change)."""
    check(LinearConstraint({("colour", "red"): 1}, ">=", 1, name="red"),
          [({}, True), ({"colour": "blue"}, False)])


def test_values_at_the_tolerances_edges_pass():
    """A value exactly at a rule's tolerance passes; the tolerance of a linear rule grows
    with its coefficients."""
    m, _ = milp(LinearConstraint({"balance": 1}, "<=", 0, name="edge"))
    factual = pd.Series(FACTUAL)
    for sense, value in (("<=", 5.0 + 1e-6 * 5.0), (">=", 5.0 - 1e-6 * 5.0),
                         ("==", 5.0 + 1e-6 * 5.0)):
        rule = LinearConstraint({"balance": 1}, sense, 5.0, name="edge")
        assert rule.violations(m, factual, pd.Series({**FACTUAL, "balance": value})) == []
    exact = LinearConstraint({"balance": 1}, "==", 0, name="edge")  # tolerance 1e-6
    assert exact.violations(m, factual, pd.Series({**FACTUAL, "balance": 1e-6})) == []
    whole = Step("balance", 1, name="whole")  # tolerance 1e-6 x 60
    assert whole.violations(m, factual, pd.Series({**FACTUAL, "balance": 1e-6 * 60.0})) == []
    big = LinearConstraint({"savings": 200}, ">=", 100, name="big")  # tolerance 2e-4
    assert big.violations(m, factual, pd.Series({**FACTUAL, "savings": 0.5 - 7.5e-7})) == []
    tol = 1e-6 * 60.0  # balance's range
    rule = IfIncreases("balance", "age", by=5, name="older")
    assert rule.violations(m, factual, pd.Series({**FACTUAL, "balance": tol})) == []
    rule = IfIncreases("income", "balance", by=5, name="richer")
    assert rule.violations(m, factual, pd.Series(
        {**FACTUAL, "income": 41.0, "balance": 5.0 - tol})) == []


def test_rules_on_a_feature_whose_bounds_do_not_start_at_zero():
    """balance in [-50, 10]: its big-M constants are its width (60), not 10 - 50."""
    check(IfIncreases("balance", "age", by=5, name="older"),
          [({"balance": 5.0, "age": 35}, True), ({"balance": 5.0}, False), ({}, True),
           ({"balance": -20.0}, True)])
    check(IfIncreases("income", "balance", by=5, name="richer"),
          [({}, True), ({"balance": -30.0}, True), ({"income": 41.0, "balance": 5.0}, True),
           ({"income": 41.0, "balance": 4.0}, False)])
    check(IfCategory("colour", "blue", fixed=["balance"], name="blue"),
          [({"balance": 10.0}, True), ({"balance": -50.0}, True),
           ({"colour": "blue", "balance": 1.0}, False)])
    rule = Step("balance", 10, name="tens")
    m, block = milp(rule)
    assert block.steps.bounds == (-6, 6)
    check(rule, [({"balance": -50.0}, True), ({"balance": 10.0}, True),
                 ({"balance": -25.0}, False)])
    factual = pd.Series(FACTUAL)
    assert rule.violations(m, factual, pd.Series({**FACTUAL, "balance": 10.0 + 1e-4})) != []
    assert rule.violations(m, factual, pd.Series({**FACTUAL, "balance": 10.0 + 3e-5})) == []
