"""sklearn Pipelines as commonly written on raw data (issue 19): ``ColumnTransformer``
passthrough in its fitted form (the identity ``FunctionTransformer``) and
``OrdinalEncoder``, embedded exactly; refusals of what is not exact; raw UCI Adult."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, OrdinalEncoder, StandardScaler

import cfopt
from cfopt.space.encoding import encode

from .conftest import IN_CI, grid, sample_rows

MARGIN = 1e-3
COLORS = ("blue", "green", "grey", "red")
SIZES = ("low", "mid", "high")
ESTIMATORS = {
    "forest": lambda: RandomForestClassifier(20, max_depth=5, random_state=0),
    "logistic": lambda: LogisticRegression(max_iter=2000),
}


def mixed(n: int = 400, seed: int = 0, continuous: bool = False
          ) -> tuple[pd.DataFrame, np.ndarray]:
    """Integers ``a`` (0..4) and ``b`` (0..3), categorical ``color``, ordinal ``size``,
    labelled binary ``sex`` (and continuous ``e``): a grid of 480 points without ``e``."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"a": rng.integers(0, 5, n), "b": rng.integers(0, 4, n),
                      "color": rng.choice(COLORS, n), "size": rng.choice(SIZES, n),
                      "sex": rng.choice(["F", "M"], n)})
    score = (X["a"] - 1.2 * X["b"] + 2.0 * (X["color"] == "red") - (X["color"] == "grey")
             + X["size"].map({"low": 0, "mid": 1, "high": 2}) - 0.5 * (X["sex"] == "M"))
    if continuous:
        X["e"] = rng.uniform(-5.0, 5.0, n)
        score = score + 0.3 * X["e"]
    y = (score + rng.normal(0, 0.7, n) > 1.5).astype(int).to_numpy()
    return X, y


def mixed_space(X: pd.DataFrame, **categories: tuple) -> cfopt.FeatureSpace:
    levels = {"color": COLORS, "size": SIZES, **categories}
    return cfopt.FeatureSpace.from_frame(X, kinds={"color": "categorical", "size": "ordinal"},
                                         categories=levels)


def check_encoding(explainer: cfopt.Explainer, pipe: Pipeline, rows: pd.DataFrame) -> None:
    """The MILP's inputs of raw rows equal the pipeline's own preprocessing."""
    Z = pipe[:-1].transform(rows)
    Z = Z.toarray() if hasattr(Z, "toarray") else np.asarray(Z, dtype=float)
    np.testing.assert_allclose(encode(explainer.milp.space, explainer.milp.input_specs, rows),
                               Z, rtol=0, atol=1e-12)


def check_counterfactuals(explainer: cfopt.Explainer, pipe: Pipeline, X: pd.DataFrame,
                          n: int, valid: pd.DataFrame | None = None) -> None:
    """Explain the first ``n`` rows the pipeline rejects; every CE is proven optimal, the
    pipeline's own ``predict`` gives the target on it and, given the ``valid`` points of
    an enumeration, its objective is their smallest distance from the factual."""
    rows = np.flatnonzero(pipe.predict(X) == 0)[:n]
    assert len(rows) == n
    for i in rows:
        ce = explainer.explain(X.iloc[[i]], target=1)
        assert ce.status is cfopt.Status.OPTIMAL and ce.verified
        assert pipe.predict(ce.counterfactual)[0] == 1
        if valid is not None:
            m = explainer.milp
            expected = min(m.distances(valid.iloc[[k]])["l1"] for k in range(len(valid)))
            assert ce.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)


def score(pipe: Pipeline, rows: pd.DataFrame) -> np.ndarray:
    """The pipeline's score of class 1 against class 0 (what the margin applies to)."""
    if hasattr(pipe[-1], "decision_function"):
        return pipe.decision_function(rows)
    p = pipe.predict_proba(rows)
    return p[:, 1] - p[:, 0]


# ------------------------------------------------------------------ passthrough
@pytest.mark.parametrize("estimator", list(ESTIMATORS))
@pytest.mark.parametrize("form", ["remainder", "explicit"])
def test_passthrough_in_fitted_form(estimator, form):
    """Passthrough columns, which a fitted ColumnTransformer holds as the identity
    FunctionTransformer, reach the estimator unchanged."""
    X, y = mixed(continuous=True)
    numeric = ["a", "b", "e"]
    cat = ("cat", OneHotEncoder(), ["color", "size", "sex"])
    pre = (ColumnTransformer([cat], remainder="passthrough") if form == "remainder"
           else ColumnTransformer([cat, ("num", "passthrough", numeric)]))
    pipe = Pipeline([("pre", pre), ("clf", ESTIMATORS[estimator]())]).fit(X, y)
    fitted = {name: type(t).__name__ for name, t, _ in pipe[0].transformers_}
    assert fitted["remainder" if form == "remainder" else "num"] == "FunctionTransformer"
    space = cfopt.FeatureSpace.from_frame(X, kinds={"color": "categorical",
                                                    "size": "categorical"})
    explainer = cfopt.Explainer(pipe, space)
    check_encoding(explainer, pipe, pd.concat([X, sample_rows(space, 300)]))
    check_counterfactuals(explainer, pipe, X, 4)


# --------------------------------------------------------------- OrdinalEncoder
ENCODERS = {  # the encoder of ``color`` (categorical) and ``size`` (ordinal)
    "plain": lambda: (OrdinalEncoder(), OrdinalEncoder(categories=[list(SIZES)])),
    "scaled": lambda: (Pipeline([("code", OrdinalEncoder()), ("scale", StandardScaler())]),
                       OrdinalEncoder(categories=[list(reversed(SIZES))])),
    "unknown": lambda: (OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1),
                        Pipeline([("code", OrdinalEncoder(categories=[list(SIZES)])),
                                  ("scale", StandardScaler())])),
}


@pytest.mark.parametrize("estimator", list(ESTIMATORS))
@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_ordinal_encoder(estimator, encoder):
    """OrdinalEncoder codes as the MILP's inputs: per category for a categorical feature
    (scaled or not, an unknown category at ``unknown_value``), affine in the code of an
    ordinal or labelled binary one; CEs verified and optimal against enumeration."""
    X, y = mixed()
    space = mixed_space(X)
    if encoder == "unknown":  # 'purple' is declared but never seen by the encoder
        space = mixed_space(X, color=(*COLORS, "purple"))
    color, size = ENCODERS[encoder]()
    pre = ColumnTransformer([("color", color, ["color"]), ("size", size, ["size"]),
                             ("sex", OrdinalEncoder(), ["sex"])], remainder="passthrough")
    pipe = Pipeline([("pre", pre), ("clf", ESTIMATORS[estimator]())]).fit(X, y)
    explainer = cfopt.Explainer(pipe, space, margin=MARGIN, mip_gap=0.0)
    kinds = [s.kind for s in explainer.milp.input_specs]
    assert kinds == ["levels", "affine", "affine", "affine", "affine"]
    points = grid(space)
    check_encoding(explainer, pipe, pd.concat([X, points]))
    check_counterfactuals(explainer, pipe, X, 4, valid=points[score(pipe, points) >= MARGIN])


# ------------------------------------------------------------------- refusals
def _refused(pre: ColumnTransformer, space: cfopt.FeatureSpace | None = None) -> None:
    X, y = mixed()
    pipe = Pipeline([("pre", pre), ("clf", LogisticRegression())]).fit(X, y)
    cfopt.Explainer(pipe, space or mixed_space(X))


def test_function_transformer_with_a_function_is_refused():
    pre = ColumnTransformer([("log", FunctionTransformer(np.log1p), ["a"]),
                             ("codes", OrdinalEncoder(), ["color", "size", "sex"])],
                            remainder="passthrough")
    with pytest.raises(cfopt.UnsupportedModelError, match=r"'pre/log/FunctionTransformer'"
                       r" applies the function 'log1p'"):
        _refused(pre)


@pytest.mark.parametrize("grouping", [{"max_categories": 2}, {"min_frequency": 150}])
def test_ordinal_encoder_infrequent_categories_refused(grouping):
    pre = ColumnTransformer([("codes", OrdinalEncoder(**grouping), ["color"]),
                             ("rest", OrdinalEncoder(), ["size", "sex"])],
                            remainder="passthrough")
    with pytest.raises(cfopt.UnsupportedModelError,
                       match=r"'pre/codes/OrdinalEncoder': infrequent-category grouping"):
        _refused(pre)


@pytest.mark.parametrize("handle", ["error", "nan"])
def test_ordinal_encoder_unknown_category_refused(handle):
    """A declared category the encoder never saw: an error under
    ``handle_unknown="error"``, NaN (not a model input) under ``unknown_value=nan``."""
    encoder = (OrdinalEncoder() if handle == "error" else
               OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan))
    pre = ColumnTransformer([("codes", encoder, ["color", "size", "sex"])],
                            remainder="passthrough")
    X, _ = mixed()
    space = mixed_space(X, color=(*COLORS, "purple"))
    if handle == "error":
        with pytest.raises(ValueError, match=r"category 'purple' of feature 'color' is "
                                             r"unknown to the pipeline's OrdinalEncoder"):
            _refused(pre, space)
    else:
        with pytest.raises(cfopt.UnsupportedModelError, match=r"'purple'.*unknown_value=nan"):
            _refused(pre, space)


def test_ordinal_encoder_needs_a_declaration_it_can_encode():
    """A numeric feature, or an ordinal one in an order the codes are not linear in, is
    refused with the declaration that works."""
    numeric = ColumnTransformer([("codes", OrdinalEncoder(), ["a", "color", "size", "sex"])],
                                remainder="passthrough")
    with pytest.raises(cfopt.UnsupportedModelError,
                       match=r"column 'a'.*declare it categorical"):
        _refused(numeric)
    alphabetical = ColumnTransformer([("codes", OrdinalEncoder(), ["color", "size", "sex"])],
                                     remainder="passthrough")
    with pytest.raises(cfopt.UnsupportedModelError,
                       match=r"ordinal feature 'size'.*categories=\{'size': "
                             r"\['high', 'low', 'mid'\]\}"):
        _refused(alphabetical)


# ------------------------------------------------------------- raw UCI Adult
ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num",
                 "marital-status", "occupation", "relationship", "race", "sex",
                 "capital-gain", "capital-loss", "hours-per-week", "native-country",
                 "income"]


def adult_raw() -> tuple[pd.DataFrame, np.ndarray]:
    """UCI Adult's ``adult.data`` from the data home (rows with a missing '?' dropped);
    in CI a missing file is a failure."""
    path = cfopt.datasets.data_home() / "uci" / "adult.data"
    if not path.exists():
        message = f"UCI Adult not at {path} (set CFOPT_DATA_HOME to ../shared/data)"
        if IN_CI:
            raise cfopt.DataNotFoundError(message)
        pytest.skip(message)
    frame = pd.read_csv(path, header=None, names=ADULT_COLUMNS, skipinitialspace=True,
                        na_values="?").dropna().reset_index(drop=True)
    return frame.drop(columns="income"), (frame["income"] == ">50K").astype(int).to_numpy()


def test_adult_raw_column_transformer_forest():
    """The issue's acceptance test: passthrough remainder, OneHotEncoder and
    OrdinalEncoder ahead of a random forest fitted on raw UCI Adult."""
    X, y = adult_raw()
    onehot = ["workclass", "marital-status", "occupation", "relationship", "race",
              "native-country"]
    pre = ColumnTransformer([("onehot", OneHotEncoder(handle_unknown="ignore"), onehot),
                             ("ordinal", OrdinalEncoder(), ["education", "sex"]),
                             ("weight", "drop", ["fnlwgt"])], remainder="passthrough")
    forest = RandomForestClassifier(30, max_depth=6, random_state=0, n_jobs=1)
    pipe = Pipeline([("pre", pre), ("forest", forest)]).fit(X, y)
    assert type(pipe[0].transformers_[-1][1]).__name__ == "FunctionTransformer"
    space = cfopt.FeatureSpace.from_frame(X)
    space.immutable("race", "sex", "native-country", "fnlwgt", "capital-gain",
                    "capital-loss", "education-num").increase_only("age")
    explainer = cfopt.Explainer(pipe, space, time_limit=20)
    check_encoding(explainer, pipe, X.iloc[::50])
    explained = 0
    for i in np.flatnonzero(pipe.predict(X) == 0)[:6]:
        try:
            ce = explainer.explain(X.iloc[[i]], target=1)
        except cfopt.InfeasibleError:  # nothing reaches the target without an immutable
            continue
        assert ce.verified and ce.status in (cfopt.Status.OPTIMAL, cfopt.Status.FEASIBLE)
        assert pipe.predict(ce.counterfactual)[0] == 1
        assert ce.counterfactual["race"].iloc[0] == X["race"].iloc[i]
        assert ce.counterfactual["age"].iloc[0] >= X["age"].iloc[i]
        explained += 1
    assert explained >= 4
