r"""The features of a counterfactual query as CP-SAT variables over threshold levels.

OCEAN's CP model (Parmentier & Vidal 2021, "Optimal counterfactual explanations in tree
ensembles", ICML, §4) needs no continuous variable: the split thresholds of a numeric
feature cut its actionable range into intervals (*levels*), every point of a level
takes the same side of every split, and the cheapest point of a level under a separable
objective is the factual projected onto it. Here:

* **Numeric feature** :math:`f` (continuous, integer, binary, ordinal; any affine model
  inputs :math:`z_k = a_k v + b_k` of its code :math:`v`): every split on one of its
  inputs becomes a *break* in code space, with the side the MILP admits below
  (``low_end``) and above (``high_start``) and the sides the library surely takes
  (``sure_low_end``, ``sure_high_start``: :func:`cfopt.formulations.trees.make_cut`'s,
  which already hold the library's float32 comparison, its strictness and the
  preprocessing's rounding). An integer variable :math:`\ell_f \in \{0..P\}` counts the
  breaks below the point. A level's cost is :math:`w_f` times the distance from the
  factual to its interval with the MILP's sides (overlapping by the rounding, so a lower
  bound), the factual's own level :math:`\ell^0_f` (where the library sends the
  factual) costs 0; the decoded point is the factual (own level) or its projection on
  the sure sides, an integer code for integral features.
* **Categorical feature**: one boolean per category, exactly one true; a split on an
  indicator or ordinal-code input is true for the categories whose input value goes
  left.

Actionability restricts the levels (:meth:`Feature.actionable_range`: immutable,
increase- and decrease-only), as read from the MILP's own components so that a
diagnosis that deactivates one relaxes it here too.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from ...formulations.tree_regions import ForestIndex
from ...space.feature import Feature

#: an interval end this close to an integer code is that code
_INTEGRAL = 1e-7
#: a split's end in codes this close, relative to the feature's magnitude, to an integer
#: code is that code (float64 rounding of the affine inputs; 1e-7 relative to the end
#: reached whole codes above 1e7: a split of codes near 5e7 put five codes the library
#: sends right on the low side)
_CODE_ROUNDING = 1e-12
#: a decoded continuous point stays this many ulps of the feature's magnitude inside a
#: level whose end is a split (mapping the sure side back to a code may round by an ulp)
INSIDE = 64 * float(np.finfo(np.float64).eps)


@dataclass
class Break:
    """A point of code space where splits switch sides: the MILP admits codes
    ``<= low_end`` below and ``>= high_start`` above; the library surely sends codes
    ``<= sure_low_end`` / ``>= sure_high_start`` there. ``cuts``: the splits (cut id of
    the :class:`ForestIndex`, input, whether the input's left side is the low side)."""

    low_end: float
    high_start: float
    sure_low_end: float
    sure_high_start: float
    cuts: list[tuple[int, int, bool]] = field(default_factory=list)


@dataclass
class NumericLevels:
    """A numeric feature's levels: ``breaks`` sorted, the factual's code ``x0`` and
    level ``own``, the admissible codes ``[lo, hi]``, the weight ``w``."""

    feature: Feature
    x0: float
    own: int
    lo: float
    hi: float
    w: float
    breaks: list[Break]

    @property
    def n_levels(self) -> int:
        return len(self.breaks) + 1

    def interval(self, level: int, sure: bool) -> tuple[float, float]:
        """The codes of ``level`` (the MILP's sides, or the library's sure ones) within
        the admissible codes; empty when ``lo > hi``."""
        start = self.lo if level == 0 else (self.breaks[level - 1].sure_high_start if sure
                                            else self.breaks[level - 1].high_start)
        end = self.hi if level == len(self.breaks) else (
            self.breaks[level].sure_low_end if sure else self.breaks[level].low_end)
        lo, hi = max(self.lo, start), min(self.hi, end)
        if self.feature.is_integral:
            lo, hi = math.ceil(lo - _INTEGRAL), math.floor(hi + _INTEGRAL)
        return lo, hi

    def admissible(self) -> list[int]:
        """The factual's level and the others with an admissible code on their side of
        the factual's: the library's level is monotone in the code (its inputs are, and
        so are its rounding and comparisons) and the factual's is ``own``, so a point of
        a level above lies above the factual's code, even within rounding of a split
        (where the MILP's sides of the two levels overlap)."""
        out = []
        for level in range(self.n_levels):
            lo, hi = self.interval(level, sure=False)
            if level == self.own or (lo <= hi and (hi > self.x0 if level > self.own
                                                   else lo < self.x0)):
                out.append(level)
        return out

    def distance(self, level: int) -> float:
        """The weighted distance from the factual to ``level`` (a lower bound)."""
        if level == self.own:
            return 0.0
        lo, hi = self.interval(level, sure=False)
        return self.w * max(0.0, lo - self.x0, self.x0 - hi)

    def decode(self, level: int) -> float:
        """The code of the cheapest point of ``level`` the library surely sends there."""
        if level == self.own:
            return self.x0
        lo, hi = self.interval(level, sure=True)
        if lo > hi:  # splits within rounding of each other: the MILP's sides
            lo, hi = self.interval(level, sure=False)
        v = min(max(self.x0, lo), hi)
        if not self.feature.is_integral:  # off a split's end, never past the middle
            f = self.feature
            inside = min(INSIDE * max(abs(f.lower), abs(f.upper), f.upper - f.lower),
                         (hi - lo) / 2)
            if v == lo and level > 0:
                v = lo + inside
            elif v == hi and level < len(self.breaks):
                v = hi - inside
        return v

    def level_of(self, inputs: np.ndarray, index: ForestIndex) -> int:
        """The level the library sends model inputs ``inputs`` to (the breaks whose low
        side it does not take, which come first)."""
        above = [not _library_low(b, inputs, index) for b in self.breaks]
        level = sum(above)
        if any(above[level:]):
            raise AssertionError(f"feature {self.feature.name!r}: the library's sides of "
                                 f"its splits are not monotone in its code")
        return level


@dataclass
class CategoryLevels:
    """A categorical feature: the factual's category ``own`` and the admissible
    categories (indices into ``feature.categories``)."""

    feature: Feature
    own: int
    allowed: list[int]


def _library_low(brk: Break, inputs: np.ndarray, index: ForestIndex) -> bool:
    """Whether the library sends ``inputs`` to the low side of ``brk``."""
    c, k, left_is_low = brk.cuts[0]
    return index.cut(c).goes_left(float(inputs[k])) == left_is_low


def numeric_levels(f: Feature, inputs: list[tuple[int, float, float]], cuts: list[int],
                   index: ForestIndex, x0: float, range_: tuple[float, float], w: float,
                   library_inputs: np.ndarray) -> NumericLevels:
    """The levels of numeric feature ``f`` (model inputs ``(k, a, b)``: ``a * code + b``)
    for the splits ``cuts`` (cut ids of ``index`` on those inputs)."""
    coef = {k: (a, b) for k, a, b in inputs}
    breaks: dict[tuple[float, float], Break] = {}
    for c in cuts:
        k = int(index.cut_input[c])
        a, b = coef[k]
        ends = [(float(v) - b) / a for v in (index.cut_left[c], index.cut_right[c],
                                              index.cut_sure_left[c], index.cut_sure_right[c])]
        if a < 0:  # the input's right side is the low side of the code
            ends = [ends[1], ends[0], ends[3], ends[2]]
        switch = float(index.cut_switch[c])  # one break per switching point: in codes,
        key = ((switch - b) / a, math.copysign(1.0, a) * switch)  # then in inputs, whose
        # resolution separates points closer than a code's ulp (LightGBM's zero band)
        if f.is_integral:
            magnitude = max(1.0, abs(f.lower), abs(f.upper))
            last = math.floor(ends[2] + _CODE_ROUNDING * magnitude)
            ends = [last, last + 1, last, last + 1]
            key = (last, 0.0)  # pragma: no mutate (any constant dedups and sorts alike)
        brk = breaks.setdefault(key, Break(*ends))
        brk.cuts.append((c, k, a > 0))
    levels = NumericLevels(f, x0, 0, range_[0], range_[1], w,
                           [breaks[key] for key in sorted(breaks)])
    levels.own = levels.level_of(library_inputs, index)
    return levels


def category_levels(f: Feature, own: int, immutable: bool) -> CategoryLevels:
    """The categories of ``f`` a counterfactual may take (``own`` only when immutable)."""
    allowed = [own] if immutable else list(range(len(f.categories)))
    return CategoryLevels(f, own, allowed)


def goes_left(index: ForestIndex, c: int, value: float) -> bool:
    """The side of cut ``c`` of an input on a grid at ``value`` (a grid value: strictly
    on one side of the cut's sure ends)."""
    return value <= (index.cut_sure_left[c] + index.cut_sure_right[c]) / 2


def actionable(f: Feature, x0: float, immutable: bool, direction: str) -> tuple[float, float]:
    """``f``'s admissible codes with the actionability still in force."""
    return dataclasses.replace(f, immutable=immutable, direction=direction).actionable_range(x0)
