"""DiCE's ``features_to_vary`` and ``permitted_range`` per query (issue 40): bounds on the
model already built, checked before any solve, and the same optimum as the problem
declared by other means (an explainer built with ``features_to_vary``, a declared
``LinearConstraint``) on every speed path: a linear model, a ReLU network with its
heuristic and restriction, a tree ensemble with its per-query region."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.constraints.query_range import QueryRange, QueryRequest, query_request

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def credit():
    """Raw rows with an integer, a float that goes negative, a categorical and an
    ordinal feature; a label that depends on all of them."""
    rng = np.random.default_rng(11)
    n = 400
    X = pd.DataFrame({"age": rng.integers(18, 70, n),
                      "balance": rng.uniform(-50, 100, n).round(1),
                      "housing": rng.choice(["rent", "own", "free"], n),
                      "grade": rng.choice(["low", "mid", "high"], n)},
                     index=[f"r{i}" for i in range(n)])
    score = (X.balance - 25) / 30 + (X.housing == "own") * 1.2 + (X.age - 40) / 25 \
        + X.grade.map({"low": -0.8, "mid": 0.0, "high": 0.8})
    y = (score > 0.5).astype(int).to_numpy()
    space = cfopt.FeatureSpace.from_frame(X, kinds={"grade": "ordinal"},
                                          categories={"grade": ["low", "mid", "high"]})
    return X, y, space


@pytest.fixture(scope="module")
def linear(credit):
    X, y, space = credit
    model = LogisticRegression().fit(space.transform(X), y)
    explainer = cfopt.Explainer(model, space, mip_gap=0.0)
    rejected = X[explainer.milp.predict(X) == 0]
    return model, explainer, rejected


def objective(answer) -> float:
    assert answer.status is cfopt.Status.OPTIMAL and answer.verified, answer.message
    return answer.objective


def test_features_to_vary_per_query_equals_the_explainer_built_with_it(credit, linear):
    X, y, space = credit
    model, explainer, rejected = linear
    vary = ["age", "housing"]
    built = cfopt.Explainer(model, space, mip_gap=0.0, features_to_vary=vary)
    solved = 0
    for k in range(8):
        x = rejected.iloc[[k]]
        try:
            expected = objective(built.explain(x, target=1))
        except cfopt.InfeasibleError:
            with pytest.raises(cfopt.InfeasibleError, match="query_range"):
                explainer.explain(x, target=1, features_to_vary=vary)
            continue
        solved += 1
        narrowed = explainer.explain(x, target=1, features_to_vary=vary)
        assert set(narrowed.changes().index) <= set(vary)
        assert objective(narrowed) == pytest.approx(expected, rel=1e-6, abs=1e-9)
        # the next query without the option is the declared problem again
        whole = explainer.explain(x, target=1)
        assert objective(whole) <= objective(narrowed) + 1e-9
        assert "balance" in whole.changes().index  # what the narrowed query could not use
    assert solved >= 2


@pytest.mark.parametrize("low,high", [(None, 10.0), (-40.0, -5.0), (20.0, 20.0)])
def test_numeric_permitted_range_equals_a_declared_linear_constraint(credit, linear, low,
                                                                     high):
    """Negative ends, an open end, and a range of one value (on the threshold)."""
    X, y, space = credit
    model, explainer, rejected = linear
    x = rejected.iloc[[0]]
    cons = [cfopt.LinearConstraint({"balance": 1}, ">=", low, name="low")] if low is not \
        None else []
    cons.append(cfopt.LinearConstraint({"balance": 1}, "<=", high, name="high"))
    oracle = cfopt.Explainer(model, space, mip_gap=0.0, constraints=cons)
    try:
        expected = objective(oracle.explain(x, target=1))
    except cfopt.InfeasibleError:
        with pytest.raises(cfopt.InfeasibleError, match="query_range"):
            explainer.explain(x, target=1, permitted_range={"balance": (low, high)})
        return
    answer = explainer.explain(x, target=1, permitted_range={"balance": (low, high)})
    assert objective(answer) == pytest.approx(expected, rel=1e-6, abs=1e-9)
    value = answer.counterfactual["balance"].iloc[0]
    assert (low is None or value >= low - 1e-9) and value <= high + 1e-9


def test_categorical_and_ordinal_ranges_chained_with_features_to_vary(credit, linear):
    X, y, space = credit
    model, explainer, rejected = linear
    x = rejected[(rejected.housing != "own") & (rejected.grade == "low")].iloc[[0]]
    oracle = cfopt.Explainer(model, space, mip_gap=0.0, constraints=[
        cfopt.LinearConstraint({("housing", "own"): 1}, "==", 0, name="no_own"),
        cfopt.LinearConstraint({"grade": 1}, "<=", 1, name="up_to_mid"),
        cfopt.LinearConstraint({"age": 1}, "==", 0, relative=True, name="age_stays")])
    answer = explainer.explain(x, target=1, features_to_vary=["housing", "grade", "balance"],
                               permitted_range={"housing": ["rent", "free"],
                                                "grade": ["low", "mid"]})
    assert objective(answer) == pytest.approx(objective(oracle.explain(x, target=1)),
                                              rel=1e-6, abs=1e-9)
    row = answer.counterfactual.iloc[0]
    assert row.housing in ("rent", "free") and row.grade in ("low", "mid")
    assert row.age == x.age.iloc[0]


def test_with_a_declared_constraint_and_max_changes(credit):
    X, y, space = credit
    model = LogisticRegression().fit(space.transform(X), y)
    budget = cfopt.LinearConstraint({"balance": 1}, "<=", 30, relative=True, name="budget")
    explainer = cfopt.Explainer(model, space, mip_gap=0.0, max_changes=2,
                                constraints=[budget])
    built = cfopt.Explainer(model, space, mip_gap=0.0, max_changes=1, constraints=[budget],
                            features_to_vary=["balance", "housing", "age"])
    solved = 0
    for k in range(10):
        x = X[explainer.milp.predict(X) == 0].iloc[[k]]
        try:
            expected = objective(built.explain(x, target=1))
        except cfopt.InfeasibleError:
            continue
        answer = explainer.explain(x, target=1, features_to_vary=["balance", "housing", "age"],
                                   max_changes=1)
        assert len(answer.changes()) <= 1
        assert objective(answer) == pytest.approx(expected, rel=1e-6, abs=1e-9)
        solved += 1
    assert solved >= 2


def test_relu_network_heuristic_and_restriction_keep_the_proof(german, german_model):
    """The ReLU speed path's heuristic points break the narrowing: they are checked."""
    net, space = german_model
    explainer = cfopt.Explainer(net, space, mip_gap=0.0)
    vary = ["duration", "savings", "purpose", "age"]
    built = cfopt.Explainer(net, space, mip_gap=0.0, features_to_vary=vary)
    rejected = german.X[explainer.milp.predict(german.X) == 0]
    for k in range(3):
        x = rejected.iloc[[k]]
        answer = explainer.explain(x, target=1, features_to_vary=vary,
                                   permitted_range={"duration": (None, 36)})
        oracle = cfopt.Explainer(net, space, mip_gap=0.0, features_to_vary=vary,
                                 constraints=[cfopt.LinearConstraint(
                                     {"duration": 1}, "<=", 36, name="d")])
        try:
            expected = objective(oracle.explain(x, target=1))
        except cfopt.InfeasibleError:
            continue
        assert objective(answer) == pytest.approx(expected, rel=1e-6, abs=1e-6)
        assert set(answer.changes().index) <= set(vary)
        assert answer.counterfactual.duration.iloc[0] <= 36
        assert objective(built.explain(x, target=1)) <= objective(answer) + 1e-6


def test_tree_ensemble_per_query_region(credit):
    X, y, space = credit
    Z = space.transform(X)
    forest = RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0).fit(Z, y)
    explainer = cfopt.Explainer(forest, space, mip_gap=0.0)
    x = X[explainer.milp.predict(X) == 0].iloc[[0]]
    oracle = cfopt.Explainer(forest, space, mip_gap=0.0, constraints=[
        cfopt.LinearConstraint({"balance": 1}, ">=", 0, name="low")])
    answer = explainer.explain(x, target=1, permitted_range={"balance": (0, None)})
    assert objective(answer) == pytest.approx(objective(oracle.explain(x, target=1)),
                                              rel=1e-6, abs=1e-9)
    assert answer.counterfactual.balance.iloc[0] >= 0


def test_infeasible_narrowing_is_diagnosed_by_name(credit, linear):
    X, y, space = credit
    model, explainer, rejected = linear
    x = rejected.iloc[[0]]
    with pytest.raises(cfopt.InfeasibleError) as info:
        explainer.explain(x, target=1, features_to_vary=["grade"],
                          permitted_range={"grade": [x.grade.iloc[0]]})
    assert "query_range" in info.value.groups


def test_diverse_set_and_batch_respect_the_narrowing(credit, linear, tmp_path):
    X, y, space = credit
    model, explainer, rejected = linear
    vary = ["age", "balance"]
    members = explainer.explain(rejected.iloc[[0]], target=1, n=3, features_to_vary=vary)
    assert len(members) >= 2
    assert all(set(c.changes().index) <= set(vary) for c in members)
    rows = rejected.iloc[:4]
    out = tmp_path / "batch.jsonl"
    batch = explainer.explain_many(rows, target=1, features_to_vary=vary, out=out,
                                   progress=False)
    assert set(batch.changes()["feature"]) <= set(vary) and len(batch.changes())
    again = explainer.explain_many(rows, target=1, features_to_vary=vary, out=out,
                                   progress=False)
    assert again.resumed == len(rows)
    assert batch.counterfactuals().equals(again.counterfactuals())


def test_violations_name_the_option(credit, linear):
    X, y, space = credit
    model, explainer, rejected = linear
    x = rejected.iloc[[0]]
    explainer.explain(x, target=1, features_to_vary=["balance", "housing"],
                      permitted_range={"balance": (-10, 60), "housing": ["own"]})
    box = explainer.milp.constraints["query_range"]
    factual = explainer.milp.factual.iloc[0]
    row = factual.copy()
    row["housing"] = "own"
    assert box.violations(explainer.milp, factual, row) == []
    row["age"] = factual["age"] + 1
    assert any("'age'" in p and "features_to_vary" in p
               for p in box.violations(explainer.milp, factual, row))
    row = factual.copy()
    row["balance"] = 60.5
    assert any("'balance'" in p and "permitted_range" in p
               for p in box.violations(explainer.milp, factual, row))
    row["balance"] = 60.0
    assert not any("'balance'" in p for p in box.violations(explainer.milp, factual, row))
    row["housing"] = "rent"
    assert any("'housing'" in p for p in box.violations(explainer.milp, factual, row))


@pytest.mark.parametrize("options,match", [
    ({"features_to_vary": "age"}, "list of feature names"),
    ({"features_to_vary": ["age", "nope"]}, r"features_to_vary: unknown feature\(s\) \['nope'\]"),
    ({"permitted_range": [("age", (1, 2))]}, "mapping"),
    ({"permitted_range": {"nope": (1, 2)}}, r"permitted_range: unknown feature\(s\)"),
    ({"permitted_range": {"age": (50, 40)}}, r"permitted_range\['age'\].*leaves nothing"),
    ({"permitted_range": {"age": (1, 2, 3)}}, r"\(low, high\)"),
    ({"permitted_range": {"age": "young"}}, r"\(low, high\)"),
    ({"permitted_range": {"age": (float("nan"), 40)}}, "finite numbers"),
    ({"permitted_range": {"age": (True, 40)}}, "finite numbers"),
    ({"permitted_range": {"housing": "own"}}, "non-empty list"),
    ({"permitted_range": {"housing": []}}, "non-empty list"),
    ({"permitted_range": {"housing": ["castle"]}}, r"unknown level\(s\) \['castle'\]"),
    ({"permitted_range": {"grade": ["low", "high"]}}, "consecutive"),
])
def test_bad_options_raise_before_any_solve_and_leave_nothing(credit, options, match):
    X, y, space = credit
    model = LogisticRegression().fit(space.transform(X), y)
    explainer = cfopt.Explainer(model, space)
    x = X[explainer.milp.predict(X) == 0].iloc[[0]]
    with pytest.raises((ValueError, TypeError), match=match):
        explainer.explain(x, target=1, **options)
    assert "query_range" not in explainer.milp.constraints
    with pytest.raises((ValueError, TypeError), match=match):
        explainer.explain_many(X.iloc[:2], target=1, progress=False, **options)


def test_immutable_features_cannot_be_made_to_vary(credit):
    X, y, space = credit
    fixed = copy.deepcopy(space).immutable("age")
    model = LogisticRegression().fit(fixed.transform(X), y)
    explainer = cfopt.Explainer(model, fixed)
    with pytest.raises(ValueError, match=r"features_to_vary names \['age'\].*immutable"):
        explainer.explain(X.iloc[[0]], target=1, features_to_vary=["age", "balance"])


def test_cpsat_refuses_per_query_narrowing(credit):
    pytest.importorskip("ortools")
    X, y, space = credit
    forest = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(
        space.transform(X), y)
    explainer = cfopt.Explainer(forest, space, solver="cpsat")
    x = X[explainer.milp.predict(X) == 0].iloc[[0]]
    with pytest.raises(ValueError, match="cpsat.*features_to_vary"):
        explainer.explain(x, target=1, features_to_vary=["age"])
    assert explainer.explain(x, target=1).verified  # nothing was added


def test_request_defaults_and_clipping(credit):
    X, y, space = credit
    assert not QueryRequest().narrows and not query_request(space).narrows
    request = query_request(space, permitted_range={"balance": (-1000, None)})
    f = space["balance"]
    assert request.code_range(f, 3.0) == (f.lower, f.upper)  # clipped to the bounds
    assert query_request(space, features_to_vary=[]).code_range(f, 3.0) == (3.0, 3.0)
    assert query_request(space, features_to_vary=[]).narrows
    assert QueryRange().name == "query_range"


def test_a_held_feature_moved_by_an_ulp_is_a_violation(credit, linear):
    """Exact, as immutables: a feature outside features_to_vary moved by one ulp (across
    a tree's split at the factual: differential seed 220) is not a point of the query,
    nor is a value one ulp beyond a permitted end."""
    X, y, space = credit
    model, explainer, rejected = linear
    explainer.explain(rejected.iloc[[0]], target=1, features_to_vary=["age", "housing"],
                      permitted_range={"age": (20, 60)})
    m = explainer.milp
    box, factual = m.constraints["query_range"], m.factual.iloc[0]
    row = factual.copy()
    row["balance"] = float(np.nextafter(factual["balance"], np.inf))
    assert any("'balance'" in p for p in box.violations(m, factual, row))
    row = factual.copy()
    row["age"] = 60
    assert box.violations(m, factual, row) == []
