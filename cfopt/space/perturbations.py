r"""Adverse perturbations of a counterfactual (Virgolin & Fracaros 2023), on raw rows.

A counterfactual :math:`z` of the factual :math:`x` splits the features into
:math:`C` (changed, :math:`z_i \ne x_i`) and :math:`K` (kept). Each feature may carry a
:class:`~cfopt.Perturbation` annotation: the largest upward and downward moves
:math:`p^+_i(v), p^-_i(v)` from a value :math:`v` (absolute, or relative to :math:`|v|`),
or the categories a value may switch to.

* **Maximal C-setback** (Def. 3-4): every changed numeric feature is pushed back
  towards :math:`x` by :math:`s_i = \min(p_i(z_i), |z_i - x_i|)`, with :math:`p_i = p^-_i`
  when the intervention increased it and :math:`p^+_i` when it decreased it — relative
  bounds are taken at :math:`z_i`, the value being perturbed. Undoing it costs
  :math:`\sum_i w_i s_i` more (Eq. 6 adds it to the cost :math:`\delta(z - W, x)`). A
  changed categorical whose annotation lets :math:`z_i` switch to another category
  costs one more change :math:`w_i` (our extension; the paper defines setbacks on
  numeric features).
* **K-neighbourhood** (Def. 5): the box in which only the kept features move, each
  within :math:`[z_i - p^-_i(z_i), z_i + p^+_i(z_i)]` clipped to its bounds (integral
  codes stay integral), a kept categorical over its annotated categories.
* **K-robustness score** (Eq. 8): the fraction of :math:`m` uniform samples of the
  K-neighbourhood the model still classifies as :math:`f(z)`.

These are the model-agnostic, sampled notions (used by the evaluation and by CoGS).
The exact versions — the setback cost inside the MILP and a K-adversary that proves a
K-neighbourhood clean — are :mod:`cfopt.constraints` and
:mod:`cfopt.methods.adversaries.k_neighbourhood` (its loop: :mod:`cfopt.methods.k_robust`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from .feature import Feature
from .space import FeatureSpace
from .validate import as_frame


def _row(space: FeatureSpace, row: pd.DataFrame | pd.Series | Mapping) -> pd.Series:
    frame = space.validate(as_frame(row))
    if len(frame) != 1:
        raise ValueError(f"expected one raw row, got {len(frame)}")
    return frame.iloc[0]


def changed(space: FeatureSpace, x: pd.Series, z: pd.Series) -> list[str]:
    """The features :math:`C` the counterfactual changes (in space order)."""
    return [f.name for f in space if x[f.name] != z[f.name]]


def numeric_range(f: Feature, value: float) -> tuple[float, float]:
    """The K-perturbation interval of a numeric feature's code ``value`` (clipped to
    its bounds; integral codes rounded inwards)."""
    p = f.perturbation
    if p is None or not p.is_numeric:
        return value, value
    lo, hi = max(f.lower, value - p.down(value)), min(f.upper, value + p.up(value))
    if f.is_integral:
        lo, hi = float(np.ceil(lo - 1e-9)), float(np.floor(hi + 1e-9))
    return lo, hi


def switch_categories(f: Feature, value: Any) -> tuple:
    """Categories a kept categorical / labelled value may switch to (itself included)."""
    p = f.perturbation
    if p is None or p.is_numeric:
        return (value,)
    return tuple(dict.fromkeys((value, *p.categories)))


def setback_magnitude(f: Feature, x_code: float, z_code: float) -> float:
    r"""Maximal C-setback :math:`\min(p_i(z_i), |z_i - x_i|)` of a numeric feature."""
    p = f.perturbation
    if p is None or not p.is_numeric:
        return 0.0
    increased = z_code > x_code  # pragma: no mutate (>=: at z = x the min below is 0 anyway)
    room = p.down(z_code) if increased else p.up(z_code)
    return float(min(room, abs(z_code - x_code)))


def can_switch_away(f: Feature, value: Any) -> bool:
    """Whether a categorical annotation lets ``value`` switch to another category."""
    p = f.perturbation
    return p is not None and not p.is_numeric and any(c != value for c in p.categories)


def max_setback(space: FeatureSpace, x: Any, z: Any) -> pd.DataFrame:
    """``z`` after its maximal C-setback (Def. 3-4): changed numeric features pushed back
    towards ``x``; a changed categorical that may switch goes back to ``x``'s category if
    its annotation allows it, else to its first other allowed category."""
    xs, zs = _row(space, x), _row(space, z)
    out = zs.copy()
    for f in space:
        if xs[f.name] == zs[f.name]:
            continue
        if f.is_onehot or (f.perturbation is not None and not f.perturbation.is_numeric):
            if can_switch_away(f, zs[f.name]):
                allowed = f.perturbation.categories
                out[f.name] = xs[f.name] if xs[f.name] in allowed else next(
                    c for c in allowed if c != zs[f.name])
            continue
        xc, zc = f.to_code(xs[f.name]), f.to_code(zs[f.name])
        s = setback_magnitude(f, xc, zc)
        increased = zc > xc  # pragma: no mutate (>=: zc == xc was skipped above)
        out[f.name] = f.from_code(zc - s if increased else zc + s)
    return pd.DataFrame([out.to_dict()], columns=space.names)  # pragma: no mutate (in order)


def setback_cost(space: FeatureSpace, weights: Mapping[str, float], x: Any, z: Any) -> float:
    r"""Extra cost of undoing the maximal C-setback, :math:`\sum_{i \in C} w_i s_i` (a
    switchable changed categorical costs :math:`w_i`)."""
    xs, zs = _row(space, x), _row(space, z)
    total = 0.0
    for f in space:
        if xs[f.name] == zs[f.name]:
            continue
        if f.is_onehot or (f.perturbation is not None and not f.perturbation.is_numeric):
            total += weights[f.name] * float(can_switch_away(f, zs[f.name]))
        else:
            total += weights[f.name] * setback_magnitude(f, f.to_code(xs[f.name]),
                                                         f.to_code(zs[f.name]))
    return total


def sample_k_neighbourhood(space: FeatureSpace, x: Any, z: Any, m: int,
                           rng: np.random.Generator | int | None = None) -> pd.DataFrame:
    """``m`` uniform samples of the K-neighbourhood of ``z`` (Def. 5): kept numeric
    features uniform in their perturbation interval (integers uniform among the
    integral codes), kept categoricals uniform over their annotated categories, changed
    features at ``z`` (:func:`sample_perturbations` on K)."""
    return sample_perturbations(space, x, z, m, "K", rng)


def k_score(predict: Callable[[pd.DataFrame], Any], space: FeatureSpace, x: Any, z: Any,
            m: int = 1000, rng: np.random.Generator | int | None = None) -> float:
    """K-robustness score (Eq. 8): the fraction of ``m`` K-neighbours of ``z`` that
    ``predict`` (raw rows → labels) classifies as it classifies ``z``."""
    zs = _row(space, z).to_frame().T
    label = np.asarray(predict(zs))[0]
    samples = sample_k_neighbourhood(space, x, z, m, rng)
    return float(np.mean(np.asarray(predict(samples)) == label))


def sample_perturbations(space: FeatureSpace, x: Any, z: Any, m: int, on: str = "CK",
                         rng: np.random.Generator | int | None = None) -> pd.DataFrame:
    """``m`` random perturbations of ``z`` as in the paper's evaluation (§7, App. B.2):
    every annotated feature of ``C`` (``on`` contains "C") and/or ``K`` (contains "K")
    moves uniformly within its perturbation interval (clipped to its bounds; integral
    codes stay integral), a categorical uniformly over its annotated categories."""
    if on not in ("C", "K", "CK"):
        raise ValueError(f"on must be 'C', 'K' or 'CK', got {on!r}")
    if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 1:
        raise ValueError(f"m must be a positive number of samples, got {m!r}")
    rng = np.random.default_rng(rng)
    xs, zs = _row(space, x), _row(space, z)
    data: dict[str, Any] = {}
    for f in space:
        v = zs[f.name]
        part = "C" if xs[f.name] != v else "K"
        if part not in on or f.perturbation is None:
            data[f.name] = [v] * m
        elif not f.perturbation.is_numeric:
            allowed = list(switch_categories(f, v)) if part == "K" else list(
                f.perturbation.categories)
            data[f.name] = [allowed[k] for k in rng.integers(0, len(allowed), m)]
        else:
            lo, hi = numeric_range(f, f.to_code(v))
            codes = (rng.integers(int(lo), int(hi) + 1, m) if f.is_integral
                     else rng.uniform(lo, hi, m))
            data[f.name] = [f.from_code(c) for c in codes]
    return pd.DataFrame(data, columns=space.names)  # pragma: no mutate (in order already)
