"""XGBoost behind a preprocessing that outputs a sparse matrix reads every absent entry
(every 0) as *missing*: a 0 takes each node's default way, not ``0 < threshold``. cfopt
encodes what the pipeline predicts (on raw UCI Adult, 4 of 20 default-XGBoost queries
ended verification_failed before)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import cfopt
from cfopt.models.pipeline import _reaches_zero
from cfopt.space.encoding import InputSpec

xgboost = pytest.importorskip("xgboost")


def fit(continuous: bool):
    """An XGBoost pipeline whose estimator receives a sparse matrix."""
    rng = np.random.default_rng(0)
    n = 600
    size = rng.integers(0, 10, n)
    X = pd.DataFrame({"colour": rng.choice(list("abcdef"), n),
                      "shape": rng.choice(["round", "square", "flat"], n),
                      "size": size + 0.5 if continuous else size})
    y = ((X.colour.isin(["a", "b"])) ^ (X["size"] > 5) ^ (X["shape"] == "flat")).astype(int)
    pre = ColumnTransformer([("onehot", OneHotEncoder(), ["colour", "shape"]),
                             ("number", StandardScaler(), ["size"])], sparse_threshold=1.0)
    pipe = Pipeline([("pre", pre), ("model", xgboost.XGBClassifier(
        n_estimators=30, max_depth=4, random_state=0, n_jobs=1))]).fit(X, y)
    assert pre.sparse_output_  # the estimator receives a sparse matrix
    return pipe, cfopt.FeatureSpace.from_frame(X), X


@pytest.fixture(scope="module")
def sparse_xgb():
    pipe, space, X = fit(continuous=False)
    assert X["size"].mean() % 1 != 0  # the scaled 0 (the mean) is no integer size
    return pipe, space, X


def grid(space) -> pd.DataFrame:
    rows = itertools.product(space["colour"].categories, space["shape"].categories,
                             range(10))
    return pd.DataFrame(rows, columns=["colour", "shape", "size"])


def test_structure_predicts_as_the_sparse_pipeline(sparse_xgb):
    pipe, space, _ = sparse_xgb
    m = cfopt.CounterfactualModel(pipe, space)
    rows = grid(space)
    Z = m.adapter.model_inputs(space, rows)
    ensemble = m.adapter.structure
    margins = ensemble.outputs(Z)[:, 0]
    assert np.array_equal(margins > 0, pipe.predict(rows) == 1)
    assert np.allclose(margins, pipe.predict(rows, output_margin=True), atol=1e-5)


def test_counterfactuals_are_the_brute_force_optimum(sparse_xgb):
    pipe, space, X = sparse_xgb
    explainer = cfopt.Explainer(pipe, space, mip_gap=0.0)
    rows = grid(space)
    labels = pipe.predict(rows)
    for i in range(0, len(X), 60):
        x = X.iloc[[i]]
        target = 1 - int(pipe.predict(x)[0])
        ce = explainer.explain(x, target=target)
        assert ce.status is cfopt.Status.OPTIMAL and ce.verified
        costs = [explainer.milp.distances(rows.iloc[[k]])["l1"]
                 for k in np.flatnonzero(labels == target)]
        assert ce.objective == pytest.approx(min(costs), abs=1e-9)


def test_a_reachable_zero_is_recognised():
    space = cfopt.FeatureSpace.from_frame(pd.DataFrame({"n": [0, 4], "c": ["x", "y"]}))
    assert _reaches_zero(InputSpec("affine", "n", 0.5, -1.0), space)        # n = 2
    assert not _reaches_zero(InputSpec("affine", "n", 1.0, -2.5), space)    # n = 2.5
    assert not _reaches_zero(InputSpec("affine", "n", 1.0, 5.0), space)     # n = -5
    assert _reaches_zero(InputSpec("constant", b=0.0), space)


def test_a_reachable_missing_zero_is_refused():
    """A continuous size reaches its mean, where the scaled input is an exact 0 that
    XGBoost reads as missing."""
    pipe, space, _ = fit(continuous=True)
    with pytest.raises(cfopt.UnsupportedModelError, match="'size'.*sparse_threshold=0"):
        cfopt.CounterfactualModel(pipe, space)
