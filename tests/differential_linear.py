"""Exact references for linear models with continuous features (``tests/differential.py``).

Over the product of the discrete features' admissible values (continuous features at
the factual), the library scores each discrete point; the continuous features then add
``a_j · δ_j`` (``a`` the coefficients in raw units, ``coef / scale``), moving within
their bounds and directions at cost ``w_j |δ_j|``:

* binary classifiers and regressors: one score must rise (or fall) by a need ``G``; the
  cheapest continuous move is closed form: L1 a fractional knapsack (features by
  gain per unit of cost), L∞ the smallest ``t`` whose moves ``min(t / w_j, M_j)`` gain
  ``G`` (piecewise linear, inverted exactly), L0 the fewest features whose full moves gain
  ``G``; with a cap on changes, every subset of the continuous features within the cap;
* multiclass: per target class ``c`` to win, a small LP in weighted units (``scipy``)
  with ``(a_c - a_j) · δ ≥ μ' - (s_c - s_j)`` for every class ``j`` outside the target,
  over the discrete points in increasing cost until none can beat the best.

The custom case's rules and terms (discrete features only) give each discrete point an
extra cost ``E`` (``inf`` where a rule breaks), added to its total. The best point is
rebuilt, scored by the library and must lie in P(μ+ε); otherwise μ' grows and the search
is repeated. opt_loose (margin 0, closed forms only) is the
infimum over the target's closure.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.optimize import linprog

from .differential_models import linear_coefficients, raw_scores
from .differential_reference import (
    Reference,
    admissible,
    axes,
    codes,
    costs,
    custom_extra,
    evaluate_rows,
    interval,
    point,
    product,
    rows_at,
    weights,
)

if TYPE_CHECKING:
    from .differential_instances import Instance

MAX_LPS = 400


class _Continuous:
    """The continuous mutable features: raw coefficients, room up / down, weights."""

    def __init__(self, inst: Instance) -> None:
        self.features = [f for f in inst.space if admissible(inst, f) is None]
        slices = inst.space.input_slices()
        coef = linear_coefficients(inst.model)
        w = weights(inst)
        x0 = inst.x.iloc[0]
        self.a = np.array([[row[slices[f.name].start] / f.scale for f in self.features]
                           for row in coef]).reshape(len(coef), len(self.features))
        self.c0 = np.array([codes(f, [x0[f.name]])[0] for f in self.features])
        bounds = np.array([interval(inst, f) for f in self.features]).reshape(-1, 2)
        self.up, self.down = bounds[:, 1] - self.c0, self.c0 - bounds[:, 0]
        self.w = np.array([w[f.name] for f in self.features])

    def subsets(self, cap: int | None) -> list[tuple[int, ...]]:
        n = len(self.features)
        return [s for k in range(n + 1) for s in itertools.combinations(range(n), k)
                if cap is None or k <= cap]


def linear_reference(inst: Instance) -> Reference | None:
    """The exact reference (``None`` when the multiclass LP budget is exceeded)."""
    cont = _Continuous(inst)
    grid = axes(inst, [admissible(inst, f) or [inst.x.iloc[0][f.name]] for f in inst.space])
    flats, scores, disc, extra = [], [], [], []
    for flat, Z, move, moved in product(grid):
        flats.append(flat)
        scores.append(raw_scores(inst.model, Z))
        disc.append(np.column_stack([costs(o, move, moved) for o in ("l1", "linf", "l0")]))
        extra.append(custom_extra(inst, rows_at(inst, grid, flat)) if inst.custom
                     else np.zeros(len(flat)))
    S, D, E = np.concatenate(scores), np.concatenate(disc), np.concatenate(extra)
    ref = Reference("linear", exact=True, loose=-math.inf)
    extra = 1e-9
    for _ in range(6):  # μ' grows until the rebuilt point is in P(μ+ε)
        mu = (inst.margin + 1e-6) / (1 - 1e-6) + extra * (1 + inst.margin)
        found = (_multiclass(inst, cont, S, D, E, mu) if inst.task == "multiclass"
                 else _closed_form(inst, cont, S, D, E, mu))
        if found is None:
            return None
        if not math.isfinite(found[0]):
            break
        _, k, delta = found
        row = point(inst, grid, int(np.concatenate(flats)[k]))
        for f, c, d in zip(cont.features, cont.c0, delta):
            row[f.name] = float(c + d)
        cost, score, strict = evaluate_rows(inst, pd.DataFrame([row], columns=inst.space.names))
        ref.points += 1
        if strict[0]:
            ref.offer(float(cost[0]), row, float(score[0]))
            break
        extra *= 10
    if inst.task != "multiclass":
        ref.loose = _closed_form(inst, cont, S, D, E, 0.0)[0]
    ref.points += len(S)
    return ref


# ------------------------------------------------------------------ closed forms
def _needs(inst: Instance, S: np.ndarray, mu: float) -> list[tuple[int, np.ndarray]]:
    """Per orientation o (the score ``o · y`` must rise), the need ``G`` of each
    discrete point (``-inf``: not this orientation; ``inf``: unreachable)."""
    if inst.task == "binary":
        o = 1 if inst.labels[0] == inst.classes[1] else -1
        return [(o, mu - o * S)]
    low, high = inst.labels
    if high - low < 2 * mu:
        return [(1, np.full(len(S), math.inf))]
    up = np.where(S < low + mu, low + mu - S, np.where(S > high - mu, -math.inf, 0.0))
    down = np.where(S > high - mu, S - (high - mu), -math.inf)
    return [(1, up), (-1, down)]


def _curve(g: np.ndarray, M: np.ndarray, w: np.ndarray, objective: str,
           need: np.ndarray) -> np.ndarray:
    """The cheapest cost of gaining ``need`` with gain rates ``g``, room ``M`` (raw
    units) and weights ``w`` (module docstring); ``inf`` beyond the total gain."""
    active = (g > 0) & (M > 0)
    g, M, w = g[active], M[active], w[active]
    total = float(np.sum(g * M))
    if objective == "l1":
        order = np.argsort(-g / w, kind="stable")
        xp = np.concatenate([[0.0], np.cumsum((g * M)[order])])
        fp = np.concatenate([[0.0], np.cumsum((w * M)[order])])
        out = np.interp(need, xp, fp)
    elif objective == "linf":
        taus = np.unique(np.concatenate([[0.0], w * M]))
        gains = np.array([np.sum(g * np.minimum(t / w, M)) for t in taus])
        out = np.interp(need, gains, taus)
    else:
        out = np.minimum(np.searchsorted(np.concatenate([[0.0], np.cumsum(np.sort(g * M)[::-1])]),
                                         need, side="left"), len(g)).astype(float)
    out = np.where(need <= 0, 0.0, out)
    return np.where(need > total * (1 + 1e-12), math.inf, out)


def _moves(g: np.ndarray, M: np.ndarray, w: np.ndarray, objective: str, need: float,
           cost: float) -> np.ndarray:
    """The moves (raw units, >= 0, in the favourable direction) achieving ``_curve``."""
    out = np.zeros(len(g))
    if need <= 0:
        return out
    active = np.flatnonzero((g > 0) & (M > 0))
    if objective == "linf":
        out[active] = np.minimum(cost / w[active], M[active])
        return out
    order = active[np.argsort(-(g / w)[active], kind="stable")]
    if objective == "l0":  # the fewest features: the largest gains, the last one partly
        order = active[np.argsort(-(g * M)[active], kind="stable")[:int(round(cost))]]
    left = need
    for j in order:
        out[j] = min(M[j], left / g[j])
        left -= g[j] * out[j]
        if left <= 0:
            break
    return out


def _closed_form(inst: Instance, cont: _Continuous, S: np.ndarray, D: np.ndarray,
                 E: np.ndarray, mu: float) -> tuple[float, int, np.ndarray]:
    """(cost, discrete point, continuous moves) of the cheapest point at margin μ'
    (``E``: the discrete points' extra costs)."""
    best: tuple[float, int, np.ndarray] = (math.inf, 0, np.zeros(len(cont.features)))
    col = {"l1": 0, "linf": 1, "l0": 2}[inst.objective]
    for o, need in _needs(inst, S, mu):
        r = o * cont.a[0]
        M = np.where(r > 0, cont.up, cont.down)
        for subset in cont.subsets(inst.max_changes):
            mask = np.zeros(len(r), dtype=bool)
            mask[list(subset)] = True
            g = np.where(mask, np.abs(r), 0.0)
            c = _curve(g, M, cont.w, inst.objective, need)
            total = (np.maximum(D[:, col], c) if col == 1 else D[:, col] + c) + E
            if inst.max_changes is not None:
                total = np.where(D[:, 2] + len(subset) > inst.max_changes, math.inf, total)
            total = np.where(need == -math.inf, math.inf, total)
            k = int(np.argmin(total))
            if total[k] < best[0]:
                step = _moves(g, M, cont.w, inst.objective, float(need[k]), float(c[k]))
                best = (float(total[k]), k, np.sign(r) * step)
    return best


# ---------------------------------------------------------------------- the LPs
def _multiclass(inst: Instance, cont: _Continuous, S: np.ndarray, D: np.ndarray,
                E: np.ndarray, mu: float) -> tuple[float, int, np.ndarray] | None:
    """Branch and bound over the discrete points (lower bound: their own cost with their
    extra cost ``E``), one LP per (point, winning class, subset of continuous features);
    ``None`` past the budget."""
    col = {"l1": 0, "linf": 1, "l0": 2}[inst.objective]
    inside = np.array([c in inst.labels for c in inst.classes])
    best: tuple[float, int, np.ndarray] = (math.inf, 0, np.zeros(len(cont.features)))
    budget = MAX_LPS
    subsets = cont.subsets(inst.max_changes) if inst.max_changes is not None or \
        inst.objective == "l0" else [tuple(range(len(cont.features)))]
    low = D[:, col] + E
    for k in np.argsort(low, kind="stable"):
        if low[k] >= best[0]:
            break
        for c in np.flatnonzero(inside):
            for subset in subsets:
                if inst.max_changes is not None and D[k, 2] + len(subset) > inst.max_changes:
                    continue
                extra = len(subset) if col == 2 else 0.0
                if low[k] + extra >= best[0]:
                    continue
                budget -= 1
                if budget < 0:
                    return None
                solved = _lp(cont, S[k], inside, int(c), list(subset), mu, inst.objective)
                if solved is None:
                    continue
                value, delta = solved
                total = (max(D[k, 1], value) if col == 1 else D[k, col] + value) + E[k]
                if total < best[0]:
                    best = (total, int(k), delta)
    return best


def _lp(cont: _Continuous, s: np.ndarray, inside: np.ndarray, c: int, subset: list[int],
        mu: float, objective: str) -> tuple[float, np.ndarray] | None:
    """Cheapest continuous move (weighted units) making class ``c`` beat every class
    outside the target by ``mu``; ``None`` if infeasible."""
    n = len(subset)
    inv = 1.0 / cont.w[subset]
    rows, rhs = [], []
    for j in np.flatnonzero(~inside):
        coef = (cont.a[c, subset] - cont.a[j, subset]) * inv
        rows.append(np.concatenate([-coef, coef]))
        rhs.append(-(mu - (s[c] - s[j])))
    if n == 0:
        return (0.0, np.zeros(len(cont.features))) if all(r >= 0 for r in rhs) else None
    bounds = [(0.0, u) for u in cont.up[subset] * cont.w[subset]] + \
        [(0.0, d) for d in cont.down[subset] * cont.w[subset]]
    A = np.array(rows).reshape(len(rows), 2 * n)
    if objective == "linf":  # p_j + q_j <= t
        A = np.vstack([np.hstack([A, np.zeros((len(rows), 1))]),
                       np.hstack([np.eye(n), np.eye(n), -np.ones((n, 1))])])
        rhs = rhs + [0.0] * n
        bounds.append((0.0, None))
        cost = np.concatenate([np.zeros(2 * n), [1.0]])
    else:
        cost = np.ones(2 * n) if objective == "l1" else np.zeros(2 * n)
    result = linprog(cost, A_ub=A if len(A) else None, b_ub=rhs if len(A) else None,
                     bounds=bounds, method="highs")
    if result.status != 0:
        return None
    delta = np.zeros(len(cont.features))
    delta[subset] = (result.x[:n] - result.x[n:2 * n]) * inv
    value = float(n) if objective == "l0" else float(result.fun)
    return value, delta
