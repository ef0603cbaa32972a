"""Tree ensembles read directly from the fitted model (sklearn ``tree_`` arrays).

A :class:`TreeEnsemble` holds, per tree, the node arrays and per-leaf output vectors,
with the model's aggregation folded in, so that

    outputs(x) = init + sum_t value_t[leaf_t(x)]

reproduces the library's own scores: averaged class probabilities for decision trees,
random forests and extra trees (``predict_proba``), raw scores for gradient boosting
(``decision_function``: prior score + learning rate x leaf values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import UnsupportedModelError
from .base import ModelAdapter

SplitRule = Literal["le", "lt"]


@dataclass(frozen=True)
class Tree:
    """Node arrays of one tree: ``feature[n] < 0`` marks a leaf; an internal node sends
    ``x`` left when ``x[feature] <= threshold`` (rule ``"le"``) or ``<`` (``"lt"``);
    ``value[n]`` is the output vector added when ``n`` is the leaf reached."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray

    @property
    def leaves(self) -> np.ndarray:
        return np.flatnonzero(self.feature < 0)

    def apply(self, Z: np.ndarray, rule: SplitRule) -> np.ndarray:
        """Index of the leaf each row reaches (float64 comparison)."""
        node = np.zeros(len(Z), dtype=int)
        active = self.feature[node] >= 0
        while active.any():
            rows = np.flatnonzero(active)
            f = self.feature[node[rows]]
            x = Z[rows, f]
            t = self.threshold[node[rows]]
            go_left = x <= t if rule == "le" else x < t
            node[rows] = np.where(go_left, self.left[node[rows]], self.right[node[rows]])
            active = self.feature[node] >= 0
        return node


@dataclass(frozen=True)
class TreeEnsemble:
    """Trees, a split rule, and ``init``; outputs are ``init + sum of leaf values``.

    ``float32``: the library compares ``float32(x)`` with the (float64) threshold, as
    sklearn and XGBoost do."""

    trees: tuple[Tree, ...]
    n_inputs: int
    init: np.ndarray
    rule: SplitRule = "le"
    float32: bool = True  # the library rounds inputs to float32 before comparing

    @property
    def n_outputs(self) -> int:
        return int(self.init.shape[0])

    def outputs(self, Z: np.ndarray) -> np.ndarray:
        Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
        if self.float32:
            Z = Z.astype(np.float32).astype(np.float64)
        out = np.tile(self.init, (len(Z), 1))
        for tree in self.trees:
            out += tree.value[tree.apply(Z, self.rule)]
        return out

    # the ReLU-network interface used by generic code paths
    def logits(self, Z: np.ndarray) -> np.ndarray:
        return self.outputs(Z)


def _sklearn_tree(tree: Any, values: np.ndarray) -> Tree:
    t = tree.tree_
    return Tree(feature=np.asarray(t.feature, dtype=int),
                threshold=np.asarray(t.threshold, dtype=np.float64),
                left=np.asarray(t.children_left, dtype=int),
                right=np.asarray(t.children_right, dtype=int),
                value=np.asarray(values, dtype=np.float64))


def _class_fractions(tree: Any) -> np.ndarray:
    value = np.asarray(tree.tree_.value[:, 0, :], dtype=np.float64)
    total = value.sum(axis=1, keepdims=True)
    total[total == 0] = 1.0
    return value / total


class SklearnTreeAdapter(ModelAdapter):
    """sklearn ``DecisionTreeClassifier``, ``RandomForestClassifier``,
    ``ExtraTreesClassifier`` (outputs: class probabilities, averaged over trees;
    argmax, ties to the lowest index) and ``GradientBoostingClassifier`` (outputs:
    ``decision_function``; binary: class 1 iff > 0, multiclass: argmax).

    sklearn compares features in float32; a counterfactual is verified with the
    model's own ``predict``.
    """

    def __init__(self, model: Any) -> None:
        name = type(model).__name__
        if not hasattr(model, "classes_"):
            raise UnsupportedModelError(f"{name} is not fitted; fit it before explaining")
        if getattr(model, "n_outputs_", 1) != 1:
            raise UnsupportedModelError(f"multi-output {name} is not supported")
        self.model = model
        self.classes = tuple(model.classes_.tolist())
        k = len(self.classes)
        n_inputs = int(model.n_features_in_)
        if hasattr(model, "estimators_") and hasattr(model, "learning_rate"):  # boosting
            self.decision = "sign" if k == 2 else "argmax"
            lr = float(model.learning_rate)
            stages = np.asarray(model.estimators_)
            trees = []
            for stage in stages:
                for c, est in enumerate(stage):
                    values = np.zeros((est.tree_.node_count, stages.shape[1]))
                    values[:, c] = lr * est.tree_.value[:, 0, 0]
                    trees.append(_sklearn_tree(est, values))
            probe = np.zeros((2, n_inputs))
            probe[1] = 1.0
            partial = TreeEnsemble(tuple(trees), n_inputs, np.zeros(stages.shape[1]))
            init = self._decision(probe) - partial.outputs(probe)
            if not np.allclose(init[0], init[1], rtol=0, atol=1e-12):
                raise UnsupportedModelError(f"{name} has an init estimator whose score "
                                            f"depends on the input; only constant priors "
                                            f"(the default, or init='zero') are encoded")
            self.structure = TreeEnsemble(tuple(trees), n_inputs, init[0])
        else:
            self.decision = "argmax"
            estimators = getattr(model, "estimators_", [model])
            weight = 1.0 / len(estimators)
            trees = [_sklearn_tree(est, weight * _class_fractions(est)) for est in estimators]
            self.structure = TreeEnsemble(tuple(trees), n_inputs, np.zeros(k))

    def _decision(self, Z: np.ndarray) -> np.ndarray:
        out = np.asarray(self.model.decision_function(Z), dtype=np.float64)
        return out.reshape(len(Z), -1)

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(np.atleast_2d(Z)))

    def output(self, Z: np.ndarray) -> np.ndarray:
        Z = np.atleast_2d(Z)
        if self.decision == "sign" or hasattr(self.model, "learning_rate"):
            return self._decision(Z)
        return np.asarray(self.model.predict_proba(Z), dtype=np.float64)
