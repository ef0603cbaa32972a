"""Parsing of learned models into cfopt's structures (separate from the formulations)."""

from .base import ModelAdapter, decide
from .network import DenseLayer, ReLUNetwork
from .registry import parse_model, register_model, supported_models

__all__ = ["DenseLayer", "ModelAdapter", "ReLUNetwork", "decide", "parse_model",
           "register_model", "supported_models"]
