"""Bad input gets a precise error and no result."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import cfopt

from .conftest import train_torch


@pytest.fixture(scope="module")
def setup(german_model, german):
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    pred = explainer.milp.predict(german.X)
    i = int(np.flatnonzero(pred == 0)[0])
    return explainer, german.X.iloc[[i]].copy()


CASES = [
    ("missing column", lambda x: x.drop(columns=["age"]), ValueError, r"missing column\(s\) \['age'\]"),
    ("extra column", lambda x: x.assign(good_credit=1), ValueError, r"unexpected column\(s\) \['good_credit'\]"),
    ("NaN", lambda x: x.assign(duration=np.nan), ValueError, r"column 'duration': missing value \(NaN\)"),
    ("+inf", lambda x: x.assign(credit_amount=np.inf), ValueError, r"column 'credit_amount': infinite value inf"),
    ("-inf", lambda x: x.assign(credit_amount=-np.inf), ValueError, r"column 'credit_amount': infinite value -inf"),
    ("unseen category", lambda x: x.assign(purpose="spaceship"), ValueError, r"column 'purpose': unseen category 'spaceship'"),
    ("string in numeric", lambda x: x.assign(age="old"), ValueError, r"column 'age': value 'old' .* is not a number"),
    ("outside bounds", lambda x: x.assign(age=120), ValueError, r"column 'age': value 120 .* outside the declared bounds \[19, 75\]"),
    ("non-integer", lambda x: x.assign(age=30.5), ValueError, r"column 'age': integer feature has non-integer value 30.5"),
    ("bool label unseen", lambda x: x.assign(telephone="maybe"), ValueError, r"column 'telephone': unseen category 'maybe'"),
]


@pytest.mark.parametrize("name, change, exc, message", CASES, ids=[c[0] for c in CASES])
def test_bad_rows(setup, name, change, exc, message):
    explainer, x = setup
    with pytest.raises(exc, match=message):
        explainer.explain(change(x.copy()))


def test_two_rows_at_once(setup, german):
    explainer, _ = setup
    with pytest.raises(ValueError, match="explain one row at a time"):
        explainer.explain(german.X.iloc[:2])


def test_not_a_frame(setup):
    explainer, _ = setup
    with pytest.raises(TypeError, match="expected a pandas DataFrame, Series or dict"):
        explainer.explain([1, 2, 3])


@pytest.mark.parametrize("target, message", [
    (7, r"unknown target class 7; the model's classes are \[0, 1\]"),
    (0, r"already classified as 0"),
    ([], r"the target set is empty"),
])
def test_bad_targets(setup, target, message):
    explainer, x = setup
    with pytest.raises(ValueError, match=message):
        explainer.explain(x, target=target)


def test_unknown_option_is_refused(setup):
    explainer, x = setup
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['timelimit'\]"):
        explainer.explain(x, timelimit=5)


@pytest.mark.parametrize("kwargs, exc, message", [
    ({"time_limit": -5}, ValueError, "time_limit must be a positive number"),
    ({"time_limit": 0}, ValueError, "time_limit must be a positive number"),
    ({"mip_gap": -0.1}, ValueError, "mip_gap must be a relative gap"),
])
def test_bad_query_options(setup, kwargs, exc, message):
    explainer, x = setup
    with pytest.raises(exc, match=message):
        explainer.explain(x, **kwargs)


def test_max_changes_without_cap(setup):
    explainer, x = setup
    with pytest.raises(ValueError, match="built without max_changes"):
        explainer.explain(x, max_changes=2)


@pytest.mark.parametrize("kwargs, exc, message", [
    ({"objective": "l2"}, ValueError, r"unknown objective term\(s\) \['l2'\]"),
    ({"objective": {"l1": -1}}, ValueError, "must be non-negative"),
    ({"weights": "std"}, ValueError, "weights must be 'range', 'mad' or a mapping"),
    ({"weights": {"height": 1.0}}, ValueError, r"unknown feature\(s\) \['height'\]"),
    ({"margin": 0}, ValueError, "margin must be a positive number"),
    ({"max_changes": 0}, ValueError, "max_changes must be a positive integer"),
    ({"bound_tightening": "milp"}, ValueError, "bound_tightening must be one of"),
    ({"solver": "simplex3000"}, ValueError, "unknown solver 'simplex3000'"),
    ({"verify_retries": -1}, ValueError, "verify_retries must be a non-negative integer"),
])
def test_bad_explainer_options(german_model, kwargs, exc, message):
    net, space = german_model
    with pytest.raises(exc, match=message):
        cfopt.Explainer(net, space, **kwargs)


def test_width_mismatch(german):
    space = cfopt.FeatureSpace.from_frame(german.X)
    net = torch.nn.Sequential(torch.nn.Linear(10, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    with pytest.raises(ValueError, match="takes 10 inputs but the feature space encodes 59"):
        cfopt.Explainer(net, space)


def test_unsupported_model_in_explainer(german):
    from sklearn.neighbors import KNeighborsClassifier

    space = cfopt.FeatureSpace.from_frame(german.X)
    knn = KNeighborsClassifier().fit(space.transform(german.X), german.y)
    with pytest.raises(cfopt.UnsupportedModelError, match="KNeighborsClassifier"):
        cfopt.Explainer(knn, space)


def test_sigmoid_hidden_layer_in_explainer(german):
    space = cfopt.FeatureSpace.from_frame(german.X)
    net = torch.nn.Sequential(torch.nn.Linear(59, 4), torch.nn.Sigmoid(), torch.nn.Linear(4, 1))
    with pytest.raises(cfopt.UnsupportedModelError, match=r"layer 1 \(Sigmoid\)"):
        cfopt.Explainer(net, space)


def test_contradictory_actionability(german):
    """increase-only with an upper bound below the factual: the factual is rejected."""
    space = cfopt.FeatureSpace.from_frame(german.X)
    space.increase_only("age").set("age", upper=30)
    net = train_torch(space.transform(german.X, check_bounds=False), german.y.to_numpy(),
                      hidden=(4,), epochs=5)
    explainer = cfopt.Explainer(net, space)
    old = german.X[german.X["age"] > 30].iloc[[0]]
    with pytest.raises(ValueError, match=r"column 'age': value \d+ .* outside the declared bounds \[19, 30\]"):
        explainer.explain(old)


def test_space_type_checked(german_model):
    net, _ = german_model
    with pytest.raises(TypeError, match="space must be a cfopt.FeatureSpace"):
        cfopt.Explainer(net, pd.DataFrame({"a": [1]}))
