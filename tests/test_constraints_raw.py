"""The user's own Pyomo components (:mod:`cfopt.constraints.raw`): the values a raw row
gives the variables it determines, the check of a constraint at them with its relative
tolerance, the user's objective term, the refusals before any solve, and the floor of
the costs beyond the distance."""

from __future__ import annotations

import math

import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.constraints.raw import (
    DETERMINED,
    RAW_TOLERANCE,
    RawProblem,
    RowValues,
    _lower_bound,
    within_block,
    determined_variables,
    is_users,
    members,
    raw_components,
    raw_problem,
    row_codes,
    row_problems,
    violation,
)

FRAME = pd.DataFrame({"a": [0.0, 1.5, 2.0, 3.5, 4.0, 5.0], "k": [0, 1, 2, 3, 1, 2],
                      "c": ["p", "q", "r", "q", "p", "r"]})
SPACE = cfopt.FeatureSpace.from_frame(FRAME)
MODEL = LogisticRegression().fit(SPACE.transform(FRAME), [0, 0, 0, 1, 1, 1])
ROW = pd.DataFrame([{"a": 4.0, "k": 0, "c": "q"}])


def model(objective="l1"):
    m = cfopt.Explainer(MODEL, SPACE, objective=objective).milp
    m.set_factual(FRAME.iloc[[1]])  # a = 1.5, k = 1, c = q
    m.set_target(1)
    return m


def test_the_determined_variables():
    assert DETERMINED == ("x_steps", "x_unit", "onehot", "dev", "changed", "linf")
    assert RAW_TOLERANCE == 1e-6
    m = model({"l1": 1, "l0": 1, "linf": 1})
    names = {v.name for v in determined_variables(m)}
    assert {"x_unit[a]", "x_steps[k]", "onehot[c,q]", "dev[a]", "changed[k]", "linf",
            "predictor.outputs[0]"} <= names
    assert "predictor.inputs[0]" in names  # the unit inputs of a logistic model
    plain = {v.name for v in determined_variables(model())}
    assert "linf" not in plain and "changed[a]" not in plain and "dev[a]" in plain


def test_a_rows_values_and_their_restoration():
    m = model({"l1": 1, "l0": 1, "linf": 1})
    assert row_codes(m, ROW) == {"a": 4.0, "k": 0.0}
    m.x_unit["a"].set_value(0.1)
    with RowValues(m, ROW) as values:
        assert values.row is ROW
        got = {v.name: v.value for v in values.values()}
        assert pyo.value(m.x["a"]) == pytest.approx(4.0)
        assert m.x_unit["a"].value == pytest.approx(0.8)
    assert got["x_unit[a]"] == pytest.approx(0.8)
    assert got["x_steps[k]"] == 0.0
    assert got["onehot[c,q]"] == 1.0 and got["onehot[c,p]"] == 0.0 and got["onehot[c,r]"] == 0.0
    assert got["dev[a]"] == pytest.approx(0.5) and got["dev[k]"] == pytest.approx(1 / 3)
    assert got["changed[a]"] == 1.0 and got["changed[k]"] == 1.0
    assert got["linf"] == pytest.approx(0.5)  # max(0.2 * 2.5, 1/3 * 1, c unchanged: 0)
    assert [got[f"predictor.inputs[{i}]"] for i in range(5)] == pytest.approx(
        list(SPACE.transform(ROW)[0]))
    assert got["predictor.outputs[0]"] == pytest.approx(
        MODEL.decision_function(SPACE.transform(ROW))[0])
    assert m.x_unit["a"].value == 0.1  # restored
    switched = pd.DataFrame([{"a": 1.5, "k": 1, "c": "p"}])
    with RowValues(m, switched):
        assert m.linf.value == 1.0 and m.changed["a"].value == 0.0
        assert m.dev["a"].value == 0.0


def test_a_constraints_violation_and_its_relative_tolerance():
    m = model()
    m.big = pyo.Constraint(expr=1000 * m.x["a"] <= 3000.0)
    m.low = pyo.Constraint(expr=m.x["a"] >= 4.5)
    m.band = pyo.Constraint(expr=pyo.inequality(2.0, m.x["a"] + 1, 4.0))
    with RowValues(m, ROW):
        gap, tol = violation(m.big)
        assert gap == pytest.approx(1000.0) and tol == pytest.approx(4000 * RAW_TOLERANCE)
        assert violation(m.low) == (pytest.approx(0.5), pytest.approx(4.5e-6))
        gap, tol = violation(m.band)
        assert gap == pytest.approx(1.0) and tol == pytest.approx(5 * RAW_TOLERANCE)
    m.loose = pyo.Constraint(expr=m.x["a"] <= 4.0 - 3e-6)
    m.tight = pyo.Constraint(expr=m.x["a"] <= 4.0 - 5e-6)
    assert row_problems(m, ROW, [("loose", m.loose)], "constraint") == []
    found = row_problems(m, ROW, [("tight", m.tight), ("loose", m.loose)], "rule")
    assert len(found) == 1 and found[0].startswith("rule 'tight' is violated by 5e-06")
    m.mine = pyo.Var()
    m.open = pyo.Constraint(expr=m.mine <= 1)
    assert violation(m.open) is None
    assert row_problems(m, ROW, [("open", m.open)], "constraint") == [
        "constraint 'open' cannot be evaluated: a variable of your own in it has no value"]
    m.mine.set_value(3.0)
    assert violation(m.open) == (2.0, RAW_TOLERANCE * 3.0)
    m.neg = pyo.Constraint(expr=-2 * m.mine + 1 >= -20)
    assert violation(m.neg) == (0.0, pytest.approx(20 * RAW_TOLERANCE))


def test_the_users_components_in_words_and_their_members():
    m = model()
    assert raw_components(m) == []
    m.rule = pyo.Constraint([1, 2], rule=lambda b, i: b.x["a"] <= i + 2)
    m.rule[2].deactivate()
    m.mine = pyo.Block()
    m.mine.inner = pyo.Block()
    m.mine.inner.c = pyo.Constraint(expr=m.x["k"] >= 1)
    m.objective.set_value(m.objective.expr + m.x["a"])
    m.add_constraint(cfopt.CustomConstraint(lambda m, b: m.x["a"] >= 0, name="declared"))
    assert raw_components(m) == ["Pyomo component 'rule'", "Pyomo component 'mine'",
                                 "a term added to m.objective"]
    assert [n for n, _ in members(m.rule)] == ["rule[1]"]
    assert [n for n, _ in members(m.mine)] == ["mine.inner.c"]
    problem = raw_problem(m)
    assert problem.names == ["rule[1]", "mine.inner.c"]
    assert problem.needs_witness is False
    assert problem.problems(m, ROW, witness=False) == [
        "constraint 'rule[1]' is violated by 1 at the point's raw values (tolerance 4e-06)",
        "constraint 'mine.inner.c' is violated by 1 at the point's raw values "
        "(tolerance 1e-06)"]
    assert problem.term_value(m, ROW) == pytest.approx(4.0)


def test_who_owns_a_variable():
    m = model()
    m.mine = pyo.Block()
    m.mine.deep = pyo.Block()
    m.mine.deep.v = pyo.Var()
    m.top = pyo.Var()
    block = m.add_constraint(cfopt.CustomConstraint(
        lambda m, b: m.x["a"] >= 0, name="declared"))
    block.w = pyo.Var()
    block.inner = pyo.Block()
    block.inner.z = pyo.Var()
    assert is_users(m, m.mine.deep.v) and is_users(m, m.top)
    assert not is_users(m, block.w) and not is_users(m, m.x_unit["a"])
    other = pyo.ConcreteModel()
    other.v = pyo.Var()
    assert not is_users(m, other.v)
    assert within_block(block.inner.z, block) and within_block(block.w, block)
    assert not within_block(m.top, block) and not within_block(m.mine.deep.v, block)


def test_variables_of_the_users_own_need_a_witness():
    m = model()
    m.slack = pyo.Var(bounds=(0, 2))
    m.soft = pyo.Constraint(expr=m.x["a"] <= 3 + m.slack)
    problem = raw_problem(m)
    assert problem.needs_witness is True
    assert problem.problems(m, ROW, witness=False) == [
        "the components you added to the model use variables of your own: they are "
        "checked only on a solver's point"]
    m.slack.set_value(1.0)
    assert problem.problems(m, ROW, witness=True) == []
    m.slack.set_value(0.5)
    assert len(problem.problems(m, ROW, witness=True)) == 1


def test_a_term_of_own_variables_needs_a_witness_and_a_value():
    m = model()
    m.t = pyo.Var(bounds=(-1, 3))
    m.objective.set_value(m.objective.expr + 2 * m.t)
    problem = raw_problem(m)
    assert problem.needs_witness is True and problem.constraints == []
    assert problem.extra_floor == pytest.approx(-2.0)
    with pytest.raises(ValueError, match="^the objective term you added uses a variable of "
                                         "your own that has no value"):
        problem.term_value(m, ROW)
    m.t.set_value(1.5)
    assert problem.term_value(m, ROW) == pytest.approx(3.0)


def test_a_variable_cfopt_does_not_determine_is_refused():
    m = model()
    m.method = pyo.Var(bounds=(0, 1))
    m.adopt("method")
    m.uses = pyo.Constraint(expr=m.x["a"] + m.method <= 3)
    with pytest.raises(ValueError, match=r"the constraint 'uses' uses method, a variable of "
                                         r"cfopt's formulation"):
        raw_problem(m)
    m.uses.deactivate()
    m.objective.set_value(m.objective.expr + m.method)
    with pytest.raises(ValueError, match=r"the term you added to m.objective uses method"):
        raw_problem(m)


def test_another_objective_or_a_maximised_one_is_refused():
    m = model()
    m.mine = pyo.Objective(expr=m.x["a"])
    with pytest.raises(ValueError, match=r"the model has another active objective \['mine'\]"):
        raw_problem(m)
    m.mine.deactivate()
    raw_problem(m)
    m.method_objective = pyo.Objective(expr=m.x["k"])
    m.adopt("method_objective")
    raw_problem(m)  # a method's own objective is not the user's
    m.method_objective.deactivate()
    m.objective.sense = pyo.maximize
    with pytest.raises(ValueError, match=r"^m\.objective must stay active and minimised: add your term to it "
                                         r"\(m\.objective\.set_value\(m\.objective\.expr \+ term\)\) or declare "
                                         r"cfopt\.CustomConstraint\(cost=\.\.\.\)$"):
        raw_problem(m)
    m.objective.deactivate()
    raw_problem(m)


def test_the_users_term():
    m = model()
    m.objective.set_value(m.objective.expr + m.x["a"] - m.x["a"])
    assert raw_problem(m).term is None
    m.objective.set_value(m.composed_objective + 2.5)
    problem = raw_problem(m)
    assert problem.term == 2.5 and problem.extra_floor == 2.5
    assert problem.term_value(m, ROW) == 2.5
    m.objective.set_value(m.composed_objective + 3 + 0.5 * m.x["k"])
    problem = raw_problem(m)
    assert problem.term_value(m, ROW) == pytest.approx(3.0)
    assert problem.extra_floor == pytest.approx(3.0)
    m.objective.set_value(m.composed_objective + m.x["a"] * m.x["k"])
    with pytest.raises(ValueError, match=r"^the objective you set on m.objective is not linear; "
                                         r"cfopt solves mixed-integer linear programs: keep "
                                         r"your term linear \(an epigraph variable for a "
                                         r"convex piecewise-linear cost\)$"):
        raw_problem(m)
    m.objective.set_value(m.composed_objective - 2 * m.dev["a"])
    with pytest.raises(ValueError, match=r"rewards dev\[a\] \(coefficient -1\)"):
        raw_problem(m)
    m.objective.set_value(m.composed_objective + 2 * m.dev["a"])
    assert raw_problem(m).extra_floor == 0.0
    m.mine = pyo.Block()
    m.mine.dev = pyo.Var(bounds=(0, 1))
    m.objective.set_value(m.composed_objective - m.mine.dev)
    assert raw_problem(m).extra_floor == pytest.approx(-1.0)  # not cfopt's epigraph


def test_a_declared_cost_counts_in_the_floor():
    m = model()
    m.add_constraint(cfopt.CustomConstraint(cost=lambda m, b: 2 * m.x["a"] + 1, name="c1"))
    assert raw_problem(m).extra_floor == pytest.approx(1.0)
    m.free = pyo.Var()
    m.objective.set_value(m.objective.expr + m.free)
    assert raw_problem(m).extra_floor == -math.inf


def test_the_floor_and_the_distance_radius():
    m = model()
    assert _lower_bound([]) == 0.0
    assert _lower_bound([2, 1.5, m.x["a"] - 3]) == pytest.approx(0.5)
    m.free = pyo.Var()
    assert _lower_bound([1.0, m.free, 2.0]) == -math.inf
    assert RawProblem().distance_radius(3.0) == 3.0
    assert RawProblem(extra_floor=-1.5).distance_radius(3.0) == 4.5
    assert RawProblem(extra_floor=1.0).distance_radius(math.inf) == math.inf
    assert RawProblem(extra_floor=-math.inf).distance_radius(3.0) == math.inf
    assert RawProblem().term_value(m, ROW) == 0.0
    assert RawProblem().names == [] and RawProblem().needs_witness is False


def test_the_tolerance_is_at_least_absolute():
    m = model()
    # a tiny row: tolerance 1e-6, not 1e-6 of its own magnitudes (4e-4)
    m.tiny = pyo.Constraint(expr=0.0001 * m.x["a"] <= 0.0004 - 5e-7)
    assert row_problems(m, ROW, [("tiny", m.tiny)], "constraint") == []
    # a violation exactly at the tolerance is within it
    m.exact = pyo.Constraint(expr=1e-6 * m.x["k"] <= 0)
    at_one = pd.DataFrame([{"a": 4.0, "k": 1, "c": "q"}])
    with RowValues(m, at_one):
        assert violation(m.exact) == (1e-6, 1e-6)
    assert row_problems(m, at_one, [("exact", m.exact)], "constraint") == []


def test_an_inactive_constraint_in_a_users_block_is_not_checked():
    m = model()
    m.mine = pyo.Block()
    m.mine.on = pyo.Constraint(expr=m.x["a"] <= 9)
    m.mine.off = pyo.Constraint(expr=m.x["a"] <= 1)
    m.mine.off.deactivate()
    assert [n for n, _ in members(m.mine)] == ["mine.on"]
    assert raw_problem(m).names == ["mine.on"]


def test_a_partial_reward_on_an_epigraph_variable_is_allowed():
    m = model()
    m.objective.set_value(m.composed_objective - 0.5 * m.dev["a"])
    assert raw_problem(m).term is not None  # dev[a] keeps the coefficient 0.5


def test_check_variables_names_what_it_refuses():
    from cfopt.constraints.raw import check_variables

    m = model()
    m.method = pyo.Var(bounds=(0, 1))
    m.mine = pyo.Var(bounds=(0, 1))
    m.adopt("method")
    block = m.add_constraint(cfopt.CustomConstraint(lambda m, b: m.x["a"] >= 0, name="decl"))
    block.own = pyo.Var(bounds=(0, 1))
    block.inner = pyo.Block()
    block.inner.deep = pyo.Var(bounds=(0, 1))
    assert check_variables(m, m.x["a"] + 2 * m.dev["k"], "it") is False
    assert check_variables(m, m.x["a"] + m.mine, "it") is True
    assert check_variables(m, block.own + block.inner.deep, "it", block) is True
    with pytest.raises(ValueError, match=r"^it uses decl.own, a variable of cfopt's "
                                         r"formulation whose value at a returned raw point is "
                                         r"not defined"):
        check_variables(m, block.own, "it")
    for expr in (m.x["a"] + m.method, m.mine + m.method, block.own + m.method):
        with pytest.raises(ValueError, match="^it uses method, a variable of cfopt's"):
            check_variables(m, expr, "it", block)
    m.method.fix(0.5)
    with pytest.raises(ValueError, match="^it uses method"):
        check_variables(m, m.x["a"] + m.method, "it")


def test_a_rows_values_with_offset_bounds_and_a_categorical_first():
    frame = pd.DataFrame({"c": ["p", "q", "r", "q", "p", "r"],
                          "a": [1.0, 1.5, 2.0, 3.5, 4.0, 5.0], "k": [2, 3, 4, 5, 6, 3]})
    space = cfopt.FeatureSpace.from_frame(frame, scaling="none")
    model = LogisticRegression().fit(space.transform(frame), [0, 0, 0, 1, 1, 1])
    m = cfopt.Explainer(model, space, objective={"l1": 1, "linf": 1}).milp
    m.set_factual(frame.iloc[[1]])
    row = pd.DataFrame([{"c": "r", "a": 4.0, "k": 5}])
    with RowValues(m, row) as values:
        got = {v.name: value for v, value in values.values().items()}
    assert got["onehot[c,r]"] == 1.0
    assert got["x_unit[a]"] == pytest.approx(0.75)  # (4 - 1) / 4
    assert got["x_steps[k]"] == 3.0  # 5 - 2
    # the predictor's unit inputs: its input box [lo, lo + span] mapped to [0, 1]
    lo = [b[0] for b in m.predictor_constr.input_bounds]
    hi = [b[1] for b in m.predictor_constr.input_bounds]
    z = space.transform(row)[0]
    units = [got[f"predictor.inputs[{i}]"] for i in range(len(z))]
    assert units == pytest.approx([(v - a) / (b - a) for v, a, b in zip(z, lo, hi)])
    assert any(b - a != 1 for a, b in zip(lo, hi)) and any(a != 0 for a in lo)


def test_a_declared_block_before_the_users_components_and_the_witness_of_any():
    m = model()
    m.add_constraint(cfopt.CustomConstraint(lambda m, b: m.x["a"] >= 0, name="first"))
    m.slack = pyo.Var(bounds=(0, 2))
    m.soft = pyo.Constraint(expr=m.x["a"] <= 3 + m.slack)
    m.hard = pyo.Constraint(expr=m.x["a"] <= 9)
    problem = raw_problem(m)
    assert problem.names == ["soft", "hard"]
    assert problem.needs_witness is True  # soft's own variable, though hard has none


def test_a_term_without_own_variables_keeps_the_constraints_witness():
    m = model()
    m.slack = pyo.Var(bounds=(0, 2))
    m.soft = pyo.Constraint(expr=m.x["a"] <= 3 + m.slack)
    m.objective.set_value(m.objective.expr + m.x["a"])
    assert raw_problem(m).needs_witness is True
