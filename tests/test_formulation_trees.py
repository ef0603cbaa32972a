"""The tree ensemble block (:mod:`cfopt.formulations.predictors.trees`) on small
ensembles over three inputs (continuous, an integer grid, continuous): the block is the
library's ensemble at every point (thresholds included), in both formulations and per
query; it keeps exactly the leaves some point of the input box reaches, with their
boxes and the outputs' bounds over them; decoding puts every point of the decoded
region on the leaves the solver chose; the factual's cuts within the solvers'
tolerances are settled by the library's side and by whether the input may move."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyomo.environ as pyo
import pytest
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

import cfopt
from cfopt.formulations.predictors import trees as tree_block
from cfopt.formulations.predictors.trees import TreePredictorConstr
from cfopt.formulations.tree_regions import QueryRegion, RegionTooLarge
from cfopt.models import ModelAdapter
from cfopt.models.trees import Tree, TreeEnsemble
from cfopt.solvers import SolverSettings, make_solver

#: inputs: a in [0, 10] (continuous), b in {0..5} (an integer grid), c in [-1, 1]
BOUNDS = [(0.0, 10.0), (0.0, 5.0), (-1.0, 1.0)]
GRIDS = [None, (0.0, 1.0), None]


def data(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    Z = np.column_stack([rng.uniform(0, 10, n), rng.integers(0, 6, n), rng.uniform(-1, 1, n)])
    y = ((Z[:, 0] - 2 * Z[:, 1] + 3 * Z[:, 2] + rng.normal(0, 1, n)) > 0).astype(int)
    return Z, y


MODELS = {
    "forest": lambda: RandomForestClassifier(4, max_depth=3, random_state=0).fit(*data()),
    "boosting": lambda: GradientBoostingClassifier(n_estimators=4, max_depth=2,
                                                   random_state=0).fit(*data()),
}


def embed(model, bounds=BOUNDS, **options) -> TreePredictorConstr:
    m = pyo.ConcreteModel()
    pred = cfopt.formulations.add_predictor(m, model, input_bounds=bounds, input_grids=GRIDS,
                                            **options)
    assert isinstance(pred, TreePredictorConstr)
    return pred


def cells(ensemble: TreeEnsemble, bounds) -> np.ndarray:
    """A point in every cell of the thresholds' grid within ``bounds``: per continuous
    input its bounds and the midpoints between its sorted thresholds (and the bounds),
    per grid input its grid values; every leaf reachable in the box is reached by one."""
    axes = []
    for j, (lo, hi) in enumerate(bounds):
        if GRIDS[j] is not None:
            axes.append(np.arange(math.ceil(lo), math.floor(hi) + 1, dtype=float))
            continue
        cuts = sorted({float(t.threshold[n]) for t in ensemble.trees
                       for n in np.flatnonzero(t.feature == j) if lo < t.threshold[n] < hi})
        ends = [lo, *cuts, hi]
        axes.append(np.array([lo, hi, *[(a + b) / 2 for a, b in zip(ends, ends[1:])]]))
    return np.array(list(itertools.product(*axes)))


def minimise(pred: TreePredictorConstr, expr) -> None:
    m = pred.block.model()
    m.test_objective = pyo.Objective(expr=expr)
    outcome = make_solver("highs").solve(m, SolverSettings(mip_gap=0.0))
    assert outcome.status is cfopt.Status.OPTIMAL
    m.del_component(m.test_objective)


# ------------------------------------------------------------------- the block
@pytest.mark.parametrize("family", list(MODELS))
@pytest.mark.parametrize("formulation", ["leaf", "threshold"])
def test_the_block_is_the_ensemble_at_every_point(family, formulation):
    """Inputs fixed at a point of every cell of the thresholds' grid, the block's outputs
    are the library's; the leaves are binary or continuous by formulation. (Points at
    a float32 threshold lie within the solvers' tolerances of both sides: decoding
    settles them, :func:`test_the_decoded_region_reaches_the_chosen_leaves`.)"""
    model = MODELS[family]()
    pred = embed(model, formulation=formulation)
    ensemble = pred.adapter.structure
    assert pred.block.leaf[next(iter(pred.block.LEAVES))].domain is (
        pyo.Binary if formulation == "leaf" else pyo.UnitInterval)
    assert pred.get_error(cells(ensemble, BOUNDS)[::3]) <= 1e-9


def test_the_block_keeps_exactly_the_reachable_leaves_with_their_boxes():
    """Over a sub-box (b from 2: a threshold 2.5 puts the box's own lower end left), the
    leaves kept are those some point of the box reaches, each point lies in its leaf's
    box, and the outputs' bounds are the ensemble's extremes over the box."""
    model = MODELS["forest"]()
    bounds = [(0.0, 10.0), (2.0, 5.0), (-1.0, 0.2)]
    pred = embed(model, bounds)
    ensemble = pred.adapter.structure
    points = cells(ensemble, bounds)
    reached = {(t, int(leaf)) for t, tree in enumerate(ensemble.trees)
               for leaf in tree.apply(points.astype(np.float32).astype(float), "le")}
    assert set(pred.block.LEAVES) == reached
    for t, tree in enumerate(ensemble.trees):
        for z, leaf in zip(points, tree.apply(points, "le")):
            for j, (lo, hi) in pred.block.leaf_boxes[t, int(leaf)].items():
                assert lo <= z[j] <= hi
    outputs = ensemble.outputs(points)
    low = ensemble.init + sum(tree.value[sorted({leaf for s, leaf in reached if s == t})]
                              .min(axis=0) for t, tree in enumerate(ensemble.trees))
    assert [b for b in pred.output_bounds()] == [
        (float(lo), float(hi)) for lo, hi in zip(low, ensemble.init + sum(
            tree.value[sorted({leaf for s, leaf in reached if s == t})].max(axis=0)
            for t, tree in enumerate(ensemble.trees)))]
    assert (outputs.min(axis=0) >= low - 1e-12).all()
    assert pred.get_error(points[::5]) <= 1e-9


def test_cuts_and_split_values():
    """One cut per distinct switching point, numbered along each input; the split values
    are their sure sides, sorted; a grid input's cut sides are grid values."""
    pred = embed(MODELS["boosting"]())
    cuts = pred.cuts()
    ensemble = pred.adapter.structure
    thresholds = {(int(t.feature[n]), float(t.threshold[n])) for t in ensemble.trees
                  for n in np.flatnonzero(t.feature >= 0)}
    assert len(cuts) == len({(j, round(th, 9)) for j, th in thresholds})
    for j in range(3):
        mine = sorted((q, cut) for (i, q), cut in cuts.items() if i == j)
        assert [q for q, _ in mine] == list(range(len(mine)))
        lefts = [cut.sure_left for _, cut in mine]
        assert lefts == sorted(lefts)
        values = sorted({v for _, cut in mine for v in (cut.sure_left, cut.sure_right)})
        np.testing.assert_array_equal(pred.split_values()[j], values)
        if GRIDS[j] is not None:
            assert all(cut.left == int(cut.left) and cut.right == cut.left + 1
                       for _, cut in mine)
    assert set(pred.block.left_of) == set(cuts)


def test_an_unknown_formulation_is_refused():
    with pytest.raises(ValueError, match=r"unknown tree formulation 'flow'; use one of "
                                         r"\('leaf', 'threshold'\)"):
        embed(MODELS["forest"](), formulation="flow")


@pytest.mark.parametrize("family", list(MODELS))
def test_per_query_blocks_build_their_leaves_per_region(monkeypatch, family):
    """per_query=True: inputs in the unit box, outputs bounded over every leaf (per
    output) and no cut until a region is built; the region of the whole box is the full
    block, its split values too, and decodes before any factual. per_query=None builds
    per query only past PER_QUERY_TERMS."""
    model = MODELS[family]()
    full = embed(model)
    pred = embed(model, per_query=True)
    assert pred.per_query and not full.per_query and pred.cuts() == {}
    ensemble = pred.adapter.structure
    every = [(float(ensemble.init[c] + sum(t.value[t.leaves, c].min() for t in ensemble.trees)),
              float(ensemble.init[c] + sum(t.value[t.leaves, c].max() for t in ensemble.trees)))
             for c in range(ensemble.n_outputs)]
    for got, expected in zip(pred.output_bounds(), every):
        assert got == pytest.approx(expected, abs=1e-12)
    assert [pred.block.inputs[i].bounds for i in range(3)] == [(0.0, 1.0)] * 3
    kept = pred.build_region(QueryRegion(list(BOUNDS)))
    assert kept == len(full.block.LEAVES)
    assert len(pred.cuts()) == len(full.cuts())
    for j, values in full.split_values().items():
        np.testing.assert_array_equal(pred.split_values()[j], values)
    assert pred.get_error(cells(ensemble, BOUNDS)[::9]) <= 1e-9
    minimise(pred, pred.outputs[0])
    assert len(pred.input_region()) == 3
    assert not embed(model, per_query=None).per_query
    monkeypatch.setattr(tree_block, "PER_QUERY_TERMS", 0)
    assert embed(model, per_query=None).per_query


# ------------------------------------------------------------------- decoding
@pytest.mark.parametrize("sense", [1.0, -1.0])
def test_the_decoded_region_reaches_the_chosen_leaves(sense):
    """The solver's least (greatest) output: every point of the decoded region (its
    corners and centre) gets that output from the library."""
    pred = embed(MODELS["forest"]())
    minimise(pred, sense * pred.outputs[1])
    value = pyo.value(pred.outputs[1])
    region = pred.input_region()
    assert all(lo <= hi for lo, hi in region)
    corners = np.array(list(itertools.product(*region)))
    points = np.vstack([corners, np.mean(region, axis=1)])
    np.testing.assert_allclose(pred.adapter.structure.outputs(points)[:, 1], value,
                               atol=1e-9)


# ------------------------------------------------------- a hand-built ensemble
class HandTrees(ModelAdapter):
    """A hand-built ensemble (rule ``"lt"``, float64 comparisons) as a regressor."""

    def __init__(self, ensemble: TreeEnsemble) -> None:
        self.structure = self.model = ensemble
        self.decision = "regression"
        self.classes = ()

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return self.structure.outputs(Z)[:, 0]

    def output(self, Z: np.ndarray) -> np.ndarray:
        return self.structure.outputs(Z)


def hand_trees() -> HandTrees:
    """Tree 0 splits a at 4 then, left, b at 2 (b < 2 left); tree 1 splits c at 0; tree 2
    splits a at 6 then, right, a at 8."""
    first = Tree(feature=np.array([0, 1, -1, -1, -1]), threshold=np.array([4.0, 2.0, 0, 0, 0]),
                 left=np.array([1, 2, -1, -1, -1]), right=np.array([4, 3, -1, -1, -1]),
                 value=np.array([[0.0], [0.0], [1.0], [2.0], [5.0]]))
    second = Tree(feature=np.array([2, -1, -1]), threshold=np.array([0.0, 0, 0]),
                  left=np.array([1, -1, -1]), right=np.array([2, -1, -1]),
                  value=np.array([[0.0], [-1.0], [3.0]]))
    third = Tree(feature=np.array([0, -1, 0, -1, -1]), threshold=np.array([6.0, 0, 8.0, 0, 0]),
                 left=np.array([1, -1, 3, -1, -1]), right=np.array([2, -1, 4, -1, -1]),
                 value=np.array([[0.0], [0.0], [0.0], [0.25], [0.5]]))
    return HandTrees(TreeEnsemble((first, second, third), 3, np.array([0.5]), rule="lt",
                                  float32=False))


def test_a_strict_rule_on_a_grid_and_the_box_ends():
    """Rule "lt" on the grid input b (b < 2: b = 1 left, 2 right) and continuous inputs
    compared in float64: exact at the thresholds themselves; bounds with b from 2 drop
    the leaf b < 2, a up to 4 the right of a's split (4 goes right: kept)."""
    adapter = hand_trees()
    pred = embed(adapter)
    points = np.array([[4.0, 2.0, 0.0], [3.999, 1.0, -0.001], [4.0, 1.0, 0.0],
                       [0.0, 5.0, 1.0], [10.0, 0.0, -1.0], [2.0, 2.0, 0.5]])
    assert pred.get_error(points) <= 1e-12
    cut = next(c for c in pred.cuts().values() if c.input == 1)
    assert (cut.left, cut.right) == (1.0, 2.0)
    sub = embed(adapter, [(0.0, 4.0), (2.0, 5.0), (-1.0, 1.0)])
    assert set(sub.block.LEAVES) == {(0, 3), (0, 4), (1, 1), (1, 2), (2, 1)}
    assert sub.output_bounds() == [(0.5 + 2.0 - 1.0, 0.5 + 5.0 + 3.0)]
    left = embed(adapter, [(0.0, 3.0), (1.0, 1.0), (-1.0, 1.0)])  # b = 1: left, the end
    assert set(left.block.LEAVES) == {(0, 2), (1, 1), (1, 2), (2, 1)}
    assert left.output_bounds() == [(0.5, 4.5)]
    assert {c.input for c in left.cuts().values()} == {2}  # only c's split has two sides
    right = embed(adapter, [(0.0, 3.0), (2.0, 2.0), (-1.0, 1.0)])  # b = 2: right, the end
    assert set(right.block.LEAVES) == {(0, 3), (1, 1), (1, 2), (2, 1)}
    assert right.output_bounds() == [(1.5, 5.5)]


def test_a_leafs_box_is_its_paths_intersection():
    """Tree 2 splits a at 6 and, right of it, at 8: its middle leaf's box on a is
    [6, 8] (within the cuts' rounding), not [0, 8]."""
    pred = embed(hand_trees())
    lo, hi = pred.block.leaf_boxes[2, 3][0]
    assert lo == pytest.approx(6.0, abs=1e-12) and hi == pytest.approx(8.0, abs=1e-12)
    assert pred.block.leaf_boxes[2, 1] == {0: (0.0, pytest.approx(6.0, abs=1e-12))}


def test_get_error_is_exact_at_a_cuts_sure_sides():
    """At the ends of a continuous cut's overlap (its sure sides), where both MILP sides
    hold the value, get_error fixes the cut to the library's side (a regression: the
    ends were left free and the solver took the other side, an error of 3)."""
    pred = embed(hand_trees())
    cut = next(c for c in pred.cuts().values() if c.input == 0 and c.theta == 4.0)
    for value in (cut.sure_left, cut.sure_right):
        assert pred.get_error(np.array([[value, 2.5, 0.5]])) == 0.0


@pytest.mark.parametrize("per_query", [False, True])
def test_a_grid_value_at_a_threshold_takes_the_librarys_own_side(per_query):
    """b's threshold 2 is a grid value: the library's own computation of b = 2
    (``library_input``: a hair above 2, so right of "lt" 2 and of "le" 2) puts it right
    of a "le" split; without it the threshold's own side (left) is taken."""
    tree = Tree(feature=np.array([1, -1, -1]), threshold=np.array([2.0, 0, 0]),
                left=np.array([1, -1, -1]), right=np.array([2, -1, -1]),
                value=np.array([[0.0], [1.0], [2.0]]))
    adapter = HandTrees(TreeEnsemble((tree,), 3, np.array([0.0]), rule="le", float32=False))
    for library_input, sides in ((None, (2.0, 3.0)), (lambda j, v: v + 1e-12, (1.0, 2.0))):
        pred = embed(adapter, per_query=per_query, library_input=library_input)
        if per_query:
            pred.build_region(QueryRegion(list(BOUNDS)))
        (cut,) = pred.cuts().values()
        assert (cut.left, cut.right) == sides


def ambiguous_cut(pred: TreePredictorConstr):
    """The cut at a = 4 of the hand-built ensemble (rule "lt": 4 goes right) and a
    factual just below it, within its rounding (the library: left)."""
    key, cut = next((k, c) for k, c in pred.cuts().items() if c.input == 0)
    factual = np.array([4.0 - 1e-14, 2.0, 0.5])
    assert cut.sure_left < factual[0] < cut.sure_right and cut.goes_left(factual[0])
    return key, cut, factual


@pytest.mark.parametrize("movable", [True, False])
def test_a_factual_at_a_threshold_takes_the_librarys_side_or_moves(movable):
    """The factual's a at a threshold: the cut is ambiguous (both MILP sides hold it) and
    the library sends it left; an input that may increase returns the cut for the caller
    to count, one that may not has the cut fixed left, until the next factual."""
    pred = embed(hand_trees())
    key, cut, factual = ambiguous_cut(pred)
    var = pred.block.left_of[key]
    links = pred.set_factual_inputs(factual, factual, [(movable, True), (True, True),
                                                       (True, True)])
    assert pred.block.factual_left == {key: True}
    if movable:
        assert links == [(0, True, var)] and var.bounds == (0, 1)
    else:
        assert links == [] and var.bounds == (1, 1)
    away = np.array([4.5, 2.0, 0.5])
    assert pred.set_factual_inputs(away, away, [(False, False)] * 3) == []
    assert var.bounds == (0, 1) and pred.block.factual_left == {}


def test_a_factual_just_right_of_a_threshold_takes_the_right_side():
    """A value within one tolerance band (1e-4 x the width 10) right of the threshold:
    the library sends it right; a value that may not decrease has the cut fixed right,
    one that may is returned; two bands away the cut is not ambiguous."""
    pred = embed(hand_trees())
    key, cut, _ = ambiguous_cut(pred)
    factual = np.array([4.0 + 9e-4, 2.0, 0.5])
    assert not cut.goes_left(factual[0])
    assert pred.set_factual_inputs(factual, factual, [(True, False), (True, True),
                                                      (True, True)]) == []
    assert pred.block.factual_left == {key: False}
    assert pred.block.left_of[key].bounds == (0, 0)
    links = pred.set_factual_inputs(factual, factual, [(False, True)] * 3)
    assert links == [(0, False, pred.block.left_of[key])]
    farther = np.array([4.0 + 2e-3, 2.0, 0.5])
    pred.set_factual_inputs(farther, farther, [(True, False), (True, True), (True, True)])
    assert pred.block.factual_left == {}


def test_the_decoded_region_keeps_the_factual_on_its_side():
    """The factual just below a threshold (library: left) with the solver choosing left:
    the region's upper end on a is the factual's value, above the cut's sure left side;
    choosing right, the region starts at the sure right side."""
    pred = embed(hand_trees())
    key, cut, factual = ambiguous_cut(pred)
    pred.set_factual_inputs(factual, factual, [(True, True)] * 3)
    pred.block.left_of[key].fix(1)
    minimise(pred, pred.outputs[0])
    region = pred.input_region(factual)
    assert region[0][1] == factual[0] > cut.sure_left
    pred.block.left_of[key].fix(0)
    minimise(pred, pred.outputs[0])
    assert pred.input_region(factual)[0][0] == cut.sure_right
    right = np.array([4.0, 2.0, 0.5])  # the library: right, below the sure right side
    pred.set_factual_inputs(right, right, [(True, True)] * 3)
    assert pred.input_region(right)[0][0] == 4.0 < cut.sure_right
    pred.block.left_of[key].fix(1)
    minimise(pred, pred.outputs[0])
    assert pred.input_region(right)[0][1] == cut.sure_left


def test_fix_choices_fixes_only_the_cuts_a_value_leaves_ambiguous():
    """Values within the rounding of a = 4: fixed to the library's side (4: right);
    values clear of every cut: nothing fixed."""
    pred = embed(hand_trees())
    key, cut, factual = ambiguous_cut(pred)
    for value, side in ((factual[0], 1), (4.0, 0)):
        fixed = pred.fix_choices(pred.block, np.array([value, 2.5, 0.5]))
        assert [v.index() for v in fixed] == [key]
        assert pred.block.left_of[key].value == side and pred.block.left_of[key].fixed
        fixed[0].unfix()
    assert pred.fix_choices(pred.block, np.array([4.5, 2.5, 0.5])) == []


@pytest.mark.parametrize("formulation", ["leaf", "threshold"])
def test_a_per_query_block_builds_the_box_at_its_first_factual_or_defers(formulation):
    """Not deferred: the first factual builds the region of the whole box, once (later
    factuals keep its variables). Deferred: each new factual clears the leaves for the
    caller to build that factual's region, which the same factual then keeps; a build
    past its deadline leaves no leaves, and the next factual builds the box."""
    pred = embed(MODELS["forest"](), per_query=True, formulation=formulation)
    assert pred.deferred is False and pred.cuts() == {}
    z = np.array([5.0, 2.0, 0.1])
    pred.set_factual_inputs(z, z, [(True, True)] * 3)
    assert pred.cuts() and pred.block.leaf[next(iter(pred.block.LEAVES))].domain is (
        pyo.Binary if formulation == "leaf" else pyo.UnitInterval)
    var = next(iter(pred.block.left_of.values()))
    other = np.array([1.0, 3.0, -0.5])
    pred.set_factual_inputs(other, other, [(True, True)] * 3)
    assert next(iter(pred.block.left_of.values())) is var
    pred.deferred = True
    assert pred.set_factual_inputs(z, z, [(True, True)] * 3) == []
    assert pred.cuts() == {} and pred.block.component("leaf") is None
    pred.build_region(QueryRegion(list(BOUNDS)))
    var = next(iter(pred.block.left_of.values()))
    key, cut = next((k, c) for k, c in pred.cuts().items() if c.input == 0)
    at = np.array([cut.theta, 2.0, 0.1])
    pred.set_factual_inputs(at, at, [(False, False)] * 3)  # a new factual: cleared
    assert pred.cuts() == {}
    pred.build_region(QueryRegion(list(BOUNDS)))
    pred.set_factual_inputs(at, at, [(False, False)] * 3)  # the same: kept, settled
    assert pred.cuts() and pred.block.factual_left.get(key) is True
    assert pred.block.left_of[key].bounds == (1, 1)
    with pytest.raises(RegionTooLarge):
        pred.build_region(QueryRegion(list(BOUNDS)), deadline=0.0)
    assert pred.block.component("leaf") is None
    pred.deferred = False
    pred.set_factual_inputs(z, z, [(True, True)] * 3)
    assert pred.cuts() and pred.block.component("leaf") is not None


def test_the_band_is_the_inputs_width_and_every_cut_is_scanned():
    """a in [2, 10]: the band is 1e-4 x 8; a factual clear of a's cut and on c's
    threshold: only c's cut is ambiguous; a factual far left of a's cut is not."""
    pred = embed(hand_trees(), [(2.0, 10.0), (0.0, 5.0), (-1.0, 1.0)])
    key = next(k for k, c in pred.cuts().items() if c.input == 0 and c.theta == 4.0)
    for offset, ambiguous in ((7e-4, True), (9e-4, False)):
        z = np.array([4.0 + offset, 2.5, 0.5])
        pred.set_factual_inputs(z, z, [(True, True)] * 3)
        assert (key in pred.block.factual_left) is ambiguous
    z = np.array([3.0, 2.5, 0.5])
    pred.set_factual_inputs(z, z, [(True, True)] * 3)
    assert pred.block.factual_left == {}
    on_c = np.array([5.0, 2.5, 0.0])  # c = 0: right ("lt")
    pred.set_factual_inputs(on_c, on_c, [(True, True)] * 3)
    assert [pred.cuts()[k].input for k in pred.block.factual_left] == [2]


def test_a_grid_cut_one_band_away_is_not_ambiguous():
    """A grid input of width 10 000 (band 1): b = 2 right of "lt" 2, its MILP left side
    (1) exactly one band away: not ambiguous."""
    adapter = hand_trees()
    bounds = [(0.0, 10.0), (0.0, 10000.0), (-1.0, 1.0)]
    pred = embed(adapter, bounds)
    z = np.array([3.0, 2.0, 0.5])
    pred.set_factual_inputs(z, z, [(True, True)] * 3)
    assert pred.block.factual_left == {}


def test_a_per_query_block_bounds_each_output_and_keeps_a_region_built_first():
    """Two outputs of different ranges: each output's bounds are over every leaf of its
    own; a region built before any factual is the box's, which the first factual keeps
    (the same variables)."""
    tree = Tree(feature=np.array([0, -1, -1]), threshold=np.array([4.0, 0, 0]),
                left=np.array([1, -1, -1]), right=np.array([2, -1, -1]),
                value=np.array([[0.0, 0.0], [1.0, -20.0], [3.0, -10.0]]))
    adapter = HandTrees(TreeEnsemble((tree, tree), 3, np.array([0.5, 1.0]), rule="lt",
                                     float32=False))
    pred = embed(adapter, per_query=True)
    assert pred.output_bounds() == [(2.5, 6.5), (-39.0, -19.0)]
    pred.build_region(QueryRegion(list(BOUNDS)))
    var = next(iter(pred.block.left_of.values()))
    z = np.array([5.0, 2.0, 0.1])
    pred.set_factual_inputs(z, z, [(True, True)] * 3)
    assert next(iter(pred.block.left_of.values())) is var


@pytest.mark.parametrize("per_query", [False, True])
def test_two_splits_closer_than_the_rounding_keep_the_values_between(per_query):
    """LightGBM's zero band: one tree splits c at -1e-35, another at +1e-35 (``x <= t``
    goes left), and only c in (-1e-35, 1e-35] (c = 0) reaches both middle leaves, of
    output 2. The two cuts' sure sides are equal in float64 (the rounding dwarfs 1e-35);
    keyed by them, the two were one binary and c = 0 was out of the block (differential
    seed 142978: a false 'infeasible' on every solver). Keyed by the switching point,
    the block is the ensemble at c = 0 and beside it, and the index has both cuts."""
    from cfopt.formulations.tree_regions import build_index
    from cfopt.models.boosters import LIGHTGBM_ZERO

    def tree(theta, left, right):
        return Tree(feature=np.array([2, -1, -1]), threshold=np.array([theta, 0.0, 0.0]),
                    left=np.array([1, -1, -1]), right=np.array([2, -1, -1]),
                    value=np.array([[0.0], [left], [right]]))

    ensemble = TreeEnsemble((tree(-LIGHTGBM_ZERO, 0.0, 1.0), tree(LIGHTGBM_ZERO, 1.0, 0.0)),
                            3, np.array([0.0]), rule="le", float32=False)
    pred = embed(HandTrees(ensemble), per_query=per_query)
    if per_query:
        pred.build_region(QueryRegion(list(BOUNDS)))
    points = np.array([[5.0, 2.0, 0.0], [5.0, 2.0, -0.5], [5.0, 2.0, 0.5],
                       [5.0, 2.0, -LIGHTGBM_ZERO], [5.0, 2.0, 2 * LIGHTGBM_ZERO]])
    assert ensemble.outputs(points)[:, 0].tolist() == [2.0, 1.0, 1.0, 1.0, 1.0]
    assert pred.get_error(points) == 0.0
    assert pred.output_bounds()[0][1] == 2.0
    index = build_index(ensemble, GRIDS, [1e-12, 0.0, 1e-12], None)
    assert sorted(index.cut_switch.tolist()) == [-LIGHTGBM_ZERO, LIGHTGBM_ZERO]
