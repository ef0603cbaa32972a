"""A solve within a radius split by the features it may change (cfopt.query.supports):
the sets cover every point within the radius, each set's bounds hold its points, the
split keeps the optimum, and a split cut short claims nothing."""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cfopt
from cfopt.query.ladder import within_radius
from cfopt.query.restrictions.relu import radius_bounds
from cfopt.query.supports import solve_split, supports

from .conftest import sample_rows
from .test_query_tightening import objective_values, preactivations, rejected, sparse_query

#: every change costs 1 beside its weighted move: within a radius below 2, one change
OBJECTIVE = {"l1": 1.0, "l0": 1.0}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), row=st.integers(0, 399),
       objective=st.sampled_from([OBJECTIVE, {"l1": 0.5, "l0": 1.0}, {"l1": 1.0, "l0": 0.6},
                                  {"l1": 1.0, "l0": 1.0, "linf": 0.5}]),
       quantile=st.floats(0.05, 0.95))
def test_the_sets_cover_every_point_within_the_radius_and_bound_it(toy, seed, row, objective,
                                                                  quantile):
    """Every point of objective ≤ r changes only the features of some set, and that
    set's bounds (the master's and a K-scenario copy's) hold the point."""
    frame, _ = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    m, radius, inside = sparse_query(frame, space, seed, row, objective, quantile)
    factual = m.factual
    sets = supports(m, radius)
    if sets is None:
        return
    scenario = sample_rows(space, 1, seed=seed + 1).iloc[0]
    base = space.transform(pd.DataFrame([scenario]), check_bounds=False)[0]
    net_ = m.adapter.structure
    bounds = {}  # (set, base or not): the bounds of that set, each computed once
    seen = inside.copy()  # the copy: a kept feature takes the scenario's value
    held = []
    for i, point in inside.iterrows():
        changed = {n for n in space.names if point[n] != factual.iloc[0][n]}
        holding = [s for s in sets if changed <= set(s)]
        assert holding, (changed, sets)
        held.append(tuple(holding[0]))
        for n in space.names:
            if n not in changed:
                seen.at[i, n] = scenario[n]
    for rows, at in ((inside, None), (seen, base)):
        Z = space.transform(rows, check_bounds=False)
        pres = preactivations(net_, Z)
        for i, support in enumerate(held):
            key = (support, at is None)
            if key not in bounds:
                bounds[key] = radius_bounds(m, radius, base=at, support=support)
            for pre, (lb, ub) in zip(pres, bounds[key]):
                assert (pre[i] >= lb - 1e-9).all() and (pre[i] <= ub + 1e-9).all()


@pytest.mark.parametrize("objective, radius, sizes", [
    ({"l1": 0.2, "l0": 1.0}, 2.5, {2}),       # every pair affordable
    ({"l1": 1.0, "l0": 0.7}, 2.0, {1, 2}),    # the two integers together, c or d alone
    ({"l1": 1.0, "l0": 1.0}, 2.5, {1}),       # two changes allowed, no pair affordable
    ({"l1": 1.0, "l0": 0.7, "linf": 0.5}, 2.0, {1}),  # L∞ makes the pair too dear
    ({"l1": 0.5, "l0": 1.0}, 1.2, {1}),       # whole units of a or b; no c or d
])
def test_the_sets_cover_every_point_of_the_grid_within_the_radius(toy, objective, radius,
                                                                 sizes):
    """The maximal affordable sets: every point of the whole grid within the radius
    changes a subset of one of them, each is affordable and none holds another."""
    frame, _ = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(space.n_inputs, 5), torch.nn.ReLU(),
                              torch.nn.Linear(5, 1))
    m = cfopt.build(net, space, objective=objective)
    factual = frame.iloc[[0]]
    m.set_factual(factual)
    m.set_target(1 - int(m.predict(factual)[0]))
    sets = supports(m, radius)
    assert sets is not None and {len(s) for s in sets} == sizes
    assert not any(set(s) < set(t) for s in sets for t in sets)
    grid = pd.DataFrame(list(itertools.product(range(5), range(4), ["red", "green", "blue"],
                                               range(2))), columns=space.names)
    values = objective_values(m, grid)
    inside = grid[values <= radius]
    changes = [{n for n in space.names if p[n] != factual.iloc[0][n]}
               for _, p in inside.iterrows()]
    assert max(len(c) for c in changes) == max(sizes)
    assert all(any(c <= set(s) for s in sets) for c in changes)
    for s in sets:  # on the grid, each maximal set is changed by a point within r
        assert any(c == set(s) for c in changes), s


def _query(german, german_model):
    net, space = german_model
    plain = cfopt.Explainer(net, space, objective=OBJECTIVE, tighten_per_query=False,
                            mip_gap=1e-9)
    i = next(i for i in rejected(plain, german.X, 20)
             if plain.explain(german.X.iloc[[i]]).objective < 1.9)
    x = german.X.iloc[[i]]
    want = plain.explain(x)
    ex = cfopt.Explainer(net, space, objective=OBJECTIVE, mip_gap=1e-9)
    settings_ = ex.runner.start(x, None, {})
    return ex.milp, ex.backend, settings_, want


def test_the_split_proves_the_optimum_or_infeasibility_of_the_radius(german, german_model):
    """Above the optimum: the union's optimum and a bound at most it; below it: every
    set infeasible, so no point within the radius."""
    m, backend, settings_, want = _query(german, german_model)
    for radius in (want.objective * 1.05, min(1.95, want.objective * 1.8)):
        sets = supports(m, radius)
        assert sets is not None and all(len(s) == 1 for s in sets)
        out = solve_split(m, backend, lambda: settings_, sets,
                          lambda s, r=radius: within_radius(m, r, {}, s))
        assert out.status is cfopt.Status.OPTIMAL
        assert out.objective == pytest.approx(want.objective, rel=1e-6)
        assert out.bound <= out.objective + 1e-9
        # the model holds the best set's point, which the real model verifies
        row = m.decode()
        assert m.predict(row)[0] == 1
        assert objective_values(m, row)[0] == pytest.approx(want.objective, rel=1e-6)
    below = want.objective * 0.95
    sets = supports(m, below)
    out = solve_split(m, backend, lambda: settings_, sets,
                      lambda s: within_radius(m, below, {}, s))
    assert out.status is cfopt.Status.INFEASIBLE and out.bound is None


def test_a_split_cut_short_claims_nothing(german, german_model):
    """With time for one set only, no optimum and no infeasibility is claimed, and no
    bound."""
    m, backend, settings_, want = _query(german, german_model)
    radius = want.objective * 1.05
    sets = supports(m, radius)
    assert len(sets) > 1
    given_out = []

    def once():
        given_out.append(1)
        return settings_ if len(given_out) == 1 else None

    out = solve_split(m, backend, once, sets, lambda s: within_radius(m, radius, {}, s))
    assert out.status in (cfopt.Status.FEASIBLE, cfopt.Status.NO_SOLUTION)
    assert out.bound is None
    assert not math.isnan(out.wall_time)
