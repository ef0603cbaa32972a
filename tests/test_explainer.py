"""The Explainer on real data: verified, actionable, reusable, extensible CEs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.datasets import make_classification
from sklearn.neural_network import MLPClassifier

import cfopt
from cfopt.models.base import ModelAdapter

from .conftest import sample_rows, train_torch


def rejected(explainer, X, n):
    pred = explainer.milp.predict(X)
    return [i for i in range(len(X)) if pred[i] == 0][:n]


def check_actionable(ce: cfopt.Counterfactual, space: cfopt.FeatureSpace) -> None:
    before, after = ce.factual.iloc[0], ce.counterfactual.iloc[0]
    for f in space:
        if f.immutable:
            assert after[f.name] == before[f.name], f.name
        if f.direction == "increase":
            assert after[f.name] >= before[f.name], f.name
        if f.direction == "decrease":
            assert after[f.name] <= before[f.name], f.name
    space.validate(ce.counterfactual)  # inside bounds, valid categories


def test_german_counterfactuals_are_verified_and_actionable(german, german_model):
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    rows = rejected(explainer, german.X, 8)
    for i in rows:
        ce = explainer.explain(german.X.iloc[[i]], target=1)
        assert ce.status is cfopt.Status.OPTIMAL and ce.verified and ce.found
        assert explainer.milp.predict(ce.counterfactual)[0] == 1  # the real model agrees
        assert ce.predicted_class == 1 and ce.factual_class == 0
        check_actionable(ce, space)
        assert ce.objective == pytest.approx(ce.distances["l1"], rel=1e-6, abs=1e-8)
        assert ce.bound <= ce.objective * (1 + 1e-6) + 1e-9
        assert ce.gap <= 1e-4 + 1e-9
        assert len(ce.changes()) == ce.distances["l0"]


def test_reuse_equals_rebuild(german, german_model):
    """explain_many on one model gives the same optima as a fresh model per query."""
    net, space = german_model
    explainer = cfopt.Explainer(net, space, mip_gap=0.0)
    rows = rejected(explainer, german.X, 5)
    batch = explainer.explain_many(german.X.iloc[rows], target=1)
    for i, ce in zip(rows, batch):
        fresh = cfopt.Explainer(net, space, mip_gap=0.0).explain(german.X.iloc[[i]], target=1)
        assert ce.objective == pytest.approx(fresh.objective, rel=1e-6)
    assert batch[0].build_time >= explainer.milp.build_time > 0  # built once, counted once


def test_build_time_can_be_left_out(german, german_model):
    """exclude_build_time: no answer carries the model's build (a caller reports it)."""
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    explainer.milp.build_time = 1e6  # unmistakable if it were counted
    explainer.runner.exclude_build_time()
    ce = explainer.explain(german.X.iloc[[rejected(explainer, german.X, 1)[0]]], target=1)
    assert ce.found and ce.build_time < 1e6 and ce.total_time < 1e6


def test_bound_tightening_keeps_the_optimum(german, german_model):
    net, space = german_model
    plain = cfopt.Explainer(net, space, bound_tightening=None, mip_gap=0.0)
    tight = cfopt.Explainer(net, space, bound_tightening="lp", mip_gap=0.0)
    report = tight.milp.bound_tightening
    assert report.lp_solves == 2 * (report.neurons + 1)
    assert report.mean_width_after <= report.mean_width_before
    assert report.stable_after >= report.stable_before
    for i in rejected(plain, german.X, 4):
        x = german.X.iloc[[i]]
        assert tight.explain(x).objective == pytest.approx(plain.explain(x).objective, rel=1e-6)
    # the tightened encoding is still exact over the box
    Z = space.transform(sample_rows(space, 200))
    assert tight.milp.predictor_constr.get_error(Z) <= 1e-6


def test_user_constraint_in_three_lines(german, german_model):
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    i = rejected(explainer, german.X, 1)[0]
    x = german.X.iloc[[i]]
    free = explainer.explain(x)
    m = explainer.milp
    m.keep_amount = pyo.Constraint(expr=m.x["credit_amount"] >= 0.9 * m.x0["credit_amount"])
    ce = explainer.explain(x)
    assert ce.verified
    assert ce.counterfactual["credit_amount"].iloc[0] >= 0.9 * x["credit_amount"].iloc[0] - 1e-6
    assert ce.objective >= free.objective - 1e-9


@pytest.mark.parametrize("objective", ["l0", "linf", {"l1": 1.0, "l0": 0.5}])
def test_other_objectives(german, german_model, objective):
    net, space = german_model
    explainer = cfopt.Explainer(net, space, objective=objective)
    for i in rejected(explainer, german.X, 3):
        ce = explainer.explain(german.X.iloc[[i]])
        assert ce.verified
        check_actionable(ce, space)
        terms = {objective: 1.0} if isinstance(objective, str) else objective
        expected = sum(c * ce.distances[k] for k, c in terms.items())
        assert ce.objective == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_max_changes_cap(german, german_model):
    net, space = german_model
    explainer = cfopt.Explainer(net, space, max_changes=3)
    for i in rejected(explainer, german.X, 4):
        x = german.X.iloc[[i]]
        ce = explainer.explain(x)
        assert ce.distances["l0"] <= 3
        try:
            one = explainer.explain(x, max_changes=1)
        except cfopt.InfeasibleError as exc:
            assert "max_changes" in exc.groups
        else:
            assert one.distances["l0"] <= 1 and one.objective >= ce.objective - 1e-9


def test_multiclass_targets():
    X, y = make_classification(n_samples=400, n_features=5, n_informative=4, n_redundant=0,
                               n_classes=3, n_clusters_per_class=1, random_state=2)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(5)])
    labels = np.array(["low", "mid", "high"])[y]
    space = cfopt.FeatureSpace.from_frame(frame)
    model = MLPClassifier((12,), max_iter=800, random_state=0).fit(space.transform(frame), labels)
    explainer = cfopt.Explainer(model, space)
    x = frame.iloc[[0]]
    current = explainer.milp.predict(x)[0]
    others = [c for c in model.classes_ if c != current]
    for target in others:
        ce = explainer.explain(x, target=target)
        assert ce.verified and ce.predicted_class == target
        assert model.predict(space.transform(ce.counterfactual))[0] == target
    best_of_two = explainer.explain(x, target=others)
    assert best_of_two.predicted_class in others
    single = [explainer.explain(x, target=t).objective for t in others]
    assert best_of_two.objective == pytest.approx(min(single), rel=1e-4)
    any_other = explainer.explain(x)
    assert any_other.target == tuple(others)


def test_infeasible_is_diagnosed(german, german_model):
    net, space = german_model
    frozen = cfopt.FeatureSpace.from_dict(space.to_dict())
    for f in frozen:
        if f.name != "telephone":
            frozen.set(f.name, immutable=True)
    explainer = cfopt.Explainer(net, frozen)
    i = rejected(explainer, german.X, 1)[0]
    with pytest.raises(cfopt.InfeasibleError, match="constraint group 'immutable'") as info:
        explainer.explain(german.X.iloc[[i]])
    assert info.value.groups == ["immutable"]
    assert 1 <= len(info.value.details["immutable"]) < len(frozen)


def test_user_constraint_named_in_diagnosis(german, german_model):
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    i = rejected(explainer, german.X, 1)[0]
    m = explainer.milp
    m.impossible = pyo.Constraint(expr=m.predictor.outputs[0] <= -1)
    with pytest.raises(cfopt.InfeasibleError, match="'impossible'") as info:
        explainer.explain(german.X.iloc[[i]])
    assert info.value.groups == ["impossible"]
    m.del_component(m.impossible)
    assert explainer.explain(german.X.iloc[[i]]).verified


def test_unreachable_target_is_diagnosed():
    frame = pd.DataFrame({"a": [0.0, 1.0, 0.5], "b": [0.0, 1.0, 0.2]})
    space = cfopt.FeatureSpace.from_frame(frame)

    from sklearn.linear_model import LogisticRegression
    model = LogisticRegression().fit(space.transform(frame), [0, 1, 0])
    model.coef_[:] = [[1.0, 1.0]]
    model.intercept_[:] = [-5.0]  # logit <= -3 on the whole box: class 1 is unreachable
    explainer = cfopt.Explainer(model, space)
    with pytest.raises(cfopt.InfeasibleError, match="no point inside the feature bounds"):
        explainer.explain(frame.iloc[[0]], target=1)


class _Disagreeing(ModelAdapter):
    """A model whose predict never changes class: verification must fail."""

    def __init__(self, inner):
        self._inner = inner
        self.model = inner.model
        self.structure = inner.structure
        self.classes = inner.classes
        self.decision = inner.decision

    def predict(self, Z):
        return np.zeros(len(np.atleast_2d(Z)), dtype=int)

    def output(self, Z):
        return self._inner.output(Z)


def test_verification_failure_returns_no_point(german, german_model):
    net, space = german_model
    adapter = _Disagreeing(cfopt.models.parse_model(net))
    explainer = cfopt.Explainer(adapter, space, verify_retries=2)
    x = german.X.iloc[[rejected(explainer, german.X, 1)[0]]]
    ce = explainer.explain(x, target=1)
    assert ce.status is cfopt.Status.VERIFICATION_FAILED
    assert ce.counterfactual is None and not ce.verified and not ce.found
    assert ce.attempts == 3 and ce.margin == pytest.approx(1e-3 * 100)
    assert "no counterfactual returned" in ce.message
    assert pyo.value(explainer.milp.margin) == pytest.approx(1e-3)  # restored


def test_time_limit_returns_incumbent_marked_unproven(german):
    space = cfopt.FeatureSpace.from_frame(german.X)
    net = train_torch(space.transform(german.X), german.y.to_numpy(), hidden=(60, 60),
                      epochs=300, seed=1)
    explainer = cfopt.Explainer(net, space, bound_tightening=None, time_limit=0.05,
                                mip_gap=0.0)
    statuses = set()
    for i in rejected(explainer, german.X, 3):
        ce = explainer.explain(german.X.iloc[[i]])
        statuses.add(ce.status)
        if ce.status is cfopt.Status.FEASIBLE:
            assert ce.verified and ce.found and not ce.optimal
            assert "optimality not proven" in ce.message
            assert ce.bound is None or ce.bound <= ce.objective + 1e-9
        elif ce.status is cfopt.Status.NO_SOLUTION:
            assert ce.counterfactual is None and "before any counterfactual" in ce.message
    assert statuses <= {cfopt.Status.FEASIBLE, cfopt.Status.NO_SOLUTION}


def test_results_serialize(german, german_model):
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    ce = explainer.explain(german.X.iloc[[rejected(explainer, german.X, 1)[0]]])
    data = json.loads(ce.to_json())
    assert data["status"] == "optimal" and data["verified"] is True
    assert set(data["counterfactual"]) == set(space.names)
    assert data["changes"] == {k: {"from": v["from"], "to": v["to"]}
                               for k, v in data["changes"].items()}
    assert data["objective"] == pytest.approx(ce.objective)
    assert isinstance(data["factual"]["purpose"], str)
    assert "changes" in repr(ce) or "from" in repr(ce)


def test_build_returns_a_pyomo_model(german, german_model):
    net, space = german_model
    x = german.X.iloc[[rejected(cfopt.Explainer(net, space), german.X, 1)[0]]]
    m = cfopt.build(net, space, x, target=1)
    assert isinstance(m, pyo.ConcreteModel)
    for name in ("x", "x0", "onehot", "onehot0", "predictor", "validity", "objective",
                 "immutable", "increase_only", "dev"):
        assert hasattr(m, name), name
    pyo.SolverFactory("appsi_highs").solve(m)
    row = m.decode()
    assert m.predict(row)[0] == 1 and not m.violations(row)
