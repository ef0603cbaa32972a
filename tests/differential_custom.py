r"""The ``custom`` case of the differential harness (``tests/differential.py``, issue 37):
rules and objective terms of the user's own, drawn at random, built into cfopt (declared
blocks, raw Pyomo components on ``explainer.milp``, a term added to ``m.objective``) and
recomputed on raw rows independently of cfopt's formulation.

Every component reads only *small discrete* mutable features (integer, binary, ordinal
with a declared range below ``SMALL_DISCRETE``; categorical), which every reference
enumerates whole; the continuous features stay the distance's alone, so the references
remain exact by filtering their candidate rows and adding the extra cost. On a raw row
:math:`z` with factual :math:`\hat z`, :math:`c_f` the numeric code (the label position of
an ordinal) and :math:`o_{f,l} = [z_f = l]`:

* :class:`LinearRule` — :math:`\sum a_f (c_f - r\,\hat c_f) + \sum a_{f,l} (o_{f,l} -
  r\,\hat o_{f,l}) \;\{\le, \ge, =\}\; b` with :math:`r \in \{0, 1\}` (``relative``),
  declared (:class:`cfopt.LinearConstraint`) or a raw constraint on ``m.x``, ``m.onehot``;
  it holds when its violation is at most :math:`10^{-6} \max(1, |b|, \sum |a_i v_i|)`;
* :class:`AtMost` — at most :math:`k` of a group of features change, with a binary of
  its own per feature: :math:`\pm(x_f - \hat x_f) \le (u_f - l_f)\,m_f` (numeric),
  ``category_changed`` :math:`\le m_f` (categorical), :math:`\sum m_f \le k`; a
  :class:`cfopt.CustomConstraint` or a raw block with its own variables;
* :class:`ExtraTerm` — :math:`\sum_i \kappa_i v_i` added to the objective, raw
  (``m.objective.set_value(m.objective.expr + term)``) or as a
  :class:`cfopt.CustomConstraint` cost, with :math:`v` one of ``dev``
  :math:`|c_f - \hat c_f| / R_f` (:math:`R_f = u_f - l_f`, 1 if 0; :math:`\kappa \ge 0`,
  L1 / L∞ objectives), ``changed`` :math:`[c_f \ne \hat c_f]` (:math:`\kappa \ge 0`, L0 or
  a cap on changes), ``move`` :math:`c_f - \hat c_f`, ``onehot`` :math:`o_{f,l}`,
  ``category_changed`` :math:`[z_f \ne \hat z_f]` (any sign).

:func:`draw` picks one to three of them (a linear rule as often as a term, an
:class:`AtMost` half as often; each declared or raw at even odds): linear rules on one to
three features with coefficients in {-2, -1, -0.5, 0.5, 1, 2, 3},
their right-hand side met by the factual (40 %) or by a random admissible point of their
features, with a slack of 0-2 on an inequality (most instances stay feasible, some do
not); :math:`k` below the group's size; terms on one or two features, :math:`|\kappa|
\in \{0.25, 0.5, 1, 2\}` (``move``: divided by :math:`u_f - l_f`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo

import cfopt

from .differential_reference import SMALL_DISCRETE, admissible, codes, reference_size

if TYPE_CHECKING:
    from cfopt.space.feature import Feature

    from .differential_instances import Instance

#: tolerance of a rule's check, relative to its magnitudes (as cfopt's raw checks)
TOLERANCE = 1e-6
_COEFFICIENTS = (-2.0, -1.0, -0.5, 0.5, 1.0, 2.0, 3.0)
_MAGNITUDES = (0.25, 0.5, 1.0, 2.0)


def _same(values: pd.Series, value: Any) -> np.ndarray:
    """Per raw value: equal to ``value``."""
    return np.array([_plain(v) == value for v in values], dtype=bool)


def _relation(lhs: Any, sense: str, rhs: float) -> Any:
    return {"<=": lhs <= rhs, ">=": lhs >= rhs, "==": lhs == rhs}[sense]


@dataclass
class LinearRule:
    """:math:`\\sum a (v - r \\hat v) \\{\\le, \\ge, =\\} b` (module docstring); ``terms``:
    ``(feature, level or None, a)``."""

    name: str
    how: str  # "declared" or "raw"
    terms: list[tuple[str, Any, float]]
    sense: str
    rhs: float
    relative: bool

    @property
    def features(self) -> set[str]:
        return {f for f, _, _ in self.terms}

    def parts(self, inst: Instance, rows: pd.DataFrame) -> np.ndarray:
        """(n, terms) of :math:`a_i v_i` at raw rows."""
        x0 = inst.x.iloc[0]
        out = []
        for feature, level, a in self.terms:
            if level is None:
                f = inst.space[feature]
                v = codes(f, rows[feature]) - (codes(f, [x0[feature]])[0] if self.relative
                                                else 0.0)
            else:
                v = _same(rows[feature], level) - float(self.relative and
                                                        _plain(x0[feature]) == level)
            out.append(a * np.asarray(v, dtype=float))
        return np.column_stack(out)

    def holds(self, inst: Instance, rows: pd.DataFrame) -> np.ndarray:
        parts = self.parts(inst, rows)
        lhs = parts.sum(axis=1)
        tol = TOLERANCE * np.maximum(max(1.0, abs(self.rhs)), np.abs(parts).sum(axis=1))
        gap = {"<=": lhs - self.rhs, ">=": self.rhs - lhs, "==": np.abs(lhs - self.rhs)}
        return gap[self.sense] <= tol

    def cost(self, inst: Instance, rows: pd.DataFrame) -> np.ndarray:
        return np.zeros(len(rows))

    def declared(self) -> cfopt.ConstraintBlock | None:
        if self.how != "declared":
            return None
        return cfopt.LinearConstraint({f if level is None else (f, level): a
                                       for f, level, a in self.terms}, self.sense, self.rhs,
                                      relative=self.relative, name=self.name)

    def add_raw(self, m: Any) -> None:
        """The same rule as a raw constraint on ``m.x`` (``m.x0``), ``m.onehot``
        (``m.onehot0``)."""
        if self.how != "raw":
            return
        r = float(self.relative)
        lhs = sum(a * (m.x[f] - r * m.x0[f]) if level is None else
                  a * (m.onehot[f, level] - r * m.onehot0[f, level])
                  for f, level, a in self.terms)
        setattr(m, self.name, pyo.Constraint(expr=_relation(lhs, self.sense, self.rhs)))

    def describe(self) -> dict[str, Any]:
        return {"kind": "linear", "name": self.name, "how": self.how,
                "terms": [list(t) for t in self.terms], "sense": self.sense,
                "rhs": self.rhs, "relative": self.relative}


@dataclass
class AtMost:
    """At most ``k`` of ``group`` change (module docstring)."""

    name: str
    how: str  # "declared" (a CustomConstraint) or "raw" (a block of one's own)
    group: list[str]
    k: int

    @property
    def features(self) -> set[str]:
        return set(self.group)

    def holds(self, inst: Instance, rows: pd.DataFrame) -> np.ndarray:
        x0 = inst.x.iloc[0]
        changed = sum(~_same(rows[f], _plain(x0[f])) if inst.space[f].is_onehot else
                      codes(inst.space[f], rows[f]) != codes(inst.space[f], [x0[f]])[0]
                      for f in self.group)
        return np.asarray(changed) <= self.k

    def cost(self, inst: Instance, rows: pd.DataFrame) -> np.ndarray:
        return np.zeros(len(rows))

    def rule(self, m: Any, b: pyo.Block) -> list[Any]:
        """A binary per feature of the group, 1 when it moves; at most ``k`` of them."""
        b.moved = pyo.Var(self.group, domain=pyo.Binary)
        out = []
        for f in self.group:
            feature = m.space[f]
            if feature.is_onehot:
                out.append(m.category_changed[f] <= b.moved[f])
                continue
            span = max(feature.upper - feature.lower, 1.0)
            out += [m.x[f] - m.x0[f] <= span * b.moved[f],
                    m.x0[f] - m.x[f] <= span * b.moved[f]]
        return [*out, sum(b.moved[f] for f in self.group) <= self.k]

    def declared(self) -> cfopt.ConstraintBlock | None:
        return cfopt.CustomConstraint(self.rule, name=self.name) if self.how == "declared" \
            else None

    def add_raw(self, m: Any) -> None:
        if self.how != "raw":
            return
        setattr(m, self.name, pyo.Block())
        block = getattr(m, self.name)
        block.rules = pyo.ConstraintList()
        for expr in self.rule(m, block):
            block.rules.add(expr)

    def describe(self) -> dict[str, Any]:
        return {"kind": "at_most", "name": self.name, "how": self.how, "group": self.group,
                "k": self.k}


@dataclass
class ExtraTerm:
    """:math:`\\sum \\kappa v` added to the objective; ``terms``: ``(variable, feature,
    level or None, kappa)`` (module docstring)."""

    name: str
    how: str  # "raw" (added to m.objective) or "declared" (a CustomConstraint cost)
    terms: list[tuple[str, str, Any, float]]

    @property
    def features(self) -> set[str]:
        return {f for _, f, _, _ in self.terms}

    def holds(self, inst: Instance, rows: pd.DataFrame) -> np.ndarray:
        return np.ones(len(rows), dtype=bool)

    def cost(self, inst: Instance, rows: pd.DataFrame) -> np.ndarray:
        x0 = inst.x.iloc[0]
        total = np.zeros(len(rows))
        for var, feature, level, kappa in self.terms:
            f = inst.space[feature]
            if var == "onehot":
                v = _same(rows[feature], level).astype(float)
            elif var == "category_changed":
                v = (~_same(rows[feature], _plain(x0[feature]))).astype(float)
            else:
                move = codes(f, rows[feature]) - codes(f, [x0[feature]])[0]
                span = f.upper - f.lower if f.upper > f.lower else 1.0
                v = {"dev": np.abs(move) / span, "changed": (move != 0).astype(float),
                     "move": move}[var]
            total = total + kappa * v
        return total

    def expression(self, m: Any) -> Any:
        """The term on the model's variables."""
        return sum(kappa * (m.x[f] - m.x0[f] if var == "move" else
                            m.onehot[f, level] if var == "onehot" else
                            getattr(m, var)[f])
                   for var, f, level, kappa in self.terms)

    def declared(self) -> cfopt.ConstraintBlock | None:
        return cfopt.CustomConstraint(cost=lambda m, b: self.expression(m), name=self.name) \
            if self.how == "declared" else None

    def add_raw(self, m: Any) -> None:
        if self.how == "raw":
            m.objective.set_value(m.objective.expr + self.expression(m))

    def describe(self) -> dict[str, Any]:
        return {"kind": "term", "name": self.name, "how": self.how,
                "terms": [list(t) for t in self.terms]}


Component = LinearRule | AtMost | ExtraTerm


# -------------------------------------------------------------------- drawing
def suitable(inst: Instance) -> list[Feature]:
    """The small discrete mutable features (module docstring)."""
    return [f for f in inst.space
            if (f.is_onehot or (f.is_integral and f.upper - f.lower < SMALL_DISCRETE))
            and len(admissible(inst, f) or []) > 1]


def draw(inst: Instance, rng: np.random.Generator) -> list[Component]:
    """One to three random components on the instance's suitable features (none when it
    has none, or when they would grow a tree reference past its cap)."""
    features = suitable(inst)
    if not features:
        return []
    out: list[Component] = []
    for i in range(int(rng.integers(1, 4))):
        kinds = ["linear", "linear", "term", "term"] + ["at_most"] * (len(features) >= 2)
        kind = str(rng.choice(kinds))
        how = str(rng.choice(["declared", "raw"]))
        if kind == "linear":
            out.append(_linear(inst, features, f"dh_linear{i}", how, rng))
        elif kind == "at_most":
            group = _pick(features, rng, 2, 3)
            out.append(AtMost(f"dh_at_most{i}", how, [f.name for f in group],
                              int(rng.integers(0, len(group)))))
        else:
            out.append(ExtraTerm(f"dh_term{i}", how, [_term(inst, f, rng)
                                                     for f in _pick(features, rng, 1, 2)]))
    inst.custom = out
    if reference_size(inst) is None:
        inst.custom = []
    return inst.custom


def _pick(features: list[Feature], rng: np.random.Generator, low: int,
          high: int) -> list[Feature]:
    n = min(int(rng.integers(low, high + 1)), len(features))
    return [features[i] for i in sorted(rng.choice(len(features), size=n, replace=False))]


def _linear(inst: Instance, features: list[Feature], name: str, how: str,
            rng: np.random.Generator) -> LinearRule:
    """A rule that a point holds: the factual (40 %) or a random admissible point on its
    features, with a slack of 0-2 on an inequality."""
    terms = [(f.name, str(rng.choice(f.categories)) if f.is_onehot else None,
              float(rng.choice(_COEFFICIENTS))) for f in _pick(features, rng, 1, 3)]
    sense = str(rng.choice(["<=", ">=", "=="], p=[0.4, 0.4, 0.2]))
    rule = LinearRule(name, how, terms, sense, 0.0, bool(rng.random() < 0.5))
    anchor = inst.x.copy()
    if rng.random() >= 0.4:
        for f, _, _ in terms:
            values = admissible(inst, inst.space[f]) or []
            anchor[f] = [values[int(rng.integers(len(values)))]]
    value = float(rule.parts(inst, anchor).sum())
    slack = 0.0 if sense == "==" else float(rng.choice([0, 0, 1, 2]))
    rule.rhs = value + slack if sense == "<=" else value - slack
    return rule


def _term(inst: Instance, f: Feature, rng: np.random.Generator
          ) -> tuple[str, str, Any, float]:
    """One variable of an objective term with its coefficient (module docstring)."""
    kappa = float(rng.choice(_MAGNITUDES))
    if f.is_onehot:
        var = str(rng.choice(["onehot", "category_changed"]))
        level = str(rng.choice(f.categories)) if var == "onehot" else None
        return var, f.name, level, kappa * float(rng.choice([-1, 1]))
    options = ["move", "move"]
    if inst.objective in ("l1", "linf"):
        options.append("dev")
    if inst.objective == "l0" or inst.max_changes is not None:
        options.append("changed")
    var = str(rng.choice(options))
    if var != "move":
        return var, f.name, None, kappa
    return var, f.name, None, kappa * float(rng.choice([-1, 1])) / max(f.upper - f.lower, 1.0)


# ------------------------------------------------------------- into cfopt
def build(inst: Instance) -> list[cfopt.ConstraintBlock]:
    """The declared blocks of the instance's components (fresh objects)."""
    return [b for c in inst.custom if (b := c.declared()) is not None]


def add_raw(inst: Instance, m: Any) -> None:
    """Add the raw components and objective terms to ``m``."""
    for c in inst.custom:
        c.add_raw(m)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
