"""XGBoost and LightGBM classifiers, read from their own model dumps.

* XGBoost (``save_raw("json")``): node arrays per tree; a node sends ``x`` left when
  ``float32(x) < threshold`` (thresholds and leaf values are float32); tree ``i``
  scores class ``tree_info[i]``.
* LightGBM (``dump_model()``): nested nodes; left when ``x <= threshold`` in float64,
  an input within 1e-35 of 0 read as 0 (numerical splits only; categorical splits are
  refused); tree ``i`` scores class ``i % num_tree_per_iteration``.

The outputs are the raw margins (``output_margin`` / ``raw_score``); the constant base
score (XGBoost's ``base_score``, LightGBM's init score) is measured as the difference
between the library's margin and the sum of leaf values, and must not depend on the
input. Binary: class 1 iff margin > 0; multiclass: argmax.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..errors import UnsupportedModelError
from .base import ModelAdapter
from .trees import Tree, TreeEnsemble


def _init_score(adapter: ModelAdapter, partial: TreeEnsemble) -> np.ndarray:
    rng = np.random.default_rng(0)  # pragma: no mutate (any seed)
    probe = rng.random((4, partial.n_inputs))  # pragma: no mutate (any number of probes)
    init = adapter.output(probe) - partial.outputs(probe)
    if not np.allclose(init, init[0], rtol=0, atol=1e-5):
        raise UnsupportedModelError(f"{adapter.kind}: the base score depends on the input; "
                                    f"only a constant base score is encoded")
    return init[0]  # pragma: no mutate (any probe's: they agree within 1e-5)


class _BoosterAdapter(ModelAdapter):
    #: keyword of the library's ``predict`` that returns raw margins
    _margin_option: str

    def __init__(self, model: Any, trees: list[Tree], n_classes: int, rule: str,
                 float32: bool) -> None:
        self.model = model
        self.classes = tuple(model.classes_.tolist()) if n_classes else ()
        if not n_classes:
            self.decision = "regression"
        else:
            self.decision = "sign" if n_classes <= 2 else "argmax"
        n_out = 1 if n_classes <= 2 else n_classes
        n_inputs = int(model.n_features_in_)
        # pragma: no mutate start (4 random probes: a split rule or rounding moves none)
        partial = TreeEnsemble(tuple(trees), n_inputs, np.zeros(n_out), rule, float32)
        # pragma: no mutate end
        self.structure = TreeEnsemble(tuple(trees), n_inputs, _init_score(self, partial),
                                      rule, float32)
        if not n_classes:
            probe = np.random.default_rng(1).normal(size=(4, n_inputs))  # pragma: no mutate (any)
            if not np.allclose(self.output(probe)[:, 0], self.model.predict(probe),
                               rtol=1e-6, atol=1e-6):  # pragma: no mutate (0 or far apart)
                raise UnsupportedModelError(f"{self.kind}'s objective predicts through a "
                                            f"non-identity link (e.g. poisson, gamma, "
                                            f"logistic); cfopt encodes identity-link "
                                            f"regression objectives")

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(np.atleast_2d(Z)))

    def output(self, Z: np.ndarray) -> np.ndarray:
        Z = np.atleast_2d(Z)
        out = self.model.predict(Z, **{self._margin_option: True})
        return np.asarray(out, dtype=np.float64).reshape(len(Z), -1)  # pragma: no mutate (float64)


def _n_classes(model: Any) -> int:
    """Number of classes (0 for a regressor); refuses an unfitted model."""
    try:
        model.n_features_in_  # noqa: B018 (raises, or is missing, before fitting)
    except Exception:  # each library raises its own NotFittedError
        raise UnsupportedModelError(f"{type(model).__name__} is not fitted; fit it first"
                                    ) from None
    return len(model.classes_) if hasattr(model, "classes_") else 0


class XGBoostAdapter(_BoosterAdapter):
    """``xgboost.XGBClassifier`` / ``XGBRegressor`` with the ``gbtree`` booster."""

    _margin_option = "output_margin"

    def __init__(self, model: Any) -> None:
        n_classes = _n_classes(model)
        learner = json.loads(model.get_booster().save_raw("json"))["learner"]
        booster = learner["gradient_booster"]
        if booster.get("name") != "gbtree":
            raise UnsupportedModelError(f"XGBoost booster {booster.get('name')!r} is not "
                                        f"supported; use booster='gbtree'")
        n_out = 1 if n_classes <= 2 else n_classes
        raw_trees = booster["model"]["trees"]
        tree_info = booster["model"]["tree_info"]
        limit = getattr(model, "best_iteration", None)
        # pragma: no mutate start (best_iteration exists iff early stopping was used)
        if limit is not None and getattr(model, "early_stopping_rounds", None):
            # pragma: no mutate end
            raise UnsupportedModelError("XGBoost models with early stopping are not supported")
        trees = []
        #: per tree, where each node sends a missing value (sparse zeros): the left child
        self._default_left = [np.asarray(raw["default_left"],
                                         dtype=bool)  # pragma: no mutate (read as truth values)
                              for raw in raw_trees]
        self._sparse = False  # pragma: no mutate (read as a truth value)
        for raw, cls in zip(raw_trees, tree_info):
            left = np.asarray(raw["left_children"], dtype=int)  # pragma: no mutate (ints)
            leaf = left < 0  # pragma: no mutate (a child's index is >= 1: the root is 0)
            cond = np.asarray(raw["split_conditions"], dtype=np.float32).astype(
                np.float64)  # pragma: no mutate (float64: the default)
            if any(t != 0 for t in raw.get("split_type",
                                           [])):  # pragma: no mutate (always written)
                raise UnsupportedModelError("XGBoost categorical splits are not supported")
            values = np.zeros((len(left), n_out))
            values[leaf, cls if n_out > 1 else 0] = cond[leaf]  # pragma: no mutate (cls: 0 then)
            trees.append(Tree(feature=np.where(leaf, -1, np.asarray(raw["split_indices"])),
                              threshold=np.where(leaf, 0.0, cond), left=left,
                              right=np.asarray(raw["right_children"], dtype=int),
                              value=values))
        super().__init__(model, trees, n_classes, rule="lt", float32=True)

    def read_zero_as_missing(self, binary: list[bool]) -> list[int]:
        """XGBoost reads an absent entry of a sparse matrix as missing: a 0 takes the
        node's default way, not ``0 < threshold``. At a node where the two differ, a
        binary input's split becomes ``x < 0.5`` (0: the default way; 1: its comparison),
        exactly; a node on another input is returned (see the base class)."""
        clash: set[int] = set()
        trees = []
        for tree, default_left in zip(self.structure.trees, self._default_left):
            threshold, left, right = tree.threshold.copy(), tree.left.copy(), tree.right.copy()
            for n in np.flatnonzero(tree.feature >= 0):
                j, theta = int(tree.feature[n]), float(tree.threshold[n])
                missing = tree.left[n] if default_left[n] else tree.right[n]
                zero = tree.left[n] if 0.0 < theta else tree.right[n]
                if missing == zero:
                    continue
                if not binary[j]:
                    clash.add(j)
                    continue
                one = tree.left[n] if 1.0 < theta else tree.right[n]
                # 0 -> missing's child; 1 -> one's child (both there when they agree)
                # pragma: no mutate start (0 and 1 < 2 both go left: "other" is never read)
                other = tree.right[n] if missing == tree.left[n] else tree.left[n]
                # pragma: no mutate end
                threshold[n], left[n], right[n] = (0.5, missing, one) if one != missing \
                    else (2.0, missing, other)  # pragma: no mutate (any value above 1)
            trees.append(Tree(tree.feature, threshold, left, right, tree.value))
        ensemble = self.structure
        self.structure = TreeEnsemble(tuple(trees), ensemble.n_inputs, ensemble.init,
                                      ensemble.rule,
                                      ensemble.float32)  # pragma: no mutate (True: the default)
        self._sparse = True
        return sorted(clash)

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(self._library_input(Z)))

    def output(self, Z: np.ndarray) -> np.ndarray:
        Z = np.atleast_2d(Z)
        out = np.asarray(self.model.predict(self._library_input(Z), output_margin=True),
                         dtype=np.float64)
        return out.reshape(len(Z), -1)  # pragma: no mutate (numpy reads any negative as -1)

    def _library_input(self, Z: np.ndarray) -> Any:
        """``Z`` as the library receives it: sparse after :meth:`read_zero_as_missing`."""
        from scipy import sparse

        Z = np.atleast_2d(Z)
        return sparse.csr_matrix(Z) if self._sparse else Z



#: LightGBM reads an input within this of 0 as 0 (``kZeroThreshold``: 1e-35 as a float)
LIGHTGBM_ZERO = float(np.float32(1e-35))


def _zero_read_threshold(node: dict) -> float:
    """The threshold ``t`` such that LightGBM sends ``x`` left iff ``x <= t``.

    LightGBM reads ``|x| <= LIGHTGBM_ZERO`` as 0 (a sparse zero), which goes the way
    0 compares, or the node's default way when it treats zero as missing
    (``missing_type: "Zero"``); elsewhere ``x <= threshold`` decides. A split whose
    threshold lies in that band (LightGBM puts its zero-bin splits at +-1e-35) moves to
    the band's edge; a split whose left side would not be a half-line is refused."""
    theta, zero = float(node["threshold"]), LIGHTGBM_ZERO
    band_left = bool(node.get("default_left", True)) if node.get("missing_type") == "Zero" \
        else 0.0 <= theta
    if -zero <= theta < zero:
        return zero if band_left else float(np.nextafter(-zero, -np.inf))
    if band_left == (theta >= zero):
        return theta
    raise UnsupportedModelError(
        f"a LightGBM split at {theta!r} sends zero (missing) values "
        f"{'left' if band_left else 'right'} but smaller values the other way; cfopt encodes "
        f"splits whose left side is a half-line (train with zero_as_missing=False)")


class LightGBMAdapter(_BoosterAdapter):
    """``lightgbm.LGBMClassifier`` / ``LGBMRegressor`` with numerical splits."""

    _margin_option = "raw_score"

    def __init__(self, model: Any) -> None:
        n_classes = _n_classes(model)
        dump = model.booster_.dump_model()
        n_out = 1 if n_classes <= 2 else n_classes
        per_iter = int(dump["num_tree_per_iteration"])
        trees = [self._tree(info["tree_structure"],
                            i % per_iter if n_out > 1 else 0,  # pragma: no mutate (i % 1 is 0)
                            n_out)
                 for i, info in enumerate(dump["tree_info"])]
        super().__init__(model, trees, n_classes, rule="le", float32=False)

    @staticmethod
    def _tree(root: dict, cls: int, n_out: int) -> Tree:
        feature, threshold, left, right, values = [], [], [], [], []

        def add(node: dict) -> int:
            idx = len(feature)
            # pragma: no mutate start (a leaf: feature < 0; its threshold and children unread)
            feature.append(-1)
            threshold.append(0.0)
            left.append(-1)
            right.append(-1)
            # pragma: no mutate end
            values.append(np.zeros(n_out))
            if "leaf_value" in node:
                values[idx][cls] = float(node["leaf_value"])
                return idx
            if node.get("decision_type") != "<=":
                raise UnsupportedModelError(f"LightGBM split type {node.get('decision_type')!r}"
                                            f" (categorical) is not supported")
            feature[idx] = int(node["split_feature"])
            threshold[idx] = _zero_read_threshold(node)
            left[idx] = add(node["left_child"])
            right[idx] = add(node["right_child"])
            return idx

        add(root)
        thresholds = np.asarray(threshold, dtype=np.float64)  # pragma: no mutate (floats)
        return Tree(np.asarray(feature), thresholds, np.asarray(left), np.asarray(right),
                    np.asarray(values))
