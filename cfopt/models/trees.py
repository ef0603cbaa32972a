"""Tree ensembles read directly from the fitted model (sklearn ``tree_`` arrays).

A :class:`TreeEnsemble` holds, per tree, the node arrays and per-leaf output vectors,
with the model's aggregation folded in, so that

    outputs(x) = init + sum_t value_t[leaf_t(x)]

reproduces the library's own scores: averaged class probabilities for decision trees,
random forests and extra trees (``predict_proba``), raw scores for gradient boosting
(``decision_function``: prior score + learning rate x leaf values), and ``predict`` for
regressors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import UnsupportedModelError
from .base import ModelAdapter

SplitRule = Literal["le", "lt"]
#: above this many terms in the leaf rows of an ensemble (the sum of its leaves'
#: depths), a counterfactual model builds its trees per query on the leaves a query can
#: reach (:mod:`cfopt.formulations.tree_regions`): 2e5 terms take ~1 s to build
PER_QUERY_TERMS = 200_000


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
        Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))  # pragma: no mutate (compared as floats)
        if self.float32:
            Z = Z.astype(np.float32).astype(np.float64)  # pragma: no mutate (float64: the default)
        out = np.tile(self.init, (len(Z), 1))
        for tree in self.trees:
            out += tree.value[tree.apply(Z, self.rule)]
        return out

    # the ReLU-network interface used by generic code paths
    def logits(self, Z: np.ndarray) -> np.ndarray:
        return self.outputs(Z)

    def margin_scores(self, Z: np.ndarray) -> None:
        """``None``: a tree ensemble's margin is not re-checked on a point's inputs. Its
        scores are sums of the leaves' constants, and the MILP meets the margin on the
        leaves it chose up to the solver's feasibility tolerance (1e-7, far below μ);
        decoding puts the point where the library takes the MILP's sides, while a float64
        re-evaluation (:meth:`outputs`) can take the other side of a split at its
        threshold (HistGradientBoosting on German credit: -0.0114 where the library's
        leaves give class 1)."""
        return None


def _sklearn_tree(tree: Any, values: np.ndarray) -> Tree:
    t = tree.tree_
    # pragma: no mutate start (sklearn's node arrays are intp and float64 already)
    return Tree(feature=np.asarray(t.feature, dtype=int),
                threshold=np.asarray(t.threshold, dtype=np.float64),
                left=np.asarray(t.children_left, dtype=int),
                right=np.asarray(t.children_right, dtype=int),
                value=np.asarray(values, dtype=np.float64))
    # pragma: no mutate end


def _class_fractions(tree: Any) -> np.ndarray:
    value = np.asarray(tree.tree_.value[:, 0, :], dtype=np.float64)  # pragma: no mutate (float64)
    total = value.sum(axis=1, keepdims=True)
    total[total == 0] = 1.0  # pragma: no mutate (a zero row stays 0 divided by any number)
    return value / total


def _check_constant_init(name: str, init: np.ndarray) -> np.ndarray:
    if not np.allclose(init, init[0], rtol=0, atol=1e-9):
        raise UnsupportedModelError(f"{name} has an init estimator whose score depends on the "
                                    f"input; only constant priors (the default, or "
                                    f"init='zero') are encoded")
    return init[0]


def _hist_tree(predictor: Any, column: int, n_out: int) -> Tree:
    nodes = predictor.nodes
    if nodes["is_categorical"].any():
        raise UnsupportedModelError("HistGradientBoosting categorical splits are not "
                                    "supported; one-hot encode the categories instead")
    leaf = nodes["is_leaf"].astype(bool)
    values = np.zeros((len(nodes), n_out))
    values[leaf, column] = nodes["value"][leaf]
    return Tree(feature=np.where(leaf, -1, nodes["feature_idx"].astype(int)),
                # pragma: no mutate start (a leaf's threshold and children are never read)
                threshold=np.where(leaf, 0.0, nodes["num_threshold"].astype(np.float64)),
                left=np.where(leaf, -1, nodes["left"].astype(int)),
                right=np.where(leaf, -1, nodes["right"].astype(int)),
                # pragma: no mutate end
                value=values)


class SklearnTreeAdapter(ModelAdapter):
    """sklearn trees and tree ensembles, read from their fitted arrays.

    * ``DecisionTreeClassifier``, ``RandomForestClassifier``, ``ExtraTreesClassifier``:
      outputs are the class probabilities averaged over trees (``predict_proba``);
      argmax, ties to the lowest index.
    * ``GradientBoostingClassifier``, ``HistGradientBoostingClassifier``: outputs are
      ``decision_function`` (prior score + leaf values x learning rate); binary: class 1
      iff > 0, multiclass: argmax.
    * ``DecisionTreeRegressor``, ``RandomForestRegressor``, ``ExtraTreesRegressor``,
      ``GradientBoostingRegressor``, ``HistGradientBoostingRegressor`` (identity-link
      losses): the output is ``predict``; a counterfactual's target is an interval.

    The constant prior of boosting is measured as the library's score minus the sum of
    leaf values. sklearn's classic trees compare ``float32(x) <= threshold``; the
    histogram trees compare ``x <= threshold`` in float64. A counterfactual is verified
    with the model's own ``predict``.
    """

    def __init__(self, model: Any) -> None:
        name = type(model).__name__
        if not hasattr(model, "n_features_in_"):
            raise UnsupportedModelError(f"{name} is not fitted; fit it before explaining")
        if getattr(model, "n_outputs_", 1) != 1 or (
                getattr(model, "n_trees_per_iteration_", 1) < 1):  # pragma: no mutate (never < 1)
            raise UnsupportedModelError(f"multi-output {name} is not supported")
        self.model = model
        regression = not hasattr(model, "classes_")
        self.classes = () if regression else tuple(model.classes_.tolist())
        k = len(self.classes)
        n_inputs = int(model.n_features_in_)
        if regression:
            self.decision = "regression"
        elif hasattr(model, "learning_rate"):
            self.decision = "sign" if k == 2 else "argmax"
        else:
            self.decision = "argmax"
        if hasattr(model, "_predictors"):  # histogram gradient boosting
            loss = getattr(model, "loss", "")  # pragma: no mutate (a histogram booster has one)
            if regression and loss not in ("squared_error", "absolute_error", "quantile"):
                raise UnsupportedModelError(f"{name}(loss={loss!r}) predicts through a "
                                            f"non-identity link; cfopt encodes squared_error, "
                                            f"absolute_error and quantile losses")
            n_out = len(model._predictors[0])
            trees = [_hist_tree(p, c, n_out) for stage in model._predictors
                     for c, p in enumerate(stage)]
            self.structure = self._with_prior(trees, n_inputs, n_out)
        elif hasattr(model, "estimators_") and hasattr(model, "learning_rate"):  # boosting
            lr = float(model.learning_rate)
            stages = np.asarray(model.estimators_)
            trees = []
            for stage in stages:
                for c, est in enumerate(stage):
                    values = np.zeros((est.tree_.node_count, stages.shape[1]))
                    values[:, c] = lr * est.tree_.value[:, 0, 0]
                    trees.append(_sklearn_tree(est, values))
            self.structure = self._with_prior(trees, n_inputs, stages.shape[1])
        else:
            estimators = getattr(model, "estimators_", [model])
            weight = 1.0 / len(estimators)
            trees = [_sklearn_tree(est, weight * (
                # pragma: no mutate start (sklearn >= 1.4 stores class fractions already)
                est.tree_.value[:, 0, :] if regression else _class_fractions(est)))
                # pragma: no mutate end
                for est in estimators]
            self.structure = TreeEnsemble(tuple(trees), n_inputs, np.zeros(max(k, 1)))

    def _with_prior(self, trees: list[Tree], n_inputs: int, n_out: int) -> TreeEnsemble:
        """The ensemble with its constant prior, measured on random probes."""
        float32 = not hasattr(self.model, "_predictors")
        # pragma: no mutate start (n_inputs unread; rounding moves a random probe w.p. ~1e-7)
        partial = TreeEnsemble(tuple(trees), n_inputs, np.zeros(n_out), float32=float32)
        # pragma: no mutate end
        probe = np.random.default_rng(0).normal(size=(4, n_inputs))  # pragma: no mutate (any)
        init = _check_constant_init(self.kind, self.output(probe) - partial.outputs(probe))
        return TreeEnsemble(tuple(trees), n_inputs, init, float32=float32)

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(np.atleast_2d(Z)))

    def output(self, Z: np.ndarray) -> np.ndarray:
        Z = np.atleast_2d(Z)
        if self.decision == "regression":
            out = self.model.predict(Z)
        elif hasattr(self.model, "learning_rate"):
            out = self.model.decision_function(Z)
        else:
            out = self.model.predict_proba(Z)
        return np.asarray(out, dtype=np.float64).reshape(len(Z), -1)  # pragma: no mutate (float64)
