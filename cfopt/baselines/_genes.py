r"""Per-feature ("gene") representation shared by the population-based baselines.

A *gene matrix* ``G`` (n, d) holds one column per raw feature of a
:class:`~cfopt.FeatureSpace`: a numeric feature's code (its raw value; an ordinal's or a
labelled binary's level position) and a categorical feature's level index. It is the
natural search space of a genetic algorithm (CoGS) and, scaled to [0, 1], of a particle
swarm (MD-PSO). This module maps gene matrices to model inputs and raw rows, and
computes the Gower distance and the L0 count used by both objectives:

.. math::
    \gamma(z, x) = \frac1d\Big(\sum_{i\ \text{numeric}} \frac{|z_i - x_i|}{R_i}
                   + \sum_{j\ \text{categorical}} \mathbb 1[z_j \ne x_j]\Big),
    \qquad \|z - x\|_0 = \#\{i : z_i \ne x_i\},

with :math:`R_i` the feature's range in the data (:attr:`Feature.weight_spread`, the
weight of cfopt's default L1 objective), so :math:`d\,\gamma` is exactly cfopt's
range-weighted L1 distance of a raw row.

It also holds what every model-agnostic baseline needs of the model: its labels as a
function of model-input rows (:func:`label_predictor`), its classes
(:func:`model_classes`) and the target labels of a query (:func:`target_labels`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..results.serialize import json_value
from ..space.space import FeatureSpace


class Genes:
    """The gene layout of a feature space (see the module docstring).

    Attributes:
        d: number of raw features.
        categorical: mask of categorical (one-hot encoded) features.
        n_levels: number of levels of each categorical (0 for numeric features).
        lower, upper: bounds of each gene (codes; ``0, n_levels - 1`` for categoricals).
        spread: the Gower normaliser :math:`R_i` (1 for categoricals).
        integral: genes taking integer values only (integral codes and categoricals).
        immutable: mask of immutable features.
        direction: +1 increase-only, -1 decrease-only, 0 free.
    """

    def __init__(self, space: FeatureSpace) -> None:
        if not isinstance(space, FeatureSpace):
            raise TypeError(f"space must be a FeatureSpace, got {type(space).__name__}")
        features = space.features
        self.space = space
        self.d = len(features)
        self.categorical = np.array([f.is_onehot for f in features], dtype=bool)
        self.n_levels = np.array([len(f.categories) if f.is_onehot else 0 for f in features])
        self.lower = np.array([0.0 if f.is_onehot else f.lower for f in features])
        self.upper = np.array([n - 1.0 if f.is_onehot else f.upper
                               for f, n in zip(features, self.n_levels)])
        self.spread = np.array([f.weight_spread for f in features])
        self.integral = np.array([f.is_onehot or f.is_integral for f in features], dtype=bool)
        self.immutable = np.array([f.immutable for f in features], dtype=bool)
        self.direction = np.array([{"increase": 1, "decrease": -1}.get(f.direction, 0)
                                   for f in features])
        self._slices = list(space.input_slices().values())
        self._shift = np.array([f.shift for f in features])
        self._scale = np.array([f.scale for f in features])

    def of_frame(self, frame: pd.DataFrame) -> np.ndarray:
        """Gene matrix of validated raw rows."""
        Z = self.space.encode(frame)
        G = np.empty((len(frame), self.d))
        for i, sl in enumerate(self._slices):
            if self.categorical[i]:
                G[:, i] = Z[:, sl].argmax(axis=1)
            else:
                G[:, i] = Z[:, sl.start] * self._scale[i] + self._shift[i]
        return G

    def inputs(self, G: np.ndarray) -> np.ndarray:
        """Model inputs (n, n_inputs) of a gene matrix (integral genes rounded)."""
        G = np.atleast_2d(G)
        Z = np.zeros((len(G), self.space.n_inputs))
        rows = np.arange(len(G))
        for i, sl in enumerate(self._slices):
            if self.categorical[i]:
                Z[rows, sl.start + np.rint(G[:, i]).astype(int)] = 1.0
            else:
                code = np.rint(G[:, i]) if self.integral[i] else G[:, i]
                Z[:, sl.start] = (code - self._shift[i]) / self._scale[i]
        return Z

    def frame(self, G: np.ndarray) -> pd.DataFrame:
        """Raw rows (original names, category labels) of a gene matrix."""
        return self.space.inverse_transform(self.inputs(G))

    def changed(self, G: np.ndarray, g0: np.ndarray) -> np.ndarray:
        """Boolean (n, d): which features of each row differ from ``g0``."""
        return G != g0

    def gower(self, G: np.ndarray, g0: np.ndarray) -> np.ndarray:
        r"""Gower distance :math:`\gamma` of each row to ``g0`` (module docstring)."""
        terms = np.where(self.categorical, (G != g0).astype(float), np.abs(G - g0) / self.spread)
        return terms.mean(axis=1)

    def l0(self, G: np.ndarray, g0: np.ndarray) -> np.ndarray:
        """Number of features of each row that differ from ``g0``."""
        return self.changed(G, g0).sum(axis=1)

    def clip(self, G: np.ndarray, g0: np.ndarray) -> np.ndarray:
        """``G`` made plausible in place: integral genes rounded, values clipped to the
        bounds, increase-only (decrease-only) genes clipped at ``g0`` from below (above),
        immutable genes reset to ``g0``."""
        G[:, self.integral] = np.rint(G[:, self.integral])
        np.clip(G, self.lower, self.upper, out=G)
        up, down = self.direction > 0, self.direction < 0
        G[:, up] = np.maximum(G[:, up], g0[up])
        G[:, down] = np.minimum(G[:, down], g0[down])
        G[:, self.immutable] = g0[self.immutable]
        return G


def target_labels(target: Any, factual_class: Any, classes: Any) -> tuple:
    """The target labels as a tuple: ``target`` (a label or a list of labels) checked
    against ``classes``, or every class but the factual's when ``target`` is ``None``.

    Raises:
        ValueError: a label the model does not know, or the factual's own class.
    """
    known = [json_value(c) for c in classes]
    if target is None:
        labels = [c for c in known if c != json_value(factual_class)]
        if not labels:
            raise ValueError(f"the model knows only the factual's class "
                             f"{json_value(factual_class)!r}; there is no other class to reach")
        return tuple(labels)
    labels = list(target) if isinstance(target, (list, tuple, set, np.ndarray)) else [target]
    unknown = [t for t in labels if json_value(t) not in known]
    if unknown:
        raise ValueError(f"target {unknown} is not among the model's classes {known}")
    if any(json_value(t) == json_value(factual_class) for t in labels):
        raise ValueError(f"target {labels} contains the factual's own class "
                         f"{json_value(factual_class)!r}")
    return tuple(json_value(t) for t in labels)


def label_predictor(model: Any, space: FeatureSpace) -> Callable[[np.ndarray], np.ndarray]:
    """A function from model-input rows to predicted labels: a fitted sklearn
    ``Pipeline``'s on the rows decoded to raw units, else the model's ``predict``, a
    model cfopt parses, or the model itself when it is a callable."""
    pipeline = getattr(sys.modules.get("sklearn.pipeline"), "Pipeline", None)
    if pipeline is not None and isinstance(model, pipeline):
        return lambda Z: np.asarray(model.predict(space.inverse_transform(Z)))
    if hasattr(model, "predict"):
        return lambda Z: np.asarray(model.predict(Z))
    from ..errors import UnsupportedModelError
    from ..models import parse_model

    try:
        return parse_model(model).predict
    except UnsupportedModelError:
        if callable(model):
            return lambda Z: np.asarray(model(Z))
        raise TypeError(f"model must have a predict method, be a callable returning labels, "
                        f"or be a model cfopt can parse; got {type(model).__name__}") from None


def model_classes(model: Any, predict: Callable[[np.ndarray], np.ndarray],
                  Z: np.ndarray | None = None) -> tuple:
    """The model's class labels: ``model.classes_`` (sklearn), a parsed model's classes,
    else the distinct predictions on ``Z``."""
    classes = getattr(model, "classes_", None)
    if classes is None:
        from ..errors import UnsupportedModelError
        from ..models import parse_model

        try:
            classes = parse_model(model).classes or None
        except (UnsupportedModelError, TypeError, ValueError):
            classes = None
    if classes is None:
        if Z is None:
            raise ValueError("cannot tell the model's classes: it has no classes_ and is not "
                             "parseable by cfopt; pass training rows")
        classes = np.unique(predict(Z))
    return tuple(json_value(c) for c in classes)


__all__ = ["Genes", "label_predictor", "model_classes", "target_labels"]
