"""The ``narrowed`` case of the differential harness: DiCE's per-query choices
(``features_to_vary``, ``permitted_range``; ``cfopt/constraints/query_range.py``) drawn
at random, and what they make of the declared problem, written out independently of
cfopt for the references (``tests/differential_reference.py``).

A narrowed instance passes ``inst.narrowing`` to ``explain``. The declared problem
P(μ) then also requires: every feature not in ``features_to_vary`` keeps the factual's
value; a numeric feature's code lies in its permitted ``(low, high)`` (``None`` an open
side; raw units, the ends of an integer feature may be fractional); a categorical
feature takes a permitted level; an ordinal one a level of its permitted run. Each
drawn range holds the factual's value, so the narrowing never empties a feature's
admissible set by itself (an empty ``features_to_vary`` leaves only the factual: the
instance is infeasible, a claim the referee checks too).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from cfopt.space.feature import Feature

    from .differential_instances import Instance

#: share of instances that draw a narrowing (from a stream of their own)
NARROWED_SHARE = 0.3
NARROWED_STREAM = 130399


def _code(f: Feature, value: Any) -> float:
    value = value.item() if isinstance(value, np.generic) else value
    return float(f.categories.index(value)) if f.categories else float(value)


def draw(inst: Instance, rng: np.random.Generator) -> bool:
    """Draw ``inst.narrowing`` (False when the instance has no mutable feature)."""
    x0 = inst.x.iloc[0]
    mutable = [f for f in inst.space if not f.immutable]
    if not mutable:
        return False
    options: dict[str, Any] = {}
    if rng.random() < 0.5:
        options["features_to_vary"] = [f.name for f in mutable if rng.random() < 0.7]
    ranges: dict[str, Any] = {}
    for f in mutable:
        if rng.random() >= 0.45:
            continue
        v0 = x0[f.name]
        if f.is_onehot:
            others = [c for c in f.categories if c != v0]
            ranges[f.name] = [v0, *[c for c in others if rng.random() < 0.5]]
        elif f.categories:  # ordinal or labelled binary: a run of levels around v0
            k = int(_code(f, v0))
            low, high = k - int(rng.integers(0, k + 1)), k + int(rng.integers(
                0, len(f.categories) - k))
            ranges[f.name] = list(f.categories[low:high + 1])
        else:
            c0 = _code(f, v0)
            ends = [None if rng.random() < 0.25 else c0 - rng.uniform(0, 1) * (c0 - f.lower),
                    None if rng.random() < 0.25 else c0 + rng.uniform(0, 1) * (f.upper - c0)]
            ranges[f.name] = tuple(None if e is None else float(e) for e in ends)
    if ranges:
        options["permitted_range"] = ranges
    inst.narrowing = options
    return bool(options)


def narrow_interval(inst: Instance, f: Feature, lo: float, hi: float) -> tuple[float, float]:
    """A numeric feature's admissible codes ``[lo, hi]`` cut by the narrowing."""
    c0 = _code(f, inst.x.iloc[0][f.name])
    vary = inst.narrowing.get("features_to_vary")
    if vary is not None and f.name not in vary:
        return c0, c0
    given = inst.narrowing.get("permitted_range", {}).get(f.name)
    if given is None:
        return lo, hi
    if f.categories:
        steps = [_code(f, v) for v in given]
        qlo, qhi = min(steps), max(steps)
    else:
        qlo = -math.inf if given[0] is None else given[0]
        qhi = math.inf if given[1] is None else given[1]
        if f.is_integral:  # an integer feature's fractional end: its integers inside
            qlo = math.ceil(qlo - 1e-9) if math.isfinite(qlo) else qlo
            qhi = math.floor(qhi + 1e-9) if math.isfinite(qhi) else qhi
    return max(lo, qlo), min(hi, qhi)


def narrow_levels(inst: Instance, f: Feature) -> list[Any]:
    """A categorical feature's admissible levels under the narrowing (in level order)."""
    v0 = inst.x.iloc[0][f.name]
    vary = inst.narrowing.get("features_to_vary")
    if vary is not None and f.name not in vary:
        return [v0]
    given = inst.narrowing.get("permitted_range", {}).get(f.name)
    return [c for c in f.categories if given is None or c in given]


def breaks(inst: Instance, row: Any) -> list[str]:
    """What a raw row breaks of the narrowing, on its raw values."""
    x0 = inst.x.iloc[0]
    problems = []
    for f in inst.space:
        v = row[f.name]
        if f.is_onehot:
            if v not in narrow_levels(inst, f):
                problems.append(f"{f.name!r}: {v!r} is not a permitted level")
            continue
        lo, hi = narrow_interval(inst, f, f.lower, f.upper)
        c, tol = _code(f, v), 1e-9 * max(1.0, f.upper - f.lower)
        if not lo - tol <= c <= hi + tol:
            problems.append(f"{f.name!r}: {v!r} outside the narrowing's [{lo}, {hi}] "
                            f"(factual {x0[f.name]!r})")
    return problems
