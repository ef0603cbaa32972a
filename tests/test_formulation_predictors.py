"""What every embedded model shares (:mod:`cfopt.formulations.predictors.base`): the
block's model inputs on the unit box, :func:`add_predictor`'s checks, links and options,
the registry, the defaults of an encoding without layers or splits, and get_error (which
finds a loose encoding and an infeasible one, and refuses rows outside the box), on tiny
hand-built models."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyomo.environ as pyo
import pytest
from sklearn.neural_network import MLPClassifier
from sklearn.tree import DecisionTreeClassifier

import cfopt
from cfopt.formulations.bound_tightening import relax_integrality
from cfopt.formulations.predictors import PredictorConstr, add_predictor, register_formulation
from cfopt.formulations.robustness import ShiftedNetwork
from cfopt.models import ModelAdapter

LINEAR = [(np.array([[1.0, -2.0, 0.5]]), np.array([0.25]))]
#: over BOX both hidden neurons straddle 0: [-2, 3] and [-2, 1.5]
NETWORK = [(np.array([[1.0, 0.0, 0.0], [0.5, -0.25, 0.0]]), np.array([0.0, 2.5])),
           (np.array([[1.0, -1.5]]), np.array([0.2]))]
BOX = [(-2.0, 3.0), (10.0, 14.0), (5.0, 5.0)]  # the last input fixed


def embed(params, bounds=BOX, **options) -> PredictorConstr:
    return add_predictor(pyo.ConcreteModel(), ShiftedNetwork(params), input_bounds=bounds,
                         **options)


def test_the_model_inputs_are_the_unit_inputs_scaled_to_the_box():
    pred = embed(LINEAR)
    assert pred.input_bounds == [(-2.0, 3.0), (10.0, 14.0), (5.0, 5.0)]
    assert all(type(v) is float for bound in pred.input_bounds for v in bound)
    for i, t in enumerate((0.2, 0.75, 0.0)):
        pred.unit_inputs[i].fix(t)
    assert [pyo.value(pred.inputs[i]) for i in range(3)] == [-1.0, 13.0, 5.0]
    assert pred.inputs is pred.block.model_inputs and pred.unit_inputs is pred.block.inputs
    assert pred.outputs is pred.block.outputs
    assert pred.output_bounds() == [(-2.0 - 28.0 + 2.5 + 0.25, 3.0 - 20.0 + 2.5 + 0.25)]


def test_an_encoding_without_layers_or_splits_has_the_defaults():
    pred = embed(LINEAR)
    m = pred.block.model()
    assert pred.input_region() is None and pred.input_region([0.0, 12.0, 5.0]) is None
    assert pred.fix_choices(pred.block, np.zeros(3)) == []
    assert pred.fix_pattern(np.zeros(3)) == []
    assert pred.set_factual_inputs([0.0] * 3, [0.0] * 3, [(True, True)] * 3) == []
    assert pred.per_query is False and pred.cuts() == {} and pred.split_values() == {}
    assert pred.dense_layers() == [] and pred.layer_bounds() == []
    assert pred.set_layer_bounds([]) == 0
    assert pred.set_input_box(np.zeros(3), np.ones(3)) == 0
    m.w = pyo.Var(range(2))
    assert pred.vertex_envelope(np.zeros((2, 3)), [m.w[0], m.w[1]]) is None
    with pytest.raises(IndexError, match="the ReLUNetwork encoding has no dense layer 1"):
        pred.set_neuron_bounds(1, 0, 0.0, 1.0)


def test_inputs_are_linked_and_their_bounds_read_from_them():
    """With variables as inputs: the link rows tie them to the unit inputs, and the box
    is their bounds (FBBT of expressions too), under the given name."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(2), bounds=(-1.0, 1.0))
    m.y = pyo.Var(bounds=(2.0, 4.0))
    inputs = [m.x[0], 2 * m.x[1] + 1, m.y]
    pred = add_predictor(m, ShiftedNetwork(LINEAR), inputs, name="net")
    assert m.net is pred.block and m.net_link is not None
    assert pred.input_bounds == [(-1.0, 1.0), (-1.0, 3.0), (2.0, 4.0)]
    m.x[0].fix(0.5)
    m.x[1].fix(-0.5)
    m.y.fix(3.0)
    m.objective = pyo.Objective(expr=pred.outputs[0])
    outcome = cfopt.solvers.make_solver("highs").solve(m, cfopt.solvers.SolverSettings())
    assert outcome.status is cfopt.Status.OPTIMAL
    assert pyo.value(pred.outputs[0]) == pytest.approx(0.5 - 0.0 + 1.5 + 0.25)
    assert [pyo.value(pred.unit_inputs[i]) for i in range(3)] == pytest.approx(
        [0.75, 0.25, 0.5])


def test_add_predictor_refuses_what_it_cannot_encode():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), bounds=(0.0, 1.0))
    m.free = pyo.Var()
    adapter = ShiftedNetwork(LINEAR)
    with pytest.raises(ValueError, match="the ReLUNetwork model takes 3 inputs, but 2 were given"):
        add_predictor(m, adapter, [m.x[0], m.x[1]])
    with pytest.raises(ValueError, match="give input_bounds .*big-M formulations need a "
                                         "bounded input box"):
        add_predictor(m, adapter)
    with pytest.raises(ValueError, match=r"model input 2 has no finite bounds \(None, None\)"):
        add_predictor(m, adapter, [m.x[0], m.x[1], m.free])
    for bad in ((0.0, math.inf), (-math.inf, 0.0), (math.nan, 1.0)):
        with pytest.raises(ValueError, match="model input 1 has no finite bounds"):
            add_predictor(m, adapter, input_bounds=[(0.0, 1.0), bad, (0.0, 1.0)])
    with pytest.raises(ValueError, match="input_grids has 2 entries for 3 inputs"):
        add_predictor(m, adapter, input_bounds=BOX, input_grids=[None, None])
    with pytest.raises(ValueError, match="input_rounding has 1 entries for 3 inputs"):
        add_predictor(m, adapter, input_bounds=BOX, input_rounding=[0.0])
    with pytest.raises(ValueError, match="formulation='leaf' applies to tree ensembles; the "
                                         "ReLUNetwork model has a single formulation"):
        add_predictor(m, adapter, input_bounds=BOX, formulation="leaf")
    with pytest.raises(ValueError, match="per_query applies to tree ensembles, not to the "
                                         "ReLUNetwork model"):
        add_predictor(m, adapter, input_bounds=BOX, per_query=True)
    assert add_predictor(m, adapter, input_bounds=BOX, per_query=None, name="p").per_query \
        is False
    m.low = pyo.Var(bounds=(0.0, None))
    m.high = pyo.Var(bounds=(None, 1.0))
    for one_sided, shown in ((m.low, r"\(0.0, None\)"), (m.high, r"\(None, 1.0\)")):
        with pytest.raises(ValueError, match=f"model input 2 has no finite bounds {shown}"):
            add_predictor(m, adapter, [m.x[0], m.x[1], one_sided])
    pred = add_predictor(m, adapter, [m.x[0], m.x[1], m.x[2]])  # the default name
    assert m.predictor is pred.block and m.predictor_link is not None


def test_the_registry_finds_a_structures_builder_by_its_classes():
    """A structure of a subclass of a registered type takes its builder; an unknown one is
    refused; options other than formulation and per_query are refused."""

    class Wider(cfopt.models.ReLUNetwork):
        pass

    adapter = ShiftedNetwork(NETWORK)
    adapter.structure = Wider(adapter.structure.layers)
    pred = add_predictor(pyo.ConcreteModel(), adapter, input_bounds=BOX)
    assert len(pred.dense_layers()) == 2

    class Unknown:
        n_inputs = 3
        n_outputs = 1

    adapter.structure = Unknown()
    with pytest.raises(TypeError, match="no formulation registered for Unknown"):
        add_predictor(pyo.ConcreteModel(), adapter, input_bounds=BOX)
    with pytest.raises(ValueError, match=r"unknown builder option\(s\) \['grids', 'x'\]: use "
                                         r"'formulation', 'per_query'"):
        register_formulation(Unknown, options=("x", "grids", "per_query"))


class Custom:
    """A structure type of its own, with a builder that records what it receives."""

    n_inputs, n_outputs = 2, 1


class CustomModel(ModelAdapter):
    def __init__(self) -> None:
        self.structure = Custom()
        self.model = self.structure
        self.decision, self.classes = "regression", ()

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return np.zeros(len(Z))

    def output(self, Z: np.ndarray) -> np.ndarray:
        return np.zeros((len(Z), 1))


RECEIVED: list[dict[str, Any]] = []


def build_custom(block, name, adapter, bounds, **options) -> PredictorConstr:
    RECEIVED.append({"name": name, "bounds": bounds, **options})
    sub = pyo.Block()
    block.add_component(name, sub)
    sub.inputs = pyo.Var(range(2), bounds=(0.0, 1.0))
    sub.outputs = pyo.Var(range(1))
    return PredictorConstr(sub, adapter, bounds)


def test_a_builder_registered_with_options_receives_them():
    """The builder gets the name, the box as floats, the grids, rounding and
    library_input, and the options it declared; per_query it did not declare is
    refused."""
    RECEIVED.clear()
    assert register_formulation(Custom, options=("formulation",))(build_custom) is build_custom
    reader = float.__add__
    pred = add_predictor(pyo.ConcreteModel(), CustomModel(), input_bounds=[(0, 1), (2, 5)],
                         input_grids=[None, (0.0, 1.0)], input_rounding=[1e-9, 0.0],
                         library_input=reader, formulation="mine", name="custom")
    assert isinstance(pred, PredictorConstr) and pred.block.name == "custom"
    (got,) = RECEIVED
    assert got == {"name": "custom", "bounds": [(0.0, 1.0), (2.0, 5.0)],
                   "grids": [None, (0.0, 1.0)], "rounding": [1e-9, 0.0],
                   "library_input": reader, "formulation": "mine"}
    assert all(type(v) is float for bound in got["bounds"] for v in bound)
    with pytest.raises(ValueError, match="per_query applies to tree ensembles"):
        add_predictor(pyo.ConcreteModel(), CustomModel(), input_bounds=[(0, 1)] * 2,
                      per_query=True)


def test_options_reach_the_tree_builder():
    X = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.2, 0.8, 1.0], [0.9, 0.1, 1.0]])
    tree = DecisionTreeClassifier(random_state=0).fit(X, [0, 1, 1, 0])
    box = [(0.0, 1.0)] * 3
    pred = add_predictor(pyo.ConcreteModel(), tree, input_bounds=box, formulation="threshold",
                         per_query=True)
    assert pred.per_query and pred.block.formulation == "threshold"
    grids = add_predictor(pyo.ConcreteModel(), tree, input_bounds=box,
                          input_grids=[None, None, (0.0, 1.0)], input_rounding=[0.0] * 3)
    (cut,) = [c for c in grids.cuts().values() if c.input == 2] or [None]
    assert cut is None or (cut.left, cut.right) == (0.0, 1.0)
    assert grids.get_error(X) <= 1e-12


def test_get_error_measures_the_encoding_against_the_model():
    """Exact: 0; with the ReLU binaries relaxed (a loose encoding) the largest logit
    gap at a point; infeasible at a point: inf; rows of another width or outside the
    box are refused."""
    pred = embed(NETWORK)
    points = np.array([[-2.0, 10.0, 5.0], [3.0, 14.0, 5.0], [0.5, 12.0, 5.0]])
    assert pred.get_error(points) <= 1e-9
    assert pred.get_error(points[0]) <= 1e-9  # one row
    relax_integrality(pred.block)
    assert pred.get_error(points) > 0.1
    exact = embed(NETWORK)
    net = exact.adapter.structure
    lb, ub = net.box_bounds(np.array([-2.0, 10.0, 5.0]), np.array([3.0, 14.0, 5.0]))[0]
    exact.set_layer_bounds([(lb, ub), (np.array([5.0]), np.array([6.0]))])  # logit excluded
    assert exact.get_error(points[:1]) == math.inf
    with pytest.raises(ValueError, match="expected rows of 3 model inputs, got 2"):
        pred.get_error(np.zeros((1, 2)))
    with pytest.raises(ValueError, match=r"row 1: input 1 = 14.5 is outside the block's "
                                         r"input bounds \[10.0, 14.0\]"):
        pred.get_error(np.array([[0.0, 12.0, 5.0], [0.0, 14.5, 5.0]]))
    for row in ([3.0 + 1e-9, 14.0, 5.0], [-2.0 - 1e-9, 10.0, 5.0]):  # within 1e-9: read
        assert pred.get_error(np.array([row])) < math.inf
    with pytest.raises(ValueError, match="row 0: input 0 = -2.000001 is outside"):
        pred.get_error(np.array([[-2.0 - 1e-6, 10.0, 5.0]]))


def test_get_error_finds_an_encoding_loose_on_its_upper_side_only():
    """Positive outgoing weights: relaxed ReLU binaries only let the logit rise above the
    network's, which the maximisation finds."""
    params = [NETWORK[0], (np.array([[1.0, 1.5]]), np.array([0.2]))]
    pred = embed(params)
    relax_integrality(pred.block)
    assert pred.get_error(np.array([[0.5, 12.0, 5.0]])) > 0.1


def test_get_error_compares_in_the_models_own_output_space():
    """An sklearn MLP's output is a probability: the encoding's logit is mapped to it."""
    X = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.2, 0.8, 1.0], [0.9, 0.1, 1.0]])
    mlp = MLPClassifier(hidden_layer_sizes=(2,), max_iter=1, random_state=0)
    with pytest.warns(Warning):
        mlp.fit(X, [0, 1, 1, 0])
    mlp.coefs_ = [NETWORK[0][0].T.copy(), NETWORK[1][0].T.copy()]
    mlp.intercepts_ = [NETWORK[0][1].copy(), NETWORK[1][1].copy()]
    pred = add_predictor(pyo.ConcreteModel(), mlp, input_bounds=[(0.0, 1.0)] * 3)
    assert pred.get_error(X) <= 1e-9
