r"""Δ-robustness of ReLU networks under model shift (PROPLACE, Jiang et al. 2024).

A network :math:`M_\Theta` with one logit (class 1 iff the logit is > 0) and the model
shift :math:`\Delta = \{\Theta' : \|\Theta' - \Theta\|_\infty \le \delta\}` (every weight
and bias independently within ±δ; the interval abstraction, Def. 5-7). A point is
Δ-robust for the target sign :math:`s \in \{+1, -1\}` when the minimum of
:math:`s \cdot M_{\Theta'}(z)` over :math:`\Theta' \in \Delta` is ≥ 0 (Def. 7; the
paper's eq. (6a) is the adversary, which *minimises*).

**Exact linear adversary.** Each neuron's weight row is independent of every other
neuron's, and post-ReLU values are ≥ 0, so the pre-activations reachable from given
previous-layer values :math:`V \ge 0` are exactly

.. math:: \hat h_j \in \left[W^0_j V + b^0_j - \delta(\mathbf 1^\top V + 1),\;
          W^0_j V + b^0_j + \delta(\mathbf 1^\top V + 1)\right]

(first layer: the fixed input :math:`z`, with :math:`\|z\|_1` in place of
:math:`\mathbf 1^\top V`, since inputs may be negative). :class:`AdversaryModel` is
this set with the big-M ReLU encoding of every network (the predictor formulation, with
a dense-layer rule for the shifted weights): no bilinear terms, any MILP solver. Its
objective is the least signed logit reachable from the last hidden layer,
:math:`s(W^0 h + b^0) - \delta(\mathbf 1^\top h + 1)`.

**Concrete parameters** (:func:`recover_parameters`): per neuron,
:math:`W = W^0 + \sigma_j \operatorname{sign}(V)^\top`, :math:`b = b^0 + \sigma_j`
with :math:`\sigma_j \in [-\delta, \delta]` reproduce any reachable pre-activation.

**Interval screen** (:meth:`~cfopt.models.network.ReLUNetwork.shifted_bounds`,
:func:`attack`): interval bound propagation over the same sets gives a sound lower
bound of the minimum logit (certainly robust when ≥ 0), and one concrete shifted model
per point gives an upper bound (certainly not robust when < 0).

**Master problem copies** (:func:`add_shifted_copy`): PROPLACE's Algorithm 1 keeps one
network copy per collected model, each embedded with :func:`add_predictor` on the
counterfactual's model inputs and required to reach the master margin σ.

The checker that decides robustness with these pieces, the plausible region and the
cutting-set loop are in :mod:`cfopt.methods` (``adversaries.model_shift``,
``plausible_region``, ``proplace``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pyomo.environ as pyo

from ..models import ModelAdapter, ReLUNetwork, parse_model
from ..models.base import decide
from ..models.network import Parameters
from .features import encode_inputs
from .predictors import add_predictor
from .predictors.network import build_shifted_network

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
    """The parsed model if it is a ReLU network with one logit (class 1 iff > 0);
    ``ValueError`` otherwise (the interval abstraction is defined for those)."""
    adapter = parse_model(model)
    if not isinstance(adapter.structure, ReLUNetwork):
        raise ValueError(f"Δ-robustness needs a ReLU network (torch, ONNX, sklearn MLP); got a "
                         f"{adapter.kind} ({type(adapter.structure).__name__})")
    if adapter.decision != "sign" or adapter.n_logits != 1:
        raise ValueError(f"Δ-robustness is implemented for binary networks with one logit; "
                         f"the {adapter.kind} has {adapter.n_logits} outputs "
                         f"(decision {adapter.decision!r})")
    return adapter


def attack_targets(net: ReLUNetwork, Z: np.ndarray, delta: float, sign: int = 1
                   ) -> list[np.ndarray]:
    """Hidden pre-activations, per row of ``Z``, of one concrete shifted model: every
    neuron's pre-activation moves by ``±δ(‖V‖₁ + 1)`` against the derivative of the
    signed logit with respect to its output under the nominal activation pattern
    (realised by :func:`recover_parameters`). One (n, width) array per hidden layer."""
    Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
    signed = net.signed(sign)
    params = signed.parameters
    active = [pre > 0 for pre in signed.pre_activations(Z)[:-1]]
    # derivative of the signed logit w.r.t. each hidden layer's output
    grads = [np.broadcast_to(params[-1][0][0], (len(Z), params[-1][0].shape[1]))]
    for (w, _), act in zip(params[-2:0:-1], active[-1:0:-1]):
        grads.insert(0, (grads[0] * act) @ w)
    v, targets = Z, []
    for (w, b), g in zip(params[:-1], grads):
        pre = v @ w.T + b - delta * np.sign(g) * (np.abs(v).sum(axis=1, keepdims=True) + 1.0)
        targets.append(pre)
        v = np.maximum(pre, 0.0)
    return targets


def attack(net: ReLUNetwork, Z: np.ndarray, delta: float, sign: int = 1) -> np.ndarray:
    """Signed logit, per row of ``Z``, of the concrete shifted model of
    :func:`attack_targets` with the output moved by ``-δ(‖h‖₁ + 1)``: an upper bound
    of the minimum over Δ."""
    Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
    w, b = net.signed(sign).parameters[-1]
    targets = attack_targets(net, Z, delta, sign)
    v = np.maximum(targets[-1], 0.0) if targets else np.abs(Z)
    if not targets:  # linear model: the first layer's reach uses |z|
        return (Z @ w.T + b)[:, 0] - delta * (v.sum(axis=1) + 1.0)
    return (v @ w.T + b)[:, 0] - delta * (v.sum(axis=1) + 1.0)


class AdversaryModel(pyo.ConcreteModel):
    """The exact adversary at the fixed model input ``z`` as a MILP (module docstring):
    the networks of Δ built by the predictor formulation of every network
    (:func:`~cfopt.formulations.predictors.network.build_shifted_network`: OMLT's big-M
    ReLU with the shifted dense-layer rule), its layer bounds from
    :meth:`~cfopt.models.network.ReLUNetwork.shifted_bounds` (the first layer's:
    exactly its reachable interval; stable neurons fixed).

    Components: ``network`` the OMLT block (its dense layers' ``zhat[j]`` the
    pre-activations); ``worst`` the least signed logit reachable from the last hidden
    layer, minimised by ``objective``.
    """

    def __init__(self, net: ReLUNetwork, z: np.ndarray, delta: float, sign: int = 1) -> None:
        z = np.asarray(z, dtype=np.float64).reshape(-1)
        if z.shape[0] != net.n_inputs:
            raise ValueError(f"the network takes {net.n_inputs} inputs, got {z.shape[0]}")
        if net.is_linear:
            raise ValueError("the network has no hidden layer; its minimum logit over Δ is "
                             "given in closed form by ReLUNetwork.shifted_bounds")
        super().__init__(name="adversary")
        signed = net.signed(sign)
        self._network = build_shifted_network(self, "network", ShiftedNetwork(
            signed.parameters), z, delta)
        self._network.set_layer_bounds([(lo[0], hi[0]) for lo, hi in signed.shifted_bounds(
            z[None, :], delta)])
        self.worst = pyo.Expression(expr=self._network.outputs[0])
        self.objective = pyo.Objective(expr=self.worst, sense=pyo.minimize)

    def targets(self) -> list[np.ndarray]:
        """The adversary's pre-activations per hidden layer (solution values)."""
        return [np.array([pyo.value(layer.zhat[j]) for j in layer.zhat])
                for layer in self._network.dense_layers()[:-1]]


def recover_parameters(net: ReLUNetwork, z: np.ndarray, delta: float, targets: list[np.ndarray],
                       sign: int = 1) -> Parameters:
    """Concrete parameters in Δ reaching the hidden pre-activations ``targets`` at ``z``
    (as closely as the box allows), with the worst output layer: per neuron
    ``W = W⁰ + σ_j sign(V)ᵀ``, ``b = b⁰ + σ_j``, ``σ_j ∈ [-δ, δ]``, where ``V`` is the
    previous layer's value under the parameters recovered so far (module docstring).
    Returns (W, b) per layer in the network's own orientation (unsigned logit)."""
    v = np.asarray(z, dtype=np.float64).reshape(-1)
    out: Parameters = []
    for layer, target in zip(net.layers[:-1], targets):
        w0, b0 = layer.weight, layer.bias
        norm = np.abs(v).sum() + 1.0
        s = np.clip((target - (w0 @ v + b0)) / norm, -delta, delta)
        w, b = w0 + np.outer(s, np.sign(v)), b0 + s
        out.append((w, b))
        v = np.maximum(w @ v + b, 0.0)
    last = net.layers[-1]
    s = -sign * delta
    out.append((last.weight + s * np.sign(v)[None, :], last.bias + s))
    return out


def max_shift(net: ReLUNetwork, params: Parameters) -> float:
    """``‖Θ - Θ⁰‖_∞`` of concrete parameters."""
    return max(max(float(np.abs(w - layer.weight).max()), float(np.abs(b - layer.bias).max()))
               for layer, (w, b) in zip(net.layers, params))


class ShiftedNetwork(ModelAdapter):
    """A concrete network of Δ (one logit, class 1 iff > 0), as a model cfopt embeds."""

    decision = "sign"
    classes = (0, 1)

    def __init__(self, params: Parameters) -> None:
        self.structure = ReLUNetwork.from_parameters(params)
        self.model = self.structure

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return decide(self.output(Z), "sign")

    def output(self, Z: np.ndarray) -> np.ndarray:
        return self.structure.logits(np.atleast_2d(Z))


def add_shifted_copy(m: CounterfactualModel, params: Parameters,
                     box: tuple[np.ndarray, np.ndarray], name: str) -> pyo.Block:
    """One more network copy in the master of Algorithm 1, the block ``m.<name>``
    (delete it to drop the copy): the shifted model ``params`` embedded with
    :func:`add_predictor` on the counterfactual's model inputs (``predictor``), its
    big-M constants from interval bounds over the input ``box`` (e.g. the plausible
    region's bounding box), and the constraint ``valid``: target sign x logit ≥
    ``m.margin`` (the master margin σ)."""
    adapter = ShiftedNetwork(params)
    copy = pyo.Block()
    m.add_component(name, copy)
    pred = add_predictor(copy, adapter, encode_inputs(m, m.space, m.input_specs),
                         name="predictor")
    pred.set_layer_bounds(adapter.structure.box_bounds(*box))
    copy.valid = pyo.Constraint(expr=m.target_sign * pred.outputs[0] >= m.margin)
    return copy
