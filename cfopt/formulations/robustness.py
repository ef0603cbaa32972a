r"""Δ-robustness of ReLU networks under model shift (PROPLACE, Jiang et al. 2024).

A network :math:`M_\Theta` with one logit (class 1 iff the logit is > 0) or one logit
per class (the argmax), and the model shift :math:`\Delta = \{\Theta' : \|\Theta' -
\Theta\|_\infty \le \delta\}` (every weight and bias independently within ±δ; the
interval abstraction, Def. 5-7). A point is Δ-robust for the target class :math:`t`
when every *margin* :math:`c^\top y` of the logits :math:`y` that the target must keep
stays ≥ 0 under every shift (Def. 7; the paper's eq. (6a) is the adversary, which
*minimises*): the signed logit :math:`s\,y` of a one-logit network (:math:`s = \pm 1`,
the target's sign), or :math:`y_t - y_j` for every other class :math:`j` of a network
with one logit per class (:func:`target_margins`, :class:`Margin`). A margin is the
one logit of the contrast network (output layer :math:`c^\top W`, :math:`c^\top b`,
:meth:`~cfopt.models.network.ReLUNetwork.contrast`). The output layer's rows shift
independently and :math:`h \ge 0`, so the least margin reachable from the last hidden
layer :math:`h` is

.. math:: c^\top (W^0 h + b^0) - \|c\|_1 \delta (\mathbf 1^\top h + 1),

for :math:`y_t - y_j`: :math:`(W_t - W_j) h + b_t - b_j - 2\delta(\mathbf 1^\top h + 1)`.
The hidden layers are shared by every class, so each margin is its own adversary
problem (the shift that lets class :math:`j` win need not let class :math:`k` win).

**Exact linear adversary.** Each neuron's weight row is independent of every other
neuron's, and post-ReLU values are ≥ 0, so the pre-activations reachable from given
previous-layer values :math:`V \ge 0` are exactly

.. math:: \hat h_j \in \left[W^0_j V + b^0_j - \delta(\mathbf 1^\top V + 1),\;
          W^0_j V + b^0_j + \delta(\mathbf 1^\top V + 1)\right]

(first layer: the fixed input :math:`z`, with :math:`\|z\|_1` in place of
:math:`\mathbf 1^\top V`, since inputs may be negative). :class:`AdversaryModel` is
this set with the big-M ReLU encoding of every network (the predictor formulation, with
a dense-layer rule for the shifted weights): no bilinear terms, any MILP solver. Its
objective is the least margin reachable from the last hidden layer (above).

**Concrete parameters** (:func:`recover_parameters`): per neuron,
:math:`W = W^0 + \sigma_j \operatorname{sign}(V)^\top`, :math:`b = b^0 + \sigma_j`
with :math:`\sigma_j \in [-\delta, \delta]` reproduce any reachable pre-activation; the
output row :math:`k` moves by :math:`-\operatorname{sign}(c_k)\,\delta` in every weight
of an active input and in its bias, which attains the least margin above.

**Interval screen** (:meth:`~cfopt.models.network.ReLUNetwork.shifted_bounds`,
:func:`attack`): interval bound propagation over the same sets gives a sound lower
bound of the least margin (certainly robust when ≥ 0), and one concrete shifted model
per point gives an upper bound (certainly not robust when < 0).

**Master problem copies** (:func:`add_shifted_copy`): PROPLACE's Algorithm 1 keeps one
network copy per collected model, each embedded with :func:`add_predictor` on the
counterfactual's model inputs and required, by the validity constraints of
:func:`~cfopt.formulations.validity.add_validity`, to classify it as the target with
the master margin σ (against every other class).

The checker that decides robustness with these pieces, the plausible region and the
cutting-set loop are in :mod:`cfopt.methods` (``adversaries.model_shift``,
``plausible_region``, ``proplace``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyomo.environ as pyo

from ..models import ModelAdapter, ReLUNetwork, parse_model
from ..models.base import Decision, decide
from ..models.network import Parameters
from .features import encode_inputs
from .predictors import PredictorConstr, add_predictor
from .predictors.network import build_shifted_network
from .validity import add_validity, set_target

if TYPE_CHECKING:
    from ..problem import CounterfactualModel


def check_delta(delta: Any) -> float:
    """δ as a float; ``ValueError`` naming the option unless it is positive and finite."""
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating)) or \
            not (math.isfinite(delta) and delta > 0):
        raise ValueError(f"delta must be a positive number (the radius of the model shift "
                         f"in every weight and bias), got {delta!r}")
    return float(delta)


def robust_network(model: Any) -> ModelAdapter:
    """The parsed model if it is a ReLU network classifier, with one logit (class 1 iff
    > 0) or one logit per class (argmax); ``ValueError`` otherwise (the interval
    abstraction is defined for those)."""
    adapter = parse_model(model)
    if not isinstance(adapter.structure, ReLUNetwork):
        raise ValueError(f"Δ-robustness needs a ReLU network (torch, ONNX, sklearn MLP); got a "
                         f"{adapter.kind} ({type(adapter.structure).__name__})")
    binary = adapter.decision == "sign" and adapter.n_logits == 1
    if not (binary or (adapter.decision == "argmax" and adapter.n_logits >= 2)):
        raise ValueError(f"Δ-robustness is defined for classifiers with one logit or one logit "
                         f"per class; the {adapter.kind} has {adapter.n_logits} outputs "
                         f"(decision {adapter.decision!r})")
    return adapter


@dataclass(frozen=True)
class Margin:
    r"""A margin :math:`c^\top y` of the logits :math:`y` that the target class keeps
    (module docstring).

    Attributes:
        coefficients: :math:`c`, one per logit.
        competitor: the other class :math:`j` of a margin :math:`y_t - y_j` (``None``:
            the signed logit of a one-logit network).
    """

    coefficients: tuple[float, ...]
    competitor: int | None = None

    @property
    def scale(self) -> float:
        r""":math:`\|c\|_1`: the contrast's output layer shifts by :math:`\|c\|_1 \delta`."""
        return float(np.abs(self.coefficients).sum())

    def of(self, logits: np.ndarray) -> np.ndarray:
        """The margin of each row of ``logits``."""
        # pragma: no mutate start (numbers: their product with the logits is float64 anyway)
        coefficients = np.asarray(self.coefficients, dtype=np.float64)
        # pragma: no mutate end
        return np.atleast_2d(logits) @ coefficients


def target_margins(net: ReLUNetwork, target: int) -> list[Margin]:
    """The margins the class index ``target`` keeps: the target sign times the logit of a
    one-logit network (+1 for class 1), or the target's logit minus each other class's;
    ``ValueError`` unless ``target`` is a class index of ``net``."""
    k = net.n_outputs
    n_classes = 2 if k == 1 else k
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)) or \
            not 0 <= target < n_classes:
        raise ValueError(f"the target must be a class index of the network (0 to "
                         f"{n_classes - 1}), got {target!r}")
    if k == 1:
        return [Margin((1.0 if target == 1 else -1.0,))]
    return [Margin(tuple(float(c == target) - float(c == j) for c in range(k)), j)
            for j in range(k) if j != target]


def attack_targets(net: ReLUNetwork, Z: np.ndarray, delta: float, margin: Margin
                   ) -> list[np.ndarray]:
    """Hidden pre-activations, per row of ``Z``, of one concrete shifted model: every
    neuron's pre-activation moves by ``±δ(‖V‖₁ + 1)`` against the derivative of the
    margin with respect to its output under the nominal activation pattern (realised by
    :func:`recover_parameters`). One (n, width) array per hidden layer."""
    Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
    contrast = net.contrast(margin.coefficients)
    params = contrast.parameters
    active = [pre > 0 for pre in contrast.pre_activations(Z)[:-1]]
    # derivative of the margin w.r.t. each hidden layer's output
    grads = [np.broadcast_to(params[-1][0][0], (len(Z), params[-1][0].shape[1]))]
    for (w, _), act in zip(params[-2:0:-1], active[-1:0:-1]):
        grads.insert(0, (grads[0] * act) @ w)
    v, targets = Z, []
    for (w, b), g in zip(params[:-1], grads):
        pre = v @ w.T + b - delta * np.sign(g) * (np.abs(v).sum(axis=1, keepdims=True) + 1.0)
        targets.append(pre)
        v = np.maximum(pre, 0.0)
    return targets


def attack(net: ReLUNetwork, Z: np.ndarray, delta: float, margin: Margin) -> np.ndarray:
    """The margin, per row of ``Z``, of the concrete shifted model of
    :func:`attack_targets` with the output moved by ``-‖c‖₁δ(‖h‖₁ + 1)``: an upper
    bound of the least margin over Δ."""
    Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
    w, b = net.contrast(margin.coefficients).parameters[-1]
    radius = margin.scale * delta
    targets = attack_targets(net, Z, delta, margin)
    v = np.maximum(targets[-1], 0.0) if targets else np.abs(Z)
    if not targets:  # linear model: the first layer's reach uses |z|
        return (Z @ w.T + b)[:, 0] - radius * (v.sum(axis=1) + 1.0)
    return (v @ w.T + b)[:, 0] - radius * (v.sum(axis=1) + 1.0)


class AdversaryModel(pyo.ConcreteModel):
    r"""The exact adversary of one margin at the model input ``z`` as a MILP (module
    docstring): the networks of Δ built by the predictor formulation of every network
    (:func:`~cfopt.formulations.predictors.network.build_shifted_network`: OMLT's big-M
    ReLU with the shifted dense-layer rule) on the margin's contrast network, whose
    output layer shifts by ``‖c‖₁δ``.

    The input enters only through the first layer's reach
    :math:`W z + b \pm \delta(\|z\|_1 + 1)`, which that layer's pre-activation bounds
    hold: :meth:`set_point` moves the model to another input by setting every layer's
    bounds from :meth:`~cfopt.models.network.ReLUNetwork.shifted_bounds` at it (the
    first layer's: exactly its reachable interval; the big-M constants; stable neurons
    fixed, the others freed), with no rebuild, so a persistent solver receives only the
    changed bounds.

    Components: ``network`` the OMLT block (its dense layers' ``zhat[j]`` the
    pre-activations); ``worst`` the least margin reachable from the last hidden layer,
    minimised by ``objective``.
    """

    def __init__(self, net: ReLUNetwork, z: np.ndarray, delta: float, margin: Margin) -> None:
        if net.is_linear:
            # pragma: no mutate start (message text)
            why = ("the network has no hidden layer; its minimum logit over Δ is given in "
                   "closed form by ReLUNetwork.shifted_bounds")
            # pragma: no mutate end
            raise ValueError(why)
        super().__init__(name="adversary")  # pragma: no mutate (the model's display name)
        self._contrast = net.contrast(margin.coefficients)
        self._delta, self._scale = delta, margin.scale
        self._network = build_shifted_network(self, "network", ShiftedNetwork(
            self._contrast.parameters), np.zeros(net.n_inputs), delta, margin.scale * delta)
        self.worst = pyo.Expression(expr=self._network.outputs[0])
        self.objective = pyo.Objective(expr=self.worst,
                                       sense=pyo.minimize)  # pragma: no mutate (the default)
        self.set_point(z)

    def set_point(self, z: np.ndarray) -> None:
        """Move the adversary to the model input ``z`` (class docstring)."""
        z = np.asarray(z, dtype=np.float64)  # pragma: no mutate (shifted_bounds casts z too)
        z = z.reshape(-1)  # pragma: no mutate (numpy reads any negative size as -1)
        if z.shape[0] != self._contrast.n_inputs:
            raise ValueError(f"the network takes {self._contrast.n_inputs} inputs, got "
                             f"{z.shape[0]}")
        self._network.set_layer_bounds([(lo[0], hi[0]) for lo, hi in
                                        self._contrast.shifted_bounds(z[None, :], self._delta,
                                                                      self._scale)])

    def targets(self) -> list[np.ndarray]:
        """The adversary's pre-activations per hidden layer (solution values)."""
        return [np.array([pyo.value(layer.zhat[j]) for j in layer.zhat])
                for layer in self._network.dense_layers()[:-1]]


def recover_parameters(net: ReLUNetwork, z: np.ndarray, delta: float, targets: list[np.ndarray],
                       margin: Margin) -> Parameters:
    """Concrete parameters in Δ reaching the hidden pre-activations ``targets`` at ``z``
    (as closely as the box allows), with the output layer worst for ``margin``: per
    neuron ``W = W⁰ + σ_j sign(V)ᵀ``, ``b = b⁰ + σ_j``, ``σ_j ∈ [-δ, δ]``, where ``V`` is
    the previous layer's value under the parameters recovered so far, and output row
    ``k`` moved by ``-sign(c_k) δ`` (module docstring). Returns (W, b) per layer in the
    network's own orientation (every logit)."""
    v = np.asarray(z, dtype=np.float64)
    v = v.reshape(-1)  # pragma: no mutate (numpy reads any negative size as -1)
    out: Parameters = []
    for layer, target in zip(net.layers[:-1], targets):
        w0, b0 = layer.weight, layer.bias
        norm = np.abs(v).sum() + 1.0
        s = np.clip((target - (w0 @ v + b0)) / norm, -delta, delta)
        w, b = w0 + np.outer(s, np.sign(v)), b0 + s
        out.append((w, b))
        v = np.maximum(w @ v + b, 0.0)
    last = net.layers[-1]
    # pragma: no mutate start (numbers: their sign times -δ is float64 anyway)
    coefficients = np.asarray(margin.coefficients, dtype=np.float64)
    # pragma: no mutate end
    step = -delta * np.sign(coefficients)
    out.append((last.weight + step[:, None] * np.sign(v)[None, :], last.bias + step))
    return out


def max_shift(net: ReLUNetwork, params: Parameters) -> float:
    """``‖Θ - Θ⁰‖_∞`` of concrete parameters."""
    return max(max(float(np.abs(w - layer.weight).max()), float(np.abs(b - layer.bias).max()))
               for layer, (w, b) in zip(net.layers, params))


class ShiftedNetwork(ModelAdapter):
    """A concrete network of Δ as a model cfopt embeds, deciding as the trained one
    (``decision`` and ``classes``: by default one logit, class 1 iff > 0)."""

    def __init__(self, params: Parameters, decision: Decision = "sign",
                 classes: Sequence[Any] = (0, 1)) -> None:
        self.structure = ReLUNetwork.from_parameters(params)
        self.model = self.structure
        self.decision = decision
        self.classes = tuple(classes)

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return np.asarray(self.classes)[decide(self.output(Z), self.decision)]

    def output(self, Z: np.ndarray) -> np.ndarray:
        return self.structure.logits(np.atleast_2d(Z))


def add_shifted_copy(m: CounterfactualModel, params: Parameters,
                     box: tuple[np.ndarray, np.ndarray], name: str,
                     hull: np.ndarray | None = None,
                     hull_weights: Sequence[pyo.Var] | None = None
                     ) -> tuple[pyo.Block, PredictorConstr]:
    """One more network copy in the master of Algorithm 1, the block ``m.<name>`` (delete
    it to drop the copy): the shifted model ``params`` embedded with
    :func:`add_predictor` on the counterfactual's model inputs (``predictor``), its
    big-M constants from interval bounds over the input ``box`` (e.g. the plausible
    region's bounding box; with ``hull``, points whose convex hull holds the master's
    inputs, e.g. the region's, the first layer's within its values at them; with
    ``hull_weights`` too, the variables of which the inputs are the combination of
    ``hull``'s rows, the first layer's vertex envelope,
    :meth:`~cfopt.formulations.predictors.PredictorConstr.vertex_envelope`), and the
    validity constraints of :func:`~cfopt.formulations.validity.add_validity` for the
    query's target with ``m.margin`` (the master margin σ): target sign x logit ≥ σ, or
    the target's logit ≥ every other class's + σ. The neurons dead over the box (and
    hull) are left out (:meth:`~cfopt.models.network.ReLUNetwork.without_dead_neurons`:
    the same logits wherever the big-M constants hold). Returns the block and its
    predictor."""
    net = ReLUNetwork.from_parameters(params)
    live, bounds = net.without_dead_neurons(net.box_bounds(*box, hull=hull))
    adapter = ShiftedNetwork(live.parameters, m.adapter.decision, m.adapter.classes)
    copy = pyo.Block()
    m.add_component(name, copy)
    m.adopt(name)
    # pragma: no mutate start (encode_inputs reads the specs only; add_predictor's default name)
    inputs = encode_inputs(m, m.space, m.input_specs)
    pred = add_predictor(copy, adapter, inputs, name="predictor")
    # pragma: no mutate end
    pred.set_layer_bounds(bounds)
    add_validity(copy, pred.outputs, pred.output_bounds(), adapter, m.margin)
    set_target(copy, adapter, [adapter.class_index(t) for t in m.target])
    envelope = (pred.vertex_envelope(hull, hull_weights)
                if hull is not None and hull_weights is not None else None)
    if envelope is not None:
        copy.vertex_envelope = envelope
    return copy, pred
