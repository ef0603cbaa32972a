r"""Raw feature variables and their exact linear map to the model inputs.

Declares, on a block ``m`` for a :class:`~cfopt.space.FeatureSpace`:

* ``m.NUMERIC`` — names of numeric features (continuous, integer, binary, ordinal);
  ``m.x[f]`` their codes in raw units (an expression), ``m.x0[f]`` the factual code
  (mutable Param). Behind ``x``: ``m.x_unit[f]`` :math:`\in [0, 1]` for a continuous
  feature, :math:`x_f = \ell_f + w_f\,\text{x\_unit}_f` with :math:`w_f` its bounds'
  width (the solver works in units of each feature's range, whatever its raw units: a
  feature of range 1e6 beside one of range 1e-3 made Gurobi's presolve prove a wrong
  optimum), and ``m.x_steps[f]``, an integer variable, for an integer, binary or ordinal
  feature, its steps above the lower bound (:math:`x_f = \ell_f + \text{x\_steps}_f`:
  no variable carries the magnitude of the raw codes; a predictor input linked to a
  code of 1e7 through a constant of 10 made HiGHS's presolve prove a bound above a
  feasible point, differential seed 62407);
* ``m.ONEHOT`` — pairs (feature, level) of categorical features; ``m.onehot[f, l]``
  binary, ``m.onehot0[f, l]`` the factual one-hot (mutable Param), and
  ``m.onehot_sum[f]``: :math:`\sum_l \text{onehot}_{f,l} = 1` (coherence, CE-OCL eq. 4);
* ``m.category_changed[f]`` — the expression :math:`1 - \sum_l \text{onehot0}_{f,l}
  \text{onehot}_{f,l}`, exactly 1 when the level changes (a category change counts once).

The model inputs are the expressions :math:`(x_f - \text{shift}_f)/\text{scale}_f` and
:math:`\text{onehot}_{f,l}`, in ``space.input_names`` order, or, for a model with its
own preprocessing (an sklearn Pipeline), that preprocessing's input specs
(:func:`encode_inputs`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager

import pyomo.environ as pyo

from ..space.encoding import InputSpec, space_specs
from ..space.feature import Kind
from ..space.space import FeatureSpace


def add_feature_variables(m: pyo.Block, space: FeatureSpace) -> list:
    """Declare the feature variables on ``m``; return the model-input expressions."""
    numeric = [f for f in space if not f.is_onehot]
    onehot = [(f.name, level) for f in space if f.is_onehot for level in f.categories]
    # pragma: no mutate start (any Pyomo Set iterates in insertion order; dimen: from the pairs)
    m.NUMERIC = pyo.Set(initialize=[f.name for f in numeric], ordered=True)
    m.CATEGORICAL = pyo.Set(initialize=[f.name for f in space if f.is_onehot], ordered=True)
    m.ONEHOT = pyo.Set(initialize=onehot, dimen=2, ordered=True)
    # pragma: no mutate end

    integral = [f.name for f in numeric if f.is_integral]
    continuous = [f.name for f in numeric if not f.is_integral]
    m.x_steps = pyo.Var(integral, domain=lambda _, name: pyo.Binary if space[
        name].kind is Kind.BINARY else pyo.NonNegativeIntegers,
        bounds=lambda _, name: (0, space[name].upper - space[name].lower))
    m.x_unit = pyo.Var(continuous, bounds=lambda _, name: (
        0.0, 1.0 if space[name].upper > space[name].lower else 0.0))
    m.x = pyo.Expression(m.NUMERIC, rule=lambda b, name: space[name].lower + (
        b.x_steps[name] if space[name].is_integral else width(space, name) * b.x_unit[name]))
    m.x0 = pyo.Param(m.NUMERIC, mutable=True, initialize=lambda _, name: space[name].lower)
    m.onehot = pyo.Var(m.ONEHOT, domain=pyo.Binary)
    m.onehot0 = pyo.Param(m.ONEHOT, mutable=True, initialize=0.0)
    m.onehot_sum = pyo.Constraint(m.CATEGORICAL, rule=lambda b, name: sum(
        b.onehot[name, level] for level in space[name].categories) == 1)
    m.category_changed = pyo.Expression(m.CATEGORICAL, rule=lambda b, name: 1 - sum(
        b.onehot0[name, level] * b.onehot[name, level] for level in space[name].categories))

    return encode_inputs(m, space, space_specs(space))  # pragma: no mutate (reads the specs)


def width(space: FeatureSpace, name: str) -> float:
    """The normalizing width of a numeric feature: its bounds' width (1 if 0)."""
    f = space[name]
    return f.upper - f.lower if f.upper > f.lower else 1.0


def code_variable(m: pyo.Block, space: FeatureSpace, name: str
                  ) -> tuple[pyo.Var, float, float]:
    """The variable behind ``m.x[name]`` and ``(offset, width)`` with
    ``code = offset + width * variable`` (to fix or bound a feature by its codes)."""
    if space[name].is_integral:
        return m.x_steps[name], space[name].lower, 1.0
    return m.x_unit[name], space[name].lower, width(space, name)


@contextmanager
def hold_at_factual(m: pyo.Block, space: FeatureSpace, free: Collection[str]
                    ) -> Iterator[None]:
    """Every feature not in ``free`` fixed at the factual (``x0``, ``onehot0``) while
    entered; a variable fixed before stays as it was."""
    held: list[pyo.Var] = []
    try:
        for f in space:
            if f.name in free:
                continue
            if f.is_onehot:
                pairs = [(m.onehot[f.name, level], pyo.value(m.onehot0[f.name, level]))
                         for level in f.categories]
            else:
                var, offset, scale = code_variable(m, space, f.name)
                pairs = [(var, (pyo.value(m.x0[f.name]) - offset) / scale)]
            for var, value in pairs:
                if not var.fixed:
                    var.fix(value)
                    held.append(var)
        yield
    finally:
        for var in held:
            var.unfix()


def encode_inputs(m: pyo.Block, space: FeatureSpace, specs: list[InputSpec]) -> list:
    r"""Model-input expressions of the feature variables under ``specs``: ``affine``
    :math:`a\,x_f + b`, ``indicator`` :math:`\text{onehot}_{f,l}`, ``levels``
    :math:`\sum_l v_l\,\text{onehot}_{f,l}` with :math:`v_l = a\,c_l + b` (exact: one
    one-hot binary is 1), ``constant`` :math:`b`."""
    inputs: list = []
    for s in specs:
        if s.kind == "indicator":
            inputs.append(m.onehot[s.feature, s.level])
        elif s.kind == "levels":
            inputs.append(pyo.quicksum(v * m.onehot[s.feature, level]
                                       for level, v in s.values().items() if v != 0))
        elif s.kind == "constant":
            inputs.append(s.b)
        else:
            inputs.append(s.a * m.x[s.feature] + s.b)
    return inputs
