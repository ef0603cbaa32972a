r"""Feed-forward ReLU networks in float64: the one home of their math.

A :class:`ReLUNetwork` is a chain of dense layers :math:`h^{k} = \phi_k(W^k h^{k-1} +
b^k)`, :math:`\phi_k` the ReLU on hidden layers and the identity on the last one (the
logits; a linear model is the one-layer case). Everything cfopt computes on a network
outside the MILP is a method here:

* :meth:`ReLUNetwork.pre_activations` / :meth:`ReLUNetwork.logits` — the forward pass
  (bounds, heuristics and the robustness checks; verification uses the real model);
* :meth:`ReLUNetwork.box_bounds` — interval bounds of every layer's pre-activation over
  an input box (interval arithmetic, input to output: :math:`[W^+ l + W^- u + b,\;
  W^+ u + W^- l + b]`), the big-M constants of the ReLU encoding; with the vertices
  :math:`p_1, \dots, p_n` of a polytope known to hold the inputs (PROPLACE's plausible
  region, a convex hull), the first layer's are also within
  :math:`[\min_l W p_l + b,\; \max_l W p_l + b]`, exact over the hull (a linear
  function's extremes over a polytope are at its vertices);
* :meth:`ReLUNetwork.sparse_bounds` — the first layer's exact bounds when at most
  :math:`N` groups of inputs leave a base point :math:`\bar z`, group :math:`g` to any
  point of the convex hull of its options :math:`O_g`: with
  :math:`c^+_{jg} = \max(0, \max_{o \in O_g} W_{jg}(o - \bar z_g))` (and :math:`c^-_{jg}`
  the least, ≤ 0), :math:`W_j \bar z + b_j + \sum_{N \text{ largest}} c^+_{jg}` above
  and the :math:`N` most negative :math:`c^-_{jg}` below (a counterfactual of objective
  ≤ r changes at most r / (its L0 coefficient) features), propagated by intervals;
* :meth:`ReLUNetwork.back_substituted` — bounds of the later layers from linear
  functions of the inputs through the earlier ReLUs' linear enclosures (CROWN, Zhang et
  al. 2018; DeepPoly, Singh et al. 2019), concretized over any region of inputs (a box:
  :func:`box_concretizer`; a query's reach within a radius: cfopt.query.restrictions.relu);
* :meth:`ReLUNetwork.shifted_bounds` — the same at fixed inputs over the model shift
  :math:`\Delta = \{\Theta' : \|\Theta' - \Theta\|_\infty \le \delta\}` (PROPLACE,
  Jiang et al. 2024, Def. 5-7): post-ReLU values :math:`V \ge 0` give the reachable
  pre-activations :math:`W_j V + b_j \pm \delta(\mathbf 1^\top V + 1)` (first layer: the
  input :math:`z`, with :math:`\|z\|_1`), propagated as boxes with the weights in
  :math:`[W - \delta, W + \delta]`;
* :meth:`ReLUNetwork.contrast` — the one-logit network of a margin :math:`c^\top y` of
  the logits (target sign, or target minus another class).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError

#: a network's parameters as (W, b) per layer, input to output (W has shape (out, in))
Parameters = list[tuple[np.ndarray, np.ndarray]]
#: per layer, (lower, upper) bounds of its pre-activations
LayerBounds = list[tuple[np.ndarray, np.ndarray]]
#: per row of a matrix A, the least and the greatest A z over a region of inputs z
Concretizer = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

#: relative widening of the first layer's bounds over a hull's vertices (the solvers meet
#: the hull's equations z = Σ λ_l p_l within their feasibility tolerance)
HULL_TOLERANCE = 1e-6


def affine_bounds(weight: np.ndarray, bias: np.ndarray, lower: np.ndarray,
                  upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Interval bounds of ``weight @ x + bias`` (``weight``: (out, in)) over the box
    ``lower <= x <= upper``; an infinite end gives an infinite bound unless its
    weight is 0."""
    wp, wn = np.maximum(weight, 0.0), np.minimum(weight, 0.0)
    if np.isfinite(lower).all() and np.isfinite(upper).all():
        return wp @ lower + wn @ upper + bias, wp @ upper + wn @ lower + bias

    def total(w: np.ndarray, ends: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):  # 0 x inf: a zero weight adds nothing
            return np.where(w == 0.0, 0.0, w * ends[None, :]).sum(axis=1)

    return (total(wp, lower) + total(wn, upper) + bias,
            total(wp, upper) + total(wn, lower) + bias)


@dataclass(frozen=True)
class DenseLayer:
    """``out = W @ x + b`` followed by ReLU when ``relu`` (W has shape (out, in))."""

    weight: np.ndarray
    bias: np.ndarray
    relu: bool

    def __post_init__(self) -> None:
        w = np.asarray(self.weight, dtype=np.float64)
        b = np.asarray(self.bias, dtype=np.float64).ravel()
        if w.ndim != 2 or b.shape[0] != w.shape[0]:
            raise ValueError(f"dense layer shapes do not match: W {w.shape}, b {b.shape}")
        object.__setattr__(self, "weight", w)
        object.__setattr__(self, "bias", b)


@dataclass(frozen=True)
class ReLUNetwork:
    """A feed-forward network of dense layers with ReLU (or no) activations.

    The last layer produces the logits and has no activation. A linear model is the
    one-layer case.
    """

    layers: tuple[DenseLayer, ...]

    def __post_init__(self) -> None:
        layers = tuple(self.layers)
        if not layers:
            raise ValueError("a network needs at least one layer")
        for prev, nxt in zip(layers, layers[1:]):
            if prev.weight.shape[0] != nxt.weight.shape[1]:
                raise ValueError(f"layer widths do not chain: {prev.weight.shape} then "
                                 f"{nxt.weight.shape}")
        if layers[-1].relu:
            raise ValueError("the output layer must be affine (logits), not ReLU")
        for k, layer in enumerate(layers):
            if not (np.isfinite(layer.weight).all() and np.isfinite(layer.bias).all()):
                raise UnsupportedModelError(
                    f"dense layer {k} has non-finite (NaN or inf) weights or biases; the "
                    f"model cannot be encoded (did training diverge?)")
        object.__setattr__(self, "layers", layers)

    @classmethod
    def from_parameters(cls, params: Parameters) -> ReLUNetwork:
        """The network with the layers ``params`` ((W, b) each), ReLU on all but the
        last."""
        return cls(tuple(DenseLayer(w, b, relu=k < len(params) - 1)
                         for k, (w, b) in enumerate(params)))

    @property
    def parameters(self) -> Parameters:
        """(W, b) per layer, input to output."""
        return [(layer.weight, layer.bias) for layer in self.layers]

    @property
    def n_inputs(self) -> int:
        return self.layers[0].weight.shape[1]

    @property
    def n_outputs(self) -> int:
        return self.layers[-1].weight.shape[0]

    @property
    def is_linear(self) -> bool:
        return len(self.layers) == 1

    def key(self) -> str:
        """A fingerprint of the weights (cache key of per-network verdicts)."""
        h = hashlib.sha1()
        for layer in self.layers:
            h.update(layer.weight.tobytes())
            h.update(layer.bias.tobytes())
        return h.hexdigest()

    def contrast(self, coefficients: Sequence[float]) -> ReLUNetwork:
        r"""The network whose one logit is :math:`c^\top y`, ``coefficients`` :math:`c`
        times the logits :math:`y` (its output layer :math:`c^\top W`, :math:`c^\top b`):
        the target sign :math:`(s)` of a one-logit network, or :math:`e_t - e_j` (target
        ``t`` against class ``j``) of a network with one logit per class. Its logit
        measures how much the target wins."""
        c = np.asarray(coefficients, dtype=np.float64)  # pragma: no mutate (DenseLayer converts)
        c = c.reshape(1, -1)  # pragma: no mutate (numpy reads -2 there as -1)
        if c.shape[1] != self.n_outputs:
            raise ValueError(f"a contrast of {self.n_outputs} logits needs as many "
                             f"coefficients, got {c.shape[1]}")
        *hidden, last = self.layers
        out = DenseLayer(c @ last.weight, c @ last.bias, False)  # pragma: no mutate (None: falsy)
        return ReLUNetwork((*hidden, out))

    def without_dead_neurons(self, bounds: LayerBounds) -> tuple[ReLUNetwork, LayerBounds]:
        """The network without the hidden neurons whose pre-activation upper bound in
        ``bounds`` (every layer's, as :meth:`box_bounds`) is ≤ 0, each layer keeping at
        least one, and the bounds of the neurons kept: such a neuron outputs 0 wherever
        the bounds hold (the big-M encoding fixes its binary to 0), so the logits there
        are the same, with fewer rows."""
        if len(bounds) != len(self.layers):
            raise ValueError(f"bounds for {len(bounds)} layers, the network has "
                             f"{len(self.layers)}")
        layers, kept = list(self.layers), list(bounds)
        for k in range(len(layers) - 1):
            alive = np.asarray(bounds[k][1]) > 0
            if not alive.any():
                alive[int(np.argmax(bounds[k][1]))] = True
            layer, nxt = layers[k], layers[k + 1]
            layers[k] = DenseLayer(layer.weight[alive], layer.bias[alive], layer.relu)
            layers[k + 1] = DenseLayer(nxt.weight[:, alive], nxt.bias, nxt.relu)
            kept[k] = (np.asarray(bounds[k][0])[alive], np.asarray(bounds[k][1])[alive])
        return ReLUNetwork(tuple(layers)), kept

    # ------------------------------------------------------------ forward pass
    def pre_activations(self, Z: np.ndarray) -> list[np.ndarray]:
        """Every layer's pre-activation :math:`W^k h^{k-1} + b^k` on the rows of ``Z``
        (float64), one (n, width) array per layer; the last is the logits."""
        h = np.asarray(Z, dtype=np.float64)
        out = []
        for layer in self.layers:
            h = h @ layer.weight.T + layer.bias
            out.append(h)
            if layer.relu:
                h = np.maximum(h, 0.0)
        return out

    def logits(self, Z: np.ndarray) -> np.ndarray:
        """Forward pass in float64 (used for bounds; verification uses the real model)."""
        return self.pre_activations(Z)[-1]

    def margin_scores(self, Z: np.ndarray) -> np.ndarray:
        """The scores the validity margin is declared on: :meth:`logits` in float64 (a
        solver's tolerances, accumulated through the layers, can leave a point's score
        short of the margin the MILP held it to)."""
        return self.logits(Z)

    # ----------------------------------------------------------------- bounds
    def box_bounds(self, lower: np.ndarray, upper: np.ndarray,
                   within: LayerBounds | None = None,
                   hull: np.ndarray | None = None) -> LayerBounds:
        """Interval bounds of every layer's pre-activation over the input box
        ``[lower, upper]`` (interval arithmetic, input to output; module docstring);
        ``within``: bounds valid over a set containing the box (e.g. the whole feature
        box's, LP-tightened), intersected with them layer by layer; ``hull``: points
        (rows) whose convex hull is known to hold every input too, which bound the first
        layer's pre-activations by their least and greatest values at the points
        (widened by :data:`HULL_TOLERANCE` x (1 + |value| + ‖W_j‖₁ max|p|)) before
        they are propagated."""
        lo = np.asarray(lower, dtype=np.float64)  # pragma: no mutate (W @ lo is float64 anyway)
        hi = np.asarray(upper, dtype=np.float64)  # pragma: no mutate (W @ hi is float64 anyway)
        first = self.layers[0]
        first_lo, first_hi = affine_bounds(first.weight, first.bias, lo, hi)
        if hull is not None:
            points = np.asarray(hull, dtype=np.float64)  # pragma: no mutate (propagated as float64)
            points = np.atleast_2d(points)
            values = points @ first.weight.T + first.bias
            slack = HULL_TOLERANCE * (1.0 + np.abs(values).max(axis=0) + np.abs(
                first.weight).sum(axis=1) * max(float(np.abs(points).max()), 1.0))
            first_lo = np.maximum(first_lo, values.min(axis=0) - slack)
            first_hi = np.maximum(np.minimum(first_hi, values.max(axis=0) + slack), first_lo)
        return _within(self.propagate_bounds(first_lo, first_hi), within)

    def sparse_bounds(self, base: np.ndarray,
                      moves: Sequence[tuple[slice, np.ndarray]], most: float,
                      within: LayerBounds | None = None) -> LayerBounds:
        """Bounds of every layer's pre-activation when the input is ``base`` with at
        most ``most`` of the groups ``moves`` moved (module docstring): each is
        ``(inputs, options)``, the group's input positions and a (k, width) array of
        points whose convex hull holds every value the group takes when it moves (e.g.
        a numeric input's two ends, a categorical's one-hot rows); inputs of no group
        stay at ``base``. The first layer's bounds are exact, widened by
        :data:`HULL_TOLERANCE` x (1 + |value|); ``within`` as :meth:`box_bounds`."""
        base = np.asarray(base, dtype=np.float64)  # pragma: no mutate (propagated as float64)
        first = self.layers[0]
        centre = first.weight @ base + first.bias
        gains, losses = [], []
        for inputs, options in moves:
            steps = np.atleast_2d(np.asarray(options, dtype=np.float64)) - base[inputs]
            change = first.weight[:, inputs] @ steps.T  # (width, k)
            gains.append(np.maximum(change.max(axis=1), 0.0))
            losses.append(np.minimum(change.min(axis=1), 0.0))
        lo, hi = centre.copy(), centre.copy()
        if gains and most >= 1:
            count = len(gains) if not np.isfinite(most) else int(most)
            # each row sorted (np.sort's default axis, the last)
            hi += -np.sort(-np.column_stack(gains))[:, :count].sum(axis=1)
            lo += np.sort(np.column_stack(losses))[:, :count].sum(axis=1)
        lo = lo - HULL_TOLERANCE * (1.0 + np.abs(lo))
        hi = hi + HULL_TOLERANCE * (1.0 + np.abs(hi))
        return _within(self.propagate_bounds(lo, hi), within)

    def propagate_bounds(self, lower: np.ndarray, upper: np.ndarray) -> LayerBounds:
        """Interval bounds of every layer's pre-activation from bounds ``[lower, upper]``
        of the first layer's (e.g. exact ones over a region of inputs), by interval
        arithmetic through the later layers."""
        lo, hi = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
        out = [(lo, hi)]
        for prev, layer in zip(self.layers, self.layers[1:]):
            lo, hi = (np.maximum(lo, 0.0), np.maximum(hi, 0.0)) if prev.relu else (lo, hi)
            lo, hi = affine_bounds(layer.weight, layer.bias, lo, hi)
            out.append((lo, hi))
        return out

    def back_substituted(self, first: tuple[np.ndarray, np.ndarray], concretize: Concretizer,
                         within: LayerBounds | None = None) -> LayerBounds:
        r"""Bounds of every layer's pre-activation over a region of inputs, by linear
        bounds back-substituted to the inputs (CROWN, Zhang et al. 2018, Thm. 3.2;
        DeepPoly, Singh et al. 2019), each layer's intersected with interval
        propagation from the last and with ``within``.

        ``first``: bounds of the first layer's pre-activations over the region (e.g.
        exact ones); ``concretize(A)``: per row of ``A`` (rows, inputs), the least and the
        greatest :math:`A_j z` over the region (sound: never inside the true range).
        For layer :math:`k`, each earlier ReLU with bounds :math:`[l, u]` is enclosed
        by linear functions of its input :math:`p`: :math:`\mathrm{relu}(p) \le
        \frac{u}{u - l}(p - l)` and :math:`\ge \alpha p` with :math:`\alpha = 1`
        if :math:`u \ge -l` else 0 when unstable, :math:`p` when :math:`l \ge 0`, 0 when
        :math:`u \le 0`; a positive coefficient takes the upper function and a negative
        one the lower for the upper bound (the other way round for the lower), down to
        :math:`A z + c` (:math:`A = \Lambda W^1`), concretized over the region. Each
        end is widened by :data:`HULL_TOLERANCE` x (1 + |value| + the scale of
        :math:`|A| |z|` and :math:`|c|`) against round-off."""
        first_lo, first_hi = (np.asarray(v, dtype=np.float64) for v in first)
        # _within zips with the one layer given, so within[:2] would read its first one only
        first_within = within[:1] if within else None  # pragma: no mutate (zip: as [:2])
        out: LayerBounds = _within([(first_lo, first_hi)], first_within)
        for k in range(1, len(self.layers)):
            prev_lo, prev_hi = out[-1]
            if self.layers[k - 1].relu:
                prev_lo, prev_hi = np.maximum(prev_lo, 0.0), np.maximum(prev_hi, 0.0)
            lo, hi = affine_bounds(self.layers[k].weight, self.layers[k].bias, prev_lo, prev_hi)
            (a_lo, c_lo), (a_up, c_up) = self._substitute(k, out)
            least, _ = concretize(a_lo)
            _, most = concretize(a_up)
            scale_lo = np.abs(c_lo) + np.maximum(np.abs(least), 1.0)
            scale_up = np.abs(c_up) + np.maximum(np.abs(most), 1.0)
            lo = np.maximum(lo, least + c_lo - HULL_TOLERANCE * scale_lo)
            hi = np.minimum(hi, most + c_up + HULL_TOLERANCE * scale_up)
            step = [(lo, np.maximum(hi, lo))]
            # as above: within[k:k + 2] would read layer k only
            cap = within[k:k + 1] if within else None  # pragma: no mutate (zip: as [k:k + 2])
            out += _within(step, cap)
        return out

    def _substitute(self, k: int, bounds: LayerBounds
                    ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """Linear lower and upper bounds ``(A, c)`` of layer ``k``'s pre-activations as
        functions ``A z + c`` of the inputs, through the ReLUs of the layers before it
        with their ``bounds`` (:meth:`back_substituted`)."""
        sides = []
        for upper in (False, True):
            a, c = self.layers[k].weight.copy(), self.layers[k].bias.copy()
            for i in range(k - 1, -1, -1):
                layer = self.layers[i]
                if layer.relu:
                    s_up, t_up, s_lo = _relu_relaxation(*bounds[i])
                    pos, neg = np.maximum(a, 0.0), np.minimum(a, 0.0)
                    if upper:
                        c = c + pos @ t_up
                        a = pos * s_up + neg * s_lo
                    else:
                        c = c + neg @ t_up
                        a = pos * s_lo + neg * s_up
                c = c + a @ layer.bias
                a = a @ layer.weight
            sides.append((a, c))
        return sides[0], sides[1]

    def shifted_bounds(self, Z: np.ndarray, delta: float,
                       output_scale: float = 1.0) -> LayerBounds:
        r"""Interval bounds, per row of ``Z``, of every layer's pre-activation over the
        model shift Δ of radius ``delta`` (module docstring), the output layer's weights
        and bias within ``output_scale`` x ``delta`` (a :meth:`contrast` :math:`c`
        shifts by :math:`\|c\|_1 \delta`); the last entry's lower end is a sound lower
        bound of the least logit over Δ.

        Returns one ``(lower, upper)`` pair of (n, width) arrays per layer.
        """
        Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
        radii = [delta] * (len(self.layers) - 1) + [output_scale * delta]
        first, *rest = self.layers
        centre = Z @ first.weight.T + first.bias
        radius = radii[0] * (np.abs(Z).sum(axis=1, keepdims=True) + 1.0)
        out = [(centre - radius, centre + radius)]
        for layer, r in zip(rest, radii[1:]):
            lo, hi = (np.maximum(v, 0.0) for v in out[-1])
            w, b = layer.weight, layer.bias
            a, c = w - r, w + r
            lower = lo @ np.maximum(a, 0).T + hi @ np.minimum(a, 0).T + b - r
            upper = hi @ np.maximum(c, 0).T + lo @ np.minimum(c, 0).T + b + r
            out.append((lower, upper))
        return out


def _relu_relaxation(lower: np.ndarray, upper: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per neuron with pre-activation bounds ``[lower, upper]``: the upper linear
    function ``s_up p + t_up`` and the lower one ``s_lo p`` enclosing its ReLU
    (:meth:`ReLUNetwork.back_substituted`)."""
    active = lower >= 0.0
    inactive = upper <= 0.0  # pragma: no mutate (u = 0 < -l: unstable gives 0, 0, 0 too)
    unstable = ~(active | inactive)
    width = np.where(unstable, upper - lower, 1.0)  # pragma: no mutate (1.0: unused, not 0)
    s_up = np.where(active, 1.0, np.where(unstable, upper / width, 0.0))
    t_up = np.where(unstable, -upper * lower / width, 0.0)
    s_lo = np.where(active | (unstable & (upper >= -lower)), 1.0, 0.0)
    return s_up, t_up, s_lo


def box_concretizer(lower: np.ndarray, upper: np.ndarray) -> Concretizer:
    """The :data:`Concretizer` of the box ``[lower, upper]``."""
    def concretize(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        least, most = affine_bounds(a, np.zeros(len(a)), lower, upper)
        return least, most
    return concretize


def _within(local: LayerBounds, within: LayerBounds | None) -> LayerBounds:
    """``local`` intersected layer by layer with ``within`` (when given); an empty
    intersection (numerics) keeps the lower end."""
    if within is None:
        return local
    return [(np.maximum(gl, ll), np.maximum(np.minimum(gu, lu), np.maximum(gl, ll)))
            for (gl, gu), (ll, lu) in zip(within, local)]
