r"""The cuts of a tree ensemble: where each split switches sides, and the binaries that
tie the model's inputs to them (shared by the full ensemble block of :mod:`.trees` and
the per-query trees of :mod:`.tree_regions`).

**Cuts.** Every split of the ensemble on input :math:`j` switches sides at one point of
that input; the distinct switching points of input :math:`j`, sorted, are its *cuts*
:math:`q = 1..Q_j`. A binary :math:`s_{j,q}` (``left_of[j, q]``) is 1 iff the input lies
left of cut :math:`q`, so every tree that splits there takes the same side:

.. math:: \frac{x_j - L_{j,q}}{w_j} \le \frac{u_j - L_{j,q}}{w_j}(1 - s_{j,q}), \qquad
          \frac{R_{j,q} - x_j}{w_j} \le \frac{R_{j,q} - \ell_j}{w_j}\,s_{j,q}, \qquad
          s_{j,q} \le s_{j,q+1}

(rows divided by the input's width :math:`w_j = u_j - \ell_j` and written on the
block's variable :math:`t_j = (x_j - \ell_j) / w_j \in [0, 1]`, so the solver's
tolerances act on every input at the same relative scale and no row carries the
input's raw magnitude, whatever its units), where
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
  (:meth:`.trees.TreePredictorConstr.input_region`).

There is no gap between the two sides: a solver's point that breaks a cut side by its
feasibility or integrality tolerance is moved, when decoded, into the box of the
sides it chose (:meth:`.trees.TreePredictorConstr.input_region`: the largest value
*surely* going left is :math:`\beta - \delta_j`, the smallest surely going right
:math:`\beta + \delta_j`), where the library's trees reach exactly the leaves the
MILP chose.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo

from ..space.encoding import Bounds, Grid, unit_box

#: a solver may put an input this far (x its width) beyond a cut side it chose: 10x the
#: largest default integrality tolerance of the supported solvers (Gurobi 1e-5, which
#: ``solver_options`` may restore; cfopt sets 1e-7) times the unit
#: big-M of the normalized cut rows; the factual's side of a cut this close is settled
#: exactly (:meth:`.trees.TreePredictorConstr.set_factual_inputs`)
TOLERANCE_BAND = 1e-4
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


def switch_key(cut: Cut) -> float:
    r"""The switching point ``cut`` stands for, which identifies it among the cuts of its
    input: where its MILP sides do not overlap (a grid input: thresholds between the
    same two grid values are one cut), its last value going left; otherwise the
    boundary :math:`\beta`. Not the sure sides :math:`\beta \pm \delta_j`: two
    boundaries closer than :math:`\delta_j` have the same sure sides in float64
    (LightGBM's zero band at :math:`\pm 10^{-35}`), and one binary for both would lose
    the values between them (differential seed 142978)."""
    if cut.left == cut.sure_left:
        return cut.sure_left
    return _boundary(cut.theta, cut.rule, cut.float32)


def default_rounding(bounds: Bounds) -> list[float]:
    """Per input, the rounding of an input computed directly from raw values (no
    shift): a few ulps of its largest magnitude."""
    return [16 * _EPS * max(abs(lb), abs(ub)) for lb, ub in bounds]


def add_cut_rows(sub: pyo.Block, bounds: Bounds) -> None:
    """The binaries of ``sub.cuts``, their ties to the block's inputs (the model inputs
    normalized to their box ``bounds``, so every row is in units of the input's width)
    and their order (module docstring)."""
    sub.CUTS = pyo.Set(initialize=sorted(sub.cuts), dimen=2, ordered=True)
    sub.left_of = pyo.Var(sub.CUTS, domain=pyo.Binary)
    lo, width = unit_box(bounds)

    def below(s: pyo.Block, j: int, q: int) -> object:  # left_of = 1 => x_j <= L
        side, ub = sub.cuts[j, q].left, bounds[j][1]
        if side >= ub:
            return pyo.Constraint.Skip
        w = float(width[j])
        return s.inputs[j] - (side - lo[j]) / w <= (ub - side) / w * (1 - s.left_of[j, q])

    def above(s: pyo.Block, j: int, q: int) -> object:  # left_of = 0 => x_j >= R
        side, lb = sub.cuts[j, q].right, bounds[j][0]
        if side <= lb:
            return pyo.Constraint.Skip
        w = float(width[j])
        return (side - lb) / w - s.inputs[j] <= (side - lb) / w * s.left_of[j, q]

    sub.cut_below = pyo.Constraint(sub.CUTS, rule=below)
    sub.cut_above = pyo.Constraint(sub.CUTS, rule=above)
    sub.cut_order = pyo.Constraint(
        [(j, q) for j, q in sub.CUTS if (j, q + 1) in sub.cuts],
        rule=lambda s, j, q: s.left_of[j, q] <= s.left_of[j, q + 1])
