"""A new user's first hour (issue 19): batches that finish whatever their rows hold,
``target="opposite"``, DiCE's ``features_to_vary``, and time limits that hold on a
default random forest with the heuristic point returned when the solver has none."""

from __future__ import annotations

import time

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

import cfopt


@pytest.fixture(scope="module")
def logistic(german):
    space = cfopt.FeatureSpace.from_frame(german.X)
    model = LogisticRegression(max_iter=2000).fit(space.transform(german.X), german.y)
    return model, space


def test_batch_with_accepted_and_bad_rows_finishes(german, logistic):
    """Rows already in the target get ALREADY_TARGET, a bad row its ERROR with its index
    label; every other row is answered, and to_frame keeps X's index."""
    model, space = logistic
    explainer = cfopt.Explainer(model, space)
    labels = model.predict(space.transform(german.X))
    accepted = [i for i in range(len(labels)) if labels[i] == 1][:2]
    rejected = [i for i in range(len(labels)) if labels[i] == 0][:3]
    X = german.X.iloc[accepted + rejected].copy()
    X.index = [f"applicant-{k}" for k in range(len(X))]
    bad = X.index[-1]
    X.loc[bad, "age"] = 500  # outside the declared bounds
    batch = explainer.explain_many(X, target=1, progress=False)
    frame = batch.to_frame()
    assert list(frame.index) == list(X.index)
    assert list(frame.status) == ["already_target"] * 2 + ["optimal"] * 2 + ["error"]
    assert f"row {bad!r}" in frame.loc[bad, "message"] and "'age'" in frame.loc[bad, "message"]
    assert frame.message.iloc[0].startswith("row 'applicant-0': ")
    assert all(r.verified for r in batch.results[2:4])
    with pytest.raises(ValueError, match="'age'") as info:
        explainer.explain_many(X, target=1, errors="raise", progress=False)
    assert any(repr(bad) in note for note in getattr(info.value, "__notes__", []))


def test_target_opposite(german, logistic):
    """``target="opposite"`` explains every row towards the other class (DiCE's
    ``desired_class="opposite"``); a single accepted row raises AlreadyTargetError."""
    model, space = logistic
    explainer = cfopt.Explainer(model, space)
    X = german.X.iloc[:8]
    labels = model.predict(space.transform(X))
    batch = explainer.explain_many(X, target="opposite", progress=False)
    assert [r.status for r in batch] == [cfopt.Status.OPTIMAL] * len(X)
    for r, label in zip(batch, labels):
        assert r.target == (1 - label,)
        assert model.predict(space.transform(r.counterfactual))[0] == 1 - label
    accepted = X.iloc[[int(np.argmax(labels))]]
    with pytest.raises(cfopt.errors.AlreadyTargetError, match="already classified"):
        explainer.explain(accepted, target=1)


def test_features_to_vary(german, logistic):
    """Only the listed features change; the user's space is left as it was; a listed
    immutable or unknown feature is an error naming it."""
    model, space = logistic
    allowed = ["duration", "credit_amount", "status", "savings"]
    explainer = cfopt.Explainer(model, space, features_to_vary=allowed)
    assert not space["age"].immutable
    labels = model.predict(space.transform(german.X))
    found = 0
    for i in [k for k in range(len(labels)) if labels[k] == 0][:6]:
        try:
            ce = explainer.explain(german.X.iloc[[i]], target=1)
        except cfopt.InfeasibleError:
            continue
        assert set(ce.changes().index) <= set(allowed)
        found += 1
    assert found >= 3
    with pytest.raises(ValueError, match="'weight'"):
        cfopt.Explainer(model, space, features_to_vary=["weight"])
    fixed = cfopt.FeatureSpace.from_frame(german.X).immutable("age")
    with pytest.raises(ValueError, match="'age'"):
        fixed.vary_only("age", "duration")


def test_time_limit_on_a_default_forest_returns_the_heuristic_point(german):
    """A default random forest (100 unlimited-depth trees): a short limit returns a
    verified point (the greedy one when the solver found none) as FEASIBLE, never
    NO_SOLUTION, within a generous margin of the limit (timing is measured in
    benchmarks, not asserted here)."""
    space = cfopt.FeatureSpace.from_frame(german.X)
    model = RandomForestClassifier(random_state=0).fit(space.transform(german.X), german.y)
    explainer = cfopt.Explainer(model, space)
    labels = model.predict(space.transform(german.X))
    for i in [k for k in range(len(labels)) if labels[k] == 0][:3]:
        ce = explainer.explain(german.X.iloc[[i]], target=1, time_limit=0.5)
        assert ce.status in (cfopt.Status.OPTIMAL, cfopt.Status.FEASIBLE), ce.message
        assert ce.verified and model.predict(space.transform(ce.counterfactual))[0] == 1
        assert ce.total_time < 0.5 + 30.0  # the first query loads the model into HiGHS


@pytest.mark.parametrize("kind", ["forest", "network"])
def test_a_limit_spent_before_the_first_solve_still_returns_the_heuristic_point(
        german, german_model, kind, monkeypatch):
    """When the query's time is gone before its first solve (here the process pauses in
    the query's start, as a garbage collection or a loaded machine can), the answer is
    still the verified greedy point, FEASIBLE with no bound, not NO_SOLUTION."""
    if kind == "forest":
        space = cfopt.FeatureSpace.from_frame(german.X)
        model = RandomForestClassifier(n_estimators=10, random_state=0).fit(
            space.transform(german.X), german.y)
    else:
        model, space = german_model
    explainer = cfopt.Explainer(model, space)
    start = explainer.runner.start

    def paused(*args, **kwargs):
        settings = start(*args, **kwargs)
        time.sleep(0.06)
        return settings

    monkeypatch.setattr(explainer.runner, "start", paused)
    labels = explainer.milp.predict(german.X)
    i = [k for k in range(len(labels)) if labels[k] == 0][0]
    ce = explainer.explain(german.X.iloc[[i]], target=1, time_limit=0.05)
    assert ce.status is cfopt.Status.FEASIBLE and ce.bound is None, ce.message
    assert "heuristic counterfactual is returned" in ce.message
    assert ce.verified and explainer.milp.predict(ce.counterfactual)[0] == 1
    assert ce.objective == pytest.approx(ce.details["heuristic_objective"])


def test_nogood_members_differ_by_meaningful_changes(german, german_model):
    """After the first member of a no-good set, every numeric change is at least a tenth
    of the feature's range (one unit at least), not a one-month or one-euro move that
    makes a near-copy count as a new member."""
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    labels = explainer.milp.predict(german.X)
    checked = 0
    for i in [k for k in range(len(labels)) if labels[k] == 0][:4]:
        found = explainer.explain(german.X.iloc[[i]], target=1, n=5, diversity="nogood")
        for member in found.members[1:]:
            for name, change in member.changes().iterrows():
                f = space[name]
                if f.is_onehot:
                    continue
                move = abs(f.to_code(change["to"]) - f.to_code(change["from"]))
                floor = 0.1 * (f.upper - f.lower)
                assert move >= (max(1.0, np.ceil(floor - 1e-9)) if f.is_integral
                                else floor) - 1e-9, (i, name, change.to_dict())
                checked += 1
    assert checked >= 4
