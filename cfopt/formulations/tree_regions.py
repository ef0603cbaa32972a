r"""Tree ensembles built per query: only the leaves a query can reach (issue 17).

A default random forest (100 trees of unlimited depth) on UCI Adult has ~5,000 leaves
per tree, 25 splits deep on average: the leaf rows of :mod:`.trees` (Mišić 2020) hold
:math:`\sum_l \text{depth}(l) \approx 1.3 \cdot 10^7` terms, too many to build (49 s).
One query reaches few of those leaves, so large ensembles are built per query:

**Index** (:class:`ForestIndex`, once, numpy): the cut of every split node
(:func:`.tree_cuts.make_cut` of each distinct (input, threshold)), the output bounds.

**Region** (:class:`QueryRegion`): the query's admissible codes per feature
:math:`A_f` (bounds; immutable: :math:`\{\hat x_f\}`; increase-only:
:math:`[\hat x_f, u_f]`; ...), weights :math:`w_f`, objective
:math:`a\,\text{L1} + b\,\text{L0} + c\,\text{L∞}` and a radius :math:`r`. For a tree
node :math:`n` with path box :math:`B_n` (the MILP's sides of its ancestors' cuts), let
:math:`C_f(n) = \{v \in A_f : \text{spec}_k(v) \in B_{n,k}\ \forall k \in K_f\}` (the
inputs :math:`K_f` of feature :math:`f`), :math:`d_f(n) = w_f\,\text{dist}(\hat x_f,
C_f(n))` (categorical: :math:`w_f` if the factual's level is not in :math:`C_f(n)`) and

.. math:: \text{LB}(n) = a \sum_f d_f(n) + b\,|\{f : d_f(n) > 0\}| + c \max_f d_f(n).

Every point :math:`x` that reaches :math:`n` in the MILP has :math:`x_f \in C_f(n)`,
hence distance :math:`(x) \ge \text{LB}(n)`; :math:`\text{LB}` grows along paths. The
region's radius :math:`r` bounds the distance: a query of objective radius :math:`r'`
takes :math:`r = r' - \underline t` for a lower bound :math:`\underline t` of the costs
beyond the distance (declared blocks', the user's term:
:meth:`~cfopt.constraints.raw.RawProblem.distance_radius`). :func:`search` keeps the leaves
:math:`l` with every :math:`C_f(l) \ne \emptyset` and :math:`\text{LB}(l) \le r`,
walking each tree depth first and cutting a subtree as soon as its root fails.

**Exactness.** Let :math:`P` be the MILP and :math:`P_r` the one built on the kept
leaves (a leaf left out is a leaf variable fixed to 0, so :math:`P_r \subseteq P`).
(i) Every point of :math:`P` of objective :math:`\le r` is a point of :math:`P_r`: the
leaf it reaches in each tree has :math:`\text{LB} \le r`. (ii) Hence if :math:`P_r`'s
optimum :math:`z_r \le r`, it is :math:`P`'s optimum, and for any bound :math:`b_r` of
:math:`P_r`, :math:`\min(b_r, r)` bounds :math:`P`: a point of :math:`P` cheaper than
both would be a point of :math:`P_r` cheaper than :math:`b_r`. (iii) With
:math:`r = \infty` only actionability prunes and :math:`P_\infty = P`. The caller takes
:math:`r` from a verified heuristic point (:mod:`cfopt.query.restrictions.trees`) and solves
:math:`P_\infty` when :math:`P_r` is infeasible or its optimum exceeds :math:`r`.

**Block** (:func:`.trees.build_region`): the flow form of the leaf rows. A kept node
with both children kept gets a flow :math:`\phi_n = \phi_{\text{left}} +
\phi_{\text{right}}`; a leaf's flow is :math:`y_{t,l}`, a node with one kept child
passes its child's flow on; each kept child's flow is :math:`\le s_{q(n)}` (left) or
:math:`\le 1 - s_{q(n)}` (right). Projected on :math:`y`, this is Mišić's
:math:`\sum_{A(n)} y \le s_{q(n)}` (the flow of a child is the sum of the leaves below
it) in :math:`O(\text{kept nodes})` terms instead of :math:`O(\text{kept leaves} \times
\text{depth})` (the flow view of OCEAN, Parmentier & Vidal 2021).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyomo.environ as pyo

from ..models.trees import TreeEnsemble
from .tree_cuts import Cut, Grid, add_cut_rows, make_cut

#: an upper estimate of the seconds to build one kept leaf in Pyomo and load it in a
#: solver (measured: ~0.5 ms with its nodes and cuts, default forests on Adult)
BUILD_SECONDS_PER_LEAF = 1e-3
#: relative slack of the radius test (float round-off of the code intervals)
_SLACK = 1e-9
_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class ForestIndex:
    """Per tree, the cut id of each node (-1 at leaves); the distinct cuts as arrays
    (keyed by input and switching point, :func:`.tree_cuts.switch_key`, as in
    :mod:`.trees`: their input, MILP sides, sure sides, a threshold, the switching
    point); per input the values surely left / right of its cuts (the heuristic's
    candidate moves)."""

    node_cut: tuple[np.ndarray, ...]
    cut_input: np.ndarray
    cut_left: np.ndarray
    cut_right: np.ndarray
    cut_sure_left: np.ndarray
    cut_sure_right: np.ndarray
    cut_theta: np.ndarray
    cut_switch: np.ndarray
    rule: str
    float32: bool
    split_values: dict[int, np.ndarray]

    def cut(self, c: int) -> Cut:
        """Cut ``c`` as :func:`.tree_cuts.make_cut` gives it."""
        return Cut(int(self.cut_input[c]), float(self.cut_left[c]), float(self.cut_right[c]),
                   float(self.cut_sure_left[c]), float(self.cut_sure_right[c]),
                   float(self.cut_theta[c]), self.rule, self.float32)


def _unique_rows(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first index of each distinct pair ``(a, b)`` and every pair's group id."""
    order = np.lexsort((b, a))
    new = np.ones(len(a), dtype=bool)
    new[1:] = (np.diff(a[order]) != 0) | (np.diff(b[order]) != 0)
    group = np.empty(len(a), dtype=np.int64)
    group[order] = np.cumsum(new) - 1
    return order[new], group


def _sides(inputs: np.ndarray, theta: np.ndarray, ensemble: TreeEnsemble,
           grids: Sequence[Grid], rounding: Sequence[float],
           library_input: Callable[[int, float], float] | None) -> np.ndarray:
    """Rows (left, right, sure left, sure right, switching point) of
    :func:`.tree_cuts.make_cut` and :func:`.tree_cuts.switch_key` for every (input,
    threshold), vectorised; the few a grid value within rounding of the threshold
    leaves to the library's own arithmetic go through :func:`make_cut` itself."""
    rule, f32 = ensemble.rule, ensemble.float32
    out = np.empty((len(theta), 5))
    # bools and floats already:
    rounding_of = np.asarray(rounding, dtype=np.float64)[inputs]  # pragma: no mutate (floats)
    on_grid = np.array([g is not None for g in grids], dtype=bool)[inputs]  # pragma: no mutate
    c = ~on_grid
    th = theta[c]
    if f32:  # the switching point: the midpoint of the float32 values on either side
        t32 = th.astype(np.float32)
        back = t32.astype(np.float64)  # pragma: no mutate (float64: astype's default)
        below = (back <= th) if rule == "le" else (back < th)
        f = np.where(below, t32, np.nextafter(t32, np.float32(-np.inf)))
        up = np.nextafter(f, np.float32(np.inf))
        beta = (f.astype(np.float64)  # pragma: no mutate (float64: astype's default)
                + up.astype(np.float64)) / 2  # pragma: no mutate (float64: astype's default)
    else:
        beta = th
    delta = rounding_of[c] + 4 * _EPS * np.abs(beta)
    out[c] = np.stack([beta + delta, beta - delta, beta - delta, beta + delta, beta], axis=1)
    th = theta[on_grid]
    # pragma: no mutate start (the values of inputs off a grid are masked out)
    offset = np.array([g[0] if g is not None else 0.0 for g in grids])[inputs][on_grid]
    step = np.array([g[1] if g is not None else 1.0 for g in grids])[inputs][on_grid]
    # pragma: no mutate end
    k = np.floor((th - offset) / step)
    chosen = np.full(len(th), np.nan)
    odd = np.zeros(len(th), dtype=bool)
    for shift in (1.0, 0.0, -1.0, -2.0):  # the last grid value going left
        value = offset + (k + shift) * step
        near = np.abs(value - th) <= rounding_of[on_grid] + 4 * _EPS * np.abs(th)
        seen = np.where(near, th, value)
        if f32:
            seen = seen.astype(np.float32).astype(np.float64)  # pragma: no mutate (default)
        left = (seen <= th) if rule == "le" else (seen < th)
        take = np.isnan(chosen) & left
        odd |= near & (np.isnan(chosen) | take) & (library_input is not None)
        chosen[take] = k[take] + shift
    odd |= np.isnan(chosen)
    last, first = offset + chosen * step, offset + (chosen + 1) * step
    out[on_grid] = np.stack([last, first, last, first, last], axis=1)
    for p in np.flatnonzero(on_grid)[odd]:
        j = int(inputs[p])
        lib = None if library_input is None else (lambda v, j=j: library_input(j, v))
        cut = make_cut(j, float(theta[p]), rule, f32, grids[j], rounding[j], lib)
        out[p] = (cut.left, cut.right, cut.sure_left, cut.sure_right, cut.sure_left)
    return out


def build_index(ensemble: TreeEnsemble, grids: Sequence[Grid], rounding: Sequence[float],
                library_input: Callable[[int, float], float] | None) -> ForestIndex:
    """The index of ``ensemble``: the cut of each distinct (input, threshold), as
    :func:`make_cut` gives it."""
    inputs = np.concatenate([t.feature[t.feature >= 0] for t in ensemble.trees]).astype(
        np.int64)
    theta = np.concatenate([t.threshold[t.feature >= 0] for t in ensemble.trees])
    first, pair_of = _unique_rows(inputs, theta)
    sides = _sides(inputs[first], theta[first], ensemble, grids, rounding, library_input)
    cut_first, cut_of_pair = _unique_rows(inputs[first], sides[:, 4])
    node_cut = []
    start = 0
    for tree in ensemble.trees:
        internal = tree.feature >= 0
        ids = np.full(len(tree.feature), -1, dtype=np.int64)  # pragma: no mutate (the default)
        ids[internal] = cut_of_pair[pair_of[start:start + int(internal.sum())]]
        start += int(internal.sum())
        node_cut.append(ids)
    cut_input = inputs[first][cut_first]
    cut_sides = sides[cut_first]
    split_values = {int(j): np.unique(cut_sides[cut_input == j][:, 2:4])
                    for j in np.unique(cut_input)}
    return ForestIndex(tuple(node_cut), cut_input, cut_sides[:, 0].copy(),
                       cut_sides[:, 1].copy(), cut_sides[:, 2].copy(), cut_sides[:, 3].copy(),
                       theta[first][cut_first], cut_sides[:, 4].copy(), ensemble.rule,
                       ensemble.float32,
                       split_values)


def leaf_depth_sum(ensemble: TreeEnsemble) -> int:
    """The terms of the full leaf rows of :mod:`.trees`: the sum of the leaf depths."""
    total = 0
    for tree in ensemble.trees:
        level, depth = np.array([0]), 0
        while len(level):
            internal = level[tree.feature[level] >= 0]
            total += depth * (len(level) - len(internal))
            level = np.concatenate([tree.left[internal], tree.right[internal]])
            depth += 1
    return total


@dataclass
class NumericTerm:
    """A numeric feature: its inputs ``(k, a, b)`` (input k = a * code + b), admissible
    codes ``[lo, hi]``, factual code and weight."""

    inputs: list[tuple[int, float, float]]
    lo: float
    hi: float
    x0: float
    weight: float


@dataclass
class CategoryTerm:
    """A categorical feature: its inputs ``(k, value per level)``, admissible levels,
    the factual's level and the weight of a switch."""

    inputs: list[tuple[int, np.ndarray]]
    allowed: np.ndarray
    own: int
    weight: float


@dataclass
class QueryRegion:
    """What a query admits (module docstring): the input box, the feature terms, the
    objective's coefficients and the radius (``inf``: actionability only)."""

    box: list[tuple[float, float]]
    terms: list[NumericTerm | CategoryTerm] = field(default_factory=list)
    l1: float = 0.0
    l0: float = 0.0
    linf: float = 0.0
    radius: float = math.inf


@dataclass
class TreeRegion:
    """One tree's kept leaves, and per kept internal node ``(node, cut id, left child
    kept, right child kept)``."""

    leaves: list[int]
    nodes: list[tuple[int, int, bool, bool]]


class RegionTooLarge(Exception):
    """The search passed its deadline (the caller keeps what it has)."""


def _distance(term: NumericTerm | CategoryTerm, state: object) -> float:
    """The weighted distance d_f of a feature's state (``inf``: no admissible value)."""
    if isinstance(term, NumericTerm):
        lo, hi = state
        if lo > hi + 1e-9 * max(1.0, abs(term.hi - term.lo)):
            return math.inf
        return term.weight * max(0.0, lo - term.x0, term.x0 - hi)
    if state[term.own]:
        return 0.0
    return term.weight if state.any() else math.inf


def _narrow(term: NumericTerm | CategoryTerm, state: object, k: int, lo: float, hi: float
            ) -> object:
    """The feature's state once input ``k`` is confined to ``[lo, hi]``."""
    if isinstance(term, NumericTerm):
        clo, chi = state
        for j, a, b in term.inputs:
            if j == k:
                u, v = (lo - b) / a, (hi - b) / a
                clo, chi = max(clo, min(u, v)), min(chi, max(u, v))
        return (clo, chi)
    for j, values in term.inputs:
        if j == k:
            state = state & (values >= lo - 1e-9) & (values <= hi + 1e-9)
    return state


def search(ensemble: TreeEnsemble, index: ForestIndex, region: QueryRegion,
           deadline: float = math.inf) -> list[TreeRegion]:
    """The kept leaves and nodes of every tree (module docstring); raises
    :class:`RegionTooLarge` past ``deadline`` (``time.perf_counter()`` seconds), or when
    building the kept leaves would pass it (``BUILD_SECONDS_PER_LEAF``)."""
    feature_of = [-1] * len(region.box)
    for f, term in enumerate(region.terms):
        for spec in term.inputs:
            feature_of[spec[0]] = f
    terms = region.terms
    limit = region.radius + _SLACK * (1.0 + region.radius)
    l1, l0, linf = region.l1, region.l0, region.linf
    tol = [1e-9 * max(1.0, hi - lo) for lo, hi in region.box]
    cut_input = index.cut_input.tolist()
    cut_left = index.cut_left.tolist()
    cut_right = index.cut_right.tolist()
    out = []
    visits = [0]  # nodes visited, over all trees (the deadline is checked every 4096)
    for tree, node_cut in zip(ensemble.trees, index.node_cut):
        # the search recurses once per level: a tree is never deeper than its nodes
        sys.setrecursionlimit(max(sys.getrecursionlimit(),  # pragma: no mutate (headroom)
                                  len(tree.feature) + 100))  # pragma: no mutate (headroom)
        box = [list(b) for b in region.box]
        state: list[object] = [(t.lo, t.hi) if isinstance(t, NumericTerm) else t.allowed
                               for t in terms]
        dist = [_distance(t, s) for t, s in zip(terms, state)]
        if not all(math.isfinite(d) for d in dist):
            raise ValueError("the query admits no value of some feature")
        kept = TreeRegion([], [])
        cut_of = node_cut.tolist()
        left, right = tree.left.tolist(), tree.right.tolist()

        def lower_bound() -> float:
            return (l1 * sum(dist) + l0 * sum(d > 0 for d in dist)
                    + linf * max(dist, default=0.0))

        def visit(node: int) -> bool:
            c = cut_of[node]
            if c < 0:
                kept.leaves.append(node)
                return True
            # pragma: no mutate start (when the clock is read; past it the end check raises)
            visits[0] += 1
            if visits[0] % 4096 == 0 and time.perf_counter() > deadline:
                raise RegionTooLarge
            # pragma: no mutate end
            k = cut_input[c]
            f = feature_of[k]
            lo, hi = box[k]
            sides = []
            for child, new in ((left[node], (lo, min(hi, cut_left[c]))),
                               (right[node], (max(lo, cut_right[c]), hi))):
                if new[0] > new[1] + tol[k]:
                    sides.append(False)
                    continue
                if f >= 0:
                    old_state, old_dist = state[f], dist[f]
                    state[f] = _narrow(terms[f], old_state, k, *new)
                    dist[f] = _distance(terms[f], state[f])
                    if not math.isfinite(dist[f]) or lower_bound() > limit:
                        state[f], dist[f] = old_state, old_dist
                        sides.append(False)
                        continue
                box[k] = list(new)
                sides.append(visit(child))
                box[k] = [lo, hi]
                if f >= 0:
                    state[f], dist[f] = old_state, old_dist
            if sides[0] or sides[1]:
                kept.nodes.append((node, c, sides[0], sides[1]))
                return True
            return False

        if lower_bound() <= limit:
            visit(0)
        out.append(kept)
    kept_leaves = sum(len(r.leaves) for r in out)
    if time.perf_counter() + BUILD_SECONDS_PER_LEAF * kept_leaves > deadline:
        raise RegionTooLarge  # building and loading these leaves would pass the deadline
    return out


#: the components of a per-query region, deleted before the next one is built
REGION_COMPONENTS = ("output_def", "side_left", "side_right", "flow_def", "flow", "FLOWS",
                     "one_leaf", "leaf", "LEAVES", "cut_order", "cut_above", "cut_below",
                     "left_of", "CUTS")


def clear_region(sub: pyo.Block) -> None:
    """Delete the current region's components (the block keeps inputs and outputs)."""
    for name in REGION_COMPONENTS:
        if sub.component(name) is not None:
            sub.del_component(name)
    sub.cuts = {}
    sub.factual_left = {}


def build_region(sub: pyo.Block, ensemble: TreeEnsemble, index: ForestIndex,
                 regions: list[TreeRegion], bounds: Sequence[tuple[float, float]]) -> int:
    """Replace ``sub``'s region by the kept leaves and nodes ``regions`` in flow form
    (module docstring); returns the number of kept leaves."""
    clear_region(sub)
    used = sorted({c for r in regions for _, c, _, _ in r.nodes},
                  key=lambda c: (index.cut_input[c],  # pragma: no mutate (build_index's order)
                                 index.cut_switch[c]))
    position: dict[int, tuple[int, int]] = {}
    count: dict[int, int] = {}
    for c in used:
        j = int(index.cut_input[c])
        position[c] = (j, count.get(j, 0))
        count[j] = position[c][1] + 1
    sub.cuts = {position[c]: index.cut(c) for c in used}
    add_cut_rows(sub, bounds)
    sub.LEAVES = pyo.Set(initialize=[(t, leaf) for t, r in enumerate(regions)
                                     for leaf in r.leaves],
                          dimen=2, ordered=True)  # pragma: no mutate (pairs, insertion order)
    sub.leaf = pyo.Var(sub.LEAVES, domain=pyo.Binary if sub.formulation == "leaf"
                       else pyo.UnitInterval)
    # a tree with no leaf within the query's reach: no point is (the region is infeasible)
    sub.one_leaf = pyo.Constraint(range(len(regions)), rule=lambda s, t: sum(
        s.leaf[t, leaf] for leaf in regions[t].leaves) == 1 if regions[t].leaves
        else pyo.Constraint.Infeasible)
    flows, rows_left, rows_right, defs = [], [], [], {}
    refs: dict[int, dict[int, object]] = {}  # per tree, node -> leaf Var or flow node
    for t, (tree, r) in enumerate(zip(ensemble.trees, regions)):
        ref: dict[int, object] = {leaf: sub.leaf[t, leaf] for leaf in r.leaves}
        for node, c, lkept, rkept in r.nodes:  # children precede parents (post-order)
            lchild, rchild = int(tree.left[node]), int(tree.right[node])
            if lkept and rkept:
                flows.append((t, node))
                defs[t, node] = (lchild, rchild)
            if lkept:
                rows_left.append((t, node, lchild, position[c]))
            if rkept:
                rows_right.append((t, node, rchild, position[c]))
            ref[node] = node if lkept and rkept else ref[lchild if lkept else rchild]
        refs[t] = ref
    sub.FLOWS = pyo.Set(initialize=flows,
                        dimen=2, ordered=True)  # pragma: no mutate (pairs, insertion order)
    sub.flow = pyo.Var(sub.FLOWS, bounds=(0.0, 1.0))

    def flow_of(t: int, node: int) -> object:
        value = refs[t][node]
        return sub.flow[t, value] if isinstance(value, int) else value

    sub.flow_def = pyo.Constraint(sub.FLOWS, rule=lambda s, t, n: s.flow[t, n] == flow_of(
        t, defs[t, n][0]) + flow_of(t, defs[t, n][1]))
    sub.side_left = pyo.Constraint(range(len(rows_left)), rule=lambda s, i: flow_of(
        rows_left[i][0], rows_left[i][2]) <= s.left_of[rows_left[i][3]])
    sub.side_right = pyo.Constraint(range(len(rows_right)), rule=lambda s, i: flow_of(
        rows_right[i][0], rows_right[i][2]) <= 1 - s.left_of[rows_right[i][3]])
    sub.output_def = pyo.Constraint(range(ensemble.n_outputs), rule=lambda s, k: s.outputs[
        k] == float(ensemble.init[k]) + sum(
        float(ensemble.trees[t].value[leaf, k]) * s.leaf[t, leaf] for t, leaf in s.LEAVES
        if ensemble.trees[t].value[leaf, k] != 0))
    return len(sub.LEAVES)
