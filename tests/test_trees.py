"""Tree ensembles (sklearn): the structure and the MILP block reproduce the library's
own scores, and every counterfactual is classified as the target by the library."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

import cfopt

from .conftest import grid, sample_rows
from .test_bruteforce import enumerate_minimum

FAMILIES = {
    "tree": lambda: DecisionTreeClassifier(max_depth=6, random_state=0),
    "forest": lambda: RandomForestClassifier(30, max_depth=5, random_state=0),
    "extra-trees": lambda: ExtraTreesClassifier(20, max_depth=5, random_state=0),
    "boosting": lambda: GradientBoostingClassifier(n_estimators=30, max_depth=3,
                                                   random_state=0),
    "hist-boosting": lambda: HistGradientBoostingClassifier(max_iter=30, max_depth=3,
                                                            random_state=0),
}


@pytest.fixture(scope="module")
def german_trees(german):
    space = cfopt.FeatureSpace.from_frame(german.X)
    space.immutable("foreign_worker", "status_sex").increase_only("age")
    Z = space.transform(german.X)
    return space, {name: make().fit(Z, german.y) for name, make in FAMILIES.items()}


@pytest.fixture(scope="module")
def continuous_data():
    X, y = make_classification(n_samples=400, n_features=5, n_informative=4, n_redundant=0,
                               n_classes=3, n_clusters_per_class=1, random_state=7)
    frame = pd.DataFrame(X * 1000, columns=[f"f{i}" for i in range(5)])
    return frame, y


def expected_output(model, Z):
    if isinstance(model, (GradientBoostingClassifier, HistGradientBoostingClassifier)):
        out = model.decision_function(Z)
        return out.reshape(len(Z), -1)
    return model.predict_proba(Z)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_structure_reproduces_the_library(german, german_trees, family):
    space, models = german_trees
    model = models[family]
    adapter = cfopt.models.parse_model(model)
    for Z in (space.transform(german.X), space.transform(sample_rows(space, 1000, seed=2))):
        out = adapter.structure.outputs(Z)
        np.testing.assert_allclose(out, expected_output(model, Z), rtol=0, atol=1e-9)
        idx = cfopt.models.decide(out, adapter.decision)
        assert (np.asarray(adapter.classes)[idx] == model.predict(Z)).all()


@pytest.mark.parametrize("family, formulation", [(f, "leaf") for f in FAMILIES] + [
    ("forest", "threshold"), ("boosting", "threshold"), ("hist-boosting", "threshold")])
def test_block_reproduces_the_library(german, german_trees, family, formulation):
    space, models = german_trees
    m = pyo.ConcreteModel()
    predictor = cfopt.formulations.add_predictor(m, models[family], input_bounds=space.input_bounds(),
                                    input_grids=space.input_grids(), formulation=formulation)
    Z = np.vstack([space.transform(german.X.iloc[:25]),  # two solves each: a few suffice
                   space.transform(sample_rows(space, 25, seed=3))])
    assert predictor.get_error(Z) <= 1e-9


@pytest.mark.parametrize("family, formulation", [
    ("forest", "leaf"), ("boosting", "leaf"), ("hist-boosting", "leaf"),
    ("forest", "threshold"), ("boosting", "threshold")])
def test_continuous_inputs_and_multiclass(continuous_data, family, formulation):
    frame, y = continuous_data
    space = cfopt.FeatureSpace.from_frame(frame)
    Z = space.transform(frame)
    model = FAMILIES[family]().fit(Z, y)
    adapter = cfopt.models.parse_model(model)
    bounds, grids = space.input_bounds(), space.input_grids()
    rng = np.random.default_rng(0)
    R = rng.random((1000, Z.shape[1]))
    np.testing.assert_allclose(adapter.structure.outputs(R), expected_output(model, R),
                               rtol=0, atol=1e-9)
    m = pyo.ConcreteModel()
    predictor = cfopt.formulations.add_predictor(m, model, input_bounds=bounds, input_grids=grids,
                                    input_rounding=space.input_rounding(),
                                    formulation=formulation)
    assert predictor.get_error(np.vstack([Z[:10], R[:10]])) <= 1e-9  # two solves per row
    explainer = cfopt.Explainer(model, space, time_limit=60, tree_formulation=formulation)
    x = frame.iloc[[0]]  # each of the other two classes
    current = explainer.milp.predict(x)[0]
    for target in {0, 1, 2} - {current}:
        ce = explainer.explain(x, target=target)
        assert ce.verified
        assert model.predict(space.transform(ce.counterfactual))[0] == target


@pytest.mark.parametrize("family", list(FAMILIES))
def test_thirty_counterfactuals_verified_by_the_library(german, german_trees, family):
    space, models = german_trees
    model = models[family]
    explainer = cfopt.Explainer(model, space)
    pred = explainer.milp.predict(german.X)
    rows = [i for i in range(len(pred)) if pred[i] == 0][:30]
    assert len(rows) == 30
    for i in rows:
        ce = explainer.explain(german.X.iloc[[i]], target=1)
        assert ce.status is cfopt.Status.OPTIMAL and ce.verified
        assert model.predict(space.transform(ce.counterfactual))[0] == 1
        assert not explainer.milp.violations(ce.counterfactual)


@pytest.mark.parametrize("family, formulation", [
    ("forest", "leaf"), ("boosting", "leaf"), ("tree", "leaf"),
    ("forest", "threshold"), ("boosting", "threshold")])
def test_tree_optimum_equals_enumeration(toy, family, formulation):
    frame, y = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    model = FAMILIES[family]().fit(space.transform(frame), y)
    explainer = cfopt.Explainer(model, space, mip_gap=0.0, tree_formulation=formulation)
    points = grid(space)
    assert len(points) == 120
    predictions = explainer.milp.predict(frame)
    checked = 0
    for i in range(40):
        x = frame.iloc[[i]]
        target = 1 - int(predictions[i])
        expected = enumerate_minimum(explainer, x, target, "l1", space)
        if not np.isfinite(expected):
            with pytest.raises(cfopt.InfeasibleError):
                explainer.explain(x, target=target)
            continue
        ce = explainer.explain(x, target=target)
        assert ce.objective == pytest.approx(expected, rel=1e-9, abs=1e-12)
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("tighten", [True, False])
def test_formulations_agree_on_continuous_forest(german, tighten):
    space = cfopt.FeatureSpace.from_frame(german.X)
    for name in ("duration", "credit_amount", "age"):
        space.set(name, kind="continuous")
    Z = space.transform(german.X)
    model = RandomForestClassifier(20, max_depth=6, random_state=1).fit(Z, german.y)
    explainers = {f: cfopt.Explainer(model, space, mip_gap=0.0, tree_formulation=f,
                                     tighten_per_query=tighten) for f in ("leaf", "threshold")}
    rejected = german.X[model.predict(Z) == 0]
    for i in range(5):
        x = rejected.iloc[[i]]
        leaf, threshold = (explainers[f].explain(x, target=1) for f in ("leaf", "threshold"))
        assert leaf.status is threshold.status is cfopt.Status.OPTIMAL
        # the same feasible set (binary or continuous leaves under the same cut binaries)
        assert threshold.objective == pytest.approx(leaf.objective, rel=1e-6, abs=1e-6)
        assert model.predict(space.transform(threshold.counterfactual))[0] == 1


def test_formulation_option_checked(german_trees, german):
    space, models = german_trees
    with pytest.raises(ValueError, match="unknown tree formulation 'misic'"):
        cfopt.Explainer(models["forest"], space, tree_formulation="misic")
    mlp_space = cfopt.FeatureSpace.from_frame(german.X)
    linear = LogisticRegression(max_iter=2000).fit(mlp_space.transform(german.X), german.y)
    with pytest.raises(ValueError, match="applies to tree ensembles"):
        cfopt.Explainer(linear, mlp_space, tree_formulation="threshold")


BOOSTERS = {
    "xgboost": lambda: pytest.importorskip("xgboost").XGBClassifier(
        n_estimators=40, max_depth=3, random_state=0),
    "lightgbm": lambda: pytest.importorskip("lightgbm").LGBMClassifier(
        n_estimators=40, num_leaves=8, random_state=0, verbose=-1),
}
#: XGBoost sums leaf values in float32: its margins differ from the exact sum by ~1e-6
BOOSTER_TOL = {"xgboost": 1e-5, "lightgbm": 1e-9}


@pytest.mark.parametrize("family", list(BOOSTERS))
def test_boosters_reproduce_the_library(german, family):
    space = cfopt.FeatureSpace.from_frame(german.X)
    Z = space.transform(german.X)
    model = BOOSTERS[family]().fit(Z, german.y)
    adapter = cfopt.models.parse_model(model)
    R = space.transform(sample_rows(space, 1000, seed=4))
    for A in (Z, R):
        out = adapter.structure.outputs(A)
        margin = np.asarray(adapter.output(A))
        np.testing.assert_allclose(out, margin, rtol=0, atol=BOOSTER_TOL[family])
        idx = cfopt.models.decide(out, adapter.decision)
        assert (np.asarray(adapter.classes)[idx] == model.predict(A)).all()
    m = pyo.ConcreteModel()
    predictor = cfopt.formulations.add_predictor(m, model, input_bounds=space.input_bounds(),
                                    input_grids=space.input_grids())
    assert predictor.get_error(R[:80]) <= BOOSTER_TOL[family]


@pytest.mark.parametrize("family", list(BOOSTERS))
def test_booster_counterfactuals(german, family):
    space = cfopt.FeatureSpace.from_frame(german.X).immutable("foreign_worker")
    Z = space.transform(german.X)
    model = BOOSTERS[family]().fit(Z, german.y)
    explainer = cfopt.Explainer(model, space)
    pred = explainer.milp.predict(german.X)
    rows = [i for i in range(len(pred)) if pred[i] == 0][:30]
    for i in rows:
        ce = explainer.explain(german.X.iloc[[i]], target=1)
        assert ce.verified and ce.status is cfopt.Status.OPTIMAL
        assert model.predict(space.transform(ce.counterfactual))[0] == 1


@pytest.mark.parametrize("family", list(BOOSTERS))
def test_booster_multiclass(continuous_data, family):
    frame, y = continuous_data
    space = cfopt.FeatureSpace.from_frame(frame)
    Z = space.transform(frame)
    model = BOOSTERS[family]().fit(Z, y)
    adapter = cfopt.models.parse_model(model)
    R = np.random.default_rng(1).random((500, Z.shape[1]))
    np.testing.assert_allclose(adapter.structure.outputs(R), adapter.output(R), rtol=0,
                               atol=BOOSTER_TOL[family])
    explainer = cfopt.Explainer(model, space, time_limit=60)
    x = frame.iloc[[0]]
    current = explainer.milp.predict(x)[0]
    for target in {0, 1, 2} - {current}:
        ce = explainer.explain(x, target=target)
        assert ce.verified and model.predict(space.transform(ce.counterfactual))[0] == target


def test_lightgbm_reads_values_near_zero_as_zero():
    """LightGBM reads |x| <= 1e-35 (as a float) as 0 and puts its zero-bin splits at
    +-1e-35: the structure must send such values where the library does (a factual at
    -1e-35 went left in cfopt's model and right in LightGBM's); zero as missing with a
    default way that breaks the half-line is refused by name."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.choice([-1.0, 0.0, 1.0], 400) * rng.random(400), rng.random(400)])
    y = (X[:, 0] > 0).astype(int) ^ (X[:, 0] == 0).astype(int)
    model = lgb.LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=5,
                               verbose=-1).fit(X, y)
    zero = float(np.float32(1e-35))
    probes = np.array([[v, 0.5] for v in (0.0, 5e-36, -5e-36, zero, -zero, 1e-35, -1e-35,
                                          np.nextafter(-zero, -1.0), 1e-30, -1e-30)])
    out = cfopt.models.parse_model(model).structure.outputs(probes)[:, 0]
    np.testing.assert_allclose(out, model.predict(probes, raw_score=True), rtol=0, atol=1e-12)
    missing = lgb.LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=5, verbose=-1,
                                 zero_as_missing=True).fit(X, y)
    with pytest.raises(cfopt.UnsupportedModelError, match="zero_as_missing=False"):
        cfopt.models.parse_model(missing)
