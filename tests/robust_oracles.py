r"""Exact references of the robust harness (``tests/differential_robust.py``), computed
from a network's parameters with numpy alone (never through cfopt's formulations).

**Δ worst case** (PROPLACE Def. 7; Jiang et al. 2024): the least target margin at a
model input :math:`z` over every network whose weights and biases lie within ±δ of
the trained ones. Every row of every layer shifts independently, so for one or two
hidden layers the minimum separates:

* the output: the margin is :math:`c^\top h + \beta` over the last hidden layer's
  :math:`h \ge 0`; the worst output row gives :math:`c = s w - \delta`,
  :math:`\beta = s b - \delta` for a binary logit of sign :math:`s`, and
  :math:`c = W_t - W_j - 2\delta`, :math:`\beta = b_t - b_j - 2\delta` for the
  margin :math:`y_t - y_j` of a network with a logit per class;
* the first hidden layer: unit :math:`k` ranges over exactly
  :math:`[\mathrm{relu}(p_k - r), \mathrm{relu}(p_k + r)]` with :math:`p = W_1 z + b_1`
  and :math:`r = \delta(\|z\|_1 + 1)`, each unit independently of the others;
* one hidden layer: the minimum of the linear :math:`c^\top h` over that box, unit by
  unit (its lower end when :math:`c_k \ge 0`, else its upper end);
* two hidden layers: for :math:`h_1 \ge 0` the second layer's unit :math:`j` is least
  at :math:`\mathrm{relu}((W_{2j} - \delta) h_1 + b_{2j} - \delta)` and largest at
  :math:`\mathrm{relu}((W_{2j} + \delta) h_1 + b_{2j} + \delta)`; the worst case takes
  the least where :math:`c_j > 0` and the largest where :math:`c_j < 0`, so the margin
  is a continuous piecewise-linear function of :math:`h_1` over the first layer's box.
  Its minimum lies at a vertex of the arrangement of the box's faces and the
  hyperplanes where a second-layer argument is 0: every choice of :math:`n_1`
  independent ones among them is solved and the feasible vertices evaluated.

**K-neighbourhood** (Virgolin & Fracaros 2023, Def. 5) of a counterfactual on an
integer grid: every kept feature (unchanged, with a perturbation annotation) over the
integers in :math:`[z - p^-(z), z + p^+(z)]` within its bounds, changed features fixed:
a finite set, enumerated. **C-setback** (Def. 4, Eq. 6): each changed feature pushed
back towards the factual by :math:`\min(p(z), |z - x|)`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from scipy.optimize import linprog

Parameters = list[tuple[np.ndarray, np.ndarray]]


def parameters(net: torch.nn.Sequential) -> Parameters:
    """(W, b) of every linear layer, float64."""
    return [(m.weight.detach().double().numpy().copy(), m.bias.detach().double().numpy().copy())
            for m in net if isinstance(m, torch.nn.Linear)]


def logits(params: Parameters, Z: np.ndarray) -> np.ndarray:
    """The network's outputs on the rows of ``Z`` (float64)."""
    h = np.asarray(Z, dtype=float)
    for i, (W, b) in enumerate(params):
        h = h @ W.T + b
        if i < len(params) - 1:
            h = np.maximum(h, 0.0)
    return h


def margin(params: Parameters, Z: np.ndarray, target: int) -> np.ndarray:
    """The target's margin per row: the signed logit of a binary network (class index
    1 is a positive logit), else the target's logit less the largest other one."""
    out = logits(params, Z)
    if out.shape[1] == 1:
        return out[:, 0] if target == 1 else -out[:, 0]
    others = np.delete(out, target, axis=1)
    return out[:, target] - others.max(axis=1)


def _output_rows(params: Parameters, delta: float, target: int) -> list[tuple[np.ndarray, float]]:
    """(c, β) of each margin's worst output rows (module docstring)."""
    W, b = params[-1]
    if W.shape[0] == 1:
        s = 1.0 if target == 1 else -1.0
        return [(s * W[0] - delta, s * b[0] - delta)]
    return [(W[target] - W[j] - 2 * delta, b[target] - b[j] - 2 * delta)
            for j in range(W.shape[0]) if j != target]


def delta_worst(params: Parameters, Z: np.ndarray, delta: float, target: int) -> np.ndarray:
    """The exact least margin over the model shift Δ at each row of ``Z`` (module
    docstring; one or two hidden layers)."""
    Z = np.atleast_2d(np.asarray(Z, dtype=float))
    if len(params) not in (2, 3):
        raise ValueError("the closed form covers one or two hidden layers")
    W1, b1 = params[0]
    pre = Z @ W1.T + b1
    r = delta * (np.abs(Z).sum(axis=1, keepdims=True) + 1.0)
    low, high = np.maximum(pre - r, 0.0), np.maximum(pre + r, 0.0)
    worst = np.full(len(Z), np.inf)
    for c, beta in _output_rows(params, delta, target):
        if len(params) == 2:
            value = np.where(c >= 0, c * low, c * high).sum(axis=1) + beta
        else:
            value = _two_layer_minimum(params[1], c, beta, delta, low, high)
        worst = np.minimum(worst, value)
    return worst


def _two_layer_minimum(layer: tuple[np.ndarray, np.ndarray], c: np.ndarray, beta: float,
                       delta: float, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """min over h in [low, high] (per row) of Σ_j c_j relu(G_j h + g_j) + β."""
    W2, b2 = layer
    G = np.where((c > 0)[:, None], W2 - delta, W2 + delta)
    g = np.where(c > 0, b2 - delta, b2 + delta)
    n1 = W2.shape[1]
    normals = [np.eye(n1)[k] for k in range(n1)] * 2 + [G[j] for j in range(len(G))]
    P = len(low)
    best = np.full(P, np.inf)
    for combo in itertools.combinations(range(len(normals)), n1):
        A = np.array([normals[i] for i in combo])
        if abs(np.linalg.det(A)) < 1e-12:
            continue
        rhs = np.stack([low[:, i] if i < n1 else high[:, i - n1] if i < 2 * n1
                        else np.full(P, -g[i - 2 * n1]) for i in combo], axis=1)
        h = np.linalg.solve(A, rhs.T).T
        inside = np.all((h >= low - 1e-9) & (h <= high + 1e-9), axis=1)
        h = np.clip(h, low, high)
        value = np.maximum(h @ G.T + g, 0.0) @ c + beta
        best = np.where(inside, np.minimum(best, value), best)
    return best


def sampled_worst(params: Parameters, z: np.ndarray, delta: float, target: int,
                  rng: np.random.Generator, n: int = 400) -> float:
    """The least margin at ``z`` over ``n`` shifted networks (uniform in the box and on
    its vertices): an upper bound of :func:`delta_worst` (its check)."""
    worst = math.inf
    for i in range(n):
        def draw(shape: tuple[int, ...]) -> np.ndarray:
            return rng.uniform(-delta, delta, shape) if i % 2 else \
                delta * rng.choice([-1.0, 1.0], shape)
        shifted = [(W + draw(W.shape), b + draw(b.shape)) for W, b in params]
        worst = min(worst, float(margin(shifted, z[None, :], target)[0]))
    return worst


# ------------------------------------------------------------------ perturbations
def moves(perturbation: Any, value: float) -> tuple[float, float]:
    """(down, up): the largest moves of an annotated numeric value (relative ones are
    fractions of |value|)."""
    scale = abs(value) if perturbation.kind == "relative" else 1.0
    return perturbation.decrease * scale, perturbation.increase * scale


def k_neighbourhood(features: Sequence[Any], x: dict[str, Any], z: dict[str, Any]
                    ) -> list[dict[str, Any]]:
    """Every K-perturbation of ``z`` (module docstring) on integer features."""
    axes = []
    for f in features:
        v = z[f.name]
        if v == x[f.name] and f.perturbation is not None:
            down, up = moves(f.perturbation, v)
            lo = math.ceil(max(f.lower, v - down) - 1e-9)
            hi = math.floor(min(f.upper, v + up) + 1e-9)
            axes.append(list(range(lo, hi + 1)))
        else:
            axes.append([v])
    return [dict(zip([f.name for f in features], p)) for p in itertools.product(*axes)]


def setback(features: Sequence[Any], weights: dict[str, float], x: dict[str, Any],
            z: dict[str, Any]) -> float:
    """The cost of undoing the maximal C-setback of ``z`` (module docstring)."""
    total = 0.0
    for f in features:
        xv, zv = x[f.name], z[f.name]
        if zv == xv or f.perturbation is None:
            continue
        down, up = moves(f.perturbation, zv)
        total += weights[f.name] * min(down if zv > xv else up, abs(zv - xv))
    return total


def in_hull(points: np.ndarray, Z: np.ndarray, tolerance: float = 1e-7) -> np.ndarray:
    """Per row of ``Z``: whether it is a convex combination of ``points`` (an LP)."""
    A = np.vstack([points.T, np.ones(len(points))])
    out = np.zeros(len(Z), dtype=bool)
    for i, z in enumerate(Z):
        if np.any(z < points.min(axis=0) - tolerance) or np.any(z > points.max(axis=0)
                                                                 + tolerance):
            continue
        # least L1 slack: 0 within the hull
        n, d = len(points), len(z)
        cost = np.concatenate([np.zeros(n), np.ones(2 * (d + 1))])
        eye = np.eye(d + 1)
        res = linprog(cost, A_eq=np.hstack([A, eye, -eye]), b_eq=np.append(z, 1.0),
                      bounds=[(0, None)] * (n + 2 * (d + 1)), method="highs")
        out[i] = res.status == 0 and res.fun <= tolerance
    return out
