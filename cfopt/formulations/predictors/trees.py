r"""Tree ensembles as a MILP block, shared by every tree family (Mišić 2020, eqs. 2b-2g).

Cuts and their rows are :mod:`cfopt.formulations.tree_cuts`.

**Leaves.** For tree :math:`t` with reachable leaves :math:`\mathcal L_t`,
:math:`y_{t,l} \in \{0, 1\}` (``formulation="leaf"``, default) or :math:`[0, 1]`
(``"threshold"``: integral once the cuts are) with :math:`\sum_{l} y_{t,l} = 1`; an
internal node :math:`n` at cut :math:`q(n)` with left leaves :math:`A(n)` and right
leaves :math:`B(n)` imposes :math:`\sum_{A(n)} y \le s_{q(n)}` and
:math:`\sum_{B(n)} y \le 1 - s_{q(n)}` (no big-M). Leaves unreachable under the input
bounds are dropped before building. An ensemble whose rows would hold more than
``PER_QUERY_TERMS`` terms (a default random forest: ~1.3e7) is built per query instead,
on the leaves within a verified heuristic's radius of the factual, in flow form
(:mod:`cfopt.formulations.tree_regions`, with the exactness argument). Outputs:
:math:`\text{out}_k = \text{init}_k + \sum_{t,l} v_{t,l,k}\, y_{t,l}` (Mišić 2020;
CE-OCL §3).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyomo.environ as pyo

from ...models import ModelAdapter
from ...models.trees import PER_QUERY_TERMS, Tree, TreeEnsemble
from ...space.encoding import Bounds, Grid, unit_bounds
from ..tree_cuts import (
    TOLERANCE_BAND,
    Cut,
    add_cut_rows,
    default_rounding,
    make_cut,
    switch_key,
)
from ..tree_regions import (
    QueryRegion,
    build_index,
    build_region,
    clear_region,
    leaf_depth_sum,
    search,
)
from .base import PredictorConstr, register_formulation

#: ``"leaf"`` (binary leaves) or ``"threshold"`` (continuous leaves)
FORMULATIONS = ("leaf", "threshold")
#: the key of the region of the whole input box (a factual's key is a tuple)
_BOX = "box"  # pragma: no mutate (a marker: only told from None and from a factual's key)


class TreePredictorConstr(PredictorConstr):
    """A tree ensemble's block; decodes the solver's discrete choice (the cut sides)
    into the box of model inputs where the library reaches the chosen leaves."""

    def __init__(self, block: pyo.Block, adapter: ModelAdapter, input_bounds: Bounds
                 ) -> None:
        super().__init__(block, adapter, input_bounds)
        self._fixed: list[tuple[Any, tuple]] = []
        #: per-query blocks: the caller builds each factual's region
        #: (:func:`cfopt.query.restrictions.trees.build_query_region`); else the region of the whole
        #: input box is built once, at the first factual
        self.deferred = False
        # pragma: no mutate start (None until a factual: "" too is no tuple, as a region key)
        self._factual_key: tuple | None = None
        # pragma: no mutate end
        self._region_key: tuple | str | None = None

    @property
    def per_query(self) -> bool:
        """Whether the leaves are built per query
        (:mod:`cfopt.formulations.tree_regions`)."""
        return self.block.per_query

    def cuts(self) -> dict[tuple[int, int], Cut]:
        """The cuts by (input, position): their MILP and sure sides (per query: of the
        current region)."""
        return self.block.cuts

    def split_values(self) -> dict[int, np.ndarray]:
        return self.block.split_values

    def build_region(self, region: QueryRegion, deadline: float = math.inf) -> int:
        """Build the leaves ``region`` keeps (per-query blocks), for the current factual;
        returns their number. Raises
        :class:`~cfopt.formulations.tree_regions.RegionTooLarge` past ``deadline``
        (``time.perf_counter()``), leaving the block without leaves."""
        b = self.block
        clear_region(b)
        self._fixed = []
        self._region_key = None
        kept = build_region(b, b.ensemble, b.index, search(b.ensemble, b.index, region,
                                                           deadline), b.bounds)
        self._region_key = _BOX if self._factual_key is None else self._factual_key
        return kept

    def input_region(self, factual: Sequence[float] | None = None
                     ) -> list[tuple[float, float]]:
        """Per model input, the interval of values on the side of every cut the solver
        chose (``left_of`` rounded), using the sides the library surely takes; the
        factual's own input value (``factual``: the MILP's inputs of the factual) stays
        in it when the library sends it to the chosen side. An input without cuts keeps
        its bounds; an empty interval (cuts within rounding of each other) is returned
        as is."""
        b = self.block
        region = [list(bd) for bd in self.input_bounds]
        for key, cut in b.cuts.items():
            j = cut.input
            left = pyo.value(b.left_of[key]) >= 0.5  # pragma: no mutate (a binary is never 0.5)
            own = b.factual_left.get(key)
            lo, hi = region[j]
            if left:
                side = cut.sure_left if own is not True else max(cut.sure_left, factual[j])
                region[j] = [lo, min(hi, side)]
            else:
                side = cut.sure_right if own is not False else min(cut.sure_right,
                                                                    factual[j])
                region[j] = [max(lo, side), hi]
        return [(lo, hi) for lo, hi in region]

    def fix_choices(self, block: pyo.Block, inputs: np.ndarray) -> list[pyo.Var]:
        """Fix the cut binaries of ``block`` whose two sides both hold ``inputs`` to the
        library's side."""
        fixed = []
        for key, cut in block.cuts.items():
            value = float(inputs[cut.input])
            if cut.sure_left <= value <= cut.sure_right:  # the MILP's sides overlap there
                block.left_of[key].fix(1 if cut.goes_left(value) else 0)
                fixed.append(block.left_of[key])
        return fixed

    def set_factual_inputs(self, library_inputs: Sequence[float],
                           milp_inputs: Sequence[float],
                           movable: Sequence[tuple[bool, bool]]) -> list[tuple[int, bool, Any]]:
        """The cuts whose both sides a solver may give the factual's input value without
        moving it: the MILP's side the library does not take is within the solvers'
        tolerances of the value (``TOLERANCE_BAND`` x the input's width; always so within
        the input's rounding of the switching point, and on a grid finer than that). Each is
        remembered with the side the library sends the factual (for
        :meth:`input_region`). The other side is reached only by moving the input: if it
        cannot move that way (immutable, monotone), the cut binary is fixed to the
        library's side (bounds, restored at the next call), else it is returned for the
        caller to count as a change."""
        b = self.block
        if b.per_query:
            self._factual_key = key = (tuple(library_inputs), tuple(milp_inputs),
                                       tuple(movable))
            if self.deferred and self._region_key != key:
                clear_region(b)  # the caller builds this factual's region
                self._fixed, self._region_key = [], None
                return []
            if not self.deferred and self._region_key is None:
                self.build_region(QueryRegion(list(b.bounds)))
                self._region_key = _BOX
        # pragma: no mutate start (a binary's missing bound is its domain's 0 or 1)
        for var, (lb, ub) in self._fixed:
            var.setlb(lb)
            var.setub(ub)
        # pragma: no mutate end
        self._fixed = []
        b.factual_left = {}
        out = []
        bounds = self.input_bounds
        for key, cut in b.cuts.items():
            j = cut.input
            lb, ub = bounds[j]
            band = TOLERANCE_BAND * (ub - lb)
            left = cut.goes_left(float(library_inputs[j]))
            # the MILP's other side within the solvers' reach of the factual's value
            reach = cut.right - milp_inputs[j] if left else milp_inputs[j] - cut.left
            if reach >= band:
                continue
            b.factual_left[key] = left
            var = b.left_of[key]
            up, down = movable[j]
            if (up if left else down):
                out.append((j, left, var))
            else:
                self._fixed.append((var, var.bounds))
                var.setlb(1 if left else 0)
                var.setub(1 if left else 0)  # pragma: no mutate (a binary: ub 2 is its 1)
        return out


def _reachable_splits(tree: Tree, bounds: Bounds, cuts: dict[tuple[int, float], Cut],
                      key_of: dict[int, float]) -> tuple[list[int], list[tuple], dict[int, dict]]:
    """Reachable leaves, per internal node with both children reachable (node, cut key,
    left leaves, right leaves), and per leaf its box (input -> (lo, hi) on its path), by
    interval propagation from the root with the MILP's sides."""
    leaves: list[int] = []
    splits: list[tuple] = []
    boxes: dict[int, dict] = {}

    def visit(node: int, box: dict[int, tuple[float, float]]) -> list[int]:
        j = int(tree.feature[node])
        if j < 0:
            leaves.append(node)
            boxes[node] = box
            return [node]
        lo, hi = box.get(j, bounds[j])
        key = (j, key_of[node])
        cut = cuts[key]
        below = above = []
        if cut.left >= lo:
            below = visit(int(tree.left[node]), {**box, j: (lo, min(hi, cut.left))})
        if cut.right <= hi:
            above = visit(int(tree.right[node]), {**box, j: (max(lo, cut.right), hi)})
        if below and above:
            splits.append((node, key, below, above))
        return below + above

    visit(0, {})
    return leaves, splits, boxes


@register_formulation(TreeEnsemble, options=("formulation", "per_query"))
def build_trees(block: pyo.Block, name: str, adapter: ModelAdapter, bounds: Bounds,
                grids: Sequence[Grid] | None = None,
                rounding: Sequence[float] | None = None,
                library_input: Callable[[int, float], float] | None = None,
                formulation: str = "leaf", per_query: bool | None = False
                ) -> TreePredictorConstr:
    """The block of module docstring for ``adapter``'s ensemble; ``per_query``: ``True``
    builds the inputs, the outputs and the index of the splits only, the leaves of each
    query being built by :meth:`TreePredictorConstr.build_region`
    (:mod:`cfopt.formulations.tree_regions`); ``None`` does so when the leaf rows would
    hold more than ``PER_QUERY_TERMS`` terms."""
    ensemble: TreeEnsemble = adapter.structure
    n, k = ensemble.n_inputs, ensemble.n_outputs
    if formulation not in FORMULATIONS:
        raise ValueError(f"unknown tree formulation {formulation!r}; use one of {FORMULATIONS}")
    grids = list(grids) if grids is not None else [None] * n
    rounding = list(rounding) if rounding is not None else default_rounding(bounds)
    if per_query or (per_query is None and leaf_depth_sum(ensemble) > PER_QUERY_TERMS):
        return TreePredictorConstr(_build_per_query(block, name, ensemble, bounds, grids,
                                                    rounding, library_input, formulation),
                                   adapter, bounds)
    cuts: dict[tuple[int, float], Cut] = {}
    made: dict[tuple[int, float], Cut] = {}  # per (input, threshold): boosting repeats them
    keys: list[dict[int, float]] = []
    for tree in ensemble.trees:
        key_of = {}
        for node in np.flatnonzero(tree.feature >= 0):
            j = int(tree.feature[node])
            pair = (j, float(tree.threshold[node]))
            cut = made.get(pair)
            if cut is None:
                cut = made[pair] = make_cut(
                    j, pair[1], ensemble.rule, ensemble.float32, grids[j], rounding[j],
                    None if library_input is None else functools.partial(library_input, j))
            key = switch_key(cut)  # one key per distinct switching point
            key_of[int(node)] = key
            cuts.setdefault((j, key), cut)
        keys.append(key_of)
    structure = [_reachable_splits(tree, bounds, cuts, key_of)
                 for tree, key_of in zip(ensemble.trees, keys)]
    used = sorted({key for _, splits, _ in structure for _, key, _, _ in splits})
    per_input: dict[int, list] = {}
    for key in used:
        per_input.setdefault(key[0], []).append(key)
    index = {key: (j, q) for j, ks in per_input.items() for q, key in enumerate(ks)}

    sub = pyo.Block()
    block.add_component(name, sub)
    sub.formulation = formulation
    sub.per_query = False
    sub.inputs = pyo.Var(range(n), bounds=lambda _, i: unit_bounds(bounds)[i])
    sub.LEAVES = pyo.Set(initialize=[(t, leaf) for t, (leaves, *_) in enumerate(structure)
                                     for leaf in leaves], dimen=2, ordered=True)
    sub.leaf = pyo.Var(sub.LEAVES,
                       domain=pyo.Binary if formulation == "leaf" else pyo.UnitInterval)
    #: per leaf, the input intervals on its path: {(tree, leaf): {input: (lo, hi)}}
    sub.leaf_boxes = {(t, leaf): box for t, (_, _, boxes) in enumerate(structure)
                      for leaf, box in boxes.items()}
    sub.one_leaf = pyo.Constraint(range(len(structure)), rule=lambda s, t: sum(
        s.leaf[t, leaf] for leaf in structure[t][0]) == 1)
    #: the cuts by (input, position): their MILP and sure sides
    sub.cuts = {index[key]: cuts[key] for key in used}
    #: per ambiguous cut of the current factual, the library's side for it (True: left)
    sub.factual_left = {}
    #: per input, the values surely left / right of every cut on it (sorted)
    sub.split_values = {j: np.array(sorted({v for key in ks for v in (
        cuts[key].sure_left, cuts[key].sure_right)})) for j, ks in per_input.items()}
    _link_cuts(sub, structure, bounds, index)
    low = ensemble.init.copy()
    high = ensemble.init.copy()
    for tree, (leaves, *_) in zip(ensemble.trees, structure):
        values = tree.value[leaves]
        low += values.min(axis=0)
        high += values.max(axis=0)
    sub.outputs = pyo.Var(range(k), bounds=lambda _, c: (float(low[c]), float(high[c])))
    sub.output_def = pyo.Constraint(range(k), rule=lambda s, c: s.outputs[c] == float(
        ensemble.init[c]) + sum(float(ensemble.trees[t].value[leaf, c]) * s.leaf[t, leaf]
                                for t, leaf in s.LEAVES
                                if ensemble.trees[t].value[leaf, c] != 0))
    return TreePredictorConstr(sub, adapter, bounds)


def _build_per_query(block: pyo.Block, name: str, ensemble: TreeEnsemble, bounds: Bounds,
                     grids: list[Grid], rounding: list[float],
                     library_input: Callable[[int, float], float] | None,
                     formulation: str) -> pyo.Block:
    """Inputs, outputs (bounded over every leaf) and the split index; no leaves yet."""
    sub = pyo.Block()
    block.add_component(name, sub)
    sub.formulation = formulation
    sub.per_query = True
    sub.index = build_index(ensemble, grids, rounding, library_input)
    sub.ensemble = ensemble
    sub.bounds = list(bounds)
    sub.split_values = sub.index.split_values
    sub.cuts = {}
    sub.factual_left = {}  # pragma: no mutate (read only after a region or factual resets it)
    sub.inputs = pyo.Var(range(ensemble.n_inputs),
                         bounds=lambda _, i: unit_bounds(bounds)[i])
    low = ensemble.init + sum(t.value[t.leaves].min(axis=0) for t in ensemble.trees)
    high = ensemble.init + sum(t.value[t.leaves].max(axis=0) for t in ensemble.trees)
    sub.outputs = pyo.Var(range(ensemble.n_outputs),
                          bounds=lambda _, c: (float(low[c]), float(high[c])))
    return sub


def _link_cuts(sub: pyo.Block, structure: list, bounds: Bounds,
               index: dict[tuple[int, float], tuple[int, int]]) -> None:
    """The cut rows (:func:`add_cut_rows`) and the leaf sums of each split node (module
    docstring)."""
    add_cut_rows(sub, bounds)
    rows = {(t, node): (index[key], below_, above_)
            for t, (_, splits, _) in enumerate(structure)
            for node, key, below_, above_ in splits}
    sub.split_left = pyo.Constraint(list(rows), rule=lambda s, t, node: sum(
        s.leaf[t, leaf] for leaf in rows[t, node][1]) <= s.left_of[rows[t, node][0]])
    sub.split_right = pyo.Constraint(list(rows), rule=lambda s, t, node: sum(
        s.leaf[t, leaf] for leaf in rows[t, node][2]) <= 1 - s.left_of[rows[t, node][0]])
