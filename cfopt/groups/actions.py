r"""Actions for a group: one change vector applied to many rows, and its exact check.

An **action** :math:`a = (\delta, \lambda)` (Lodi & Ramírez-Ayerbe 2024, *One-for-many
counterfactual explanations by column generation*, arXiv 2402.09473, §2: one
explanation allocated to a subgroup) shifts each numeric feature :math:`f` by
:math:`\delta_f` code units (raw units; level positions of an ordinal) and sets each
categorical feature in :math:`\lambda` to one level. Applied to a row :math:`x^i` it
gives :math:`x^i \oplus a`: :math:`x^i_f + \delta_f` and :math:`\lambda_f` where given,
:math:`x^i_f` elsewhere. It changes at most ``max_changes`` features and respects the
space's actionability everywhere (immutable features untouched, monotone ones moved
their way only).

An action **covers** row :math:`i` when :math:`x^i \oplus a` lies within the feature
bounds, meets the user's declared and raw constraints with :math:`x^i` as the factual
(:mod:`cfopt.groups.declared`), its cost for the row (the explainer's weighted L1, a
category change counting its weight) is at most ``max_cost`` when one is given, and the
*real model's*
``predict`` puts it in the target, with the validity margin μ on the model's scores
in float64 where the model has scores (:func:`~cfopt.formulations.validity.logit_scores`,
within :data:`~cfopt.formulations.validity.MARGIN_TOLERANCE`). Every cover set the
master uses is this check's, never the pricing MILP's own claim.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..formulations.validity import MARGIN_TOLERANCE, logit_scores, score_targets
from ..space.encoding import encode
from ..space.feature import plain

if TYPE_CHECKING:
    from .declared import DeclaredConstraints

#: how far (relative to the feature's width) a shifted continuous value may pass a bound
#: and be read as on it: the pricing MILP meets its bounds within the solver's tolerance
BOUND_SLACK = 1e-9


@dataclass(frozen=True)
class Action:
    """A change vector for a group (module docstring).

    Attributes:
        shifts: numeric feature → shift in code units (raw units; level positions of
            an ordinal or a labelled binary); no zero shifts.
        levels: categorical feature → the level it is set to.
    """

    shifts: Mapping[str, float] = field(default_factory=dict)
    levels: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shifts", {n: float(v) for n, v in self.shifts.items()
                                            if v != 0})
        object.__setattr__(self, "levels", {n: plain(v) for n, v in self.levels.items()})

    @property
    def features(self) -> list[str]:
        """The features the action changes, shifts first."""
        return [*self.shifts, *self.levels]

    def key(self) -> tuple:
        """A hashable identity (two equal actions are one column)."""
        return (tuple(sorted(self.shifts.items())),
                tuple(sorted((n, repr(v)) for n, v in self.levels.items())))

    def describe(self, space: Any) -> str:
        """The action in words, e.g. ``capital-gain +5000, occupation → Sales``."""
        parts = []
        for n, d in self.shifts.items():
            f = space[n]
            unit = " levels" if f.labelled else ""
            amount = f"{d:+g}" if f.is_integral else f"{d:+.6g}"
            parts.append(f"{n} {amount}{unit}")
        parts += [f"{n} → {v}" for n, v in self.levels.items()]
        return ", ".join(parts) or "no change"

    def to_dict(self) -> dict[str, Any]:
        return {"shifts": dict(self.shifts), "levels": dict(self.levels)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Action:
        return cls(shifts=dict(data.get("shifts", {})), levels=dict(data.get("levels", {})))

    @classmethod
    def between(cls, space: Any, before: pd.Series, after: pd.Series) -> Action:
        """The action that takes the raw row ``before`` to ``after`` (a row's own
        counterfactual as an action: it covers that row)."""
        shifts, levels = {}, {}
        for f in space:
            if before[f.name] == after[f.name]:
                continue
            if f.is_onehot:
                levels[f.name] = after[f.name]
            else:
                shifts[f.name] = f.to_code(after[f.name]) - f.to_code(before[f.name])
        return cls(shifts, levels)


def raw_values(feature: Any, codes: np.ndarray) -> np.ndarray:
    """:meth:`~cfopt.space.feature.Feature.from_code` of many codes at once."""
    if feature.labelled:
        labels = np.empty(len(feature.categories), dtype=object)
        labels[:] = list(feature.categories)
        return labels[np.round(codes).astype(int)]
    if feature.is_integral:
        return np.round(codes).astype(np.int64)
    return codes.astype(float)


class GroupRows:
    """The rows of a group, their target, and the exact check of an action on them.

    Args:
        space: the feature space.
        adapter: the parsed learned model (:class:`~cfopt.models.ModelAdapter`).
        specs: the model's input specs over ``space``.
        X: the validated raw rows (columns in space order).
        target: the target labels (a tuple of the model's classes).
        margin: the validity margin μ.
        weights: feature → L1 weight (the explainer's).
        max_changes: the most features one action may change.
        max_cost: the most an action may cost a row it covers (``None``: no cap).
        declared: the user's declared and raw constraints, which each covered row's
            moved point meets with the row as the factual
            (:class:`~cfopt.groups.declared.DeclaredConstraints`; ``None``: none).
    """

    def __init__(self, space: Any, adapter: Any, specs: list, X: pd.DataFrame,
                 target: tuple, margin: float, weights: Mapping[str, float],
                 max_changes: int, max_cost: float | None,
                 declared: DeclaredConstraints | None = None) -> None:
        self.space, self.adapter, self.specs = space, adapter, specs
        self.X = X
        self.target = tuple(target)
        self.margin = float(margin)
        self.weights = dict(weights)
        self.max_changes = int(max_changes)
        self.max_cost = None if max_cost is None else float(max_cost)
        self.declared = declared
        self.codes = {f.name: np.array([f.to_code(v) for v in X[f.name]], dtype=float)
                      for f in space if not f.is_onehot}

    @property
    def n(self) -> int:
        return len(self.X)

    def admissible(self, action: Action) -> list[str]:
        """What ``action`` breaks whatever the row: unknown features, an immutable one
        changed, a monotone one moved the wrong way, a level that does not exist, a
        fractional shift of an integral feature, more than ``max_changes`` features."""
        problems = []
        for n in action.features:
            if n not in self.space:
                problems.append(f"unknown feature {n!r}")
                continue
            f = self.space[n]
            if f.immutable:
                problems.append(f"immutable feature {n!r} changed")
            if f.is_onehot != (n in action.levels):
                need = "categorical: set a level" if f.is_onehot else "numeric: give a shift"
                problems.append(f"{n!r} is {need}")
            elif n in action.levels and action.levels[n] not in f.categories:
                problems.append(f"{action.levels[n]!r} is not a level of {n!r}")
            elif n in action.shifts:
                d = action.shifts[n]
                if not math.isfinite(d):
                    problems.append(f"shift of {n!r} is not finite")
                elif f.is_integral and d != round(d):
                    problems.append(f"integral feature {n!r} shifted by {d:g}")
                elif (f.direction == "increase" and d < 0) or \
                        (f.direction == "decrease" and d > 0):
                    problems.append(f"{f.direction}-only feature {n!r} shifted by {d:+g}")
        if len(action.features) > self.max_changes:
            problems.append(f"{len(action.features)} features changed, more than "
                            f"max_changes={self.max_changes}")
        return problems

    def shift_range(self, name: str) -> tuple[float, float]:
        """Every shift of numeric feature ``name`` that keeps some row within its bounds,
        cut to the feature's direction."""
        f = self.space[name]
        codes = self.codes[name]
        lo, hi = f.lower - float(codes.max()), f.upper - float(codes.min())
        if f.direction == "increase":
            lo = 0.0
        elif f.direction == "decrease":
            hi = 0.0
        return (min(lo, 0.0), max(hi, 0.0))

    def apply_many(self, actions: Sequence[Action]) -> tuple[pd.DataFrame, np.ndarray,
                                                             np.ndarray]:
        """Every row with each action applied, action by action (rows ``k n .. k n + n
        - 1`` are action ``k``'s, raw values), which stay within the feature bounds (a
        value past a bound by at most :data:`BOUND_SLACK` of the feature's width is read
        as on it), and each one's weighted L1 cost (a category change counting its
        weight): one frame for all of them."""
        m, n = len(actions), self.n
        after = self.X.iloc[np.tile(np.arange(n), m)].reset_index(drop=True)
        inside = np.ones(m * n, dtype=bool)
        costs = np.zeros(m * n)
        for name in dict.fromkeys(f for a in actions for f in a.shifts):
            f = self.space[name]
            d = np.repeat([a.shifts.get(name, 0.0) for a in actions], n)
            code = np.tile(self.codes[name], m) + d
            if f.is_integral:
                code = np.round(code)
            slack = BOUND_SLACK * max(1.0, f.upper - f.lower)
            inside &= (code >= f.lower - slack) & (code <= f.upper + slack)
            code = np.clip(code, f.lower, f.upper)
            costs += self.weights[name] * np.abs(code - np.tile(self.codes[name], m))
            after[name] = raw_values(f, code)
        for name in dict.fromkeys(f for a in actions for f in a.levels):
            given = np.repeat([name in a.levels for a in actions], n)
            levels = np.empty(m, dtype=object)
            levels[:] = [a.levels.get(name) for a in actions]
            before = after[name].to_numpy(dtype=object)
            new = np.where(given, np.repeat(levels, n), before)
            costs += self.weights[name] * (new != before)
            after[name] = new
        return after, inside, costs

    def apply(self, action: Action) -> tuple[pd.DataFrame, np.ndarray]:
        """Every row with ``action`` applied, and which stay within the feature bounds
        (:meth:`apply_many`)."""
        after, inside, _ = self.apply_many([action])
        after.index = self.X.index
        return after, inside

    def covers_many(self, actions: Sequence[Action]) -> tuple[np.ndarray, np.ndarray,
                                                              pd.DataFrame]:
        """Which rows each action covers (module docstring; an actions × rows mask),
        each row's cost, and the rows with the actions applied (:meth:`apply_many`);
        the model is asked once, for the points within the bounds and the cap only. An
        inadmissible action covers none."""
        after, inside, costs = self.apply_many(actions)
        ok = inside & np.repeat([not self.admissible(a) for a in actions], self.n)
        if self.max_cost is not None:
            ok &= costs <= self.max_cost + 1e-9 * max(1.0, self.max_cost)
        if ok.any():
            ok[ok] = self.meets_target(after[ok])
        if self.declared is not None:
            for j in range(self.n):  # row j's moved points: entries j, n + j, 2n + j, ...
                at = j + self.n * np.flatnonzero(ok[j::self.n])
                if len(at):
                    ok[at] = self.declared.holds(self.X.iloc[[j]], after.iloc[at])
        shape = (len(actions), self.n)
        return ok.reshape(shape), costs.reshape(shape), after

    def covers(self, action: Action) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
        """Which rows ``action`` covers (module docstring), each row's cost, and the
        rows with the action applied (:meth:`covers_many` of one action)."""
        ok, costs, after = self.covers_many([action])
        after.index = self.X.index
        return ok[0], costs[0], after

    def meets_target(self, rows: pd.DataFrame) -> np.ndarray:
        """Whether the real model puts each row in the target, with the margin μ on its
        scores in float64 where it has scores (trees: the class only)."""
        labels = self.adapter.predict_rows(self.space, rows)
        hit = np.array([plain(v) in self.target for v in labels], dtype=bool)
        scores = self.adapter.structure.margin_scores(encode(self.space, self.specs, rows))
        if scores is None:
            return hit
        s = logit_scores(np.atleast_2d(scores), self.adapter.decision,
                         score_targets(self.adapter, self.target))
        return hit & (s >= self.margin - MARGIN_TOLERANCE * (1.0 + np.abs(s)))
