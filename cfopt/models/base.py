"""The common representation of a parsed learned model.

Parsing (this package) is separate from the Pyomo formulations (``cfopt.formulations``):
a parser reads the user's fitted object once into a :class:`ModelAdapter`, which holds

* the model's *structure* in float64 (for the MILP), e.g. a
  :class:`~cfopt.models.network.ReLUNetwork`;
* the *real* model, used for every prediction that verifies a counterfactual.

The MILP reasons on *logits* (the last affine layer's outputs). A model's decision
rule on logits is ``"sign"`` (one logit, class index 1 iff logit > 0),
``"argmax"`` (one logit per class, ties to the lowest index) or ``"regression"`` (one
output, the prediction itself; no classes).
"""

from __future__ import annotations

import hashlib
import pickle
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from ..space.encoding import InputSpec
    from ..space.space import FeatureSpace

Decision = Literal["sign", "argmax", "regression"]


def decide(logits: np.ndarray, decision: Decision) -> np.ndarray:
    """Class indices of logits under a decision rule."""
    logits = np.atleast_2d(logits)
    if decision == "sign":
        return (logits[:, 0] > 0).astype(int)
    return logits.argmax(axis=1)


class ModelAdapter(ABC):
    """A parsed learned model: its structure for the MILP and the real model for checks.

    Attributes:
        model: the user's original object.
        structure: the float64 structure the formulations encode.
        classes: class labels; ``classes[i]`` is the label of class index ``i``
            (empty for a regressor).
        decision: ``"sign"``, ``"argmax"`` or ``"regression"`` (module docstring).
    """

    model: Any
    structure: Any
    classes: tuple
    decision: Decision

    @property
    def n_inputs(self) -> int:
        return self.structure.n_inputs

    @property
    def n_logits(self) -> int:
        return self.structure.n_outputs

    @property
    def kind(self) -> str:
        """Short human name of the model type."""
        return type(self.model).__name__

    @property
    def is_regressor(self) -> bool:
        return self.decision == "regression"

    @abstractmethod
    def predict(self, Z: np.ndarray) -> np.ndarray:
        """Class labels (regressors: values) predicted by the real model on model-input
        rows (as deployed)."""

    @abstractmethod
    def output(self, Z: np.ndarray) -> np.ndarray:
        """The real model's own numeric output (n, m), in float64 where the model allows.

        ``get_error`` compares it with :meth:`output_from_logits` of the MILP's logits.
        """

    def output_from_logits(self, logits: np.ndarray) -> np.ndarray:
        """Map MILP logits to the space of :meth:`output` (identity by default)."""
        return np.atleast_2d(logits)

    def input_specs(self, space: FeatureSpace) -> list[InputSpec]:
        """How each model input is computed from the raw features of ``space``: the
        space's own transform unless the model brings its own preprocessing."""
        from ..space.encoding import space_specs

        return space_specs(space)

    def model_inputs(self, space: FeatureSpace, rows: pd.DataFrame) -> np.ndarray:
        """The model inputs of valid raw rows, computed as the real model computes them
        (``space.encode`` unless the model brings its own preprocessing)."""
        return space.encode(rows)

    def predict_rows(self, space: FeatureSpace, rows: pd.DataFrame) -> np.ndarray:
        """The real model's predictions on valid raw rows (as deployed)."""
        return self.predict(self.model_inputs(space, rows))

    def read_zero_as_missing(self, binary: list[bool]) -> list[int]:
        """Adopt the reading of a sparse input matrix, where a zero is an absent entry.

        Called when the model receives its inputs as a sparse matrix (a Pipeline whose
        preprocessing outputs one). ``binary[j]``: input ``j`` only takes 0 and 1. Most
        libraries read an absent entry as 0 and nothing changes (the default); a library
        that reads it as *missing* (XGBoost) re-expresses the structure so that it
        predicts as the library does on sparse input, exactly for binary inputs, and
        returns the other inputs at which an exact 0 would take another way than its
        value (the caller must make sure 0 cannot be reached there)."""
        return []

    def fingerprint(self) -> bytes | None:
        """A digest of the user's model object as it is now (its fitted parameters), or
        ``None`` when it cannot be taken (an object that does not pickle).

        The MILP encodes the model as it was parsed; a different digest later means the
        user edited or refitted the model since (:class:`~cfopt.errors.ModelChangedError`). The
        default hashes the pickled model (every sklearn, XGBoost and LightGBM model, ONNX
        protos); adapters with a cheaper exact digest override it."""
        try:
            data = pickle.dumps(self.model, protocol=5)  # pragma: no mutate (any: equal for equal)
        except (pickle.PicklingError, TypeError, AttributeError):
            return None
        return hashlib.blake2b(data, digest_size=16).digest()

    def class_index(self, label: Any) -> int:
        """Index of a class label; ``ValueError`` naming the known labels otherwise."""
        for i, c in enumerate(self.classes):
            if c == label:
                return i
        raise ValueError(f"unknown target class {label!r}; the model's classes are "
                         f"{list(self.classes)}")


def transform_logits(logits: np.ndarray, transform: str | None) -> np.ndarray:
    """A network's output given its logits and final activation
    (``None``, ``"sigmoid"``, ``"softmax"`` or ``"log_softmax"``)."""
    logits = np.atleast_2d(logits)
    if transform == "sigmoid":
        return sigmoid(logits)
    if transform == "softmax":
        return softmax(logits)
    if transform == "log_softmax":
        return np.log(softmax(logits))
    return logits


def classify_output(out: np.ndarray, transform: str | None, decision: Decision) -> np.ndarray:
    """Class indices from a network's output: sigmoid > 0.5, else the logit rule
    (softmax and log-softmax keep the argmax)."""
    if transform == "sigmoid":
        return (np.atleast_2d(out)[:, 0] > 0.5).astype(int)
    return decide(out, decision)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def softmax(x: np.ndarray) -> np.ndarray:
    z = x - x.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)
