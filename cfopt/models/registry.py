"""Registry of model parsers by model type (in the manner of gurobi-machinelearning).

Types are registered by module and class name and resolved lazily, so that
``import cfopt`` does not import torch or onnx, and a type is matched only when its
library is already imported (which it is, if the user holds such a model).
"""

from __future__ import annotations

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


def _torch(model: Any) -> ModelAdapter:
    from .torch_sequential import TorchSequentialAdapter

    return TorchSequentialAdapter(model)


def _onnx(model: Any) -> ModelAdapter:
    from .onnx_graph import OnnxAdapter

    return OnnxAdapter(model)


def _sk_mlp(model: Any) -> ModelAdapter:
    from .sklearn_models import SklearnMLPAdapter

    return SklearnMLPAdapter(model)


def _sk_linear(model: Any) -> ModelAdapter:
    from .sklearn_models import SklearnLinearAdapter

    return SklearnLinearAdapter(model)


def _sk_trees(model: Any) -> ModelAdapter:
    from .trees import SklearnTreeAdapter

    return SklearnTreeAdapter(model)


def _xgboost(model: Any) -> ModelAdapter:
    from .boosters import XGBoostAdapter

    return XGBoostAdapter(model)


def _lightgbm(model: Any) -> ModelAdapter:
    from .boosters import LightGBMAdapter

    return LightGBMAdapter(model)


def _pipeline(model: Any) -> ModelAdapter:
    from .pipeline import PipelineAdapter

    return PipelineAdapter(model)


register_model("torch.nn", "Sequential", _torch)
register_model("onnx", "ModelProto", _onnx)
register_model("sklearn.neural_network", "MLPClassifier", _sk_mlp)
register_model("sklearn.linear_model._base", "LinearClassifierMixin", _sk_linear)
register_model("sklearn.svm", "SVC", _sk_linear)
register_model("sklearn.svm", "NuSVC", _sk_linear)
register_model("sklearn.tree", "DecisionTreeClassifier", _sk_trees)
register_model("sklearn.ensemble", "RandomForestClassifier", _sk_trees)
register_model("sklearn.ensemble", "ExtraTreesClassifier", _sk_trees)
register_model("sklearn.ensemble", "GradientBoostingClassifier", _sk_trees)
register_model("xgboost", "XGBClassifier", _xgboost)
register_model("lightgbm", "LGBMClassifier", _lightgbm)
register_model("sklearn.pipeline", "Pipeline", _pipeline)
