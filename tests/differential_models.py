"""Model families of the differential harness (``tests/differential.py``): fitting tiny
models, and reading every prediction, score and split threshold from the libraries
themselves (never through cfopt).

Scores are in the units the harness's margin applies to: a binary classifier's signed
score towards ``classes[1]`` (torch: the output logit; ``MLPClassifier``: log p1 - log p0
from ``predict_proba``; decision trees and forests: p1 - p0; XGBoost / LightGBM: the raw
margin; linear models and sklearn boosting: ``decision_function``), per-class scores of
a multiclass classifier in the same units (forests: ``predict_proba``; ``MLPClassifier``:
log ``predict_proba``), and a regressor's prediction.
"""

from __future__ import annotations

import copy
import json
import warnings
from typing import Any

import numpy as np
import torch

CLASSIFIERS = ("logistic", "linear_svm", "sklearn_mlp", "torch_mlp", "decision_tree",
               "random_forest", "extra_trees", "gradient_boosting", "hist_gradient_boosting",
               "xgboost", "lightgbm")
REGRESSORS = ("linear_regression", "mlp_regressor", "tree_regressor")
FAMILIES = CLASSIFIERS + REGRESSORS
TREE_FAMILIES = frozenset({"decision_tree", "random_forest", "extra_trees", "gradient_boosting",
                           "hist_gradient_boosting", "xgboost", "lightgbm", "tree_regressor"})
LINEAR_FAMILIES = frozenset({"logistic", "linear_svm", "linear_regression"})
NETWORK_FAMILIES = frozenset({"sklearn_mlp", "torch_mlp", "mlp_regressor"})

_PROBABILITY_TREES = ("DecisionTreeClassifier", "RandomForestClassifier", "ExtraTreesClassifier")


# ------------------------------------------------------------------------- fitting
def fit_model(family: str, Z: np.ndarray, y: np.ndarray, n_classes: int,
              rng: np.random.Generator, seed: int) -> Any:
    """A tiny model of ``family`` (depth <= 3, <= 5 trees, hidden widths <= 6) fitted on
    ``Z`` (``n_classes`` 0 for a regressor; the torch network is random, not trained)."""
    if family == "torch_mlp":
        return _random_net(Z, n_classes, rng, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence of the tiny models is irrelevant
        return _estimator(family, rng, seed).fit(Z, y)


def _estimator(family: str, rng: np.random.Generator, seed: int) -> Any:
    from lightgbm import LGBMClassifier
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        GradientBoostingClassifier,
        GradientBoostingRegressor,
        HistGradientBoostingClassifier,
        RandomForestClassifier,
        RandomForestRegressor,
    )
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.neural_network import MLPClassifier, MLPRegressor
    from sklearn.svm import LinearSVC
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
    from xgboost import XGBClassifier

    depth = int(rng.integers(2, 4))
    trees = int(rng.integers(2, 6))
    hidden = _hidden(rng)
    c = float(rng.choice([0.1, 1.0, 10.0]))
    if family == "logistic":
        return LogisticRegression(C=c, max_iter=500)
    if family == "linear_svm":
        return LinearSVC(C=c, max_iter=5000)
    if family == "sklearn_mlp":
        return MLPClassifier(hidden_layer_sizes=hidden, max_iter=80, learning_rate_init=0.05, random_state=seed)
    if family == "mlp_regressor":
        return MLPRegressor(hidden_layer_sizes=hidden, max_iter=80, learning_rate_init=0.05, random_state=seed)
    if family == "decision_tree":
        return DecisionTreeClassifier(max_depth=depth, random_state=seed)
    if family in ("random_forest", "extra_trees"):
        cls = RandomForestClassifier if family == "random_forest" else ExtraTreesClassifier
        return cls(n_estimators=trees, max_depth=depth, random_state=seed, n_jobs=1)
    if family == "gradient_boosting":
        return GradientBoostingClassifier(n_estimators=trees, max_depth=depth, random_state=seed)
    if family == "hist_gradient_boosting":
        return HistGradientBoostingClassifier(max_iter=trees, max_depth=depth,
                                              min_samples_leaf=5, early_stopping=False,
                                              random_state=seed)
    if family == "xgboost":
        return XGBClassifier(n_estimators=trees, max_depth=depth, n_jobs=1, random_state=seed,
                             learning_rate=float(rng.choice([0.3, 1.0])))
    if family == "lightgbm":
        return LGBMClassifier(n_estimators=trees, num_leaves=4 + 4 * (depth == 3), max_depth=depth,
                              min_child_samples=5, n_jobs=1, verbose=-1, random_state=seed)
    if family == "linear_regression":
        return LinearRegression()
    if family == "tree_regressor":  # alternates the three sklearn regressor families
        return [DecisionTreeRegressor(max_depth=depth, random_state=seed),
                RandomForestRegressor(n_estimators=trees, max_depth=depth, random_state=seed,
                                      n_jobs=1),
                GradientBoostingRegressor(n_estimators=trees, max_depth=depth,
                                          random_state=seed)][seed % 3]
    raise ValueError(f"unknown family {family!r}; families are {FAMILIES}")


def _hidden(rng: np.random.Generator) -> tuple[int, ...]:
    first = int(rng.integers(2, 7))
    return (first,) if rng.random() < 0.6 else (first, int(rng.integers(2, 7)))


def _random_net(Z: np.ndarray, n_classes: int, rng: np.random.Generator,
                seed: int) -> torch.nn.Sequential:
    """A random float32 ReLU network whose outputs split the rows between the classes."""
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    width = Z.shape[1]
    for h in _hidden(rng):
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    net = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1 if n_classes == 2 else n_classes))
    net.eval()
    with torch.no_grad():
        logits = net(torch.tensor(Z, dtype=torch.float32))
        net[-1].bias -= logits.median(dim=0).values
    return net


# ------------------------------------------------------------ library predictions
def classes_of(model: Any) -> tuple:
    """Class labels in score-column order (``()`` for a regressor)."""
    if isinstance(model, torch.nn.Module):
        k = model[-1].out_features
        return (0, 1) if k == 1 else tuple(range(k))
    return tuple(model.classes_.tolist()) if hasattr(model, "classes_") else ()


def predict(model: Any, Z: np.ndarray) -> np.ndarray:
    """The library's own predictions (torch: class 1 iff logit > 0, else the argmax)."""
    if isinstance(model, torch.nn.Module):
        logits = _torch_logits(model, Z)
        return (logits[:, 0] > 0).astype(int) if logits.shape[1] == 1 else logits.argmax(axis=1)
    return np.asarray(model.predict(Z))


def raw_scores(model: Any, Z: np.ndarray) -> np.ndarray:
    """(n,) scores of a binary classifier towards ``classes[1]`` or a regressor's
    predictions; (n, k) per-class scores of a multiclass classifier (module docstring)."""
    if isinstance(model, torch.nn.Module):
        logits = _torch_logits(model, Z)
        return logits[:, 0] if logits.shape[1] == 1 else logits
    name = type(model).__name__
    if not hasattr(model, "classes_"):
        return np.asarray(model.predict(Z), dtype=float)
    if name == "MLPClassifier":
        with np.errstate(divide="ignore"):
            logp = np.log(model.predict_proba(Z))
        return logp[:, 1] - logp[:, 0] if logp.shape[1] == 2 else logp
    if name in _PROBABILITY_TREES:
        p = model.predict_proba(Z)
        return p[:, 1] - p[:, 0] if p.shape[1] == 2 else p
    if name == "XGBClassifier":
        return np.asarray(model.predict(Z, output_margin=True), dtype=float)
    if name == "LGBMClassifier":
        return np.asarray(model.predict(Z, raw_score=True), dtype=float)
    return np.asarray(model.decision_function(Z), dtype=float)


def margin_scores(model: Any, Z: np.ndarray) -> np.ndarray:
    """:func:`raw_scores` in exact arithmetic of the model's parameters (float64), where
    the margin μ is measured: a float32 network's own logits differ from them by its
    rounding, which depends on the summation order its kernels choose (1e-2 on inputs of
    magnitude 1e6, seed 52181); other families already score in float64, up to the band
    ε."""
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            logits = copy.deepcopy(model).double()(torch.tensor(Z, dtype=torch.float64))
        logits = logits.numpy()
        return logits[:, 0] if logits.shape[1] == 1 else logits
    return raw_scores(model, Z)


def _torch_logits(model: torch.nn.Module, Z: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(Z, dtype=torch.float32)).double().numpy()


def shift_output_bias(model: Any, unit: int, delta: float) -> None:
    """Add ``delta`` to the bias of output ``unit`` (the last layer / the intercept)."""
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            model[-1].bias[unit] += delta
    elif hasattr(model, "intercepts_"):
        model.intercepts_[-1][unit] += delta
    else:
        model.intercept_[unit] += delta


def linear_coefficients(model: Any) -> np.ndarray:
    """A linear model's coefficients per model input, one row per output."""
    return np.atleast_2d(np.asarray(model.coef_, dtype=float))


# ---------------------------------------------------------------- split thresholds
#: LightGBM reads a value within this of 0 as 0 (``kZeroThreshold``, 1e-35 as a float)
LIGHTGBM_ZERO = float(np.float32(1e-35))


def split_thresholds(model: Any) -> tuple[dict[int, np.ndarray], bool, str, float]:
    """The split thresholds of a tree model per model input (sorted, distinct), read from
    the library's own arrays / dumps, and how the library compares: whether it rounds
    the input to float32 first, the rule (``"le"``: left iff x <= t, ``"lt"``: x < t),
    and the band around 0 it reads as 0 (LightGBM; else 0).
    """
    name = type(model).__name__
    pairs: list[tuple[int, float]] = []
    zero = 0.0
    if name.startswith("XGB"):
        for dump in model.get_booster().get_dump(dump_format="json"):
            _xgb_nodes(json.loads(dump), pairs)
        float32, rule = True, "lt"
    elif name.startswith("LGBM"):
        for info in model.booster_.dump_model()["tree_info"]:
            _lgbm_nodes(info["tree_structure"], pairs)
        float32, rule, zero = False, "le", LIGHTGBM_ZERO
    elif hasattr(model, "_predictors"):  # histogram gradient boosting, float64 compares
        for stage in model._predictors:
            for predictor in stage:
                nodes = predictor.nodes[~predictor.nodes["is_leaf"].astype(bool)]
                pairs += zip(nodes["feature_idx"].tolist(), nodes["num_threshold"].tolist())
        float32, rule = False, "le"
    else:  # sklearn's classic trees compare float32(x) <= threshold
        estimators = np.ravel(getattr(model, "estimators_", [model]))
        for est in estimators:
            t = est.tree_
            inner = t.feature >= 0
            pairs += zip(t.feature[inner].tolist(), t.threshold[inner].tolist())
        float32, rule = True, "le"
    out: dict[int, list[float]] = {}
    for i, t in pairs:
        out.setdefault(int(i), []).append(float(t))
    return {i: np.unique(np.asarray(v)) for i, v in out.items()}, float32, rule, zero


def _xgb_nodes(node: dict, pairs: list[tuple[int, float]]) -> None:
    if "children" not in node:
        return
    pairs.append((int(str(node["split"]).lstrip("f")),
                  float(np.float32(node["split_condition"]))))
    for child in node["children"]:
        _xgb_nodes(child, pairs)


def _lgbm_nodes(node: dict, pairs: list[tuple[int, float]]) -> None:
    if "leaf_value" in node:
        return
    pairs.append((int(node["split_feature"]), float(node["threshold"])))
    _lgbm_nodes(node["left_child"], pairs)
    _lgbm_nodes(node["right_child"], pairs)


def goes_left(u: np.ndarray, thresholds: np.ndarray, float32: bool, rule: str,
              zero: float = 0.0) -> np.ndarray:
    """(n, m) side of each model-input value ``u`` at each threshold, as the library
    decides it (the signature that groups candidate values into cells)."""
    u = np.asarray(u, dtype=np.float64)
    u = np.where(np.abs(u) <= zero, 0.0, u)
    if float32:
        u = u.astype(np.float32).astype(np.float64)
    u = u[:, None]
    return u <= thresholds[None, :] if rule == "le" else u < thresholds[None, :]
