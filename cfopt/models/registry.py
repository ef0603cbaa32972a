"""Registry of model parsers by model type (in the manner of gurobi-machinelearning).

Types are registered by module and class name and resolved lazily, so that
``import cfopt`` does not import torch or onnx, and a type is matched only when its
library is already imported (which it is, if the user holds such a model).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from ..errors import UnsupportedModelError
from .base import ModelAdapter

Parser = Callable[[Any], ModelAdapter]

_REGISTRY: list[tuple[str, str, Parser]] = []


def register_model(module: str, class_name: str, parser: Parser) -> None:
    """Register ``parser`` for instances of ``module.class_name`` (and subclasses).

    Later registrations take precedence, so a user can override a built-in parser.
    """
    _REGISTRY.insert(0, (module, class_name, parser))


def supported_models() -> list[str]:
    """Registered model types, as ``module.ClassName``."""
    return [f"{m}.{c}" for m, c, _ in reversed(_REGISTRY)]


def parse_model(model: Any) -> ModelAdapter:
    """The :class:`ModelAdapter` of a fitted model, an ONNX ModelProto or an ONNX path."""
    if isinstance(model, ModelAdapter):
        return model
    if isinstance(model, (str, os.PathLike, bytes, bytearray)):
        from .onnx_graph import OnnxAdapter

        return OnnxAdapter(model)
    for module, class_name, parser in _REGISTRY:
        mod = sys.modules.get(module)
        cls = getattr(mod, class_name, None) if mod is not None else None
        if cls is not None and isinstance(model, cls):
            return parser(model)
    hint = ""
    if "torch" in sys.modules and isinstance(model, sys.modules["torch"].nn.Module):
        hint = (" (a torch model must be an nn.Sequential of Linear/ReLU layers; export "
                "other architectures to ONNX)")
    raise UnsupportedModelError(f"unsupported model type {type(model).__module__}."
                                f"{type(model).__name__}{hint}; supported: "
                                f"{', '.join(supported_models())}, ONNX files")


def _lazy(module: str, adapter: str) -> Parser:
    """A parser importing ``adapter`` from ``cfopt.models.<module>`` on first use."""

    def parse(model: Any) -> ModelAdapter:
        return getattr(importlib.import_module(f"{__package__}.{module}"), adapter)(model)

    return parse


for _module, _cls, _where, _adapter in [
    ("torch.nn", "Sequential", "torch_sequential", "TorchSequentialAdapter"),
    ("onnx", "ModelProto", "onnx_graph", "OnnxAdapter"),
    ("sklearn.neural_network", "MLPClassifier", "sklearn_models", "SklearnMLPAdapter"),
    ("sklearn.neural_network", "MLPRegressor", "sklearn_models", "SklearnMLPAdapter"),
    ("sklearn.linear_model._base", "LinearModel", "sklearn_models", "SklearnLinearAdapter"),
    ("sklearn.linear_model._base", "LinearClassifierMixin", "sklearn_models",
     "SklearnLinearAdapter"),
    ("sklearn.svm", "SVC", "sklearn_models", "SklearnLinearAdapter"),
    ("sklearn.svm", "NuSVC", "sklearn_models", "SklearnLinearAdapter"),
    *[("sklearn.tree", f"DecisionTree{kind}", "trees", "SklearnTreeAdapter")
      for kind in ("Classifier", "Regressor")],
    *[("sklearn.ensemble", f"{family}{kind}", "trees", "SklearnTreeAdapter")
      for family in ("RandomForest", "ExtraTrees", "GradientBoosting", "HistGradientBoosting")
      for kind in ("Classifier", "Regressor")],
    *[("xgboost", f"XGB{kind}", "boosters", "XGBoostAdapter")
      for kind in ("Classifier", "Regressor")],
    *[("lightgbm", f"LGBM{kind}", "boosters", "LightGBMAdapter")
      for kind in ("Classifier", "Regressor")],
    ("sklearn.pipeline", "Pipeline", "pipeline", "PipelineAdapter"),
]:
    register_model(_module, _cls, _lazy(_where, _adapter))
