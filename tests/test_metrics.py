"""Metrics against hand-computed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import cfopt
from cfopt import metrics


@pytest.fixture()
def small():
    data = pd.DataFrame({"income": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0],
                         "kids": [0, 1, 2, 0, 1, 2],
                         "city": ["a", "b", "c", "a", "b", "c"]})
    space = cfopt.FeatureSpace.from_frame(data)
    factual = pd.DataFrame({"income": [10.0], "kids": [0], "city": ["a"]})
    ces = pd.DataFrame({"income": [30.0, 10.0, 16.0], "kids": [0, 2, 1],
                        "city": ["a", "b", "c"]})
    return space, data, factual, ces


def test_proximity_sparsity_diversity(small):
    space, _, factual, ces = small
    # continuous: income and kids (integer, unlabelled); categorical: city
    assert metrics.cont_proximity(space, factual, ces) == pytest.approx(-(20 + 2 + 7) / 3)
    assert metrics.cat_proximity(space, factual, ces) == pytest.approx(1 - 2 / 3)
    assert metrics.sparsity(space, factual, ces) == pytest.approx(1 - 6 / 9)
    div = metrics.diversity(space, ces)
    # pairs: (0,1): 20+2, (0,2): 14+1, (1,2): 6+1
    assert div["cont_diversity"] == pytest.approx((22 + 15 + 7) / 3)
    assert div["cat_diversity"] == pytest.approx(1.0)
    assert div["sparsity_diversity"] == pytest.approx((1 + 1 + 1) / 3)
    assert metrics.diversity(space, ces.iloc[:1])["cont_diversity"] is None
    mad = metrics.cont_proximity(space, factual, ces, scale="mad")
    expected = -np.mean([20 / space["income"].mad + 0 / space["kids"].mad,
                         0 + 2 / space["kids"].mad, 6 / space["income"].mad + 1 / space["kids"].mad])
    assert mad == pytest.approx(expected)
    with pytest.raises(ValueError, match="scale"):
        metrics.cont_proximity(space, factual, ces, scale="range")


def test_lof_and_ynn(small):
    space, data, _, _ = small
    inlier = data.iloc[[2]]
    outlier = pd.DataFrame({"income": [60.0], "kids": [0], "city": ["c"]})
    scores = metrics.lof(space, pd.concat([inlier, outlier]), data, n_neighbors=3)
    assert scores[0] < scores[1]
    classes = np.array([0, 0, 0, 1, 1, 1])
    assert metrics.ynn(space, data.iloc[[0]], data, classes, [0], n=1) == 1.0
    assert metrics.ynn(space, data.iloc[[0]], data, classes, [1], n=1) == 0.0


# ----------------------------------------------------------------------------- Shekhar et al.
def test_pso_metrics_match_hand_computation(small):
    space, _, factual, ces = small
    # MAD: income 15, kids 1; continuous income, kids; categorical city
    assert (space["income"].mad, space["kids"].mad) == (15.0, 1.0)
    d_cont = [(20 / 15 + 0) / 2, (0 + 2) / 2, (6 / 15 + 1) / 2]
    d_cat = [0.0, 1.0, 1.0]
    assert metrics.proximity_cont(space, factual, ces) == pytest.approx(np.mean(d_cont))
    assert metrics.proximity_cat(space, factual, ces) == pytest.approx(2 / 3)
    assert metrics.changed_fraction(space, factual, ces) == pytest.approx(6 / 9)
    prox = [a + b for a, b in zip(d_cont, d_cat)]
    assert metrics.pso_proximity(space, factual, ces) == pytest.approx(np.mean(prox))
    pairs = {(0, 1): (20 / 15 + 2) / 2 + 1, (0, 2): (14 / 15 + 1) / 2 + 1,
             (1, 2): (6 / 15 + 1) / 2 + 1}
    assert metrics.pso_diversity(space, ces) == pytest.approx(np.mean(list(pairs.values())))
    norm = [d / (prox[i] + prox[j]) for (i, j), d in pairs.items()]
    assert metrics.normalised_diversity(space, factual, ces) == pytest.approx(np.mean(norm))
    summary = metrics.pso_summary(space, factual, ces)
    assert summary["sparsity"] == pytest.approx(6 / 9)
    assert summary["norm_diversity"] == pytest.approx(np.mean(norm))
    assert metrics.pso_diversity(space, ces.iloc[:1]) is None
    assert metrics.normalised_diversity(space, factual, ces.iloc[:1]) is None
    assert metrics.pso_proximity(space, factual, ces.iloc[:0]) is None


def test_pso_metrics_zero_mad_and_coverage():
    data = pd.DataFrame({"flag": [0, 0, 0, 0, 1], "x": [1.0, 2.0, 3.0, 4.0, 5.0]})
    space = cfopt.FeatureSpace.from_frame(data)
    assert space["flag"].mad == 0 and space["x"].mad == 1.0
    factual = data.iloc[[0]]
    ces = pd.DataFrame({"flag": [1, 0], "x": [1.0, 3.0]})
    # flag's MAD is 0: its change is measured in raw units (divided by 1)
    assert metrics.proximity_cont(space, factual, ces) == pytest.approx(((1 + 0) / 2 + (0 + 2) / 2) / 2)
    assert metrics.proximity_cat(space, factual, ces) is None
    # two identical counterfactuals equal to the factual: 0/0 pairs count 0
    same = pd.concat([factual, factual], ignore_index=True)
    assert metrics.normalised_diversity(space, factual, same) == 0.0
    assert metrics.coverage([5, 0, 2, 5]) == 0.75
    assert metrics.coverage([5, 0, 2, 5], requested=5) == 0.5
    with pytest.raises(ValueError, match="at least one query"):
        metrics.coverage([])
