"""Every supported predictor: the MILP encoding reproduces the real model (get_error),
parsing errors are precise, and random MLPs (hypothesis) encode exactly."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.svm import SVC, LinearSVC

import cfopt
from cfopt.errors import UnsupportedModelError

from .conftest import export_onnx, train_torch

N_POINTS = 1000
D = 6


def data(n_classes: int = 2, seed: int = 0):
    X, y = make_classification(n_samples=300, n_features=D, n_informative=4,
                               n_classes=n_classes, n_clusters_per_class=1, random_state=seed)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return X, y


def embed(model, n_inputs: int = D):
    m = pyo.ConcreteModel()
    return cfopt.formulations.add_predictor(m, model, input_bounds=[(0.0, 1.0)] * n_inputs)


def points(n_inputs: int = D, n: int = N_POINTS, seed: int = 1):
    return np.random.default_rng(seed).random((n, n_inputs))


def _torch(n_classes, final=None):
    X, y = data(n_classes)
    return train_torch(X, y, hidden=(12, 8), n_classes=n_classes, epochs=60, final=final)


MODELS = {
    "torch-binary": lambda: _torch(2),
    "torch-binary-sigmoid": lambda: _torch(2, torch.nn.Sigmoid()),
    "torch-3class": lambda: _torch(3),
    "torch-3class-softmax": lambda: _torch(3, torch.nn.Softmax(dim=1)),
    "sklearn-mlp-binary": lambda: MLPClassifier((10, 6), max_iter=300, random_state=0).fit(*data(2)),
    "sklearn-mlp-3class": lambda: MLPClassifier((10,), max_iter=300, random_state=0).fit(*data(3)),
    "logistic-binary": lambda: LogisticRegression().fit(*data(2)),
    "logistic-3class": lambda: LogisticRegression().fit(*data(3)),
    "linearsvc-binary": lambda: LinearSVC().fit(*data(2)),
    "linearsvc-3class": lambda: LinearSVC().fit(*data(3)),
    "svc-linear-binary": lambda: SVC(kernel="linear").fit(*data(2)),
    "sgd-binary": lambda: SGDClassifier(random_state=0).fit(*data(2)),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_get_error_on_1000_points(name):
    model = MODELS[name]()
    predictor = embed(model)
    assert predictor.get_error(points()) <= 1e-6


@pytest.mark.parametrize("name", list(MODELS))
def test_decision_rule_matches_predict(name):
    """The adapter's decision rule on float64 logits agrees with the real predict."""
    model = MODELS[name]()
    adapter = cfopt.models.parse_model(model)
    Z = points(n=2000, seed=3)
    logits = adapter.structure.logits(Z)
    idx = cfopt.models.decide(logits, adapter.decision)
    # points within float32 rounding of a tie may legitimately differ
    if adapter.decision == "sign":
        clear = np.abs(logits[:, 0]) > 1e-4
    else:
        top2 = np.sort(logits, axis=1)[:, -2:]
        clear = (top2[:, 1] - top2[:, 0]) > 1e-4
    predicted = adapter.predict(Z)
    assert (np.asarray(adapter.classes)[idx][clear] == predicted[clear]).all()


@pytest.mark.parametrize("n_classes, dynamic", [(2, True), (3, True), (2, False)])
def test_onnx_get_error_on_1000_points(tmp_path, n_classes, dynamic):
    net = _torch(n_classes)
    path = export_onnx(net, D, tmp_path / "m.onnx", dynamic=dynamic)
    predictor = embed(str(path))
    assert predictor.get_error(points()) <= 1e-6
    Z = points(n=200, seed=5)
    with torch.no_grad():
        out = net(torch.tensor(Z, dtype=torch.float32)).numpy()
    expected = (out[:, 0] > 0).astype(int) if n_classes == 2 else out.argmax(1)
    np.testing.assert_array_equal(predictor.adapter.predict(Z), expected)


def test_onnx_matmul_add_graph(tmp_path):
    """A hand-written MatMul + Add + Relu graph (the form Keras/tf2onnx produce)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1, b1 = rng.normal(size=(D, 5)), rng.normal(size=5)
    w2, b2 = rng.normal(size=(5, 1)), rng.normal(size=1)
    inits = [numpy_helper.from_array(a.astype(np.float32), n)
             for a, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["o"]),
             helper.make_node("Add", ["o", "b2"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["n", D])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, ["n", 1])], inits)
    model = helper.make_model(graph)
    predictor = embed(model)
    assert predictor.get_error(points(n=300)) <= 1e-6


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(widths=st.lists(st.integers(1, 12), min_size=1, max_size=3),
       n_out=st.sampled_from([1, 2, 4]), seed=st.integers(0, 10_000))
def test_random_mlps_encode_exactly(widths, n_out, seed):
    torch.manual_seed(seed)
    layers, width = [], D
    for w in widths:
        layers += [torch.nn.Linear(width, w), torch.nn.ReLU()]
        width = w
    net = torch.nn.Sequential(*layers, torch.nn.Linear(width, n_out))
    assert embed(net).get_error(points(n=40, seed=seed)) <= 1e-6


@pytest.mark.parametrize("model, message", [
    (torch.nn.Sequential(torch.nn.Linear(D, 4), torch.nn.Sigmoid(), torch.nn.Linear(4, 1)),
     r"torch layer 1 \(Sigmoid\) is not supported as a hidden layer"),
    (torch.nn.Sequential(torch.nn.Linear(D, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)),
     r"torch layer 1 \(Tanh\)"),
    (torch.nn.Sequential(torch.nn.Linear(D, 4), torch.nn.ReLU()), r"ends with ReLU"),
    (torch.nn.Linear(D, 1), r"unsupported model type torch.nn.modules.linear.Linear.*nn.Sequential"),
    (KNeighborsClassifier(), r"unsupported model type .*KNeighborsClassifier"),
])
def test_unsupported_models_are_named(model, message):
    with pytest.raises(UnsupportedModelError, match=message):
        cfopt.models.parse_model(model)


def test_unsupported_sklearn_variants():
    X, y = data(3)
    with pytest.raises(UnsupportedModelError, match=r"activation='tanh'"):
        cfopt.models.parse_model(MLPClassifier((4,), activation="tanh", max_iter=50).fit(X, y))
    with pytest.raises(UnsupportedModelError, match=r"kernel='rbf'"):
        cfopt.models.parse_model(SVC().fit(X, y))
    with pytest.raises(UnsupportedModelError, match="one-vs-one voting"):
        cfopt.models.parse_model(SVC(kernel="linear").fit(X, y))
    with pytest.raises(UnsupportedModelError, match="LogisticRegression is not fitted"):
        cfopt.models.parse_model(LogisticRegression())


def test_onnx_errors(tmp_path):
    bogus = tmp_path / "bogus.onnx"
    bogus.write_bytes(b"this is not a protobuf model at all")
    with pytest.raises(UnsupportedModelError, match="is not an ONNX model"):
        cfopt.models.parse_model(str(bogus))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        cfopt.models.parse_model(str(tmp_path / "missing.onnx"))
    net = torch.nn.Sequential(torch.nn.Linear(D, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    path = export_onnx(net, D, tmp_path / "tanh.onnx")
    with pytest.raises(UnsupportedModelError, match=r"\(Tanh\) is not supported"):
        cfopt.models.parse_model(str(path))


def test_get_error_rejects_points_outside_box():
    predictor = embed(MODELS["logistic-binary"]())
    with pytest.raises(ValueError, match="outside the block's input bounds"):
        predictor.get_error(np.full((1, D), 2.0))


def test_add_predictor_checks_inputs():
    m = pyo.ConcreteModel()
    m.v = pyo.Var(range(3), bounds=(0, 1))
    with pytest.raises(ValueError, match="takes 6 inputs, but 3 were given"):
        cfopt.formulations.add_predictor(m, MODELS["logistic-binary"](), [m.v[i] for i in range(3)])
    m.u = pyo.Var(range(D))
    with pytest.raises(ValueError, match="model input 0 has no finite bounds"):
        cfopt.formulations.add_predictor(m, MODELS["logistic-binary"](), [m.u[i] for i in range(D)])


def test_set_input_box_sets_a_networks_layer_bounds():
    """A network's layer bounds become interval arithmetic over the sub-box (the encoding
    stays exact inside it); encodings without layer bounds (linear, trees) keep theirs."""
    lo, hi = np.full(D, 0.25), np.full(D, 0.5)
    predictor = embed(MODELS["torch-binary"]())
    expected = predictor.adapter.structure.box_bounds(lo, hi)
    stable = predictor.set_input_box(lo, hi)
    for (lb, ub), (elb, eub) in zip(predictor.layer_bounds(), expected):
        np.testing.assert_allclose(lb, elb, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(ub, eub, rtol=1e-9, atol=1e-9)
    assert stable == sum(int(((elb >= 0) | (eub <= 0)).sum())
                         for (elb, eub), layer in zip(expected, predictor.adapter.structure.layers)
                         if layer.relu)
    assert predictor.get_error(lo + (hi - lo) * points(n=50)) <= 1e-6
    forest = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(*data(2))
    for model in (MODELS["logistic-binary"](), forest):
        predictor = embed(model)
        before = predictor.output_bounds()
        assert predictor.set_input_box(lo, hi) == 0
        assert predictor.output_bounds() == before


def test_bounds_over_a_hull_hold_every_point_of_it_and_tighten_the_box():
    """With the vertices of a polytope that holds the inputs (PROPLACE's plausible
    region), the first layer's bounds are the vertices' extremes (exact over the hull,
    up to the tolerance), every layer's bounds hold at sampled points of the hull, and
    they are tighter than the box's."""
    net = cfopt.models.ReLUNetwork.from_parameters(
        [(w.detach().numpy().astype(np.float64), b.detach().numpy().astype(np.float64))
         for w, b in ((m.weight, m.bias) for m in train_torch(*data(2), hidden=(12, 8),
                                                               epochs=50)
                      if isinstance(m, torch.nn.Linear))])
    rng = np.random.default_rng(0)
    vertices = rng.uniform(0.3, 0.7, (5, D))
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    box = net.box_bounds(lo, hi)
    bounds = net.box_bounds(lo, hi, hull=vertices)
    first = vertices @ net.layers[0].weight.T + net.layers[0].bias
    np.testing.assert_allclose(bounds[0][0], first.min(axis=0), atol=1e-4)
    np.testing.assert_allclose(bounds[0][1], first.max(axis=0), atol=1e-4)
    inside = rng.dirichlet(np.ones(len(vertices)), 2000) @ vertices
    for (lb, ub), (blb, bub), values in zip(bounds, box, net.pre_activations(inside)):
        assert (values >= lb).all() and (values <= ub).all()
        assert (lb >= blb).all() and (ub <= bub).all()
    assert sum((ub - lb).sum() for lb, ub in bounds) < 0.9 * sum((ub - lb).sum()
                                                                for lb, ub in box)
    predictor = embed(MODELS["torch-binary"]())  # the encoding takes the same bounds
    predictor.set_input_box(lo, hi, hull=vertices)
    expected = predictor.adapter.structure.box_bounds(lo, hi, hull=vertices)
    for (lb, ub), (elb, eub) in zip(predictor.layer_bounds(), expected):
        np.testing.assert_allclose(lb, elb, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(ub, eub, rtol=1e-9, atol=1e-9)
