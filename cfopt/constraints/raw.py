r"""The user's own Pyomo components as part of the declared problem (issue 37).

A researcher composes on ``explainer.milp`` directly: a constraint
(``m.no_older = pyo.Constraint(expr=m.x["age"] <= m.x0["age"])``), a block of their own
with variables of their own, or a term added to the objective
(``m.objective.set_value(m.objective.expr + 5 * m.dev["capital-gain"])``). Each is part
of the *declared problem*, so every returned point is checked against it on its own raw
values, exactly as a declared :class:`~cfopt.ConstraintBlock` is:

* **Values at a raw row** (:class:`RowValues`). The variables a row determines are set
  to the row's values: the feature variables (``x_steps``, ``x_unit`` behind ``x[f]``,
  ``onehot``), the distances as :mod:`cfopt.formulations.distances` defines them
  (:math:`\text{dev}_f = |x_f - \hat x_f| / R_f`, :math:`\text{changed}_f = [x_f \ne
  \hat x_f]`, :math:`\text{linf} = \max_f w_f |x_f - \hat x_f|`), and the predictor's
  normalized inputs and outputs (the logits of the float64 structure the MILP encodes).
  A variable of the user's own (declared outside cfopt's formulation) keeps the
  solver's value: with it as a *witness*, the row and those values are a solution of
  the user's MILP. A variable of cfopt's formulation that a row does not determine (a
  hidden neuron, a leaf, a declared block's own) has no meaning at a raw point: a raw
  component that uses one is refused before any solve (:func:`raw_problem`).
* **The check.** A constraint :math:`\ell \le g(x) \le u` holds at the row when
  :math:`\max(\ell - g, g - u) \le` :data:`RAW_TOLERANCE` :math:`\cdot \max(1, |\ell|,
  |u|, \sum_i |a_i v_i| + |c|)` for the linear form :math:`g = c + \sum_i a_i v_i`
  (relative to the magnitudes the row's terms reach, as the solvers' tolerances are).
  A point without the solver's values (a heuristic's) cannot be checked against a
  constraint that uses variables of the user's own; it is then not admitted.
* **The objective.** cfopt minimises ``m.objective``: the distance plus the declared
  blocks' costs (the *composed* objective). When the user changes its expression, the
  difference is the user's term :math:`t(x)`, linear (its standard representation, per
  query, with the factual's parameters); the answer's objective is that of the user's
  objective at the row, and the bounds are of it. The speed paths (tree regions, network
  bounds within a radius) reason on the distance: every point of objective
  :math:`\le r` has distance :math:`\le r - \underline t` for a lower bound
  :math:`\underline t` of every cost beyond the distance (:meth:`RawProblem.extra_floor`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap, ComponentSet
from pyomo.contrib.fbbt.fbbt import compute_bounds_on_expr
from pyomo.core.expr.visitor import identify_variables
from pyomo.repn.standard_repn import generate_standard_repn

from ..formulations.features import width
from ..space.encoding import encode, unit_box

if TYPE_CHECKING:
    from ..problem import CounterfactualModel

#: relative tolerance of a raw constraint's check on a raw row (module docstring)
RAW_TOLERANCE = 1e-6

#: the components of cfopt's formulation whose values a raw row determines
DETERMINED = ("x_steps", "x_unit", "onehot", "dev", "changed", "linf")


def determined_variables(m: CounterfactualModel) -> ComponentSet:
    """The variables of ``m`` a raw row determines (module docstring)."""
    out = ComponentSet()
    for name in DETERMINED:
        comp = m.component(name)
        if comp is not None:
            out.update(comp.values())
    predictor = m.predictor_constr
    out.update(predictor.unit_inputs.values())
    out.update(predictor.outputs.values())
    return out


def is_users(m: CounterfactualModel, var: Any) -> bool:
    """Whether ``var`` belongs to a component the user added to ``m`` itself (not to
    cfopt's formulation nor to a declared block)."""
    top = var.parent_component()
    block = top.parent_block()
    while block is not None and block is not m:  # up to the component directly on m
        top = block.parent_component()
        block = top.parent_block()
    return block is m and not m.is_own_component(top.local_name)


class RowValues:
    """While entered, the variables a raw one-row frame determines hold its values
    (module docstring); the solver's values are restored on exit."""

    def __init__(self, m: CounterfactualModel, row: pd.DataFrame) -> None:
        self.m, self.row = m, row
        self.saved: list[tuple[Any, Any]] = []

    def values(self) -> ComponentMap:
        m, space = self.m, self.m.space
        values = row_codes(m, self.row)
        out = ComponentMap()
        weighted = []
        for f in space:
            if f.is_onehot:
                level = self.row.iloc[0][f.name]
                for other in f.categories:
                    out[m.onehot[f.name, other]] = float(other == level)
                weighted.append(m.weights[f.name] * float(level != m.factual.iloc[0][f.name]))
                continue
            code, x0, w = values[f.name], pyo.value(m.x0[f.name]), width(space, f.name)
            if f.is_integral:
                out[m.x_steps[f.name]] = code - f.lower
            else:
                out[m.x_unit[f.name]] = (code - f.lower) / w
            if m.component("dev") is not None:
                out[m.dev[f.name]] = abs(code - x0) / w
            if m.component("changed") is not None:
                out[m.changed[f.name]] = float(code != x0)
            weighted.append(m.weights[f.name] * abs(code - x0))
        if m.component("linf") is not None:
            out[m.linf] = max(weighted, default=0.0)
        predictor = m.predictor_constr
        z = encode(space, m.input_specs, self.row)
        lo, span = unit_box(predictor.input_bounds)
        for i, t in enumerate((z[0] - lo) / span):
            out[predictor.unit_inputs[i]] = float(t)
        logits = np.atleast_2d(m.adapter.structure.logits(z))[0]
        for j, value in enumerate(logits):
            out[predictor.outputs[j]] = float(value)
        return out

    def __enter__(self) -> RowValues:
        for var, value in self.values().items():
            self.saved.append((var, var.value))
            var.set_value(value, skip_validation=True)
        return self

    def __exit__(self, *exc: object) -> None:
        for var, value in reversed(self.saved):
            var.set_value(value, skip_validation=True)
        self.saved.clear()


def row_codes(m: CounterfactualModel, row: pd.DataFrame) -> dict[str, float]:
    """The numeric features' codes of a raw one-row frame."""
    values = row.iloc[0]
    return {f.name: float(f.to_code(values[f.name])) for f in m.space if not f.is_onehot}


def violation(data: Any) -> tuple[float, float] | None:
    """How far a constraint's body lies outside its bounds at the variables' current
    values, and the tolerance it is allowed (module docstring); ``None`` when a
    variable has no value."""
    body = pyo.value(data.body, exception=False)
    if body is None:
        return None
    lower = pyo.value(data.lower) if data.has_lb() else -math.inf
    upper = pyo.value(data.upper) if data.has_ub() else math.inf
    repn = generate_standard_repn(data.body, compute_values=True, quadratic=False)
    scale = abs(float(repn.constant)) + sum(
        abs(float(a) * float(v.value if v.value is not None else 0.0))
        for a, v in zip(repn.linear_coefs, repn.linear_vars))
    return max(lower - body, body - upper, 0.0), raw_tolerance(scale, lower, upper)


def raw_tolerance(scale: Any, lower: float, upper: float) -> Any:
    r"""What a raw constraint's check allows (module docstring): :data:`RAW_TOLERANCE`
    times the largest of 1, the row's ``scale`` :math:`\sum_i |a_i v_i| + |c|` (a number
    or an array of them) and the finite sides."""
    ends = [abs(b) for b in (lower, upper) if math.isfinite(b)]
    return RAW_TOLERANCE * np.maximum(max(1.0, *ends), scale)


def raw_components(m: CounterfactualModel) -> list[str]:
    """What the user added to ``m`` directly, in words: the components by name, and the
    term added to ``m.objective``."""
    names = [f"Pyomo component {c.local_name!r}" for c in m.user_components()
             if c.local_name not in m.constraints]
    if m.objective.expr is not m.composed_objective:
        names.append("a term added to m.objective")
    return names


def row_problems(m: CounterfactualModel, row: pd.DataFrame,
                 constraints: Iterable[tuple[str, Any]], what: str) -> list[str]:
    """Messages for each of the named constraint data ``constraints`` that the raw
    one-row frame ``row`` breaks (module docstring), each introduced by ``what``."""
    out = []
    with RowValues(m, row):
        for name, data in constraints:
            found = violation(data)
            if found is None:
                out.append(f"{what} {name!r} cannot be evaluated: a variable of your own in "
                           f"it has no value")
            elif found[0] > found[1]:
                out.append(f"{what} {name!r} is violated by {found[0]:.6g} at the point's "
                           f"raw values (tolerance {found[1]:.3g})")
    return out


def members(component: Any) -> Iterator[tuple[str, Any]]:
    """The active constraint data of a user's constraint or block, by name."""
    if isinstance(component, pyo.Block):
        for data in component.component_data_objects(pyo.Constraint, active=True,
                                                     descend_into=True):
            yield data.name, data
        return
    for data in component.values():
        if data.active:
            yield data.name, data


@dataclass
class RawProblem:
    """What the user added to a model directly, read at a query's start
    (:func:`raw_problem`): the constraint data by name, the user's objective term (its
    expression, ``None``: the objective is cfopt's), whether any of it uses variables of
    the user's own (checked only with the solver's values), and the lower bound of every
    cost beyond the distance (the declared blocks' and the user's term)."""

    constraints: list[tuple[str, Any]] = field(default_factory=list)
    term: Any = None
    needs_witness: bool = False
    extra_floor: float = 0.0

    def distance_radius(self, radius: float) -> float:
        """The largest distance a point of objective at most ``radius`` can have: every
        cost beyond the distance is at least :attr:`extra_floor`."""
        if math.isinf(radius) or math.isinf(self.extra_floor):
            return math.inf
        return radius - self.extra_floor

    @property
    def names(self) -> list[str]:
        """The names of the raw constraints checked on every returned point."""
        return [name for name, _ in self.constraints]

    def problems(self, m: CounterfactualModel, row: pd.DataFrame, witness: bool
                 ) -> list[str]:
        """Messages for each raw constraint the raw ``row`` breaks (``witness``: the
        model holds the solver's values of this point, for the user's own variables)."""
        if self.needs_witness and not witness:
            return ["the components you added to the model use variables of your own: "
                    "they are checked only on a solver's point"]
        if not self.constraints:  # nothing to read: the row's values are not even set
            return []
        return row_problems(m, row, self.constraints, "constraint")

    def term_value(self, m: CounterfactualModel, row: pd.DataFrame) -> float:
        """The user's objective term at the raw ``row`` (0 without one; the user's own
        variables at the solver's values)."""
        if self.term is None:
            return 0.0
        with RowValues(m, row):
            value = pyo.value(self.term, exception=False)
        if value is None:
            raise ValueError("the objective term you added uses a variable of your own "
                             "that has no value")
        return float(value)


def raw_problem(m: CounterfactualModel) -> RawProblem:
    """The raw components of ``m`` as the current query declares them, checked: raises
    ``ValueError`` naming the component (before any solve) when one uses a variable of
    cfopt's formulation that a raw row does not determine, when another objective is
    active, when ``m.objective`` is maximised or not linear."""
    determined = determined_variables(m)
    out = RawProblem()
    for component in m.user_components():
        if component.local_name in m.constraints:
            continue
        for name, data in members(component):
            out.needs_witness |= check_variables(m, data.body, f"the constraint {name!r}",
                                                 determined=determined)
            out.constraints.append((name, data))
    others = [o.name for o in m.component_data_objects(pyo.Objective, active=True)
              if o is not m.objective and is_users(m, o)]
    if others:
        raise ValueError(f"the model has another active objective {others}; cfopt minimises "
                         f"m.objective: add your term to it (m.objective.set_value("
                         f"m.objective.expr + term)) or declare cfopt.CustomConstraint("
                         f"cost=...)")
    if m.objective.active and m.objective.sense != pyo.minimize:
        raise ValueError("m.objective must stay active and minimised: add your term to it "
                         "(m.objective.set_value(m.objective.expr + term)) or declare "
                         "cfopt.CustomConstraint(cost=...)")
    composed = m.composed_objective
    if m.objective.expr is not composed:
        out.term = _user_term(m, composed)
        if out.term is not None:
            out.needs_witness |= check_variables(m, out.term,
                                                 "the term you added to m.objective",
                                                 determined=determined)
    costs = [t for t in (*m.declared_costs(), out.term) if t is not None]
    out.extra_floor = _lower_bound(costs)
    return out


#: the variables of the formulation that are only bounded below by what they stand for
#: (``dev >= |x - x0| / R``, ``changed >= |x - x0| / R``, ``linf >= w |x - x0|``): exact
#: only where the objective pushes them down
EPIGRAPHS = ("dev", "changed", "linf")


def _user_term(m: CounterfactualModel, composed: Any) -> Any:
    """The user's objective term: ``m.objective`` less the composed objective, as the
    linear expression of their difference's standard representation (``None`` when it
    is 0). Raises ``ValueError`` when it is not linear, or when the objective rewards an
    epigraph variable (:data:`EPIGRAPHS`: the solver would raise it without moving the
    feature)."""
    repn = generate_standard_repn(m.objective.expr - composed, compute_values=True,
                                  quadratic=True)
    if not repn.is_linear():
        raise ValueError("the objective you set on m.objective is not linear; cfopt solves "
                         "mixed-integer linear programs: keep your term linear (an "
                         "epigraph variable for a convex piecewise-linear cost)")
    full = generate_standard_repn(m.objective.expr, compute_values=True)
    for a, var in zip(full.linear_coefs, full.linear_vars):
        if a < 0 and var.parent_block() is m and \
                var.parent_component().local_name in EPIGRAPHS:
            raise ValueError(
                f"the objective you set on m.objective rewards {var.name} (coefficient "
                f"{float(a):.6g}); it is only bounded below by what it stands for, so the "
                f"solver would raise it without moving the feature: write a reward on the "
                f"feature itself, e.g. -c * (m.x[f] - m.x0[f])")
    terms = [(float(a), v) for a, v in zip(repn.linear_coefs, repn.linear_vars) if a != 0]
    if not terms:
        return None if float(repn.constant) == 0 else float(repn.constant)
    return float(repn.constant) + pyo.quicksum(a * v for a, v in terms)


def check_variables(m: CounterfactualModel, expr: Any, what: str,
                    own_block: pyo.Block | None = None,
                    determined: ComponentSet | None = None) -> bool:
    """Whether ``expr`` uses variables of the user's own (of ``own_block``, or of the
    user's own components of ``m``); raises ``ValueError`` naming ``what`` when it uses
    one of cfopt's that a raw row does not determine."""
    determined = determined_variables(m) if determined is None else determined
    own = False
    for var in identify_variables(expr, include_fixed=True):
        if var in determined:
            continue
        if is_users(m, var) or (own_block is not None and within_block(var, own_block)):
            own = True
            continue
        raise ValueError(
            f"{what} uses {var.name}, a variable of cfopt's formulation whose value at a "
            f"returned raw point is not defined, so no answer could be checked against it; "
            f"use the features (x, onehot), their distances (dev, changed, linf), the "
            f"model's outputs (predictor.outputs) or variables of your own, or declare a "
            f"cfopt.ConstraintBlock, which checks its own rule")
    return own


def within_block(var: Any, block: pyo.Block) -> bool:
    """Whether ``var`` is declared in ``block`` or one of its sub-blocks."""
    parent = var.parent_block()
    while parent is not None:
        if parent is block:
            return True
        parent = parent.parent_block()
    return False


def _lower_bound(costs: list[Any]) -> float:
    """A lower bound of the sum of ``costs`` over the variables' bounds (interval
    arithmetic; ``-inf`` when a variable is unbounded)."""
    total = 0.0
    for cost in costs:
        if isinstance(cost, (int, float)):
            total += float(cost)
            continue
        lower = compute_bounds_on_expr(cost)[0]
        if lower is None:
            return -math.inf
        total += float(lower)
    return total
