"""MIP starts for HiGHS completed before the run (``cfopt/solvers/highs_start.py``) and
the ReLU binaries of a start (``NetworkPredictorConstr.start_choices``).

``tests/data/highs_start/``: a default ``MLPClassifier`` pipeline on German credit
(bundled), rejected row 4, its model restricted around the heuristic point as cfopt
solves it, and that point as cfopt's start (the features and every ReLU binary)."""

from __future__ import annotations

import json
from pathlib import Path

import highspy
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

import cfopt
from cfopt.query.solution import start_of
from cfopt.solvers.base import SolverSettings
from cfopt.solvers.highs import HighsBackend
from cfopt.solvers.highs_start import completed_start, starting_from

DATA = Path(__file__).parent / "data" / "highs_start"

#: min x + y + z, x integer in [0, 10]; y >= x - 2.5, y + z >= 1.5
SMALL = """Minimize
 obj: x + y + z
Subject To
 c1: y - x >= -2.5
 c2: y + z >= 1.5
Bounds
 0 <= x <= 10
 0 <= y <= 100
 0 <= z <= 100
General
 x
End
"""


def highs_of(text: str, tmp_path: Path) -> highspy.Highs:
    path = tmp_path / "model.lp"
    path.write_text(text)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    return h


def column(h: highspy.Highs, name: str) -> int:
    return list(h.getLp().col_names_).index(name)


def start(h: highspy.Highs, **values: float) -> tuple[np.ndarray, np.ndarray]:
    index = np.array([column(h, k) for k in values], dtype=np.int32)
    return index, np.array(list(values.values()), dtype=float)


def named(h: highspy.Highs, x: np.ndarray) -> dict[str, float]:
    return dict(zip(h.getLp().col_names_, x.tolist()))


def test_the_integers_fixed_the_rest_at_least_cost(tmp_path):
    h = highs_of(SMALL, tmp_path)
    full = completed_start(h, *start(h, x=4))
    assert named(h, full) == pytest.approx({"x": 4.0, "y": 1.5, "z": 0.0}, abs=1e-12)
    # a given continuous value is not kept: the rows set it
    full = completed_start(h, *start(h, x=4, y=50.0, z=3.0))
    assert named(h, full) == pytest.approx({"x": 4.0, "y": 1.5, "z": 0.0}, abs=1e-12)
    # an integer within rounding is rounded, one beyond a bound is brought to it
    assert named(h, completed_start(h, *start(h, x=3.9999999)))["x"] == 4.0
    assert named(h, completed_start(h, *start(h, x=12)))["x"] == 10.0
    assert named(h, completed_start(h, *start(h, x=12)))["y"] == pytest.approx(7.5)
    assert named(h, completed_start(h, *start(h, x=-3)))["x"] == 0.0
    # the model itself is left as it was: x still integer, its bounds [0, 10]
    lp = h.getLp()
    assert list(lp.col_lower_) == [0.0, 0.0, 0.0] and list(lp.col_upper_) == [10.0, 100, 100]
    assert [int(t) for t in lp.integrality_] == [1, 0, 0]


def test_no_completion_without_every_integer_or_any_integer(tmp_path):
    h = highs_of(SMALL, tmp_path)
    assert completed_start(h, *start(h, y=2.0, z=0.0)) is None
    lp_only = highs_of(SMALL.replace("General\n x\n", ""), tmp_path)
    assert completed_start(lp_only, *start(lp_only, x=4, y=1.5, z=0.0)) is None


def test_no_completion_of_a_start_outside_the_model(tmp_path):
    h = highs_of(SMALL.replace(" c2:", " c3: x + y <= 5\n c2:"), tmp_path)
    assert completed_start(h, *start(h, x=4)) is None  # y >= 1.5 and y <= 1
    assert named(h, completed_start(h, *start(h, x=3)))["y"] == pytest.approx(0.5)


def test_the_completion_is_silent_and_within_its_seconds(tmp_path, capfd):
    """The completion LP prints no log (cfopt's own solve decides what is shown) and
    gives up after its ``seconds``: no completion without time for it."""
    h = highs_of(SMALL, tmp_path)
    capfd.readouterr()
    assert named(h, completed_start(h, *start(h, x=4)))["y"] == pytest.approx(1.5)
    assert capfd.readouterr().out == ""
    assert completed_start(h, *start(h, x=4), seconds=0.0) is None


def test_an_empty_start_offers_nothing(tmp_path):
    h = highs_of(SMALL, tmp_path)
    calls = []
    h.cbMipUserSolution.subscribe(lambda event: calls.append(1))
    with starting_from(h, np.array([], dtype=np.int32), np.array([])) as whole:
        h.run()
    assert not whole and h.getInfo().objective_function_value == pytest.approx(1.5)


def network_query() -> tuple[highspy.Highs, np.ndarray, np.ndarray]:
    """The German MLP model with cfopt's options, told to stop at its first solution
    with no heuristic effort, and cfopt's start (one thread, as cfopt runs it: the
    process's thread scheduler restarted for that count)."""
    highspy.Highs.resetGlobalScheduler(True)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(DATA / "model.mps.gz"))
    settings = SolverSettings(time_limit=30.0, mip_gap=1e-4, threads=1, seed=0)
    for key, value in {"mip_rel_gap": 1e-4, "threads": 1, "time_limit": 30.0,
                       **HighsBackend()._solver_options(settings),
                       "mip_max_improving_sols": 1, "mip_heuristic_effort": 0.0}.items():
        h.setOptionValue(key, value)
    given = json.loads((DATA / "start.json").read_text())
    return h, np.array(given["columns"], dtype=np.int32), np.array(given["values"])


def violation(h: highspy.Highs, x: np.ndarray) -> float:
    lp = h.getLp()
    a = lp.a_matrix_
    activity = sp.csc_matrix((a.value_, a.index_, a.start_),
                             shape=(lp.num_row_, lp.num_col_)) @ x
    rows = np.maximum(np.array(lp.row_lower_) - activity, activity - np.array(lp.row_upper_))
    cols = np.maximum(np.array(lp.col_lower_) - x, x - np.array(lp.col_upper_))
    return float(max(rows.max(), cols.max()))


def test_a_network_start_is_completed_within_the_mip_tolerance():
    """The completion is a point HiGHS accepts: its rows hold within 1e-8, cfopt's MIP
    feasibility tolerance (after presolve, the completion of an Adult MLP's start broke
    a row by 9e-8)."""
    h, index, values = network_query()
    full = completed_start(h, index, values)
    assert full is not None and violation(h, full) <= 1e-8
    lp = h.getLp()
    assert float(np.dot(lp.col_cost_, full) + lp.offset_) == pytest.approx(0.29411764705882)


def test_a_network_start_is_the_first_solution():
    """Offered whole, the start is HiGHS's first solution at once (HiGHS 1.16 repairing
    the same start found none: its first solution, 0.3206 after 3 s of search, was
    another point)."""
    h, index, values = network_query()
    with starting_from(h, index, values) as whole:
        h.run()
    assert whole
    assert h.getModelStatus() == highspy.HighsModelStatus.kSolutionLimit
    assert h.getInfo().objective_function_value == pytest.approx(0.29411764705882354)


@pytest.fixture(scope="module")
def relu_milp():
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"a": rng.uniform(0, 10, 50), "b": rng.uniform(-5, 5, 50)})
    space = cfopt.FeatureSpace.from_frame(frame)
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(2, 6), torch.nn.ReLU(), torch.nn.Linear(6, 4),
                              torch.nn.ReLU(), torch.nn.Linear(4, 1))
    explainer = cfopt.Explainer(net, space, bound_tightening="interval")
    return explainer.milp, net, space, frame


def test_start_choices_are_the_sides_of_the_pre_activations(relu_milp):
    m, net, space, frame = relu_milp
    pred = m.predictor_constr
    row = frame.iloc[[7]]
    z = torch.tensor(space.transform(row), dtype=torch.float32)
    with torch.no_grad():
        first = net[0](z)
        second = net[2](torch.relu(first))
    signs = [first.numpy()[0] > 0, second.numpy()[0] > 0]
    choices = pred.start_choices(space.transform(row)[0])
    layers = pred.dense_layers()
    free = [(k, j) for k, layer in enumerate(layers[:2]) for j in layer.q_relu
            if not layer.q_relu[j].fixed]
    assert free and len(choices) == len(free)
    for k, j in free:
        assert choices[layers[k].q_relu[j]] == int(signs[k][j])
    # a stable neuron's binary is fixed: no choice is offered for it
    k, j = free[0]
    lo, hi = pred.layer_bounds()[k][0][j], pred.layer_bounds()[k][1][j]
    scale = pred.neuron_scales()[k][j]
    pred.set_neuron_bounds(k, j, 0.0, hi / scale)
    try:
        assert layers[k].q_relu[j] not in pred.start_choices(space.transform(row)[0])
        assert len(pred.start_choices(space.transform(row)[0])) == len(free) - 1
    finally:
        pred.set_neuron_bounds(k, j, lo / scale, hi / scale)
    # the MIP start of a row carries them; fix_pattern fixes the same sides
    m.set_factual(frame.iloc[[0]])
    full = start_of(m, row)
    assert all(full[q] == side for q, side in choices.items())
    fixed = pred.fix_pattern(space.transform(row)[0])
    try:
        assert {id(q): q.value for q in fixed} == {id(q): side for q, side in choices.items()}
    finally:
        for q in fixed:
            q.unfix()
