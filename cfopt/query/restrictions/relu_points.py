r"""Heuristic counterfactuals of a ReLU network's query: verified points whose objective
:math:`r` is the radius the network's bounds are tightened within
(:mod:`cfopt.query.restrictions.relu`), and the MILP's first incumbent.

Two searches on the float64 network, each in feature codes (a numeric feature's code, a
categorical's level index) mapped to the model inputs by the input specs
(:class:`~cfopt.space.encoding.CodeEncoder`: the space's own scaling or a pipeline's
preprocessing), respecting bounds, immutable and monotone features and ``max_changes``:

1. **single moves** (:func:`single_moves`): per mutable feature and allowed direction,
   the least move of that feature alone (others at the factual) after which the target
   wins by twice the margin, found on the whole segment to the feature's bound:
   :data:`SCAN_SAMPLES` samples, then bisection between the last sample short of the
   goal and the first at it (an integral feature rounded up to whole units); a
   categorical's every other level;
2. **the greedy walk** (:func:`greedy_counterfactual`): from the factual, each step
   moves the feature with the best ratio of target-score gain (gradient of the
   piecewise-linear score at the current point) to distance cost, or switches the
   category with the best exact gain per cost, until the target wins by twice the
   margin; it finds points that need several features.

The walk's gradient is local: on Adult's (64, 64) network its point cost 1.6-7x the
optimum, where the best single move, seeing the whole segment, was within 6 % of it on
the rows tried (exploratory). :meth:`ReluRestriction.heuristic
<cfopt.query.restrictions.relu.ReluRestriction.heuristic>` takes the cheapest point of
both that the real model verifies and the declared constraints admit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from ...formulations.validity import logit_scores, score_targets
from ...models.network import ReLUNetwork
from ...space.encoding import CodeEncoder, encode

if TYPE_CHECKING:
    from ...problem import CounterfactualModel

#: samples per segment of :func:`single_moves` before the bisection
SCAN_SAMPLES = 64

#: bisection steps of :func:`single_moves` (the crossing within 2^-30 of the segment)
SCAN_BISECTIONS = 30


def _score(net: ReLUNetwork, z: np.ndarray, decision: str, targets: list,
           with_grad: bool = True) -> tuple[float, np.ndarray | None]:
    """Target score (how much the target wins; for a regressor with ``targets = [low,
    high]``, the distance inside the interval) and its gradient at ``z``."""
    pres = [pre[0] for pre in net.pre_activations(z[None, :])]
    masks = [pre > 0 if layer.relu else None for layer, pre in zip(net.layers, pres)]
    h = pres[-1]
    score = float(logit_scores(h[None, :], decision, targets)[0])
    if not with_grad:
        return score, None
    if decision == "regression":
        low, high = targets
        g = np.array([1.0 if h[0] - low <= high - h[0] else -1.0])
    elif decision == "sign":
        g = np.array([1.0 if targets[0] == 1 else -1.0])
    else:
        others = [j for j in range(len(h)) if j not in targets]
        g = np.zeros(len(h))
        g[max(targets, key=lambda t: h[t])] = 1.0
        g[max(others, key=lambda j: h[j])] = -1.0
    for layer, mask in zip(reversed(net.layers), reversed(masks)):
        if mask is not None:
            g = g * mask
        g = layer.weight.T @ g
    return score, g


def target_scores(net: ReLUNetwork, Z: np.ndarray, decision: str, targets: list
                  ) -> np.ndarray:
    """:func:`_score`'s target score at every row of ``Z`` (no gradient), in one batch."""
    return logit_scores(net.logits(np.atleast_2d(Z)), decision, targets)


def factual_score(m: CounterfactualModel) -> float | None:
    """How much the target wins at the factual by the float64 network (the MILP's own
    arithmetic; :func:`_score`), or ``None`` when the model is not a ReLU network or no
    query is set."""
    net = m.adapter.structure
    if not isinstance(net, ReLUNetwork) or m.factual is None or not m.target:
        return None
    return _score(net, m.factual_inputs, m.adapter.decision, score_targets(m.adapter, m.target),
                  with_grad=False)[0]


def greedy_counterfactual(m: CounterfactualModel, max_steps: int = 60) -> pd.DataFrame | None:
    r"""A cheap counterfactual of the current query (raw row), or ``None``: the walk of
    the module docstring on the feature codes, each move mapped to the model inputs by
    the input specs (the space's own scaling or a pipeline's preprocessing,
    :class:`~cfopt.space.encoding.CodeEncoder`): a numeric feature's code moves along
    the slope of the target score per unit of code, :math:`\sum_k g_k a_k` over its
    affine inputs :math:`a_k\,x + b_k`.

    The returned row is classified as the target with the model's margin by the
    float64 network and satisfies bounds, actionability and ``max_changes``; it ignores
    declared blocks and the user's own constraints (the caller checks them:
    :meth:`CounterfactualModel.violations`).
    """
    net = m.adapter.structure
    if not isinstance(net, ReLUNetwork) or m.factual is None or not m.target:
        return None
    enc = CodeEncoder(m.space, m.input_specs)
    decision, targets = m.adapter.decision, score_targets(m.adapter, m.target)
    goal = 2.0 * float(pyo.value(m.margin))
    cap = m.change_cap
    codes = enc.codes(m.factual)
    z = np.array(m.factual_inputs, dtype=float)  # pragma: no mutate (a float64 copy already)
    changed: set[str] = set()
    score, grad = _score(net, z, decision, targets)
    for _ in range(max_steps):
        if score >= goal:
            break
        best: tuple | None = None
        best_ratio = 0.0
        for f in m.space:
            if f.immutable or (f.name not in changed and len(changed) >= cap):
                continue
            i, w = enc.index[f.name], m.weights[f.name]
            if f.is_onehot:
                others = [k for k in range(len(f.categories)) if k != int(codes[i])]
                trials = enc.inputs(z, f.name, np.array(others, dtype=float))
                gains = target_scores(net, trials, decision, targets) - score
                for k, gain, trial in zip(others, gains, trials):
                    ratio = gain / w if w > 0 else np.inf * gain
                    if gain > 0 and ratio > best_ratio:
                        best_ratio, best = ratio, (f, float(k), trial)
                continue
            g = float(grad @ enc.slope(f.name))  # the score's slope per unit of code
            up = g > 0
            room = f.upper - codes[i] if up else codes[i] - f.lower
            if g == 0 or f.direction == ("decrease" if up else "increase") or \
                    room <= 1e-12 * max(1.0, f.upper - f.lower):
                continue
            ratio = abs(g) / w if w > 0 else np.inf
            if ratio > best_ratio:
                step = min(room, (goal - score) / abs(g) * 1.05 + 1e-9 * (f.upper - f.lower))
                if f.is_integral:  # whole raw units, at least one
                    step = min(max(1.0, np.ceil(step - 1e-9)), room)
                value = codes[i] + (step if up else -step)
                best_ratio, best = ratio, (f, value, enc.inputs(z, f.name, [value])[0])
        if best is None:
            return None
        f, codes[enc.index[f.name]], z = best
        changed.add(f.name)
        score, grad = _score(net, z, decision, targets)
    if score < goal / 2:
        return None
    row = enc.row(codes)
    final = _score(net, encode(m.space, m.input_specs, row)[0], decision, targets,
                   with_grad=False)[0]
    if final < goal / 2 or m.space_violations(row):
        return None
    return row


@dataclass(frozen=True)
class SingleMove:
    r"""A counterfactual that changes one feature: ``feature``'s code set to ``code``, a
    weighted move of ``move`` (:math:`w_f |\Delta_f|`)."""

    move: float
    feature: str
    code: float

    def row(self, m: CounterfactualModel) -> pd.DataFrame:
        """The raw row: the factual with this move."""
        enc = CodeEncoder(m.space, m.input_specs)
        codes = enc.codes(m.factual)
        codes[enc.index[self.feature]] = self.code
        return enc.row(codes)


def single_moves(m: CounterfactualModel) -> list[SingleMove]:
    r"""Counterfactuals of the current query that change one feature (module docstring,
    step 1), sorted by the weighted move :math:`w_f |\Delta_f|` (which ranks them by
    any objective :math:`a\,\text{L1} + b\,\text{L0} + c\,\text{L∞}`); each is
    classified as the target with twice the model's margin by the float64 network and
    lies within the feature's bounds and allowed direction (an integral feature's in
    whole units, a category's a level). Empty when the model is not a ReLU network, no
    query is set or ``max_changes`` is below 1. The first sampled crossing of a segment
    is taken: the score is piecewise linear, and a crossing between two samples both
    short of the goal is missed."""
    net = m.adapter.structure
    if not isinstance(net, ReLUNetwork) or m.factual is None or not m.target or \
            m.change_cap < 1:
        return []
    enc = CodeEncoder(m.space, m.input_specs)
    decision, targets = m.adapter.decision, score_targets(m.adapter, m.target)
    goal = 2.0 * float(pyo.value(m.margin))
    codes0 = enc.codes(m.factual)
    z0 = np.array(m.factual_inputs, dtype=float)  # pragma: no mutate (a float64 copy already)

    def scores(name: str, values: np.ndarray) -> np.ndarray:
        return target_scores(net, enc.inputs(z0, name, values), decision, targets)

    found: list[SingleMove] = []

    def keep(f: Any, code: float) -> None:
        step = 1.0 if f.is_onehot else abs(code - codes0[enc.index[f.name]])  # a switch: 1
        found.append(SingleMove(float(m.weights[f.name] * step), f.name, code))

    fractions = np.linspace(0.0, 1.0, SCAN_SAMPLES + 1)[1:]
    segments: list[tuple[Any, float, float, float]] = []  # feature, end, short, reached
    for f in m.space:
        x0 = codes0[enc.index[f.name]]
        if f.immutable:
            continue
        if f.is_onehot:
            others = np.array([k for k in range(len(f.categories)) if k != int(x0)], dtype=float)
            for k in others[scores(f.name, others) >= goal]:
                keep(f, float(k))
            continue
        ends = [e for e, way in ((f.upper, "decrease"), (f.lower, "increase"))
                if f.direction != way and abs(e - x0) > 1e-12 * max(1.0, f.upper - f.lower)]
        for end in ends:
            reached = np.flatnonzero(scores(f.name, x0 + fractions * (end - x0)) >= goal)
            if len(reached):
                k = reached[0]
                segments.append((f, end, fractions[k - 1] if k else 0.0, fractions[k]))
    low = np.array([s[2] for s in segments])
    high = np.array([s[3] for s in segments])
    starts = np.array([codes0[enc.index[f.name]] for f, *_ in segments])
    ends = np.array([end for _, end, *_ in segments])
    for _ in range(SCAN_BISECTIONS if segments else 0):  # every segment in one batch
        middle = 0.5 * (low + high)
        Z = np.vstack([enc.inputs(z0, f.name, [x0 + t * (end - x0)])
                       for (f, *_), x0, end, t in zip(segments, starts, ends, middle)])
        at_goal = target_scores(net, Z, decision, targets) >= goal
        high, low = np.where(at_goal, middle, high), np.where(at_goal, low, middle)
    for (f, *_), x0, end, t in zip(segments, starts, ends, high):
        code = x0 + t * (end - x0)
        if f.is_integral:  # whole raw units away from the factual, within the bound
            step = min(np.ceil(abs(code - x0) - 1e-9), abs(end - x0))
            code = x0 + np.sign(end - x0) * step
            if scores(f.name, np.array([code]))[0] < goal / 2:
                continue
        keep(f, float(code))
    return sorted(found, key=lambda item: item.move)
