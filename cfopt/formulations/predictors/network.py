r"""ReLU networks (torch, ONNX, sklearn MLP) as OMLT's full-space formulation with the
big-M ReLU encoding (Fischetti & Jo 2018; Anderson et al. 2020), the one ReLU encoding
of cfopt: for neuron :math:`j` with pre-activation :math:`\hat z_j = w_j^\top z + b_j \in
[l_j, u_j]`,

.. math:: z_j \ge 0,\; z_j \ge \hat z_j,\; z_j \le \hat z_j - l_j (1 - q_j),\;
          z_j \le u_j q_j,\; q_j \in \{0, 1\},

with :math:`[l_j, u_j]` from interval propagation over the input box
(:meth:`~cfopt.models.network.ReLUNetwork.box_bounds`, tightened by
:mod:`cfopt.formulations.bound_tightening`). A network without hidden layer is a
linear model (:mod:`.linear`).

When the inputs are a convex combination of known points, :math:`z = \sum_l \lambda_l
p_l` with :math:`\lambda \ge 0`, :math:`\sum_l \lambda_l = 1` (PROPLACE's plausible
region, Def. 10, with no slack), each first-layer output is bounded by its values at the
points (:meth:`NetworkPredictorConstr.vertex_envelope`):

.. math:: z_j \le \sum_l \lambda_l \max(0, w_j^\top p_l + b_j),

Jensen's inequality for the convex :math:`\max(0, w_j^\top z + b_j)`, implied by the
encoding and the combination, so no point is lost. It is the neuron's concave envelope
over the points' hull when they are affinely independent, far below the big-M
relaxation's :math:`z_j \le u_j (\hat z_j - l_j) / (u_j - l_j)`, which only knows the
interval :math:`[l_j, u_j]`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap
from pyomo.contrib.fbbt.fbbt import compute_bounds_on_expr
from pyomo.core.expr.numeric_expr import LinearExpression

from ...models import ModelAdapter, ReLUNetwork
from ...models.network import LayerBounds, affine_bounds
from ...space.encoding import Bounds, Grid, unit_bounds, unit_box
from .base import PredictorConstr, register_formulation
from .linear import build_linear


class NetworkPredictorConstr(PredictorConstr):
    """A ReLU network's OMLT block, whose hidden neurons are rescaled
    (:func:`neuron_scales`).

    Args:
        block: the OMLT block (its ``inputs``: the model inputs normalized to their box).
        adapter: the parsed network.
        input_bounds: the box of the model inputs.
        layers: the block's dense layer blocks, input to output.
        scales: per layer, the factor by which the block divides each neuron's
            pre-activation.
    """

    def __init__(self, block: pyo.Block, adapter: ModelAdapter, input_bounds: Bounds,
                 layers: list[pyo.Block], scales: list[np.ndarray]) -> None:
        super().__init__(block, adapter, input_bounds)
        self._layers = list(layers)
        self._scales = [s.copy() for s in scales]
        self._relu = [layer.relu for layer in adapter.structure.layers]

    def dense_layers(self) -> list[pyo.Block]:
        return list(self._layers)

    def neuron_scales(self) -> list[np.ndarray]:
        """Per layer of :meth:`dense_layers`, the positive factor by which the block
        divides each neuron's pre-activation. Layer bounds in the network's own units
        are the block's times these."""
        return [s.copy() for s in self._scales]

    def layer_bounds(self) -> LayerBounds:
        """Current pre-activation bounds (lb, ub) of every layer of :meth:`dense_layers`,
        input to output, in the network's own units (the block's rescaled neurons times
        their scales)."""
        out = []
        for layer, scale in zip(self._layers, self._scales):
            # pragma: no mutate start (float bounds already: a cast that never changes them)
            bounds = np.array([layer.zhat[j].bounds for j in layer.zhat], dtype=float)
            # pragma: no mutate end
            out.append((bounds[:, 0] * scale, bounds[:, 1] * scale))
        return out

    def set_layer_bounds(self, bounds: LayerBounds) -> int:
        """Set every layer's pre-activation bounds (network units), big-M constants and
        stable binaries (fixed when the bounds do not straddle 0, freed otherwise), and
        the logits' bounds; returns the number of stable hidden neurons."""
        stable = 0
        for k, (layer, scale, (lbs, ubs)) in enumerate(zip(self._layers, self._scales,
                                                           bounds)):
            for j, s, lb, ub in zip(list(layer.zhat), scale, lbs, ubs):
                self.set_neuron_bounds(k, j, float(lb) / s, float(ub) / s)
                stable += int(self._relu[k] and (lb >= 0 or ub <= 0))
        last_lb, last_ub = bounds[-1]
        for j in range(self.adapter.n_logits):
            self.outputs[j].setlb(float(last_lb[j]))
            self.outputs[j].setub(float(last_ub[j]))
        return stable

    def set_input_box(self, lower: np.ndarray, upper: np.ndarray,
                      hull: np.ndarray | None = None) -> int:
        """Every layer's pre-activation bounds by interval arithmetic over the box
        ``[lower, upper]`` of the model inputs, the first layer's also within its values
        at the points ``hull`` when every input lies in their convex hull
        (:meth:`~cfopt.models.network.ReLUNetwork.box_bounds`), replacing the current
        ones; returns the number of stable hidden neurons."""
        return self.set_layer_bounds(self.adapter.structure.box_bounds(lower, upper,
                                                                       hull=hull))

    def vertex_envelope(self, points: np.ndarray, weights: Sequence[pyo.Var]
                        ) -> pyo.Constraint | None:
        """The first layer's vertex envelope (module docstring) for inputs that are the
        convex combination of the rows of ``points`` (model inputs) with ``weights``
        (one variable per row, ≥ 0, summing to 1, constrained elsewhere): an indexed
        constraint, to add to a block, with one row per neuron whose bounds straddle 0
        (a stable neuron's encoding is already exact), in the block's units; ``None``
        when the first layer has no ReLU."""
        # pragma: no mutate start (numbers times float64 weights are float64 without it)
        points = np.atleast_2d(np.asarray(points, dtype=np.float64))
        # pragma: no mutate end
        if len(weights) != len(points):
            raise ValueError(f"{len(points)} points need as many weights, got {len(weights)}")
        if not self._relu[0]:
            return None
        first, layer = self._layers[0], self.adapter.structure.layers[0]
        values = np.maximum(points @ layer.weight.T + layer.bias, 0.0) / self._scales[0]
        lb, ub = self.layer_bounds()[0]

        def envelope(_: pyo.Block, j: int) -> Any:
            at = values[:, j] > 0  # pragma: no mutate (values >= 0: a 0 coefficient adds nothing)
            return first.z[j] <= LinearExpression(
                constant=0.0,  # pragma: no mutate (Pyomo's default constant: 0)
                linear_coefs=values[at, j].tolist(),
                linear_vars=[w for w, use in zip(weights, at) if use])

        return pyo.Constraint([j for j in first.z if lb[j] < 0 < ub[j]], rule=envelope)

    def fix_pattern(self, inputs: np.ndarray) -> list[pyo.Var]:
        """Each free ReLU binary fixed to the side of its neuron's pre-activation at
        ``inputs`` (:meth:`start_choices`): the encoding is then the network's linear
        piece around ``inputs`` (every hidden output ``= max(0, ẑ)`` with the sign of
        ``ẑ`` fixed)."""
        choices = self.start_choices(inputs)
        for q, side in choices.items():
            q.fix(side)
        return list(choices.keys())

    def start_choices(self, inputs: np.ndarray) -> ComponentMap:
        r"""Each free ReLU binary :math:`q_j` at the side of its neuron's pre-activation at
        ``inputs`` (float64 forward pass; 1 when :math:`\hat z_j > 0`). With the inputs
        given, the big-M rows then leave one value to each neuron: a MIP start that
        HiGHS completes by an LP (given the features only, it searched for the
        binaries and found none: on a default ``MLPClassifier`` on raw Adult, row 16,
        14 s of feasibility pump at the root without an incumbent, 0.2 s with one)."""
        # pragma: no mutate start (pre_activations reads its rows in float64 itself)
        pres = self.adapter.structure.pre_activations(np.asarray(inputs, float)[None, :])
        # pragma: no mutate end
        choices = ComponentMap()
        for k, (layer, relu) in enumerate(zip(self._layers, self._relu)):
            if not relu:
                continue
            for j in layer.q_relu:
                q = layer.q_relu[j]
                if not q.fixed:
                    choices[q] = 1 if pres[k][0, j] > 0 else 0
        return choices

    def set_neuron_bounds(self, k: int, j: int, lb: float, ub: float) -> None:
        """Bounds of neuron ``j`` of layer ``k`` in the block's units: its
        pre-activation, its output and, under the big-M ReLU, OMLT's big-M constants and
        its binary (fixed when the neuron is stable)."""
        layer = self._layers[k]
        layer.zhat[j].setlb(lb)
        layer.zhat[j].setub(ub)
        if not self._relu[k]:
            layer.z[j].setlb(lb)
            layer.z[j].setub(ub)
            return
        layer._big_m_lb_relu[j] = lb
        layer._big_m_ub_relu[j] = ub
        layer.z[j].setlb(0.0)  # not max(0, lb): y >= zhat >= lb holds it (seed 30294)
        layer.z[j].setub(max(0.0, ub))
        if lb >= 0:
            layer.q_relu[j].fix(1)
        elif ub <= 0:
            layer.q_relu[j].fix(0)
        elif layer.q_relu[j].fixed:
            layer.q_relu[j].unfix()


def neuron_scales(net: ReLUNetwork, bounds: Bounds) -> list[np.ndarray]:
    r"""Per layer, the factor :math:`s_j = \max(1, \min(|l_j|, |u_j|))` of each hidden
    neuron, with :math:`[l_j, u_j]` its pre-activation's interval bounds over the input
    box (1 for the output layer).

    ReLU is positively homogeneous, :math:`\max(0, a) = s \max(0, a / s)` for
    :math:`s > 0`, so dividing a neuron's weights and bias by :math:`s_j` and
    multiplying its outgoing weights by :math:`s_j` leaves the network's function
    unchanged. A network fitted on raw units (an input of range 1e5) has
    pre-activations of magnitude 1e4 on both sides of 0; their big-M rows and the LP
    bounds the solvers compute over such columns (an error of the dual tolerance times
    the column's range) made HiGHS and Gurobi prove a bound above a feasible point
    (differential seed 7390). The smaller side sets the scale, so neither side of the
    ReLU shrinks below magnitude 1: scaling by the larger one put the inactive side of
    a neuron in [-2, 12317] at -1.6e-4, within the solvers' reach of 0, and HiGHS
    proved a wrong optimum (seed 21184)."""
    pre = net.box_bounds(np.array([lb for lb, _ in bounds]), np.array([ub for _, ub in bounds]))
    return [np.maximum(1.0, np.minimum(np.abs(lo), np.abs(hi))) if layer.relu
            else np.ones(len(lo)) for layer, (lo, hi) in zip(net.layers, pre)]


@register_formulation(ReLUNetwork)
def build_network(block: pyo.Block, name: str, adapter: ModelAdapter, bounds: Bounds,
                  grids: Sequence[Grid] | None = None,
                  rounding: Sequence[float] | None = None,
                  library_input: Callable[[int, float], float] | None = None
                  ) -> PredictorConstr:
    """OMLT's full-space ReLU formulation (module docstring) of ``adapter``'s network
    over the input box ``bounds``, hidden neurons rescaled (:func:`neuron_scales`), or
    the linear model's block when it has no hidden layer; ``grids``, ``rounding`` and
    ``library_input`` concern tree splits only."""
    net: ReLUNetwork = adapter.structure
    if net.is_linear:
        return build_linear(block, name, adapter, bounds)
    return _omlt_network(block, name, adapter, bounds, neuron_scales(net, bounds))


def build_shifted_network(block: pyo.Block, name: str, adapter: ModelAdapter,
                          z: np.ndarray, delta: float, output_delta: float | None = None
                          ) -> NetworkPredictorConstr:
    r"""Every network of the model shift Δ of radius ``delta`` around ``adapter``'s
    network (one logit) at the fixed input ``z``, as the sub-block ``block.<name>``: the
    same OMLT formulation and big-M ReLU as :func:`build_network`, with the dense-layer
    rule of Δ (PROPLACE, Jiang et al. 2024, eq. (6a) made linear). Each neuron's weight
    row is independent of every other neuron's and post-ReLU values :math:`V \ge 0`, so
    the pre-activations the shifted weights reach are exactly

    .. math:: W_j V + b_j - \delta(\mathbf 1^\top V + 1) \le \hat z_j \le
              W_j V + b_j + \delta(\mathbf 1^\top V + 1)

    (rows ``reach_low`` / ``reach_high``); the first layer's, on the fixed input, is
    the constant interval of :math:`\|z\|_1` in place of :math:`\mathbf 1^\top V`,
    which its bounds hold (set them with :meth:`NetworkPredictorConstr.set_layer_bounds`
    from :meth:`~cfopt.models.network.ReLUNetwork.shifted_bounds`). The logit is the
    least one reachable from the last hidden layer (row ``worst``: the low end,
    equality), its weights and bias within ``output_delta`` (default ``delta``; a
    margin :math:`c^\top y` of several logits shifts by :math:`\|c\|_1 \delta`,
    :mod:`cfopt.formulations.robustness`). Neurons are not rescaled."""
    z = np.asarray(z, dtype=np.float64)
    z = z.reshape(-1)  # pragma: no mutate (numpy reads any negative size as -1)
    net: ReLUNetwork = adapter.structure
    first = delta * (float(np.abs(z).sum()) + 1.0)
    return _omlt_network(block, name, adapter, [(float(v), float(v)) for v in z],
                         [np.ones(layer.weight.shape[0]) for layer in net.layers],
                         _shifted_dense_layer(delta, first,
                                              delta if output_delta is None else output_delta))


def _shifted_dense_layer(delta: float, first: float, output_delta: float
                         ) -> Callable[..., None]:
    r"""OMLT's dense-layer rule ``(net_block, net, layer_block, layer)`` for the model
    shift of radius ``delta`` (:func:`build_shifted_network`); ``first``: the first
    layer's reach radius :math:`\delta(\|z\|_1 + 1)`; ``output_delta``: the output
    layer's radius."""
    from omlt.neuralnet.layer import InputLayer

    def rule(net_block: pyo.Block, net: Any, layer_block: pyo.Block, layer: Any) -> None:
        (prev,) = net.predecessors(layer)
        width = layer.output_size[-1]
        if isinstance(prev, InputLayer):  # a fixed input: the reach is a constant interval
            for j in range(width):
                layer_block.zhat[j].setlb(float(layer.biases[j]) - first)
                layer_block.zhat[j].setub(float(layer.biases[j]) + first)
            return
        v = net_block.layer[id(prev)].z
        inputs = range(layer.input_size[-1])

        radius = output_delta if layer.activation == "linear" else delta

        def reach(j: int, side: int) -> Any:
            return (sum(float(layer.weights[i, j]) * v[i] for i in inputs)
                    + float(layer.biases[j]) + side * radius * (sum(v[i] for i in inputs) + 1.0))

        for j in range(width):  # valid bounds for OMLT's big-M; callers tighten them
            low, high = reach(j, -1), reach(j, 1)  # pragma: no mutate (side ±2: looser, valid)
            layer_block.zhat[j].setlb(compute_bounds_on_expr(low)[0])
            layer_block.zhat[j].setub(compute_bounds_on_expr(high)[1])
        if layer.activation == "linear":  # the logit: the least reachable
            layer_block.worst = pyo.Constraint(range(width), rule=lambda b, j: (
                b.zhat[j] == reach(j, -1)))
            return
        layer_block.reach_low = pyo.Constraint(range(width), rule=lambda b, j: (
            b.zhat[j] >= reach(j, -1)))
        layer_block.reach_high = pyo.Constraint(range(width), rule=lambda b, j: (
            b.zhat[j] <= reach(j, 1)))

    return rule


def _dense_layer(net_block: pyo.Block, net: Any, layer_block: pyo.Block, layer: Any
                 ) -> None:
    r"""OMLT's full-space dense-layer rule, :math:`\hat z_j = \sum_i W_{ij} z_i + b_j`
    (rows ``dense_layer``), each row one linear expression, with :math:`\hat z`'s
    bounds by interval arithmetic over :math:`z`'s
    (:func:`~cfopt.models.network.affine_bounds`; what OMLT's rule gets from FBBT, one
    expression walk per neuron, a third of the time to build a network copy)."""
    (prev,) = net.predecessors(layer)
    z = net_block.layer[id(prev)].z
    inputs = list(range(layer.input_size[-1]))
    # an infinite bound is unreachable: add_predictor requires a bounded input box
    # pragma: no mutate start (float64 casts of float64 values; no bound is infinite)
    weights, biases = np.asarray(layer.weights, dtype=np.float64), layer.biases
    lower = np.array([-np.inf if z[i].lb is None else z[i].lb for i in inputs], float)
    upper = np.array([np.inf if z[i].ub is None else z[i].ub for i in inputs], float)
    low, high = affine_bounds(weights.T, np.asarray(biases, dtype=np.float64), lower, upper)
    # pragma: no mutate end
    width = layer.output_size[-1]
    # pragma: no mutate start (unreachable: the bounds are finite, as above)
    for j in range(width):
        layer_block.zhat[j].setlb(float(low[j]) if np.isfinite(low[j]) else None)
        layer_block.zhat[j].setub(float(high[j]) if np.isfinite(high[j]) else None)
    # pragma: no mutate end
    variables = [z[i] for i in inputs]
    layer_block.dense_layer = pyo.Constraint(range(width), rule=lambda b, j: (
        b.zhat[j] == LinearExpression(constant=float(biases[j]),
                                      linear_coefs=[float(w) for w in weights[:, j]],
                                      linear_vars=variables)))


def _omlt_network(block: pyo.Block, name: str, adapter: ModelAdapter, bounds: Bounds,
                  scales: list[np.ndarray], layer_rule: Callable[..., None] | None = None
                  ) -> NetworkPredictorConstr:
    """The OMLT block ``block.<name>`` of ``adapter``'s network over the input box
    ``bounds``, each layer's neurons divided by ``scales``; ``layer_rule``: OMLT's
    dense-layer rule (default: its full-space ``zhat = W z + b``)."""
    from omlt import OmltBlock
    from omlt.neuralnet import FullSpaceNNFormulation, NetworkDefinition
    from omlt.neuralnet.layer import DenseLayer, InputLayer

    net: ReLUNetwork = adapter.structure
    # the network runs on the inputs normalized to their box, t = (x - l) / w in [0, 1]
    # (OMLT's inputs), with the first layer folded (W diag(w), b + W l), so a network on
    # raw units gives rows of coefficients near 1 (CBC proved a raw-unit query
    # infeasible) and no variable carries the inputs' raw magnitude (seed 62407)
    lo, width = unit_box(bounds)
    definition = NetworkDefinition(scaled_input_bounds=dict(enumerate(unit_bounds(bounds))))
    prev = InputLayer([net.n_inputs])
    definition.add_layer(prev)
    dense_layers = []
    for k, layer in enumerate(net.layers):
        weight, bias = layer.weight, layer.bias
        if k == 0:
            weight, bias = weight * width[None, :], bias + weight @ lo
        else:  # the inputs are the previous layer's rescaled neurons
            weight = weight * scales[k - 1][None, :]
        weight, bias = weight / scales[k][:, None], bias / scales[k]
        dense = DenseLayer(prev.output_size, [layer.weight.shape[0]],
                           activation="relu" if layer.relu else "linear",
                           weights=weight.T.copy(), biases=bias.copy())
        definition.add_layer(dense)
        definition.add_edge(prev, dense)
        dense_layers.append(dense)
        prev = dense
    sub = OmltBlock()
    block.add_component(name, sub)
    # pragma: no mutate start (logging only; unit-box inputs no longer trigger the warning)
    omlt_log = logging.getLogger("pyomo.core")
    omlt_log.addFilter(_initial_zero_outside_bounds)
    # pragma: no mutate end
    try:  # OMLT creates its input variables at 0, outside inputs' bounds that exclude 0
        sub.build_formulation(FullSpaceNNFormulation(
            definition, layer_constraints={
                DenseLayer: _dense_layer if layer_rule is None else layer_rule}))
    finally:
        omlt_log.removeFilter(_initial_zero_outside_bounds)  # pragma: no mutate (logging only)
    last = sub.layer[id(dense_layers[-1])]
    for j in range(net.n_outputs):
        sub.outputs[j].setlb(last.zhat[j].lb)
        sub.outputs[j].setub(last.zhat[j].ub)
    constr = NetworkPredictorConstr(sub, adapter, bounds,
                                    [sub.layer[id(d)] for d in dense_layers], scales)
    for k, layer in enumerate(constr.dense_layers()):  # OMLT's bounds, one encoding
        for j in layer.zhat:
            constr.set_neuron_bounds(k, j, *layer.zhat[j].bounds)
    return constr


def _initial_zero_outside_bounds(record: logging.LogRecord) -> bool:
    """Drop Pyomo's W1002 warning about an initial value of 0 outside a variable's
    bounds (a harmless start value, replaced by every solve)."""
    return "to a numeric value `0` outside the bounds" not in record.getMessage()
