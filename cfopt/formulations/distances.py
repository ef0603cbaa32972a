r"""Distance terms between the counterfactual and the factual.

Rows are written in *normalized* units, each numeric feature's move divided by its
width :math:`R_f = u_f - l_f` (1 for a constant feature): a solver's feasibility
tolerance (an absolute 1e-6 or so on each row) then means the same relative error on
every feature, whatever its raw units (a feature of range 1e-3 beside one of range 1e6
in raw rows gave HiGHS a 1e-3 error on the objective and false optima).

* ``m.dev[f]`` :math:`\ge |x_f - \hat x_f| / R_f` (numeric features), in [0, 1] —
  exact at the optimum of any objective increasing in ``dev``;
* ``m.changed[f]`` — binary change indicator of numeric feature ``f``:
  :math:`|x_f - \hat x_f| / R_f \le \text{changed}_f` (CE-OCL eq. 5); a categorical
  feature's change is ``m.category_changed[f]`` (already 0/1);
* ``m.linf`` :math:`\ge w_f R_f\,\text{dev}_f` and :math:`\ge w_f\,\text{category\_changed}_f`.

Objectives (:func:`objective_expression`) combine, with non-negative coefficients,
the weighted L1 norm :math:`\sum_f w_f |x_f - \hat x_f| = \sum_f w_f R_f\,\text{dev}_f`
(a category change costs :math:`w_f`), the L0 count of changed features, and the
weighted L∞ norm, all in raw units as the user declared them.
Default weights are 1 / range of each feature in the data ("range"); "mad" uses
1 / median absolute deviation (Wachter et al. 2017), falling back to 1 / range when
the MAD is 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real
from typing import TYPE_CHECKING

import pyomo.environ as pyo

from ..space.space import FeatureSpace
from .features import width

if TYPE_CHECKING:
    import pandas as pd

NORMS = ("l1", "l0", "linf")


def feature_weights(space: FeatureSpace, weights: str | Mapping[str, float] = "range"
                    ) -> dict[str, float]:
    """Per-feature weights: ``"range"``, ``"mad"``, or a mapping name → weight (features
    not named keep their range weight)."""
    base = {f.name: 1.0 / f.weight_spread for f in space}
    if isinstance(weights, str):
        if weights == "range":
            return base
        if weights == "mad":
            return {f.name: (1.0 / f.mad if (f.mad or 0) > 0 else base[f.name]) for f in space}
        raise ValueError(f"weights must be 'range', 'mad' or a mapping, got {weights!r}")
    if not isinstance(weights, Mapping):
        raise TypeError(f"weights must be 'range', 'mad' or a mapping feature -> weight, got "
                        f"{type(weights).__name__}")
    unknown = sorted(set(weights) - set(space.names), key=str)
    if unknown:
        raise ValueError(f"weights given for unknown feature(s) {unknown}; the space has "
                         f"{space.names}")
    for name, w in weights.items():
        if not _finite_non_negative(w):
            raise ValueError(f"weights[{name!r}] must be a finite non-negative number, got "
                             f"{w!r}")
    return {**base, **{k: float(v) for k, v in weights.items()}}


def _finite_non_negative(value: object) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and \
        math.isfinite(value) and value >= 0


def parse_objective(objective: str | Mapping[str, float]) -> dict[str, float]:
    """``"l1"`` / ``"l0"`` / ``"linf"`` or a mapping norm → coefficient."""
    spec = {objective: 1.0} if isinstance(objective, str) else dict(objective)
    unknown = sorted(set(spec) - set(NORMS))
    if unknown:
        raise ValueError(f"unknown objective term(s) {unknown}; use {list(NORMS)} or a "
                         f"mapping of them to coefficients")
    if not spec:
        raise ValueError("objective: give at least one of " + ", ".join(NORMS))
    for norm, c in spec.items():
        if not _finite_non_negative(c):
            raise ValueError(f"objective[{norm!r}] must be a finite non-negative coefficient, "
                             f"got {c!r}")
    if all(c == 0 for c in spec.values()):
        raise ValueError("at least one objective coefficient must be positive")
    return {k: float(v) for k, v in spec.items() if v > 0}


def add_deviations(m: pyo.Block, space: FeatureSpace) -> None:
    """``m.dev[f] >= |x_f - x0_f| / R_f`` for numeric features."""
    m.dev = pyo.Var(m.NUMERIC, bounds=(0.0, 1.0))
    m.dev_pos = pyo.Constraint(m.NUMERIC, rule=lambda b, n: b.dev[n] >= (
        b.x[n] - b.x0[n]) / width(space, n))
    m.dev_neg = pyo.Constraint(m.NUMERIC, rule=lambda b, n: b.dev[n] >= (
        b.x0[n] - b.x[n]) / width(space, n))


def add_change_indicators(m: pyo.Block, space: FeatureSpace) -> None:
    """Binary ``m.changed[f]``, 0 forcing ``x_f = x0_f`` (numeric features)."""
    m.changed = pyo.Var(m.NUMERIC, domain=pyo.Binary)
    m.changed_up = pyo.Constraint(m.NUMERIC, rule=lambda b, n:
                                  (b.x[n] - b.x0[n]) / width(space, n) <= b.changed[n])
    m.changed_down = pyo.Constraint(m.NUMERIC, rule=lambda b, n:
                                    (b.x0[n] - b.x[n]) / width(space, n) <= b.changed[n])


def l0_expression(m: pyo.Block) -> pyo.Expression:
    """Number of changed features (a categorical counts once)."""
    return pyo.quicksum(m.changed[n] for n in m.NUMERIC) + pyo.quicksum(
        m.category_changed[n] for n in m.CATEGORICAL)


def l1_expression(m: pyo.Block, space: FeatureSpace,
                  weights: Mapping[str, float]) -> pyo.Expression:
    return pyo.quicksum(weights[n] * width(space, n) * m.dev[n] for n in m.NUMERIC) + \
        pyo.quicksum(weights[n] * m.category_changed[n] for n in m.CATEGORICAL)


def add_linf(m: pyo.Block, space: FeatureSpace, weights: Mapping[str, float]) -> None:
    """``m.linf`` >= every weighted deviation."""
    top = max([1.0] + [weights[n] * width(space, n) for n in m.NUMERIC] +
              [weights[n] for n in m.CATEGORICAL])
    m.linf = pyo.Var(bounds=(0.0, top))
    m.linf_numeric = pyo.Constraint(m.NUMERIC, rule=lambda b, n: b.linf >= weights[n] * width(
        space, n) * b.dev[n])
    m.linf_categorical = pyo.Constraint(m.CATEGORICAL, rule=lambda b, n:
                                        b.linf >= weights[n] * b.category_changed[n])


def row_distances(space: FeatureSpace, weights: Mapping[str, float], before: pd.Series,
                  after: pd.Series) -> dict[str, float]:
    """Weighted L1, L0 and weighted L∞ distances of the raw row ``after`` from
    ``before`` (codes for numeric features; a category change counts 1)."""
    l1 = l0 = linf = 0.0
    for f in space:
        if f.is_onehot:
            d = float(before[f.name] != after[f.name])
        else:
            d = abs(f.to_code(after[f.name]) - f.to_code(before[f.name]))
        w = weights[f.name]
        l1 += w * d
        l0 += float(d > 0)
        linf = max(linf, w * d)
    return {"l1": l1, "l0": l0, "linf": linf}


def objective_expression(m: pyo.Block, space: FeatureSpace, terms: Mapping[str, float],
                         weights: Mapping[str, float], indicators: bool) -> pyo.Expression:
    """Declare what ``terms`` need and return their weighted sum; ``indicators``: ``m``
    already has the change indicators ``changed[f]`` (declared for ``max_changes``)."""
    expr = 0
    if "l1" in terms or "linf" in terms:
        add_deviations(m, space)
    if "l1" in terms:
        expr += terms["l1"] * l1_expression(m, space, weights)
    if "l0" in terms:
        if not indicators:
            add_change_indicators(m, space)
        expr += terms["l0"] * l0_expression(m)
    if "linf" in terms:
        add_linf(m, space, weights)
        expr += terms["linf"] * m.linf
    return expr
