"""MD-PSO counterfactuals (Shekhar et al.): information value, box, validity,
actionability, reproducibility."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.baselines.mdpso import MDPSO, information_value
from cfopt.space.space import FeatureSpace

from .conftest import mixed_data, train_torch

FAST = {"particles": 20, "iterations": 25}


@pytest.fixture(scope="module")
def mixed():
    X, y = mixed_data()
    space = FeatureSpace.from_frame(X)
    model = RandomForestClassifier(n_estimators=15, max_depth=5, random_state=0)
    model.fit(space.transform(X), y)
    return X, y, space, model


def rejected(X, space, model, k=4):
    pred = model.predict(space.transform(X))
    return [X.iloc[[i]] for i in np.flatnonzero(pred == 0)[:k]]


# ----------------------------------------------------------------------- information value
def test_information_value_matches_hand_computation():
    # two bins (one per value), no empty bin: p = (2.5, 1.5)/4, n = (1.5, 2.5)/4
    iv = information_value(np.array([0, 0, 0, 1, 1, 1]), np.array([1, 1, 0, 1, 0, 0], bool))
    assert iv == pytest.approx(0.5 * math.log(5 / 3))
    # an empty bin on each side is smoothed (0.5 pseudo-rows): finite
    iv = information_value(np.array([0, 0, 1, 1, 2, 2]), np.array([1, 1, 1, 0, 0, 0], bool))
    assert iv == pytest.approx(4 / 4.5 * math.log(5))
    # 100 distinct values: 10 equal-frequency bins, the upper five all positive
    values = np.arange(100.0)
    iv = information_value(values, values >= 50)
    assert iv == pytest.approx(100 / 55 * math.log(21))
    # labels work as values; an uninformative feature scores 0
    assert information_value(np.array(["a", "b", "a", "b"]),
                             np.array([1, 1, 0, 0], bool)) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="both"):
        information_value(np.array([1, 2]), np.array([True, True]))


def test_active_set_is_top_h_by_information_value(mixed):
    X, y, space, model = mixed
    pso = MDPSO(model, space, h=2, **FAST).fit(X, y)
    iv = pso.information_values((1,))
    assert iv == {n: pytest.approx(information_value(X[n].to_numpy(), y == 1)) for n in X}
    res = pso.explain(rejected(X, space, model)[0], target=1)
    assert res.details["active"] == sorted(iv, key=lambda n: -iv[n])[:2]
    for ce in res:
        changed = ce.changes().index
        assert set(changed) <= set(res.details["active"])


# ----------------------------------------------------------------------- validity, seeds
def test_counterfactuals_verified_and_reproducible(mixed):
    X, y, space, model = mixed
    pso = MDPSO(model, space, epsilon=0.4, **FAST).fit(X, y)
    found = 0
    for x in rejected(X, space, model):
        res = pso.explain(x, target=1)
        assert res.method == "mdpso" and len(res) <= 5
        for ce in res:
            assert ce.verified and ce.status is cfopt.Status.FEASIBLE
            assert model.predict(space.transform(ce.counterfactual))[0] == 1
            space.validate(ce.counterfactual)  # within bounds, known categories
            assert ce.distances["l0"] >= 1
        cfs = res.counterfactuals
        assert not cfs.duplicated().any()
        found += len(res) > 0
        again = pso.explain(x, target=1)
        pd.testing.assert_frame_equal(cfs, again.counterfactuals)
    assert found >= 3


def test_immutable_and_monotone_respected_by_construction(mixed):
    X, y, space, model = mixed
    space = FeatureSpace.from_dict(space.to_dict())
    space.immutable("housing", "married").increase_only("age").decrease_only("debt")
    pso = MDPSO(model, space, h=4, **FAST).fit(X, y)
    n = 0
    for x in rejected(X, space, model, k=6):
        res = pso.explain(x, target=1)
        assert not {"housing", "married"} & set(res.details["active"])
        for ce in res:
            row, x0 = ce.counterfactual.iloc[0], x.iloc[0]
            assert row["housing"] == x0["housing"] and row["married"] == x0["married"]
            assert row["age"] >= x0["age"] and row["debt"] <= x0["debt"]
            n += 1
    assert n > 0


def test_multiplicative_box_collapses_at_zero_additive_does_not():
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"a": rng.uniform(0, 10, 400), "b": rng.uniform(0, 10, 400)})
    y = (X.a + X.b > 10).astype(int).to_numpy()
    space = FeatureSpace.from_frame(X)
    model = LogisticRegression().fit(space.transform(X), y)
    x = pd.DataFrame({"a": [X.a.min()], "b": [4.0]})  # a at its minimum: scaled 0
    settings = {"h": 2, "epsilon": 0.5, **FAST}
    multiplicative = MDPSO(model, space, box="multiplicative", **settings).fit(X, y)
    for ce in multiplicative.explain(x, target=1):
        assert ce.counterfactual["a"].iloc[0] == x["a"].iloc[0]
    additive = MDPSO(model, space, box="additive", **settings).fit(X, y)
    moved = [ce.counterfactual["a"].iloc[0] > x["a"].iloc[0] for ce in additive.explain(x, 1)]
    assert any(moved)


def test_torch_network_probabilities_and_target_none():
    X, y = mixed_data(200)
    space = FeatureSpace.from_frame(X)
    net = train_torch(space.transform(X), y, hidden=(8,), epochs=100)
    pso = MDPSO(net, space, **FAST).fit(X)  # labels: the model's own predictions
    adapter = cfopt.models.parse_model(net)
    x = next(X.iloc[[i]] for i in range(len(X))
             if adapter.predict(space.transform(X.iloc[[i]]))[0] == 0)
    res = pso.explain(x)
    assert res.target == (1,)
    for ce in res:
        assert adapter.predict(space.transform(ce.counterfactual))[0] == 1


def test_bad_options_and_input(mixed):
    X, y, space, model = mixed
    with pytest.raises(ValueError, match="box"):
        MDPSO(model, space, box="sphere")
    with pytest.raises(ValueError, match="particles"):
        MDPSO(model, space, particles=0)
    with pytest.raises(ValueError, match="epsilon"):
        MDPSO(model, space, epsilon=-1)
    with pytest.raises(ValueError, match="weights"):
        MDPSO(model, space, weights=(1, 1))
    pso = MDPSO(model, space, **FAST)
    with pytest.raises(RuntimeError, match="fit"):
        pso.explain(X.iloc[[0]])
    pso.fit(X, y)
    with pytest.raises(ValueError, match="one row"):
        pso.explain(X.iloc[:2])
    with pytest.raises(ValueError, match="classes"):
        pso.explain(X.iloc[[0]], target=7)
