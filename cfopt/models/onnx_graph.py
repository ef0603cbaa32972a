"""ONNX graphs of dense layers: Gemm, or MatMul + Add, with Relu activations."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import UnsupportedModelError
from .base import ModelAdapter, classify_output, transform_logits
from .network import DenseLayer, ReLUNetwork

_PASSTHROUGH = ("Identity", "Dropout", "Flatten")
_OUTPUT_TRANSFORMS = {"Sigmoid": "sigmoid", "Softmax": "softmax", "LogSoftmax": "log_softmax"}
SUPPORTED_OPS = ("Gemm", "MatMul", "Add", "Relu") + _PASSTHROUGH + tuple(_OUTPUT_TRANSFORMS)


def load_onnx(source: Any) -> Any:
    """An ``onnx.ModelProto`` from a ModelProto, a path, or bytes; clear error otherwise."""
    import onnx

    if isinstance(source, onnx.ModelProto):
        return source
    if isinstance(source, (bytes, bytearray)):
        try:
            return onnx.load_from_string(bytes(source))
        except Exception as exc:  # the protobuf parser raises several types
            raise UnsupportedModelError(f"the bytes given are not an ONNX model: {exc}") from exc
    path = os.fspath(source)
    if not os.path.exists(path):
        raise FileNotFoundError(f"ONNX file {path!r} does not exist")
    try:
        model = onnx.load(path)
    except Exception as exc:
        raise UnsupportedModelError(f"{path!r} is not an ONNX model: {exc}") from exc
    if not model.graph.node:
        raise UnsupportedModelError(f"{path!r} is not an ONNX model with a graph "
                                    f"(no nodes found)")
    return model


def _attr(node: Any, name: str, default: Any) -> Any:
    import onnx

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


class OnnxAdapter(ModelAdapter):
    """An ONNX graph that is a chain of dense layers (see ``SUPPORTED_OPS``).

    One output: class 1 iff logit > 0 (or Sigmoid output > 0.5); several outputs:
    argmax. Predictions run the graph with the ONNX reference runtime
    (``onnx.reference.ReferenceEvaluator``) in the graph's own precision.
    """

    def __init__(self, source: Any) -> None:
        import onnx
        from onnx import numpy_helper
        from onnx.reference import ReferenceEvaluator

        model = load_onnx(source)
        self.model = model
        graph = model.graph
        inits = {t.name: numpy_helper.to_array(t).astype(np.float64)  # pragma: no mutate (float64)
                 for t in graph.initializer}
        inputs = [i for i in graph.input if i.name not in inits]
        if len(inputs) != 1 or len(graph.output) != 1:
            raise UnsupportedModelError(f"the ONNX graph must have one input and one output, "
                                        f"found {len(inputs)} inputs and {len(graph.output)} "
                                        f"outputs")
        dims = inputs[0].type.tensor_type.shape.dim
        if len(dims) != 2 or not dims[1].HasField("dim_value"):
            raise UnsupportedModelError(f"the ONNX input {inputs[0].name!r} must have shape "
                                        f"[batch, features] with a fixed feature count")
        #: run one row at a time: a graph of batch 1, or one that flattens its whole
        #: input (Flatten axis 0: a batch of rows would become one long row)
        self._row_by_row = dims[0].HasField("dim_value") and dims[0].dim_value == 1
        elem = inputs[0].type.tensor_type.elem_type
        self._np_dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
        self._input_name = inputs[0].name
        current = inputs[0].name
        layers: list[list[Any]] = []  # [weight (out,in), bias, relu]
        open_matmul = False  # last layer came from MatMul and may still take an Add bias
        transform = None
        for node in graph.node:
            op, label = node.op_type, f"ONNX node {node.name or node.op_type!r} ({node.op_type})"
            if current not in node.input:
                raise UnsupportedModelError(f"{label} does not continue the chain of layers "
                                            f"(branching graphs are not supported)")
            if transform is not None:
                raise UnsupportedModelError(f"{label} follows the output {transform}; "
                                            f"it must be the last node")
            if op == "Gemm":
                if _attr(node, "transA", 0):  # pragma: no mutate (None is false too)
                    raise UnsupportedModelError(f"{label}: transA=1 is not supported")
                if node.input[0] != current or node.input[1] not in inits:
                    raise UnsupportedModelError(f"{label}: expected data x weight-initializer")
                b_mat = inits[node.input[1]]
                w = (b_mat if _attr(node, "transB", 0) else b_mat.T) * _attr(node, "alpha", 1.0)
                bias = np.zeros(w.shape[0])
                if len(node.input) > 2 and node.input[2]:
                    if node.input[2] not in inits:
                        raise UnsupportedModelError(f"{label}: bias must be an initializer")
                    bias = np.broadcast_to(inits[node.input[2]].reshape(-1) *
                                           _attr(node, "beta", 1.0), (w.shape[0],)).copy()
                layers.append([w, bias, False])
                open_matmul = False
            elif op == "MatMul":
                if node.input[0] != current or node.input[1] not in inits:
                    raise UnsupportedModelError(f"{label}: expected data x weight-initializer")
                layers.append([inits[node.input[1]].T, np.zeros(inits[node.input[1]].shape[1]),
                               False])
                open_matmul = True
            elif op == "Add":
                other = [i for i in node.input if i != current]
                if not (open_matmul and len(other) == 1 and other[0] in inits):
                    raise UnsupportedModelError(f"{label}: only a bias Add right after MatMul "
                                                f"is supported")
                layers[-1][1] = layers[-1][1] + inits[other[0]].reshape(-1)
                open_matmul = False
            elif op == "Relu":
                if not layers:
                    raise UnsupportedModelError(f"{label} precedes any dense layer")
                layers[-1][2] = True
                open_matmul = False
            elif op in _PASSTHROUGH:
                if op == "Flatten" and layers:
                    raise UnsupportedModelError(f"{label} is only supported before the first "
                                                f"dense layer")
                if op == "Flatten":  # of [batch, features]: axis -2 is 0, -1 is 1
                    given = _attr(node, "axis", 1)
                    axis = given + 2 if given < 0 else given
                    if axis not in (0, 1):
                        raise UnsupportedModelError(f"{label} with axis {given} does not keep "
                                                    f"a row's features in one row; use axis 1")
                    self._row_by_row |= axis == 0
            elif op in _OUTPUT_TRANSFORMS and layers:
                transform = _OUTPUT_TRANSFORMS[op]
            else:
                raise UnsupportedModelError(
                    f"{label} is not supported; cfopt encodes chains of "
                    f"{', '.join(SUPPORTED_OPS)} (hidden activations must be Relu)")
            current = node.output[0]
        if current != graph.output[0].name:
            raise UnsupportedModelError("the ONNX graph output is not the end of the layer chain")
        if not layers:
            raise UnsupportedModelError("the ONNX graph has no dense layer")
        if layers[-1][2]:
            raise UnsupportedModelError("the ONNX graph ends with Relu; its last dense layer "
                                        "must output the logits")
        self.structure = ReLUNetwork(tuple(DenseLayer(w, b, r) for w, b, r in layers))
        if self.structure.n_inputs != dims[1].dim_value:
            raise UnsupportedModelError(f"ONNX input width {dims[1].dim_value} does not match "
                                        f"the first layer ({self.structure.n_inputs})")
        k = self.structure.n_outputs
        self.decision = "sign" if k == 1 else "argmax"
        self.transform = transform
        if transform == "sigmoid" and k != 1:
            raise UnsupportedModelError("a final Sigmoid needs a single output logit")
        self.classes = (0, 1) if k == 1 else tuple(range(k))
        self._deployed = ReferenceEvaluator(model)
        self._exact = ReferenceEvaluator(_as_float64(model))

    @property
    def kind(self) -> str:
        return "ONNX graph"

    def _run(self, session: Any, Z: np.ndarray, dtype: Any) -> np.ndarray:
        Z = np.atleast_2d(np.asarray(Z, dtype=dtype))
        if self._row_by_row:
            rows = [session.run(None, {self._input_name: Z[i:i + 1]})[0] for i in range(len(Z))]
            out = np.concatenate(rows, axis=0)  # pragma: no mutate (1-row outputs: reshaped below)
        else:
            out = session.run(None, {self._input_name: Z})[0]
        return np.asarray(out, dtype=np.float64).reshape(len(Z), -1)  # pragma: no mutate (float64)

    def predict(self, Z: np.ndarray) -> np.ndarray:
        out = self._run(self._deployed, Z, self._np_dtype)
        return np.asarray(self.classes)[classify_output(out, self.transform, self.decision)]

    def output(self, Z: np.ndarray) -> np.ndarray:
        return self._run(self._exact, Z, np.float64)  # pragma: no mutate (numpy promotes to it)

    def output_from_logits(self, logits: np.ndarray) -> np.ndarray:
        return transform_logits(logits, self.transform)


def _as_float64(model: Any) -> Any:
    """A copy of a float32 dense-layer graph computing in float64 (to measure encoding
    error apart from float32 rounding)."""
    import onnx
    from onnx import TensorProto, numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    for k, t in enumerate(list(g.initializer)):
        if t.data_type == TensorProto.FLOAT:
            g.initializer[k].CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(t).astype(np.float64), t.name))  # pragma: no mutate (float64)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    return out
