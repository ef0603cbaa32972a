r"""An sklearn ``IsolationForest`` read as a tree ensemble whose output is the mean path
length (Liu, Ting & Zhou 2008).

An isolation tree sends a point down to a leaf at depth :math:`d` (edges from the
root) holding :math:`n` training samples; its path length is :math:`h = d + c(n)`, where

.. math:: c(n) = 2 H(n - 1) - \frac{2 (n - 1)}{n}, \qquad H(i) \approx \ln i + \gamma,
          \qquad c(1) = 0,\; c(2) = 1

is the average path length of an unsuccessful search in a binary search tree of
:math:`n` keys (the depth the leaf's samples would still add). sklearn scores

.. math:: \text{score\_samples}(x) = -2^{-E[h(x)] / c(\psi)}, \qquad
          E[h(x)] = \frac{1}{T} \sum_{t=1}^{T} h_t(x)

with :math:`\psi` = ``max_samples_``. :class:`IsolationForestAdapter` holds the forest
as a :class:`~cfopt.models.trees.TreeEnsemble` with leaf value :math:`h / T` (one
output, :math:`E[h]`), each tree's features mapped from its subset
(``estimators_features_``) to the forest's input columns, splits compared as sklearn
does (``float32(x) <= threshold``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import ModelAdapter
from .trees import Tree, TreeEnsemble


def average_path_length(n: np.ndarray | float) -> np.ndarray:
    """:math:`c(n)` as sklearn computes it (``_average_path_length``)."""
    n = np.asarray(n, dtype=np.float64)  # pragma: no mutate (integers compute the same)
    out = np.zeros(n.shape)
    out[n == 2] = 1.0
    big = n > 2
    out[big] = 2.0 * (np.log(n[big] - 1.0) + np.euler_gamma) - 2.0 * (n[big] - 1.0) / n[big]
    return out


def node_depths(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Depth (edges from the root) of every node of a tree in sklearn's node arrays."""
    depth = np.zeros(len(left), dtype=np.float64)  # pragma: no mutate (float64: the default)
    for node in range(len(left)):  # sklearn numbers a child after its parent
        if left[node] >= 0:  # pragma: no mutate (a child's index is >= 1: the root is 0)
            depth[left[node]] = depth[right[node]] = depth[node] + 1
    return depth


def _tree(estimator: Any, features: np.ndarray, weight: float) -> Tree:
    t = estimator.tree_
    # pragma: no mutate start (sklearn's node arrays are intp and float64 already)
    left = np.asarray(t.children_left, dtype=int)
    right = np.asarray(t.children_right, dtype=int)
    own = np.asarray(t.feature, dtype=int)
    threshold = np.asarray(t.threshold, dtype=np.float64)
    # pragma: no mutate end
    length = node_depths(left, right) + average_path_length(t.n_node_samples)
    return Tree(feature=np.where(own >= 0, features[np.maximum(own, 0)], own),
                threshold=threshold, left=left, right=right,
                value=(weight * length)[:, None])


class IsolationForestAdapter(ModelAdapter):
    """A fitted ``IsolationForest``: the structure's one output is the mean path length
    :math:`E[h]` (module docstring); :meth:`output` is the forest's own
    ``score_samples``, :meth:`output_from_logits` maps :math:`E[h]` to it."""

    decision = "regression"
    classes = ()

    def __init__(self, forest: Any) -> None:
        name = type(forest).__name__
        if name != "IsolationForest":
            raise ValueError(f"expected a fitted sklearn IsolationForest, got {name}")
        if not hasattr(forest, "estimators_"):
            raise ValueError("the IsolationForest is not fitted; fit it before using it as "
                             "a constraint")
        if forest.max_samples_ < 2:
            raise ValueError(f"the IsolationForest was fitted with max_samples_="
                             f"{forest.max_samples_}: it scores every point -0.5, nothing "
                             f"to constrain; fit it on at least 2 samples per tree")
        self.model = forest
        n = int(forest.n_features_in_)
        trees = []
        for est, features in zip(forest.estimators_, forest.estimators_features_):
            # sklearn indexes a tree's features only when it drew a strict subset
            cols = np.asarray(features, dtype=int) if len(features) != n else np.arange(n)
            trees.append(_tree(est, cols, 1.0 / len(forest.estimators_)))
        self.structure = TreeEnsemble(tuple(trees), n, np.zeros(1), rule="le", float32=True)
        #: :math:`c(\psi)`, the normalizer of the score
        self.normalizer = float(average_path_length(forest.max_samples_))

    @property
    def kind(self) -> str:
        return "IsolationForest"

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(np.atleast_2d(Z)))

    def output(self, Z: np.ndarray) -> np.ndarray:
        scores = np.asarray(self.model.score_samples(np.atleast_2d(Z)),
                            dtype=np.float64)  # pragma: no mutate (float64 already)
        return scores.reshape(-1, 1)  # pragma: no mutate (numpy reads any negative as -1)

    def output_from_logits(self, logits: np.ndarray) -> np.ndarray:
        return -(2.0 ** (-np.atleast_2d(logits) / self.normalizer))

    def path_length_bound(self, min_score: float) -> float:
        r"""The least :math:`E[h]` with ``score_samples >= min_score`` (< 0):
        :math:`-c(\psi) \log_2(-s_{\min})`, and 0 for ``min_score <= -1`` (every point)."""
        if not min_score < 0:
            raise ValueError(f"score_samples is negative everywhere; a minimum of "
                             f"{min_score} admits no point")
        return max(0.0, -self.normalizer * float(np.log2(-min_score)))
