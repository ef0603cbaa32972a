"""What every embedded learned model shares: :class:`PredictorConstr`, the registry of
formulations by parsed structure type and its one entry point, :func:`add_predictor`
(module docstring of :mod:`cfopt.formulations.predictors`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap
from pyomo.contrib.fbbt.fbbt import compute_bounds_on_expr

from ...models import ModelAdapter, parse_model
from ...models.network import LayerBounds
from ...space.encoding import Bounds, Grid, unit_box

#: ``(block, name, adapter, input_bounds, *, grids, rounding, library_input, **options)``
#: -> the :class:`PredictorConstr` of the new sub-block ``block.<name>``
Builder = Callable[..., "PredictorConstr"]


class PredictorConstr:
    r"""A learned model embedded in a Pyomo block.

    Attributes:
        block: the Pyomo block; ``block.inputs[i]`` are the model inputs normalized to
            their box, :math:`t_i = (z_i - \ell_i) / w_i \in [0, 1]`
            (:func:`~cfopt.space.encoding.unit_box`), ``block.model_inputs[i]`` the model inputs
            :math:`z_i = \ell_i + w_i t_i` (expressions) and ``block.outputs[j]`` the
            logits.
        adapter: the parsed model (structure + the real model).
        input_bounds: the box of the model inputs.
    """

    def __init__(self, block: pyo.Block, adapter: ModelAdapter, input_bounds: Bounds
                 ) -> None:
        self.block = block
        self.adapter = adapter
        self.input_bounds: Bounds = [(float(lb), float(ub)) for lb, ub in input_bounds]
        lo, width = unit_box(self.input_bounds)
        block.model_inputs = pyo.Expression(range(adapter.n_inputs), rule=lambda b, i: (
            float(lo[i]) + float(width[i]) * b.inputs[i]))

    @property
    def inputs(self) -> pyo.Expression:
        """The model inputs :math:`z_i` (expressions of :attr:`unit_inputs`)."""
        return self.block.model_inputs

    @property
    def unit_inputs(self) -> pyo.Var:
        """The block's variables: the model inputs normalized to their box."""
        return self.block.inputs

    @property
    def outputs(self) -> pyo.Var:
        return self.block.outputs

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

    def fix_pattern(self, inputs: np.ndarray) -> list[pyo.Var]:
        """Fix the encoding's free binaries to the choices the model makes at the
        model-input values ``inputs`` (a ReLU network: each unstable neuron on the side
        of its pre-activation there), restricting the encoding to the piece of the model
        that holds ``inputs``; returns the variables fixed, for the caller to unfix (none
        by default)."""
        return []

    def start_choices(self, inputs: np.ndarray) -> ComponentMap:
        """The encoding's free binaries at the choices the model makes at the model-input
        values ``inputs``, as values (nothing is fixed): the discrete part of a MIP start
        at a point, which the solver then completes by one LP instead of a search (none
        by default: the solver searches for them)."""
        return ComponentMap()

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

    @property
    def per_query(self) -> bool:
        """Whether the encoding is built per query (large tree ensembles,
        :mod:`cfopt.formulations.tree_regions`); ``False`` by default."""
        return False

    def cuts(self) -> dict[tuple[int, int], Any]:
        """The encoding's split points by (input, position), each a
        :class:`~cfopt.formulations.tree_cuts.Cut` with its binary ``block.left_of[key]``
        (tree ensembles); none by default."""
        return {}

    def split_values(self) -> dict[int, np.ndarray]:
        """Per model input, the values surely left / right of every split on it (sorted;
        tree ensembles); none by default."""
        return {}

    def dense_layers(self) -> list[pyo.Block]:
        """The blocks of the encoding's dense layers, input to output, each with the
        pre-activations ``zhat[j]`` (ReLU networks; the last one: the logits); none by
        default."""
        return []

    def layer_bounds(self) -> LayerBounds:
        """Current pre-activation bounds (lb, ub) of every layer of :meth:`dense_layers`,
        input to output, in the network's own units; none by default."""
        return []

    def set_layer_bounds(self, bounds: LayerBounds) -> int:
        """Set every layer's pre-activation bounds (network units), big-M constants and
        stable binaries, and the logits' bounds; returns the number of stable hidden
        neurons (none by default: an encoding without layers has nothing to set)."""
        return 0

    def set_input_box(self, lower: np.ndarray, upper: np.ndarray,
                      hull: np.ndarray | None = None) -> int:
        """Set the encoding's internal bounds to those valid over the box ``[lower,
        upper]`` of the model inputs (raw model-input units, within
        :attr:`input_bounds`) and, with ``hull``, the convex hull of its rows, replacing
        the current ones (ReLU networks: every layer's pre-activation bounds by interval
        arithmetic, the first layer's also within its values at the hull's points,
        :meth:`set_layer_bounds`); returns the number of stable hidden neurons (none by
        default: an encoding without internal bounds has nothing to set)."""
        return 0

    def vertex_envelope(self, points: np.ndarray, weights: Sequence[pyo.Var]
                        ) -> pyo.Constraint | None:
        """Rows, to add to a block, that tighten the encoding when its inputs are the
        convex combination of the rows of ``points`` with ``weights`` (ReLU networks:
        the first layer's vertex envelope, :mod:`cfopt.formulations.predictors.network`);
        ``None`` by default: an encoding without a convex first layer has no envelope."""
        return None

    def set_neuron_bounds(self, k: int, j: int, lb: float, ub: float) -> None:
        """Bounds of neuron ``j`` of layer ``k`` of :meth:`dense_layers`, in the block's
        units (``IndexError`` by default: an encoding without layers has no neurons)."""
        raise IndexError(f"the {self.adapter.kind} encoding has no dense layer {k}")

    def get_error(self, Z: np.ndarray,
                  solver: str = "highs"  # pragma: no mutate (make_solver ignores case)
                  ) -> float:
        """Max |encoding output - real model output| over the rows of ``Z``.

        Each row is fixed as the block's input and the encoding is solved twice,
        minimising and maximising the sum of the logits, so a loose encoding shows up
        as well as a wrong one; the logits are mapped to the real model's output space
        (probabilities for sklearn MLPs, decision values for linear models, the raw
        output for torch/ONNX, computed in float64). Returns ``inf`` if the encoding
        cannot represent a row (infeasible).
        """
        from ...results.status import Status
        from ...solvers import SolverSettings, make_solver

        Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))  # pragma: no mutate (read as floats)
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
        standalone.sense = pyo.Param(mutable=True, initialize=1.0)  # pragma: no mutate (reset)
        standalone.obj = pyo.Objective(
            expr=standalone.sense * pyo.quicksum(standalone.p.outputs.values()))
        backend = make_solver(solver)
        # pragma: no mutate start (inputs fixed: an exact encoding has one value)
        settings = SolverSettings(mip_gap=0.0, time_limit=60.0)
        # pragma: no mutate end
        expected = self.adapter.output(Z)
        worst = 0.0
        unit_lo, unit_width = unit_box(self.input_bounds)
        for row, z in enumerate(Z):
            for i in range(n):
                standalone.p.inputs[i].fix(float((z[i] - unit_lo[i]) / unit_width[i]))
            chosen = self.fix_choices(standalone.p, z)
            for sense in (1.0, -1.0):  # pragma: no mutate (signs tested; a scale is no change)
                standalone.sense = sense
                outcome = backend.solve(standalone, settings)  # pragma: no mutate (as above)
                if outcome.status is not Status.OPTIMAL:
                    return float("inf")  # pragma: no mutate (float() ignores case)
                logits = np.array([[pyo.value(standalone.p.outputs[j])
                                    for j in range(self.adapter.n_logits)]])
                err = np.abs(self.adapter.output_from_logits(logits)[0] - expected[row]).max()
                worst = max(worst, float(err))
            for var in chosen:
                var.unfix()
        return worst


#: a copy of the model's network in a counterfactual MILP (e.g. a K-scenario's, a
#: shifted model's) and the model inputs it sees when the counterfactual changes no
#: feature (``None``: the counterfactual's own inputs)
NetworkCopy = tuple[PredictorConstr, "np.ndarray | None"]


@dataclass(frozen=True)
class Formulation:
    """A registered formulation: the builder of a parsed structure type's blocks (it
    returns the block's :class:`PredictorConstr`) and which of :func:`add_predictor`'s
    ``formulation`` / ``per_query`` options it takes."""

    builder: Builder
    options: frozenset[str]


_FORMULATIONS: dict[type, Formulation] = {}


def register_formulation(structure_type: type, options: Sequence[str] = ()
                         ) -> Callable[[Builder], Builder]:
    """Register the builder of a parsed structure type's blocks (:data:`Builder`: it
    adds the sub-block and returns its :class:`PredictorConstr`) and the builder options
    it takes (``"formulation"``, ``"per_query"``)."""
    unknown = sorted(set(options) - {"formulation", "per_query"})
    if unknown:
        raise ValueError(f"unknown builder option(s) {unknown}: use 'formulation', 'per_query'")

    def deco(fn: Builder) -> Builder:
        _FORMULATIONS[structure_type] = Formulation(fn, frozenset(options))
        return fn

    return deco


def add_predictor(block: pyo.Block, model: Any, inputs: Sequence[Any] | None = None, *,
                  name: str = "predictor", input_bounds: Bounds | None = None,
                  input_grids: Sequence[Grid] | None = None,
                  input_rounding: Sequence[float] | None = None,
                  library_input: Callable[[int, float], float] | None = None,
                  formulation: str | None = None,
                  per_query: bool | None = False) -> PredictorConstr:
    r"""Embed a learned model in ``block`` as the sub-block ``block.<name>``.

    Args:
        block: the Pyomo block (e.g. a ``ConcreteModel``) that receives the predictor.
        model: a fitted model (torch ``nn.Sequential``, sklearn ``MLPClassifier`` /
            linear classifier, ONNX ModelProto or file path) or a parsed
            :class:`~cfopt.models.ModelAdapter`.
        inputs: Pyomo variables or linear expressions fed to the model; the constraints
            ``block.<name>_link[i]``, :math:`t_i = (\text{inputs}_i - \ell_i) / w_i` on
            the block's normalized inputs, tie them in.
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
            :mod:`cfopt.formulations.predictors.trees`.
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
    registered = None  # pragma: no mutate (the loop sets it: every type has a class)
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
    constr = registered.builder(block, name, adapter, input_bounds, grids=input_grids,
                                rounding=input_rounding, library_input=library_input,
                                **options)
    if inputs is not None:  # t_i = (inputs_i - l_i) / w_i, in the block's units
        unit = constr.unit_inputs
        lo, width = unit_box(input_bounds)
        block.add_component(f"{name}_link", pyo.Constraint(range(n), rule=lambda b, i: (
            unit[i] - (inputs[i] - float(lo[i])) / float(width[i]) == 0)))
    return constr
