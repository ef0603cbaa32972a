"""HiGHS solves with a time limit in a child process ended at the limit (issue 17,
:mod:`cfopt.solvers.isolated`): the limit holds where HiGHS itself overruns it, the
incumbents and bound the child streamed are kept, and a child that crashes or raises
gives a status, not an exception."""

from __future__ import annotations

import gzip
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyomo.environ as pyo
import pytest
from pyomo.core.expr.numeric_expr import LinearExpression

import cfopt
from cfopt.solvers import HighsBackend, SolverSettings
from cfopt.solvers.isolated import isolation_available

from .bad_input_cases import toy_frame, train
from .test_limits import within

pytestmark = pytest.mark.skipif(not isolation_available(),
                                reason="child solves run on Linux only")

#: a tree query's model (a default ExtraTrees forest on raw UCI Adult, the benchmark's
#: row 15, as HiGHS presolved it: 4786 columns, 11344 rows) on which HiGHS 1.16 with
#: presolve off spends ~40 s in its first root separation round without looking at its
#: clock (45 s for a 3 s limit)
OVERRUN = Path(__file__).parent / "data" / "highs_overrun.mps.gz"


def mps_model(path: Path) -> pyo.ConcreteModel:
    """The MILP in the gzipped MPS file ``path`` as a Pyomo model (read by HiGHS)."""
    import highspy
    import scipy.sparse as sp

    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    with tempfile.NamedTemporaryFile(suffix=".mps") as f:
        f.write(gzip.decompress(path.read_bytes()))
        f.flush()
        highs.readModel(f.name)
    lp = highs.getLp()
    n = lp.num_col_

    def side(v: float) -> float | None:
        return float(v) if np.isfinite(v) else None

    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n))
    # (each read of an attribute of ``lp`` copies the whole vector)
    integer, lower, upper = list(lp.integrality_), list(lp.col_lower_), list(lp.col_upper_)
    for j in range(n):
        if integer and integer[j] == highspy.HighsVarType.kInteger:
            m.x[j].domain = pyo.Integers
        m.x[j].setlb(side(lower[j]))
        m.x[j].setub(side(upper[j]))
    a = lp.a_matrix_
    matrix = (sp.csc_matrix if a.format_ == highspy.MatrixFormat.kColwise else sp.csr_matrix)(
        (np.array(a.value_), np.array(a.index_), np.array(a.start_)), shape=(lp.num_row_, n))
    rows = matrix.tocsr()
    m.c = pyo.ConstraintList()
    lower, upper = list(lp.row_lower_), list(lp.row_upper_)
    for i in range(lp.num_row_):
        k = slice(rows.indptr[i], rows.indptr[i + 1])
        body = LinearExpression(constant=0.0, linear_coefs=list(rows.data[k]),
                                linear_vars=[m.x[j] for j in rows.indices[k]])
        m.c.add((side(lower[i]), body, side(upper[i])))
    cost = np.array(lp.col_cost_)
    used = np.flatnonzero(cost)
    m.o = pyo.Objective(expr=LinearExpression(
        constant=lp.offset_, linear_coefs=list(cost[used]), linear_vars=[m.x[j] for j in used]))
    return m


def knapsack() -> pyo.ConcreteModel:
    """A small MILP (3 knapsack rows, 40 binaries) that HiGHS solves in well under a
    second, finding several incumbents on the way."""
    rng = np.random.default_rng(0)
    w, v = rng.integers(10, 100, (3, 40)), rng.integers(10, 100, 40)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(40), domain=pyo.Binary)
    m.c = pyo.Constraint(range(3), rule=lambda m, i: sum(
        int(w[i, j]) * m.x[j] for j in range(40)) <= int(w[i].sum()) // 2)
    m.o = pyo.Objective(expr=sum(-int(v[j]) * m.x[j] for j in range(40)))
    return m


class _Hanging(HighsBackend):
    """HiGHS, then a child that never answers (as HiGHS in a phase that ignores its
    clock): only what it streamed reaches the parent."""

    def _run(self, highs):
        super()._run(highs)
        time.sleep(600)


class _Crashing(HighsBackend):
    """A child that dies of a segmentation fault, after HiGHS (``after=True``) or
    before it."""

    def __init__(self, after: bool, **kwargs) -> None:
        super().__init__(**kwargs)
        self.after = after

    def _run(self, highs):
        if self.after:
            super()._run(highs)
        os.kill(os.getpid(), signal.SIGSEGV)


class _Raising(HighsBackend):
    """A child in which running HiGHS raises."""

    def _run(self, highs):
        raise RuntimeError("injected")


def children() -> set[int]:
    """This process's child processes (a test's own must be gone when it ends; others,
    e.g. loky workers of an earlier test, may stay)."""
    pid = os.getpid()
    return {int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def test_highs_stops_at_its_limit_where_it_overruns_in_process():
    """HiGHS in this process took 45 s for a 3 s limit on this model (its root
    separation round ignores its clock); the child is ended at the limit."""
    m = mps_model(OVERRUN)
    t0 = time.perf_counter()
    outcome = HighsBackend().solve(m, SolverSettings(time_limit=3.0,
                                                     options={"presolve": "off"}))
    wall = time.perf_counter() - t0
    assert wall <= within(3.0), wall
    assert outcome.status in (cfopt.Status.NO_SOLUTION, cfopt.Status.FEASIBLE), outcome
    assert outcome.termination == "maxTimeLimit"


def test_streamed_incumbent_and_bound_are_returned_when_the_child_is_ended():
    """The child streams HiGHS's incumbents and bound, then hangs: the parent ends it at
    the limit and answers FEASIBLE with the last incumbent (loaded into the model) and
    a bound below it."""
    m = knapsack()
    optimum = HighsBackend(isolate=False).solve(m, SolverSettings()).objective
    before = children()
    t0 = time.perf_counter()
    outcome = _Hanging(isolate=True).solve(m, SolverSettings(time_limit=1.0))
    assert time.perf_counter() - t0 <= within(1.0)
    assert outcome.status is cfopt.Status.FEASIBLE, outcome
    assert "ended at the limit" in outcome.message
    assert outcome.objective == pytest.approx(optimum)
    assert pyo.value(m.o) == pytest.approx(outcome.objective)  # the incumbent, loaded
    assert outcome.bound is not None and outcome.bound <= outcome.objective + 1e-9
    assert children() <= before


def test_a_child_that_answers_gives_highs_own_answer():
    """A child that answers: the same optimum and proof as HiGHS in this process."""
    m = knapsack()
    here = HighsBackend(isolate=False).solve(m, SolverSettings(time_limit=20.0))
    backend = HighsBackend(isolate=True)
    outcome = backend.solve(m, SolverSettings(time_limit=20.0))
    assert (outcome.status, outcome.termination) == (here.status, here.termination)
    assert outcome.objective == pytest.approx(here.objective)
    assert outcome.bound == pytest.approx(here.bound)
    assert pyo.value(m.o) == pytest.approx(outcome.objective)
    outcome, pool = backend.solve_pool(m, SolverSettings(time_limit=20.0), 3)
    assert pool and pool[0][0] == pytest.approx(outcome.objective)  # streamed incumbents


@pytest.mark.parametrize("after", [False, True])
def test_a_crashed_child_is_a_status_not_an_exception(after):
    """A child killed by SIGSEGV before HiGHS found anything: ERROR naming the signal;
    after: its last streamed incumbent, FEASIBLE without a bound."""
    m = knapsack()
    before = children()
    outcome = _Crashing(after, isolate=True).solve(m, SolverSettings(time_limit=10.0))
    assert "SIGSEGV" in outcome.message
    if after:
        assert outcome.status is cfopt.Status.FEASIBLE and outcome.bound is None
        assert pyo.value(m.o) == pytest.approx(outcome.objective)
    else:
        assert outcome.status is cfopt.Status.ERROR and outcome.objective is None
    assert children() <= before


def test_an_error_in_the_child_is_a_status():
    outcome = _Raising(isolate=True).solve(knapsack(), SolverSettings(time_limit=10.0))
    assert outcome.status is cfopt.Status.ERROR
    assert "RuntimeError: injected" in outcome.message


def test_a_crashing_solver_does_not_lose_a_batch():
    """Every query's child crashes: each row gets its status (the verified heuristic
    point, unproven, or ``error``) with the reason, and the batch goes on."""
    X, y = toy_frame()
    space = cfopt.FeatureSpace.from_frame(X)
    net = train(space.transform(X), y)
    explainer = cfopt.Explainer(net, space, solver=_Crashing(False, isolate=True),
                                time_limit=10)
    rows = X.iloc[np.flatnonzero(explainer.milp.predict(X) == 0)[:3]]
    before = children()
    batch = explainer.explain_many(rows, target=1, progress=False)
    assert not batch.interrupted and len(batch) == 3
    for answer in batch:
        assert answer.status in (cfopt.Status.ERROR, cfopt.Status.FEASIBLE), answer
        assert "HiGHS's process died" in answer.message
    assert children() <= before


def test_no_child_to_be_had_solves_in_process(monkeypatch):
    """``fork`` fails (memory, process limit): the solve runs here instead."""
    def no_fork():
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    m = knapsack()
    outcome = HighsBackend(isolate=True).solve(m, SolverSettings(time_limit=20.0))
    assert outcome.status is cfopt.Status.OPTIMAL
    assert outcome.termination == "convergenceCriteriaSatisfied"
    assert pyo.value(m.o) == pytest.approx(outcome.objective)


def test_ctrl_c_ends_the_child_and_is_raised():
    """SIGINT while the parent waits for a child: the child is killed and reaped, and
    KeyboardInterrupt is raised (as after HiGHS caught it in this process)."""
    main = threading.main_thread().ident
    timer = threading.Timer(0.5, signal.pthread_kill, (main, signal.SIGINT))
    before = children()
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _Hanging(isolate=True).solve(knapsack(), SolverSettings(time_limit=60.0))
    finally:
        timer.cancel()
    assert time.perf_counter() - t0 <= within(0.5)
    assert children() <= before


@pytest.mark.parametrize("columns,child", [(499, False), (500, True)])
def test_models_from_the_threshold_up_are_solved_in_a_child(monkeypatch, columns, child):
    """With a time limit, a model of ``ISOLATE_MIN_COLUMNS`` (500) columns or more is
    solved in a child, one column fewer here; either way HiGHS's own answer."""
    import cfopt.solvers.highs as highs_module

    children = []
    real = highs_module.solve_in_child
    monkeypatch.setattr(highs_module, "solve_in_child",
                        lambda *a, **k: children.append(1) or real(*a, **k))
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(columns), bounds=(0, 1), domain=pyo.Integers)
    m.c = pyo.Constraint(expr=sum(m.x.values()) <= 2.5)
    m.obj = pyo.Objective(expr=sum(m.x.values()), sense=pyo.maximize)
    outcome = HighsBackend().solve(m, SolverSettings(time_limit=30.0))
    assert outcome.objective == pytest.approx(2.0)
    assert bool(children) is child


def test_a_loaded_small_model_is_sent_its_changes_once_and_every_change_counts(monkeypatch):
    """A solve with a time limit of a loaded model below ``ISOLATE_MIN_COLUMNS`` runs
    here: the changes are sent once (``update()``), not again by Pyomo's solve (a walk
    over the whole model, ~10 ms per solve of a PROPLACE master); a changed parameter, a
    changed bound and an added constraint each reach HiGHS."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 10), domain=pyo.Integers)
    m.y = pyo.Var(bounds=(0, 10), domain=pyo.Integers)
    m.cap = pyo.Param(initialize=7.0, mutable=True)
    m.c = pyo.Constraint(expr=m.x + 2 * m.y <= m.cap)
    m.obj = pyo.Objective(expr=m.x + 3 * m.y, sense=pyo.maximize)
    backend, settings = HighsBackend(), SolverSettings(time_limit=30.0)
    assert backend.solve(m, settings).objective == pytest.approx(10.0)  # x=1, y=3
    solver = backend._instance()
    sent = []
    update_parameters = solver.update_parameters

    def counting():
        sent.append(1)
        return update_parameters()

    monkeypatch.setattr(solver, "update_parameters", counting)
    m.cap = 9.0
    assert backend.solve(m, settings).objective == pytest.approx(13.0)  # x=1, y=4
    assert len(sent) == 1
    m.y.setub(2)
    assert backend.solve(m, settings).objective == pytest.approx(11.0)  # x=5, y=2
    m.d = pyo.Constraint(expr=m.x <= 3)
    assert backend.solve(m, settings).objective == pytest.approx(9.0)  # x=3, y=2
    assert len(sent) == 3
