"""Forests of unlimited depth (issue 17): large ensembles are built per query, only on
the leaves within the heuristic's radius (:mod:`cfopt.formulations.tree_regions`), and
every claim stays exact: the optimum equals brute force on a grid and the full build's."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.ensemble import RandomForestClassifier

import cfopt
import cfopt.formulations.predictors.trees as tree_formulation
from cfopt import Status
from cfopt.formulations import tree_cuts
from cfopt.formulations.tree_regions import leaf_depth_sum, search
from cfopt.query.restrictions.trees import query_region

from .conftest import grid, grid_norms, noisy_grid
from .test_bruteforce import MARGIN, enumerate_minimum


@pytest.fixture(scope="module")
def deep():
    """Noisy labels on a 10 x 8 x 3 x 4 grid: unlimited-depth trees of ~100 leaves."""
    frame, y = noisy_grid()
    space = cfopt.FeatureSpace.from_frame(frame)
    space.increase_only("a").immutable("d")
    model = RandomForestClassifier(30, random_state=0).fit(space.transform(frame), y)
    return frame, space, model


def per_query_explainer(monkeypatch, model, space, **options) -> cfopt.Explainer:
    """An explainer whose trees are built per query, whatever their size."""
    with monkeypatch.context() as patch:
        patch.setattr(tree_formulation, "PER_QUERY_TERMS", 0)
        return cfopt.Explainer(model, space, margin=MARGIN, mip_gap=0.0, **options)


def rejected(frame: pd.DataFrame, space: cfopt.FeatureSpace, model, n: int) -> list[int]:
    return np.flatnonzero(model.predict(space.transform(frame)) == 0)[:n].tolist()


def test_index_gives_make_cut_of_every_split(deep):
    """The vectorised index equals :func:`make_cut` node by node (grid inputs, float32
    thresholds, continuous inputs with the library's rounding)."""
    frame, space, model = deep
    rng = np.random.default_rng(1)
    wide = frame.assign(e=rng.normal(0, 1e3, len(frame)))
    wide_space = cfopt.FeatureSpace.from_frame(wide)
    Z = wide_space.transform(wide)
    forest = RandomForestClassifier(10, random_state=0).fit(Z, model.predict(Z[:, :6]))
    m = per_query_explainer(pytest.MonkeyPatch(), forest, wide_space).milp
    block, ensemble = m.predictor_constr.block, m.adapter.structure
    from cfopt.space.encoding import spec_grids, spec_rounding

    grids = spec_grids(wide_space, m.input_specs)
    rounding = spec_rounding(wide_space, m.input_specs)
    for tree, ids in zip(ensemble.trees, block.index.node_cut):
        for node in np.flatnonzero(tree.feature >= 0):
            j = int(tree.feature[node])
            expected = tree_cuts.make_cut(
                j, float(tree.threshold[node]), ensemble.rule, ensemble.float32, grids[j],
                rounding[j], lambda v, j=j: m.library_input(j, v))
            got = block.index.cut(int(ids[node]))
            assert (got.left, got.right, got.sure_left, got.sure_right) == (
                expected.left, expected.right, expected.sure_left, expected.sure_right)


@pytest.mark.parametrize("formulation", ["leaf", "threshold"])
def test_per_query_equals_brute_force_and_full_build(deep, monkeypatch, formulation):
    frame, space, model = deep
    lazy = per_query_explainer(monkeypatch, model, space, tree_formulation=formulation)
    full = cfopt.Explainer(model, space, margin=MARGIN, mip_gap=0.0,
                           tree_formulation=formulation)
    assert lazy.milp.predictor_constr.per_query
    assert not full.milp.predictor_constr.per_query
    leaves = sum(len(t.leaves) for t in lazy.milp.adapter.structure.trees)
    for i in rejected(frame, space, model, 4):
        x = frame.iloc[[i]]
        a, b = lazy.explain(x, target=1), full.explain(x, target=1)
        expected = enumerate_minimum(full, x, 1, "l1", space)
        assert a.status is cfopt.Status.OPTIMAL and a.verified
        assert b.status is cfopt.Status.OPTIMAL
        assert a.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
        assert b.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
        assert a.bound <= expected + 1e-9
        assert a.details["region_leaves"] < leaves  # the radius pruned
        assert model.predict(space.transform(a.counterfactual))[0] == 1


@pytest.mark.parametrize("objective", ["l1", "linf", {"l1": 1.0, "l0": 0.05}])
def test_region_keeps_every_leaf_within_the_radius(deep, monkeypatch, objective):
    """The lemma of tree_regions: every point of objective <= r (actionable) reaches,
    in every tree, a kept leaf; with r = inf every actionable point does."""
    frame, space, model = deep
    explainer = per_query_explainer(monkeypatch, model, space, objective=objective)
    m = explainer.milp
    ensemble = m.adapter.structure
    points = grid(space)
    Z = space.transform(points)
    if ensemble.float32:  # the library compares float32(x) with its thresholds
        Z = Z.astype(np.float32).astype(np.float64)
    for i in rejected(frame, space, model, 2):
        m.set_factual(frame.iloc[[i]])
        m.set_target(1)
        actionable = np.array([not m.violations(points.iloc[[k]])
                               for k in range(len(points))])
        norms = grid_norms(m, points)
        cost = sum(c * norms[t] for t, c in m.objective_terms.items())
        for radius in (0.1, 0.3, math.inf):
            kept = search(ensemble, m.predictor_constr.block.index,
                          query_region(m, radius))
            inside = actionable & (cost <= radius)
            for tree, region in zip(ensemble.trees, kept):
                reached = set(tree.apply(Z[inside], ensemble.rule).tolist())
                assert reached <= set(region.leaves)
            if radius < 1:
                assert sum(len(r.leaves) for r in kept) < sum(len(t.leaves)
                                                              for t in ensemble.trees)


def test_raw_constraint_beyond_the_heuristic_falls_back_exactly(deep, monkeypatch):
    """A raw Pyomo constraint the heuristic cannot see (b may not fall): the region at
    the heuristic's radius may miss the optimum, and the answer is still brute force's."""
    frame, space, model = deep
    explainer = per_query_explainer(monkeypatch, model, space)
    m = explainer.milp
    for i in rejected(frame, space, model, 3):
        x = frame.iloc[[i]]
        m.no_drop = pyo.Constraint(expr=m.x["b"] >= float(x["b"].iloc[0]))
        try:
            ce = explainer.explain(x, target=1)
        finally:
            m.del_component("no_drop")
        rows = [r for r in _valid(explainer, x, space) if r["b"].iloc[0] >= x["b"].iloc[0]]
        expected = min(m.distances(r)["l1"] for r in rows)
        assert ce.status is cfopt.Status.OPTIMAL
        assert ce.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)


def _valid(explainer: cfopt.Explainer, x: pd.DataFrame, space: cfopt.FeatureSpace
           ) -> list[pd.DataFrame]:
    from .conftest import valid_grid_points

    return valid_grid_points(explainer, x, 1, space, MARGIN)


def test_the_size_chooses_per_query(deep, monkeypatch):
    """Above PER_QUERY_TERMS terms of leaf rows (the sum of leaf depths) the explainer
    builds no leaf, only the split index, and each query builds the few it reaches;
    below, the whole forest is built once."""
    frame, space, model = deep
    terms = leaf_depth_sum(cfopt.Explainer(model, space).milp.adapter.structure)
    monkeypatch.setattr(tree_formulation, "PER_QUERY_TERMS", terms - 1)
    explainer = cfopt.Explainer(model, space, time_limit=30)
    block = explainer.milp.predictor_constr.block
    assert explainer.milp.predictor_constr.per_query and block.component("leaf") is None
    leaves = sum(len(t.leaves) for t in explainer.milp.adapter.structure.trees)
    for i in rejected(frame, space, model, 2):
        ce = explainer.explain(frame.iloc[[i]], target=1)
        assert ce.verified and ce.status is cfopt.Status.OPTIMAL
        assert 0 < ce.details["region_leaves"] < leaves
        assert ce.counterfactual["d"].iloc[0] == frame["d"].iloc[i]  # immutable
    monkeypatch.setattr(tree_formulation, "PER_QUERY_TERMS", terms)
    assert not cfopt.Explainer(model, space).milp.predictor_constr.per_query


def test_inner_stage_proves_only_true_bounds(deep, monkeypatch):
    """The first stage (half the incumbent's radius, :mod:`cfopt.query.inner_radius`): a final
    answer is brute force's optimum, any other gives a floor below it and a radius of a
    verified point at least it; a better point it finds replaces the incumbent."""
    from cfopt.query.inner_radius import inner_stage
    from cfopt.query.restrictions.relu import objective_value
    from cfopt.query.restrictions.tree_walk import greedy_tree_counterfactual
    from cfopt.query.solution import verify_row
    from cfopt.solvers import SolverSettings

    frame, space, model = deep
    explainer = per_query_explainer(monkeypatch, model, space)
    m = explainer.milp
    finals = floors = 0
    minimum = {}  # brute force's, once per row
    for i, scale in itertools.product(rejected(frame, space, model, 6), (1, 4)):
        x = frame.iloc[[i]]  # scale 4: as if the incumbent cost more (any r is exact)
        if i not in minimum:
            minimum[i] = enumerate_minimum(explainer, x, 1, "l1", space)
        expected = minimum[i]
        explainer.runner.start(x, 1, {})
        row = greedy_tree_counterfactual(m)
        incumbent = [verify_row(m, row)]
        radius = scale * objective_value(m, row)
        stage = inner_stage(m, explainer.backend, SolverSettings(mip_gap=0.0), radius,
                            incumbent, {}, math.inf)
        if stage.final:
            finals += 1
            assert stage.outcome.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
        else:
            floors += stage.floor is not None
            assert stage.floor is None or stage.floor <= expected + 1e-9
            assert expected - 1e-9 <= stage.radius <= radius
            assert incumbent[0].verified
            if stage.radius < radius:  # a better point of the stage is the incumbent
                assert objective_value(m, incumbent[0].row) == pytest.approx(stage.radius)
    assert finals and floors  # both ways are taken on these rows


def test_highs_starts_from_a_given_point(deep, monkeypatch):
    """A MIP start (the feature values of a verified point) reaches HiGHS: told to stop
    at its first solution, presolve and heuristics off, HiGHS returns the start (a costlier
    point than the optimum), and loads its values; without the start it returns
    another point."""
    from cfopt.query.restrictions.trees import build_query_region
    from cfopt.query.solution import start_of
    from cfopt.solvers import SolverSettings

    frame, space, model = deep
    explainer = per_query_explainer(monkeypatch, model, space)
    m = explainer.milp
    first = SolverSettings(mip_gap=0.0, options={"mip_max_improving_sols": 1,
                                                 "mip_heuristic_effort": 0.0,
                                                 "presolve": "off"})
    started = 0
    for i in rejected(frame, space, model, 4):
        best = explainer.explain(frame.iloc[[i]], target=1)
        costly = best.counterfactual.assign(a=9)  # a is increase-only: still valid
        cost = m.distances(costly)["l1"]
        if model.predict(space.transform(costly))[0] != 1 or cost <= best.objective + 0.01:
            continue
        build_query_region(m, math.inf)
        explainer.backend.reset()
        assert explainer.backend.solve(m, first).objective != pytest.approx(cost)
        outcome = explainer.backend.solve(m, first, start_of(m, costly))
        assert outcome.objective == pytest.approx(cost)
        assert pyo.value(m.objective) == pytest.approx(cost)
        started += 1
    assert started


def test_out_of_time_after_the_inner_stage_keeps_its_bound(deep, monkeypatch):
    """No time left to build the trees within the incumbent's radius: the answer is the
    verified incumbent, FEASIBLE, with the bound the inside-out stage proved (below
    brute force's optimum), not without one."""
    import cfopt.query.runner as runner_module
    from cfopt.formulations.tree_regions import RegionTooLarge

    frame, space, model = deep
    explainer = per_query_explainer(monkeypatch, model, space)

    def out_of_time(*args, **kwargs):
        raise RegionTooLarge

    monkeypatch.setattr(runner_module, "build_query_region", out_of_time)
    bounded = 0
    for i in rejected(frame, space, model, 4):
        x = frame.iloc[[i]]
        ce = explainer.explain(x, target=1)
        expected = enumerate_minimum(explainer, x, 1, "l1", space)
        assert ce.verified and ce.status in (Status.FEASIBLE, Status.OPTIMAL)
        assert ce.bound is None or ce.bound <= expected + 1e-9
        bounded += ce.bound is not None
    assert bounded
