r"""Linear models (a network with a single affine layer: sklearn linear classifiers and
regressors, one-layer torch / ONNX graphs) as ``outputs = W inputs + b``."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo

from ...models import ModelAdapter, ReLUNetwork
from ...space.encoding import Bounds, unit_bounds, unit_box
from .base import PredictorConstr


def build_linear(block: pyo.Block, name: str, adapter: ModelAdapter, bounds: Bounds
                 ) -> PredictorConstr:
    r"""A linear model: ``outputs = W inputs + b``, written on the block's inputs, the
    model inputs normalized to their box, :math:`t_i = (x_i - \ell_i) / w_i \in [0, 1]`:
    :math:`\text{out}_j = \sum_i W_{ji} w_i t_i + b_j + \sum_i W_{ji} \ell_i`, so a model
    fitted on raw units (a coefficient 1e-7 on an input of range 1e6) gives rows of
    coefficients near 1 (solvers misjudged the raw rows, e.g. Gurobi proving 1.1 where 1.0
    is feasible). The block has no layers: its :class:`PredictorConstr` is the base
    one."""
    net: ReLUNetwork = adapter.structure
    layer = net.layers[0]
    w, b = layer.weight, layer.bias
    lo, width = unit_box(bounds)
    ((out_lo, out_hi),) = net.box_bounds(lo, np.array([ub for _, ub in bounds]))
    out_bounds = list(zip(out_lo.tolist(), out_hi.tolist()))
    moving = [i for i, (lb, ub) in enumerate(bounds) if ub > lb]
    offset = b + w @ lo
    sub = pyo.Block()
    block.add_component(name, sub)
    sub.inputs = pyo.Var(range(net.n_inputs), bounds=lambda _, i: unit_bounds(bounds)[i])
    sub.outputs = pyo.Var(range(net.n_outputs), bounds=lambda _, j: out_bounds[j])
    sub.affine = pyo.Constraint(range(net.n_outputs), rule=lambda s, j: s.outputs[j] == sum(
        float(w[j, i] * width[i]) * s.inputs[i] for i in moving if w[j, i] != 0) +
        float(offset[j]))
    return PredictorConstr(sub, adapter, bounds)
