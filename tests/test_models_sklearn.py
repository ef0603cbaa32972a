"""scikit-learn networks and linear models (:mod:`cfopt.models.sklearn_models`) and the
registry that picks a model's parser (:mod:`cfopt.models.registry`): the parsed
structure's logits, outputs and decisions against the library's own, and the models
refused with a message naming them."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression, RidgeClassifier
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.svm import SVC, LinearSVC

import cfopt.models.registry as registry
from cfopt.errors import UnsupportedModelError
from cfopt.models import decide, parse_model, register_model, supported_models
from cfopt.models.sklearn_models import SklearnLinearAdapter, SklearnMLPAdapter

RNG = np.random.default_rng(0)
X = RNG.normal(size=(80, 3))
Y2 = (X[:, 0] + X[:, 1] > 0).astype(int)
Y3 = np.digitize(X[:, 0], [-0.5, 0.5])
YR = X @ [1.0, -2.0, 0.5] + 0.3


def mlp(cls, y, **kwargs):
    return cls(hidden_layer_sizes=(4,), max_iter=300, random_state=0, **kwargs).fit(X, y)


def check(adapter, model, Z=X[:10]):
    logits = adapter.structure.logits(Z)
    if not adapter.is_regressor:
        labels = np.array(adapter.classes)[decide(logits, adapter.decision)]
        assert np.array_equal(labels, model.predict(Z))
    assert np.array_equal(adapter.predict(Z), model.predict(Z))
    assert np.allclose(adapter.output_from_logits(logits), adapter.output(Z), atol=1e-9)


@pytest.mark.filterwarnings("ignore")
def test_mlp_classifiers_and_regressor():
    binary = mlp(MLPClassifier, Y2)
    a = SklearnMLPAdapter(binary)
    assert a.decision == "sign" and a.classes == (0, 1) and a.n_inputs == 3
    assert [layer.relu for layer in a.structure.layers] == [True, False]
    check(a, binary)
    assert np.allclose(a.output(X[:3]), binary.predict_proba(X[:3]))
    multi = mlp(MLPClassifier, Y3)
    a = SklearnMLPAdapter(multi)
    assert a.decision == "argmax" and a.classes == (0, 1, 2)
    check(a, multi)
    reg = mlp(MLPRegressor, YR)
    a = SklearnMLPAdapter(reg)
    assert a.decision == "regression" and a.classes == () and a.is_regressor
    assert a.output(X[:4]).shape == (4, 1)
    assert np.allclose(a.output(X[:4])[:, 0], reg.predict(X[:4]))
    assert np.allclose(a.structure.logits(X[:4])[:, 0], reg.predict(X[:4]))
    assert np.array_equal(a.output_from_logits(np.array([1.5, 2.0])), [[1.5, 2.0]])
    ident = mlp(MLPClassifier, Y2, activation="identity")
    a = SklearnMLPAdapter(ident)
    assert [layer.relu for layer in a.structure.layers] == [False, False]
    check(a, ident)
    p = SklearnMLPAdapter(binary).output_from_logits(np.array([[0.0], [2.0]]))
    assert np.allclose(p, [[0.5, 0.5], [1 - 1 / (1 + np.exp(-2)), 1 / (1 + np.exp(-2))]])


@pytest.mark.filterwarnings("ignore")
def test_mlps_refused():
    with pytest.raises(UnsupportedModelError, match=r"^MLPClassifier is not fitted \(no "
                                                    r"coefs_\); fit it before explaining$"):
        SklearnMLPAdapter(MLPClassifier())
    with pytest.raises(UnsupportedModelError, match=r"^MLPClassifier\(activation='tanh'\) is "
                                                    r"not piecewise linear; cfopt encodes "
                                                    r"activation='relu' \(or 'identity'\) "
                                                    r"exactly$"):
        SklearnMLPAdapter(mlp(MLPClassifier, Y2, activation="tanh"))
    with pytest.raises(UnsupportedModelError, match="^multi-output MLPRegressor is not "
                                                    "supported$"):
        SklearnMLPAdapter(mlp(MLPRegressor, np.column_stack([YR, YR])))
    with pytest.raises(UnsupportedModelError, match="^multi-output MLPClassifier is not "
                                                    "supported$"):
        SklearnMLPAdapter(mlp(MLPClassifier, np.column_stack([Y2, 1 - Y2])))


def test_linear_models():
    for model, decision in ((LogisticRegression().fit(X, Y2), "sign"),
                            (LogisticRegression().fit(X, Y3), "argmax"),
                            (LinearSVC().fit(X, Y3), "argmax"),
                            (RidgeClassifier().fit(X, Y2), "sign"),
                            (SVC(kernel="linear").fit(X, Y2), "sign")):
        a = SklearnLinearAdapter(model)
        assert a.decision == decision and len(a.structure.layers) == 1
        assert not a.structure.layers[0].relu
        check(a, model)
        assert np.allclose(a.output(X[:3]).ravel(), model.decision_function(X[:3]).ravel())
        assert a.output(X[0]).shape[0] == 1
    reg = LinearRegression().fit(X, YR)
    a = SklearnLinearAdapter(reg)
    assert a.decision == "regression" and a.classes == ()
    assert np.allclose(a.output(X[:3])[:, 0], reg.predict(X[:3]))
    assert a.output(X[:3]).shape == (3, 1)
    assert np.allclose(a.structure.logits(X[:3])[:, 0], reg.predict(X[:3]))
    sparse = LogisticRegression().fit(X, Y2)
    sparse.sparsify()
    assert np.allclose(SklearnLinearAdapter(sparse).structure.logits(X[:3])[:, 0],
                       sparse.decision_function(X[:3]))


def test_linear_models_refused():
    with pytest.raises(UnsupportedModelError, match=r"^SVC\(kernel='rbf'\) is not linear; "
                                                    r"cfopt encodes kernel='linear' only$"):
        SklearnLinearAdapter(SVC().fit(X, Y2))
    with pytest.raises(UnsupportedModelError, match=r"^LogisticRegression is not fitted"):
        SklearnLinearAdapter(LogisticRegression())
    with pytest.raises(UnsupportedModelError, match="^multiclass SVC predicts by one-vs-one "
                                                    "voting, which cfopt does not encode; use "
                                                    "LinearSVC$"):
        SklearnLinearAdapter(SVC(kernel="linear").fit(X, Y3))
    with pytest.raises(UnsupportedModelError, match="^multi-output LinearRegression is not "
                                                    "supported$"):
        SklearnLinearAdapter(LinearRegression().fit(X, np.column_stack([YR, YR])))


def test_the_registry(monkeypatch):
    names = supported_models()
    assert names[0] == "torch.nn.Sequential" and names[-1] == "sklearn.pipeline.Pipeline"
    assert "sklearn.svm.NuSVC" in names and "xgboost.XGBRegressor" in names
    assert "sklearn.ensemble.HistGradientBoostingRegressor" in names
    model = LogisticRegression().fit(X, Y2)
    adapter = parse_model(model)
    assert isinstance(adapter, SklearnLinearAdapter) and parse_model(adapter) is adapter
    assert isinstance(parse_model(mlp(MLPRegressor, YR)), SklearnMLPAdapter)
    monkeypatch.setattr(registry, "_REGISTRY", list(registry._REGISTRY))
    register_model("sklearn.linear_model._logistic", "LogisticRegression",
                   lambda m: ("mine", m))
    assert parse_model(model) == ("mine", model)  # a later registration wins
    assert supported_models()[-1] == "sklearn.linear_model._logistic.LogisticRegression"
    register_model("not_imported_module", "Thing", lambda m: "never")
    with pytest.raises(UnsupportedModelError, match=r"^unsupported model type builtins.dict; "
                                                    r"supported: torch.nn.Sequential, "):
        parse_model({})
    with pytest.raises(UnsupportedModelError, match=r"not_imported_module.Thing, ONNX files$"):
        parse_model({})


def test_a_path_or_bytes_are_read_as_onnx():
    from pathlib import Path

    for path in ("no/such.onnx", Path("no/such.onnx")):
        with pytest.raises(FileNotFoundError, match="^ONNX file 'no/such.onnx' does not exist"):
            parse_model(path)
    for data in (b"not a model", bytearray(b"x")):
        with pytest.raises(UnsupportedModelError, match="^the bytes given are not an ONNX model"):
            parse_model(data)


def test_unsupported_models_are_named(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", list(registry._REGISTRY))
    register_model("sys", "NoSuchClass", lambda m: "never")  # a module without the class
    with pytest.raises(UnsupportedModelError, match=r"^unsupported model type numpy.ndarray; "):
        parse_model(np.zeros(2))
    torch = pytest.importorskip("torch")
    with pytest.raises(UnsupportedModelError, match=r"^unsupported model type "
                       r"torch.nn.modules.linear.Linear \(a torch model must be an "
                       r"nn.Sequential of Linear/ReLU layers; export other architectures to "
                       r"ONNX\); supported: "):
        parse_model(torch.nn.Linear(2, 1))


def test_a_lazy_parser_imports_its_adapter():
    model = LogisticRegression().fit(X, Y2)
    assert isinstance(registry._lazy("sklearn_models", "SklearnLinearAdapter")(model),
                      SklearnLinearAdapter)


@pytest.mark.filterwarnings("ignore")
def test_outputs_are_float64_for_a_float32_model():
    """A model fitted on float32 data predicts in float32; its adapter's outputs are
    float64 (the contract of ``ModelAdapter.output``)."""
    X32 = X.astype(np.float32)
    net = MLPRegressor(hidden_layer_sizes=(4,), max_iter=20, random_state=0)
    for model, y, adapter in ((net, YR, SklearnMLPAdapter),
                              (LinearRegression(), YR, SklearnLinearAdapter),
                              (LogisticRegression(), Y2, SklearnLinearAdapter)):
        model.fit(X32, y)
        out = adapter(model).output(X32[:3])
        assert out.dtype == np.float64 and out.shape == (3, 1)
        assert np.allclose(out, adapter(model).structure.logits(X32[:3]), atol=1e-5)
