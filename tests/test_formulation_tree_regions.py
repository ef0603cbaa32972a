"""Tree ensembles built per query (:mod:`cfopt.formulations.tree_regions`) on hand-built
trees: the index gives each split the cut :func:`make_cut` gives it (both rules, float32
or not, grid inputs, thresholds within rounding of a grid value); the search keeps
exactly the leaves within the query's actions and radius (L1, L0, L∞, its slack and its
deadline); the block built on them is the ensemble on every point it keeps and
infeasible on a point it drops."""

from __future__ import annotations

import math
import time

import numpy as np
import pyomo.environ as pyo
import pytest

from cfopt.formulations.tree_cuts import make_cut, switch_key
from cfopt.formulations.tree_regions import (
    REGION_COMPONENTS,
    CategoryTerm,
    NumericTerm,
    QueryRegion,
    RegionTooLarge,
    _distance,
    _narrow,
    _unique_rows,
    build_index,
    clear_region,
    leaf_depth_sum,
    search,
)
from cfopt.models.trees import Tree, TreeEnsemble

from .test_formulation_trees import HandTrees, embed

BOUNDS = [(0.0, 10.0), (0.0, 5.0), (-1.0, 1.0)]
GRIDS = [None, (0.0, 1.0), None]
ROUNDING = [1e-12, 0.0, 1e-12]


def tree(feature, threshold, left, right, value) -> Tree:
    return Tree(np.array(feature), np.array(threshold, dtype=float), np.array(left),
                np.array(right), np.array(value, dtype=float)[:, None])


#: tree 0: a < 4 ? leaf 1 : (c < 0 ? leaf 3 : leaf 4)
#: tree 1: b < 2.5 ? (a < 7 ? leaf 3 : leaf 4) : leaf 2
TREES = (tree([0, -1, 2, -1, -1], [4.0, 0, 0.0, 0, 0], [1, -1, 3, -1, -1], [2, -1, 4, -1, -1],
              [0, 1, 0, 2, 4]),
         tree([1, 0, -1, -1, -1], [2.5, 7.0, 0, 0, 0], [1, 3, -1, -1, -1], [2, 4, -1, -1, -1],
              [0, 0, 8, 16, 32]))
ENSEMBLE = TreeEnsemble(TREES, 3, np.array([0.5]), rule="lt", float32=False)
INDEX = build_index(ENSEMBLE, GRIDS, ROUNDING, None)
#: the factual a = 2, b = 1 and c at level 0 of (-1, 0.5, 1), level 2 not admitted
A = NumericTerm([(0, 1.0, 0.0)], 0.0, 10.0, 2.0, 1.0)
B = NumericTerm([(1, 1.0, 0.0)], 0.0, 5.0, 1.0, 1.0)
C = CategoryTerm([(2, np.array([-1.0, 0.5, 1.0]))], np.array([True, True, False]), 0, 3.0)


def kept(regions):
    return [sorted(r.leaves) for r in regions]


def test_unique_rows():
    first, group = _unique_rows(np.array([1, 0, 1, 0, 0, 2]), np.array([2.0, 3.0, 2.0, 3.0,
                                                                          1.0, 2.0]))
    assert sorted(first.tolist()) == [0, 1, 4, 5]
    assert group.tolist() == [2, 1, 2, 1, 0, 3]


def test_leaf_depth_sum():
    assert leaf_depth_sum(ENSEMBLE) == (1 + 2 + 2) + (2 + 2 + 1)
    assert leaf_depth_sum(TreeEnsemble(TREES[:1], 3, np.zeros(1))) == 5


def random_ensemble(rule, float32, seed=0):
    """Thresholds on a continuous input (some float32 values) and on grids, some on or
    within rounding of a grid value, some between, each node an internal one."""
    rng = np.random.default_rng(seed)
    trees = []
    candidates = {0: list(rng.uniform(0, 10, 8)) + [0.1, 1 / 3, 4.0, 0.5, 7.25],
                  1: [2.0, 2.5, 3.0 + 1e-13, 3.0 - 1e-13, 0.0, 5.0, 1.0 + 0.4, 4.0 + 2e-16],
                  2: [-0.25 + 1e-13, -0.5, 0.0, 0.75 - 1e-13, 0.25 + 1e-14, 0.3]}
    for _ in range(12):
        features = rng.integers(0, 3, 3)
        thresholds = [rng.choice(candidates[f]) for f in features]
        trees.append(tree([*features, -1, -1, -1, -1], [*thresholds, 0, 0, 0, 0],
                          [1, 3, 5, -1, -1, -1, -1], [2, 4, 6, -1, -1, -1, -1],
                          list(range(7))))
    return TreeEnsemble(tuple(trees), 3, np.zeros(1), rule=rule, float32=float32)


@pytest.mark.parametrize("rule, float32", [("le", True), ("lt", True), ("le", False),
                                           ("lt", False)])
@pytest.mark.parametrize("library", [False, True])
def test_the_index_cuts_are_make_cuts(rule, float32, library):
    grids = [None, (0.0, 1.0), (-0.25, 0.5)]
    rounding = [1e-12, 1e-12, 1e-12]
    ensemble = random_ensemble(rule, float32)
    lib = (lambda j, v: v) if library else None
    index = build_index(ensemble, grids, rounding, lib)
    assert index.rule == rule and index.float32 == float32
    seen = {}
    for t, node_cut in zip(ensemble.trees, index.node_cut):
        assert node_cut[3:].tolist() == [-1] * 4
        for n in range(3):
            j, theta = int(t.feature[n]), float(t.threshold[n])
            expected = make_cut(j, theta, rule, float32, grids[j], rounding[j],
                                None if lib is None else (lambda v, j=j: lib(j, v)))
            c = int(node_cut[n])
            got = index.cut(c)
            assert (got.input, got.left, got.right, got.sure_left, got.sure_right, got.rule,
                    got.float32) == (j, expected.left, expected.right, expected.sure_left,
                                     expected.sure_right, rule, float32), (j, theta)
            assert index.cut_switch[c] == switch_key(expected)
            assert seen.setdefault((j, switch_key(expected)), c) == c  # one cut per switch
    assert len(set(seen.values())) == len(seen) == len(index.cut_input)
    for j, values in index.split_values.items():
        on_j = index.cut_input == j
        assert values.tolist() == sorted(set(index.cut_sure_left[on_j]) |
                                         set(index.cut_sure_right[on_j]))
    assert sorted(index.split_values) == sorted(set(index.cut_input.tolist()))


def test_the_state_of_a_feature():
    assert _distance(A, (5.0, 6.0)) == 3.0 and _distance(A, (0.0, 1.5)) == 0.5
    assert _distance(A, (1.0, 3.0)) == 0.0
    assert _distance(A, (4.0, 4.0 - 5e-9)) == 2.0  # empty within the tolerance: a point
    assert _distance(A, (4.0, 4.0 - 2e-8)) == math.inf
    assert _distance(NumericTerm([], 0.0, 1e3, 0.0, 2.0), (4.0, 4.0 - 5e-7)) == 8.0
    assert _distance(NumericTerm([], 0.0, 1e3, 0.0, 2.0), (4.0, 4.0 - 2e-6)) == math.inf
    assert _distance(NumericTerm([], 5.0, 6.0, 5.0, 1.0), (4.0, 4.0 - 1.5e-9)) == math.inf
    assert _distance(C, np.array([True, False, False])) == 0.0
    assert _distance(C, np.array([False, True, False])) == 3.0
    assert _distance(C, np.array([False, False, False])) == math.inf
    scaled = NumericTerm([(4, 2.0, 1.0), (5, -1.0, 3.0)], 0.0, 10.0, 0.0, 1.0)
    assert _narrow(scaled, (0.0, 10.0), 4, 3.0, 7.0) == (1.0, 3.0)      # 2 x + 1 in [3, 7]
    assert _narrow(scaled, (0.0, 10.0), 5, -1.0, 1.0) == (2.0, 4.0)     # 3 - x in [-1, 1]
    assert _narrow(scaled, (2.5, 10.0), 4, 3.0, 7.0) == (2.5, 3.0)
    assert _narrow(scaled, (0.0, 10.0), 0, 3.0, 7.0) == (0.0, 10.0)
    state = np.array([True, True, True])
    assert _narrow(C, state, 2, -1.0 + 1e-10, 0.5 - 1e-10).tolist() == [True, True, False]
    assert _narrow(C, state, 2, -1.0 + 1e-8, 0.5).tolist() == [False, True, False]
    assert _narrow(C, state, 2, -1.0, 0.5 - 1e-8).tolist() == [True, False, False]
    assert _narrow(C, state, 1, -1.0, -1.0).tolist() == [True, True, True]


def test_the_search_keeps_the_leaves_within_the_radius():
    """Tree 0: leaf 1 (a <= 4) costs 0, leaf 3 (a >= 4, c < 0) 2, leaf 4 (c >= 0: not
    level 0) 2 + 3; tree 1: leaf 3 0, leaf 4 (a >= 7) 5, leaf 2 (b >= 3) 2."""
    everything = search(ENSEMBLE, INDEX, QueryRegion(list(BOUNDS), [A, B, C]))
    assert kept(everything) == [[1, 3, 4], [2, 3, 4]]
    assert [r.nodes for r in everything] == [[(2, INDEX.node_cut[0][2], True, True),
                                             (0, INDEX.node_cut[0][0], True, True)],
                                            [(1, INDEX.node_cut[1][1], True, True),
                                             (0, INDEX.node_cut[1][0], True, True)]]
    l1 = search(ENSEMBLE, INDEX, QueryRegion(list(BOUNDS), [A, B, C], l1=1.0, radius=2.0))
    assert kept(l1) == [[1, 3], [2, 3]]
    assert [r.nodes[0][2:] for r in l1] == [(True, False), (True, False)]
    l1 = search(ENSEMBLE, INDEX, QueryRegion(list(BOUNDS), [A, B, C], l1=1.0, radius=4.99))
    assert kept(l1) == [[1, 3], [2, 3]]
    assert kept(search(ENSEMBLE, INDEX, QueryRegion(list(BOUNDS), [A, B, C], l1=1.0,
                                                    radius=5.0))) == [[1, 3, 4], [2, 3, 4]]
    l0 = search(ENSEMBLE, INDEX, QueryRegion(list(BOUNDS), [A, B, C], l0=1.0, radius=1.5))
    assert kept(l0) == [[1, 3], [2, 3, 4]]
    linf = search(ENSEMBLE, INDEX, QueryRegion(list(BOUNDS), [A, B, C], linf=1.0, radius=2.5))
    assert kept(linf) == [[1, 3], [2, 3]]
    linf = search(ENSEMBLE, INDEX, QueryRegion(list(BOUNDS), [A, B, C], linf=1.0, radius=3.0))
    assert kept(linf) == [[1, 3, 4], [2, 3]]
    mixed = QueryRegion(list(BOUNDS), [A, B, C], l1=0.5, l0=1.0, linf=0.25, radius=3.75)
    assert kept(search(ENSEMBLE, INDEX, mixed)) == [[1, 3], [2, 3]]  # leaf 2: 1 + 1 + 0.5
    mixed.radius = 2.49
    assert kept(search(ENSEMBLE, INDEX, mixed)) == [[1], [3]]


def test_the_radius_has_a_relative_slack():
    """Leaf 2 of tree 1 costs w_b x 2: kept up to 1e-9 (1 + r) above r = 2."""
    for excess, leaves in ((1e-9, [2, 3]), (4e-9, [3])):
        b = NumericTerm([(1, 1.0, 0.0)], 0.0, 5.0, 1.0, 1.0 + excess / 2)
        region = QueryRegion(list(BOUNDS), [A, b, C], l1=1.0, radius=2.0)
        assert kept(search(ENSEMBLE, INDEX, region))[1] == leaves, excess


def test_actions_and_the_box_prune():
    """a immutable (2): tree 0 keeps leaf 1, tree 1 leaves 3 and 2; c in [-1, -0.5] with
    no term: the box drops leaf 4 of tree 0; a query whose factual is outside its own
    admissible codes starts beyond the radius: no leaf at all."""
    fixed = NumericTerm([(0, 1.0, 0.0)], 2.0, 2.0, 2.0, 1.0)
    assert kept(search(ENSEMBLE, INDEX, QueryRegion(list(BOUNDS), [fixed, B, C]))) == [
        [1], [2, 3]]
    box = [BOUNDS[0], BOUNDS[1], (-1.0, -0.5)]
    assert kept(search(ENSEMBLE, INDEX, QueryRegion(box, [A, B]))) == [[1, 3], [2, 3, 4]]
    box = [BOUNDS[0], BOUNDS[1], (-1.0, -5e-10)]  # within the box's tolerance of c >= 0
    assert kept(search(ENSEMBLE, INDEX, QueryRegion(box, [A, B]))) == [[1, 3, 4], [2, 3, 4]]
    box = [BOUNDS[0], BOUNDS[1], (-1.0, -2e-9)]
    assert kept(search(ENSEMBLE, INDEX, QueryRegion(box, [A, B]))) == [[1, 3], [2, 3, 4]]
    up = NumericTerm([(0, 1.0, 0.0)], 3.0, 10.0, 2.0, 1.0)
    beyond = QueryRegion(list(BOUNDS), [up, B, C], l1=1.0, radius=0.5)
    assert kept(search(ENSEMBLE, INDEX, beyond)) == [[], []]
    assert [r.nodes for r in search(ENSEMBLE, INDEX, beyond)] == [[], []]
    beyond.radius = 1.0
    assert kept(search(ENSEMBLE, INDEX, beyond)) == [[1], [3]]
    with pytest.raises(ValueError, match="^the query admits no value of some feature$"):
        search(ENSEMBLE, INDEX, QueryRegion(list(BOUNDS), [NumericTerm(
            [(0, 1.0, 0.0)], 3.0, 2.0, 2.0, 1.0)]))


def test_the_deadline():
    region = QueryRegion(list(BOUNDS), [A, B, C])
    assert kept(search(ENSEMBLE, INDEX, region, deadline=time.perf_counter() + 60)) == [
        [1, 3, 4], [2, 3, 4]]
    with pytest.raises(RegionTooLarge):  # 6 leaves to build, ~6 ms
        search(ENSEMBLE, INDEX, region, deadline=time.perf_counter() + 0.002)


def test_the_block_is_the_ensemble_on_the_leaves_it_keeps():
    """Per-query block on the leaves within radius 2 (l1): exact on points that reach
    them, infeasible on points that reach a dropped leaf; an empty tree makes the block
    infeasible; clearing removes every region component."""
    pred = embed(HandTrees(ENSEMBLE), per_query=True)
    assert pred.build_region(QueryRegion(list(BOUNDS), [A, B, C], l1=1.0, radius=2.0)) == 4
    b = pred.block
    assert set(b.LEAVES) == {(0, 1), (0, 3), (1, 2), (1, 3)}
    assert all(b.leaf[k].domain is pyo.Binary for k in b.LEAVES)
    assert sorted(b.cuts) == [(0, 0), (0, 1), (1, 0), (2, 0)]
    assert [b.cuts[0, 0].theta, b.cuts[0, 1].theta] == [4.0, 7.0]
    near = np.array([[2.0, 1.0, -1.0], [5.0, 1.0, -0.5], [5.0, 3.0, -0.5], [1.0, 4.0, 0.5],
                     [3.0, 0.0, 1.0]])
    assert pred.get_error(near) <= 1e-9
    for far in ([5.0, 1.0, 0.5], [8.0, 1.0, -1.0]):  # leaf 4 of tree 0; leaf 4 of tree 1
        assert pred.get_error(np.array([far])) == math.inf
    pred.build_region(QueryRegion(list(BOUNDS), [A, B, C]))
    assert len(b.LEAVES) == 6 and len(b.FLOWS) == 4
    every = np.array([[2.0, 1.0, -1.0], [2.0, 1.0, 0.5], [5.0, 1.0, 0.5], [8.0, 1.0, -1.0],
                      [2.0, 4.0, -1.0], [9.0, 4.0, 0.5]])  # each leaf of both trees
    assert pred.get_error(every) <= 1e-9
    # a at 8: leaf 1 of tree 0 (a <= 4) out of reach, its root keeps its right child only
    far = NumericTerm([(0, 1.0, 0.0)], 0.0, 10.0, 8.0, 1.0)
    assert pred.build_region(QueryRegion(list(BOUNDS), [far, B, C], l1=1.0, radius=2.0)) == 4
    assert set(b.LEAVES) == {(0, 3), (1, 2), (1, 3), (1, 4)}
    assert pred.get_error(np.array([[8.0, 1.0, -1.0], [6.0, 1.0, -0.5], [9.0, 3.0, -1.0]])
                          ) <= 1e-9
    assert pred.get_error(np.array([[2.0, 1.0, -1.0]])) == math.inf
    up = NumericTerm([(0, 1.0, 0.0)], 3.0, 10.0, 2.0, 1.0)
    assert pred.build_region(QueryRegion(list(BOUNDS), [up, B, C], l1=1.0, radius=0.5)) == 0
    assert pred.get_error(np.array([[5.0, 1.0, -0.5]])) == math.inf
    clear_region(b)
    assert all(b.component(name) is None for name in REGION_COMPONENTS)
    assert b.cuts == {} and b.factual_left == {}
    threshold = embed(HandTrees(ENSEMBLE), per_query=True, formulation="threshold")
    threshold.build_region(QueryRegion(list(BOUNDS), [A, B, C], l1=1.0, radius=2.0))
    assert all(threshold.block.leaf[k].domain is pyo.UnitInterval
               for k in threshold.block.LEAVES)
    assert threshold.get_error(near[:2]) <= 1e-9


def test_the_search_without_terms_and_with_small_distances():
    """No feature terms: the box alone prunes (its tolerance: 1e-9 of its width), L∞ of
    no distance is 0; L0 counts a feature moved by less than 1."""
    free = search(ENSEMBLE, INDEX, QueryRegion(list(BOUNDS), linf=1.0, radius=0.5))
    assert kept(free) == [[1, 3, 4], [2, 3, 4]]
    for hi, leaves in ((4.0 - 5e-9, [1, 3, 4]), (4.0 - 2e-8, [1])):
        region = QueryRegion([(-6.0, hi), BOUNDS[1], BOUNDS[2]])
        assert kept(search(ENSEMBLE, INDEX, region)) == [leaves, [2, 3]], hi
    left_out = search(ENSEMBLE, INDEX, QueryRegion([BOUNDS[0], BOUNDS[1], (0.5, 1.0)]))
    assert kept(left_out)[0] == [1, 4]
    assert left_out[0].nodes[0] == (2, INDEX.node_cut[0][2], False, True)
    near_b = NumericTerm([(1, 1.0, 0.0)], 0.0, 5.0, 1.0, 0.25)  # b to 3 costs 0.5
    region = QueryRegion(list(BOUNDS), [A, near_b, C], l0=1.0, radius=0.5)
    assert kept(search(ENSEMBLE, INDEX, region)) == [[1], [3]]
    far = NumericTerm([(0, 1.0, 0.0)], 0.0, 10.0, 8.0, 1.0)  # a <= 4 out of reach
    region = QueryRegion(list(BOUNDS), [far, B, C], l1=1.0, radius=2.0)
    out = search(ENSEMBLE, INDEX, region)
    assert kept(out) == [[3], [2, 3, 4]]
    assert out[0].nodes == [(2, INDEX.node_cut[0][2], True, False),
                            (0, INDEX.node_cut[0][0], False, True)]


def test_nested_splits_on_one_input():
    """c < 0 ? (a < 4 ? 1 : 2) : (a < 7 ? 4 : 8): the box of a is narrowed and restored
    on each path."""
    nested = tree([2, 0, 0, -1, -1, -1, -1], [0.0, 4.0, 7.0, 0, 0, 0, 0],
                  [1, 3, 5, -1, -1, -1, -1], [2, 4, 6, -1, -1, -1, -1], [0, 0, 0, 1, 2, 4, 8])
    ensemble = TreeEnsemble((nested, nested), 3, np.zeros(1), rule="lt", float32=False)
    index = build_index(ensemble, GRIDS, ROUNDING, None)
    assert kept(search(ensemble, index, QueryRegion(list(BOUNDS)))) == [[3, 4, 5, 6]] * 2
    region = QueryRegion([(5.0, 10.0), BOUNDS[1], BOUNDS[2]])
    assert kept(search(ensemble, index, region)) == [[4, 5, 6]] * 2
