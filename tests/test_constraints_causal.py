"""Causal constraints (:mod:`cfopt.constraints.causal`) on a tiny space (a, b, c
continuous, k integer) and a logistic model: declarations are checked, the effects are
the equations' values at raw rows, every counterfactual moves each child exactly with
its parents (linear, chained, learned by a regression tree on an integer parent), and a
row off an equation is named."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import cfopt
from cfopt import CausalModel, StructuralEquation

RNG = np.random.default_rng(0)
X = pd.DataFrame({"a": RNG.uniform(0, 10, 60).round(2), "b": RNG.uniform(-5, 5, 60).round(2),
                  "c": RNG.uniform(0, 20, 60).round(2), "k": RNG.integers(0, 5, 60),
                  "d": RNG.uniform(0, 0.5, 60), "colour": RNG.choice(["red", "blue", "tan"], 60)})
SPACE = cfopt.FeatureSpace.from_frame(X)
Y = (X.a + X.b - 0.3 * X.c + 2 * X.k > 7).astype(int).to_numpy()
MODEL = LogisticRegression().fit(SPACE.transform(X), Y)
#: a regression tree of c on k (c = 0.5 k + 1 on the data's k)
TREE = DecisionTreeRegressor(max_depth=3).fit(np.arange(5.0)[:, None], 0.5 * np.arange(5.0) + 1)


def rejected() -> pd.DataFrame:
    return X[MODEL.predict(SPACE.transform(X)) == 0].iloc[[0]]


def rejected_but_reachable_by_k() -> pd.DataFrame:
    """Rejected rows that k = 4 (and c with it, by TREE) would accept."""
    rows = X[MODEL.predict(SPACE.transform(X)) == 0]
    moved = rows.assign(k=4, c=rows.c + TREE.predict([[4.0]])[0] - TREE.predict(
        rows[["k"]].to_numpy(float)))
    inside = moved.c <= SPACE["c"].upper
    return rows[inside][MODEL.predict(SPACE.transform(moved[inside])) == 1]


def explain(scm: CausalModel, space: cfopt.FeatureSpace = SPACE, x: pd.DataFrame | None = None):
    explainer = cfopt.Explainer(MODEL, space, constraints=[scm])
    x = rejected() if x is None else x
    ce = explainer.explain(x, target=1)
    assert ce.verified, ce
    return explainer, x.iloc[0], ce.counterfactual.iloc[0]


def test_equations_are_checked_when_declared():
    assert StructuralEquation("b", "a", coefficients={"a": 2}).parents == ["a"]
    with pytest.raises(ValueError, match="the equation of 'b' needs at least one parent"):
        StructuralEquation("b", [], coefficients={})
    for options in ({}, {"coefficients": {"a": 1.0}, "model": TREE}):
        with pytest.raises(ValueError, match="the equation of 'b' needs exactly one of "
                                             r"coefficients= \(linear\) or model="):
            StructuralEquation("b", ["a"], **options)
    with pytest.raises(ValueError, match=r"coefficients must name exactly its parents "
                                         r"\(missing \['k'\], extra \['c'\]\)"):
        StructuralEquation("b", ["a", "k"], coefficients={"a": 1.0, "c": 2.0})
    with pytest.raises(ValueError, match=r"\(missing \[\], extra \['c'\]\)"):
        StructuralEquation("b", ["a"], coefficients={"a": 1.0, "c": 2.0})
    with pytest.raises(ValueError, match=r"\(missing \['a'\], extra \[\]\)"):
        StructuralEquation("b", ["a", "k"], coefficients={"k": 1.0})
    classifier = DecisionTreeClassifier().fit([[0.0], [1.0]], [0, 1])
    with pytest.raises(ValueError, match="the equation of 'c' needs a regressor, got the "
                                         "classifier DecisionTreeClassifier"):
        StructuralEquation("c", ["k"], model=classifier)
    with pytest.raises(ValueError, match="the equation of 'c': the DecisionTreeRegressor "
                                         "takes 1 inputs but 2 parents are given"):
        StructuralEquation("c", ["k", "a"], model=TREE)
    linear = StructuralEquation("c", ["k", "a"], coefficients={"a": 1, "k": 2})
    assert linear.coefficients == {"k": 2.0, "a": 1.0} and linear.adapter is None
    assert list(linear.coefficients) == ["k", "a"]
    assert all(type(v) is float for v in linear.coefficients.values())
    learned = StructuralEquation("c", ["k"], model=TREE)
    assert learned.coefficients is None and learned.adapter.is_regressor


def test_effects_are_the_equations_values_at_a_row():
    row = pd.Series({"a": 2.5, "b": 1.0, "c": 3.0, "k": 3})
    linear = StructuralEquation("c", ["k", "a"], coefficients={"a": 0.5, "k": -2})
    assert linear.effect(SPACE, row) == pytest.approx(-6.0 + 1.25)
    assert StructuralEquation("c", ["k"], model=TREE).effect(SPACE, row) == pytest.approx(2.5)


def test_causal_models_are_checked():
    one = StructuralEquation("b", ["a"], coefficients={"a": 1})
    with pytest.raises(ValueError, match=r"each feature has at most one structural "
                                         r"equation; got \['b', 'b'\]"):
        CausalModel([one, StructuralEquation("b", ["c"], coefficients={"c": 1})])
    with pytest.raises(ValueError, match="the causal graph has a cycle: b -> a -> c -> b"):
        CausalModel([one, StructuralEquation("c", ["b"], coefficients={"b": 1}),
                     StructuralEquation("a", ["c"], coefficients={"c": 1})])
    with pytest.raises(ValueError, match="cycle: b -> b"):
        CausalModel([StructuralEquation("b", ["b"], coefficients={"b": 1})])
    chain = CausalModel([StructuralEquation("c", ["b", "a"], coefficients={"a": 1, "b": 1}),
                         one, StructuralEquation("k", ["a"], coefficients={"a": 1})])
    assert [e.child for e in chain.equations] == ["c", "b", "k"]
    with pytest.raises(ValueError, match="equation of 'k': the child must be continuous"):
        cfopt.Explainer(MODEL, SPACE, constraints=[chain])
    with pytest.raises(ValueError, match="equation of 'b': feature 'colour' is categorical"):
        cfopt.Explainer(MODEL, SPACE, constraints=[CausalModel([
            StructuralEquation("b", ["colour"], coefficients={"colour": 1})])])
    assert CausalModel([one], name="scm").name == "scm"
    with pytest.raises(ValueError, match="equation of 'b': unknown feature 'z'"):
        cfopt.Explainer(MODEL, SPACE, constraints=[CausalModel([
            StructuralEquation("b", ["z"], coefficients={"z": 1})])])


def test_a_chain_of_linear_equations_moves_the_children_with_their_parents():
    """b = b̂ + 2 (a - â), c = ĉ - 0.5 (b - b̂) + (k - k̂): the counterfactual keeps both."""
    scm = CausalModel([StructuralEquation("b", ["a"], coefficients={"a": 2.0}),
                       StructuralEquation("c", ["b", "k"], coefficients={"b": -0.5, "k": 1})],
                      name="scm")
    explainer, x, ce = explain(scm)
    assert ce.b - x.b == pytest.approx(2.0 * (ce.a - x.a), abs=1e-6)
    assert ce.c - x.c == pytest.approx(-0.5 * (ce.b - x.b) + (ce.k - x.k), abs=1e-6)
    assert (ce.a, ce.k) != (x.a, x.k)  # the parents moved, the children with them
    assert explainer.milp.violations(ce.to_frame().T) == []


def test_a_learned_equation_moves_its_child_with_the_trees_prediction():
    """c = ĉ + tree(k) - tree(k̂), the tree's prediction at the factual set per query;
    with a and b immutable the counterfactual moves k (one step: k on its own grid)."""
    scm = CausalModel([StructuralEquation("c", ["k"], model=TREE)])
    space = cfopt.FeatureSpace.from_frame(X).immutable("a", "b")
    rows = rejected_but_reachable_by_k()
    explainer, x, ce = explain(scm, space, rows.iloc[[0]])
    assert ce.k != x.k and ce.c != x.c
    assert ce.c - x.c == pytest.approx(TREE.predict([[ce.k]])[0] - TREE.predict([[x.k]])[0],
                                       abs=1e-6)
    second = rows.iloc[[1]]
    other = explainer.explain(second, target=1).counterfactual.iloc[0]
    assert other.k != second.k.iloc[0]
    x2 = second.iloc[0]
    assert other.c - x2.c == pytest.approx(
        TREE.predict([[other.k]])[0] - TREE.predict([[x2.k]])[0], abs=1e-6)


def test_a_row_off_an_equation_is_named():
    """Off by 2e-5 of b's range (10): named; off by 0.5e-5: within the tolerance."""
    scm = CausalModel([StructuralEquation("b", ["a"], coefficients={"a": 2.0})])
    explainer = cfopt.Explainer(MODEL, SPACE, constraints=[scm])
    x = rejected()
    m = explainer.milp
    m.set_factual(x)
    m.set_target(1)
    on = x.assign(a=x.a + 1.0, b=x.b + 2.0)
    assert m.violations(on) == []
    for off, named in ((2e-4, True), (-2e-4, True), (5e-5, False)):
        said = m.violations(on.assign(b=on.b + off))
        assert bool(said) is named, off
    said = m.violations(on.assign(b=on.b + 0.1))
    assert said == [f"causal equation of 'b': it changed by {2.1:g}, its parents imply "
                    f"{2.0:g}"]


def test_a_narrow_childs_tolerance_is_absolute():
    """d's range is under 1: an equation of d is checked to 1e-5 (not 1e-5 x 2)."""
    scm = CausalModel([StructuralEquation("d", ["a"], coefficients={"a": 0.01})])
    explainer = cfopt.Explainer(MODEL, SPACE, constraints=[scm])
    x = rejected()
    m = explainer.milp
    m.set_factual(x)
    m.set_target(1)
    on = x.assign(a=x.a + 1.0, d=x.d + 0.01)
    assert m.violations(on) == []
    assert m.violations(on.assign(d=on.d + 1.5e-5))


def test_two_learned_equations_on_an_odd_step_of_an_integer_parent():
    """c and d both learned on k: each its own predictor block; a factual one step of k
    from acceptance (an odd k) moves k by exactly that step (every integer k is a
    value of the tree's input) and c, d with it."""
    d_tree = DecisionTreeRegressor(max_depth=3).fit(np.arange(5.0)[:, None],
                                                    0.05 * np.arange(5.0) + 0.1)
    scm = CausalModel([StructuralEquation("c", ["k"], model=TREE),
                       StructuralEquation("d", ["k"], model=d_tree)])
    space = cfopt.FeatureSpace.from_frame(X).immutable("a", "b", "colour")
    rows = X[MODEL.predict(SPACE.transform(X)) == 0]
    rows = rows[rows.k % 2 == 0]
    step = rows.assign(k=rows.k + 1, c=rows.c + 0.5, d=rows.d + 0.05)
    ok = (step.k <= 4) & (step.c <= SPACE["c"].upper) & (step.d <= SPACE["d"].upper)
    rows = rows[ok][MODEL.predict(SPACE.transform(step[ok])) == 1]
    explainer, x, ce = explain(scm, space, rows.iloc[[0]])
    assert ce.k == x.k + 1
    assert ce.c - x.c == pytest.approx(0.5, abs=1e-6)
    assert ce.d - x.d == pytest.approx(0.05, abs=1e-6)


def test_a_learned_equation_on_a_continuous_parent_keeps_it_continuous():
    """c learned by a linear regression on a (continuous): the same optimum as the
    equation written out, at a fractional a (no integer grid is put on a)."""
    from sklearn.linear_model import LinearRegression

    learned = LinearRegression().fit(X[["a"]].to_numpy(float), 0.3 * X.a.to_numpy() + 1.0)
    space = cfopt.FeatureSpace.from_frame(X).immutable("b", "k", "d", "colour")
    x = rejected()
    _, _, by_model = explain(CausalModel([StructuralEquation("c", ["a"], model=learned)]),
                             space, x)
    explainer, x0, written = explain(CausalModel([StructuralEquation(
        "c", ["a"], coefficients={"a": float(learned.coef_[0])})]), space, x)
    assert by_model.a == pytest.approx(written.a, abs=1e-6)
    assert by_model.a != round(by_model.a)  # the optimum lies between integers
    assert by_model.c - x0.c == pytest.approx(learned.coef_[0] * (by_model.a - x0.a), abs=1e-6)
