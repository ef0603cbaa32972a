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
