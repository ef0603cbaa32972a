r"""Raw feature variables and their exact linear map to the model inputs.

Declares, on a block ``m`` for a :class:`~cfopt.features.FeatureSpace`:

* ``m.NUMERIC`` — names of numeric features (continuous, integer, binary, ordinal);
  ``m.x[f]`` their codes in raw units (integer domain for integer, binary and ordinal
  features; bounds from the space) and ``m.x0[f]`` the factual code (mutable Param);
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

import pyomo.environ as pyo

from ..encoding import InputSpec, space_specs
from ..features import FeatureSpace, Kind


def add_feature_variables(m: pyo.Block, space: FeatureSpace) -> list:
    """Declare the feature variables on ``m``; return the model-input expressions."""
    numeric = [f for f in space if not f.is_onehot]
    onehot = [(f.name, level) for f in space if f.is_onehot for level in f.categories]
    m.NUMERIC = pyo.Set(initialize=[f.name for f in numeric], ordered=True)
    m.CATEGORICAL = pyo.Set(initialize=[f.name for f in space if f.is_onehot], ordered=True)
    m.ONEHOT = pyo.Set(initialize=onehot, dimen=2, ordered=True)

    def domain(_: pyo.Block, name: str) -> object:
        kind = space[name].kind
        if kind is Kind.BINARY:
            return pyo.Binary
        return pyo.Integers if kind in (Kind.INTEGER, Kind.ORDINAL) else pyo.Reals

    m.x = pyo.Var(m.NUMERIC, domain=domain,
                  bounds=lambda _, name: (space[name].lower, space[name].upper))
    m.x0 = pyo.Param(m.NUMERIC, mutable=True, initialize=lambda _, name: space[name].lower)
    m.onehot = pyo.Var(m.ONEHOT, domain=pyo.Binary)
    m.onehot0 = pyo.Param(m.ONEHOT, mutable=True, initialize=0.0)
    m.onehot_sum = pyo.Constraint(m.CATEGORICAL, rule=lambda b, name: sum(
        b.onehot[name, level] for level in space[name].categories) == 1)
    m.category_changed = pyo.Expression(m.CATEGORICAL, rule=lambda b, name: 1 - sum(
        b.onehot0[name, level] * b.onehot[name, level] for level in space[name].categories))

    return encode_inputs(m, space, space_specs(space))


def encode_inputs(m: pyo.Block, space: FeatureSpace, specs: list[InputSpec]) -> list:
    """Model-input expressions of the feature variables under ``specs``."""
    inputs: list = []
    for s in specs:
        if s.kind == "indicator":
            inputs.append(m.onehot[s.feature, s.level])
        elif s.kind == "constant":
            inputs.append(s.b)
        else:
            inputs.append(s.a * m.x[s.feature] + s.b)
    return inputs
