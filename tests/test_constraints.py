"""Declared constraint blocks: every returned counterfactual satisfies them on its
decoded raw point; on an enumerable grid the constrained optimum equals brute force;
all families compose in one problem; conflicts are diagnosed by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPRegressor

import cfopt
from cfopt.constraints.trust_regions import in_region

from .test_bruteforce import enumerate_minimum


@pytest.fixture(scope="module")
def toy_model(toy):
    frame, y = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    return space, LogisticRegression(max_iter=1000).fit(space.transform(frame), y)


TOY_RULES = {
    "linear": lambda: [cfopt.LinearConstraint({"a": 1, "b": 1}, "<=", 4, name="budget")],
    "relative": lambda: [cfopt.LinearConstraint({"a": 1}, "<=", 1, relative=True)],
    "if-increases": lambda: [cfopt.IfIncreases("a", "b", by=1)],
    "if-category": lambda: [cfopt.IfCategory("c", "red", fixed=["a", "d"])],
    "step": lambda: [cfopt.Step("a", 2)],
    "level": lambda: [cfopt.LinearConstraint({("c", "blue"): 1}, "==", 0)],
}


@pytest.mark.parametrize("rule", list(TOY_RULES))
def test_rule_optimum_equals_enumeration(toy, toy_model, rule):
    frame, _ = toy
    space, model = toy_model
    explainer = cfopt.Explainer(model, space, mip_gap=0.0, constraints=TOY_RULES[rule]())
    predictions = explainer.milp.predict(frame)
    checked = 0
    for i in range(25):
        x = frame.iloc[[i]]
        target = 1 - int(predictions[i])
        expected = enumerate_minimum(explainer, x, target, "l1", space)  # uses violations()
        if not np.isfinite(expected):
            with pytest.raises(cfopt.InfeasibleError):
                explainer.explain(x, target=target)
            continue
        ce = explainer.explain(x, target=target)
        assert ce.verified
        assert ce.objective == pytest.approx(expected, rel=1e-9, abs=1e-12)
        checked += 1
    assert checked >= 8


def test_trust_region_optimum_equals_enumeration(toy, toy_model):
    frame, y = toy
    space, model = toy_model
    hull = cfopt.ConvexHull(frame, epsilon=0.3, norm="linf", max_points=40)
    explainer = cfopt.Explainer(model, space, mip_gap=0.0, constraints=[hull])
    predictions = explainer.milp.predict(frame)
    checked = 0
    for i in range(12):
        x = frame.iloc[[i]]
        target = 1 - int(predictions[i])
        explainer.milp.set_factual(x)
        explainer.milp.set_target(target)  # the hull's points follow factual and target
        expected = enumerate_minimum(explainer, x, target, "l1", space)
        if not np.isfinite(expected):
            with pytest.raises(cfopt.InfeasibleError, match="hull"):
                explainer.explain(x, target=target)
            continue
        ce = explainer.explain(x, target=target)
        assert ce.objective == pytest.approx(expected, rel=1e-9, abs=1e-12)
        checked += 1
    assert checked >= 6


@pytest.fixture(scope="module")
def german_forest(german):
    space = cfopt.FeatureSpace.from_frame(german.X)
    space.immutable("foreign_worker", "status_sex").increase_only("age")
    model = RandomForestClassifier(30, max_depth=5, random_state=0)
    model.fit(space.transform(german.X), german.y)
    rows = np.flatnonzero(model.predict(space.transform(german.X)) == 0)[:4]
    return space, model, rows


def test_a_row_slightly_off_a_causal_equation_is_a_violation(german, german_forest):
    """duration = duration̂ + 0.003 (credit − credit̂): on the equation, or off it by
    float round-off (1e-7 of duration's range), a row passes; off it by 1e-3 of the
    range (0.068 months) it breaks the equation, named."""
    X = german.X
    _, model, rows = german_forest
    space = cfopt.FeatureSpace.from_frame(X).set("duration", kind="continuous")
    scm = cfopt.CausalModel([cfopt.StructuralEquation(
        "duration", ["credit_amount"], coefficients={"credit_amount": 0.003})], name="scm")
    m = cfopt.Explainer(model, space, constraints=[scm]).milp
    x = X.iloc[[rows[0]]]
    m.set_factual(x)
    m.set_target(1)
    span = space["duration"].upper - space["duration"].lower
    on = x.assign(credit_amount=x.credit_amount + 1000, duration=x.duration + 3.0)
    for off, broken in ((0.0, False), (1e-7, False), (-1e-7, False), (1e-3, True),
                        (-1e-3, True)):
        row = on.assign(duration=on.duration + off * span)
        said = [p for p in m.violations(row) if "causal equation of 'duration'" in p]
        assert bool(said) is broken, off


def test_all_families_compose(german, german_forest):
    X = german.X
    space, model, rows = german_forest
    space = cfopt.FeatureSpace.from_frame(X).set("duration", kind="continuous")
    space.immutable("foreign_worker", "status_sex").increase_only("age")
    scm = cfopt.CausalModel([cfopt.StructuralEquation(
        "duration", ["credit_amount"], coefficients={"credit_amount": 0.003})])
    constraints = [
        cfopt.LinearConstraint({"credit_amount": 1}, "<=", 3000, relative=True, name="budget"),
        cfopt.IfIncreases("installment_rate", "age", by=1, name="older"),
        cfopt.IfCategory("housing", "own", fixed=["property"], name="own_home"),
        cfopt.Step("credit_amount", 50, name="whole_fifties"),
        scm,
        cfopt.ConvexHull(X, epsilon=0.3, max_points=200, name="hull"),
    ]
    explainer = cfopt.Explainer(model, space, constraints=constraints, time_limit=120)
    assert set(explainer.milp.constraints) == {"budget", "older", "own_home",
                                               "whole_fifties", "causal_1", "hull"}
    # the first two rejected rows take ~20 s each; composing is the point here, not hardness
    rejected = np.flatnonzero(explainer.milp.predict(X) == 0)[2:8]
    found = 0
    for i in rejected:
        x = X.iloc[[i]]
        try:
            ce = explainer.explain(x, target=1)
        except cfopt.InfeasibleError as exc:  # the composition can be too tight
            assert "relax" in str(exc)
            continue
        found += 1
        assert ce.verified and ce.status is cfopt.Status.OPTIMAL
        before, after = x.iloc[0], ce.counterfactual.iloc[0]
        assert model.predict(space.transform(ce.counterfactual))[0] == 1
        # each family, checked here on the raw point independently of violations()
        assert after["credit_amount"] - before["credit_amount"] <= 3000 + 1e-6
        delta = after["credit_amount"] - before["credit_amount"]
        assert abs(delta / 50 - round(delta / 50)) < 1e-6
        if after["installment_rate"] > before["installment_rate"]:
            assert after["age"] >= before["age"] + 1
        if after["housing"] == "own" != before["housing"]:
            assert after["property"] == before["property"]
        assert after["duration"] - before["duration"] == pytest.approx(0.003 * delta, abs=1e-4)
        points = explainer.milp.constraints["hull"].points(explainer.milp)
        assert in_region(space.transform(ce.counterfactual)[0], points, 0.3, "l1")
        assert not explainer.milp.violations(ce.counterfactual)
        if found == 3:
            break
    assert found == 3


def test_a_hull_check_takes_the_solutions_weights_as_a_certificate(monkeypatch):
    """``in_region(..., weights=λ)``: when ``z`` lies within ε (+1e-7) of the point the
    weights (clipped at 0, scaled to sum 1) give, that is the answer and no LP runs;
    weights that give a point farther away leave the verdict to the LP, which still
    answers right (inside, or outside by more than the tolerance), in both norms."""
    import cfopt.constraints.trust_regions as regions

    calls: list[int] = []
    original = regions.linprog

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(regions, "linprog", counting)
    rng = np.random.default_rng(0)
    points = rng.uniform(0, 1, (6, 3))
    lam = rng.dirichlet(np.ones(6))
    inside = lam @ points
    lam0 = np.concatenate([[0.0], lam[1:] / lam[1:].sum()])  # a negative weight clips to 0
    for norm in ("l1", "linf"):
        calls.clear()
        assert in_region(inside, points, 0.0, norm, weights=lam * 3)
        assert in_region(lam0 @ points, points, 0.0, norm,
                         weights=np.concatenate([[-1e-3], 3 * lam0[1:]]))
        assert calls == []
        assert in_region(inside + 0.01, points, 0.02 * 3, norm, weights=lam) and calls == []
        assert in_region(inside, points, 0.0, norm, weights=np.eye(6)[0]) and calls == [1]
        outside = points.max(axis=0) + 1e-4
        assert not in_region(outside, points, 0.0, norm, weights=lam) and calls == [1, 1]
        assert not in_region(outside, points, 0.0, norm,
                             weights=np.full(6, np.nan)) and calls == [1, 1, 1]
        # a point 1e-5 off its certificate's point: not within the tolerance, so the LP
        calls.clear()
        off = inside + np.array([1e-5, 0, 0])
        assert in_region(off, points, 0.0, norm, weights=lam) == in_region(off, points, 0.0,
                                                                           norm)
        assert calls == [1, 1]


def test_a_hull_checks_its_data_once_and_selects_the_targets_from_it(monkeypatch):
    """A trust region validates its data rows once, when it joins a model; the target
    rows of the first query are the model's predictions on those validated rows (the
    same as predicting on the raw rows)."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.uniform(0, 1, 60), "b": rng.choice(["x", "y", "z"], 60)})
    space = cfopt.FeatureSpace.from_frame(X)
    Z = space.transform(X)
    model = LogisticRegression().fit(Z, (Z[:, 0] > 0.5).astype(int))
    sizes: list[int] = []
    original = cfopt.FeatureSpace.validate

    def counting(self, frame, **kwargs):
        sizes.append(len(frame))
        return original(self, frame, **kwargs)

    monkeypatch.setattr(cfopt.FeatureSpace, "validate", counting)
    region = cfopt.ConvexHull(X, max_points=10, name="hull")
    explainer = cfopt.Explainer(model, space, constraints=[region])
    explainer.explain(X.iloc[[int(np.argmin(Z[:, 0]))]], target=1)
    assert sizes.count(len(X)) == 1
    predicted = np.flatnonzero(model.predict(Z) == 1)
    assert set(region._candidates(explainer.milp)) == set(predicted)


def test_a_hulls_rows_hold_its_points_as_numbers_at_each_query(monkeypatch):
    """The hull's rows hold each query's points as numbers, no parameter a persistent
    solver would send again at every solve; a second query rebuilds them with its own
    points, and each answer lies in its own hull."""
    from pyomo.core.expr.visitor import identify_mutable_parameters

    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.uniform(0, 1, (200, 3)), columns=["a", "b", "c"])
    space = cfopt.FeatureSpace.from_frame(X)
    Z = space.transform(X)
    model = LogisticRegression().fit(Z, (Z[:, 0] + Z[:, 1] > 1).astype(int))
    region = cfopt.ConvexHull(X, max_points=6, name="hull")
    explainer = cfopt.Explainer(model, space, constraints=[region])
    rejected = np.flatnonzero(model.predict(Z) == 0)
    for row in rejected[:2]:
        ce = explainer.explain(X.iloc[[row]], target=1)
        block = explainer.milp.component("hull")
        points = region.points(explainer.milp)
        assert len(points) == len(block.POINTS) and not np.isnan(points).any()
        for j in block.INPUTS:
            assert not list(identify_mutable_parameters(block.hull[j].body))
            terms = {v.name: c for v, c in zip(*_linear_terms(block.hull[j].body))}
            side = terms[block.s_pos[j].name]  # z + s = Σ λ p, on either side of the row
            assert [-side * terms.get(block.weight[p].name, 0.0) for p in block.POINTS] == \
                pytest.approx(points[:, j].tolist())
        assert ce.verified and in_region(space.transform(ce.counterfactual)[0], points, 0.0,
                                         "l1")


def _linear_terms(expression):
    from pyomo.repn import generate_standard_repn

    repn = generate_standard_repn(expression)
    return repn.linear_vars, [float(c) for c in repn.linear_coefs]


def test_learned_causal_equation(german, german_forest):
    X = german.X
    space, model, rows = german_forest
    regressor = MLPRegressor(hidden_layer_sizes=(10,), max_iter=3000, random_state=0)
    regressor.fit(X[["credit_amount"]].to_numpy(float), X["duration"].to_numpy(float))
    scm = cfopt.CausalModel([cfopt.StructuralEquation("duration", ["credit_amount"],
                                                      model=regressor)])
    space = cfopt.FeatureSpace.from_frame(X).set("duration", kind="continuous")
    explainer = cfopt.Explainer(model, space, constraints=[scm], time_limit=120)
    for i in rows[:3]:
        x = X.iloc[[i]]
        ce = explainer.explain(x, target=1)
        assert ce.verified
        moved = ce.counterfactual["duration"].iloc[0] - x["duration"].iloc[0]
        implied = (regressor.predict([[ce.counterfactual["credit_amount"].iloc[0]]])[0]
                   - regressor.predict([[x["credit_amount"].iloc[0]]])[0])
        assert moved == pytest.approx(implied, abs=1e-4)


@pytest.mark.parametrize("region", ["knn", "clusters"])
def test_other_trust_regions(german, german_forest, region):
    X = german.X
    space, model, rows = german_forest
    constraint = (cfopt.NearestNeighbourHull(X, k=8) if region == "knn"
                  else cfopt.ClusterHulls(X, n_clusters=3, points_per_cluster=25))
    plain = cfopt.Explainer(model, space)
    explainer = cfopt.Explainer(model, space, constraints=[constraint])
    for i in rows[:3]:
        x = X.iloc[[i]]
        ce = explainer.explain(x, target=1)
        assert ce.verified and not explainer.milp.violations(ce.counterfactual)
        assert ce.objective >= plain.explain(x, target=1).objective - 1e-9


def test_conflicts_are_diagnosed_by_name(german, german_forest):
    X = german.X
    space, model, rows = german_forest
    space = cfopt.FeatureSpace.from_frame(X).decrease_only("duration")
    longer = cfopt.LinearConstraint({"duration": 1}, ">=", 6, relative=True, name="longer")
    explainer = cfopt.Explainer(model, space, constraints=[longer])
    with pytest.raises(cfopt.InfeasibleError) as info:
        explainer.explain(X.iloc[[rows[0]]], target=1)
    assert "longer" in str(info.value) and "decrease_only" in str(info.value)


def test_constraint_declarations_are_checked(german):
    space = cfopt.FeatureSpace.from_frame(german.X)
    model = LogisticRegression(max_iter=2000).fit(space.transform(german.X), german.y)
    cases = [
        (cfopt.LinearConstraint({"salary": 1}, "<=", 1), "unknown feature 'salary'"),
        (cfopt.LinearConstraint({"purpose": 1}, "<=", 1), "categorical"),
        (cfopt.LinearConstraint({("purpose", "yacht"): 1}, "<=", 1), "not a level"),
        (cfopt.IfIncreases("age", "age"), "cannot condition itself"),
        (cfopt.IfCategory("housing", "castle", fixed=["age"]), "not a level"),
        (cfopt.Step("purpose", 1), "categorical"),
        (cfopt.ConvexHull(german.X.drop(columns=["age"])), "lack the feature column"),
        (cfopt.CausalModel([cfopt.StructuralEquation("age", ["duration"],
                                                     coefficients={"duration": 1})]),
         "must be continuous"),
    ]
    for constraint, message in cases:
        with pytest.raises(ValueError, match=message):
            cfopt.Explainer(model, space, constraints=[constraint])
    with pytest.raises(ValueError, match="sense"):
        cfopt.LinearConstraint({"age": 1}, "<", 1)
    with pytest.raises(ValueError, match="cycle"):
        cfopt.CausalModel([
            cfopt.StructuralEquation("a", ["b"], coefficients={"b": 1}),
            cfopt.StructuralEquation("b", ["a"], coefficients={"a": 1})])
    with pytest.raises(ValueError, match="exactly one of"):
        cfopt.StructuralEquation("a", ["b"])
    with pytest.raises(ValueError, match="needs a regressor"):
        cfopt.StructuralEquation("duration", ["age"], model=LogisticRegression().fit(
            german.X[["age"]], german.y))
    with pytest.raises(ValueError, match="already exists"):
        cfopt.Explainer(model, space, constraints=[
            cfopt.Step("age", 1, name="same"), cfopt.Step("duration", 1, name="same")])
    with pytest.raises(TypeError, match="constraint blocks"):
        cfopt.Explainer(model, space, constraints=["age <= 3"])
