r"""Tree ensembles as a leaf-indicator MILP block, shared by every tree family.

For tree :math:`t` with reachable leaves :math:`\mathcal L_t`, binaries
:math:`y_{t,l}` with :math:`\sum_{l \in \mathcal L_t} y_{t,l} = 1` pick the leaf. An
internal node :math:`n` splitting input :math:`j` at :math:`\theta` with left leaves
:math:`A(n)` and right leaves :math:`B(n)` imposes

.. math:: x_j \le h_n + (u_j - h_n)\,(1 - \textstyle\sum_{l \in A(n)} y_{t,l}), \qquad
          x_j \ge r_n - (r_n - \ell_j)\,(1 - \textstyle\sum_{l \in B(n)} y_{t,l})

where :math:`[\ell_j, u_j]` are the input's bounds (per-split big-M) and
:math:`h_n < r_n` the largest value that goes left and the smallest that goes right:

* inputs on a grid (integer, binary, ordinal codes and one-hot columns; ``input_grids``):
  the grid values on either side of :math:`\theta` — exact, and a split on a one-hot
  column becomes the fixing :math:`\sum_{B(n)} y \le x_j \le 1 - \sum_{A(n)} y`;
* continuous inputs: a gap around the switching point :math:`\beta` (:math:`\theta`,
  or the float32 rounding midpoint next to it): :math:`h_n = \beta - \delta^-`,
  :math:`r_n = \beta + \delta^+` with :math:`\delta^\pm` = ``split_epsilon`` ×
  (input width), or half the distance to the nearest training value on that side when
  the data are known (``supports``), so no training point falls in the gap (a
  training value on :math:`\beta`, up to a few ulps, is kept on the side the library
  sends :math:`\beta` to: :math:`h_n \approx \beta` or :math:`r_n \approx \beta`);
  points strictly inside
  :math:`(h_n, r_n)` are excluded.

Libraries that round inputs to float32 before comparing (sklearn) are modelled as such:
grid values are assigned to the side their float32 rounding falls on, and continuous
sides keep a few float32 ulps away from :math:`\theta`.

**Threshold formulation** (``formulation="threshold"``, Mišić 2020 eqs. 2b-2g): a binary
:math:`z_{j,q}` per distinct split :math:`(h_q, r_q)` of input :math:`j` (sorted),
meaning "left of it": :math:`x_j \le h_q + (u_j - h_q)(1 - z_{j,q})`,
:math:`x_j \ge r_q - (r_q - \ell_j) z_{j,q}`, :math:`z_{j,q} \le z_{j,q+1}`; the
leaves are continuous in [0, 1] with :math:`\sum_{A(n)} y \le z_{j,q(n)}` and
:math:`\sum_{B(n)} y \le 1 - z_{j,q(n)}` (integral once the :math:`z` are). Far fewer
binaries on forests (distinct thresholds vs leaves), but every split's gap is excluded,
not only those on the chosen paths: its optimum can exceed the leaf formulation's by
the cost of leaving one gap per feature (at most 2 × ``split_epsilon`` per unit of
range-weighted L1 per feature). Gaps never overlap a neighbouring split's boundary
(:func:`_boundaries`).

Leaves unreachable under the input bounds (an empty interval on the path) are dropped
before building. Outputs: :math:`\text{out}_k = \text{init}_k + \sum_{t,l} v_{t,l,k}\,
y_{t,l}` (Mišić 2020; CE-OCL §3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyomo.environ as pyo

from ..models.trees import Tree, TreeEnsemble
from .predictors import Bounds, register_formulation

Grid = tuple[float, float] | None

#: default width fraction separating the two sides of a split on a continuous input:
#: 10x the largest integrality tolerance of the supported solvers (Gurobi 1e-5, HiGHS
#: 1e-6, CBC 1e-7), since a leaf indicator off by δ lets its input cross its split side by
#: δ x width, which must stay inside the gap (checked in ``tests/test_numerics.py``)
SPLIT_EPSILON = 1e-4
#: ``"leaf"`` (a binary per leaf) or ``"threshold"`` (a binary per distinct split)
FORMULATIONS = ("leaf", "threshold")


def _goes_left(value: float, theta: float, rule: str, float32: bool) -> bool:
    v = float(np.float32(value)) if float32 else value
    return v <= theta if rule == "le" else v < theta


def _float32_sides(theta: float, rule: str) -> tuple[float, float]:
    """The largest float32 value going left and the smallest going right of a split
    compared in float32."""
    t32 = np.float32(theta)
    if rule == "le":  # left iff float32(x) <= theta: f = largest float32 <= theta
        f = t32 if float(t32) <= theta else np.nextafter(t32, np.float32(-np.inf))
    else:  # left iff float32(x) < theta: f = largest float32 < theta
        f = t32 if float(t32) < theta else np.nextafter(t32, np.float32(-np.inf))
    return float(f), float(np.nextafter(f, np.float32(np.inf)))


def _boundary(theta: float, rule: str, float32: bool) -> float:
    """The point where the library's decision switches sides for float64 inputs."""
    if not float32:
        return theta
    f, up = _float32_sides(theta, rule)
    return (f + up) / 2  # inputs below round to <= f, above to >= up


def _split_sides(theta: float, rule: str, grid: Grid, eps: float, float32: bool,
                 support: np.ndarray | None = None,
                 boundaries: np.ndarray | None = None) -> tuple[float, float]:
    """(largest value going left, smallest value going right) of a split, as the
    library decides it (after float32 rounding of the input when ``float32``); the gap
    between them keeps within half the distance to the neighbouring ``boundaries``."""
    if grid is None:
        beta = _boundary(theta, rule, float32)
        below_gap = above_gap = eps
        if boundaries is not None:
            k = int(np.searchsorted(boundaries, beta))
            if k > 0:
                below_gap = min(below_gap, (beta - boundaries[k - 1]) / 2)
            nxt = k + int(k < len(boundaries) and boundaries[k] == beta)
            if nxt < len(boundaries):
                above_gap = min(above_gap, (boundaries[nxt] - beta) / 2)
        floor = 1e-7 * max(1.0, abs(beta))
        h, r = beta - max(below_gap, floor), beta + max(above_gap, floor)
        # the gap never swallows a value the library sends one way for sure: the
        # float32 neighbours of the boundary, and the nearest training values (an
        # XGBoost threshold is itself a training value, and the factual may be one)
        sure_left, sure_right = _float32_sides(theta, rule) if float32 else (-math.inf,
                                                                              math.inf)
        if support is not None and len(support):
            # training values within a few ulps of the boundary sit *on* it (the model
            # input may be computed as (x - shift) / scale by the library and as
            # a x + b here): they keep the side the library sends the boundary to
            tol = 1e-12 * max(1.0, abs(beta))
            k = int(np.searchsorted(support, beta - tol))  # support[:k] < beta - tol
            on = int(np.searchsorted(support, beta + tol, side="right"))
            if k > 0:
                below_gap = min(below_gap, (beta - support[k - 1]) / 2)
                sure_left = max(sure_left, float(support[k - 1]))
            if on < len(support):
                above_gap = min(above_gap, (support[on] - beta) / 2)
                sure_right = min(sure_right, float(support[on]))
            h, r = beta - max(below_gap, floor), beta + max(above_gap, floor)
            if on > k:
                if _goes_left(beta, theta, rule, float32):
                    h = max(beta, float(support[on - 1]))
                    r = h + max(above_gap, floor)
                else:
                    r = min(beta, float(support[k]))
                    h = r - max(below_gap, floor)
        return max(h, sure_left), min(r, sure_right)
    offset, step = grid
    k = math.floor((theta - offset) / step)
    for cand in (k + 1, k, k - 1, k - 2):  # the last grid value that goes left
        value = offset + cand * step
        # a grid value within rounding of theta is theta itself, computed otherwise by the
        # library (e.g. (code - shift) / scale for offset + code * step): a threshold that
        # is a training value (histogram boosting) keeps the side theta goes to
        if _goes_left(theta if abs(value - theta) <= 1e-6 * step else value, theta, rule,
                      float32):
            return value, offset + (cand + 1) * step
    raise AssertionError(f"no grid value near threshold {theta} goes left")


def _boundaries(ensemble: TreeEnsemble, grids: Sequence[Grid]) -> list[np.ndarray | None]:
    """Per continuous input, the sorted switching points of every split on it. Each
    split's gap stays within half the distance to its neighbours, so a point on one
    side of a split is never inside another split's gap: the threshold formulation
    (which excludes every gap) and the leaf formulation (only the gaps on the chosen
    paths) then have the same feasible points, hence the same optimum."""
    out: list[np.ndarray | None] = []
    for j, grid in enumerate(grids):
        betas = {_boundary(float(theta), ensemble.rule, ensemble.float32)
                 for tree in ensemble.trees for theta in tree.threshold[tree.feature == j]}
        out.append(np.array(sorted(betas)) if grid is None and betas else None)
    return out


def _reachable_splits(tree: Tree, rule: str, bounds: Bounds, grids: Sequence[Grid],
                      eps: Sequence[float], float32: bool,
                      supports: Sequence[np.ndarray | None],
                      boundaries: Sequence[np.ndarray | None]
                      ) -> tuple[list[int], list[tuple], dict[int, dict]]:
    """Reachable leaves, per reachable internal node (node, input, left-max, right-min,
    left leaves, right leaves), and per leaf its box (input -> (lo, hi) on its path),
    by interval propagation from the root."""
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
        h, r = _split_sides(float(tree.threshold[node]), rule, grids[j], eps[j], float32,
                            supports[j], boundaries[j])
        below = above = []
        if h >= lo:
            below = visit(int(tree.left[node]), {**box, j: (lo, min(hi, h))})
        if r <= hi:
            above = visit(int(tree.right[node]), {**box, j: (max(lo, r), hi)})
        splits.append((node, j, h, r, below, above))
        return below + above

    visit(0, {})
    return leaves, splits, boxes


@register_formulation(TreeEnsemble)
def _build_trees(block: pyo.Block, name: str, ensemble: TreeEnsemble, bounds: Bounds,
                 grids: Sequence[Grid] | None = None,
                 supports: Sequence[np.ndarray | None] | None = None,
                 split_epsilon: float = SPLIT_EPSILON,
                 formulation: str = "leaf") -> pyo.Block:
    n, k = ensemble.n_inputs, ensemble.n_outputs
    if formulation not in FORMULATIONS:
        raise ValueError(f"unknown tree formulation {formulation!r}; use one of {FORMULATIONS}")
    grids = list(grids) if grids is not None else [None] * n
    supports = list(supports) if supports is not None else [None] * n
    boundaries = _boundaries(ensemble, grids)
    eps = [split_epsilon * max(ub - lb, 1e-12) for lb, ub in bounds]
    structure = [_reachable_splits(tree, ensemble.rule, bounds, grids, eps, ensemble.float32,
                                   supports, boundaries) for tree in ensemble.trees]
    sub = pyo.Block()
    block.add_component(name, sub)
    sub.formulation = formulation
    sub.inputs = pyo.Var(range(n), bounds=lambda _, i: bounds[i])
    sub.LEAVES = pyo.Set(initialize=[(t, leaf) for t, (leaves, *_) in enumerate(structure)
                                     for leaf in leaves], dimen=2, ordered=True)
    sub.leaf = pyo.Var(sub.LEAVES, domain=pyo.Binary if formulation == "leaf" else pyo.UnitInterval)
    #: per leaf, the input intervals on its path: {(tree, leaf): {input: (lo, hi)}}
    sub.leaf_boxes = {(t, leaf): box for t, (_, _, boxes) in enumerate(structure)
                      for leaf, box in boxes.items()}
    sub.one_leaf = pyo.Constraint(range(len(structure)), rule=lambda s, t: sum(
        s.leaf[t, leaf] for leaf in structure[t][0]) == 1)
    sides: dict[int, set[tuple[float, float]]] = {}
    for _, splits, _ in structure:
        for _, j, h, r, _, _ in splits:
            sides.setdefault(j, set()).add((h, r))
    #: per input, the values just left / right of every split on it (sorted)
    sub.split_values = {j: np.array(sorted({v for pair in p for v in pair}))
                        for j, p in sides.items()}
    if formulation == "leaf":
        _link_leaves(sub, structure, bounds)
    else:
        _link_thresholds(sub, structure, bounds, sides)
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
    return sub


def _link_leaves(sub: pyo.Block, structure: list, bounds: Bounds) -> None:
    """Leaf formulation: each split constrains the input when a leaf below it is chosen."""
    left_rows, right_rows = [], []
    for t, (_, splits, _) in enumerate(structure):
        for node, j, h, r, below, above in splits:
            lb, ub = bounds[j]
            if below and h < ub:
                left_rows.append((t, node, j, h, ub, below))
            if above and r > lb:
                right_rows.append((t, node, j, r, lb, above))
    sub.split_left = pyo.Constraint(
        [(t, node) for t, node, *_ in left_rows],
        rule=_rule({(t, node): row for t, node, *row in left_rows}, left=True))
    sub.split_right = pyo.Constraint(
        [(t, node) for t, node, *_ in right_rows],
        rule=_rule({(t, node): row for t, node, *row in right_rows}, left=False))


def _link_thresholds(sub: pyo.Block, structure: list, bounds: Bounds,
                     sides: dict[int, set[tuple[float, float]]]) -> None:
    """Threshold formulation (Mišić 2020, eqs. 2b-2g): a binary per distinct split of
    each input, ordered, tied to the input by big-M; leaves continuous."""
    order = {j: sorted(pairs) for j, pairs in sides.items()}
    index = {(j, pair): q for j, pairs in order.items() for q, pair in enumerate(pairs)}
    sub.THRESHOLDS = pyo.Set(initialize=[(j, q) for j in sorted(order)
                                         for q in range(len(order[j]))], dimen=2, ordered=True)
    sub.left_of = pyo.Var(sub.THRESHOLDS, domain=pyo.Binary)
    #: per split binary, (largest value going left, smallest going right)
    sub.threshold_sides = {(j, q): order[j][q] for j, q in sub.THRESHOLDS}

    def below(s: pyo.Block, j: int, q: int) -> object:  # left_of = 1 => x_j <= h
        h, _ = order[j][q]
        ub = bounds[j][1]
        return pyo.Constraint.Skip if h >= ub else \
            s.inputs[j] <= h + (ub - h) * (1 - s.left_of[j, q])

    def above(s: pyo.Block, j: int, q: int) -> object:  # left_of = 0 => x_j >= r
        _, r = order[j][q]
        lb = bounds[j][0]
        return pyo.Constraint.Skip if r <= lb else s.inputs[j] >= r - (r - lb) * s.left_of[j, q]

    sub.threshold_below = pyo.Constraint(sub.THRESHOLDS, rule=below)
    sub.threshold_above = pyo.Constraint(sub.THRESHOLDS, rule=above)
    sub.threshold_order = pyo.Constraint(
        [(j, q) for j, q in sub.THRESHOLDS if q + 1 < len(order[j])],
        rule=lambda s, j, q: s.left_of[j, q] <= s.left_of[j, q + 1])
    rows = [(t, node, index[j, (h, r)], j, below_, above_)
            for t, (_, splits, _) in enumerate(structure)
            for node, j, h, r, below_, above_ in splits]
    by_node = {(t, node): (q, j, below_, above_) for t, node, q, j, below_, above_ in rows}
    sub.split_left = pyo.Constraint(
        [(t, node) for t, node, _, _, below_, _ in rows if below_],
        rule=lambda s, t, node: _leaf_sum(s, t, by_node[t, node][2]) <= s.left_of[
            by_node[t, node][1], by_node[t, node][0]])
    sub.split_right = pyo.Constraint(
        [(t, node) for t, node, _, _, _, above_ in rows if above_],
        rule=lambda s, t, node: _leaf_sum(s, t, by_node[t, node][3]) <= 1 - s.left_of[
            by_node[t, node][1], by_node[t, node][0]])


def _leaf_sum(s: pyo.Block, t: int, leaves: list[int]) -> object:
    return sum(s.leaf[t, leaf] for leaf in leaves)


def _rule(rows: dict, left: bool):
    def rule(s: pyo.Block, t: int, node: int) -> object:
        j, side, bound, leaves = rows[t, node]
        chosen = sum(s.leaf[t, leaf] for leaf in leaves)
        if left:  # x_j <= h + (ub - h)(1 - chosen)
            return s.inputs[j] <= side + (bound - side) * (1 - chosen)
        return s.inputs[j] >= side - (side - bound) * (1 - chosen)

    return rule


def in_split_gap(ensemble: TreeEnsemble, Z: np.ndarray, bounds: Bounds,
                 grids: Sequence[Grid] | None = None,
                 supports: Sequence[np.ndarray | None] | None = None,
                 split_epsilon: float = SPLIT_EPSILON) -> np.ndarray:
    """Rows of ``Z`` lying strictly between the two sides of some split on a continuous
    input: outside the encoding's domain by design (a counterfactual never lands there)."""
    grids = list(grids) if grids is not None else [None] * ensemble.n_inputs
    supports = list(supports) if supports is not None else [None] * ensemble.n_inputs
    boundaries = _boundaries(ensemble, grids)
    Z = np.atleast_2d(Z)
    gap = np.zeros(len(Z), dtype=bool)
    for tree in ensemble.trees:
        for node in np.flatnonzero(tree.feature >= 0):
            j = int(tree.feature[node])
            if grids[j] is not None:
                continue
            lb, ub = bounds[j]
            h, r = _split_sides(float(tree.threshold[node]), ensemble.rule, None,
                                split_epsilon * max(ub - lb, 1e-12), ensemble.float32,
                                supports[j], boundaries[j])
            gap |= (Z[:, j] > h) & (Z[:, j] < r)
    return gap
