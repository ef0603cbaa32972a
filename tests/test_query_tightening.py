"""Per-query bound tightening is exact: the region bounds contain every
counterfactual within the radius, and the optimum never changes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cfopt
from cfopt.query.restrictions.relu import objective_value, radius_bounds
from cfopt.query.restrictions.relu_points import greedy_counterfactual

from .conftest import grid_norms, sample_rows, train_torch


def preactivations(net: cfopt.models.ReLUNetwork, Z: np.ndarray) -> list[np.ndarray]:
    out, h = [], Z
    for layer in net.layers:
        pre = h @ layer.weight.T + layer.bias
        out.append(pre)
        h = np.maximum(pre, 0) if layer.relu else pre
    return out


def rejected(explainer, X, n):
    pred = explainer.milp.predict(X)
    return [i for i in range(len(X)) if pred[i] == 0][:n]


def objective_values(m, rows) -> np.ndarray:
    """Objective of many raw rows at once (vectorised ``objective_value``)."""
    norms = grid_norms(m, rows)
    return sum(c * norms[k] for k, c in m.objective_terms.items())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), row=st.integers(0, 399),
       objective=st.sampled_from(["l1", "linf", "l0", {"l1": 1.0, "l0": 0.3},
                                  {"l1": 0.5, "linf": 2.0}, {"l1": 1.0, "l0": 1.0},
                                  {"l1": 1.0, "l0": 1.0, "linf": 0.5}]),
       quantile=st.floats(0.05, 0.9))
def test_region_bounds_contain_every_point_within_radius(toy, seed, row, objective, quantile):
    frame, _ = toy
    space = cfopt.FeatureSpace.from_frame(frame).increase_only("b")
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(space.n_inputs, 7), torch.nn.ReLU(),
                              torch.nn.Linear(7, 5), torch.nn.ReLU(), torch.nn.Linear(5, 1))
    m = cfopt.build(net, space, objective=objective)
    m.set_factual(frame.iloc[[row]])
    candidates = sample_rows(space, 3000, seed=seed)
    rng = np.random.default_rng(seed)
    keep = rng.random(candidates.shape) < 0.5  # partial changes: keep some factual values
    for k, name in enumerate(space.names):
        candidates.loc[keep[:, k], name] = frame.iloc[row][name]
    candidates = candidates[candidates["b"] >= frame.iloc[row]["b"]]  # increase-only
    values = objective_values(m, candidates)
    spot = candidates.iloc[[len(candidates) // 2]]
    assert values[len(candidates) // 2] == pytest.approx(objective_value(m, spot))
    radius = float(np.quantile(values, quantile))
    inside = candidates[values <= radius]
    bounds = radius_bounds(m, radius)
    Z = space.transform(inside, check_bounds=False)
    for pre, (lb, ub) in zip(preactivations(m.adapter.structure, Z), bounds):
        assert (pre >= lb - 1e-9).all() and (pre <= ub + 1e-9).all()


def sparse_query(frame: pd.DataFrame, space: cfopt.FeatureSpace, seed: int, row: int,
                 objective, quantile: float):
    """A random one-hidden-layer network on ``space``, its query at ``row`` (the target:
    the other class), and the sampled rows that keep each feature at the factual with
    probability 0.7, move the increase-only ones up only, and change something, within
    the radius of their ``quantile``: ``(m, radius, inside)``."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(space.n_inputs, 7), torch.nn.ReLU(),
                              torch.nn.Linear(7, 1))
    m = cfopt.build(net, space, objective=objective)
    factual = frame.iloc[[row]]
    m.set_factual(factual)
    m.set_target(1 - int(m.predict(factual)[0]))
    candidates = sample_rows(space, 3000, seed=seed)
    keep = np.random.default_rng(seed).random(candidates.shape) < 0.7
    for k, name in enumerate(space.names):
        candidates.loc[keep[:, k], name] = frame.iloc[row][name]
    for f in space:
        if f.direction == "increase":
            candidates = candidates[candidates[f.name] >= frame.iloc[row][f.name]]
    values = objective_values(m, candidates)
    changed = values > 0  # the factual itself is not a counterfactual
    candidates, values = candidates[changed], values[changed]
    radius = float(np.quantile(values, quantile))
    return m, radius, candidates[values <= radius].reset_index(drop=True)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), row=st.integers(0, 399),
       objective=st.sampled_from(["l0", {"l1": 1.0, "l0": 1.0}, {"l1": 0.2, "l0": 1.0},
                                  {"l1": 1.0, "l0": 0.5, "linf": 1.0}]),
       quantile=st.floats(0.05, 0.9))
def test_copy_bounds_contain_every_point_within_radius(toy, seed, row, objective, quantile):
    """A network copy seeing the factual with some inputs replaced (a K-scenario's base)
    wherever the counterfactual keeps the factual's value: its bounds around that base
    hold every point of objective ≤ r, with a target set (one change at least)."""
    frame, _ = toy
    space = cfopt.FeatureSpace.from_frame(frame).increase_only("b")
    m, radius, inside = sparse_query(frame, space, seed, row, objective, quantile)
    factual = m.factual
    scenario = sample_rows(space, 1, seed=seed + 1).iloc[0]
    seen = inside.copy()
    for name in space.names:  # a kept feature takes the scenario's value
        kept = seen[name] == factual.iloc[0][name]
        seen.loc[kept, name] = scenario[name]
    base = space.transform(pd.DataFrame([scenario]), check_bounds=False)[0]
    bounds = radius_bounds(m, radius, base=base)
    Z = space.transform(seen, check_bounds=False)
    for pre, (lb, ub) in zip(preactivations(m.adapter.structure, Z), bounds):
        assert (pre >= lb - 1e-9).all() and (pre <= ub + 1e-9).all()
    if objective == {"l1": 1.0, "l0": 1.0} and radius < 2:  # one change: tighter than the box
        box = m.adapter.structure.box_bounds(*zip(*space.input_bounds()))
        assert (bounds[0][1] - bounds[0][0]).sum() < (box[0][1] - box[0][0]).sum()


@pytest.mark.parametrize("objective, cap", [("l1", None), ("linf", None),
                                            ({"l1": 1.0, "l0": 0.2}, None), ("l1", 2)])
def test_same_optimum_with_and_without(german, german_model, objective, cap):
    net, space = german_model
    plain = cfopt.Explainer(net, space, objective=objective, max_changes=cap,
                            tighten_per_query=False, mip_gap=1e-9)
    tight = cfopt.Explainer(net, space, objective=objective, max_changes=cap, mip_gap=1e-9)
    restricted = 0
    for i in rejected(plain, german.X, 6):
        x = german.X.iloc[[i]]
        try:
            a = plain.explain(x)
        except cfopt.InfeasibleError:
            with pytest.raises(cfopt.InfeasibleError):
                tight.explain(x)
            continue
        b = tight.explain(x)
        assert b.objective == pytest.approx(a.objective, rel=1e-6, abs=1e-9)
        assert b.verified and b.status is cfopt.Status.OPTIMAL
        restricted += b.details.get("restricted", False)
        if "heuristic_objective" in b.details:
            assert b.details["heuristic_objective"] >= b.objective - 1e-9
    assert restricted >= 1


def test_ascent_when_a_user_constraint_excludes_the_heuristic(german, german_model):
    net, space = german_model
    # the same optimum, compared at a feasibility tolerance well below the margin (at
    # HiGHS's default 1e-6 the margin gives way by ~1e-6, differently for the two)
    exact = {"mip_feasibility_tolerance": 1e-9}
    plain = cfopt.Explainer(net, space, tighten_per_query=False, mip_gap=1e-9,
                            solver_options=exact)
    tight = cfopt.Explainer(net, space, mip_gap=1e-9, solver_options=exact)
    for e in (plain, tight):
        m = e.milp  # a longer loan: the greedy walk shortens it, so it breaks this rule
        m.longer = pyo.Constraint(expr=m.x["duration"] >= m.x0["duration"] + 6)
    ascents = 0  # the heuristic point breaks the rule: the radii climb from its distance
    rows = [i for i in rejected(plain, german.X, 30) if german.X["duration"].iloc[i] <= 60][:6]
    for i in rows:
        x = german.X.iloc[[i]]
        a, b = plain.explain(x), tight.explain(x)
        assert b.objective == pytest.approx(a.objective, rel=1e-6, abs=1e-9)
        assert b.counterfactual["duration"].iloc[0] >= x["duration"].iloc[0] + 6
        ascents += "ascent" in b.details and "heuristic_objective" not in b.details
    assert ascents >= 1


def test_greedy_counterfactuals_are_valid(german, german_model):
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    found = 0
    for i in rejected(explainer, german.X, 10):
        m = explainer.milp
        m.set_factual(german.X.iloc[[i]])
        m.set_target(1)
        row = greedy_counterfactual(m)
        if row is None:
            continue
        found += 1
        assert m.predict(row)[0] == 1 and not m.violations(row)
        best = explainer.explain(german.X.iloc[[i]])
        assert objective_value(m, row) >= best.objective - 1e-9
    assert found >= 8


def test_multiclass_with_tightening():
    import pandas as pd
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=300, n_features=4, n_informative=3, n_redundant=0,
                               n_classes=3, n_clusters_per_class=1, random_state=4)
    frame = pd.DataFrame(X, columns=list("abcd"))
    space = cfopt.FeatureSpace.from_frame(frame)
    net = train_torch(space.transform(frame), y, hidden=(10, 10), n_classes=3, epochs=200)
    plain = cfopt.Explainer(net, space, tighten_per_query=False, mip_gap=1e-9)
    tight = cfopt.Explainer(net, space, mip_gap=1e-9)
    for i in range(6):
        x = frame.iloc[[i]]
        for target in (0, 1, 2):
            if target == plain.milp.predict(x)[0]:
                continue
            a, b = plain.explain(x, target=target), tight.explain(x, target=target)
            assert b.objective == pytest.approx(a.objective, rel=1e-6, abs=1e-9)


def test_restrictions_are_found_by_predictor_kind():
    """The explainer's per-query restriction comes from a registry keyed by the class of
    the predictor block (most specific first), not from the model's type."""
    from types import SimpleNamespace

    from cfopt.formulations.predictors import NetworkPredictorConstr, PredictorConstr
    from cfopt.formulations.predictors.trees import TreePredictorConstr
    from cfopt.query.restrictions import Restriction, register_restriction, restriction_of
    from cfopt.query.restrictions.registry import RESTRICTIONS
    from cfopt.query.restrictions.relu import ReluRestriction
    from cfopt.query.restrictions.trees import TreeRestriction

    def of(constr_class: type) -> Restriction | None:
        block = constr_class.__new__(constr_class)
        return restriction_of(SimpleNamespace(predictor_constr=block))

    assert isinstance(of(NetworkPredictorConstr), ReluRestriction)
    assert isinstance(of(TreePredictorConstr), TreeRestriction)
    assert of(PredictorConstr) is None  # linear models: no restriction

    class WideTrees(TreePredictorConstr):
        pass

    class Custom(Restriction):
        def heuristic(self, m):
            return None

        def restrict(self, m, candidate, radius, details, deadline, verified):
            return None

    assert isinstance(of(WideTrees), TreeRestriction)  # inherited
    register_restriction(WideTrees, Custom())
    try:
        assert isinstance(of(WideTrees), Custom)
    finally:
        del RESTRICTIONS[WideTrees]


@pytest.mark.parametrize("seed", range(8))
def test_back_substituted_bounds_enclose_every_point_and_beat_intervals(seed):
    """CROWN-style bounds over a box (``ReLUNetwork.back_substituted``): every sampled
    input's pre-activations lie within them, at every layer of networks of one to three
    hidden layers, and they are never wider than interval propagation's; on these
    networks they are narrower in total."""
    from cfopt.models.network import ReLUNetwork, affine_bounds, box_concretizer

    rng = np.random.default_rng(seed)
    sizes = [4] + [int(rng.integers(6, 20)) for _ in range(1 + seed % 3)] + [1]
    net = ReLUNetwork.from_parameters(
        [(rng.normal(size=(b, a)) / np.sqrt(a), 0.3 * rng.normal(size=b))
         for a, b in zip(sizes, sizes[1:])])
    lo = rng.uniform(-1, 0, 4)
    hi = lo + rng.uniform(0.1, 1.0, 4)
    first = affine_bounds(net.layers[0].weight, net.layers[0].bias, lo, hi)
    crown = net.back_substituted(first, box_concretizer(lo, hi))
    intervals = net.box_bounds(lo, hi)
    corners = np.array(np.meshgrid(*zip(lo, hi))).reshape(4, -1).T
    Z = np.vstack([rng.uniform(lo, hi, (3000, 4)), corners])
    for P, (cl, cu), (il, iu) in zip(preactivations(net, Z), crown, intervals):
        assert np.all(P >= cl - 1e-9) and np.all(P <= cu + 1e-9)
        assert np.all(cl >= il - 1e-12) and np.all(cu <= iu + 1e-12)
    assert sum(np.sum(u - lo_) for lo_, u in crown[1:]) < \
        sum(np.sum(u - lo_) for lo_, u in intervals[1:])
