"""CP-SAT's model of a tree-ensemble query and its backend (:mod:`cfopt.solvers.cpsat.model`,
:mod:`cfopt.solvers.cpsat.backend`), fast: forests of three small trees on an all-discrete
space whose grid is enumerated, the optimum of every objective (weights, actionability,
a cap on changes, binary, multiclass and regression targets) against the grid's, the
actionability read from the model's components, and the solver's settings and
statuses. ``tests/test_cpsat.py`` has the slower end-to-end checks."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.ensemble import (
    GradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)

import cfopt
from cfopt.models import parse_model
from cfopt.solvers import SolverSettings
from cfopt.solvers.cpsat.backend import CpSatBackend
from cfopt.solvers.cpsat.model import Actionability

from .conftest import grid, grid_norms

pytest.importorskip("ortools")

MARGIN = 1e-3
WEIGHTS = {"a": 1.0, "b": 2.5, "c": 0.75, "d": 1.25}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 300
    frame = pd.DataFrame({"a": rng.integers(0, 5, n), "b": rng.integers(0, 4, n),
                          "c": rng.choice(["red", "green", "blue"], n),
                          "d": rng.integers(0, 2, n)})
    score = frame.a - 1.5 * frame.b + 2.0 * (frame.c == "red") - frame.d
    noisy = score + rng.normal(0, 1, n)
    space = cfopt.FeatureSpace.from_frame(frame)
    Z = space.transform(frame)
    binary = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(
        Z, (noisy > 0.5).astype(int))
    three = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=1).fit(
        Z, np.digitize(noisy, [-1.0, 1.5]))
    boost = GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0).fit(
        Z, (noisy > 0.5).astype(int))
    regressor = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(
        Z, score.to_numpy(float))
    points = grid(space)
    return frame, space, binary, three, regressor, points, boost


def brute(m, points, ok, norm):
    """The least ``norm`` distance from ``m``'s factual over the grid points ``ok``."""
    costs = grid_norms(m, points[ok].reset_index(drop=True))[norm]
    return float(costs.min()) if len(costs) else math.inf


def acts(points, x0, immutable=(), increase=(), decrease=(), cap=None, m=None):
    """The grid points within the actionability."""
    ok = np.ones(len(points), dtype=bool)
    for f in immutable:
        ok &= (points[f] == x0[f]).to_numpy()
    for f in increase:
        ok &= (points[f] >= x0[f]).to_numpy()
    for f in decrease:
        ok &= (points[f] <= x0[f]).to_numpy()
    if cap is not None:
        ok &= grid_norms(m, points)["l0"] <= cap
    return ok


def check(explainer, x, target, valid, norm, points, **rules):
    """CP-SAT's own answer (no heuristic around it) is the grid's optimum, or infeasible
    when the grid has none; the decoded row, or ``None``."""
    m = query(explainer, x, target)
    expected = brute(m, points, valid & acts(points, x.iloc[0], m=m, **rules), norm)
    outcome, row = CpSatBackend().solve_query(m, SolverSettings(mip_gap=0.0))
    if not math.isfinite(expected):
        assert outcome.status is cfopt.Status.INFEASIBLE and row is None
        return None
    assert outcome.status is cfopt.Status.OPTIMAL
    assert grid_norms(m, row)[norm][0] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert expected * (1 - 1e-6) <= outcome.objective <= expected
    assert outcome.bound <= expected
    return row


@pytest.mark.parametrize("norm", [{"l1": 1.0, "l0": 0.5, "linf": 2.0}])
def test_binary_optimum_under_actionability_and_weights(data, norm):
    frame, space, binary, _, _, points = data[:6]
    space = cfopt.FeatureSpace.from_frame(frame)
    space.immutable("d").increase_only("b")
    explainer = cfopt.Explainer(binary, space, solver="cpsat", objective=norm, margin=MARGIN,
                                mip_gap=0.0, weights=WEIGHTS)
    valid = valid_for(binary, space, points)
    pred = binary.predict(space.transform(frame))
    terms = norm if isinstance(norm, dict) else {norm: 1.0}
    found = 0
    for i in np.flatnonzero(pred == 0)[:2]:
        m = explainer.milp
        m.set_factual(frame.iloc[[i]])
        x0 = frame.iloc[i]
        ok = valid & acts(points, x0, immutable=["d"], increase=["b"])
        norms = grid_norms(m, points[ok].reset_index(drop=True))
        expected = min(sum(w * norms[k] for k, w in terms.items()), default=math.inf)
        ce = explainer.explain(frame.iloc[[i]], target=1)
        assert ce.status is cfopt.Status.OPTIMAL and ce.verified
        assert ce.objective == pytest.approx(expected, rel=1e-9, abs=1e-9)
        assert ce.bound == pytest.approx(expected, rel=1e-6, abs=1e-9)
        after = ce.counterfactual.iloc[0]
        assert after["d"] == x0["d"] and after["b"] >= x0["b"]
        found += 1
    assert found == 2


def valid_for(model, space, points, targets=(1,)):
    """The grid points the model's structure gives one of the target classes (indices)
    by the margin."""
    adapter = parse_model(model)
    logits = adapter.structure.logits(space.transform(points))
    if adapter.decision == "sign":
        assert len(targets) == 1
        return (1.0 if targets[0] == 1 else -1.0) * logits[:, 0] >= MARGIN
    beats = [np.all(np.delete(logits, t, axis=1) <= logits[:, [t]] - MARGIN, axis=1)
             for t in targets]
    return np.any(beats, axis=0)


def test_a_cap_on_changes_and_a_decrease_only_feature(data):
    frame, *_, points, binary = data
    space = cfopt.FeatureSpace.from_frame(frame)
    space.decrease_only("b")
    explainer = cfopt.Explainer(binary, space, solver="cpsat", max_changes=1, margin=MARGIN,
                                mip_gap=0.0)
    valid = valid_for(binary, space, points)
    pred = binary.predict(space.transform(frame))
    answers = [check(explainer, frame.iloc[[i]], 1, valid, "l1", points, decrease=["b"],
                     cap=1) for i in np.flatnonzero(pred == 0)[:3]]
    assert any(row is not None for row in answers)
    m = explainer.milp
    for i, row in zip(np.flatnonzero(pred == 0)[:3], answers):
        if row is not None:
            m.set_factual(frame.iloc[[i]])
            assert grid_norms(m, row)["l0"][0] <= 1


def test_multiclass_one_target_and_a_set_of_targets(data):
    frame, space, _, three, _, points = data[:6]
    explainer = cfopt.Explainer(three, space, solver="cpsat", margin=MARGIN, mip_gap=0.0)
    pred = three.predict(space.transform(frame))
    checked = 0
    for i in (np.flatnonzero(pred == 0)[:1].tolist() + np.flatnonzero(pred == 2)[:1].tolist()):
        own = int(pred[i])
        for target in ([2 - own], [1, 2 - own]):
            valid = valid_for(three, space, points, target)
            row = check(explainer, frame.iloc[[i]], target, valid, "l1", points)
            if row is not None:
                assert three.predict(space.transform(row))[0] in target
                checked += 1
    assert checked >= 3


def test_regression_intervals(data):
    frame, space, _, _, regressor, points = data[:6]
    explainer = cfopt.Explainer(regressor, space, solver="cpsat", margin=MARGIN, mip_gap=0.0)
    values = regressor.predict(space.transform(points))
    checked = 0
    for i in range(1):
        x = frame.iloc[[i]]
        y0 = float(regressor.predict(space.transform(x))[0])
        for low, high in ((None, y0 - 1.0), (y0 + 0.5, y0 + 2.0), (y0 + 0.5, None)):
            valid = (values <= (math.inf if high is None else high - MARGIN)) & \
                (values >= (-math.inf if low is None else low + MARGIN))
            checked += check(explainer, x, (low, high), valid, "l1", points) is not None
    assert checked >= 2


def test_actionability_read_from_the_models_components(data):
    frame, _, binary, _, _, _ = data[:6]
    space = cfopt.FeatureSpace.from_frame(frame)
    space.immutable("d").increase_only("b").decrease_only("a")
    explainer = cfopt.Explainer(binary, space, solver="cpsat", max_changes=2)
    m = explainer.milp
    m.set_factual(frame.iloc[[0]])
    rules = Actionability.of(m)
    assert rules == Actionability({"d"}, {"a": "decrease", "b": "increase"}, 2, False)
    m.increase_only["b"].deactivate()
    m.immutable["d"].deactivate()
    rules = Actionability.of(m)
    assert rules == Actionability(set(), {"a": "decrease", "b": "any"}, 2, True)
    m.increase_only["b"].activate()
    m.immutable["d"].activate()
    m.max_changes.deactivate()
    assert Actionability.of(m) == Actionability({"d"}, {"a": "decrease", "b": "increase"},
                                                None, True)
    free = cfopt.Explainer(binary, cfopt.FeatureSpace.from_frame(frame), solver="cpsat")
    free.milp.set_factual(frame.iloc[[0]])
    assert Actionability.of(free.milp) == Actionability(set(), {"a": "any", "b": "any",
                                                               "d": "any"}, None, False)


def query(explainer, x, target=1):
    m = explainer.milp
    m.set_factual(x)
    m.set_target(target)
    return m


def test_a_relaxed_probe_solves_without_the_relaxed_rule(data):
    """A diagnosis deactivates a rule: the CP model drops it too (no pruning by radius)."""
    frame, *_, points, binary = data
    space = cfopt.FeatureSpace.from_frame(frame)
    space.immutable("a", "b", "c")
    explainer = cfopt.Explainer(binary, space, solver="cpsat", margin=MARGIN, mip_gap=0.0)
    valid = valid_for(binary, space, points)
    pred = binary.predict(space.transform(frame))
    backend = CpSatBackend()
    for i in np.flatnonzero(pred == 0)[:3]:
        m = query(explainer, frame.iloc[[i]])
        x0 = frame.iloc[i]
        for f in ("a", "b"):
            m.immutable[f].deactivate()
        outcome, row = backend.solve_query(m, SolverSettings(mip_gap=0.0), radius=1e-9)
        expected = brute(m, points, valid & acts(points, x0, immutable=["c"]), "l1")
        for f in ("a", "b"):
            m.immutable[f].activate()
        if not math.isfinite(expected):
            assert outcome.status is cfopt.Status.INFEASIBLE and row is None
            continue
        assert outcome.status is cfopt.Status.OPTIMAL
        assert outcome.objective == pytest.approx(expected, rel=1e-9, abs=1e-9)
        assert row.iloc[0]["c"] == x0["c"]
        assert grid_norms(m, row)["l1"][0] == pytest.approx(expected, abs=1e-9)


def test_a_radius_too_small_falls_back_to_the_whole_query(data):
    frame, space, binary, _, _, points = data[:6]
    explainer = cfopt.Explainer(binary, space, solver="cpsat", margin=MARGIN, mip_gap=0.0)
    valid = valid_for(binary, space, points)
    i = int(np.flatnonzero(binary.predict(space.transform(frame)) == 0)[0])
    m = query(explainer, frame.iloc[[i]])
    expected = brute(m, points, valid, "l1")
    backend = CpSatBackend()
    outcome, row = backend.solve_query(m, SolverSettings(mip_gap=0.0), radius=1e-9)
    assert outcome.status is cfopt.Status.OPTIMAL and row is not None
    assert outcome.objective == pytest.approx(expected, abs=1e-9)
    assert outcome.bound == pytest.approx(expected, abs=1e-6)
    # within a radius above the optimum: the same optimum, its bound at most the radius
    outcome, _ = backend.solve_query(m, SolverSettings(mip_gap=0.0), radius=expected + 0.5,
                                     hint=row)
    assert outcome.objective == pytest.approx(expected, abs=1e-9)
    assert outcome.bound <= expected + 0.5
    assert outcome.termination == "OPTIMAL" and outcome.message == ""
    assert outcome.solver_time is not None and outcome.wall_time >= outcome.solver_time * 0


def test_settings_reach_cp_sat(data, monkeypatch):
    frame, space, binary, _, _, _ = data[:6]
    explainer = cfopt.Explainer(binary, space, solver="cpsat")
    i = int(np.flatnonzero(binary.predict(space.transform(frame)) == 0)[0])
    m = query(explainer, frame.iloc[[i]])
    from ortools.sat.python import cp_model

    seen = []
    solve = cp_model.CpSolver.solve

    def recording(self, model, *args):
        seen.append(self.parameters)
        return solve(self, model, *args)

    monkeypatch.setattr(cp_model.CpSolver, "solve", recording)
    backend = CpSatBackend()
    backend.solve_query(m, SolverSettings(time_limit=50.0, mip_gap=0.25, threads=3, seed=11,
                                          options={"linearization_level": 2}))
    p = seen[-1]
    assert 45.0 < p.max_time_in_seconds <= 50.0
    assert (p.relative_gap_limit, p.num_workers, p.random_seed, p.linearization_level) == \
        (0.25, 3, 11, 2)
    assert p.log_search_progress is False
    backend.solve_query(m, SolverSettings(threads=None, seed=None, verbose=True))
    p = seen[-1]
    default = cp_model.CpSolver().parameters
    assert p.num_workers == 0 and p.random_seed == default.random_seed
    assert p.max_time_in_seconds == default.max_time_in_seconds
    assert p.log_search_progress is True


def test_statuses_of_a_refused_model_and_of_no_time(data, monkeypatch):
    frame, space, binary, _, _, _ = data[:6]
    explainer = cfopt.Explainer(binary, space, solver="cpsat")
    i = int(np.flatnonzero(binary.predict(space.transform(frame)) == 0)[0])
    m = query(explainer, frame.iloc[[i]])
    backend = CpSatBackend()
    from ortools.sat.python import cp_model

    monkeypatch.setattr(cp_model.CpSolver, "status_name", lambda self, code: "MODEL_INVALID")
    outcome, row = backend.solve_query(m, SolverSettings())
    assert outcome.status is cfopt.Status.ERROR and row is None
    assert outcome.bound is None and outcome.objective is None
    assert outcome.message.startswith("CP-SAT refused its model (")
    assert outcome.message.endswith("); nothing is claimed")
    monkeypatch.setattr(cp_model.CpSolver, "status_name", lambda self, code: "UNKNOWN")
    outcome, row = backend.solve_query(m, SolverSettings())
    assert outcome.status is cfopt.Status.NO_SOLUTION and row is None
    assert outcome.bound is not None and outcome.objective is None
    monkeypatch.setattr(cp_model.CpSolver, "status_name", lambda self, code: "NEW_STATUS")
    outcome, row = backend.solve_query(m, SolverSettings())
    assert outcome.status is cfopt.Status.ERROR and outcome.termination == "NEW_STATUS"
    assert outcome.message.startswith("CP-SAT refused its model (")
    monkeypatch.undo()
    # the time is up (to the clock's tick) before CP-SAT starts: no solution, no bound;
    # half a second left: CP-SAT runs
    import time

    from cfopt.solvers.cpsat import backend as module

    for later, expected in ((5.0, cfopt.Status.NO_SOLUTION), (4.5, cfopt.Status.OPTIMAL)):
        base = time.perf_counter()
        ticks = iter([base] + [base + later] * 1000)
        monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
        outcome, row = backend.solve_query(m, SolverSettings(time_limit=5.0))
        assert outcome.status is expected
        if expected is cfopt.Status.NO_SOLUTION:
            assert (outcome.bound, outcome.termination, row) == (None, "maxTimeLimit", None)
        assert outcome.wall_time == later


def test_the_forest_index_is_built_once_per_model(data):
    frame, space, binary, _, _, _ = data[:6]
    explainer = cfopt.Explainer(binary, space, solver="cpsat", tighten_per_query=False)
    m = query(explainer, frame.iloc[[int(np.flatnonzero(
        binary.predict(space.transform(frame)) == 0)[0])]])
    backend = CpSatBackend()
    if m.predictor_constr.block.per_query:
        pytest.skip("this model's block indexes its own splits")
    first = backend._forest_index(m)
    assert backend._forest_index(m) is first
    backend.reset()
    assert backend._forest_index(m) is not first
    assert backend.available() and backend.name == "cpsat"
    assert pyo.value(m.margin) >= 0


def test_an_integer_feature_of_large_codes_crosses_its_split_at_the_least_code():
    """Codes near 5e7 (a split the library's float32 puts at 50000004.5): the CP optimum is
    the least code the tree sends right, 50000005. A tolerance of 1e-7 relative to the
    codes put the break at 50000009: CP-SAT proved 50000010 optimal, where HiGHS proves
    50000005."""
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(0)
    n = np.concatenate([rng.integers(4 * 10 ** 7, 6 * 10 ** 7, 200),
                        [49999990, 49999999, 50000000, 50000010]])
    frame = pd.DataFrame({"n": n, "a": rng.uniform(0, 1, len(n))})
    space = cfopt.FeatureSpace.from_frame(frame)
    model = DecisionTreeClassifier(max_depth=1).fit(space.transform(frame),
                                                    (frame.n >= 5 * 10 ** 7).astype(int))
    explainer = cfopt.Explainer(model, space, solver="cpsat", mip_gap=0.0)
    x = frame.iloc[[-4]]  # 49999990, class 0
    m = query(explainer, x)
    codes = pd.DataFrame({"n": np.arange(49999990, 50000020), "a": x.iloc[0]["a"]})
    least = int(codes.n[model.predict(space.transform(codes)) == 1].min())
    assert least == 50000005
    expected = grid_norms(m, codes[codes.n == least])["l1"][0]
    outcome, row = CpSatBackend().solve_query(m, SolverSettings(mip_gap=0.0))
    assert outcome.status is cfopt.Status.OPTIMAL and row.iloc[0]["n"] == least
    # the CP objective is the costs rounded down: a lower bound of the point's own
    assert expected * (1 - 1e-3) <= outcome.objective <= expected
    assert outcome.bound <= expected


#: numeric moves dear: the optimum switches the category where it can
DEAR = {"a": 6.0, "b": 6.0, "c": 0.75, "d": 6.0}


@pytest.mark.parametrize("norm", ["l1", {"l0": 0.5, "linf": 2.0}])
def test_category_switches_cost_their_weight(data, norm):
    frame, space, binary, _, _, points = data[:6]
    explainer = cfopt.Explainer(binary, space, solver="cpsat", objective=norm, margin=MARGIN,
                                mip_gap=0.0, weights=DEAR)
    valid = valid_for(binary, space, points)
    terms = norm if isinstance(norm, dict) else {norm: 1.0}
    pred = binary.predict(space.transform(frame))
    switched = 0
    for i in np.flatnonzero((pred == 0) & (frame.c != "red").to_numpy())[:2]:
        m = explainer.milp
        m.set_factual(frame.iloc[[i]])
        norms = grid_norms(m, points[valid].reset_index(drop=True))
        expected = min(sum(w * norms[k] for k, w in terms.items()))
        m.set_target(1)
        outcome, row = CpSatBackend().solve_query(m, SolverSettings(mip_gap=0.0))
        assert outcome.status is cfopt.Status.OPTIMAL
        got = grid_norms(m, row)
        assert sum(w * got[k][0] for k, w in terms.items()) == pytest.approx(expected, rel=1e-9)
        assert expected * (1 - 1e-6) <= outcome.objective <= expected
        switched += row.iloc[0]["c"] != frame.iloc[i]["c"]
    assert switched


def test_an_immutable_category_stays(data):
    frame, _, binary, _, _, points = data[:6]
    space = cfopt.FeatureSpace.from_frame(frame)
    space.immutable("c")
    explainer = cfopt.Explainer(binary, space, solver="cpsat", margin=MARGIN, mip_gap=0.0,
                                weights=DEAR)
    valid = valid_for(binary, space, points)
    pred = binary.predict(space.transform(frame))
    for i in np.flatnonzero((pred == 0) & (frame.c != "red").to_numpy())[:2]:
        row = check(explainer, frame.iloc[[i]], 1, valid, "l1", points, immutable=["c"])
        if row is not None:
            assert row.iloc[0]["c"] == frame.iloc[i]["c"]


def test_an_ordinal_encoded_category_behind_a_pipeline(data):
    """The category's input is its OrdinalEncoder code ("levels"): a split sends the
    categories of codes on its side, one of them or several."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OrdinalEncoder

    frame, space, *_, points, _ = data
    y = ((frame.a - 1.5 * frame.b + 2.0 * (frame.c == "red") + 1.0 * (frame.c == "blue")
          - frame.d) > 0.5).astype(int)
    pre = ColumnTransformer([("cat", OrdinalEncoder(categories=[["green", "red", "blue"]]),
                              ["c"])], remainder="passthrough", sparse_threshold=0)
    model = Pipeline([("pre", pre), ("rf", RandomForestClassifier(
        n_estimators=3, max_depth=3, random_state=2))]).fit(frame, y)
    explainer = cfopt.Explainer(model, space, solver="cpsat", margin=MARGIN, mip_gap=0.0,
                                weights=DEAR)
    proba = model.predict_proba(points)
    valid = proba[:, 1] - proba[:, 0] >= MARGIN
    pred = model.predict(frame)
    switched = 0
    for i in np.flatnonzero(pred == 0)[:3]:
        row = check(explainer, frame.iloc[[i]], 1, valid, "l1", points)
        switched += row is not None and row.iloc[0]["c"] != frame.iloc[i]["c"]
    assert switched


def test_the_hint_is_the_points_levels_and_category(data, monkeypatch):
    from ortools.sat.python import cp_model

    from cfopt.solvers.cpsat import backend as module

    frame, space, binary, *_ = data
    explainer = cfopt.Explainer(binary, space, solver="cpsat")
    i = int(np.flatnonzero(binary.predict(space.transform(frame)) == 0)[0])
    m = query(explainer, frame.iloc[[i]])
    built, hints = [], []
    build = module.build

    def keep(*args):
        built.append(build(*args))
        return built[-1]

    solve = cp_model.CpSolver.solve

    def read(self, model, *args):
        proto = model.Proto()
        hints.append(dict(zip(proto.solution_hint.vars, proto.solution_hint.values)))
        return solve(self, model, *args)

    monkeypatch.setattr(module, "build", keep)
    monkeypatch.setattr(cp_model.CpSolver, "solve", read)
    row = frame.iloc[[i + 1]].copy()
    row["c"] = "blue" if row.iloc[0]["c"] != "blue" else "green"
    CpSatBackend().solve_query(m, SolverSettings(), hint=row)
    q, hint = built[-1], hints[-1]
    index = CpSatBackend()._forest_index(m)
    inputs = m.adapter.model_inputs(space, row)[0]
    assert q.numeric and q.categorical
    for levels, var in q.numeric:
        assert hint[var.Index()] == levels.level_of(inputs, index)
    for levels, bools in q.categorical:
        chosen = [levels.feature.categories[k] for k, b in zip(levels.allowed, bools)
                  if hint[b.Index()] == 1]
        assert chosen == [row.iloc[0]["c"]]
        assert sum(hint[b.Index()] for b in bools) == 1
    # the objective's scale: a power of two, the largest objective near 2**34
    assert math.log2(q.cost_scale).is_integer()
    assert 2.0 ** 33 < q.cost_scale * m.max_objective <= 2.0 ** 34


@pytest.mark.parametrize("norm", ["l1", "linf", "l0"])
def test_the_cp_optimum_itself_is_the_grids(data, norm):
    """CP-SAT's own answer, no heuristic around it: its decoded point is a grid optimum
    (immutable d, increase-only b, weights), its objective that optimum's costs rounded
    down (within 1e-6), its bound at most the optimum."""
    frame, _, binary, _, _, points = data[:6]
    space = cfopt.FeatureSpace.from_frame(frame)
    space.immutable("d").increase_only("b")
    explainer = cfopt.Explainer(binary, space, solver="cpsat", objective=norm, margin=MARGIN,
                                weights=DEAR)
    valid = valid_for(binary, space, points)
    pred = binary.predict(space.transform(frame))
    backend = CpSatBackend()
    for i in np.flatnonzero(pred == 0)[:2]:
        m = query(explainer, frame.iloc[[i]])
        x0 = frame.iloc[i]
        expected = brute(m, points, valid & acts(points, x0, immutable=["d"],
                                                 increase=["b"]), norm)
        outcome, row = backend.solve_query(m, SolverSettings(mip_gap=0.0))
        assert outcome.status is cfopt.Status.OPTIMAL
        assert grid_norms(m, row)[norm][0] == pytest.approx(expected, rel=1e-12)
        assert row.iloc[0]["d"] == x0["d"] and row.iloc[0]["b"] >= x0["b"]
        assert expected * (1 - 1e-6) <= outcome.objective <= expected
        assert outcome.bound <= expected




@pytest.mark.parametrize("target", [0])  # (no grid point scores above its least positive)
def test_the_margin_of_a_signed_score(data, target):
    """Boosting's signed score: the margin set just above the cheapest point that gets
    the target (its score 2/3 of the margin), which the CP optimum must then pass by."""
    frame, space, *_, points, boost = data
    explainer = cfopt.Explainer(boost, space, solver="cpsat", mip_gap=0.0)
    score = parse_model(boost).structure.logits(space.transform(points))[:, 0]
    sign = 1.0 if target == 1 else -1.0
    i = int(np.flatnonzero(boost.predict(space.transform(frame)) != target)[0])
    m = query(explainer, frame.iloc[[i]], target)
    costs = grid_norms(m, points)["l1"]
    gets = (sign * score > 0) & (sign * score < (sign * score).max() / 1.5)
    cheapest = np.flatnonzero(gets)[np.argmin(costs[gets])]
    margin = 1.5 * sign * score[cheapest]
    m.margin = margin
    valid = sign * score >= margin
    expected = float(costs[valid].min())
    assert expected > costs[cheapest] + 1e-6
    outcome, row = CpSatBackend().solve_query(m, SolverSettings(mip_gap=0.0))
    assert outcome.status is cfopt.Status.OPTIMAL
    assert grid_norms(m, row)["l1"][0] == pytest.approx(expected, rel=1e-9)
    assert outcome.bound <= expected


def test_a_regression_interval_by_its_margin(data):
    """Interval ends at the predictions of the cheapest points beyond them: those points
    miss the interval by the margin; the CP optimum is the next cheapest."""
    frame, space, _, _, regressor, points = data[:6]
    explainer = cfopt.Explainer(regressor, space, solver="cpsat", margin=MARGIN, mip_gap=0.0)
    values = regressor.predict(space.transform(points))
    own = regressor.predict(space.transform(frame))
    x = frame.iloc[[int(np.argmin(np.abs(own - np.median(values))))]]
    y0 = float(regressor.predict(space.transform(x))[0])
    backend = CpSatBackend()
    for side in ("low", "high"):
        m = query(explainer, x, (y0 + 0.5, None) if side == "low" else (None, y0 - 0.5))
        costs = grid_norms(m, points)["l1"]
        beyond = (values > y0 + 0.5) & (values < values.max() - MARGIN) if side == "low" \
            else (values < y0 - 0.5) & (values > values.min() + MARGIN)
        end = float(values[np.flatnonzero(beyond)[np.argmin(costs[beyond])]])
        target = (end, None) if side == "low" else (None, end)
        m = query(explainer, x, target)
        valid = values >= end + MARGIN if side == "low" else values <= end - MARGIN
        expected = float(costs[valid].min())
        outcome, row = backend.solve_query(m, SolverSettings(mip_gap=0.0))
        assert outcome.status is cfopt.Status.OPTIMAL, side
        assert grid_norms(m, row)["l1"][0] == pytest.approx(expected, rel=1e-9), side


def test_the_backend_interface_and_a_missing_ortools(data, monkeypatch):
    from ortools.sat.python import cp_model

    frame, space, binary, _, _, points = data[:6]
    explainer = cfopt.Explainer(binary, space, solver="cpsat", margin=MARGIN)
    i = int(np.flatnonzero(binary.predict(space.transform(frame)) == 0)[0])
    m = query(explainer, frame.iloc[[i]])
    expected = brute(m, points, valid_for(binary, space, points), "l1")
    runs = []
    solve = cp_model.CpSolver.solve
    monkeypatch.setattr(cp_model.CpSolver, "solve",
                        lambda self, model, *a: runs.append(1) or solve(self, model, *a))
    backend = CpSatBackend()
    outcome = backend.solve(m, SolverSettings(mip_gap=0.0))
    assert outcome.status is cfopt.Status.OPTIMAL
    assert expected * (1 - 1e-6) <= outcome.objective <= expected
    assert 0 <= outcome.solver_time <= outcome.wall_time < 60
    # within a radius above the optimum: one solve, not a second of the whole query
    runs.clear()
    outcome, _ = backend.solve_query(m, SolverSettings(mip_gap=0.0), radius=expected + 1.0)
    assert outcome.status is cfopt.Status.OPTIMAL and runs == [1]
    monkeypatch.setattr(CpSatBackend, "available", lambda self: False)
    with pytest.raises(cfopt.SolverNotAvailableError, match=re.escape(
            "solver 'cpsat' is not available: install it with `pip install cfopt[cpsat]` "
            "(OR-Tools)")):
        backend.solve_query(m, SolverSettings())


def test_what_the_cp_model_does_not_encode_is_refused(data):
    from sklearn.linear_model import LogisticRegression

    from cfopt.solvers.cpsat.backend import check_supported

    frame, space, binary, *_ = data
    linear = LogisticRegression().fit(space.transform(frame), binary.predict(
        space.transform(frame)))
    with pytest.raises(cfopt.UnsupportedModelError, match=re.escape(
            "solver='cpsat' solves tree ensembles only; the ") + ".* model is not one: "
            "use solver='highs'"):
        cfopt.Explainer(linear, space, solver="cpsat")
    rules = [cfopt.LinearConstraint({"a": 1.0, "b": 1.0}, "<=", 6.0, name="cap"),
             cfopt.LinearConstraint({"a": 1.0}, ">=", 1.0, name="floor")]
    with pytest.raises(ValueError, match=re.escape(
            "solver='cpsat' does not encode declared constraint blocks (cap, floor); use "
            "solver='highs'")):
        cfopt.Explainer(binary, space, solver="cpsat", constraints=rules)
    m = cfopt.Explainer(binary, space, solver="cpsat").milp
    check_supported(m)
    m.my_rule = pyo.Constraint(expr=m.x["a"] <= 3)
    m.other = pyo.Constraint(expr=m.x["b"] <= 3)
    with pytest.raises(ValueError, match=re.escape(
            "solver='cpsat' does not see what was added to the Pyomo model (Pyomo component "
            "'my_rule', Pyomo component 'other'); "
            "use solver='highs'")):
        check_supported(m)
