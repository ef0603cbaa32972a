"""The network math of :mod:`cfopt.models.network` on tiny hand-built networks, without a
solver: the forward pass by hand, every bound against the extremes it must equal (a box's
or a polytope's vertices, the corners of a model shift, a brute-force enumeration of
sparse moves) or against a plain re-statement of its module docstring (interval
arithmetic in centre-radius form, the back-substitution neuron by neuron), and every
bound checked sound on sampled points."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from cfopt.errors import UnsupportedModelError
from cfopt.models.network import (
    HULL_TOLERANCE,
    DenseLayer,
    ReLUNetwork,
    _relu_relaxation,
    affine_bounds,
    box_concretizer,
)

TIGHT = {"rtol": 1e-12, "atol": 1e-12}


def net(seed: int, widths: tuple[int, ...] = (3, 4, 3, 2)) -> ReLUNetwork:
    """A random network of the given widths (input first), ReLU on its hidden layers."""
    rng = np.random.default_rng(seed)
    return ReLUNetwork.from_parameters([(rng.normal(size=(o, i)), rng.normal(size=o))
                                        for i, o in zip(widths, widths[1:])])


def with_affine_hidden_layer(seed: int) -> ReLUNetwork:
    """A network whose second layer has no ReLU (two dense layers in a row)."""
    layers = net(seed, (3, 5, 4, 4, 2)).layers
    return ReLUNetwork((layers[0], DenseLayer(layers[1].weight, layers[1].bias, relu=False),
                        *layers[2:]))


def corners(lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Every vertex of the box ``[lower, upper]``, one per row."""
    return np.array(list(itertools.product(*zip(lower, upper))), dtype=float)


def samples(lower: np.ndarray, upper: np.ndarray, n: int = 500) -> np.ndarray:
    """The box's vertices and ``n`` uniform points of it."""
    rng = np.random.default_rng(1)
    return np.vstack([corners(lower, upper), rng.uniform(lower, upper, (n, len(lower)))])


def intervals(network: ReLUNetwork, lo: np.ndarray, hi: np.ndarray
              ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Interval arithmetic from the first layer's bounds, in centre-radius form."""
    out = [(lo, hi)]
    for prev, layer in zip(network.layers, network.layers[1:]):
        if prev.relu:
            lo, hi = np.maximum(lo, 0), np.maximum(hi, 0)
        mid, rad = (lo + hi) / 2, (hi - lo) / 2
        centre, spread = layer.weight @ mid + layer.bias, np.abs(layer.weight) @ rad
        lo, hi = centre - spread, centre + spread
        out.append((lo, hi))
    return out


def assert_sound(bounds, pre_activations: list[np.ndarray], slack: float = 1e-9) -> None:
    for (lo, hi), values in zip(bounds, pre_activations, strict=True):
        assert (values >= lo - slack).all() and (values <= hi + slack).all()


# ------------------------------------------------------------------- layers
def test_affine_bounds_are_the_extremes_over_the_box():
    rng = np.random.default_rng(0)
    w, b = rng.normal(size=(4, 3)), rng.normal(size=4)
    lower, upper = np.array([-1.0, 0.5, -3.0]), np.array([2.0, 1.5, -1.0])
    values = corners(lower, upper) @ w.T + b
    lo, hi = affine_bounds(w, b, lower, upper)
    np.testing.assert_allclose(lo, values.min(axis=0), **TIGHT)
    np.testing.assert_allclose(hi, values.max(axis=0), **TIGHT)


def test_affine_bounds_with_infinite_ends():
    """An infinite end gives an infinite bound unless its weight is 0 (quietly: no
    warning of 0 x inf)."""
    w = np.array([[1.0, 0.0], [0.0, -2.0], [3.0, 1.0], [0.0, 1.0]])
    bias = np.array([0.5, 1.0, 0.0, 2.0])
    lower, upper = np.array([-np.inf, 1.0]), np.array([2.0, np.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi = affine_bounds(w, bias, lower, upper)
        np.testing.assert_array_equal(lo, [-np.inf, -np.inf, -np.inf, 3.0])
        np.testing.assert_array_equal(hi, [2.5, -1.0, np.inf, np.inf])
        lo, hi = affine_bounds(w, bias, np.array([-1.0, 1.0]), upper)  # lower ends finite
        np.testing.assert_array_equal(lo, [-0.5, -np.inf, -2.0, 3.0])
        np.testing.assert_array_equal(hi, [2.5, -1.0, np.inf, np.inf])


def test_dense_layers_and_networks_are_checked():
    layer = DenseLayer([[1, 2]], [[3]], relu=False)
    assert layer.weight.dtype == layer.bias.dtype == np.float64 and layer.bias.shape == (1,)
    assert layer.bias.tolist() == [3.0] and layer.weight.tolist() == [[1.0, 2.0]]
    with pytest.raises(ValueError, match=r"^dense layer shapes do not match: W \(2,\), b"):
        DenseLayer(np.ones(2), np.ones(1), relu=False)
    with pytest.raises(ValueError, match=r"^dense layer shapes do not match: W \(2, 3\), "
                                         r"b \(3,\)$"):
        DenseLayer(np.ones((2, 3)), np.ones(3), relu=False)
    with pytest.raises(ValueError, match="^a network needs at least one layer$"):
        ReLUNetwork(())
    with pytest.raises(ValueError, match=r"^layer widths do not chain: \(3, 2\) then "
                                         r"\(1, 2\)$"):
        ReLUNetwork.from_parameters([(np.ones((3, 2)), np.ones(3)),
                                     (np.ones((1, 2)), np.ones(1))])
    with pytest.raises(ValueError, match=r"^the output layer must be affine \(logits\), "
                                         r"not ReLU$"):
        ReLUNetwork((DenseLayer(np.ones((1, 2)), np.ones(1), relu=True),))
    for bad in (np.nan, np.inf):
        with pytest.raises(UnsupportedModelError, match="^dense layer 1 has non-finite"):
            ReLUNetwork.from_parameters([(np.ones((2, 2)), np.ones(2)),
                                         (np.array([[1.0, bad]]), np.ones(1))])
        with pytest.raises(UnsupportedModelError, match="^dense layer 0 has non-finite"):
            ReLUNetwork.from_parameters([(np.ones((1, 2)), np.array([bad]))])


def test_a_network_from_its_parameters():
    params = [(np.ones((3, 2)), np.zeros(3)), (np.ones((4, 3)), np.zeros(4)),
              (np.ones((1, 4)), np.zeros(1))]
    network = ReLUNetwork.from_parameters(params)
    assert [layer.relu for layer in network.layers] == [True, True, False]
    as_list = ReLUNetwork(list(network.layers))  # kept as a tuple: the caller's list may change
    assert isinstance(as_list.layers, tuple) and as_list.layers == network.layers
    assert (network.n_inputs, network.n_outputs, network.is_linear) == (2, 1, False)
    assert all(w is layer.weight and b is layer.bias
               for (w, b), layer in zip(network.parameters, network.layers, strict=True))
    linear = ReLUNetwork.from_parameters(params[-1:])
    assert linear.is_linear and not linear.layers[0].relu and linear.n_inputs == 4


def test_the_key_is_a_fingerprint_of_every_weight_and_bias():
    keys = {net(0).key(), net(0).key()}
    assert len(keys) == 1
    params = net(0).parameters
    for k in range(len(params)):
        for which in (0, 1):
            changed = [list(p) for p in params]
            changed[k][which] = changed[k][which] + 1e-9
            keys.add(ReLUNetwork.from_parameters([tuple(p) for p in changed]).key())
    assert len(keys) == 1 + 2 * len(params)


# ------------------------------------------------------------- forward pass
HAND = ReLUNetwork.from_parameters([(np.array([[1.0, -1.0], [2.0, 0.0]]),
                                     np.array([0.0, -1.0])),
                                    (np.array([[1.0, 1.0], [0.0, -1.0]]),
                                     np.array([0.5, 0.0]))])


def test_the_forward_pass_by_hand():
    Z = [[1, 2], [1, 0]]
    first, logits = HAND.pre_activations(Z)
    np.testing.assert_array_equal(first, [[-1.0, 1.0], [1.0, 1.0]])
    np.testing.assert_array_equal(logits, [[1.5, -1.0], [2.5, -1.0]])
    assert logits.dtype == np.float64
    np.testing.assert_array_equal(HAND.logits(Z), logits)
    np.testing.assert_array_equal(HAND.margin_scores(Z), logits)


def test_a_contrast_of_the_logits():
    network = net(2, (2, 3, 3))
    Z = np.random.default_rng(3).normal(size=(5, 2))
    logits = network.logits(Z)
    contrast = network.contrast([1.0, 0.0, -1.0])
    assert contrast.n_outputs == 1 and len(contrast.layers) == len(network.layers)
    np.testing.assert_allclose(contrast.logits(Z)[:, 0], logits[:, 0] - logits[:, 2], **TIGHT)
    np.testing.assert_allclose(net(2, (2, 1)).contrast([-2.0]).logits(Z),
                               -2 * net(2, (2, 1)).logits(Z), **TIGHT)
    with pytest.raises(ValueError, match="^a contrast of 3 logits needs as many "
                                         "coefficients, got 2$"):
        network.contrast([1.0, -1.0])


def test_dead_neurons_are_dropped():
    """A neuron whose upper bound is ≤ 0 (0 included) goes; the logits do not change."""
    (w, b), *rest = net(4, (2, 4, 3, 2)).parameters
    b = b.copy()
    b[1:3] = -100.0  # neurons 1 and 2 never active over the box, 0 and 3 sometimes
    b[[0, 3]] = 1.0
    network = ReLUNetwork.from_parameters([(w, b), *rest])
    lower, upper = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
    bounds = network.box_bounds(lower, upper)
    assert bounds[0][1][[0, 3]].min() > 0
    bounds[0] = (bounds[0][0], np.array([0.5, 0.0, -2.0, bounds[0][1][3]]))  # 0: dead
    bounds[1] = (bounds[1][0], np.abs(bounds[1][1]) + 1.0)  # looser, all alive
    pruned, kept = network.without_dead_neurons(bounds)
    assert [layer.weight.shape for layer in pruned.layers] == [(2, 2), (3, 2), (2, 3)]
    assert [layer.relu for layer in pruned.layers] == [True, True, False]
    np.testing.assert_array_equal(pruned.layers[0].weight, network.layers[0].weight[[0, 3]])
    np.testing.assert_array_equal(pruned.layers[0].bias, network.layers[0].bias[[0, 3]])
    np.testing.assert_array_equal(pruned.layers[1].weight,
                                  network.layers[1].weight[:, [0, 3]])
    np.testing.assert_array_equal(pruned.layers[1].bias, network.layers[1].bias)
    for k, alive in ((0, [0, 3]), (1, slice(None)), (2, slice(None))):
        np.testing.assert_array_equal(kept[k][0], bounds[k][0][alive])
        np.testing.assert_array_equal(kept[k][1], bounds[k][1][alive])
    points = samples(lower, upper)
    np.testing.assert_allclose(pruned.logits(points), network.logits(points), **TIGHT)


def test_a_layer_of_dead_neurons_keeps_its_least_dead():
    network = net(5, (2, 3, 2, 1))
    bounds = [(np.full(3, -9.0), np.array([-3.0, -1.0, -2.0])),
              (np.full(2, -9.0), np.array([-1.0, 0.5])), (np.zeros(1), np.ones(1))]
    pruned, kept = network.without_dead_neurons(bounds)
    np.testing.assert_array_equal(pruned.layers[0].weight, network.layers[0].weight[[1]])
    np.testing.assert_array_equal(pruned.layers[1].weight,
                                  network.layers[1].weight[[1]][:, [1]])
    np.testing.assert_array_equal(pruned.layers[2].weight, network.layers[2].weight[:, [1]])
    np.testing.assert_array_equal(kept[0][1], [-1.0])
    with pytest.raises(ValueError, match="^bounds for 2 layers, the network has 3$"):
        network.without_dead_neurons(bounds[:2])


# ------------------------------------------------------------------- bounds
BOX = (np.array([-1.0, 0.0, -2.0]), np.array([1.0, 0.5, 3.0]))


@pytest.mark.parametrize("network", [net(0), net(1), with_affine_hidden_layer(2)],
                         ids=range(3))
def test_box_bounds_are_interval_arithmetic(network):
    bounds = network.box_bounds(*BOX)
    points = samples(*BOX)
    exact = network.pre_activations(corners(*BOX))[0]
    np.testing.assert_allclose(bounds[0][0], exact.min(axis=0), **TIGHT)
    np.testing.assert_allclose(bounds[0][1], exact.max(axis=0), **TIGHT)
    for (lo, hi), (rlo, rhi) in zip(bounds, intervals(network, *bounds[0]), strict=True):
        np.testing.assert_allclose(lo, rlo, **TIGHT)
        np.testing.assert_allclose(hi, rhi, **TIGHT)
    assert_sound(bounds, network.pre_activations(points))
    np.testing.assert_allclose(network.propagate_bounds(*bounds[0])[-1], bounds[-1], **TIGHT)


def test_box_bounds_within_others():
    """Intersected layer by layer; an empty intersection keeps the lower end."""
    network = net(0)
    local = network.box_bounds(*BOX)
    within = [(lo + 0.25 * (hi - lo), hi - 0.25 * (hi - lo)) for lo, hi in local]
    within[1] = (local[1][0] - 1.0, local[1][1] + 1.0)
    out = network.box_bounds(*BOX, within=within)
    for k in (0, 2):
        np.testing.assert_allclose(out[k], within[k], **TIGHT)
    np.testing.assert_allclose(out[1], local[1], **TIGHT)
    apart = [(hi + 1.0, hi + 2.0) for lo, hi in local]
    for (lo, hi), (alo, _) in zip(network.box_bounds(*BOX, within=apart), apart, strict=True):
        np.testing.assert_array_equal(lo, alo)
        np.testing.assert_array_equal(hi, alo)
    below = [(lo - 2.0, lo - 1.0) for lo, hi in local]
    for (lo, hi), (llo, _) in zip(network.box_bounds(*BOX, within=below), local, strict=True):
        np.testing.assert_array_equal(lo, llo)
        np.testing.assert_array_equal(hi, llo)


@pytest.mark.parametrize("scale", [0.5, 4.0])  # points within and beyond [-1, 1]
def test_box_bounds_over_a_hull(scale):
    """The first layer within the hull's extreme values, widened by the tolerance."""
    network = net(1)
    rng = np.random.default_rng(6)
    lower, upper = np.full(3, -5.0), np.full(3, 5.0)
    hull = scale * rng.uniform(-1, 1, (6, 3))
    first = network.layers[0]
    values = hull @ first.weight.T + first.bias
    slack = HULL_TOLERANCE * (1 + np.abs(values).max(axis=0) + np.abs(first.weight).sum(axis=1)
                              * max(np.abs(hull).max(), 1.0))
    bounds = network.box_bounds(lower, upper, hull=hull)
    np.testing.assert_allclose(bounds[0][0], values.min(axis=0) - slack, **TIGHT)
    np.testing.assert_allclose(bounds[0][1], values.max(axis=0) + slack, **TIGHT)
    for (lo, hi), (rlo, rhi) in zip(bounds, intervals(network, *bounds[0]), strict=True):
        np.testing.assert_allclose(lo, rlo, **TIGHT)
        np.testing.assert_allclose(hi, rhi, **TIGHT)
    one = network.box_bounds(lower, upper, hull=hull[0])  # one point: a 1-d array
    np.testing.assert_allclose(one[0][1] - one[0][0], 2 * HULL_TOLERANCE * (
        1 + np.abs(values[0]) + np.abs(first.weight).sum(axis=1)
        * max(np.abs(hull[0]).max(), 1.0)), rtol=1e-9)


def test_box_bounds_keep_the_box_where_it_is_tighter_than_the_hull():
    network = net(1)
    box = network.box_bounds(*BOX)
    hull = corners(np.full(3, -9.0), np.full(3, 9.0))
    np.testing.assert_allclose(network.box_bounds(*BOX, hull=hull)[0], box[0], **TIGHT)
    # no common point: above the box's range, or (neuron 0, 2) below it
    beyond = network.box_bounds(*BOX, hull=np.array([[100.0, -100.0, 100.0]]))
    np.testing.assert_array_equal(beyond[0][1], beyond[0][0])
    np.testing.assert_array_equal(beyond[0][0][:3], box[0][0][:3])
    assert beyond[0][0][3] > box[0][1][3]


def sparse_reference(network: ReLUNetwork, base, moves, most):
    """The first layer's extremes over every choice of at most ``most`` groups moved,
    each to one of its options (a linear function's extremes over the hulls)."""
    first = network.layers[0]
    choices = [[None, *np.atleast_2d(options)] for _, options in moves]
    values = []
    for pick in itertools.product(*choices):
        if sum(p is not None for p in pick) > most:
            continue
        z = np.array(base, dtype=float)
        for (inputs, _), p in zip(moves, pick):
            if p is not None:
                z[inputs] = p
        values.append(first.weight @ z + first.bias)
    values = np.array(values)
    return values.min(axis=0), values.max(axis=0)


@pytest.mark.parametrize("most", [0, 1, 1.5, 2, np.inf])
def test_sparse_bounds_are_exact_on_the_first_layer(most):
    network = net(7, (5, 3, 2))
    base = np.array([0.5, 0.0, 1.0, 0.0, 2.0])
    moves = [(slice(0, 1), np.array([[-1.0], [3.0]])),
             (slice(1, 4), np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])),
             (slice(4, 5), np.array([[0.0], [1.0]]))]  # down only: each neuron one way
    lo, hi = sparse_reference(network, base, moves, most)
    bounds = network.sparse_bounds(base, moves, most)
    np.testing.assert_allclose(bounds[0][0], lo - HULL_TOLERANCE * (1 + np.abs(lo)), **TIGHT)
    np.testing.assert_allclose(bounds[0][1], hi + HULL_TOLERANCE * (1 + np.abs(hi)), **TIGHT)
    for (blo, bhi), (rlo, rhi) in zip(bounds, intervals(network, *bounds[0]), strict=True):
        np.testing.assert_allclose(blo, rlo, **TIGHT)
        np.testing.assert_allclose(bhi, rhi, **TIGHT)
    within = [(lo + 0.25 * (hi - lo), hi - 0.25 * (hi - lo)) for lo, hi in bounds]
    np.testing.assert_allclose(network.sparse_bounds(base, moves, most, within=within)[1],
                               within[1], **TIGHT)


def test_sparse_bounds_take_any_array_like():
    """A list as the base point, positions as an index array: the same bounds."""
    network = net(7, (5, 3, 2))
    base = [0.5, 0.0, 1.0, 0.0, 2.0]
    options = np.array([[1.0, 3.0], [-1.0, 0.0]])
    by_slice = network.sparse_bounds(np.array(base), [(slice(1, 3), options)], 1)
    by_index = network.sparse_bounds(base, [(np.array([1, 2]), options)], 1)
    for (lo, hi), (ilo, ihi) in zip(by_slice, by_index, strict=True):
        np.testing.assert_array_equal(lo, ilo)
        np.testing.assert_array_equal(hi, ihi)


def test_sparse_bounds_without_moves_are_the_base_point():
    network = net(7, (5, 3, 2))
    base = np.arange(5.0)
    centre = network.pre_activations(base[None])[0][0]
    lo, hi = network.sparse_bounds(base, [], np.inf)[0]
    np.testing.assert_allclose(lo, centre - HULL_TOLERANCE * (1 + np.abs(centre)), **TIGHT)
    np.testing.assert_allclose(hi, centre + HULL_TOLERANCE * (1 + np.abs(centre)), **TIGHT)


def relaxation(lo: float, hi: float) -> tuple[float, float, float]:
    """The linear functions enclosing a ReLU of input in ``[lo, hi]`` (s_up, t_up, s_lo):
    ``relu(p) <= s_up p + t_up`` and ``relu(p) >= s_lo p`` over the interval."""
    if lo >= 0:
        return 1.0, 0.0, 1.0
    if hi <= 0:
        return 0.0, 0.0, 0.0
    s = hi / (hi - lo)
    return s, -s * lo, 1.0 if hi >= -lo else 0.0


def back_reference(network: ReLUNetwork, first, lower, upper, within=None):
    """:meth:`ReLUNetwork.back_substituted` over the box, neuron by neuron."""
    def cut(k, j, lo, hi):
        if within is None:
            return lo, hi
        lo = max(lo, within[k][0][j])
        return lo, max(min(hi, within[k][1][j]), lo)

    layers = network.layers
    out = []
    for j in range(len(first[0])):
        if within is None:
            out.append((float(first[0][j]), float(first[1][j])))
        else:
            out.append(cut(0, j, float(first[0][j]), float(first[1][j])))
    out = [tuple(np.array(v) for v in zip(*out))]
    for k in range(1, len(layers)):
        prev_lo, prev_hi = out[-1]
        if layers[k - 1].relu:
            prev_lo, prev_hi = np.maximum(prev_lo, 0), np.maximum(prev_hi, 0)
        rows = []
        for j in range(layers[k].weight.shape[0]):
            w = layers[k].weight[j]
            mid, rad = (prev_lo + prev_hi) / 2, (prev_hi - prev_lo) / 2
            lo = w @ mid + layers[k].bias[j] - np.abs(w) @ rad
            hi = w @ mid + layers[k].bias[j] + np.abs(w) @ rad
            ends = []
            for side in (-1, 1):  # the lower bound's linear function, then the upper's
                a, c = w.copy(), float(layers[k].bias[j])
                for i in range(k - 1, -1, -1):
                    if layers[i].relu:
                        for m in range(len(a)):
                            s_up, t_up, s_lo = relaxation(out[i][0][m], out[i][1][m])
                            if a[m] * side > 0:  # pushes the bound outward: the upper one
                                c += a[m] * t_up
                                a[m] *= s_up
                            else:
                                a[m] *= s_lo
                    c += a @ layers[i].bias
                    a = a @ layers[i].weight
                z = np.where(a * side > 0, upper, lower)
                ends.append((float(a @ z), c))
            (least, c_lo), (most, c_up) = ends
            lo = max(lo, least + c_lo - HULL_TOLERANCE * (abs(c_lo) + max(abs(least), 1)))
            hi = min(hi, most + c_up + HULL_TOLERANCE * (abs(c_up) + max(abs(most), 1)))
            hi = max(hi, lo)
            rows.append(cut(k, j, lo, hi))
        out.append(tuple(np.array(v) for v in zip(*rows)))
    return out


@pytest.mark.parametrize("network", [net(0, (3, 5, 4, 4, 2)), net(1, (3, 5, 4, 4, 2)),
                                     net(2, (3, 5, 4, 4, 2)), net(3, (3, 5, 4, 4, 2)),
                                     with_affine_hidden_layer(4)], ids=range(5))
def test_back_substituted_bounds(network):
    """Sound, never looser than interval arithmetic, and as the docstring states them."""
    lower, upper = BOX
    first = network.box_bounds(lower, upper)[0]
    bounds = network.back_substituted(first, box_concretizer(lower, upper))
    assert_sound(bounds, network.pre_activations(samples(lower, upper)))
    for (lo, hi), (rlo, rhi) in zip(bounds, network.box_bounds(lower, upper), strict=True):
        assert (lo >= rlo - 1e-9).all() and (hi <= rhi + 1e-9).all()
    for (lo, hi), (rlo, rhi) in zip(bounds, back_reference(network, first, lower, upper),
                                    strict=True):
        np.testing.assert_allclose(lo, rlo, **TIGHT)
        np.testing.assert_allclose(hi, rhi, **TIGHT)
    local = network.back_substituted(first, box_concretizer(lower, upper))
    within = [(lo + 0.3 * (hi - lo), hi - 0.2 * (hi - lo)) for lo, hi in local]
    within[1] = (within[1][0] + 10.0, within[1][1] + 10.0)  # an empty intersection
    bounds = network.back_substituted(first, box_concretizer(lower, upper), within=within)
    for (lo, hi), (rlo, rhi) in zip(
            bounds, back_reference(network, first, lower, upper, within), strict=True):
        np.testing.assert_allclose(lo, rlo, **TIGHT)
        np.testing.assert_allclose(hi, rhi, **TIGHT)


def test_back_substitution_of_an_absolute_value():
    """|z| = relu(z) + relu(-z) over [-1, 1]: the linear bounds give [0, 1] (exact; the
    intervals give [0, 2]), the upper end widened by 1e-6 x (1 + 1)."""
    network = ReLUNetwork.from_parameters([(np.array([[1.0], [-1.0]]), np.zeros(2)),
                                           (np.array([[1.0, 1.0]]), np.zeros(1))])
    lower, upper = np.array([-1.0]), np.array([1.0])
    first = network.box_bounds(lower, upper)[0]
    (lo, hi), = network.back_substituted(first, box_concretizer(lower, upper))[1:]
    np.testing.assert_array_equal(lo, [0.0])
    np.testing.assert_allclose(hi, [1.0 + 2 * HULL_TOLERANCE], **TIGHT)
    assert network.box_bounds(lower, upper)[1][1][0] == 2.0


@pytest.mark.parametrize("lower, upper, expected", [
    (0.5, 2.0, (1.0, 0.0, 1.0)),  # active: relu(p) = p
    (0.0, 0.0, (1.0, 0.0, 1.0)),  # fixed at 0: active too ("p when l >= 0")
    (-2.0, -1.0, (0.0, 0.0, 0.0)),  # inactive: 0
    (-1.0, 3.0, (0.75, 0.75, 1.0)),  # unstable, u >= -l: alpha = 1
    (-1.0, 1.0, (0.5, 0.5, 1.0)),  # u = -l: alpha = 1
    (-3.0, 1.0, (0.25, 0.75, 0.0)),  # u < -l: alpha = 0
])
def test_the_relu_relaxation(lower, upper, expected):
    """relu(p) <= s_up p + t_up (the chord from (l, relu(l)) to (u, relu(u))) and
    relu(p) >= s_lo p over [l, u]."""
    s_up, t_up, s_lo = (float(v[0]) for v in _relu_relaxation(np.array([lower]),
                                                                np.array([upper])))
    assert (s_up, t_up, s_lo) == expected
    p = np.linspace(lower, upper, 11)
    assert (np.maximum(p, 0) <= s_up * p + t_up + 1e-12).all()
    assert (np.maximum(p, 0) >= s_lo * p - 1e-12).all()
    for end in (lower, upper):
        assert s_up * end + t_up == pytest.approx(max(end, 0.0), abs=1e-12)


def test_back_substitution_takes_the_lower_relaxation_alpha():
    """relu(z) - relu(z + 5) + 5 = relu(z) - z over z in [-1, 1] (u = -l for relu(z)):
    at least 0 with relu(z) >= z (alpha = 1); intervals and alpha = 0 give -1."""
    network = ReLUNetwork.from_parameters([(np.array([[1.0], [1.0]]), np.array([0.0, 5.0])),
                                           (np.array([[1.0, -1.0]]), np.array([5.0]))])
    lower, upper = np.array([-1.0]), np.array([1.0])
    first = network.box_bounds(lower, upper)[0]
    (lo, hi), = network.back_substituted(first, box_concretizer(lower, upper))[1:]
    assert network.box_bounds(lower, upper)[1][0][0] == -1.0
    assert -1e-5 < lo[0] <= 0.0 and hi[0] == pytest.approx(1.0, abs=1e-5)


def test_results_are_float64_whatever_the_inputs():
    """Integer lists and object arrays (e.g. a mixed DataFrame's values) in, float64
    out: an object array of bounds would break np.isfinite downstream."""
    network = net(0, (2, 3, 2))
    box = box_concretizer(np.array([-1.0, -1.0]), np.array([1.0, 1.0]))
    for kind in (int, object):
        Z = np.array([[1, 2]], dtype=kind)
        first = (np.array([0, 1, 0], dtype=kind), np.array([2, 3, 1], dtype=kind))
        moves = [(slice(0, 1), np.array([[1], [3]], dtype=kind))]
        layers = [*network.shifted_bounds(Z, 0.1), *network.propagate_bounds(*first),
                  *network.back_substituted(first, box),
                  *network.sparse_bounds(np.array([0, 1], dtype=kind), moves, 1)]
        assert all(v.dtype == np.float64 for v in network.pre_activations(Z))
        assert all(lo.dtype == hi.dtype == np.float64 for lo, hi in layers)


def test_box_concretizer():
    lower, upper = np.array([-1.0, 2.0]), np.array([1.0, 3.0])
    least, most = box_concretizer(lower, upper)(np.array([[1.0, -1.0], [0.0, 2.0]]))
    np.testing.assert_array_equal(least, [-4.0, 4.0])
    np.testing.assert_array_equal(most, [-1.0, 6.0])


# ------------------------------------------------------------- model shift
def shifted_corners(network: ReLUNetwork, Z: np.ndarray, delta: float, output_scale: float):
    """Every pre-activation at every corner of the model shift (each weight and bias at
    ± its radius): over a two-layer network, the least and the greatest are the bounds."""
    params = network.parameters
    radii = [delta] * (len(params) - 1) + [output_scale * delta]
    sizes = [w.size + b.size for w, b in params]
    out = []
    for signs in itertools.product((-1.0, 1.0), repeat=sum(sizes)):
        signs, layers = np.array(signs), []
        for (w, b), r, n in zip(params, radii, sizes, strict=True):
            s, signs = signs[:n], signs[n:]
            layers.append((w + r * s[:w.size].reshape(w.shape), b + r * s[w.size:]))
        out.append(ReLUNetwork.from_parameters(layers).pre_activations(Z))
    return [np.array([o[k] for o in out]) for k in range(len(params))]


@pytest.mark.parametrize("output_scale", [None, 2.5])  # None: the default, 1
def test_shifted_bounds_are_the_extremes_over_the_shift(output_scale):
    network = ReLUNetwork.from_parameters([(np.array([[1.0, -2.0], [0.5, 1.0]]),
                                            np.array([0.2, -0.1])),
                                           (np.array([[1.5, -1.0]]), np.array([0.3]))])
    Z = np.array([[1.0, -0.5], [0.0, 0.0], [-2.0, 1.0]])
    delta = 0.2
    if output_scale is None:
        bounds = network.shifted_bounds(Z, delta)
        values = shifted_corners(network, Z, delta, 1.0)
    else:
        bounds = network.shifted_bounds(Z, delta, output_scale)
        values = shifted_corners(network, Z, delta, output_scale)
    for (lo, hi), v in zip(bounds, values, strict=True):
        assert lo.shape == hi.shape == v.shape[1:]
        np.testing.assert_allclose(lo, v.min(axis=0), **TIGHT)
        np.testing.assert_allclose(hi, v.max(axis=0), **TIGHT)


def test_shifted_bounds_of_a_deeper_network():
    network = net(8, (2, 3, 2, 2))
    Z = np.array([0.5, -1.0])  # one row, as a 1-d array
    bounds = network.shifted_bounds(Z, 0.0)
    for (lo, hi), exact in zip(bounds, network.pre_activations(Z[None]), strict=True):
        np.testing.assert_allclose(lo, exact, **TIGHT)
        np.testing.assert_allclose(hi, exact, **TIGHT)
    bounds = network.shifted_bounds(Z, 0.05, output_scale=2.0)
    rng = np.random.default_rng(9)
    for _ in range(200):
        shifted = [(w + rng.choice([-1, 1], w.shape) * r, b + rng.choice([-1, 1], b.shape) * r)
                   for (w, b), r in zip(network.parameters, (0.05, 0.05, 0.1), strict=True)]
        assert_sound(bounds, ReLUNetwork.from_parameters(shifted).pre_activations(Z[None]))
