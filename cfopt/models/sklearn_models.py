"""scikit-learn networks and linear models: ``MLPClassifier`` / ``MLPRegressor`` (ReLU),
linear classifiers and linear regressors."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UnsupportedModelError
from .base import ModelAdapter, sigmoid, softmax
from .network import DenseLayer, ReLUNetwork


def _check_fitted(model: Any, attr: str) -> None:
    if not hasattr(model, attr):
        raise UnsupportedModelError(f"{type(model).__name__} is not fitted (no {attr}); "
                                    f"fit it before explaining")


class SklearnMLPAdapter(ModelAdapter):
    """``sklearn.neural_network.MLPClassifier`` / ``MLPRegressor`` with ``relu`` (or
    identity) activation.

    Binary: one logit, class ``classes_[1]`` iff logit > 0 (``predict_proba`` > 0.5);
    multiclass: softmax over logits, argmax; regressor (one target): the output is the
    prediction.
    """

    def __init__(self, model: Any) -> None:
        _check_fitted(model, "coefs_")
        name = type(model).__name__
        if model.activation not in ("relu", "identity"):
            raise UnsupportedModelError(
                f"{name}(activation={model.activation!r}) is not piecewise linear; "
                f"cfopt encodes activation='relu' (or 'identity') exactly")
        regression = not hasattr(model, "classes_")
        if model.n_outputs_ > 1 and (regression or model.out_activation_ == "logistic"):
            raise UnsupportedModelError(f"multi-output {name} is not supported")
        self.model = model
        n = len(model.coefs_)
        hidden_relu = model.activation == "relu"
        self.structure = ReLUNetwork(tuple(
            DenseLayer(np.asarray(w, dtype=np.float64).T, b, hidden_relu and i < n - 1)
            for i, (w, b) in enumerate(zip(model.coefs_, model.intercepts_))))
        if regression:
            self.classes, self.decision = (), "regression"
        else:
            self.classes = tuple(model.classes_.tolist())
            self.decision = "sign" if model.out_activation_ == "logistic" else "argmax"

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(np.atleast_2d(Z)))

    def output(self, Z: np.ndarray) -> np.ndarray:
        Z = np.atleast_2d(Z)
        if self.is_regressor:
            return np.asarray(self.model.predict(Z), dtype=np.float64).reshape(len(Z), 1)
        return self.model.predict_proba(Z)

    def output_from_logits(self, logits: np.ndarray) -> np.ndarray:
        logits = np.atleast_2d(logits)
        if self.is_regressor:
            return logits
        if self.decision == "sign":
            p = sigmoid(logits[:, 0])
            return np.column_stack([1.0 - p, p])
        return softmax(logits)


class SklearnLinearAdapter(ModelAdapter):
    """Linear classifiers: ``LogisticRegression``, ``LinearSVC``, ``SGDClassifier``,
    ``RidgeClassifier`` ... (any ``LinearClassifierMixin``) and binary
    ``SVC(kernel="linear")``.

    The logits are ``decision_function``: binary → class ``classes_[1]`` iff > 0;
    multiclass (one-vs-rest or multinomial) → argmax. Linear regressors with one target
    (``LinearRegression``, ``Ridge``, ``Lasso``, ``ElasticNet``, ``LinearSVR``, any
    ``LinearModel``): the output is ``predict`` = ``coef_ @ x + intercept_``.
    """

    def __init__(self, model: Any) -> None:
        name = type(model).__name__
        if hasattr(model, "kernel") and model.kernel != "linear":
            raise UnsupportedModelError(f"{name}(kernel={model.kernel!r}) is not linear; "
                                        f"cfopt encodes kernel='linear' only")
        _check_fitted(model, "coef_")
        if hasattr(model, "kernel") and len(model.classes_) > 2:
            raise UnsupportedModelError(f"multiclass {name} predicts by one-vs-one voting, "
                                        f"which cfopt does not encode; use LinearSVC")
        coef = model.coef_
        coef = np.atleast_2d(np.asarray(coef.toarray() if hasattr(coef, "toarray") else coef,
                                        dtype=np.float64))  # pragma: no mutate (DenseLayer casts)
        intercept = np.broadcast_to(np.asarray(model.intercept_, dtype=np.float64),
                                    (coef.shape[0],))
        self.model = model
        self.structure = ReLUNetwork((DenseLayer(coef, intercept, False),))
        if hasattr(model, "classes_"):
            self.classes = tuple(model.classes_.tolist())
            self.decision = "sign" if coef.shape[0] == 1 else "argmax"
        elif coef.shape[0] != 1:
            raise UnsupportedModelError(f"multi-output {name} is not supported")
        else:
            self.classes, self.decision = (), "regression"

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(np.atleast_2d(Z)))

    def output(self, Z: np.ndarray) -> np.ndarray:
        Z = np.atleast_2d(Z)
        out = np.asarray(self.model.predict(Z) if self.is_regressor
                         else self.model.decision_function(Z), dtype=np.float64)
        return out.reshape(len(out), -1)  # pragma: no mutate (numpy reads any negative as -1)
