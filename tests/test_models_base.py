"""The common representation of a parsed model (:mod:`cfopt.models.base`): decision
rules on logits, the adapter's defaults, its fingerprint and class lookup, and the output
transforms of a network."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest

from cfopt.models.base import (
    ModelAdapter,
    classify_output,
    decide,
    sigmoid,
    softmax,
    transform_logits,
)
from cfopt.models.network import DenseLayer, ReLUNetwork
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace


class Scripted(ModelAdapter):
    def __init__(self, model, classes=("no", "yes"), decision="sign"):
        self.model, self.classes, self.decision = model, classes, decision
        self.structure = ReLUNetwork((DenseLayer(np.array([[1.0, -1.0]]), np.array([0.5]),
                                                 False),))

    def predict(self, Z):
        return np.array(self.classes)[decide(self.structure.logits(Z), self.decision)]

    def output(self, Z):
        return self.structure.logits(Z)


def test_decisions():
    logits = np.array([[0.0, 1.0], [2.0, -1.0], [-0.5, -0.5], [1e-300, 0.0]])
    assert decide(logits, "sign").tolist() == [0, 1, 0, 1]
    assert decide(logits, "argmax").tolist() == [1, 0, 0, 0]  # ties to the lowest
    assert decide(np.array([3.0, 4.0]), "argmax").tolist() == [1]
    assert decide(np.array([-1.0]), "sign").tolist() == [0]


def test_the_adapters_defaults():
    a = Scripted({"w": 1})
    assert (a.n_inputs, a.n_logits, a.kind) == (2, 1, "dict")
    assert not a.is_regressor and Scripted(1, (), "regression").is_regressor
    assert np.array_equal(a.output_from_logits(np.array([1.0, 2.0])), [[1.0, 2.0]])
    space = FeatureSpace([Feature("a", "continuous", lower=0, upper=4, scale=4.0),
                          Feature("c", "categorical", categories=("p", "q"))])
    specs = a.input_specs(space)
    assert [s.kind for s in specs] == ["affine", "indicator", "indicator"]
    rows = pd.DataFrame({"a": [1.0, 3.0], "c": ["q", "p"]})
    assert np.array_equal(a.model_inputs(space, rows), space.encode(rows))
    b = Scripted(1, decision="argmax")
    b.structure = ReLUNetwork((DenseLayer(np.array([[1.0, 0, 0], [0, 1.0, 0]]),
                                          np.zeros(2), False),))
    assert b.predict_rows(space, rows).tolist() == ["no", "yes"]
    assert a.read_zero_as_missing([True, False]) == []


def test_fingerprints_follow_the_model():
    a = Scripted({"w": [1.0, 2.0]})
    first = a.fingerprint()
    assert isinstance(first, bytes) and len(first) == 16
    assert Scripted({"w": [1.0, 2.0]}).fingerprint() == first
    a.model["w"][0] = 1.5
    assert a.fingerprint() != first
    assert Scripted(threading.Lock()).fingerprint() is None  # does not pickle
    assert Scripted(lambda z: z).fingerprint() is None


def test_class_index():
    a = Scripted(None, classes=(0, "yes", 2.5))
    assert [a.class_index(c) for c in (0, "yes", 2.5)] == [0, 1, 2]
    assert a.class_index(np.int64(0)) == 0
    with pytest.raises(ValueError, match=r"^unknown target class 'no'; the model's classes "
                                         r"are \[0, 'yes', 2.5\]$"):
        a.class_index("no")


def test_transforms_and_classes_of_a_networks_output():
    logits = np.array([[0.0, 1.0], [2.0, -3.0]])
    assert np.array_equal(transform_logits(logits, None), logits)
    assert np.array_equal(transform_logits(np.array([1.0, 2.0]), None), [[1.0, 2.0]])
    assert np.allclose(transform_logits(logits, "sigmoid"), 1 / (1 + np.exp(-logits)))
    e = np.exp(logits)
    assert np.allclose(transform_logits(logits, "softmax"), e / e.sum(axis=1, keepdims=True))
    assert np.allclose(transform_logits(logits, "log_softmax"),
                       np.log(e / e.sum(axis=1, keepdims=True)))
    assert classify_output(np.array([[0.5], [0.51], [0.2]]), "sigmoid", "sign").tolist() == [
        0, 1, 0]
    assert classify_output(np.array([0.7]), "sigmoid", "sign").tolist() == [1]
    assert classify_output(np.array([[0.1], [-0.1]]), None, "sign").tolist() == [1, 0]
    assert classify_output(logits, "softmax", "argmax").tolist() == [1, 0]
    assert sigmoid(np.array([0.0, 2.0])) == pytest.approx([0.5, 1 / (1 + np.exp(-2))])
    big = softmax(np.array([[1000.0, 1000.0 + np.log(3)]]))  # no overflow
    assert np.allclose(big, [[0.25, 0.75]])


def test_decisions_index_the_classes_and_softmax_is_per_row():
    classes = np.array(["no", "yes"])
    logits = np.array([[-1.0], [2.0]])
    assert classes[decide(logits, "sign")].tolist() == ["no", "yes"]
    assert classes[classify_output(np.array([[0.2], [0.7]]), "sigmoid", "sign")].tolist() == [
        "no", "yes"]
    rows = softmax(np.array([[1000.0, 1000.0 + np.log(3)], [0.0, np.log(3)]]))
    assert np.allclose(rows, [[0.25, 0.75], [0.25, 0.75]])
