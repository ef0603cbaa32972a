"""ONNX graphs of dense layers (:mod:`cfopt.models.onnx_graph`), built node by node:
the parsed layers reproduce the graph's own output (Gemm with its attributes, MatMul +
Add, final activations, a batch of one), predictions in the graph's own precision, the
sources read (a ModelProto, bytes, a path) and the graphs refused with a message naming
the node."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cfopt.errors import UnsupportedModelError
from cfopt.models.onnx_graph import OnnxAdapter, load_onnx

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

RNG = np.random.default_rng(0)
Z = RNG.normal(size=(12, 3))
W1 = RNG.normal(size=(4, 3))
B1 = RNG.normal(size=4)
W2 = RNG.normal(size=(4, 2))
#: centred on the points: each class (each sign of the first logit) among them
B2 = -np.median(np.maximum(0.0, 0.5 * Z @ W1.T + 2.0 * B1) @ W2, axis=0)


def node(op, inputs, output, name="", **attrs):
    return helper.make_node(op, inputs, [output], name=name, **attrs)


def model(nodes, inits, shape=("N", 3), output="y", elem=TensorProto.FLOAT, extra=(),
          outputs=None, value_info=()):
    dtype = np.float32 if elem == TensorProto.FLOAT else np.float64
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", elem, list(shape)), *extra],
        outputs or [helper.make_tensor_value_info(output, elem, None)],
        initializer=[numpy_helper.from_array(np.asarray(v, dtype=dtype), k)
                     for k, v in inits.items()], value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def two_layers(last=(), k=2, **gemm):
    """Gemm (W1 transposed, alpha 0.5, beta 2) + Relu, MatMul + Add, then ``last``."""
    nodes = [node("Gemm", ["x", "W1", "B1"], "h", name="dense", transB=1, alpha=0.5, beta=2.0,
                  **gemm),
             node("Relu", ["h"], "r"), node("MatMul", ["r", "W2"], "m"),
             node("Add", ["B2", "m"], "y" if not last else "a"), *last]
    return model(nodes, {"W1": W1, "B1": B1, "W2": W2[:, :k], "B2": B2[:k]})


def reference(graph, Z, dtype=np.float32):
    return ReferenceEvaluator(graph).run(None, {"x": np.asarray(Z, dtype=dtype)})[0]


def test_a_graph_reproduces_its_own_output():
    graph = two_layers()
    a = OnnxAdapter(graph)
    assert a.kind == "ONNX graph" and a.model is graph
    assert [layer.relu for layer in a.structure.layers] == [True, False]
    assert np.allclose(a.structure.layers[0].weight, 0.5 * W1.astype(np.float32))
    assert np.allclose(a.structure.layers[0].bias, 2.0 * B1.astype(np.float32))
    assert a.decision == "argmax" and a.classes == (0, 1) and a.transform is None
    logits = a.structure.logits(Z)
    assert np.allclose(logits, reference(graph, Z), rtol=0, atol=1e-5)
    assert np.allclose(a.output(Z), logits, rtol=0, atol=1e-12)
    assert a.output(Z).dtype == np.float64 and a.output(Z[0]).shape == (1, 2)
    assert np.array_equal(a.output_from_logits(logits), logits)
    assert np.array_equal(a.predict(Z), reference(graph, Z).argmax(axis=1))
    assert len(set(a.predict(Z))) == 2


def test_gemm_without_transposition_or_bias():
    for inputs in (["x", "Wt"], ["x", "Wt", ""]):
        graph = model([node("Gemm", inputs, "y")], {"Wt": W1.T})
        a = OnnxAdapter(graph)
        assert a.structure.layers[0].bias.tolist() == [0.0] * 4
        assert np.allclose(a.output(Z), Z @ W1.T.astype(np.float32), atol=1e-12)
        assert np.allclose(a.structure.logits(Z), a.output(Z), atol=1e-12)
    graph = model([node("Gemm", ["x", "Wt", "b"], "y", beta=3.0)], {"Wt": W1.T, "b": [1.0]})
    assert OnnxAdapter(graph).structure.layers[0].bias.tolist() == [3.0] * 4
    graph = model([node("Gemm", ["x", "Wt", "b"], "y")], {"Wt": W1.T, "b": B1})
    a = OnnxAdapter(graph)
    assert np.allclose(a.structure.logits(Z), a.output(Z), atol=1e-12)
    assert np.allclose(a.output(Z), reference(graph, Z), atol=1e-5)
    graph = model([node("Flatten", ["x"], "f"), node("MatMul", ["f", "W"], "y")], {"W": W1.T})
    a = OnnxAdapter(graph)
    assert a.structure.layers[0].bias.tolist() == [0.0] * 4
    assert np.allclose(a.output(Z), reference(graph, Z), atol=1e-5)


@pytest.mark.parametrize("op, transform, k", [("Sigmoid", "sigmoid", 1),
                                              ("Softmax", "softmax", 2),
                                              ("LogSoftmax", "log_softmax", 2)])
def test_final_activations(op, transform, k):
    graph = two_layers([node(op, ["a"], "y")], k=k)
    a = OnnxAdapter(graph)
    assert a.transform == transform and a.decision == ("sign" if k == 1 else "argmax")
    assert a.classes == (0, 1)
    out = reference(graph, Z)
    assert np.allclose(a.output_from_logits(a.structure.logits(Z)), out, atol=1e-5)
    labels = (out[:, 0] > 0.5).astype(int) if k == 1 else out.argmax(axis=1)
    assert np.array_equal(a.predict(Z), labels) and len(set(labels)) == 2


def test_a_batch_of_one_runs_row_by_row():
    """A graph of batch 1 that flattens its whole input (axis 0) runs one row at a time;
    a graph of another fixed batch runs all rows at once."""
    graph = model([node("Flatten", ["x"], "f", axis=0),
                   node("Gemm", ["f", "W", "b"], "y", transB=1)], {"W": W1, "b": B1},
                  shape=(1, 3))
    a = OnnxAdapter(graph)
    assert np.allclose(a.output(Z), Z @ W1.T + B1, atol=1e-5)
    assert a.output(Z).shape == (12, 4)
    assert np.array_equal(a.predict(Z), (Z @ W1.T + B1).argmax(axis=1))
    graph = model([node("Gemm", ["x", "W", "b"], "y", transB=1)], {"W": W1, "b": B1},
                  shape=(12, 3))
    assert np.allclose(OnnxAdapter(graph).output(Z), Z @ W1.T + B1, atol=1e-5)


def test_the_float64_copy_is_a_well_typed_graph():
    from cfopt.models.onnx_graph import _as_float64

    info = [helper.make_tensor_value_info("h", TensorProto.FLOAT, None)]
    graph = model([node("Gemm", ["x", "W", "b"], "h", transB=1), node("Relu", ["h"], "y")],
                  {"W": W1, "b": B1}, value_info=info)
    exact = _as_float64(graph)
    onnx.shape_inference.infer_shapes(exact, check_type=True, strict_mode=True)
    assert exact.graph.value_info[0].type.tensor_type.elem_type == TensorProto.DOUBLE
    assert graph.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT  # a copy
    assert np.array_equal(numpy_helper.to_array(exact.graph.initializer[0]),
                          W1.astype(np.float32).astype(np.float64))


def test_predictions_in_the_graphs_own_precision():
    """1 + 1e-9 is 1 in float32: the float32 graph's logit is 0 (class 0), the exact one
    1e-9 (class 1); a float64 graph predicts class 1."""
    x = np.array([[1.0 + 1e-9]])
    info = [helper.make_tensor_value_info("m", TensorProto.FLOAT, None)]
    for elem, label in ((TensorProto.FLOAT, 0), (TensorProto.DOUBLE, 1)):
        graph = model([node("MatMul", ["x", "W"], "m"), node("Add", ["m", "b"], "y")],
                      {"W": [[1.0]], "b": [-1.0]}, shape=("N", 1), elem=elem,
                      value_info=info if elem == TensorProto.FLOAT else ())
        a = OnnxAdapter(graph)
        assert a.predict(x).tolist() == [label] and a.output(x)[0, 0] > 0
        assert a.output(x).dtype == np.float64
    assert graph.graph.input[0].type.tensor_type.elem_type == TensorProto.DOUBLE


def test_sources_read(tmp_path):
    graph = two_layers()
    assert load_onnx(graph) is graph
    for data in (graph.SerializeToString(), bytearray(graph.SerializeToString())):
        assert np.allclose(OnnxAdapter(data).structure.logits(Z),
                           OnnxAdapter(graph).structure.logits(Z))
    path = tmp_path / "net.onnx"
    onnx.save(graph, str(path))
    for source in (path, str(path)):
        assert load_onnx(source) == graph
    with pytest.raises(UnsupportedModelError, match="^the bytes given are not an ONNX model: "):
        load_onnx(b"\xff\xff\xff")
    with pytest.raises(FileNotFoundError, match=r"^ONNX file '.*absent.onnx' does not exist$"):
        load_onnx(tmp_path / "absent.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\xff\xff\xff")
    with pytest.raises(UnsupportedModelError, match=r"^'.*junk.onnx' is not an ONNX model: "):
        load_onnx(str(tmp_path / "junk.onnx"))
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(UnsupportedModelError, match=r"^'.*empty.onnx' is not an ONNX model "
                                                    r"with a graph \(no nodes found\)$"):
        load_onnx(Path(tmp_path / "empty.onnx"))


def refused(nodes, inits=None, **kwargs):
    return model(nodes, {"W": W1.T, "b": B1, **(inits or {})}, **kwargs)


Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
CASES = {
    "two inputs": (refused([node("MatMul", ["x", "W"], "y")],
                           extra=[helper.make_tensor_value_info("z", TensorProto.FLOAT, None)]),
                   r"^the ONNX graph must have one input and one output, found 2 inputs and 1 "
                   r"outputs$"),
    "two outputs": (refused([node("MatMul", ["x", "W"], "y")], outputs=[Y, Y]),
                    r"found 1 inputs and 2 outputs$"),
    "rank 3": (refused([node("MatMul", ["x", "W"], "y")], shape=("N", 3, 1)),
               r"^the ONNX input 'x' must have shape \[batch, features\] with a fixed feature "
               r"count$"),
    "free width": (refused([node("MatMul", ["x", "W"], "y")], shape=("N", "F")),
                   r"^the ONNX input 'x' must have shape"),
    "branching": (refused([node("MatMul", ["x", "W"], "h"), node("Relu", ["x"], "y", "r")]),
                  r"^ONNX node 'r' \(Relu\) does not continue the chain of layers \(branching "
                  r"graphs are not supported\)$"),
    "after the output": (refused([node("MatMul", ["x", "W"], "h"),
                                  node("Sigmoid", ["h"], "s"), node("Relu", ["s"], "y")]),
                         r"^ONNX node 'Relu' \(Relu\) follows the output sigmoid; it must be "
                         r"the last node$"),
    "transA": (refused([node("Gemm", ["x", "W"], "y", "g", transA=1)]),
               r"^ONNX node 'g' \(Gemm\): transA=1 is not supported$"),
    "gemm data": (refused([node("Gemm", ["W", "x"], "y", "g")]),
                  r"^ONNX node 'g' \(Gemm\): expected data x weight-initializer$"),
    "gemm weight": (refused([node("Gemm", ["x", "x"], "y", "g")]),
                    r"^ONNX node 'g' \(Gemm\): expected data x weight-initializer$"),
    "gemm bias": (refused([node("Gemm", ["x", "W", "x"], "y", "g")]),
                  r"^ONNX node 'g' \(Gemm\): bias must be an initializer$"),
    "matmul data": (refused([node("MatMul", ["W", "x"], "y", "m")]),
                    r"^ONNX node 'm' \(MatMul\): expected data x weight-initializer$"),
    "matmul weight": (refused([node("MatMul", ["x", "x"], "y", "m")]),
                      r"^ONNX node 'm' \(MatMul\): expected data x weight-initializer$"),
    "add after gemm": (refused([node("Gemm", ["x", "W"], "h"), node("Add", ["h", "b"], "y", "a")]),
                       r"^ONNX node 'a' \(Add\): only a bias Add right after MatMul is "
                       r"supported$"),
    "add twice": (refused([node("MatMul", ["x", "W"], "h"), node("Add", ["h", "b"], "h2"),
                           node("Add", ["h2", "b"], "y", "a")]),
                  r"^ONNX node 'a' \(Add\): only a bias Add"),
    "add after relu": (refused([node("MatMul", ["x", "W"], "h"), node("Relu", ["h"], "r"),
                                node("Add", ["r", "b"], "y", "a")]),
                       r"^ONNX node 'a' \(Add\): only a bias Add"),
    "add of data": (refused([node("MatMul", ["x", "W"], "h"), node("Add", ["h", "x"], "y", "a")]),
                    r"^ONNX node 'a' \(Add\): only a bias Add"),
    "add of two": (refused([node("MatMul", ["x", "W"], "h"),
                            node("Add", ["h", "b", "b"], "y", "a")]),
                   r"^ONNX node 'a' \(Add\): only a bias Add"),
    "add first": (refused([node("Add", ["x", "b"], "h", "a"), node("MatMul", ["h", "W"], "y")]),
                  r"^ONNX node 'a' \(Add\): only a bias Add right after MatMul"),
    "relu first": (refused([node("Relu", ["x"], "h"), node("MatMul", ["h", "W"], "y")]),
                   r"^ONNX node 'Relu' \(Relu\) precedes any dense layer$"),
    "late flatten": (refused([node("MatMul", ["x", "W"], "h"), node("Flatten", ["h"], "y", "f")]),
                     r"^ONNX node 'f' \(Flatten\) is only supported before the first dense "
                     r"layer$"),
    "tanh": (refused([node("MatMul", ["x", "W"], "h"), node("Tanh", ["h"], "y", "t")]),
             r"^ONNX node 't' \(Tanh\) is not supported; cfopt encodes chains of Gemm, MatMul, "
             r"Add, Relu, Identity, Dropout, Flatten, Sigmoid, Softmax, LogSoftmax \(hidden "
             r"activations must be Relu\)$"),
    "sigmoid first": (refused([node("Sigmoid", ["x"], "h"), node("MatMul", ["h", "W"], "y")]),
                      r"^ONNX node 'Sigmoid' \(Sigmoid\) is not supported; "),
    "output inside": (refused([node("MatMul", ["x", "W"], "y"), node("Relu", ["y"], "z")]),
                      r"^the ONNX graph output is not the end of the layer chain$"),
    "no dense layer": (refused([node("Identity", ["x"], "y")]),
                       r"^the ONNX graph has no dense layer$"),
    "ends with relu": (refused([node("MatMul", ["x", "W"], "h"), node("Relu", ["h"], "y")]),
                       r"^the ONNX graph ends with Relu; its last dense layer must output the "
                       r"logits$"),
    "width": (refused([node("MatMul", ["x", "W"], "y")], shape=("N", 5)),
              r"^ONNX input width 5 does not match the first layer \(3\)$"),
    "sigmoid of two": (refused([node("MatMul", ["x", "W"], "h"), node("Sigmoid", ["h"], "y")]),
                       r"^a final Sigmoid needs a single output logit$"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_graphs_refused(case):
    graph, message = CASES[case]
    with pytest.raises(UnsupportedModelError, match=message):
        OnnxAdapter(graph)


@pytest.mark.parametrize("axis", [0, -2])
def test_a_graph_that_flattens_its_whole_batch_runs_row_by_row(axis):
    """Flatten axis 0 (or -2) of a variable batch would make many rows one long row: the
    graph runs one row at a time, as a single row would be given to it."""
    graph = model([node("Flatten", ["x"], "f", axis=axis),
                   node("Gemm", ["f", "W", "b"], "y", transB=1)], {"W": W1, "b": B1})
    a = OnnxAdapter(graph)
    assert a.output(Z).shape == (12, 4)
    assert np.allclose(a.output(Z), Z @ W1.T + B1, atol=1e-5)
    assert np.array_equal(a.predict(Z), (Z @ W1.T + B1).argmax(axis=1))


@pytest.mark.parametrize("axis", [2, 3, -3])
def test_a_flatten_that_breaks_rows_apart_is_refused(axis):
    graph = model([node("Flatten", ["x"], "f", axis=axis),
                   node("Gemm", ["f", "W", "b"], "y", transB=1)], {"W": W1, "b": B1})
    with pytest.raises(UnsupportedModelError,
                       match=rf"with axis {axis} does not keep a row's features in one row"):
        OnnxAdapter(graph)
