"""Parsing of learned models into cfopt's structures (separate from the formulations)."""

from .base import DenseLayer, ModelAdapter, ReLUNetwork, decide
from .registry import parse_model, register_model, supported_models

__all__ = ["DenseLayer", "ModelAdapter", "ReLUNetwork", "decide", "parse_model",
           "register_model", "supported_models"]
