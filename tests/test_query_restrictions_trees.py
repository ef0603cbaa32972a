"""The leaf restriction of a tree ensemble's query (:mod:`cfopt.query.restrictions.trees`)
by hand: the query box of the points within a radius (each norm, actionability,
category switches, weights of 0, the costs beyond the distance), the pruning of the
leaves and cuts a box decides (both sides of its tolerance, restored on exit), the
query's region as the per-query build reads it, and the restriction's entry points."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.ensemble import RandomForestClassifier

import cfopt
import cfopt.formulations.predictors.trees as tree_formulation
from cfopt.formulations.tree_regions import CategoryTerm, NumericTerm
from cfopt.query.restrictions import trees as T
from cfopt.query.restrictions.trees import (
    TreeRestriction,
    build_box_region,
    build_query_region,
    per_query,
    pruned_leaves,
    pruned_within,
    query_box,
    query_region,
)
from cfopt.space.encoding import InputSpec
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace


def space_of(fixed_category: bool = False) -> FeatureSpace:
    return FeatureSpace([
        Feature("a", "continuous", lower=0.0, upper=10.0),
        Feature("k", "integer", lower=0, upper=5),
        Feature("c", "categorical", categories=("x", "y", "z"), immutable=fixed_category),
        Feature("i", "continuous", lower=0.0, upper=1.0, immutable=True),
        Feature("u", "continuous", lower=0.0, upper=4.0),
        Feature("d", "continuous", lower=0.0, upper=8.0),
    ]).increase_only("u").decrease_only("d")


SPACE = space_of()
# weights 1 / range: a 0.1, k 0.2, c 1, i 1, u 0.25, d 0.125; the inputs are the raw
# values (one-hot for c)
RNG = np.random.default_rng(0)
N = 300
FRAME = pd.DataFrame({"a": RNG.uniform(0, 10, N), "k": RNG.integers(0, 6, N),
                      "c": RNG.choice(["x", "y", "z"], N), "i": RNG.uniform(0, 1, N),
                      "u": RNG.uniform(0, 4, N), "d": RNG.uniform(0, 8, N)})
LABELS = ((FRAME.a - 2 * FRAME.k + 3 * (FRAME.c == "x") + FRAME.u - FRAME.d / 2) > 0)
MODEL = RandomForestClassifier(3, max_depth=3, random_state=0).fit(
    SPACE.transform(FRAME), LABELS.astype(int))
FACTUAL = pd.DataFrame({"a": [5.0], "k": [3], "c": ["y"], "i": [0.5], "u": [2.0],
                        "d": [4.0]})


def model(objective="l1", per=False, monkeypatch=None, **options):
    if per:
        monkeypatch.setattr(tree_formulation, "PER_QUERY_TERMS", 0)
    m = cfopt.Explainer(MODEL, SPACE, objective=objective, **options).milp
    m.set_factual(FACTUAL)
    return m


def approx_box(box, want):
    assert len(box) == len(want)
    for (lo, hi), (wlo, whi) in zip(box, want):
        assert lo == pytest.approx(wlo, abs=1e-12) and hi == pytest.approx(whi, abs=1e-12)


# inputs: a, k, c=x, c=y, c=z, i, u, d
STAYS = [(0.0, 0.0), (1.0, 1.0), (0.0, 0.0)]  # the factual's category, y
FREE = [(0.0, 1.0)] * 3


# ============================================================ query_box
def test_query_box_l1_by_hand():
    m = model("l1")
    # r = 0.1: a moves 1 unit, k 0.5, u up 0.4, d down 0.8, c stays (1 > 0.1)
    approx_box(query_box(m, 0.1), [(4.0, 6.0), (2.5, 3.5), *STAYS, (0.5, 0.5),
                                   (2.0, 2.4), (3.2, 4.0)])


def test_query_box_clipped_at_the_bounds_and_whole_without_a_radius():
    m = model("l1")
    approx_box(query_box(m, 0.75), [(0.0, 10.0), (0.0, 5.0), *STAYS, (0.5, 0.5),
                                    (2.0, 4.0), (0.0, 4.0)])
    approx_box(query_box(m), [(0.0, 10.0), (0.0, 5.0), *FREE, (0.5, 0.5), (2.0, 4.0),
                              (0.0, 4.0)])


def test_query_box_a_switch_within_the_reach():
    m = model("l1")
    box = query_box(m, 1.0)  # w_c = 1 = reach: the switch is affordable
    assert box[2:5] == FREE
    assert query_box(m, 0.999)[2:5] == STAYS


def test_query_box_linf_and_both_norms():
    approx_box(query_box(model("linf"), 0.1)[:2], [(4.0, 6.0), (2.5, 3.5)])
    approx_box(query_box(model({"linf": 2.0}), 0.2)[:2], [(4.0, 6.0), (2.5, 3.5)])
    approx_box(query_box(model({"l1": 0.5}), 0.05)[:2], [(4.0, 6.0), (2.5, 3.5)])
    both = model({"l1": 2.0, "linf": 0.5})  # reach min(0.2 / 2, 0.2 / 0.5) = 0.1
    approx_box(query_box(both, 0.2)[:2], [(4.0, 6.0), (2.5, 3.5)])
    both = model({"l1": 0.5, "linf": 2.0})
    approx_box(query_box(both, 0.2)[:2], [(4.0, 6.0), (2.5, 3.5)])


def test_query_box_l0_alone_bounds_no_move():
    m = model("l0")
    approx_box(query_box(m, 0.5), [(0.0, 10.0), (0.0, 5.0), *FREE, (0.5, 0.5),
                                   (2.0, 4.0), (0.0, 4.0)])


def test_query_box_weight_zero_moves_freely():
    m = model("l1", weights={"a": 0.0, "c": 0.0})
    box = query_box(m, 0.1)
    approx_box(box[:2], [(0.0, 10.0), (2.5, 3.5)])
    assert box[2:5] == FREE
    m = model("l1", weights={"c": 0.0})
    assert query_box(m, 0.0)[2:5] == FREE
    m.raw.extra_floor = 0.5  # a radius below the costs beyond the distance: reach < 0
    assert query_box(m, 0.1)[2:5] == FREE


def test_query_box_immutable_category_stays():
    m = cfopt.Explainer(MODEL, space_of(fixed_category=True)).milp
    m.set_factual(FACTUAL)
    assert query_box(m)[2:5] == STAYS


def test_query_box_reads_the_costs_beyond_the_distance():
    m = model("l1")
    m.raw.extra_floor = 0.05
    approx_box(query_box(m, 0.15)[:2], [(4.0, 6.0), (2.5, 3.5)])


def test_query_box_within_the_model_input_bounds(monkeypatch):
    m = model("l1")
    narrow = [(4.5, 5.5), (2.8, 3.2), (0.0, 1.0), (0.0, 1.0), (0.0, 1.0), (0.0, 1.0),
              (0.0, 4.0), (0.0, 8.0)]
    monkeypatch.setattr(m.predictor_constr, "input_bounds", narrow)
    approx_box(query_box(m, 0.1)[:2], [(4.5, 5.5), (2.8, 3.2)])


def test_query_box_a_decreasing_input_map(monkeypatch):
    m = model("l1")
    specs = list(m.input_specs)
    specs[0] = dataclasses.replace(specs[0], a=-0.1, b=1.0)  # input = 1 - a / 10
    monkeypatch.setattr(type(m), "input_specs", property(lambda s: specs))
    approx_box(query_box(m, 0.1)[:1], [(0.4, 0.6)])


# ============================================================ pruned_leaves
def block(paths: dict, cuts: dict, fixed=()):
    b = pyo.ConcreteModel()
    b.leaf = pyo.Var(list(paths), bounds=(0, 1))
    b.left_of = pyo.Var(list(cuts), bounds=(0, 1))
    for key in fixed:
        b.left_of[key].setlb(1)
    b.leaf_boxes = paths
    b.cuts = {key: SimpleNamespace(left=lo, right=hi) for key, (lo, hi) in cuts.items()}
    return b


def bounds(b) -> tuple[list, list]:
    return ([b.leaf[k].bounds for k in b.leaf], [b.left_of[k].bounds for k in b.left_of])


def test_pruned_leaves_misses_the_box_beyond_its_tolerance():
    box = [(0.0, 0.4), (2.0, 12.0)]  # tolerances 1e-9 and 1e-8 (width 10)
    paths = {0: {0: (0.4 + 0.9e-9, 1.0)}, 1: {0: (0.4 + 1.1e-9, 1.0)},
             2: {1: (12.0 + 9e-9, 20.0)}, 3: {1: (12.0 + 1.1e-8, 20.0)},
             4: {1: (0.0, 2.0 - 9e-9)}, 5: {1: (0.0, 2.0 - 1.1e-8)},
             6: {0: (-1.0, -1.1e-9)}, 7: {0: (-1.0, -0.9e-9), 1: (2.0, 3.0)},
             8: {0: (0.5, 1.0), 1: (13.0, 14.0)}, 9: {}}
    b = block(paths, {})
    with pruned_leaves(b, box) as n:
        assert n == 5
        assert [k for k in b.leaf if b.leaf[k].ub == 0] == [1, 3, 5, 6, 8]
    # exactly at the tolerance's edge: kept
    edge = block({0: {0: (0.4 + 1e-9, 1.0)}, 1: {0: (-1.0, 0.0 - 1e-9)}}, {})
    with pruned_leaves(edge, [(0.0, 0.4)]) as n:
        assert n == 0
        assert all(b.leaf[k].lb == 0 for k in b.leaf)
    assert bounds(b)[0] == [(0, 1)] * 10


def test_pruned_leaves_fixes_the_cuts_the_box_decides():
    cuts = {(0, 0): (0.5, 0.5), (0, 1): (0.3, 0.4), (0, 2): (0.2, 0.3), (1, 0): (0.2, 0.3),
            (1, 1): (0.5, 0.6), (1, 2): (0.4, 0.7)}
    box = [(0.2, 0.4), (0.3, 0.6)]
    b = block({}, cuts, fixed=[(1, 2)])
    b.left_of[1, 2].setub(1)
    with pruned_leaves(b, box) as n:
        assert n == 0
        got = dict(zip(b.left_of, bounds(b)[1]))
    # (0, 0): 0.4 < 0.5, the whole box goes left; (0, 1): qhi 0.4 is not < 0.4;
    # (0, 2): qlo 0.2 is not > 0.2; (1, 0): 0.3 > 0.2, right; (1, 1): neither;
    # (1, 2) was fixed already
    assert got == {(0, 0): (1, 1), (0, 1): (0, 1), (0, 2): (0, 1), (1, 0): (0, 0),
                   (1, 1): (0, 1), (1, 2): (1, 1)}
    assert bounds(b)[1] == [(0, 1)] * 5 + [(1, 1)]
    box = [(0.25, 0.35), (0.3, 0.6)]
    with pruned_leaves(b, box):
        got = dict(zip(b.left_of, bounds(b)[1]))
    assert got[0, 1] == (1, 1) and got[0, 2] == (0, 0)


def test_pruned_leaves_counts_a_leaf_once_and_restores_its_own_bounds():
    b = block({0: {0: (0.5, 1.0), 1: (0.5, 1.0)}, 1: {0: (0.0, 0.1)}}, {(0, 0): (0.3, 0.3)})
    b.leaf[1].setub(0.5)
    b.left_of[0, 0].setlb(0)
    guard = pruned_leaves(b, [(0.0, 0.2), (0.0, 0.2)])
    with guard as n:
        assert n == 1 and b.leaf[0].ub == 0 and b.leaf[1].ub == 0.5
        assert b.left_of[0, 0].bounds == (1, 1)
    assert bounds(b) == ([(0, 1), (0, 0.5)], [(0, 1)])
    with guard as again:  # the same guard again: nothing left over from the first
        assert again == 1
    assert guard.changed == [] and bounds(b) == ([(0, 1), (0, 0.5)], [(0, 1)])


def test_pruned_within_a_real_ensemble():
    m = model("l1")
    leaves = m.predictor_constr.block.leaf
    details: dict = {}
    with pruned_within(m, 0.05, details):
        zero = sum(1 for k in leaves if leaves[k].ub == 0)
    assert details["pruned_leaves"] == zero > 0
    assert all(leaves[k].ub == 1 for k in leaves)
    with pruned_within(m, math.inf, details):
        pass
    assert details["pruned_leaves"] < zero


# ============================================================ query_region and the builds
def test_query_region_by_hand():
    m = model({"l1": 1.0, "l0": 0.5, "linf": 0.25})
    region = query_region(m, 0.75)
    assert (region.l1, region.l0, region.linf, region.radius) == (1.0, 0.5, 0.25, 0.75)
    assert region.box == list(m.predictor_constr.input_bounds)
    a, k, c, i, u, d = region.terms
    assert a == NumericTerm([(0, 1.0, 0.0)], 0.0, 10.0, 5.0, 0.1)
    assert k == NumericTerm([(1, 1.0, 0.0)], 0.0, 5.0, 3.0, 0.2)
    assert i == NumericTerm([(5, 1.0, 0.0)], 0.5, 0.5, 0.5, 1.0)
    assert isinstance(c, CategoryTerm) and c.own == 1 and c.weight == 1.0
    assert [i for i, _ in c.inputs] == [2, 3, 4]
    assert [v.tolist() for _, v in c.inputs] == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    assert c.allowed.tolist() == [True, True, True]
    assert (u.lo, u.hi, u.x0) == (2.0, 4.0, 2.0) and (d.lo, d.hi, d.x0) == (0.0, 4.0, 4.0)


def test_query_region_reads_the_costs_beyond_the_distance_and_default_radius():
    m = model("l1")
    assert query_region(m).radius == math.inf
    assert (query_region(model("l0")).l1, query_region(model("linf")).l1) == (0.0, 0.0)
    m.raw.extra_floor = 0.25
    assert query_region(m, 1.0).radius == 0.75
    assert (query_region(m).l0, query_region(m).linf) == (0.0, 0.0)


def test_query_region_skips_an_input_of_slope_zero(monkeypatch):
    m = model("l1")
    specs = list(m.input_specs)
    specs[0] = dataclasses.replace(specs[0], a=0.0, b=1.0)
    monkeypatch.setattr(type(m), "input_specs", property(lambda s: specs))
    names = [t.inputs[0][0] for t in query_region(m).terms if isinstance(t, NumericTerm)]
    assert names == [1, 5, 6, 7]


def test_query_region_immutable_category():
    m = cfopt.Explainer(MODEL, space_of(fixed_category=True)).milp
    m.set_factual(FACTUAL)
    c = [t for t in query_region(m).terms if isinstance(t, CategoryTerm)][0]
    assert c.allowed.tolist() == [False, True, False]


def test_builds_per_query(monkeypatch):
    assert per_query(model("l1")) is False
    m = model("l1", per=True, monkeypatch=monkeypatch)
    assert per_query(m) is True
    m.set_target(1 - int(m.factual_class))
    links = []
    monkeypatch.setattr(m, "link_factual_splits", lambda: links.append(1))
    regions = []
    real = m.predictor_constr.build_region

    def build_region(region, deadline=math.inf):
        regions.append((region, deadline))
        return real(region, deadline)

    monkeypatch.setattr(m.predictor_constr, "build_region", build_region)
    small = build_query_region(m, 0.05, 1e12)
    assert regions[-1][0].radius == 0.05 and regions[-1][1] == 1e12 and links == [1]
    assert regions[-1][0].terms
    whole = build_query_region(m)
    assert regions[-1][0].radius == math.inf and regions[-1][1] == math.inf
    assert 0 < small < whole
    box = build_box_region(m)
    assert regions[-1][0].terms == [] and regions[-1][0].box == list(
        m.predictor_constr.input_bounds)
    assert box >= whole and links == [1, 1, 1]


def test_the_restriction_whole_and_per_query(monkeypatch):
    restriction = TreeRestriction()
    m = model("l1")
    m.set_target(1 - int(m.factual_class))
    heuristic = restriction.heuristic(m)
    assert heuristic is not None and m.is_target(m.classify(heuristic)[0])
    details: dict = {}
    restricted = restriction.restrict(m, heuristic, 0.05, details, math.inf, True)
    assert restricted.rebuilt is False and details == {}
    with restricted.context:
        assert details["pruned_leaves"] > 0
    assert restriction.whole(m, details, math.inf) is False
    per = model("l1", per=True, monkeypatch=monkeypatch)
    per.set_target(1 - int(per.factual_class))
    built = []
    monkeypatch.setattr(T, "build_query_region", lambda m, radius, deadline: built.append(
        (m is per or pytest.fail("model"), radius, deadline)[1:]) or 7)
    details = {}
    inside_out = restriction.restrict(per, heuristic, 0.05, details, 5.0, True)
    assert inside_out.rebuilt is False and built == [] and details == {}
    with inside_out.context:
        pass
    for verified, radius in ((False, 0.05), (True, math.inf)):
        got = restriction.restrict(per, heuristic, radius, details, 5.0, verified)
        assert got.rebuilt is True and built[-1] == (radius, 5.0)
        assert details["region_leaves"] == 7
        with got.context:
            pass
    details = {}
    assert restriction.whole(per, details, 3.0) is True
    assert built[-1] == (math.inf, 3.0) and details == {"region_leaves": 7}


def test_a_category_read_as_levels(monkeypatch):
    """A categorical input ``a * code + b`` (e.g. a pipeline's ordinal encoding of c):
    its value per level in the region; held at the factual's input when c stays."""
    m = model("l1")
    specs = list(m.input_specs)
    levels = InputSpec("levels", "c", a=0.5, b=1.0, codes=(("x", 0), ("y", 2), ("z", 1)))
    specs[2:5] = [levels, InputSpec("constant", None), InputSpec("constant", None)]
    monkeypatch.setattr(type(m), "input_specs", property(lambda s: specs))
    c = [t for t in query_region(m).terms if isinstance(t, CategoryTerm)][0]
    assert [k for k, _ in c.inputs] == [2]
    assert c.inputs[0][1].tolist() == [1.0, 2.0, 1.5]
    own = m.factual_inputs
    assert query_box(m, 0.1)[2] == (own[2], own[2])
    assert query_box(m)[2] == m.predictor_constr.input_bounds[2]
