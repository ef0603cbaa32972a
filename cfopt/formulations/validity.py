r"""Validity: the learned model must classify the counterfactual as a target class.

Binary models with one logit :math:`y` (``decision == "sign"``): with the mutable
``m.target_sign`` :math:`s \in \{+1, -1\}` (target class 1 or 0),

.. math:: s \, y \ge \mu

where :math:`\mu` = ``m.margin`` > 0 keeps the CE off the decision boundary (the
minimum-distance CE lies on it, and a point on it is classified either way).

Models with one logit per class (``"argmax"``): for a target *set* T given by the
mutable 0/1 ``m.target_mask[c]``, a binary ``m.target_choice[c]`` picks the class that
wins (:math:`\sum_c \text{choice}_c = 1`, :math:`\text{choice}_c \le \text{mask}_c`),
and for every other class :math:`j \notin T`

.. math:: y_c - y_j \ge \mu - M_{cj}(1 - \text{choice}_c) - M_{cj}\,\text{mask}_j,
   \qquad M_{cj} = \mu + \max(0,\, u_j - l_c)

with :math:`[l, u]` the logits' bounds, so the argmax lies in T with margin
:math:`\mu`. Switched off (once or twice), the right-hand side is at most
:math:`\min(0, l_c - u_j)`, which every point satisfies; the :math:`\max(0, \cdot)`
keeps :math:`M_{cj} \ge \mu` when class :math:`j` can never beat class :math:`c`
(with :math:`\mu + u_j - l_c < 0`, a switched-off constraint would still cut).

Regressors (``"regression"``, one output :math:`y`): for the target interval
:math:`[a, b]` in the mutable ``m.target_low`` / ``m.target_high``,

.. math:: a + \mu \le y \le b - \mu

(an open side is set beyond the output's bounds, so its constraint is slack).
Changing the target only changes Param values (no rebuild).

**The margin and solver tolerances.** A solver accepts a point that violates each
constraint by up to its feasibility tolerance (HiGHS 1e-7 as cfopt sets it, Gurobi
1e-6, CBC 1e-7) and an integer variable off by up to its integrality tolerance (1e-7 on
every backend as cfopt sets them; Gurobi's own default is 1e-5). The default
:math:`\mu = 10^{-3}` (logit units) is 100x the
largest feasibility tolerance, so the point the solver returns stays on the target
side even after the tolerances accumulate through a few layers; the model itself
then verifies the decoded point, and a failure re-solves with a 10x larger
:math:`\mu` (``Explainer(verify_retries=3)``) rather than returning it — a smaller
problem, whose point is claimed optimal only against the first solve's bound
(:mod:`cfopt.query.claims`).
``tests/test_numerics.py`` checks these ratios against the installed solvers'
defaults.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from ..errors import AlreadyTargetError
from ..models import ModelAdapter


def add_validity(m: pyo.Block, outputs: pyo.Var, output_bounds: Sequence[tuple[float, float]],
                 adapter: ModelAdapter, margin: float | pyo.Param) -> None:
    """Declare the validity constraints on ``m`` for the model's ``outputs``.

    ``margin`` is a number (``m.margin`` becomes a mutable Param holding it) or the
    mutable Param of another block to share (e.g. a model copy that must follow the
    main model's margin when a retry raises it)."""
    if isinstance(margin, (int, float)):
        m.margin = pyo.Param(mutable=True, initialize=margin)
    else:
        m.margin = pyo.Expression(expr=margin)
    if adapter.decision == "regression":
        lo, hi = output_bounds[0]
        mu = pyo.value(m.margin)
        m.target_low = pyo.Param(mutable=True, initialize=lo - mu - 1.0)
        m.target_high = pyo.Param(mutable=True, initialize=hi + mu + 1.0)
        m.validity = pyo.Constraint(
            ["low", "high"], rule=lambda b, side: b.target_low + b.margin <= outputs[0]
            if side == "low" else outputs[0] <= b.target_high - b.margin)
        return
    if adapter.decision == "sign":
        m.target_sign = pyo.Param(mutable=True, initialize=1.0)
        m.validity = pyo.Constraint(expr=m.target_sign * outputs[0] >= m.margin)
        return
    k = adapter.n_logits
    m.CLASSES = pyo.Set(initialize=range(k), ordered=True)
    m.target_mask = pyo.Param(m.CLASSES, mutable=True, initialize=1.0)
    m.target_choice = pyo.Var(m.CLASSES, domain=pyo.Binary)
    m.target_pick = pyo.Constraint(expr=pyo.quicksum(m.target_choice.values()) == 1)
    m.target_allowed = pyo.Constraint(m.CLASSES, rule=lambda b, c:
                                      b.target_choice[c] <= b.target_mask[c])
    pairs = [(c, j) for c in range(k) for j in range(k) if c != j]

    def beats(b: pyo.Block, c: int, j: int) -> object:
        big_m = b.margin + max(0.0, output_bounds[j][1] - output_bounds[c][0])
        return (outputs[c] - outputs[j] >= b.margin - big_m * (1 - b.target_choice[c])
                - big_m * b.target_mask[j])

    m.validity = pyo.Constraint(pairs, rule=beats)


def add_switched_validity(m: pyo.Block, outputs: pyo.Var,
                          output_bounds: Sequence[tuple[float, float]], adapter: ModelAdapter,
                          margin: float, target_indices: Sequence[int], on: pyo.Var) -> None:
    r"""The target constraints of :func:`add_validity` for a fixed target, held only when
    the binary ``on`` is 1 (a model copy that may or may not have to reach the target,
    e.g. a row an action may cover: :mod:`cfopt.groups.pricing`).

    Binary models: :math:`s\,y \ge \mu - M(1 - \text{on})` with
    :math:`M = \mu + \max(0, -\min s\,y)` over the output's bounds, so that it is slack
    when off. One logit per class: the constraints of :func:`add_validity` with
    :math:`\sum_c \text{choice}_c = \text{on}` instead of 1 (no class chosen switches
    every pair off). Regressors are not supported (``ValueError``)."""
    if adapter.decision == "regression":
        raise ValueError("switched validity applies to classifiers; a regressor's target is "
                         "an interval")
    add_validity(m, outputs, output_bounds, adapter, margin)
    set_target(m, adapter, target_indices)
    if adapter.decision == "sign":
        sign = pyo.value(m.target_sign)
        lo, hi = output_bounds[0]
        lowest = lo if sign > 0 else -hi
        big_m = float(margin) + max(0.0, -lowest)
        m.validity.deactivate()
        m.validity_on = pyo.Constraint(
            expr=sign * outputs[0] >= m.margin - big_m * (1 - on))
        return
    m.target_pick.deactivate()
    m.target_on = pyo.Constraint(expr=pyo.quicksum(m.target_choice.values()) == on)


def deactivate_validity(m: pyo.Block, adapter: ModelAdapter) -> None:
    """Deactivate the target constraints :func:`add_validity` declared on ``m`` for
    ``adapter`` (a model that searches for a misclassified point, e.g. an adversary,
    drops them)."""
    m.validity.deactivate()
    if adapter.decision not in ("regression", "sign"):
        m.target_pick.deactivate()
        m.target_allowed.deactivate()


def hold_model(m: Any, hold: bool) -> None:
    """Put the model's own network and its validity constraints into the
    counterfactual MILP ``m`` (a :class:`~cfopt.CounterfactualModel`; ``hold``) or
    leave them out of it. Left out, the MILP is a relaxation of any problem whose
    feasible points the model classifies as the target with margin μ (e.g. PROPLACE's
    Δ-robust points, Δ holding the model itself): its proven bound stays valid for
    that problem, but its points need not be valid for the model; the caller checks
    them."""
    for component in (m.predictor_constr.block, m.validity):
        if hold:
            component.activate()
        else:
            component.deactivate()


def set_target(m: pyo.Block, adapter: ModelAdapter, target_indices: Sequence[int]) -> None:
    """Set the target class indices (a non-empty proper subset of the classes)."""
    if adapter.decision == "regression":
        raise ValueError("a regressor's target is an interval; use set_target_interval")
    if adapter.decision == "sign":
        (index,) = target_indices
        m.target_sign = 1.0 if index == 1 else -1.0
        return
    chosen = set(target_indices)
    for c in m.CLASSES:
        m.target_mask[c] = 1.0 if c in chosen else 0.0


def target_indices(adapter: ModelAdapter, target: Any, factual_class: Any) -> list[int]:
    """The class indices of a classifier's ``target``: a label, a list of labels, or
    ``None`` / ``"opposite"`` (every class but the factual's; ``"opposite"`` is a label
    when the model has a class of that name). Raises
    :class:`~cfopt.errors.AlreadyTargetError` when the factual's class is among them."""
    classes = adapter.classes
    if _is_opposite(target, classes):
        labels = tuple(c for c in classes if c != factual_class)
    else:
        labels = _target_labels(target)
    indices = _class_indices(adapter, labels)
    if factual_class in labels:
        raise AlreadyTargetError(
            f"the factual is already classified as {factual_class!r}, which is in the "
            f"target {list(labels)}; a counterfactual must change the class")
    return indices


def check_target(adapter: ModelAdapter, target: Any) -> None:
    """``ValueError`` for a ``target`` that is wrong whatever the factual (an unknown
    class label, an empty set, two classes of a binary model, a regressor's target that
    is no interval): what a batch checks once before any solve. A target the factual
    already meets is its row's status, not an error of the batch."""
    if adapter.is_regressor:
        parse_interval(target)
    elif not _is_opposite(target, adapter.classes):
        _class_indices(adapter, _target_labels(target))


def _is_opposite(target: Any, classes: Sequence[Any]) -> bool:
    """Whether ``target`` means every class but the factual's."""
    return target is None or (isinstance(target, str) and target == "opposite"
                              and "opposite" not in classes)


def _target_labels(target: Any) -> tuple:
    """The labels a target names: each of a collection once, or the one label."""
    if isinstance(target, (list, tuple, set, frozenset, np.ndarray, pd.Index)):
        return tuple(dict.fromkeys(target))
    return (target,)


def _class_indices(adapter: ModelAdapter, labels: tuple) -> list[int]:
    """The class indices of ``labels``; ``ValueError`` for none, an unknown one, or more
    than one of a binary model."""
    if not labels:
        raise ValueError("the target set is empty; give at least one class label")
    indices = [adapter.class_index(t) for t in labels]
    if adapter.decision == "sign" and len(indices) != 1:
        raise ValueError(f"a binary model has one target class, got {list(labels)}")
    return indices


def target_interval(target: Any, prediction: float) -> tuple[float, float]:
    """A regressor's target interval (:func:`parse_interval`); raises
    :class:`~cfopt.errors.AlreadyTargetError` when the factual's ``prediction`` lies in
    it."""
    low, high = parse_interval(target)
    if low <= prediction <= high:
        raise AlreadyTargetError(f"the factual's prediction {prediction:g} already lies in "
                                 f"the target interval [{low:g}, {high:g}]")
    return low, high


#: a point meets the margin μ when its target score (:func:`target_score`, in float64) is
#: at least μ − MARGIN_TOLERANCE·(1 + |score|): the band within which a float32 model's
#: own scores and their float64 evaluation differ
MARGIN_TOLERANCE = 1e-6


def score_targets(adapter: ModelAdapter, target: tuple) -> list:
    """The query's ``target`` as :func:`logit_scores` takes it: class indices, or a
    regressor's interval ``[a, b]``."""
    return list(target) if adapter.is_regressor else [adapter.class_index(t) for t in target]


def logit_scores(H: np.ndarray, decision: str, targets: list) -> np.ndarray:
    r"""The margin by which each row of the outputs ``H`` (float64) meets the targets
    (:func:`score_targets`; the left-hand sides of this module's constraints, without
    μ): :math:`s\,y` for a binary model (:math:`s = +1` for class 1),
    :math:`\max_{c \in T} y_c - \max_{j \notin T} y_j` for one logit per class,
    :math:`\min(y - a, b - y)` for a regressor's interval :math:`[a, b]` (an open side
    is infinite). The MILP demands at least μ."""
    H = np.asarray(H, dtype=float)
    if decision == "regression":
        low, high = targets
        return np.minimum(H[:, 0] - low, high - H[:, 0])
    if decision == "sign":
        return (1.0 if targets[0] == 1 else -1.0) * H[:, 0]
    others = [j for j in range(H.shape[1]) if j not in targets]
    return H[:, targets].max(axis=1) - H[:, others].max(axis=1)


def target_score(adapter: ModelAdapter, target: tuple, logits: np.ndarray) -> float:
    """:func:`logit_scores` of one row's ``logits`` for the query's ``target``."""
    return float(logit_scores(np.atleast_2d(logits), adapter.decision,
                              score_targets(adapter, target))[0])


def check_margin(margin: Any) -> None:
    """``ValueError`` unless ``margin`` is a positive finite number."""
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or \
            not (margin > 0 and math.isfinite(margin)):
        raise ValueError(f"margin must be a positive number (logit units), got {margin!r}")


def parse_interval(target: Any) -> tuple[float, float]:
    """A regressor's target ``(low, high)`` (``None``: an open side) as two floats;
    ``ValueError`` naming what is wrong otherwise."""
    if not isinstance(target, (tuple, list)) or len(target) != 2:
        raise ValueError(f"a regressor's target is an interval (low, high) with None for "
                         f"an open side, e.g. (250.0, None); got {target!r}")
    bounds = []
    for side, v, default in (("low", target[0], -math.inf), ("high", target[1], math.inf)):
        if v is None:
            v = default
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or math.isnan(v):
            raise ValueError(f"the target interval's {side} end must be a number or None, "
                             f"got {v!r}")
        bounds.append(float(v))
    low, high = bounds
    if not low < high:
        raise ValueError(f"the target interval ({low:g}, {high:g}) is empty; give low < high")
    return low, high


def set_target_interval(m: pyo.Block, output_bounds: Sequence[tuple[float, float]],
                        low: float, high: float) -> None:
    """Set a regressor's target interval ``[low, high]`` (``±inf`` for an open side)."""
    lo, hi = output_bounds[0]
    slack = (hi - lo) + 1e3 * pyo.value(m.margin) + 1.0  # beyond any retry's margin
    m.target_low = low if np.isfinite(low) else lo - slack
    m.target_high = high if np.isfinite(high) else hi + slack
