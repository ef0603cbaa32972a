"""A rule and a cost of your own as a declared block (:mod:`cfopt.constraints.custom`):
what a rule may return, the checks of its arguments, its cost at a raw row, its
violations at a raw row, and whether it needs the solver's values (a witness)."""

from __future__ import annotations

import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt import CustomConstraint

FRAME = pd.DataFrame({"a": [0.0, 1, 2, 3, 4, 5], "k": [0, 1, 2, 3, 1, 2],
                      "c": ["p", "q", "p", "q", "p", "q"]})
SPACE = cfopt.FeatureSpace.from_frame(FRAME)
MODEL = LogisticRegression().fit(SPACE.transform(FRAME), [0, 0, 0, 1, 1, 1])
FACTUAL = FRAME.iloc[0]


def model():
    m = cfopt.Explainer(MODEL, SPACE).milp
    m.set_factual(FRAME.iloc[[0]])
    return m


def row(a=0.0, k=0, c="p"):
    return pd.Series({"a": a, "k": k, "c": c})


def test_a_custom_constraint_needs_a_rule_or_a_cost_that_are_functions():
    with pytest.raises(ValueError, match="^a custom constraint needs a rule, a cost or both$"):
        CustomConstraint()
    with pytest.raises(TypeError, match="rule must be a function .* got int"):
        CustomConstraint(3)
    with pytest.raises(TypeError, match="cost must be a function .* got str"):
        CustomConstraint(cost="a")
    c = CustomConstraint(cost=lambda m, b: m.x["a"], name="mine")
    assert c.name == "mine" and c.rule is None and CustomConstraint.kind == "custom"
    assert c.needs_witness is False


def test_one_relation_is_checked_at_the_rows_raw_values():
    m = model()
    c = CustomConstraint(lambda m, b: m.x["a"] <= 2.5, name="cap")
    block = m.add_constraint(c)
    assert len(block.rules) == 1
    assert c.needs_witness is False
    assert c.objective_term(m, block) is None
    assert c.cost(m, FACTUAL, row(a=4.0)) == 0.0
    assert c.violations(m, FACTUAL, row(a=2.5)) == []
    found = c.violations(m, FACTUAL, row(a=4.0))
    assert len(found) == 1
    assert found[0].startswith("custom constraint 'cap': 'cap.rules[1]' is violated by 1.5")


def test_several_relations_a_generator_and_components_of_its_own():
    m = model()
    c = CustomConstraint(lambda m, b: (e for e in (m.x["a"] >= 1, m.x["k"] <= 2)),
                         name="two")
    block = m.add_constraint(c)
    assert len(block.rules) == 2
    assert c.violations(m, FACTUAL, row(a=1.0, k=2)) == []
    assert len(c.violations(m, FACTUAL, row(a=0.0, k=3))) == 2

    def own(m, b):
        b.limit = pyo.Constraint(expr=m.x["k"] >= 1)

    d = CustomConstraint(own, name="own")
    block = m.add_constraint(d)
    assert len(block.rules) == 0
    assert d.violations(m, FACTUAL, row(k=1)) == []
    assert "'own.limit' is violated" in d.violations(m, FACTUAL, row(k=0))[0]


@pytest.mark.parametrize("made, culprit", [(3, "int"), ([True], "bool"), (True, "bool"),
                                           (["a"], "str")])
def test_a_rule_returning_no_relation_is_refused(made, culprit):
    m = model()
    with pytest.raises(TypeError, match=rf"the rule of custom constraint 'bad' must return "
                                        rf"Pyomo relational expressions .* got {culprit}"):
        m.add_constraint(CustomConstraint(lambda m, b: made, name="bad"))


def test_a_cost_is_in_the_objective_and_exact_at_a_raw_row():
    m = model()
    c = CustomConstraint(cost=lambda m, b: 2 * m.x["a"] + 0.5 * m.x["k"], name="price")
    block = m.add_constraint(c)
    assert c.objective_term(m, block) is block.cost
    assert c.cost(m, FACTUAL, row(a=3.0, k=2)) == pytest.approx(7.0)
    assert c.violations(m, FACTUAL, row(a=3.0)) == []
    assert c.needs_witness is False


def test_variables_of_its_own_need_a_witness():
    m = model()

    def rule(m, b):
        b.slack = pyo.Var(bounds=(0, 3))
        return m.x["a"] <= 1 + b.slack

    c = CustomConstraint(rule, cost=lambda m, b: 2 * b.slack, name="slacked")
    block = m.add_constraint(c)
    assert c.needs_witness is True
    block.slack.set_value(1.0)
    assert c.cost(m, FACTUAL, row(a=2.0)) == 2.0
    assert c.violations(m, FACTUAL, row(a=2.0)) == []
    assert len(c.violations(m, FACTUAL, row(a=2.5))) == 1
    block.slack.set_value(None)
    with pytest.raises(ValueError, match="the cost of 'slacked' uses a variable of its own "
                                         "that has no value"):
        c.cost(m, FACTUAL, row(a=2.0))
    only_cost = CustomConstraint(lambda m, b: m.x["a"] >= 0, cost=lambda m, b: m.x["a"],
                                 name="plain")
    m.add_constraint(only_cost)
    assert only_cost.needs_witness is False


def test_an_own_variable_only_in_the_cost_needs_a_witness():
    m = model()

    def rule(m, b):
        b.t = pyo.Var(bounds=(0, 1))

    c = CustomConstraint(rule, cost=lambda m, b: b.t, name="tcost")
    m.add_constraint(c)
    assert c.needs_witness is True


def test_a_variable_of_cfopts_formulation_without_a_raw_value_is_refused():
    m = model()
    m.method_var = pyo.Var(bounds=(0, 1))  # a method's own variable, not the user's
    m.adopt("method_var")
    with pytest.raises(ValueError, match=r"custom constraint 'hidden' \(hidden.rules\[1\]\) "
                                         r"uses method_var"):
        m.add_constraint(CustomConstraint(lambda m, b: m.method_var <= 1, name="hidden"))
    with pytest.raises(ValueError, match=r"the cost of 'hcost' uses method_var"):
        m.add_constraint(CustomConstraint(cost=lambda m, b: m.method_var, name="hcost"))
