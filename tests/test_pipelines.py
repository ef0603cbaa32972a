"""sklearn Pipelines: preprocessing embedded as exact linear maps; the user hands over
the pipeline fitted on the raw DataFrame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, PolynomialFeatures, StandardScaler

import cfopt


@pytest.fixture(scope="module")
def raw(german):
    X = german.X.copy()
    for c in ("telephone", "foreign_worker"):
        X[c] = X[c].astype(str)
    numeric = [c for c in X.columns if pd.api.types.is_numeric_dtype(X[c])]
    categorical = [c for c in X.columns if c not in numeric]
    space = cfopt.FeatureSpace.from_frame(X, kinds={c: "categorical" for c in categorical})
    space.immutable("foreign_worker", "status_sex").increase_only("age")
    return X, german.y, numeric, categorical, space


ESTIMATORS = {
    "logistic": lambda: LogisticRegression(max_iter=2000),
    "forest": lambda: RandomForestClassifier(20, max_depth=5, random_state=0),
    "boosting": lambda: GradientBoostingClassifier(n_estimators=20, max_depth=3,
                                                   random_state=0),
    "mlp": lambda: MLPClassifier((8,), max_iter=300, random_state=0),
}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("drop", [None, "first", "if_binary"])
@pytest.mark.parametrize("estimator", list(ESTIMATORS))
def test_pipeline_counterfactuals_verified_by_the_pipeline(raw, estimator, drop):
    X, y, numeric, categorical, space = raw
    pre = ColumnTransformer([
        ("num", Pipeline([("impute", SimpleImputer()), ("scale", StandardScaler())]), numeric),
        ("cat", OneHotEncoder(drop=drop, handle_unknown="ignore" if drop is None else "error"),
         categorical)])
    pipe = Pipeline([("pre", pre), ("clf", ESTIMATORS[estimator]())]).fit(X, y)
    explainer = cfopt.Explainer(pipe, space)
    Zp = pipe[:-1].transform(X)
    Zp = Zp.toarray() if hasattr(Zp, "toarray") else Zp
    m = explainer.milp
    from cfopt.space.encoding import encode
    np.testing.assert_allclose(encode(space, m.input_specs, X), Zp, rtol=0, atol=1e-12)
    pred = pipe.predict(X)
    for i in [k for k in range(len(X)) if pred[k] == 0][:5]:
        ce = explainer.explain(X.iloc[[i]], target=1)
        assert ce.verified and ce.status is cfopt.Status.OPTIMAL
        assert pipe.predict(ce.counterfactual)[0] == 1
        assert ce.counterfactual["foreign_worker"].iloc[0] == X["foreign_worker"].iloc[i]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("estimator", ["logistic", "mlp"])
def test_scalers_chained_on_one_column_compose(raw, estimator):
    """StandardScaler, then MinMaxScaler(-1, 2), then MaxAbsScaler on each numeric
    column: the embedded maps compose in the pipeline's order (on the data and on rows
    far outside it) and the answers hold. (A scaler over one-hot columns is refused.)"""
    from sklearn.preprocessing import MaxAbsScaler

    from cfopt.space.encoding import encode

    from .conftest import sample_rows

    X, y, numeric, categorical, space = raw
    pre = ColumnTransformer([
        ("num", Pipeline([("std", StandardScaler()),
                          ("mm", MinMaxScaler(feature_range=(-1, 2))),
                          ("abs", MaxAbsScaler())]), numeric),
        ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical)])
    pipe = Pipeline([("pre", pre), ("clf", ESTIMATORS[estimator]())]).fit(X, y)
    explainer = cfopt.Explainer(pipe, space)
    m = explainer.milp
    for rows in (X, sample_rows(space, 200, seed=1)):
        np.testing.assert_allclose(encode(space, m.input_specs, rows), pipe[:-1].transform(rows),
                                   rtol=1e-12, atol=1e-12)
    pred = pipe.predict(X)
    for i in [k for k in range(len(X)) if pred[k] == 0][:3]:
        ce = explainer.explain(X.iloc[[i]], target=1)
        assert ce.verified and ce.status is cfopt.Status.OPTIMAL
        assert pipe.predict(ce.counterfactual)[0] == 1


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("estimator", ["logistic", "forest", "mlp"])
def test_pipeline_equals_bare_model_on_transformed_data(raw, estimator):
    """A pipeline whose preprocessing is the feature space's own transform gives the
    same counterfactuals as the bare model on pre-transformed data."""
    X, y, _, _, space = raw
    steps = []
    for f in space:
        if f.is_onehot:
            steps.append((f.name, OneHotEncoder(categories=[list(f.categories)]), [f.name]))
        else:
            steps.append((f.name, MinMaxScaler(), [f.name]))
    pre = ColumnTransformer(steps)
    Z = pre.fit_transform(X)
    Z = Z.toarray() if hasattr(Z, "toarray") else Z
    np.testing.assert_allclose(Z, space.transform(X), rtol=0, atol=1e-12)
    bare = ESTIMATORS[estimator]().fit(space.transform(X), y)
    pipe = Pipeline([("pre", pre), ("clf", bare)])
    # the same solve path for both (per-query tightening needs the space's own encoding);
    # HiGHS's default feasibility tolerance (1e-6) lets the validity margin give way by
    # ~1e-6, and the two encodings' round-off then picks different sides of it (an mlp
    # query: logit 0.000998 at 0.7626 vs 0.001 at 0.7749): compare at 1e-9
    tight = {"mip_feasibility_tolerance": 1e-9}
    with_pipe = cfopt.Explainer(pipe, space, mip_gap=0.0, tighten_per_query=False,
                                solver_options=tight)
    with_bare = cfopt.Explainer(bare, space, mip_gap=0.0, tighten_per_query=False,
                                solver_options=tight)
    pred = with_bare.milp.predict(X)
    for i in [k for k in range(len(X)) if pred[k] == 0][:6]:
        a = with_pipe.explain(X.iloc[[i]], target=1)
        b = with_bare.explain(X.iloc[[i]], target=1)
        assert a.objective == pytest.approx(b.objective, rel=1e-6, abs=1e-9)


def test_unsupported_steps_are_named(raw):
    X, y, numeric, categorical, space = raw
    poly = Pipeline([("pre", ColumnTransformer([("poly", PolynomialFeatures(), numeric)])),
                     ("clf", LogisticRegression(max_iter=500))]).fit(X[numeric], y)
    with pytest.raises(cfopt.UnsupportedModelError, match=r"pre/poly/PolynomialFeatures"):
        cfopt.models.parse_model(poly)
    clip = Pipeline([("scale", MinMaxScaler(clip=True)),
                     ("clf", LogisticRegression())]).fit(X[numeric], y)
    with pytest.raises(cfopt.UnsupportedModelError, match=r"clip=True"):
        cfopt.models.parse_model(clip)
    unfitted_on_frame = Pipeline([("scale", StandardScaler()),
                                  ("clf", LogisticRegression())]).fit(X[numeric].to_numpy(), y)
    with pytest.raises(cfopt.UnsupportedModelError, match="not fitted on a pandas DataFrame"):
        cfopt.models.parse_model(unfitted_on_frame)


def test_space_and_pipeline_must_agree(raw):
    X, y, numeric, categorical, space = raw
    pipe = Pipeline([("pre", ColumnTransformer([("num", StandardScaler(), numeric)])),
                     ("clf", LogisticRegression(max_iter=500))]).fit(X[numeric], y)
    with pytest.raises(ValueError, match=r"fitted on columns .*missing \[\], extra"):
        cfopt.Explainer(pipe, space)
    ints = Pipeline([("pre", ColumnTransformer([("cat", OneHotEncoder(), ["installment_rate"])])),
                     ("clf", LogisticRegression())]).fit(X[["installment_rate"]], y)
    small = cfopt.FeatureSpace.from_frame(X[["installment_rate"]])
    with pytest.raises(cfopt.UnsupportedModelError, match="declare it categorical"):
        cfopt.Explainer(ints, small)
    strict = Pipeline([("pre", ColumnTransformer([("cat", OneHotEncoder(), ["purpose"])])),
                       ("clf", LogisticRegression())]).fit(X[["purpose"]].iloc[:50], y[:50])
    wide = cfopt.FeatureSpace.from_frame(X[["purpose"]])
    with pytest.raises(ValueError, match=r"unknown to the pipeline's OneHotEncoder"):
        cfopt.Explainer(strict, wide)


def test_pipeline_block_get_error(raw):
    X, y, numeric, categorical, space = raw
    pipe = Pipeline([("pre", ColumnTransformer([("num", StandardScaler(), numeric),
                                                ("cat", OneHotEncoder(), categorical)])),
                     ("clf", RandomForestClassifier(10, max_depth=4, random_state=0))]).fit(X, y)
    explainer = cfopt.Explainer(pipe, space)
    Zp = pipe[:-1].transform(X.iloc[:60])
    Zp = Zp.toarray() if hasattr(Zp, "toarray") else Zp
    assert explainer.milp.predictor_constr.get_error(Zp) <= 1e-9
    assert isinstance(explainer.milp, pyo.ConcreteModel)


def _mlp_pipeline(raw, drop=None):
    X, y, numeric, categorical, space = raw
    pre = ColumnTransformer([("cat", OneHotEncoder(drop=drop), categorical),
                             ("num", StandardScaler(), numeric)])
    pipe = Pipeline([("pre", pre), ("mlp", MLPClassifier((12,), max_iter=400,
                                                         random_state=0))]).fit(X, y)
    return pipe, space


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_pipelines_network_is_bounded_within_every_radius(raw):
    """The per-query bounds of a network behind a pipeline's preprocessing (its input
    specs: standard scaling, one-hot columns with one dropped) hold for every point
    within the radius: sampled points, their pre-activations by the float64 network."""
    from cfopt.query.restrictions.relu import objective_value, radius_bounds

    from .conftest import sample_rows

    pipe, space = _mlp_pipeline(raw, drop="first")
    X = raw[0]
    m = cfopt.build(pipe, space, objective={"l1": 1.0, "l0": 0.1})
    net = m.adapter.structure
    for row in (0, 3):
        m.set_factual(X.iloc[[row]])
        points = sample_rows(space, 1500, seed=row)
        keep = np.random.default_rng(row).random(points.shape) < 0.7
        for k, name in enumerate(space.names):
            points.loc[keep[:, k], name] = X.iloc[row][name]
        points = points[[not m.space_violations(points.iloc[[i]])
                         for i in range(len(points))]]
        values = np.array([objective_value(m, points.iloc[[i]]) for i in range(len(points))])
        for radius in np.quantile(values, [0.05, 0.3]):
            inside = points[values <= radius]
            Z = m.adapter.model_inputs(space, inside)
            for pre, (lb, ub) in zip(net.pre_activations(Z), radius_bounds(m, radius)):
                assert (pre >= lb - 1e-9).all() and (pre <= ub + 1e-9).all()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_pipelines_network_is_restricted_per_query_to_the_same_optimum(raw):
    """A network behind a pipeline gets the per-query restriction (its heuristic point
    and bounds within its radius: stable neurons), and the same optimum as the whole
    problem; with a rule the heuristic point breaks, the ascent's too."""
    pipe, space = _mlp_pipeline(raw)
    X = raw[0]
    rule = cfopt.LinearConstraint({"duration": 1}, ">=", 0, relative=True, name="no_shorter")
    exact = {"mip_feasibility_tolerance": 1e-9}
    fast, whole = (cfopt.Explainer(pipe, space, mip_gap=1e-9, solver_options=exact,
                                   tighten_per_query=t, constraints=[rule]) for t in (True, False))
    plain = cfopt.Explainer(pipe, space, mip_gap=1e-9, solver_options=exact)
    rows = np.flatnonzero(pipe.predict(X) == 0)[:5]
    restricted = 0
    for i in rows:
        x = X.iloc[[i]]
        restricted += "stable_neurons" in plain.explain(x, target=1).details
        a, b = fast.explain(x, target=1), whole.explain(x, target=1)
        assert a.status is b.status is cfopt.Status.OPTIMAL
        assert a.objective == pytest.approx(b.objective, rel=1e-6, abs=1e-9)
        assert a.counterfactual["duration"].iloc[0] >= x["duration"].iloc[0]
    assert restricted == len(rows)
