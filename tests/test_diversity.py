"""Diverse counterfactual sets: ε-enumeration against brute force, the cuts on the
decoded points, solver pools, fallbacks and bad options."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.constraints.diversity_cuts import changed_features, weighted_l1

from .conftest import german_space, train_torch, valid_grid_points

MARGIN = 1e-3


def brute_force_enumeration(explainer, x, target_index, space, epsilon):
    """Per distinct set of changed features, its cheapest valid grid point; those within
    (1 + ε)·cfd, cheapest first: (cost, changed set) pairs."""
    m = explainer.milp
    best: dict[frozenset, float] = {}
    for row in valid_grid_points(explainer, x, target_index, space, MARGIN):
        key = changed_features(space, x.iloc[0], row.iloc[0])
        cost = m.distances(row)["l1"]
        best[key] = min(best.get(key, np.inf), cost)
    if not best:
        return []
    cfd = min(best.values())
    return sorted((c, k) for k, c in best.items() if c <= cfd * (1 + epsilon) + 1e-9)


def check_enumeration(explainer, frame, row, epsilon):
    x = frame.iloc[[row]]
    space = explainer.space
    current = explainer.milp.predict(x)[0]
    classes = explainer.milp.adapter.classes
    target = next(c for c in classes if c != current)
    expected = brute_force_enumeration(explainer, x, classes.index(target), space, epsilon)
    if not expected:
        with pytest.raises(cfopt.InfeasibleError):
            explainer.explain(x, target=target, n=50, diversity="epsilon", epsilon=epsilon)
        return 0
    found = explainer.explain(x, target=target, n=50, diversity="epsilon", epsilon=epsilon)
    assert found.cfd == pytest.approx(expected[0][0], rel=1e-6, abs=1e-9)
    costs = found.costs
    assert costs == pytest.approx([c for c, _ in expected], rel=1e-6, abs=1e-9)
    assert all(a <= b + 1e-9 for a, b in zip(costs, costs[1:]))
    got = {changed_features(space, x.iloc[0], c.counterfactual.iloc[0]) for c in found}
    assert got == {k for _, k in expected}
    assert all(c.verified for c in found)
    assert all(d is not None and d >= -1e-9 for d in found.safety)
    return len(expected)


def test_epsilon_enumeration_equals_brute_force(toy):
    frame, y = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    model = train_torch(space.transform(frame), y, hidden=(8,), epochs=200, seed=1)
    explainer = cfopt.Explainer(model, space, margin=MARGIN, mip_gap=0.0)
    sizes = [check_enumeration(explainer, frame, row, 0.5) for row in range(8)]
    assert max(sizes) >= 3  # the enumeration is not trivially one member


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(width=st.integers(2, 8), seed=st.integers(0, 10_000), row=st.integers(0, 399),
       epsilon=st.sampled_from([0.0, 0.2, 1.0]))
def test_epsilon_enumeration_random_models(toy, width, seed, row, epsilon):
    frame, _ = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(space.n_inputs, width), torch.nn.ReLU(),
                              torch.nn.Linear(width, 1)).eval()
    explainer = cfopt.Explainer(net, space, margin=MARGIN, mip_gap=0.0)
    check_enumeration(explainer, frame, row, epsilon)


@pytest.fixture(scope="module")
def german_forest(german):
    space = german_space(german)
    model = RandomForestClassifier(30, max_depth=4, random_state=0).fit(
        space.transform(german.X), german.y)
    rejected = german.X[model.predict(space.transform(german.X)) == 0]
    return space, model, rejected


@pytest.mark.parametrize("hamming", [1, 2])
def test_nogood_sets_differ_on_decoded_points(german_forest, hamming):
    space, model, rejected = german_forest
    explainer = cfopt.Explainer(model, space)
    for i in range(2):
        x = rejected.iloc[[i]]
        found = explainer.explain(x, target=1, n=4, diversity="nogood", hamming=hamming)
        assert len(found) == 4 and found.stopped == "complete"
        sets = [changed_features(space, x.iloc[0], c.counterfactual.iloc[0]) for c in found]
        for a in range(len(sets)):
            for b in range(a + 1, len(sets)):
                assert len(sets[a] ^ sets[b]) >= hamming
        assert (model.predict(space.transform(found.counterfactuals)) == 1).all()
        assert found[0].objective == pytest.approx(explainer.explain(x, target=1).objective)
        costs = found.costs
        assert all(a <= b + 1e-9 for a, b in zip(costs, costs[1:]))  # each solve optimal
        for cf in found.counterfactuals.itertuples(index=False):
            assert cf.foreign_worker == x["foreign_worker"].iloc[0]
            assert cf.age >= x["age"].iloc[0]


def test_distance_cuts_hold_on_decoded_points(german_forest):
    space, model, rejected = german_forest
    explainer = cfopt.Explainer(model, space)
    x = rejected.iloc[[3]]
    found = explainer.explain(x, target=1, n=4, diversity="distance", min_distance=0.1)
    assert len(found) == 4
    rows = [c.counterfactual.iloc[0] for c in found]
    weights = explainer.milp.weights
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            assert weighted_l1(space, weights, rows[a], rows[b]) >= 0.1 - 1e-6
    assert (model.predict(space.transform(found.counterfactuals)) == 1).all()


def test_a_distance_member_far_across_the_range_is_found():
    """Class 1 only at a ≤ 1 or a ≥ 9 on the integers 0..10 (logit
    relu(1.5 − a) + relu(a − 8.5) − 0.25, a = 10·code); from a = 5 the set at distance
    ≥ cfd = 0.4 is {1, 9} (or {9, 1}): the second member lies 8 units, more than half
    the range, from the first, and then nothing is left (0 and 10 are 0.1 from them)."""
    space = cfopt.FeatureSpace([cfopt.Feature("a", "integer", lower=0, upper=10, shift=0,
                                              scale=10, spread=10)])
    net = torch.nn.Sequential(torch.nn.Linear(1, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[-10.0], [10.0]]))
        net[0].bias.copy_(torch.tensor([1.5, -8.5]))
        net[2].weight.copy_(torch.tensor([[1.0, 1.0]]))
        net[2].bias.fill_(-0.25)
    explainer = cfopt.Explainer(net, space)
    grid = pd.DataFrame({"a": range(11)})
    assert [i for i in range(11) if explainer.milp.predict(grid)[i] == 1] == [0, 1, 9, 10]
    found = explainer.explain(pd.DataFrame({"a": [5]}), target=1, n=3, diversity="distance")
    assert found.cfd == pytest.approx(0.4)
    assert sorted(found.counterfactuals["a"]) == [1, 9]
    assert found.stopped == "exhausted"


def test_nogood_members_move_continuous_features_by_min_change(german):
    space = german_space(german)
    for name in ("duration", "credit_amount", "age"):
        space.set(name, kind="continuous")
    model = LogisticRegression(max_iter=3000).fit(space.transform(german.X), german.y)
    rejected = german.X[model.predict(space.transform(german.X)) == 0]
    explainer = cfopt.Explainer(model, space)
    x = rejected.iloc[[0]]
    found = explainer.explain(x, target=1, n=4, min_change=0.05)
    assert len(found) == 4
    for ce in found.members[1:]:
        for name in ("duration", "credit_amount", "age"):
            f = space[name]
            moved = abs(ce.counterfactual[name].iloc[0] - x[name].iloc[0])
            assert moved == 0 or moved >= 0.05 * (f.upper - f.lower) * (1 - 1e-9)


def test_default_distance_radius_is_cfd(german_forest):
    space, model, rejected = german_forest
    explainer = cfopt.Explainer(model, space)
    found = explainer.explain(rejected.iloc[[5]], target=1, n=3, diversity="distance")
    assert found.details["min_distance"] == pytest.approx(found.cfd)


def test_model_restored_after_a_set(german_forest):
    space, model, rejected = german_forest
    explainer = cfopt.Explainer(model, space)
    x = rejected.iloc[[1]]
    before = explainer.explain(x, target=1)
    explainer.explain(x, target=1, n=3, diversity="epsilon", epsilon=0.5)
    assert explainer.milp.component("diversity") is None
    assert "diversity" not in explainer.milp.constraints
    assert explainer.milp.cutoff.value == pytest.approx(explainer.milp.max_objective)
    after = explainer.explain(x, target=1)
    assert after.objective == pytest.approx(before.objective)
    assert after.counterfactual.equals(before.counterfactual)


def _linear_german(german):
    space = german_space(german)
    model = LogisticRegression(max_iter=3000).fit(space.transform(german.X), german.y)
    rejected = german.X[model.predict(space.transform(german.X)) == 0]
    return space, model, rejected


def test_highs_pool_members_distinct_and_verified(german):
    space, model, rejected = _linear_german(german)
    explainer = cfopt.Explainer(model, space)
    x = rejected.iloc[[0]]
    found = explainer.explain(x, target=1, n=5, diversity="pool")
    assert found.method == "pool" and len(found) >= 1
    assert found[0].status is cfopt.Status.OPTIMAL
    assert found.cfd == pytest.approx(explainer.explain(x, target=1).objective, rel=1e-6)
    rows = found.counterfactuals
    assert not rows.duplicated().any()
    assert (model.predict(space.transform(rows)) == 1).all()
    assert all(c >= found.cfd - 1e-9 for c in found.costs)


def test_gurobi_pool_mode2_nondecreasing(german):
    backend = cfopt.solvers.make_solver("gurobi")
    if not backend.available():
        pytest.skip("gurobipy is not installed")
    space, model, rejected = _linear_german(german)
    explainer = cfopt.Explainer(model, space, solver=backend)
    x = rejected.iloc[[0]]
    try:
        found = explainer.explain(x, target=1, n=5, diversity="pool", pool_mode=2)
    except cfopt.SolverLicenseError as exc:
        pytest.skip(f"Gurobi's size-limited pip licence refuses the model: {exc}")
    assert len(found) == 5 and found.stopped == "complete"
    assert not found.counterfactuals.duplicated().any()
    assert (model.predict(space.transform(found.counterfactuals)) == 1).all()
    costs = found.costs
    assert all(a <= b + 1e-7 for a, b in zip(costs, costs[1:]))
    assert found.cfd == pytest.approx(explainer.explain(x, target=1).objective, rel=1e-6)
    # the pool parameters do not leak into later single solves
    model_params = backend._instance()._solver_model.Params
    assert model_params.PoolSearchMode == 0


def test_solver_without_pool_falls_back(german):
    backend = cfopt.solvers.make_solver("cbc")
    if not backend.available():
        pytest.skip("cbc is not installed")
    space, model, rejected = _linear_german(german)
    explainer = cfopt.Explainer(model, space, solver=backend)
    found = explainer.explain(rejected.iloc[[0]], target=1, n=2, diversity="pool")
    assert found.method == "nogood" and "no solution pool" in found.details["fallback"]
    assert len(found) == 2


def test_same_set_on_highs_and_cbc(toy):
    frame, y = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    backend = cfopt.solvers.make_solver("cbc")
    if not backend.available():
        pytest.skip("cbc is not installed")
    model = LogisticRegression().fit(space.transform(frame), y)
    x = frame[model.predict(space.transform(frame)) == 0].iloc[[0]]
    costs = [cfopt.Explainer(model, space, solver=s, mip_gap=0.0).explain(
        x, target=1, n=20, diversity="epsilon", epsilon=1.0).costs for s in ("highs", backend)]
    assert costs[0] == pytest.approx(costs[1], rel=1e-6, abs=1e-9)


def test_bad_set_options(german_forest):
    space, model, rejected = german_forest
    explainer = cfopt.Explainer(model, space)
    x = rejected.iloc[[0]]
    with pytest.raises(ValueError, match="n must be a positive integer"):
        explainer.explain(x, n=0)
    with pytest.raises(ValueError, match="unknown diversity method 'random'"):
        explainer.explain(x, n=2, diversity="random")
    with pytest.raises(TypeError, match=r"\['epsilon'\] do not apply to diversity='nogood'"):
        explainer.explain(x, n=2, epsilon=0.1)
    with pytest.raises(TypeError, match="unknown option"):
        explainer.explain(x, n=2, diversty="nogood")
    with pytest.raises(ValueError, match="min_distance must be a positive number"):
        explainer.explain(x, n=2, diversity="distance", min_distance=-1)
    with pytest.raises(ValueError, match="pool_mode must be 1"):
        explainer.explain(x, n=2, diversity="pool", pool_mode=3)
    with pytest.raises(TypeError, match="unknown option"):
        explainer.explain(x, epsilon=0.1)
    with pytest.raises(ValueError, match="min_change must be a fraction"):
        explainer.explain(x, n=2, min_change=0)


def test_set_serializes(german_forest):
    space, model, rejected = german_forest
    explainer = cfopt.Explainer(model, space)
    found = explainer.explain(rejected.iloc[[0]], target=1, n=2, diversity="epsilon",
                              epsilon=1.0)
    data = json.loads(found.to_json())
    assert data["method"] == "epsilon" and data["found"] == len(found)
    assert data["members"][0]["verified"] is True
    assert data["strong"][0] is True
