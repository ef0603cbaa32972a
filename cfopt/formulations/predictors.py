r"""Learned models as Pyomo blocks, with one entry point: :func:`add_predictor`.

In the manner of gurobi-machinelearning, a registry maps each parsed structure type to
the function that builds its block, and every embedded predictor offers
:meth:`PredictorConstr.get_error` to measure the encoding against the real model.

Formulations:

* **ReLU network** (torch, ONNX, sklearn MLP) — OMLT's full-space formulation with the
  big-M ReLU encoding (Fischetti & Jo 2018; Anderson et al. 2020): for neuron :math:`j`
  with pre-activation :math:`\hat z_j = w_j^\top z + b_j \in [l_j, u_j]`,

  .. math:: z_j \ge 0,\; z_j \ge \hat z_j,\; z_j \le \hat z_j - l_j (1 - q_j),\;
            z_j \le u_j q_j,\; q_j \in \{0, 1\},

  with :math:`[l_j, u_j]` from interval propagation over the input box (tightened by
  :mod:`cfopt.formulations.bound_tightening`).
* **Linear model** (a network with a single affine layer) — ``outputs = W inputs + b``.
* **Tree ensembles** — the cut and leaf formulation of :mod:`.trees` (Mišić 2020).

Every block exposes ``block.inputs[i]`` (model inputs) and ``block.outputs[j]``
(logits).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.contrib.fbbt.fbbt import compute_bounds_on_expr

from ..models import ModelAdapter, ReLUNetwork, parse_model

Bounds = list[tuple[float, float]]
Grid = tuple[float, float] | None
Builder = Callable[..., pyo.Block]



class PredictorConstr:
    """A learned model embedded in a Pyomo block.

    Attributes:
        block: the Pyomo block; ``block.inputs[i]`` are the model inputs and
            ``block.outputs[j]`` the logits.
        adapter: the parsed model (structure + the real model).
    """

    def __init__(self, block: pyo.Block, adapter: ModelAdapter) -> None:
        self.block = block
        self.adapter = adapter

    @property
    def inputs(self) -> pyo.Var:
        return self.block.inputs

    @property
    def outputs(self) -> pyo.Var:
        return self.block.outputs

    @property
    def input_bounds(self) -> Bounds:
        return [self.block.inputs[i].bounds for i in range(self.adapter.n_inputs)]

    def output_bounds(self) -> Bounds:
        """Bounds of each logit implied by the input box (and any tightening)."""
        return [self.block.outputs[j].bounds for j in range(self.adapter.n_logits)]

    def input_region(self, factual: Sequence[float] | None = None
                     ) -> list[tuple[float, float]] | None:
        """Per model input, the interval on which the real model computes exactly the
        encoding's output for the discrete choice in the solver's solution (tree
        ensembles: the chosen side of every split), or ``None`` when the encoding has no
        such region (networks, linear models). ``factual``: the MILP's input values of
        the factual, kept on the side the library sends them (see
        :meth:`set_factual_inputs`). Decoding moves the solver's point into it."""
        return None

    def fix_choices(self, block: pyo.Block, inputs: np.ndarray) -> list[pyo.Var]:
        """Fix, in ``block`` (this encoding or a clone of it), the discrete choices that
        the library makes for the model-input values ``inputs`` but the encoding leaves
        open (tree splits within rounding of a value); returns the variables fixed
        (none by default)."""
        return []

    def set_factual_inputs(self, library_inputs: Sequence[float],
                           milp_inputs: Sequence[float],
                           movable: Sequence[tuple[bool, bool]]) -> list[tuple[int, bool, Any]]:
        """Tell the encoding the factual's inputs, as the library computes them and as the
        MILP does, and per input whether a counterfactual may move it up / down.

        Returns the encoding's binary choices whose two options both admit the factual's
        MILP input (it lies within rounding of a tree split) while the input may move
        towards the option the library does not take: ``(input, library goes left,
        left-choice variable)``; the caller ties the option the library does not take to a
        change of that input. Choices the input cannot move towards are fixed. None by
        default."""
        return []

    def neuron_scales(self) -> list[np.ndarray]:
        """Per layer of :meth:`relu_layers`, the positive factor by which the block
        divides each neuron's pre-activation (all ones by default; see
        :func:`_build_network`). Layer bounds in the network's own units are the
        block's times these."""
        return [np.ones(len(layer.zhat)) for layer in self.relu_layers()]

    def layer_bounds(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Current pre-activation bounds (lb, ub) of every layer of :meth:`relu_layers`,
        input to output, in the network's own units (the block's rescaled neurons times
        their scales)."""
        out = []
        for layer, scale in zip(self.relu_layers(), self.neuron_scales()):
            bounds = np.array([layer.zhat[j].bounds for j in layer.zhat], dtype=float)
            out.append((bounds[:, 0] * scale, bounds[:, 1] * scale))
        return out

    def set_layer_bounds(self, bounds: list[tuple[np.ndarray, np.ndarray]]) -> int:
        """Set every layer's pre-activation bounds (network units), big-M constants and
        stable binaries (fixed when the bounds do not straddle 0, freed otherwise), and
        the logits' bounds; returns the number of stable hidden neurons."""
        layers = self.relu_layers()
        if not layers:
            return 0
        stable = 0
        for layer, scale, (lbs, ubs) in zip(layers, self.neuron_scales(), bounds):
            for j, s, lb, ub in zip(list(layer.zhat), scale, lbs, ubs):
                self.set_neuron_bounds(layer, j, float(lb) / s, float(ub) / s)
                stable += int(hasattr(layer, "q_relu") and (lb >= 0 or ub <= 0))
        last_lb, last_ub = bounds[-1]
        for j in range(self.adapter.n_logits):
            self.outputs[j].setlb(float(last_lb[j]))
            self.outputs[j].setub(float(last_ub[j]))
        return stable

    @staticmethod
    def set_neuron_bounds(layer: pyo.Block, j: object, lb: float, ub: float) -> None:
        """Bounds of neuron ``j`` of an OMLT ``layer`` in the block's units: its
        pre-activation, its output and, under the big-M ReLU, OMLT's big-M constants and
        its binary (fixed when the neuron is stable)."""
        layer.zhat[j].setlb(lb)
        layer.zhat[j].setub(ub)
        if hasattr(layer, "q_relu"):
            layer._big_m_lb_relu[j] = lb
            layer._big_m_ub_relu[j] = ub
            layer.z[j].setlb(max(0.0, lb))
            layer.z[j].setub(max(0.0, ub))
            if lb >= 0:
                layer.q_relu[j].fix(1)
            elif ub <= 0:
                layer.q_relu[j].fix(0)
            elif layer.q_relu[j].fixed:
                layer.q_relu[j].unfix()
        else:
            layer.z[j].setlb(lb)
            layer.z[j].setub(ub)

    def relu_layers(self) -> list[pyo.Block]:
        """OMLT layer blocks with a ``zhat`` pre-activation, input to output order."""
        if not hasattr(self.block, "layers"):
            return []
        return [self.block.layer[lid] for lid in self.block.layers
                if hasattr(self.block.layer[lid], "zhat")]

    def get_error(self, Z: np.ndarray, solver: str = "highs") -> float:
        """Max |encoding output - real model output| over the rows of ``Z``.

        Each row is fixed as the block's input and the encoding is solved twice,
        minimising and maximising the sum of the logits, so a loose encoding shows up
        as well as a wrong one; the logits are mapped to the real model's output space
        (probabilities for sklearn MLPs, decision values for linear models, the raw
        output for torch/ONNX, computed in float64). Returns ``inf`` if the encoding
        cannot represent a row (infeasible).
        """
        from ..results.status import Status
        from ..solvers import SolverSettings, make_solver

        Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
        n = self.adapter.n_inputs
        if Z.shape[1] != n:
            raise ValueError(f"expected rows of {n} model inputs, got {Z.shape[1]}")
        lo = np.array([b[0] for b in self.input_bounds])
        hi = np.array([b[1] for b in self.input_bounds])
        outside = (Z < lo - 1e-9) | (Z > hi + 1e-9)
        if outside.any():
            r, c = np.argwhere(outside)[0]
            raise ValueError(f"row {r}: input {c} = {Z[r, c]} is outside the block's input "
                             f"bounds [{lo[c]}, {hi[c]}]; the encoding is only valid inside")
        standalone = pyo.ConcreteModel()
        standalone.p = self.block.clone()
        standalone.sense = pyo.Param(mutable=True, initialize=1.0)
        standalone.obj = pyo.Objective(
            expr=standalone.sense * pyo.quicksum(standalone.p.outputs.values()))
        backend = make_solver(solver)
        settings = SolverSettings(mip_gap=0.0, time_limit=60.0)
        expected = self.adapter.output(Z)
        worst = 0.0
        for row, z in enumerate(Z):
            for i in range(n):
                standalone.p.inputs[i].fix(float(z[i]))
            chosen = self.fix_choices(standalone.p, z)
            for sense in (1.0, -1.0):
                standalone.sense = sense
                outcome = backend.solve(standalone, settings)
                if outcome.status is not Status.OPTIMAL:
                    return float("inf")
                logits = np.array([[pyo.value(standalone.p.outputs[j])
                                    for j in range(self.adapter.n_logits)]])
                err = np.abs(self.adapter.output_from_logits(logits)[0] - expected[row]).max()
                worst = max(worst, float(err))
            for var in chosen:
                var.unfix()
        return worst


@dataclass(frozen=True)
class Formulation:
    """A registered formulation: the block builder of a parsed structure type, the
    :class:`PredictorConstr` class that wraps its blocks, and which of
    :func:`add_predictor`'s ``formulation`` / ``per_query`` options the builder takes."""

    builder: Builder
    constr_class: type[PredictorConstr]
    options: frozenset[str]


_FORMULATIONS: dict[type, Formulation] = {}


def register_formulation(structure_type: type,
                         constr_class: type[PredictorConstr] | None = None,
                         options: Sequence[str] = ()) -> Callable[[Builder], Builder]:
    """Register the block builder of a parsed structure type, the
    :class:`PredictorConstr` class that wraps its blocks (default: the base class) and
    the builder options it takes (``"formulation"``, ``"per_query"``)."""
    unknown = sorted(set(options) - {"formulation", "per_query"})
    if unknown:
        raise ValueError(f"unknown builder option(s) {unknown}: use 'formulation', 'per_query'")

    def deco(fn: Builder) -> Builder:
        _FORMULATIONS[structure_type] = Formulation(fn, constr_class or PredictorConstr,
                                                    frozenset(options))
        return fn

    return deco


def add_predictor(block: pyo.Block, model: Any, inputs: Sequence[Any] | None = None, *,
                  name: str = "predictor", input_bounds: Bounds | None = None,
                  input_grids: Sequence[Grid] | None = None,
                  input_rounding: Sequence[float] | None = None,
                  library_input: Callable[[int, float], float] | None = None,
                  formulation: str | None = None,
                  per_query: bool | None = False) -> PredictorConstr:
    """Embed a learned model in ``block`` as the sub-block ``block.<name>``.

    Args:
        block: the Pyomo block (e.g. a ``ConcreteModel``) that receives the predictor.
        model: a fitted model (torch ``nn.Sequential``, sklearn ``MLPClassifier`` /
            linear classifier, ONNX ModelProto or file path) or a parsed
            :class:`~cfopt.models.ModelAdapter`.
        inputs: Pyomo variables or linear expressions fed to the model; the constraints
            ``block.<name>_link[i]: block.<name>.inputs[i] == inputs[i]`` tie them in.
            ``None``: the block's own ``inputs`` are left free.
        input_bounds: finite bounds of each model input; by default the bounds of the
            ``inputs`` (computed by interval arithmetic on expressions).
        input_grids: per input, ``(offset, step)`` when the input only takes the values
            ``offset + k * step`` (integer codes, one-hot columns), else ``None``; tree
            splits on such inputs are encoded exactly, without an epsilon.
        input_rounding: per input, how far the library's own computation of the input
            from raw values (e.g. ``(x - shift) / scale``) may differ from the MILP's
            expression (absolute, input units); tree splits on continuous inputs let
            values within it take either side (default: a few ulps of the bounds).
        library_input: ``(i, v) -> `` the library's own value of input ``i`` where the
            MILP's expression gives ``v`` (a grid value within rounding of a tree
            threshold takes the side the library gives it; default: the threshold's).
        formulation: for tree ensembles, ``"leaf"`` (default: a binary per leaf) or
            ``"threshold"`` (a binary per distinct split, Mišić 2020); see
            :mod:`cfopt.formulations.trees`.
        per_query: tree ensembles: build the leaves per query (``True``), by size
            (``None``) or all at once (``False``, default); see
            :mod:`cfopt.formulations.tree_regions`.

    Returns:
        The :class:`PredictorConstr`.
    """
    adapter = parse_model(model)
    n = adapter.n_inputs
    if inputs is not None and len(inputs) != n:
        raise ValueError(f"the {adapter.kind} model takes {n} inputs, but {len(inputs)} "
                         f"were given")
    if input_bounds is None:
        if inputs is None:
            raise ValueError("give input_bounds (or inputs with finite bounds): big-M "
                             "formulations need a bounded input box")
        input_bounds = [compute_bounds_on_expr(e) for e in inputs]
    input_bounds = [(float(lb), float(ub)) if lb is not None and ub is not None else (lb, ub)
                    for lb, ub in input_bounds]
    for i, (lb, ub) in enumerate(input_bounds):
        if lb is None or ub is None or not (np.isfinite(lb) and np.isfinite(ub)):
            raise ValueError(f"model input {i} has no finite bounds ({lb}, {ub}); big-M "
                             f"formulations need a bounded input box")
    registered = None
    for klass in type(adapter.structure).__mro__:
        registered = _FORMULATIONS.get(klass)
        if registered is not None:
            break
    if registered is None:
        raise TypeError(f"no formulation registered for {type(adapter.structure).__name__}")
    if input_grids is not None and len(input_grids) != n:
        raise ValueError(f"input_grids has {len(input_grids)} entries for {n} inputs")
    options: dict[str, Any] = {}
    if formulation is not None:
        if "formulation" not in registered.options:
            raise ValueError(f"formulation={formulation!r} applies to tree ensembles; the "
                             f"{adapter.kind} model has a single formulation")
        options["formulation"] = formulation
    if "per_query" in registered.options:
        options["per_query"] = per_query
    elif per_query:
        raise ValueError(f"per_query applies to tree ensembles, not to the {adapter.kind} "
                         f"model")
    if input_rounding is not None and len(input_rounding) != n:
        raise ValueError(f"input_rounding has {len(input_rounding)} entries for {n} inputs")
    sub = registered.builder(block, name, adapter.structure, input_bounds, grids=input_grids,
                             rounding=input_rounding, library_input=library_input, **options)
    if inputs is not None:  # rows divided by the input's width, as every row on inputs
        width = [ub - lb if ub > lb else 1.0 for lb, ub in input_bounds]
        block.add_component(f"{name}_link", pyo.Constraint(
            range(n), rule=lambda b, i: (sub.inputs[i] - inputs[i]) / width[i] == 0))
    return registered.constr_class(sub, adapter)


class NetworkPredictorConstr(PredictorConstr):
    """A ReLU network's block, whose hidden neurons are rescaled (:func:`_build_network`)."""

    def neuron_scales(self) -> list[np.ndarray]:
        scales = getattr(self.block, NEURON_SCALES, None)
        return super().neuron_scales() if scales is None else [s.copy() for s in scales]


#: the block attribute holding the per-layer neuron scales of :func:`_build_network`
NEURON_SCALES = "cfopt_neuron_scales"


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


@register_formulation(ReLUNetwork, NetworkPredictorConstr)
def _build_network(block: pyo.Block, name: str, net: ReLUNetwork, bounds: Bounds,
                   grids: Sequence[Grid] | None = None,
                   rounding: Sequence[float] | None = None,
                   library_input: Callable[[int, float], float] | None = None) -> pyo.Block:
    """OMLT's full-space ReLU formulation (module docstring); ``grids``, ``rounding`` and
    ``library_input`` concern tree splits only."""
    if net.is_linear:
        return _build_linear(block, name, net, bounds)
    from omlt import OffsetScaling, OmltBlock
    from omlt.neuralnet import FullSpaceNNFormulation, NetworkDefinition
    from omlt.neuralnet.layer import DenseLayer, InputLayer

    # the network runs on the inputs normalized to their box, t = (x - l) / w in [0, 1],
    # with the first layer folded (W diag(w), b + W l): OMLT's scaled inputs, so a network
    # on raw units gives rows of coefficients near 1 (CBC proved a raw-unit query
    # infeasible)
    lo = np.array([lb for lb, _ in bounds])
    width = np.array([ub - lb if ub > lb else 1.0 for lb, ub in bounds])
    scaling = OffsetScaling(offset_inputs=lo.tolist(), factor_inputs=width.tolist(),
                            offset_outputs=[0.0] * net.n_outputs,
                            factor_outputs=[1.0] * net.n_outputs)
    definition = NetworkDefinition(scaling_object=scaling, scaled_input_bounds={
        i: (0.0, 1.0 if ub > lb else 0.0) for i, (lb, ub) in enumerate(bounds)})
    prev = InputLayer([net.n_inputs])
    definition.add_layer(prev)
    scales = neuron_scales(net, bounds)
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
        prev = dense
    sub = OmltBlock()
    block.add_component(name, sub)
    omlt_log = logging.getLogger("pyomo.core")
    omlt_log.addFilter(_initial_zero_outside_bounds)
    try:  # OMLT creates its input variables at 0, outside inputs' bounds that exclude 0
        sub.build_formulation(FullSpaceNNFormulation(definition))
    finally:
        omlt_log.removeFilter(_initial_zero_outside_bounds)
    setattr(sub, NEURON_SCALES, scales)
    last = sub.layer[sub.layers.last()]
    for j in range(net.n_outputs):
        sub.outputs[j].setlb(last.zhat[j].lb)
        sub.outputs[j].setub(last.zhat[j].ub)
    return sub


def _initial_zero_outside_bounds(record: logging.LogRecord) -> bool:
    """Drop Pyomo's W1002 warning about an initial value of 0 outside a variable's
    bounds (a harmless start value, replaced by every solve)."""
    return "to a numeric value `0` outside the bounds" not in record.getMessage()


def _build_linear(block: pyo.Block, name: str, net: ReLUNetwork, bounds: Bounds) -> pyo.Block:
    r"""A linear model: ``outputs = W inputs + b``, written on the inputs normalized to
    their box, :math:`t_i = (x_i - \ell_i) / w_i \in [0, 1]`:
    :math:`\text{out}_j = \sum_i W_{ji} w_i t_i + b_j + \sum_i W_{ji} \ell_i`, so a model
    fitted on raw units (a coefficient 1e-7 on an input of range 1e6) gives rows of
    coefficients near 1 (solvers misjudged the raw rows, e.g. Gurobi proving 1.1 where 1.0
    is feasible)."""
    layer = net.layers[0]
    w, b = layer.weight, layer.bias
    lo = np.array([lb for lb, _ in bounds])
    ((out_lo, out_hi),) = net.box_bounds(lo, np.array([ub for _, ub in bounds]))
    out_bounds = list(zip(out_lo.tolist(), out_hi.tolist()))
    width = np.array([ub - lb for lb, ub in bounds])
    moving = [i for i in range(net.n_inputs) if width[i] > 0]
    offset = b + w @ lo
    sub = pyo.Block()
    block.add_component(name, sub)
    sub.inputs = pyo.Var(range(net.n_inputs), bounds=lambda _, i: bounds[i])
    sub.outputs = pyo.Var(range(net.n_outputs), bounds=lambda _, j: out_bounds[j])
    sub.unit = pyo.Var(moving, bounds=(0.0, 1.0))
    sub.unit_link = pyo.Constraint(moving, rule=lambda s, i: s.unit[i] == (
        s.inputs[i] - float(lo[i])) / float(width[i]))
    sub.affine = pyo.Constraint(range(net.n_outputs), rule=lambda s, j: s.outputs[j] == sum(
        float(w[j, i] * width[i]) * s.unit[i] for i in moving if w[j, i] != 0) +
        float(offset[j]))
    return sub
