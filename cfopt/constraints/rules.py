r"""Actionability rules written by feature names (CE-OCL §3, eq. 6 and its extensions).

Each rule is a :class:`~cfopt.constraints.blocks.ConstraintBlock` (its own group in
the diagnosis), on raw codes :math:`x_f` (numeric features; labelled ordinals and
binaries by their code) and one-hot indicators :math:`o_{f,l}`:

* :class:`LinearConstraint` — :math:`\sum_f a_f x_f + \sum_{(f,l)} a_{f,l} o_{f,l}
  \;\{\le, \ge, =\}\; b`, or on the changes :math:`x_f - \hat x_f` (``relative=True``);
  any linear rule a user needs (e.g. a budget on changes, bounds on one change).
* :class:`IfIncreases` — "if :math:`f` increases then :math:`g` increases by at least
  :math:`k`": a binary :math:`u` with :math:`x_f - \hat x_f \le (u_f - l_f)\,u` and
  :math:`x_g - \hat x_g \ge k - (k + u_g - l_g)(1 - u)` (with :math:`u = 0`, :math:`f`
  may not increase and :math:`g` is free).
* :class:`IfCategory` — "if :math:`f` changes to level :math:`c` then the features
  :math:`G` stay fixed": with :math:`t = o_{f,c} - \hat o_{f,c} \in \{0, 1\}` when
  the factual is not :math:`c` (and :math:`\le 0` otherwise),
  :math:`|x_g - \hat x_g| \le (u_g - l_g)(1 - t)` and, for a categorical :math:`g`,
  ``category_changed[g]`` :math:`\le 1 - t`.
* :class:`Step` — changes in whole steps: :math:`x_f = \hat x_f + s\,k`,
  :math:`k \in \mathbb Z` (e.g. a loan amount in multiples of 500).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyomo.environ as pyo

from ..space.space import FeatureSpace
from .blocks import ConstraintBlock, check_features, code_change, tolerance

if TYPE_CHECKING:
    from ..problem import CounterfactualModel

SENSES = ("<=", ">=", "==")


class LinearConstraint(ConstraintBlock):
    """``sum coef * feature  (<=, >=, ==)  rhs`` over raw codes (or their changes).

    Args:
        coefficients: feature name → coefficient for numeric features, or
            ``(feature, level)`` → coefficient for a categorical level's indicator.
        sense: ``"<="``, ``">="`` or ``"=="``.
        rhs: the right-hand side.
        relative: constrain the changes ``x_f - x̂_f`` (indicators: their changes).
        name: block name (default ``linear``).
    """

    kind = "linear"
    check_reads_query = False

    def __init__(self, coefficients: Mapping[Any, float], sense: str, rhs: float, *,
                 relative: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        if sense not in SENSES:
            raise ValueError(f"sense must be one of {SENSES}, got {sense!r}")
        if not coefficients:
            raise ValueError("a linear constraint needs at least one coefficient")
        for key, value in coefficients.items():
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"coefficient of {key!r} must be a finite number, got "
                                 f"{value!r}")
        if not isinstance(rhs, (int, float)) or not math.isfinite(rhs):
            raise ValueError(f"rhs must be a finite number, got {rhs!r}")
        self.coefficients = dict(coefficients)
        self.sense, self.rhs, self.relative = sense, float(rhs), bool(relative)

    def validate(self, space: FeatureSpace) -> None:
        for key in self.coefficients:
            if isinstance(key, tuple):
                feature, level = key
                check_features(space, [feature], f"linear constraint {self.name!r}")
                f = space[feature]
                if not f.is_onehot or level not in f.categories:
                    raise ValueError(f"linear constraint {self.name!r}: {key!r} is not a "
                                     f"level of a categorical feature")
            else:
                check_features(space, [key], f"linear constraint {self.name!r}",
                               numeric=True)

    def _terms(self, m: CounterfactualModel) -> Any:
        expr = 0
        for key, a in self.coefficients.items():
            if isinstance(key, tuple):
                expr += a * (m.onehot[key] - (m.onehot0[key] if self.relative else 0))
            else:
                expr += a * (m.x[key] - (m.x0[key] if self.relative else 0))
        return expr

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        lhs = self._terms(m)
        block.rule = pyo.Constraint(expr={"<=": lhs <= self.rhs, ">=": lhs >= self.rhs,
                                          "==": lhs == self.rhs}[self.sense])

    def _value(self, space: FeatureSpace, factual: pd.Series, row: pd.Series) -> float:
        total = 0.0
        for key, a in self.coefficients.items():
            if isinstance(key, tuple):
                feature, level = key
                v = float(row[feature] == level)
                if self.relative:
                    v -= float(factual[feature] == level)
            else:
                v = (code_change(space, key, factual, row) if self.relative
                     else space[key].to_code(row[key]))
            total += a * v
        return total

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        value = self._value(m.space, factual, row)
        tol = 1e-6 * max(1.0, abs(self.rhs), sum(abs(a) for a in self.coefficients.values()))
        ok = {"<=": value <= self.rhs + tol, ">=": value >= self.rhs - tol,
              "==": abs(value - self.rhs) <= tol}[self.sense]
        return [] if ok else [f"linear constraint {self.name!r}: {value:g} {self.sense} "
                              f"{self.rhs:g} does not hold"]


class IfIncreases(ConstraintBlock):
    """If numeric ``feature`` increases, numeric ``then`` increases by at least ``by``."""

    kind = "if_increases"
    check_reads_query = False

    def __init__(self, feature: str, then: str, by: float = 0.0, *,
                 name: str | None = None) -> None:
        super().__init__(name)
        if not isinstance(by, (int, float)) or not math.isfinite(by) or by < 0:
            raise ValueError(f"by must be a non-negative number, got {by!r}")
        self.feature, self.then, self.by = feature, then, float(by)

    def validate(self, space: FeatureSpace) -> None:
        check_features(space, [self.feature, self.then], f"rule {self.name!r}", numeric=True)
        if self.feature == self.then:
            raise ValueError(f"rule {self.name!r}: a feature cannot condition itself")

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        f = m.space[self.feature]
        block.increases = pyo.Var(domain=pyo.Binary)
        block.trigger = pyo.Constraint(expr=m.x[self.feature] - m.x0[self.feature]
                                       <= (f.upper - f.lower) * block.increases)
        g = m.space[self.then]
        big_m = self.by + (g.upper - g.lower)
        block.consequence = pyo.Constraint(expr=m.x[self.then] - m.x0[self.then]
                                           >= self.by - big_m * (1 - block.increases))

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        space = m.space
        if code_change(space, self.feature, factual, row) <= tolerance(space, self.feature):
            return []
        rise = code_change(space, self.then, factual, row)
        if rise >= self.by - tolerance(space, self.then):
            return []
        return [f"rule {self.name!r}: {self.feature!r} increases but {self.then!r} changes "
                f"by {rise:g} (< {self.by:g})"]


class IfCategory(ConstraintBlock):
    """If categorical ``feature`` changes to ``level``, the features ``fixed`` stay."""

    kind = "if_category"
    check_reads_query = False

    def __init__(self, feature: str, level: Any, fixed: Sequence[str], *,
                 name: str | None = None) -> None:
        super().__init__(name)
        if isinstance(fixed, str):
            fixed = [fixed]
        if not fixed:
            raise ValueError("give at least one feature to keep fixed")
        self.feature, self.level, self.fixed = feature, level, list(fixed)

    def validate(self, space: FeatureSpace) -> None:
        check_features(space, [self.feature, *self.fixed], f"rule {self.name!r}")
        f = space[self.feature]
        if not f.is_onehot or self.level not in f.categories:
            raise ValueError(f"rule {self.name!r}: {self.level!r} is not a level of "
                             f"categorical feature {self.feature!r}")
        if self.feature in self.fixed:
            raise ValueError(f"rule {self.name!r}: {self.feature!r} cannot fix itself")

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        key = (self.feature, self.level)
        switched = m.onehot[key] - m.onehot0[key]
        space = m.space
        numeric = [g for g in self.fixed if not space[g].is_onehot]
        categorical = [g for g in self.fixed if space[g].is_onehot]

        def span(g: str) -> float:
            return space[g].upper - space[g].lower

        block.stay_up = pyo.Constraint(numeric, rule=lambda b, g: m.x[g] - m.x0[g]
                                       <= span(g) * (1 - switched))
        block.stay_down = pyo.Constraint(numeric, rule=lambda b, g: m.x0[g] - m.x[g]
                                         <= span(g) * (1 - switched))
        block.stay_level = pyo.Constraint(categorical, rule=lambda b, g:
                                          m.category_changed[g] <= 1 - switched)

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        if not (row[self.feature] == self.level and factual[self.feature] != self.level):
            return []
        moved = [g for g in self.fixed if row[g] != factual[g]]
        return [f"rule {self.name!r}: {self.feature!r} changed to {self.level!r} but "
                f"{moved} changed"] if moved else []


class Step(ConstraintBlock):
    """Numeric ``feature`` changes in whole multiples of ``step`` (raw units)."""

    kind = "step"
    check_reads_query = False

    def __init__(self, feature: str, step: float, *, name: str | None = None) -> None:
        super().__init__(name)
        if not isinstance(step, (int, float)) or not math.isfinite(step) or step <= 0:
            raise ValueError(f"step must be a positive number, got {step!r}")
        self.feature, self.step = feature, float(step)

    def validate(self, space: FeatureSpace) -> None:
        check_features(space, [self.feature], f"step {self.name!r}", numeric=True)

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        f = m.space[self.feature]
        reach = math.floor((f.upper - f.lower) / self.step)
        block.steps = pyo.Var(domain=pyo.Integers, bounds=(-reach, reach))
        moved = m.x[self.feature] - m.x0[self.feature]
        block.rule = pyo.Constraint(expr=moved == self.step * block.steps)

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        k = code_change(m.space, self.feature, factual, row) / self.step
        if abs(k - round(k)) * self.step <= tolerance(m.space, self.feature):
            return []
        return [f"step {self.name!r}: {self.feature!r} changed by {k * self.step:g}, not a "
                f"multiple of {self.step:g}"]
