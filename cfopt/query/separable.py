r"""Linear rules on the features as sums of one function per feature (issue 37), so that
a greedy walk can keep to the user's constraints and cost while it moves one feature at
a time.

A linear expression whose variables are those a raw row determines feature by feature
(:data:`~cfopt.constraints.raw.DETERMINED` but ``linf``: the code variables behind
``x[f]``, ``onehot``, ``dev``, ``changed``) is, at the factual's parameters,

.. math:: g(x) = c + \sum_{f\ \text{numeric}} \bigl(a_f x_f + d_f |x_f - \hat x_f|
          + k_f [x_f \ne \hat x_f]\bigr) + \sum_{f\ \text{categorical}} a_{f, x_f},

exactly the value the MILP's row takes at the point (:mod:`cfopt.constraints.raw`
defines ``dev`` and ``changed`` at a raw point). :func:`separable_form` reads
:math:`(c, a, d, k)` off the expression's standard representation; a move of feature
:math:`f` from :math:`v` to :math:`v'` changes :math:`g` by :math:`g_f(v') - g_f(v)`,
vectorised over candidate moves in :meth:`SeparableForm.part`. :func:`walk_rules` gives
the rules of the current query a walk keeps: the declared blocks' constraints and the
user's own whose variables are all of that kind, and the user's objective term when it
is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyomo.environ as pyo
from pyomo.repn.standard_repn import generate_standard_repn

from ..constraints.raw import RAW_TOLERANCE, members
from ..formulations.features import width

if TYPE_CHECKING:
    from ..problem import CounterfactualModel


@dataclass
class SeparableForm:
    """:math:`g` of the module docstring: ``constant`` :math:`c`, per numeric feature
    ``(a, d, k)`` on its code, per categorical feature the value of each level index."""

    constant: float = 0.0
    numeric: dict[str, list[float]] = field(default_factory=dict)
    categorical: dict[str, np.ndarray] = field(default_factory=dict)

    def part(self, m: CounterfactualModel, name: str, values: np.ndarray) -> np.ndarray:
        """:math:`g_f` at candidate codes of feature ``name`` (level indices for a
        categorical one)."""
        values = np.asarray(values, dtype=float)  # pragma: no mutate (floats already)
        if name in self.categorical:
            return self.categorical[name][values.astype(int)]
        if name not in self.numeric:
            return np.zeros(len(values))
        a, d, k = self.numeric[name]
        x0 = float(pyo.value(m.x0[name]))
        return a * values + d * np.abs(values - x0) + k * (values != x0)

    def value(self, m: CounterfactualModel, codes: dict[str, float]) -> float:
        """:math:`g` at a point given by each feature's code (level index)."""
        return self.constant + sum(float(self.part(m, name, np.array([codes[name]]))[0])
                                   for name in (*self.numeric, *self.categorical))

    @property
    def features(self) -> list[str]:
        return [*self.numeric, *self.categorical]

    def plus(self, other: SeparableForm) -> SeparableForm:
        """The form of the sum of two expressions."""
        out = SeparableForm(self.constant + other.constant,
                            {k: list(v) for k, v in self.numeric.items()},
                            {k: v.copy() for k, v in self.categorical.items()})
        for name, coef in other.numeric.items():
            mine = out.numeric.setdefault(name, [0.0, 0.0, 0.0])
            out.numeric[name] = [a + b for a, b in zip(mine, coef)]
        for name, levels in other.categorical.items():
            out.categorical[name] = out.categorical.get(name, 0.0) + levels
        return out


def separable_form(m: CounterfactualModel, expr: Any) -> SeparableForm | None:
    """The :class:`SeparableForm` of ``expr`` at the current factual, or ``None`` when it
    is not linear or uses another variable."""
    # pragma: no mutate start (defaults; a quadratic repn is not linear either)
    repn = generate_standard_repn(expr, compute_values=True, quadratic=False)
    # pragma: no mutate end
    if not repn.is_linear():
        return None
    space = m.space
    form = SeparableForm(float(repn.constant))
    for a, var in zip(repn.linear_coefs, repn.linear_vars):
        a = float(a)
        parent, index = var.parent_component().local_name, var.index()
        if var.parent_block() is not m or parent not in ("x_steps", "x_unit", "onehot",
                                                         "dev", "changed"):
            return None
        if parent == "onehot":
            name, level = index
            f = space[name]
            levels = form.categorical.setdefault(name, np.zeros(len(f.categories)))
            levels[f.categories.index(level)] += a  # pragma: no mutate (once per variable)
            continue
        f, w = space[index], width(space, index)
        coef = form.numeric.setdefault(index, [0.0, 0.0, 0.0])
        if parent == "x_steps":  # x_steps = code - lower
            coef[0] += a  # pragma: no mutate (once per variable)
            form.constant -= a * f.lower
        elif parent == "x_unit":  # x_unit = (code - lower) / width
            coef[0] += a / w  # pragma: no mutate (once per variable)
            form.constant -= a * f.lower / w
        elif parent == "dev":
            coef[1] += a / w  # pragma: no mutate (once per variable)
        else:
            coef[2] += a  # pragma: no mutate (once per variable)
    return form


@dataclass
class Rule:
    """A constraint ``lower <= form <= upper`` of the query, and its tolerance."""

    form: SeparableForm
    lower: float
    upper: float
    tolerance: float

    def excess(self, value: np.ndarray) -> np.ndarray:
        """How far ``value`` lies outside the bounds beyond the tolerance (0: inside)."""
        return np.maximum(np.maximum(self.lower - value, value - self.upper)
                          - self.tolerance, 0.0)


def walk_rules(m: CounterfactualModel) -> tuple[list[Rule], SeparableForm | None]:
    """The rules of the current query a greedy walk keeps (module docstring): the
    separable constraints of the declared blocks and of the user's own components, and
    the sum of the separable costs beyond the distance (the user's objective term, the
    declared blocks' costs; ``None``: none is)."""
    datas = [d for name, c in m.constraints.items()
             for _, d in members(m.component(name))]
    datas += [d for _, d in m.raw.constraints]
    rules = []
    for data in datas:
        form = separable_form(m, data.body)
        if form is None:
            continue
        lower = pyo.value(data.lower) if data.has_lb() else -math.inf
        upper = pyo.value(data.upper) if data.has_ub() else math.inf
        scale = max([1.0] + [abs(b) for b in (lower, upper) if math.isfinite(b)])
        rules.append(Rule(form, lower, upper, RAW_TOLERANCE * scale))
    term = None
    for cost in (*m.declared_costs(), m.raw.term):
        form = None if cost is None else separable_form(m, cost)
        if form is not None:
            term = form if term is None else term.plus(form)
    return rules, term
