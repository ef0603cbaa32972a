"""An isolation forest read as a tree ensemble (:mod:`cfopt.models.isolation`): sklearn's
average path length, node depths, the parsed forest's mean path length mapped to
score_samples exactly (feature subsets included), the bound on the path length, and
the forests refused."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import IsolationForest, RandomForestClassifier
from sklearn.ensemble._iforest import _average_path_length

from cfopt.models.isolation import IsolationForestAdapter, average_path_length, node_depths

RNG = np.random.default_rng(0)
X = RNG.normal(size=(200, 4))


def test_average_path_length_is_sklearns():
    n = np.array([0, 1, 2, 3, 4, 10, 256, 1e6])
    assert np.allclose(average_path_length(n), _average_path_length(n), rtol=0, atol=1e-12)
    assert average_path_length(n)[:4].tolist() == [0.0, 0.0, 1.0,
                                                   2 * (np.log(2) + np.euler_gamma) - 4 / 3]
    assert float(average_path_length(2.0)) == 1.0


def test_node_depths():
    #        0
    #      1   2
    #         3  4
    left = np.array([1, -1, 3, -1, -1])
    right = np.array([2, -1, 4, -1, -1])
    assert node_depths(left, right).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0]


@pytest.mark.parametrize("max_features", [1.0, 0.5])
def test_the_parsed_forest_scores_as_sklearn(max_features):
    forest = IsolationForest(n_estimators=7, max_samples=64, max_features=max_features,
                             random_state=0).fit(X)
    a = IsolationForestAdapter(forest)
    assert a.kind == "IsolationForest" and a.is_regressor and a.classes == ()
    assert a.normalizer == pytest.approx(float(_average_path_length([64])[0]))
    Z = RNG.normal(size=(300, 4)) * 2
    logits = a.structure.logits(Z)
    assert np.abs(a.output_from_logits(logits) - a.output(Z)).max() <= 1e-12
    assert np.allclose(a.output(Z)[:, 0], forest.score_samples(Z))
    assert a.output(Z[0]).shape == (1, 1)
    assert np.array_equal(a.predict(Z[:20]), forest.predict(Z[:20]))
    assert a.output_from_logits(np.array([0.0])).tolist() == [[-1.0]]


def test_the_bound_on_the_path_length():
    a = IsolationForestAdapter(IsolationForest(n_estimators=2, max_samples=32,
                                               random_state=0).fit(X))
    c = a.normalizer
    assert a.path_length_bound(-0.5) == pytest.approx(c)
    assert a.path_length_bound(-0.25) == pytest.approx(2 * c)
    assert a.path_length_bound(-1.0) == 0.0 and a.path_length_bound(-3.0) == 0.0
    for bad in (0.0, 0.1):
        with pytest.raises(ValueError, match=rf"^score_samples is negative everywhere; a "
                                             rf"minimum of {bad} admits no point$"):
            a.path_length_bound(bad)


def test_forests_refused():
    with pytest.raises(ValueError, match="^expected a fitted sklearn IsolationForest, got "
                                         "RandomForestClassifier$"):
        IsolationForestAdapter(RandomForestClassifier())
    with pytest.raises(ValueError, match="^the IsolationForest is not fitted; fit it before "
                                         "using it as a constraint$"):
        IsolationForestAdapter(IsolationForest())
    with pytest.raises(ValueError, match=r"^the IsolationForest was fitted with "
                                         r"max_samples_=1: it scores every point -0.5"):
        IsolationForestAdapter(IsolationForest(n_estimators=2, max_samples=1).fit(X))
    assert IsolationForestAdapter(IsolationForest(n_estimators=2, max_samples=2,
                                                  random_state=0).fit(X)).normalizer == 1.0


def test_points_on_the_thresholds_go_where_sklearn_sends_them():
    """sklearn compares float32(x) <= threshold: rows with a column exactly on each
    (float64) threshold of the forest, and of a forest whose full-feature trees list
    their features in another order (such a tree reads the forest's columns as they are)."""
    forest = IsolationForest(n_estimators=3, max_samples=16, random_state=1).fit(X)
    a = IsolationForestAdapter(forest)
    assert a.structure.n_inputs == 4 and a.n_inputs == 4 and a.structure.n_outputs == 1
    rows = []
    for est in forest.estimators_:
        for f, t in zip(est.tree_.feature, est.tree_.threshold):
            if f >= 0:
                row = X[len(rows)].copy()
                row[f] = t
                rows.append(row)
    Z = np.array(rows)
    assert np.abs(a.output_from_logits(a.structure.logits(Z)) - a.output(Z)).max() <= 1e-12
    assert not np.allclose(np.asarray(Z, dtype=np.float32), Z, rtol=0, atol=1e-12)
    forest.estimators_features_ = [f[::-1] for f in forest.estimators_features_]
    a = IsolationForestAdapter(forest)
    assert np.abs(a.output_from_logits(a.structure.logits(Z)) - a.output(Z)).max() <= 1e-12
    for est in forest.estimators_:  # thresholds that are float32 values: x <= t, not x < t
        est.tree_.threshold[:] = est.tree_.threshold.astype(np.float32)
    a = IsolationForestAdapter(forest)
    Z = Z.astype(np.float32).astype(np.float64)
    assert np.abs(a.output_from_logits(a.structure.logits(Z)) - a.output(Z)).max() <= 1e-12
