"""Regressors (trees, boosters, MLP, linear): the structure and the MILP block reproduce
``predict``, and every counterfactual's prediction, by the library, lies in the target
interval; on a small grid the optimum equals enumeration."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingRegressor,
    HistGradientBoostingRegressor,
    RandomForestRegressor,
)
from sklearn.linear_model import Ridge
from sklearn.neural_network import MLPRegressor
from sklearn.tree import DecisionTreeRegressor

import cfopt

from .conftest import grid, sample_rows

REGRESSORS = {
    "tree": lambda: DecisionTreeRegressor(max_depth=6, random_state=0),
    "forest": lambda: RandomForestRegressor(30, max_depth=5, random_state=0),
    "extra-trees": lambda: ExtraTreesRegressor(20, max_depth=5, random_state=0),
    "boosting": lambda: GradientBoostingRegressor(n_estimators=30, max_depth=3,
                                                  random_state=0),
    "hist-boosting": lambda: HistGradientBoostingRegressor(max_iter=30, max_depth=3,
                                                           random_state=0),
    "xgboost": lambda: pytest.importorskip("xgboost").XGBRegressor(
        n_estimators=40, max_depth=3, random_state=0),
    "lightgbm": lambda: pytest.importorskip("lightgbm").LGBMRegressor(
        n_estimators=40, num_leaves=8, random_state=0, verbose=-1),
    "mlp": lambda: MLPRegressor(hidden_layer_sizes=(16,), max_iter=3000, random_state=0),
    "ridge": lambda: Ridge(alpha=1.0),
}
#: XGBoost predicts in float32
TOL = {"xgboost": 1e-4}


@pytest.fixture(scope="module")
def german_regression(german):
    """Predict the credit amount from the other German credit features."""
    X = german.X.drop(columns=["credit_amount"])
    y = german.X["credit_amount"].to_numpy(dtype=float) / 1000.0
    space = cfopt.FeatureSpace.from_frame(X)
    space.immutable("foreign_worker", "status_sex").increase_only("age")
    return X, y, space


@pytest.mark.parametrize("family", list(REGRESSORS))
def test_regressor_reproduces_predict(german_regression, family):
    X, y, space = german_regression
    Z = space.transform(X)
    model = REGRESSORS[family]().fit(Z, y)
    adapter = cfopt.models.parse_model(model)
    assert adapter.is_regressor and adapter.classes == ()
    R = space.transform(sample_rows(space, 1000, seed=5))
    for A in (Z, R):
        np.testing.assert_allclose(adapter.structure.logits(A)[:, 0], model.predict(A),
                                   rtol=0, atol=TOL.get(family, 1e-9))
    m = pyo.ConcreteModel()
    predictor = cfopt.formulations.add_predictor(m, model, input_bounds=space.input_bounds(),
                                    input_grids=space.input_grids(),
                                    input_rounding=space.input_rounding())
    assert predictor.get_error(np.vstack([Z[:20], R[:20]])) <= TOL.get(family, 1e-9)  # 2 solves a row


@pytest.mark.parametrize("family", list(REGRESSORS))
def test_fifteen_regression_counterfactuals(german_regression, family):
    X, y, space = german_regression
    model = REGRESSORS[family]().fit(space.transform(X), y)
    explainer = cfopt.Explainer(model, space, time_limit=60)
    predictions = model.predict(space.transform(X))
    low = float(np.quantile(predictions, 0.75))
    rows = np.flatnonzero(predictions < low)[:15]
    assert len(rows) == 15
    for i in rows:
        ce = explainer.explain(X.iloc[[i]], target=(low, None))
        assert ce.status is cfopt.Status.OPTIMAL and ce.verified
        value = model.predict(space.transform(ce.counterfactual))[0]
        assert value >= low and ce.predicted_class == pytest.approx(value, abs=0)
        assert ce.target == (low, np.inf)
        assert not explainer.milp.violations(ce.counterfactual)
    # a bounded interval below the prediction works too
    i = int(np.argmax(predictions))
    high = float(np.quantile(predictions, 0.5))
    ce = explainer.explain(X.iloc[[i]], target=(None, high))
    assert ce.verified and model.predict(space.transform(ce.counterfactual))[0] <= high


@pytest.mark.parametrize("family", ["tree", "forest", "boosting", "hist-boosting", "ridge"])
def test_regression_optimum_equals_enumeration(toy, family):
    frame, _ = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    target = (frame["a"] - 1.5 * frame["b"] + (frame["c"] == "red") * 2 - frame["d"]).to_numpy()
    model = REGRESSORS[family]().fit(space.transform(frame), target.astype(float))
    explainer = cfopt.Explainer(model, space, mip_gap=0.0)
    points = grid(space)
    values = model.predict(space.transform(points))
    threshold = float(np.quantile(values, 0.6))
    margin = explainer.margin
    checked = 0
    for i in range(30):
        x = frame.iloc[[i]]
        explainer.milp.set_factual(x)
        if explainer.milp.factual_class >= threshold:
            continue
        best = np.inf
        for k in np.flatnonzero(values >= threshold + margin):
            row = points.iloc[[k]].reset_index(drop=True)
            best = min(best, explainer.milp.distances(row)["l1"])
        ce = explainer.explain(x, target=(threshold, None))
        assert ce.objective == pytest.approx(best, rel=1e-9, abs=1e-12)
        checked += 1
    assert checked >= 10


def test_regression_targets_are_checked(german_regression):
    X, y, space = german_regression
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(space.transform(X), y)
    explainer = cfopt.Explainer(model, space)
    x = X.iloc[[0]]
    value = model.predict(space.transform(x))[0]
    with pytest.raises(ValueError, match="interval"):
        explainer.explain(x)  # no target
    with pytest.raises(ValueError, match="interval"):
        explainer.explain(x, target=5.0)
    with pytest.raises(ValueError, match="empty"):
        explainer.explain(x, target=(3.0, 2.0))
    with pytest.raises(ValueError, match="already lies"):
        explainer.explain(x, target=(value - 1, value + 1))
    with pytest.raises(ValueError, match="number or None"):
        explainer.explain(x, target=("a", None))
    with pytest.raises(cfopt.InfeasibleError, match="reach a prediction in"):
        explainer.explain(x, target=(float(y.max()) * 10, None))


def test_non_identity_links_are_refused(german_regression):
    X, y, space = german_regression
    Z = space.transform(X)
    with pytest.raises(cfopt.UnsupportedModelError, match="poisson"):
        cfopt.models.parse_model(HistGradientBoostingRegressor(loss="poisson", max_iter=5).fit(Z, y))
    lightgbm = pytest.importorskip("lightgbm")
    model = lightgbm.LGBMRegressor(objective="poisson", n_estimators=5, verbose=-1).fit(Z, y)
    with pytest.raises(cfopt.UnsupportedModelError, match="non-identity link"):
        cfopt.models.parse_model(model)


def test_regression_pipeline_matches_bare_model(german_regression):
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    X, y, space = german_regression
    categorical = [f.name for f in space if f.labelled]
    numeric = [f.name for f in space if not f.labelled]
    pre = ColumnTransformer([("num", StandardScaler(), numeric),
                             ("cat", OneHotEncoder(), categorical)])
    pipe = Pipeline([("pre", pre), ("model", RandomForestRegressor(
        20, max_depth=4, random_state=0))]).fit(X, y)
    explainer = cfopt.Explainer(pipe, space)
    predictions = pipe.predict(X)
    low = float(np.quantile(predictions, 0.8))
    for i in np.flatnonzero(predictions < low)[:5]:
        ce = explainer.explain(X.iloc[[i]], target=(low, None))
        assert ce.verified and pipe.predict(ce.counterfactual)[0] >= low
