"""PyTorch ``nn.Sequential`` of Linear / ReLU layers."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import numpy as np

from ..errors import UnsupportedModelError
from .base import ModelAdapter, classify_output, transform_logits
from .network import DenseLayer, ReLUNetwork

_PASSTHROUGH = ("Identity", "Dropout", "Flatten")
_OUTPUT_TRANSFORMS = {"Sigmoid": "sigmoid", "Softmax": "softmax", "LogSoftmax": "log_softmax"}


def _flatten(module: Any) -> list[Any]:
    import torch

    if isinstance(module, torch.nn.Sequential):
        return [m for child in module for m in _flatten(child)]
    return [module]


class TorchSequentialAdapter(ModelAdapter):
    """A ``torch.nn.Sequential`` of Linear, ReLU (and Identity, Dropout, Flatten) with an
    optional final Sigmoid / Softmax / LogSoftmax.

    One output: class 1 iff the logit is > 0 (equivalently sigmoid > 0.5); several
    outputs: argmax. Classes are the indices ``0..k-1``.
    """

    def __init__(self, model: Any) -> None:
        import torch

        self.model = model
        modules = _flatten(model)
        layers: list[list[Any]] = []  # [weight, bias, relu]
        transform = None
        for pos, mod in enumerate(modules):
            kind = type(mod).__name__
            if transform is not None:
                # pragma: no mutate start (unreachable: a transform is read at the last layer only)
                raise UnsupportedModelError(
                    f"torch layer {pos - 1} ({transform}) must be the last layer; "
                    f"found layer {pos} ({kind}) after it")
                # pragma: no mutate end
            if isinstance(mod, torch.nn.Linear):
                w = mod.weight.detach().to(torch.float64).cpu().numpy()  # pragma: no mutate (exact)
                b = (mod.bias.detach().to(torch.float64).cpu().numpy() if mod.bias is not None
                     else np.zeros(w.shape[0]))
                layers.append([w, b, False])
            elif isinstance(mod, torch.nn.ReLU):
                if not layers:
                    raise UnsupportedModelError(f"torch layer {pos} (ReLU) precedes any Linear "
                                                f"layer; inputs must enter a Linear layer")
                layers[-1][2] = True
            elif kind in _PASSTHROUGH:
                if kind == "Flatten" and layers:
                    raise UnsupportedModelError(f"torch layer {pos} (Flatten) is only "
                                                f"supported before the first Linear layer")
            elif kind in _OUTPUT_TRANSFORMS and pos == len(modules) - 1 and layers:
                transform = _OUTPUT_TRANSFORMS[kind]
                if kind in ("Softmax", "LogSoftmax") and mod.dim not in (None, -1, 1):
                    raise UnsupportedModelError(f"torch layer {pos} ({kind}) must act on the "
                                                f"class dimension (dim=-1 or 1), got dim={mod.dim}")
            else:
                where = "a hidden" if pos < len(modules) - 1 else "the output"
                raise UnsupportedModelError(
                    f"torch layer {pos} ({kind}) is not supported as {where} layer: cfopt "
                    f"encodes Linear and ReLU layers exactly (with an optional final Sigmoid/"
                    f"Softmax); {kind} is not one of them")
        if not layers:
            raise UnsupportedModelError("the torch Sequential has no Linear layer")
        if layers[-1][2]:
            raise UnsupportedModelError("the torch Sequential ends with ReLU; its last Linear "
                                        "layer must output the logits")
        self.structure = ReLUNetwork(tuple(DenseLayer(w, b, r) for w, b, r in layers))
        k = self.structure.n_outputs
        self.decision = "sign" if k == 1 else "argmax"
        if transform == "sigmoid" and k != 1:
            raise UnsupportedModelError("a final Sigmoid needs a single output logit; use "
                                        "Softmax for several classes")
        if transform in ("softmax", "log_softmax") and k == 1:
            raise UnsupportedModelError("a final Softmax over a single output is constant")
        self.transform = transform
        self.classes = (0, 1) if k == 1 else tuple(range(k))
        self._deployed = copy.deepcopy(model).eval()
        self._dtype = next(self._deployed.parameters()).dtype
        self._exact = copy.deepcopy(model).eval().to(torch.float64)

    def fingerprint(self) -> bytes:
        """A digest of the live network's parameters and buffers (not of the copies this
        adapter predicts with, so an in-place edit of the user's network shows)."""
        digest = hashlib.blake2b(digest_size=16)
        for name, tensor in self.model.state_dict().items():
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.digest()

    def _forward(self, module: Any, Z: np.ndarray, dtype: Any) -> np.ndarray:
        import torch

        with torch.no_grad():
            out = module(torch.as_tensor(np.asarray(Z), dtype=dtype))
        # pragma: no mutate start (float64: astype's default; numpy reads any negative as -1)
        return out.detach().cpu().numpy().astype(np.float64).reshape(len(Z), -1)
        # pragma: no mutate end

    def predict(self, Z: np.ndarray) -> np.ndarray:
        out = self._forward(self._deployed, np.atleast_2d(Z), self._dtype)
        return np.asarray(self.classes)[classify_output(out, self.transform, self.decision)]

    def output(self, Z: np.ndarray) -> np.ndarray:
        import torch

        return self._forward(self._exact, np.atleast_2d(Z), torch.float64)

    def output_from_logits(self, logits: np.ndarray) -> np.ndarray:
        return transform_logits(logits, self.transform)
