r"""Tree ensembles as a MILP block, shared by every tree family (Mišić 2020, eqs. 2b-2g).

**Cuts.** Every split of the ensemble on input :math:`j` switches sides at one point of
that input; the distinct switching points of input :math:`j`, sorted, are its *cuts*
:math:`q = 1..Q_j`. A binary :math:`s_{j,q}` (``left_of[j, q]``) is 1 iff the input lies
left of cut :math:`q`, so every tree that splits there takes the same side:

.. math:: \frac{x_j - L_{j,q}}{w_j} \le \frac{u_j - L_{j,q}}{w_j}(1 - s_{j,q}), \qquad
          \frac{R_{j,q} - x_j}{w_j} \le \frac{R_{j,q} - \ell_j}{w_j}\,s_{j,q}, \qquad
          s_{j,q} \le s_{j,q+1}

(rows divided by the input's width :math:`w_j = u_j - \ell_j`, so the solver's
tolerances act on every input at the same relative scale, whatever its units), where
:math:`[\ell_j, u_j]` are the input's bounds and :math:`L_{j,q}`, :math:`R_{j,q}` the
largest value the MILP sends left and the smallest it sends right:

* inputs on a grid (integer, binary, ordinal codes and one-hot columns; ``input_grids``):
  the grid values on either side of the threshold :math:`\theta` — exact. A grid value
  within rounding of :math:`\theta` takes the side of the library's own computation of
  it (``library_input``);
* continuous inputs: the switching point :math:`\beta` (:math:`\theta`, or for
  libraries that compare ``float32(x)``, the midpoint between the last float32 going
  left and the next one) with :math:`L = \beta + \delta_j`, :math:`R = \beta - \delta_j`,
  where :math:`\delta_j` (``input_rounding``) bounds the difference between the
  library's own computation of the input (e.g. ``(x - shift) / scale``) and the MILP's
  affine expression. The sides overlap by :math:`2\delta_j` (a few float64 ulps), so
  the MILP is a *relaxation* of the library's decision: every point keeps the side the
  library gives it, and the solver's bound is a valid bound. Which side a point within
  :math:`\delta_j` of :math:`\beta` takes is settled when decoding
  (:meth:`TreePredictorConstr.input_region`).

There is no gap between the two sides: a solver's point that breaks a cut side by its
feasibility or integrality tolerance is moved, when decoded, into the box of the
sides it chose (:meth:`TreePredictorConstr.input_region`: the largest value
*surely* going left is :math:`\beta - \delta_j`, the smallest surely going right
:math:`\beta + \delta_j`), where the library's trees reach exactly the leaves the
MILP chose.

**Leaves.** For tree :math:`t` with reachable leaves :math:`\mathcal L_t`,
:math:`y_{t,l} \in \{0, 1\}` (``formulation="leaf"``, default) or :math:`[0, 1]`
(``"threshold"``: integral once the cuts are) with :math:`\sum_{l} y_{t,l} = 1`; an
internal node :math:`n` at cut :math:`q(n)` with left leaves :math:`A(n)` and right
leaves :math:`B(n)` imposes :math:`\sum_{A(n)} y \le s_{q(n)}` and
:math:`\sum_{B(n)} y \le 1 - s_{q(n)}` (no big-M). Leaves unreachable under the input
bounds are dropped before building. An ensemble whose rows would hold more than
``PER_QUERY_TERMS`` terms (a default random forest: ~1.3e7) is built per query instead,
on the leaves within a verified heuristic's radius of the factual, in flow form
(:mod:`.tree_regions`, with the exactness argument). Outputs:
:math:`\text{out}_k = \text{init}_k + \sum_{t,l} v_{t,l,k}\, y_{t,l}` (Mišić 2020;
CE-OCL §3).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyomo.environ as pyo

from ..models import ModelAdapter
from ..models.trees import PER_QUERY_TERMS, Tree, TreeEnsemble
from .predictors import Bounds, PredictorConstr, register_formulation

if TYPE_CHECKING:
    from .tree_regions import QueryRegion

Grid = tuple[float, float] | None

#: a solver may put an input this far (x its width) beyond a cut side it chose: 10x the
#: largest default integrality tolerance of the supported solvers (Gurobi 1e-5, which
#: ``solver_options`` may restore; cfopt sets 1e-7) times the unit
#: big-M of the normalized cut rows; the factual's side of a cut this close is settled
#: exactly (:meth:`TreePredictorConstr.set_factual_inputs`)
TOLERANCE_BAND = 1e-4
#: ``"leaf"`` (binary leaves) or ``"threshold"`` (continuous leaves)
FORMULATIONS = ("leaf", "threshold")
_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class Cut:
    """One distinct switching point of an input.

    The MILP sends an input value ``<= left`` left and ``>= right`` right (overlapping
    by the input's rounding on continuous inputs); the library surely sends values
    ``<= sure_left`` left and ``>= sure_right`` right. ``theta``, ``rule`` and
    ``float32`` reproduce the library's own decision for any value."""

    input: int
    left: float
    right: float
    sure_left: float
    sure_right: float
    theta: float
    rule: str
    float32: bool

    def goes_left(self, value: float) -> bool:
        """The library's decision for the model-input value ``value``."""
        return _goes_left(value, self.theta, self.rule, self.float32)


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


def _grid_sides(theta: float, rule: str, grid: tuple[float, float], float32: bool,
                rounding: float, library_value: Callable[[float], float] | None = None
                ) -> tuple[float, float]:
    """(last grid value going left, first going right) of a split on a grid input.

    A grid value within the input's rounding of ``theta`` may fall on either side of it
    in the library's own arithmetic (``(code - shift) / scale`` against the MILP's
    ``offset + code * step``; histogram boosting's thresholds can be such values):
    ``library_value`` gives the library's value of that input, else ``theta``'s side is
    taken."""
    offset, step = grid
    k = math.floor((theta - offset) / step)
    for cand in (k + 1, k, k - 1, k - 2):  # the last grid value that goes left
        value = offset + cand * step
        seen = value
        if abs(value - theta) <= rounding + 4 * _EPS * abs(theta):
            seen = theta if library_value is None else library_value(value)
        if _goes_left(seen, theta, rule, float32):
            return value, offset + (cand + 1) * step
    raise AssertionError(f"no grid value near threshold {theta} goes left")


def make_cut(j: int, theta: float, rule: str, float32: bool, grid: Grid, rounding: float,
             library_value: Callable[[float], float] | None = None) -> Cut:
    """The cut of a split of input ``j`` at ``theta`` (module docstring)."""
    if grid is not None:
        h, r = _grid_sides(theta, rule, grid, float32, rounding, library_value)
        return Cut(j, h, r, h, r, theta, rule, float32)
    beta = _boundary(theta, rule, float32)
    delta = rounding + 4 * _EPS * abs(beta)
    return Cut(j, beta + delta, beta - delta, beta - delta, beta + delta, theta, rule,
               float32)


def default_rounding(bounds: Bounds) -> list[float]:
    """Per input, the rounding of an input computed directly from raw values (no
    shift): a few ulps of its largest magnitude."""
    return [16 * _EPS * max(abs(lb), abs(ub)) for lb, ub in bounds]


class TreePredictorConstr(PredictorConstr):
    """A tree ensemble's block; decodes the solver's discrete choice (the cut sides)
    into the box of model inputs where the library reaches the chosen leaves."""

    def __init__(self, block: pyo.Block, adapter: ModelAdapter) -> None:
        super().__init__(block, adapter)
        self._fixed: list[tuple[Any, tuple]] = []
        #: per-query blocks: the caller builds each factual's region
        #: (:func:`cfopt.tree_pruning.build_query_region`); else the region of the whole
        #: input box is built once, at the first factual
        self.deferred = False
        self._factual_key: tuple | None = None
        self._region_key: tuple | str | None = None

    @property
    def per_query(self) -> bool:
        """Whether the leaves are built per query (:mod:`.tree_regions`)."""
        return self.block.per_query

    def build_region(self, region: QueryRegion, deadline: float = math.inf) -> int:
        """Build the leaves ``region`` keeps (per-query blocks), for the current factual;
        returns their number. Raises :class:`~.tree_regions.RegionTooLarge` past
        ``deadline`` (``time.perf_counter()``), leaving the block without leaves."""
        from .tree_regions import build_region, clear_region, search

        b = self.block
        clear_region(b)
        self._fixed = []
        self._region_key = None
        kept = build_region(b, b.ensemble, b.index, search(b.ensemble, b.index, region,
                                                           deadline), b.bounds)
        self._region_key = "box" if self._factual_key is None else self._factual_key
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
            left = pyo.value(b.left_of[key]) >= 0.5
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
            if cut.sure_left < value < cut.sure_right:
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
            from .tree_regions import QueryRegion, clear_region

            self._factual_key = key = (tuple(library_inputs), tuple(milp_inputs),
                                       tuple(movable))
            if self.deferred and self._region_key != key:
                clear_region(b)  # the caller builds this factual's region
                self._fixed, self._region_key = [], None
                return []
            if not self.deferred and self._region_key is None:
                self.build_region(QueryRegion(list(b.bounds)))
                self._region_key = "box"
        for var, (lb, ub) in self._fixed:
            var.setlb(lb)
            var.setub(ub)
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
                var.setub(1 if left else 0)
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


@register_formulation(TreeEnsemble, TreePredictorConstr)
def _build_trees(block: pyo.Block, name: str, ensemble: TreeEnsemble, bounds: Bounds,
                 grids: Sequence[Grid] | None = None,
                 rounding: Sequence[float] | None = None,
                 library_input: Callable[[int, float], float] | None = None,
                 formulation: str = "leaf", per_query: bool | None = False) -> pyo.Block:
    """The block of module docstring; ``per_query``: ``True`` builds the inputs, the
    outputs and the index of the splits only, the leaves of each query being built by
    :meth:`TreePredictorConstr.build_region` (:mod:`.tree_regions`); ``None`` does so
    when the leaf rows would hold more than ``PER_QUERY_TERMS`` terms."""
    n, k = ensemble.n_inputs, ensemble.n_outputs
    if formulation not in FORMULATIONS:
        raise ValueError(f"unknown tree formulation {formulation!r}; use one of {FORMULATIONS}")
    grids = list(grids) if grids is not None else [None] * n
    rounding = list(rounding) if rounding is not None else default_rounding(bounds)
    from .tree_regions import leaf_depth_sum

    if per_query or (per_query is None and leaf_depth_sum(ensemble) > PER_QUERY_TERMS):
        return _build_per_query(block, name, ensemble, bounds, grids, rounding,
                                library_input, formulation)
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
            key_of[int(node)] = cut.sure_left  # one key per distinct switching point
            cuts.setdefault((j, cut.sure_left), cut)
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
    sub.inputs = pyo.Var(range(n), bounds=lambda _, i: bounds[i])
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
    return sub


def add_cut_rows(sub: pyo.Block, bounds: Bounds) -> None:
    """The binaries of ``sub.cuts``, their ties to the inputs (rows scaled by the input's
    width) and their order (module docstring)."""
    sub.CUTS = pyo.Set(initialize=sorted(sub.cuts), dimen=2, ordered=True)
    sub.left_of = pyo.Var(sub.CUTS, domain=pyo.Binary)

    def width(j: int) -> float:
        lb, ub = bounds[j]
        return max(ub - lb, 1e-12)

    def below(s: pyo.Block, j: int, q: int) -> object:  # left_of = 1 => x_j <= L
        side, ub = sub.cuts[j, q].left, bounds[j][1]
        if side >= ub:
            return pyo.Constraint.Skip
        w = width(j)
        return (s.inputs[j] - side) / w <= (ub - side) / w * (1 - s.left_of[j, q])

    def above(s: pyo.Block, j: int, q: int) -> object:  # left_of = 0 => x_j >= R
        side, lb = sub.cuts[j, q].right, bounds[j][0]
        if side <= lb:
            return pyo.Constraint.Skip
        w = width(j)
        return (side - s.inputs[j]) / w <= (side - lb) / w * s.left_of[j, q]

    sub.cut_below = pyo.Constraint(sub.CUTS, rule=below)
    sub.cut_above = pyo.Constraint(sub.CUTS, rule=above)
    sub.cut_order = pyo.Constraint(
        [(j, q) for j, q in sub.CUTS if (j, q + 1) in sub.cuts],
        rule=lambda s, j, q: s.left_of[j, q] <= s.left_of[j, q + 1])


def _build_per_query(block: pyo.Block, name: str, ensemble: TreeEnsemble, bounds: Bounds,
                     grids: list[Grid], rounding: list[float],
                     library_input: Callable[[int, float], float] | None,
                     formulation: str) -> pyo.Block:
    """Inputs, outputs (bounded over every leaf) and the split index; no leaves yet."""
    from .tree_regions import build_index

    sub = pyo.Block()
    block.add_component(name, sub)
    sub.formulation = formulation
    sub.per_query = True
    sub.index = build_index(ensemble, grids, rounding, library_input)
    sub.ensemble = ensemble
    sub.bounds = list(bounds)
    sub.split_values = sub.index.split_values
    sub.cuts = {}
    sub.factual_left = {}
    sub.inputs = pyo.Var(range(ensemble.n_inputs), bounds=lambda _, i: bounds[i])
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
