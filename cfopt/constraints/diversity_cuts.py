r"""Cuts that make the next counterfactual differ from those already found.

Iterative diversity (Leofante & Potyka 2024 §4; CE-OCL §4.4 names it the alternative
to solution pools) re-solves the counterfactual problem with one more cut per
counterfactual :math:`c^{(1)}, \dots, c^{(m)}` found so far. :class:`DiversityCuts`
is the constraint block holding those cuts; its methods add one cut each.

**Exact change indicators** (declared with the first no-good cut). ``changed[f]`` is 1
*iff* feature :math:`f` moves by at least :math:`\tau_f`, and 0 iff it stays: for a
numeric feature with range :math:`R_f = u_f - \ell_f`, :math:`\tau_f` =
``min_change`` × :math:`R_f` for a continuous one (default 1 %: a change smaller than
that is not a different way to reach the target, and without a floor the next member
differs by a change of 1e-5 of the range), and for an integral one one unit, or, with
``integers_too``, also ``min_change`` × :math:`R_f` (at least one unit: else the next
member differs by one euro of a credit amount), two direction binaries
:math:`p_f + n_f = \text{changed}_f`:

.. math:: x_f - \hat x_f \le R_f\,p_f,\quad \hat x_f - x_f \le R_f\,n_f,\quad
          x_f - \hat x_f \ge \tau_f p_f - R_f n_f,\quad
          \hat x_f - x_f \ge \tau_f n_f - R_f p_f

(unchanged ⇒ :math:`x_f = \hat x_f`; changed ⇒ :math:`|x_f - \hat x_f| \ge \tau_f`:
continuous moves in :math:`(0, \tau_f)` are excluded once a no-good cut exists);
for a categorical feature, the model's ``category_changed[f]`` (already exact).
Immutable features never change and get no indicator.

**No-good cut** on a set :math:`S` of changed features (Hamming distance ≥ h between
change patterns):

.. math:: \sum_{f \in S} (1 - \text{changed}_f) + \sum_{f \notin S} \text{changed}_f \ge h.

**Distance cut** to a point :math:`c` (weighted L1 ≥ :math:`\rho`): with
:math:`0 \le e_f \le |x_f - c_f|` through a side binary :math:`s_f`,
:math:`e_f \le x_f - c_f + 2R_f(1 - s_f)`, :math:`e_f \le c_f - x_f + 2R_f s_f`, and for a
categorical feature the exact :math:`1 - \text{onehot}_{f, c_f}`:

.. math:: \sum_{f\ \text{numeric}} w_f e_f + \sum_{f\ \text{categorical}} w_f
          (1 - \text{onehot}_{f, c_f}) \ge \rho.

The cuts are cleared at every new query (:meth:`update`), and :meth:`violations`
re-checks each on the decoded raw row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pandas as pd
import pyomo.environ as pyo

from ..space.space import FeatureSpace
from .blocks import ConstraintBlock, tolerance

if TYPE_CHECKING:
    from ..problem import CounterfactualModel

#: default smallest change of a continuous feature counted as a change by no-good cuts,
#: relative to its range
MIN_CHANGE = 0.01


def changed_features(space: FeatureSpace, factual: pd.Series, row: pd.Series) -> frozenset[str]:
    """Names of the features whose raw value differs between ``factual`` and ``row``."""
    return frozenset(f.name for f in space if factual[f.name] != row[f.name])


def weighted_l1(space: FeatureSpace, weights: Mapping[str, float], a: pd.Series,
                b: pd.Series) -> float:
    """:math:`\\sum_f w_f |a_f - b_f|` in raw codes; a category mismatch costs :math:`w_f`."""
    total = 0.0
    for f in space:
        d = float(a[f.name] != b[f.name]) if f.is_onehot else \
            abs(f.to_code(a[f.name]) - f.to_code(b[f.name]))
        total += weights[f.name] * d
    return total


def change_steps(space: FeatureSpace, names: list[str], min_change: float,
                 integers_too: bool = False) -> dict[str, float]:
    """The smallest move :math:`\tau_f` that counts as a change of each numeric feature
    of ``names`` (module docstring): ``min_change`` x its range, an integral one one unit
    (with ``integers_too``, also ``min_change`` x its range, at least one unit)."""
    out = {}
    for n in names:
        span = space[n].upper - space[n].lower
        out[n] = ((max(1.0, math.ceil(min_change * span - 1e-9)) if integers_too else 1.0)
                  if space[n].is_integral else min_change * span)
    return out


def small_moves(space: FeatureSpace, steps: Mapping[str, float], factual: pd.Series,
                row: pd.Series) -> list[str]:
    """The features of ``steps`` that ``row`` moves from ``factual`` by less than their
    step (the moves the exact change indicators exclude; with the declared blocks'
    :func:`~cfopt.constraints.blocks.tolerance`), in words."""
    out = []
    for n, step in steps.items():
        move = abs(space[n].to_code(row[n]) - space[n].to_code(factual[n]))
        if 0 < move < step - tolerance(space, n):
            out.append(f"{n} moves by {move:g}, less than the {step:g} that counts as a "
                       f"change")
    return out


def add_exact_change_indicators(m: CounterfactualModel, block: pyo.Block, min_change: float,
                                names: list[str] | None = None, *,
                                integers_too: bool = False) -> None:
    """Direction binaries ``block.up[f]``, ``block.down[f]`` of the mutable numeric
    features (``names``, default all): their sum is 1 iff :math:`|x_f - \\hat x_f| \\ge
    \\tau_f` and 0 iff :math:`x_f = \\hat x_f` (see the module docstring);
    ``integers_too``: an integral feature's :math:`\\tau_f` is also ``min_change`` of its
    range (at least one unit), else one unit."""
    space = m.space
    mutable = [n for n in (m.NUMERIC if names is None else names) if not space[n].immutable]
    span = {n: space[n].upper - space[n].lower for n in mutable}
    step = change_steps(space, mutable, min_change, integers_too)
    block.MUTABLE = pyo.Set(initialize=mutable, ordered=True)
    block.up = pyo.Var(block.MUTABLE, domain=pyo.Binary)
    block.down = pyo.Var(block.MUTABLE, domain=pyo.Binary)
    block.one_way = pyo.Constraint(block.MUTABLE, rule=lambda b, n: b.up[n] + b.down[n] <= 1)
    block.up_link = pyo.Constraint(block.MUTABLE, rule=lambda b, n:
                                   m.x[n] - m.x0[n] <= span[n] * b.up[n])
    block.down_link = pyo.Constraint(block.MUTABLE, rule=lambda b, n:
                                     m.x0[n] - m.x[n] <= span[n] * b.down[n])
    block.up_min = pyo.Constraint(block.MUTABLE, rule=lambda b, n: m.x[n] - m.x0[n] >=
                                  step[n] * b.up[n] - span[n] * b.down[n])
    block.down_min = pyo.Constraint(block.MUTABLE, rule=lambda b, n: m.x0[n] - m.x[n] >=
                                    step[n] * b.down[n] - span[n] * b.up[n])


class DiversityCuts(ConstraintBlock):
    """No-good and distance cuts against earlier counterfactuals (see the module).

    Args:
        weights: per-feature weights of the distance cuts (default: the model's
            objective weights).
        min_change: smallest move of a continuous feature, relative to its range, that
            counts as a change for the no-good cuts; smaller moves are excluded once a cut
            exists.
        integers_too: the same for integral features (at least one unit); else any move
            of an integral feature counts.
        name: block name (default ``diversity``).
    """

    kind = "diversity"

    def __init__(self, weights: Mapping[str, float] | None = None, *,
                 min_change: float = MIN_CHANGE, integers_too: bool = False,
                 name: str | None = "diversity") -> None:
        super().__init__(name)
        if isinstance(min_change, bool) or not isinstance(min_change, (int, float)) or \
                not 1e-5 <= min_change <= 1:
            raise ValueError(f"min_change must be a fraction of the range in [1e-5, 1] (above "
                             f"the 1e-6 at which a decoded value snaps to the factual), got "
                             f"{min_change!r}")
        self.min_change = float(min_change)
        self.integers_too = bool(integers_too)
        self._weights = dict(weights) if weights is not None else None
        self._nogoods: list[tuple[frozenset[str], int]] = []
        self._distances: list[tuple[pd.Series, float]] = []

    def validate(self, space: FeatureSpace) -> None:
        if self._weights is not None:
            unknown = sorted(set(self._weights) - set(space.names))
            if unknown:
                raise ValueError(f"diversity weights given for unknown feature(s) {unknown}")

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        self._weights = {**m.weights, **(self._weights or {})}
        self._span = {n: m.space[n].upper - m.space[n].lower for n in m.NUMERIC}
        block.gap = pyo.VarList(domain=pyo.NonNegativeReals)
        block.side = pyo.VarList(domain=pyo.Binary)
        block.cuts = pyo.ConstraintList()

    def update(self, m: CounterfactualModel, block: pyo.Block) -> None:
        """A new query: drop the cuts of the previous one."""
        self._nogoods.clear()
        self._distances.clear()
        for name in ("cuts", "gap", "side"):
            block.del_component(name)
        block.gap = pyo.VarList(domain=pyo.NonNegativeReals)
        block.side = pyo.VarList(domain=pyo.Binary)
        block.cuts = pyo.ConstraintList()

    def _changed(self, m: CounterfactualModel, block: pyo.Block, name: str) -> object:
        if m.space[name].is_onehot:
            return m.category_changed[name]
        return block.up[name] + block.down[name]

    def add_nogood(self, m: CounterfactualModel, changed: frozenset[str],
                   hamming: int = 1) -> None:
        """The next counterfactual's set of changed features differs from ``changed``
        in at least ``hamming`` features."""
        block = m.component(self.name)
        if block.component("up") is None:
            add_exact_change_indicators(m, block, self.min_change,
                                        integers_too=self.integers_too)
        names = [n for n in m.space.names if not m.space[n].immutable]
        block.cuts.add(sum((1 - self._changed(m, block, n)) if n in changed
                           else self._changed(m, block, n) for n in names) >= hamming)
        self._nogoods.append((frozenset(changed), hamming))

    def add_distance(self, m: CounterfactualModel, point: pd.Series, radius: float) -> None:
        """The next counterfactual lies at weighted L1 distance ≥ ``radius`` from the raw
        row ``point``."""
        block = m.component(self.name)
        space, w = m.space, self._weights
        terms = []
        for f in space:
            if f.immutable or w[f.name] == 0:
                continue
            if f.is_onehot:
                terms.append(w[f.name] * (1 - m.onehot[f.name, point[f.name]]))
                continue
            c = f.to_code(point[f.name])
            big = 2 * self._span[f.name]
            e, s = block.gap.add(), block.side.add()
            e.setub(self._span[f.name])
            block.cuts.add(e <= m.x[f.name] - c + big * (1 - s))
            block.cuts.add(e <= c - m.x[f.name] + big * s)
            terms.append(w[f.name] * e)
        block.cuts.add(sum(terms) >= radius)
        self._distances.append((point.copy(), float(radius)))

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        space = m.space
        problems = []
        if self._nogoods:  # the exact change indicators exist
            mutable = [n for n in m.NUMERIC if not space[n].immutable]
            problems += [f"{self.name}: {p}" for p in small_moves(
                space, change_steps(space, mutable, self.min_change, self.integers_too),
                factual, row)]
        moved = changed_features(space, factual, row)
        for changed, hamming in self._nogoods:
            if len(moved ^ changed) < hamming:
                problems.append(f"{self.name}: changes the features {sorted(moved)}, within "
                                f"Hamming distance {hamming} of an earlier counterfactual's "
                                f"{sorted(changed)}")
        for point, radius in self._distances:
            d = weighted_l1(space, self._weights, row, point)
            slack = sum(self._weights[f.name] * tolerance(space, f.name) for f in space)
            if d < radius - slack:
                problems.append(f"{self.name}: at weighted L1 distance {d:g} from an earlier "
                                f"counterfactual, below the required {radius:g}")
        return problems
