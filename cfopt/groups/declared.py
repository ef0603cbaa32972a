r"""The user's own constraints in a group: each row's moved point meets them.

A single query of row :math:`x^i` declares the space, the declared constraint blocks
(:class:`~cfopt.ConstraintBlock`) and the Pyomo constraints added to the explainer's
model by hand (:mod:`cfopt.constraints.raw`), all with :math:`x^i` as the factual. A
group's action :math:`a` covers row :math:`i` only when :math:`x^i \oplus a` meets all of
them the same way (Lodi & Ramírez-Ayerbe 2024, arXiv 2402.09473, §3, put the
explanation's constraints on every :math:`x^i + a`):

* **The check** (:meth:`DeclaredConstraints.holds`): with row :math:`i` as the model's
  factual and the group's target set (the blocks' per-query update), each block's
  :meth:`~cfopt.ConstraintBlock.violations` and the raw constraints' check at the moved
  row's raw values. Every cover set the master uses passes it.
* **The pricing copies** (:meth:`DeclaredConstraints.add_to_copy`): at row :math:`i` as
  the factual, each active constraint datum of a block or a raw component,
  :math:`\ell \le c + \sum_j a_j v_j \le u` (its linear standard representation with
  the parameters' values at :math:`x^i`), is written in row :math:`i`'s copy with the
  model's feature variables replaced by the copy's (:math:`x_f = l_f + s_f` or
  :math:`l_f + R_f t_f` becomes the copy's :math:`x_f`; :math:`o_{f,l}` the copy's
  one-hot) and each variable of the block's own by a fresh variable of the copy (its
  domain and bounds). It is switched by the cover binary :math:`y_i` with big-M from the
  bounds :math:`[L, U]` of the body over the copy's variables (interval arithmetic):
  :math:`\ell - (\ell - L)(1 - y_i) \le \text{body} \le u + (U - u)(1 - y_i)`. So a copy
  of a covered row holds exactly the row's declared problem at :math:`x^i \oplus a`, and
  an uncovered row's copy constrains nothing.

What a group cannot hold is refused by name before any solve: a cost beyond the
distance (a block's ``objective_term``, a term added to ``m.objective``: a group
minimises actions), a check that needs the solver's values of the user's own variables,
a variable of cfopt's formulation other than the features (a distance, a network's
output), a nonlinear constraint, and a block's own variable without finite bounds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo
from pyomo.contrib.fbbt.fbbt import compute_bounds_on_expr
from pyomo.repn.standard_repn import generate_standard_repn

from ..constraints.raw import members, raw_tolerance, within_block
from ..formulations.features import width
from ..space.feature import plain


@dataclass(frozen=True)
class LinearDatum:
    r"""One constraint datum at one row: :math:`\ell \le c + \sum_j a_j v_j \le u`
    (``None``: no side), the variables as the model's (:meth:`DeclaredConstraints.rows`)."""

    name: str
    constant: float
    terms: tuple[tuple[float, Any], ...]
    lower: float | None
    upper: float | None


class DeclaredConstraints:
    """The declared blocks (not a query's own narrowing) and raw constraints of the
    explainer's model ``m``, held by every row of a group with target ``target`` (module
    docstring). Raises ``ValueError`` naming what a group cannot hold, checked at
    ``first_row`` as the factual."""

    def __init__(self, m: Any, target: tuple, first_row: pd.DataFrame) -> None:
        self.m, self.target = m, list(target)
        self.features = self._features()
        self.blocks = {n: c for n, c in m.constraints.items() if not c.per_query}
        #: whether a block's check reads the query's state (the factual set first)
        self.stateful = any(c.check_reads_query for c in self.blocks.values())
        #: a row's raw values → its raw constraints' data (:meth:`holds`), and every
        #: datum's (:meth:`rows`)
        self._raw: dict[tuple, list[LinearDatum]] = {}
        self._all: dict[tuple, list[LinearDatum]] = {}
        for name, c in self.blocks.items():
            if c.needs_witness:
                raise ValueError(f"the declared constraint {name!r} is checked on the "
                                 f"solver's values of its own variables, which a group's "
                                 f"check of each row does not have: declare it by the "
                                 f"features alone")
        self.at(first_row)
        costly = [n for n, c in self.blocks.items()
                  if c.objective_term(m, m.component(n)) is not None]
        if costly:
            raise ValueError(f"the declared constraints {costly} add costs to the objective; "
                             f"a group minimises the number of actions (or their L1 cost): "
                             f"use an explainer without them")
        raw = m.raw
        if raw.term is not None:
            raise ValueError("a term was added to m.objective; a group minimises the number "
                             "of actions (or their L1 cost): use an explainer without it")
        if raw.needs_witness:
            raise ValueError(f"the constraints added by hand {raw.names} use variables of "
                             f"your own, which a group's check of each row cannot give "
                             f"values: write them on the features (m.x, m.onehot) alone")
        self.rows(first_row)  # every datum readable, every variable the copies can have

    @property
    def names(self) -> list[str]:
        """The declared blocks' and raw constraints' names."""
        return [*self.blocks, *self.m.raw.names]

    def at(self, row: pd.DataFrame) -> None:
        """Row ``row`` (one raw row) as the model's factual, the group's target set."""
        self.m.set_factual(row)
        self.m.set_target(self.target)

    # ------------------------------------------------------------ the check
    def holds(self, row: pd.DataFrame, moved: pd.DataFrame) -> np.ndarray:
        """Whether each raw row of ``moved`` meets every declared and raw constraint
        with the one-row frame ``row`` as the factual: the raw constraints by their
        check (:func:`~cfopt.constraints.raw.violation`, on all rows at once, their
        data at ``row`` read once), each block by its
        :meth:`~cfopt.ConstraintBlock.violations` (``row`` set as the factual first
        only for a block whose check reads it: ``check_reads_query``)."""
        key = _key(row)
        if key not in self._raw or self.stateful:
            self.at(row)
            self._raw[key] = [self.linear(name, data, None)
                              for name, data in self.m.raw.constraints]
        out = self.meets(self._raw[key], moved)
        m, before = self.m, row.iloc[0]
        for k in np.flatnonzero(out) if self.blocks else ():
            after = moved.iloc[k]
            out[k] = not any(c.violations(m, before, after) for c in self.blocks.values())
        return out

    def meets(self, data: list[LinearDatum], moved: pd.DataFrame) -> np.ndarray:
        """Whether each raw row of ``moved`` meets every datum of ``data`` (over the
        features only) within the raw check's tolerance
        (:func:`~cfopt.constraints.raw.raw_tolerance`)."""
        out = np.ones(len(moved), dtype=bool)
        if not data:
            return out
        values = {}
        for var, (name, level, offset, scale) in self.features.items():
            f = self.m.space[name]
            column = moved[name].to_numpy(dtype=object)
            values[id(var)] = (column == level).astype(float) if level is not None else \
                (np.array([f.to_code(v) for v in column], dtype=float) - offset) / scale
        for datum in data:
            parts = [a * values[id(var)] for a, var in datum.terms]
            body = datum.constant + np.sum(parts, axis=0) if parts else \
                np.full(len(moved), datum.constant)
            size = abs(datum.constant) + np.sum(np.abs(parts), axis=0) if parts else \
                abs(datum.constant)
            lower = -math.inf if datum.lower is None else datum.lower
            upper = math.inf if datum.upper is None else datum.upper
            out &= np.maximum(lower - body, body - upper) <= raw_tolerance(size, lower, upper)
        return out

    # ------------------------------------------------------- the pricing copy
    def data(self) -> Iterator[tuple[str, Any, Any]]:
        """``(name, datum, own block)`` of every active constraint datum (the block whose
        variables are its own: the declared block, ``None`` for a raw constraint)."""
        m = self.m
        for name in self.blocks:
            block = m.component(name)
            for data_name, data in members(block):
                yield data_name, data, block
        for data_name, data in m.raw.constraints:
            yield data_name, data, None

    def rows(self, row: pd.DataFrame) -> list[LinearDatum]:
        """Every datum at ``row`` as the factual (:meth:`linear`), read once per row."""
        key = _key(row)
        if key not in self._all:
            self.at(row)
            self._all[key] = [self.linear(name, data, own) for name, data, own in self.data()]
        return self._all[key]

    def linear(self, name: str, data: Any, own: pyo.Block | None) -> LinearDatum:
        """The constraint datum ``data`` at the current factual, checked: linear, over the
        features and the variables of ``own`` (bounded) only."""
        features = self.features
        repn = generate_standard_repn(data.body, compute_values=True, quadratic=False)
        if not repn.is_linear():
            raise ValueError(f"the constraint {name!r} is not linear; a group's pricing "
                             f"MILP holds linear constraints only")
        terms = []
        for a, var in zip(repn.linear_coefs, repn.linear_vars):
            if var not in features and (own is None or not within_block(var, own)):
                raise ValueError(
                    f"the constraint {name!r} uses {var.name}, which a group's pricing "
                    f"copy of a row does not have: write it on the features (m.x, "
                    f"m.onehot, m.x0) and the block's own variables")
            if var not in features and (var.lb is None or var.ub is None):
                raise ValueError(f"the constraint {name!r} uses {var.name} without "
                                 f"finite bounds; a group switches it off for rows "
                                 f"not covered by big-M: give the variable bounds")
            terms.append((float(a), var))
        lower = pyo.value(data.lower) if data.has_lb() else None
        upper = pyo.value(data.upper) if data.has_ub() else None
        return LinearDatum(name, float(repn.constant), tuple(terms), lower, upper)

    def _features(self) -> pyo.ComponentMap:
        r"""The model's feature variables → ``(feature, level, offset, scale)``:
        :math:`x_f = \text{offset} + \text{scale} \cdot v` (``level`` ``None``), or the
        one-hot :math:`o_{f,l} = v`."""
        m, space = self.m, self.m.space
        out = pyo.ComponentMap()
        for f in space:
            if f.is_onehot:
                for level in f.categories:
                    out[m.onehot[f.name, level]] = (f.name, level, 0.0, 1.0)
            elif f.is_integral:
                out[m.x_steps[f.name]] = (f.name, None, f.lower, 1.0)
            else:
                out[m.x_unit[f.name]] = (f.name, None, f.lower, width(space, f.name))
        return out

    def add_to_copy(self, copy: pyo.Block, row: pd.DataFrame, on: Any) -> None:
        """Row ``row``'s declared problem on its pricing ``copy`` (its expressions
        ``x[f]``, ``onehot[f, l]``), switched by the cover binary ``on`` (module
        docstring)."""
        data = self.rows(row)
        features = self.features
        own = pyo.ComponentMap()
        copy.own = pyo.VarList()
        copy.declared = pyo.ConstraintList()

        def term(var: Any) -> Any:
            if var in features:
                name, level, offset, scale = features[var]
                if level is not None:
                    return copy.onehot[name, level]
                return (copy.x[name] - offset) / scale
            if var not in own:
                fresh = own[var] = copy.own.add()
                fresh.domain = var.domain
                fresh.setlb(pyo.value(var.lb))
                fresh.setub(pyo.value(var.ub))
            return own[var]

        for datum in data:  # finite bounds: every variable is (``linear`` checks)
            body = datum.constant + pyo.quicksum(a * term(v) for a, v in datum.terms)
            low, high = compute_bounds_on_expr(body)
            if datum.lower is not None and low < datum.lower:
                copy.declared.add(body >= datum.lower - (datum.lower - low) * (1 - on))
            if datum.upper is not None and high > datum.upper:
                copy.declared.add(body <= datum.upper + (high - datum.upper) * (1 - on))


def _key(row: pd.DataFrame) -> tuple:
    """A one-row frame's raw values, hashable (the data of equal rows are equal)."""
    return tuple(plain(v) for v in row.iloc[0])
