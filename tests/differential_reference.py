"""References of the differential harness (``tests/differential.py``), independent of
cfopt's formulations: the declared problem's constraints and cost recomputed on raw
rows, the library's verdict on any point, and the cheapest known point of P(μ+ε).

Every reference value is the cost of a *witness*: a raw point the library itself
predicts as a target with score ≥ μ + ε (ε = 1e-6·(1+|score|)), so a reported failure is
always backed by a point. Where the search is complete the reference is ``exact``:

* ``grid``: every admissible point when all mutable features are discrete;
* ``trees``: per continuous (or wide integer) feature, the factual, the bounds and dense
  candidates around every split threshold of the model on it (the threshold mapped to
  raw units, its float32 neighbours and rounding midpoints, float64 neighbours, ±1e-9
  and ±1e-7 of the range), reduced to the candidate nearest the factual per cell of the
  library's split decisions, then the full product with the other features;
* ``linear``: the discrete product times a closed form / LP over the continuous
  features (``tests/differential_linear.py``);
* ``sampled`` (networks with continuous features, wide integers beside linear models):
  random admissible points, the solvers' own answers, and a coordinate descent from the
  best of them towards the factual; an upper bound only.

The ``custom`` case's rules and objective terms (``tests/differential_custom.py``) read
small discrete features only, which every reference enumerates whole (a tree reference
keeps each of their values, not the nearest per cell): a candidate row breaking a rule
is dropped (its cost ``inf``) and the terms add to its distance cost.

``loose`` is the exact opt_loose (no margin: the library predicts a target) of exact
references, and ``-inf`` when unknown.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .differential_models import (
    LINEAR_FAMILIES,
    TREE_FAMILIES,
    goes_left,
    margin_scores,
    predict,
    raw_scores,
    split_thresholds,
)
from .differential_narrowing import breaks as narrowing_breaks
from .differential_narrowing import narrow_interval, narrow_levels

if TYPE_CHECKING:
    from cfopt.space.feature import Feature

    from .differential_instances import Instance

GRID_POINTS = 50_000
TREE_POINTS = 100_000
SMALL_DISCRETE = 64  # a discrete feature with at most this many values is enumerated
CHUNK = 20_000
N_SAMPLES = 400


def band(score: np.ndarray) -> np.ndarray:
    """The ambiguity band ε of a score (float32 vs float64 differences)."""
    return 1e-6 * (1.0 + np.abs(score))


@dataclass
class Reference:
    """The cheapest known point of P(μ+ε) (``strict``, its ``witness``) and opt_loose."""

    kind: str
    exact: bool
    strict: float = math.inf
    loose: float = -math.inf
    witness: dict[str, Any] | None = None
    witness_score: float | None = None
    points: int = 0

    def summary(self) -> dict[str, Any]:
        return {"kind": self.kind, "exact": self.exact, "strict": _finite(self.strict),
                "loose": _finite(self.loose), "witness": self.witness,
                "witness_score": self.witness_score, "points": self.points}

    def offer(self, cost: float, row: dict[str, Any], score: float) -> None:
        if cost < self.strict:
            self.strict, self.witness, self.witness_score = float(cost), row, float(score)


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


# --------------------------------------------------------------- verdicts and cost
def assess(inst: Instance, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per model-input row: the library predicts a target; the margin score (module
    docstring of ``tests/differential.py``); the row is in P(μ+ε)."""
    s, exact = raw_scores(inst.model, Z), margin_scores(inst.model, Z)
    if inst.task == "regression":
        low, high = inst.labels
        score = np.minimum(exact - low, high - exact)
        hit = (s >= low) & (s <= high)
    else:
        hit = np.isin(predict(inst.model, Z), np.asarray(inst.labels))
        if inst.task == "binary":
            score = exact if inst.labels[0] == inst.classes[1] else -exact
        else:
            mask = np.array([c in inst.labels for c in inst.classes])
            score = exact[:, mask].max(axis=1) - exact[:, ~mask].max(axis=1)
    with np.errstate(invalid="ignore"):
        strict = hit & (score >= inst.margin + band(score))
    return hit, score, strict


def weights(inst: Instance) -> dict[str, float]:
    """L1 weights: 1 / the feature's range in the training rows (1 if 0); 1 for a
    categorical change."""
    out = {}
    for f in inst.space:
        if f.is_onehot:
            out[f.name] = 1.0
            continue
        c = codes(f, inst.frame[f.name])
        spread = float(c.max() - c.min())
        out[f.name] = 1.0 / spread if spread > 0 else 1.0
    return out


def codes(f: Feature, values: Any) -> np.ndarray:
    """Numeric codes of raw values (label positions for labelled features)."""
    values = list(values)
    if f.categories:
        return np.array([f.categories.index(_plain(v)) for v in values], dtype=float)
    return np.asarray(values, dtype=float)


def from_code(f: Feature, code: float) -> Any:
    if f.categories:
        return f.categories[int(round(code))]
    return int(round(code)) if f.is_integral else float(code)


def moves(inst: Instance, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(n, d) weighted moves from the factual and (n, d) changed flags."""
    w = weights(inst)
    x0 = inst.x.iloc[0]
    cols, flags = [], []
    for f in inst.space:
        if f.is_onehot:
            changed = np.array([_plain(v) != _plain(x0[f.name]) for v in rows[f.name]])
            cols.append(changed.astype(float))
        else:
            delta = np.abs(codes(f, rows[f.name]) - codes(f, [x0[f.name]])[0])
            cols.append(w[f.name] * delta)
            changed = delta > 0
        flags.append(changed)
    return np.column_stack(cols), np.column_stack(flags)


def costs(objective: str, move: np.ndarray, moved: np.ndarray) -> np.ndarray:
    if objective == "l0":
        return moved.sum(axis=1).astype(float)
    return move.max(axis=1) if objective == "linf" else move.sum(axis=1)


def custom_extra(inst: Instance, rows: pd.DataFrame, rules: bool = True) -> np.ndarray:
    """Per raw row: the sum of the custom components' objective terms, ``inf`` where one
    of their rules breaks (``rules``)."""
    out = np.zeros(len(rows))
    for c in inst.custom:
        out += c.cost(inst, rows)
        if rules:
            out[~c.holds(inst, rows)] = math.inf
    return out


def violations(inst: Instance, row: pd.Series) -> list[str]:
    """Declared constraints a raw row breaks (kinds, bounds, categories, actionability,
    the cap on changes, the custom rules), checked on its raw values."""
    x0 = inst.x.iloc[0]
    problems, changed = [], 0
    for f in inst.space:
        v, v0 = _plain(row[f.name]), _plain(x0[f.name])
        changed += int(v != v0)
        if f.categories and v not in f.categories:
            problems.append(f"{f.name!r}: unknown category {v!r}")
            continue
        if not f.is_onehot:
            c, c0 = codes(f, [v])[0], codes(f, [v0])[0]
            if not (math.isfinite(c) and f.lower <= c <= f.upper):
                problems.append(f"{f.name!r}: {v!r} outside [{f.lower}, {f.upper}]")
            if f.is_integral and c != round(c):
                problems.append(f"{f.name!r}: non-integral {v!r}")
            if (f.direction == "increase" and c < c0) or (f.direction == "decrease" and c > c0):
                problems.append(f"{f.name!r}: {f.direction}-only but moved {v0!r} -> {v!r}")
        if f.immutable and v != v0:
            problems.append(f"{f.name!r}: immutable but moved {v0!r} -> {v!r}")
    if inst.max_changes is not None and changed > inst.max_changes:
        problems.append(f"{changed} features changed, above the cap {inst.max_changes}")
    frame = pd.DataFrame([row.to_dict()])
    return problems + narrowing_breaks(inst, row) + [
        f"custom rule {c.describe()} breaks" for c in inst.custom if not c.holds(inst, frame)[0]]


def interval(inst: Instance, f: Feature) -> tuple[float, float]:
    """The admissible codes of a numeric feature: its bounds cut by actionability and
    the narrowing."""
    c0 = codes(f, [inst.x.iloc[0][f.name]])[0]
    if f.immutable:
        return c0, c0
    lo = c0 if f.direction == "increase" else f.lower
    hi = c0 if f.direction == "decrease" else f.upper
    return narrow_interval(inst, f, lo, hi)


def admissible(inst: Instance, f: Feature) -> list[Any] | None:
    """Every admissible value of a feature, or ``None`` if it is not small and discrete."""
    x0 = inst.x.iloc[0][f.name]
    if f.is_onehot:
        return [_plain(x0)] if f.immutable else narrow_levels(inst, f)
    lo, hi = interval(inst, f)
    if lo == hi:
        return [_plain(x0)]
    if f.is_integral and hi - lo < SMALL_DISCRETE:
        return [from_code(f, c) for c in np.arange(lo, hi + 1)]
    return None


# ----------------------------------------------------------------- tree candidates
def _near_threshold(t: float, width: float) -> list[float]:
    """Model-input values around a threshold: the threshold, its float32 neighbours
    and their rounding midpoints, ±1e-9 and ±1e-7 of the input width, each with its
    float64 neighbours."""
    t32 = np.float32(t)
    a = t32 if float(t32) <= t else np.nextafter(t32, np.float32(-np.inf))
    b = np.nextafter(a, np.float32(np.inf))
    pa, nb = np.nextafter(a, np.float32(-np.inf)), np.nextafter(b, np.float32(np.inf))
    base = [t, *(float(v) for v in (pa, a, b, nb))]
    base += [(float(pa) + float(a)) / 2, (float(a) + float(b)) / 2, (float(b) + float(nb)) / 2]
    base += [t + s * d * width for d in (1e-9, 1e-7) for s in (-1, 1)]
    out = []
    for u in base:
        out += [u, np.nextafter(u, -np.inf), np.nextafter(u, np.inf),
                np.nextafter(np.nextafter(u, -np.inf), -np.inf),
                np.nextafter(np.nextafter(u, np.inf), np.inf)]
    return out


def tree_values(inst: Instance, f: Feature, thresholds: dict[int, np.ndarray], float32: bool,
                rule: str, zero: float = 0.0) -> list[Any]:
    """Candidate values of one feature for a tree model: per cell of the library's split
    decisions on it, the candidate nearest the factual."""
    values = admissible(inst, f)
    if f.is_onehot or any(f.name in c.features for c in inst.custom):
        return values
    x0 = inst.x.iloc[0][f.name]
    c0 = codes(f, [x0])[0]
    ts = thresholds.get(inst.space.input_slices()[f.name].start, np.empty(0))
    if values is not None:
        candidates = codes(f, values)
    else:
        lo, hi = interval(inst, f)
        raw = [lo, hi, c0]
        for t in ts:
            for u in _near_threshold(float(t), (f.upper - f.lower) / f.scale):
                r = u * f.scale + f.shift
                raw += [r, np.nextafter(r, -np.inf), np.nextafter(r, np.inf)]
        candidates = np.asarray(raw, dtype=float)
        if f.is_integral:
            candidates = np.concatenate([np.floor(candidates) + k for k in (-1, 0, 1)]
                                        + [np.ceil(candidates) + k for k in (-1, 0, 1)])
        candidates = np.unique(candidates[(candidates >= lo) & (candidates <= hi)])
    if not len(ts):  # the model ignores the feature: moving it only costs
        return [_plain(x0)]
    sides = goes_left((candidates - f.shift) / f.scale, ts, float32, rule, zero)
    order = np.argsort(np.abs(candidates - c0), kind="stable")
    _, first = np.unique(sides[order], axis=0, return_index=True)
    return [_plain(x0) if c == c0 else from_code(f, c) for c in candidates[order[first]]]


def reference_size(inst: Instance) -> int | None:
    """Points the reference evaluates; ``None`` when a tree product exceeds the cap
    (the instance is regenerated)."""
    if inst.family in TREE_FAMILIES:
        size = math.prod(len(v) for v in tree_axes_values(inst))
        return size if size <= TREE_POINTS else None
    return math.prod(len(admissible(inst, f) or [None]) for f in inst.space)


def tree_axes_values(inst: Instance) -> list[list[Any]]:
    thresholds, float32, rule, zero = split_thresholds(inst.model)
    return [tree_values(inst, f, thresholds, float32, rule, zero) for f in inst.space]


# ------------------------------------------------------------------ the product
@dataclass
class Axis:
    """The candidate values of one feature: model inputs, weighted moves, changed."""

    values: list[Any]
    block: np.ndarray
    move: np.ndarray
    moved: np.ndarray


def axes(inst: Instance, values: Sequence[Sequence[Any]]) -> list[Axis]:
    out = []
    slices = inst.space.input_slices()
    for f, vals in zip(inst.space, values):
        rows = pd.DataFrame({g.name: [_plain(inst.x.iloc[0][g.name])] * len(vals)
                             for g in inst.space})
        rows[f.name] = list(vals)
        block = inst.space.transform(rows, check_bounds=False)[:, slices[f.name]]
        move, moved = moves(inst, rows)
        k = inst.space.names.index(f.name)
        out.append(Axis(list(vals), block, move[:, k], moved[:, k]))
    return out


def product(grid: list[Axis]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray,
                                                np.ndarray]]:
    """Chunks of the full product: flat indices, model inputs, moves, changed flags."""
    shape = tuple(len(a.values) for a in grid)
    total = math.prod(shape)
    for start in range(0, total, CHUNK):
        flat = np.arange(start, min(total, start + CHUNK))
        idx = np.unravel_index(flat, shape)
        yield (flat, np.hstack([a.block[i] for a, i in zip(grid, idx)]),
               np.column_stack([a.move[i] for a, i in zip(grid, idx)]),
               np.column_stack([a.moved[i] for a, i in zip(grid, idx)]))


def rows_at(inst: Instance, grid: list[Axis], flat: np.ndarray) -> pd.DataFrame:
    """The raw values of the custom components' features at flat indices of the product."""
    idx = np.unravel_index(flat, tuple(len(a.values) for a in grid))
    wanted = set().union(*(c.features for c in inst.custom))
    return pd.DataFrame({f.name: np.asarray(a.values, dtype=object)[i]
                         for f, a, i in zip(inst.space, grid, idx) if f.name in wanted},
                        index=range(len(flat)))


def point(inst: Instance, grid: list[Axis], flat: int) -> dict[str, Any]:
    idx = np.unravel_index(flat, tuple(len(a.values) for a in grid))
    return {f.name: _plain(a.values[i]) for f, a, i in zip(inst.space, grid, idx)}


def exhaustive(inst: Instance, values: list[list[Any]], kind: str) -> Reference:
    """Exact opt_strict / opt_loose over the product of per-feature candidates."""
    grid = axes(inst, values)
    ref = Reference(kind, exact=True, loose=math.inf)
    for flat, Z, move, moved in product(grid):
        cost = costs(inst.objective, move, moved)
        if inst.max_changes is not None:
            cost[moved.sum(axis=1) > inst.max_changes] = math.inf
        if inst.custom:
            cost += custom_extra(inst, rows_at(inst, grid, flat))
        hit, score, strict = assess(inst, Z)
        ref.points += len(flat)
        if hit.any():
            ref.loose = min(ref.loose, float(cost[hit].min()))
        if strict.any():
            k = int(np.flatnonzero(strict)[np.argmin(cost[strict])])
            if math.isfinite(cost[k]):
                ref.offer(cost[k], point(inst, grid, int(flat[k])), score[k])
    return ref


# --------------------------------------------------------------------- sampling
def evaluate_rows(inst: Instance, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray,
                                                               np.ndarray]:
    """Cost (inf when over the cap or breaking a custom rule; the custom terms added),
    margin score and P(μ+ε) membership of raw rows."""
    move, moved = moves(inst, rows)
    cost = costs(inst.objective, move, moved)
    if inst.max_changes is not None:
        cost[moved.sum(axis=1) > inst.max_changes] = math.inf
    cost += custom_extra(inst, rows)
    _, score, strict = assess(inst, inst.space.transform(rows, check_bounds=False))
    return cost, score, strict


def _random_values(inst: Instance, f: Feature, rng: np.random.Generator, n: int) -> list[Any]:
    values = admissible(inst, f)
    if values is not None:
        return [values[i] for i in rng.integers(0, len(values), n)]
    lo, hi = interval(inst, f)
    c = rng.uniform(lo, hi, n)
    return [from_code(f, v) for v in (np.round(c) if f.is_integral else c)]


def sampled(inst: Instance, starts: Sequence[dict[str, Any]],
            rng: np.random.Generator) -> Reference:
    """Random admissible points (single-feature sweeps and sparse moves) and ``starts``
    (the solvers' points, inflated into P(μ+ε)), then a coordinate descent towards the
    factual from the best random point and from every start in P(μ+ε)."""
    x0 = {k: _plain(v) for k, v in inst.x.iloc[0].items()}
    mutable = [f for f in inst.space if len(admissible(inst, f) or [0, 1]) > 1]
    rows = [dict(x0)]
    for f in mutable:
        rows += [{**x0, f.name: v} for v in _random_values(inst, f, rng, 25)]
    cap = len(mutable) if inst.max_changes is None else min(inst.max_changes, len(mutable))
    for _ in range(N_SAMPLES if mutable else 0):
        row = dict(x0)
        for i in rng.choice(len(mutable), size=int(rng.integers(1, cap + 1)), replace=False):
            row[mutable[i].name] = _random_values(inst, mutable[i], rng, 1)[0]
        rows.append(row)
    frame = pd.DataFrame(rows + [inflate(inst, s) for s in starts], columns=inst.space.names)
    cost, score, strict = evaluate_rows(inst, frame)
    ref = Reference("sampled", exact=False, points=len(frame) + 6 * len(starts))
    finite = np.flatnonzero(strict & np.isfinite(cost))
    for k in finite:
        ref.offer(cost[k], frame.iloc[int(k)].to_dict(), score[k])
    best = finite[np.argsort(cost[finite])][:1]
    for k in sorted(set(best) | {k for k in finite if k >= len(rows)}):
        row, c, s, n = descend(inst, frame.iloc[int(k)].to_dict())
        ref.points += n
        ref.offer(c, row, s)
    return ref


def inflate(inst: Instance, start: dict[str, Any]) -> dict[str, Any]:
    """A solver's point scaled away from the factual by the least factor in
    1 + {0, 1e-6, ..., 1e-2} that puts it in P(μ+ε) (its margin is μ, inside the band)
    at a finite cost (the custom components' features are kept); the point itself when
    none does."""
    x0 = {k: _plain(v) for k, v in inst.x.iloc[0].items()}
    trials = []
    for eta in (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2):
        row = dict(start)
        for f in inst.space:
            if f.is_onehot or row[f.name] == x0[f.name] or \
                    any(f.name in c.features for c in inst.custom):
                continue
            c0, c1 = codes(f, [x0[f.name]])[0], codes(f, [row[f.name]])[0]
            lo, hi = interval(inst, f)
            c = min(max(c0 + (1 + eta) * (c1 - c0), lo), hi)
            row[f.name] = from_code(f, np.sign(c - c0) * np.ceil(abs(c - c0)) + c0
                                    if f.is_integral else c)
        trials.append(row)
    cost, _, strict = evaluate_rows(inst, pd.DataFrame(trials, columns=inst.space.names))
    ok = strict & np.isfinite(cost)
    return trials[int(np.argmax(ok))] if ok.any() else dict(start)


def descend(inst: Instance, start: dict[str, Any], rounds: int = 3,
            passes: int = 2) -> tuple[dict[str, Any], float, float, int]:
    """Shrink each move of a P(μ+ε) point towards the factual while it stays in
    P(μ+ε): the smallest fraction of the move on a grid of 13, refined ``rounds`` times
    (a categorical move: reverted or kept)."""
    x0 = {k: _plain(v) for k, v in inst.x.iloc[0].items()}
    row = {k: _plain(v) for k, v in start.items()}
    cost, score, _ = evaluate_rows(inst, pd.DataFrame([row], columns=inst.space.names))
    best, best_score, evaluated = float(cost[0]), float(score[0]), 1
    for _ in range(passes):
        for f in inst.space:
            if row[f.name] == x0[f.name]:
                continue
            c0, c1 = codes(f, [x0[f.name]])[0], codes(f, [row[f.name]])[0]
            lo, hi = 0.0, 1.0
            for _ in range(1 if f.is_onehot else rounds):
                alphas = np.array([0.0]) if f.is_onehot else np.linspace(lo, hi, 13)
                steps = alphas * (c1 - c0)
                if f.is_integral:
                    steps = np.sign(steps) * np.ceil(np.abs(steps))
                trials = [x0[f.name] if s == 0 else from_code(f, c0 + s) for s in steps]
                frame = pd.DataFrame([{**row, f.name: v} for v in trials],
                                     columns=inst.space.names)
                cost, score, strict = evaluate_rows(inst, frame)
                evaluated += len(frame)
                ok = np.flatnonzero(strict & (cost < best))
                if not len(ok):
                    break
                k = int(ok[0])
                row[f.name], best, best_score = trials[k], float(cost[k]), float(score[k])
                if k == 0:
                    break
                lo, hi = float(alphas[k - 1]), float(alphas[k])
    return row, best, best_score, evaluated


def plan(inst: Instance) -> str:
    """Which reference applies (module docstring)."""
    if inst.family in TREE_FAMILIES:
        return "trees"
    values = [admissible(inst, f) for f in inst.space]
    continuous = [f for f, v in zip(inst.space, values) if v is None]
    size = math.prod(len(v) for v in values if v is not None)
    if size > GRID_POINTS:
        return "sampled"
    if not continuous:
        return "grid"
    if inst.family in LINEAR_FAMILIES and all(f.kind.value == "continuous" for f in continuous):
        return "linear"
    return "sampled"


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
