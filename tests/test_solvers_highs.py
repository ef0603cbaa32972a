"""The HiGHS backend (:mod:`cfopt.solvers.highs`) on tiny Pyomo models, in this process:
statuses, objectives, bounds and loaded values of MILPs and LPs, the options each run
gets, a child's answers read (scripted), ranges on the loaded model, starts, the pool,
and the failures that forget the loaded model."""

from __future__ import annotations

import math
from types import SimpleNamespace

import highspy
import numpy as np
import pyomo.environ as pyo
import pytest

import cfopt
from cfopt.errors import SolverError, SolverNotAvailableError
from cfopt.solvers import SolverSettings
from cfopt.solvers import highs as module
from cfopt.solvers.highs import HighsBackend
from cfopt.solvers.isolated import ChildRun, ForkError

Status = cfopt.Status
HERE = SolverSettings(mip_gap=0.0)


def knapsack(sense=pyo.minimize):
    """Cover a weight of 10 at least cost: 7; an unused variable ``z``."""
    m = pyo.ConcreteModel()
    costs, weights = [4, 3, 5, 6, 2], [6, 4, 7, 8, 3]
    m.x = pyo.Var(range(5), domain=pyo.Binary)
    m.z = pyo.Var(bounds=(0, 1))
    m.cover = pyo.Constraint(expr=sum(w * m.x[i] for i, w in enumerate(weights)) >= 10)
    sign = 1 if sense == pyo.minimize else -1
    m.obj = pyo.Objective(expr=sign * sum(c * m.x[i] for i, c in enumerate(costs)), sense=sense)
    return m


def lp():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 4))
    m.y = pyo.Var(bounds=(0, 4))
    m.c = pyo.Constraint(expr=m.x + 2 * m.y >= 3)
    m.obj = pyo.Objective(expr=2 * m.x + m.y + 10)
    return m


def options(backend):
    highs = backend._instance()._solver_model
    return lambda name: highs.getOptionValue(name)[1]


# -- solves here --------------------------------------------------------------------------


def test_a_milp_optimum_its_bound_and_values():
    b = HighsBackend(isolate=False)
    m = knapsack()
    m.z.set_value(0.25)
    got = b.solve(m, HERE)
    assert got.status is Status.OPTIMAL and got.objective == pytest.approx(7)
    assert got.bound == pytest.approx(7) and got.termination == "convergenceCriteriaSatisfied"
    assert got.solver_time is not None and got.wall_time >= got.solver_time > 0
    assert pyo.value(m.obj) == pytest.approx(7) and pyo.value(m.cover.body) >= 10
    assert m.z.value == 0.25  # in no constraint: not HiGHS's to set
    top = b.solve(knapsack(pyo.maximize), HERE)
    assert top.objective == pytest.approx(-7) and top.bound == pytest.approx(-7)


def test_an_lp_bound_is_its_optimum():
    b = HighsBackend(isolate=False)
    m = lp()
    got = b.solve(m, HERE)
    assert got.status is Status.OPTIMAL and got.objective == pytest.approx(11.5)
    assert got.bound == got.objective
    assert (m.x.value, m.y.value) == pytest.approx((0.0, 1.5))


def test_infeasible_and_without_an_objective():
    b = HighsBackend(isolate=False)
    m = knapsack()
    m.none = pyo.Constraint(expr=sum(m.x.values()) <= 1)
    got = b.solve(m, HERE)
    assert got.status is Status.INFEASIBLE and got.objective is None
    assert got.termination == "provenInfeasible"
    free = knapsack()
    free.obj.deactivate()
    got = HighsBackend(isolate=False)._solve_here(free, HERE)
    assert got.status is Status.OPTIMAL and got.objective is None and got.bound is None


def test_each_run_gets_its_options_and_the_users_win():
    b = HighsBackend(isolate=False)
    m = knapsack()
    b.solve(m, SolverSettings(time_limit=30.0, mip_gap=0.02, threads=1, seed=4,
                              options={"mip_feasibility_tolerance": 1e-7}))
    get = options(b)
    assert get("time_limit") == pytest.approx(30.0, abs=1.0) and get("time_limit") <= 30.0
    assert (get("mip_rel_gap"), get("threads"), get("random_seed")) == (0.02, 1, 4)
    assert get("mip_feasibility_tolerance") == 1e-7 and get("log_to_console") is False
    assert get("output_flag") is False and get("mip_allow_restart") is False
    assert get("objective_bound") == math.inf
    for name in ("root_reduced_cost", "rins", "rens"):
        assert get(f"mip_heuristic_run_{name}") is False
    b.solve(m, HERE)
    assert get("time_limit") == math.inf and get("mip_feasibility_tolerance") == 1e-8
    assert b._solver_options(SolverSettings(seed=None, verbose=True)) == {
        "output_flag": True, "mip_feasibility_tolerance": 1e-8, "mip_allow_restart": False,
        "objective_bound": math.inf, "mip_heuristic_run_root_reduced_cost": False,
        "mip_heuristic_run_rins": False, "mip_heuristic_run_rens": False,
        "presolve": "choose"}


def test_a_new_thread_count_restarts_highs_scheduler(monkeypatch):
    resets = []
    monkeypatch.setattr(highspy.Highs, "resetGlobalScheduler",
                        staticmethod(lambda blocking: resets.append(blocking)))
    monkeypatch.setattr(module, "_HIGHS_THREADS", [1])
    b = HighsBackend(isolate=False)
    m = knapsack()
    b.solve(m, SolverSettings(threads=1))
    assert resets == []
    b.solve(m, SolverSettings(threads=None))
    assert resets == [True] and module._HIGHS_THREADS == [None]
    b.solve(m, SolverSettings(threads=None))
    assert resets == [True]


def test_the_overhead_of_a_loaded_model_is_measured():
    b = HighsBackend(isolate=False)
    m = knapsack()
    b.solve(m, HERE)
    assert b._overhead == 0.0 and b.overhead(m) == 0.0
    got = b.solve(m, HERE)
    assert 0.0 < b._overhead < min(got.wall_time, 1.0) and b.overhead(m) == b._overhead
    assert b.overhead(knapsack()) == 0.0
    b._overhead = 5.0  # deducted from the next limit of the loaded model
    b.solve(m, SolverSettings(time_limit=10.0))
    assert options(b)("time_limit") == pytest.approx(5.0)


def test_errors_forget_the_loaded_model(monkeypatch):
    b = HighsBackend(isolate=False)
    m = knapsack()
    b.solve(m, HERE)
    solver = b._instance()

    def broken():
        raise RuntimeError("half sent")

    monkeypatch.setattr(solver, "update", broken)
    with pytest.raises(SolverError, match="highs failed: RuntimeError: half sent"):
        b.solve(m, HERE)
    assert b._solver is None

    b.solve(m, HERE)

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(b._instance(), "update", interrupted)
    with pytest.raises(KeyboardInterrupt):
        b.solve(m, HERE)
    assert b._solver is None


def test_a_failing_run_forgets_the_loaded_model():
    b = HighsBackend(isolate=False)
    m = knapsack()
    b.solve(m, HERE)

    class Failing:
        def run(self):
            raise RuntimeError("HiGHS error")

    with pytest.raises(SolverError, match="highs failed: RuntimeError: HiGHS error"):
        b._run_here(Failing())
    assert b._solver is None


def test_missing_highs_says_how_to_install(monkeypatch):
    b = HighsBackend(isolate=False)
    monkeypatch.setattr(b, "available", lambda: False)
    with pytest.raises(SolverError, match="solver 'highs' is not available: "
                                          "install it with `pip install highspy`"):
        b.solve(knapsack(), HERE)
    with pytest.raises(SolverNotAvailableError, match="solver 'highs' is not available"):
        b._loaded(knapsack(), HERE)


def test_loading_counts_in_the_limit_at_most_nine_tenths(monkeypatch):
    b = HighsBackend(isolate=False)
    now = SimpleNamespace(t=0.0)

    def clock():
        now.t += 4.0
        return now.t

    monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=clock))
    _, settings = b._loaded(knapsack(), SolverSettings(time_limit=10.0))
    assert settings.time_limit == pytest.approx(6.0)
    b.reset()
    _, settings = b._loaded(knapsack(), SolverSettings(time_limit=3.0))
    assert settings.time_limit == pytest.approx(0.3)
    m = knapsack()
    solver, settings = b._loaded(m, SolverSettings(time_limit=10.0))
    again, same = b._loaded(m, settings)
    assert again is solver and same is settings  # loaded: nothing to count


def test_isolate_must_be_a_bool_or_none():
    with pytest.raises(TypeError, match="isolate must be True, False or None, got 1"):
        HighsBackend(isolate=1)
    assert HighsBackend().isolate is None


@pytest.mark.parametrize("isolate, available, columns, expected", [
    (None, True, 499, False), (None, True, 500, True), (True, True, 1, True),
    (False, True, 10 ** 6, False), (None, False, 10 ** 6, False), (True, False, 1, False),
])
def test_which_limits_count_the_loading(monkeypatch, isolate, available, columns, expected):
    monkeypatch.setattr(module, "isolation_available", lambda: available)
    assert HighsBackend(isolate=isolate).limit_counts_loading(columns) is expected


def test_search_options():
    b = HighsBackend()
    assert b.light_heuristics() == {"mip_heuristic_run_feasibility_jump": False}
    assert b.tree_options() == {"presolve_rule_off": 32768}
    assert b.cutoff_options(3) == {"objective_bound": 3.0}
    assert type(b.cutoff_options(3)["objective_bound"]) is float
    assert (b.name, b.has_pool, b.ISOLATE_MIN_COLUMNS) == ("highs", True, 500)


# -- a child's answers ---------------------------------------------------------------------


@pytest.mark.parametrize("name, termination, with_point, without", [
    ("kOptimal", "convergenceCriteriaSatisfied", Status.OPTIMAL, Status.ERROR),
    ("kInfeasible", "provenInfeasible", Status.INFEASIBLE, Status.INFEASIBLE),
    ("kUnboundedOrInfeasible", "infeasibleOrUnbounded", Status.INFEASIBLE, Status.INFEASIBLE),
    ("kTimeLimit", "maxTimeLimit", Status.FEASIBLE, Status.NO_SOLUTION),
    ("kIterationLimit", "iterationLimit", Status.FEASIBLE, Status.NO_SOLUTION),
    ("kSolutionLimit", "iterationLimit", Status.FEASIBLE, Status.NO_SOLUTION),
    ("kObjectiveBound", "objectiveLimit", Status.FEASIBLE, Status.NO_SOLUTION),
    ("kObjectiveTarget", "objectiveLimit", Status.FEASIBLE, Status.NO_SOLUTION),
    ("kUnbounded", "kUnbounded", Status.ERROR, Status.ERROR),
])
def test_highs_answers(name, termination, with_point, without):
    b = HighsBackend()
    x = np.array([1.0, 0.0])
    got = b._outcome(ChildRun(name, 2.5, 2.0, x, 12, 0.75), 1.5)
    assert (got.status, got.termination, got.objective, got.bound, got.solver_time,
            got.wall_time) == (with_point, termination, 2.5, 2.0, 0.75, 1.5)
    got = b._outcome(ChildRun(name, 2.5, float("-inf"), None, 12, 0.75), 1.5)
    assert (got.status, got.objective, got.bound) == (without, None, None)


def test_an_lp_answer_is_bounded_by_its_optimum():
    b = HighsBackend()
    x = np.array([1.0])
    got = b._outcome(ChildRun("kOptimal", 2.5, None, x, -1, 0.1), 0.2)
    assert got.bound == 2.5
    got = b._outcome(ChildRun("kTimeLimit", 2.5, 1.0, x, -1, 0.1), 0.2)
    assert got.status is Status.FEASIBLE and got.bound is None


def test_a_killed_or_dead_child():
    b = HighsBackend()
    x = np.array([1.0])
    got = b._outcome(ChildRun(objective=3.0, bound=2.0, x=x, killed=True), 9.0)
    assert (got.status, got.objective, got.bound, got.solver_time, got.wall_time,
            got.termination) == (Status.FEASIBLE, 3.0, 2.0, None, 9.0, "maxTimeLimit")
    assert got.message == ("HiGHS went on past its time limit: its process was ended at the "
                           "limit, its best incumbent and bound kept")
    got = b._outcome(ChildRun(bound=2.0, killed=True), 9.0)
    assert got.status is Status.NO_SOLUTION and got.objective is None
    got = b._outcome(ChildRun(objective=3.0, bound=2.0, x=x, crashed="signal 11"), 9.0)
    assert (got.status, got.objective, got.bound, got.termination, got.wall_time) == \
        (Status.FEASIBLE, 3.0, None, "crashed", 9.0)
    assert got.message == "HiGHS's process died (signal 11); its last incumbent is kept, no bound"
    got = b._outcome(ChildRun(bound=2.0, crashed="exit code 3"), 9.0)
    assert (got.status, got.objective, got.bound) == (Status.ERROR, None, None)
    assert got.message == "HiGHS's process died (exit code 3); nothing is claimed"


def test_a_child_solve_read_back(monkeypatch):
    """A model solved in a child (scripted: the child's answer given): its point loaded,
    its options set, its overhead measured; a small model with ``isolate=None`` stays
    here; no process to be had: solved here."""
    b = HighsBackend(isolate=True)
    m = knapsack()
    calls, seen = [], []

    def child(highs, deadline, minimize, run):
        calls.append((deadline, minimize, highs.getOptionValue("time_limit")[1]))
        seen.append({"rows": highs.getNumRow(), "cols": highs.getNumCol(),
                     **{k: highs.getOptionValue(k)[1] for k in ("mip_rel_gap", "threads")}})
        x = np.zeros(highs.getNumCol())
        x[:2] = 1.0
        return ChildRun("kOptimal", 7.0, 6.5, x, 3, 1e-6, [(8.0, x), (7.0, x)])

    monkeypatch.setattr(module, "solve_in_child", child)
    monkeypatch.setattr(module, "isolation_available", lambda: True)
    got = b.solve(m, SolverSettings(time_limit=20.0, threads=1, mip_gap=0.25))
    assert got.status is Status.OPTIMAL and got.objective == 7.0 and got.bound == 6.5
    assert seen[-1] == {"rows": 1, "cols": 5, "mip_rel_gap": 0.25, "threads": 1}
    assert 0 <= got.wall_time < 60
    assert [m.x[i].value for i in range(5)] == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert calls[0][1] is True and 19.0 < calls[0][2] <= 20.0
    assert [obj for obj, _ in b._streamed] == [8.0, 7.0]
    assert b._overhead == got.wall_time - 1e-6 and got.solver_time == 1e-6
    m.more = pyo.Constraint(expr=m.x[0] + m.x[1] >= 1)  # sent to the loaded model
    b.solve(m, SolverSettings(time_limit=0.5, threads=1))  # half a second: a child still
    assert seen[-1]["rows"] == 2 and len(calls) == 2
    b.solve(knapsack(pyo.maximize), SolverSettings(time_limit=20.0))
    assert calls[-1][1] is False
    top = knapsack()
    top.first = pyo.Objective(expr=top.z, sense=pyo.maximize)  # inactive: not the sense
    top.first.deactivate()
    top.del_component(top.obj)
    top.obj = pyo.Objective(expr=sum(top.x.values()))
    b.solve(top, SolverSettings(time_limit=20.0))
    assert calls[-1][1] is True
    wide = knapsack()  # 500 columns: a child
    wide.many = pyo.Var(range(495), bounds=(0, 1))
    wide.use = pyo.Constraint(expr=sum(wide.many.values()) <= 3)
    n = len(calls)
    HighsBackend().solve(wide, SolverSettings(time_limit=20.0))
    assert len(calls) == n + 1 and seen[-1]["cols"] == 500
    small = HighsBackend()  # isolate None: 6 columns are solved here
    n = len(calls)
    assert small.solve(knapsack(), SolverSettings(time_limit=20.0)).objective == \
        pytest.approx(7)
    assert len(calls) == n

    def no_fork(*args):
        raise ForkError("no process")

    monkeypatch.setattr(module, "solve_in_child", no_fork)
    got = b.solve(knapsack(), SolverSettings(time_limit=20.0))
    assert got.status is Status.OPTIMAL and got.objective == pytest.approx(7)
    assert 1.9 < options(b)("time_limit") <= 20.0
    assert b.solve(knapsack(), HERE).status is Status.OPTIMAL  # no limit: here


def test_loading_that_takes_the_limit_is_no_solution(monkeypatch):
    b = HighsBackend(isolate=True)
    monkeypatch.setattr(module, "isolation_available", lambda: True)
    now = SimpleNamespace(t=0.0)

    def clock():
        now.t += 3.0
        return now.t

    monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=clock))
    got = b.solve(knapsack(), SolverSettings(time_limit=5.0))
    assert (got.status, got.objective, got.bound, got.termination) == \
        (Status.NO_SOLUTION, None, None, "maxTimeLimit")
    assert got.message == "loading the model took the time limit"


# -- ranges, starts, pool --------------------------------------------------------------------


def test_ranges_on_the_loaded_model_keep_its_objective():
    b = HighsBackend(isolate=False)
    m = lp()
    m.free = pyo.Var(bounds=(-1, 7))
    m.obj.sense = pyo.maximize
    m.obj.expr = -2 * m.x - m.y + 10
    before = b.solve(m, HERE)
    found = b.ranges(m, [m.x, m.y, m.free], HERE)
    assert found == [pytest.approx((0.0, 4.0)), pytest.approx((0.0, 4.0)), (-1, 7)]
    after = b.solve(m, HERE)
    assert after.objective == pytest.approx(before.objective) == pytest.approx(8.5)
    m.cap = pyo.Constraint(expr=m.x + m.y <= 5)
    m.c2 = pyo.Constraint(expr=m.x + 2 * m.y <= 20)
    m.none = pyo.Constraint(expr=m.x >= 5)
    assert b.ranges(m, [m.x], HERE) == [(None, None)]


def test_a_start_is_completed_within_a_tenth_of_the_limit(monkeypatch):
    b = HighsBackend(isolate=False)
    m = knapsack()
    seen = []
    real = module.starting_from

    def spy(highs, index, values, seconds):
        seen.append((sorted(index.tolist()), values.tolist(), seconds))
        return real(highs, index, values, seconds)

    monkeypatch.setattr(module, "starting_from", spy)
    start = pyo.ComponentMap([(m.x[0], 1.0), (m.x[1], 1.0), (m.z, 0.5)])
    for i in range(2, 5):
        start[m.x[i]] = 0.0
    got = b.solve(m, SolverSettings(time_limit=20.0, mip_gap=0.0), start=start)
    assert got.objective == pytest.approx(7)
    assert 1.9 < seen[-1][2] <= 2.0 and len(seen[-1][0]) == 5  # z: no column
    got = b.solve(m, HERE, start=start)
    assert seen[-1][2] == 5.0 and got.objective == pytest.approx(7)
    assert options(b)("time_limit") == math.inf
    b.solve(m, SolverSettings(time_limit=100.0), start=start)
    assert 90.0 <= options(b)("time_limit") <= 100.0


def test_the_pool_is_the_improving_incumbents():
    b = HighsBackend(isolate=False)
    outcome, members = b.solve_pool(knapsack(), HERE, 3)
    assert outcome.status is Status.OPTIMAL and members
    assert members[0][0] == pytest.approx(7) and len(members) <= 3
    m = knapsack()
    m.none = pyo.Constraint(expr=sum(m.x.values()) <= 1)
    outcome, members = b.solve_pool(m, HERE, 3)
    assert outcome.status is Status.INFEASIBLE and members == []


def test_a_real_child_solve_and_its_streamed_pool():
    if not module.isolation_available():
        pytest.skip("child solves run on Linux only")
    b = HighsBackend(isolate=True)
    m = knapsack()
    got = b.solve(m, SolverSettings(time_limit=30.0, mip_gap=0.0))
    assert got.status is Status.OPTIMAL and got.objective == pytest.approx(7)
    assert pyo.value(m.obj) == pytest.approx(7)
    outcome, members = b.solve_pool(knapsack(), SolverSettings(time_limit=30.0, mip_gap=0.0),
                                    5)
    assert outcome.status is Status.OPTIMAL and members
    objectives = [obj for obj, _ in members]
    assert objectives[0] == pytest.approx(7) and objectives == sorted(objectives)
    assert all(isinstance(values, dict) or hasattr(values, "items") for _, values in members)


def test_values_loaded_are_those_the_model_uses(monkeypatch):
    b = HighsBackend(isolate=False)
    m = knapsack()
    m.w = pyo.Var(bounds=(1, 2))  # in the objective only
    m.s = pyo.Var(bounds=(0, 5))  # in a constraint only
    m.obj.expr = m.obj.expr + m.w
    m.link = pyo.Constraint(expr=m.s >= 3 * m.x[0])
    m.z.set_value(0.25)
    got = b.solve(m, HERE)
    assert got.objective == pytest.approx(8)
    assert m.w.value == pytest.approx(1) and m.s.value is not None and m.z.value == 0.25
    assert b._instance()._solver_model.HandleKeyboardInterrupt is True


def test_ctrl_c_in_a_run_here_is_raised_and_forgets_the_model(monkeypatch):
    import contextlib

    b = HighsBackend(isolate=False)
    m = knapsack()
    b.solve(m, HERE)

    @contextlib.contextmanager
    def caught():
        yield lambda: True

    monkeypatch.setattr(module, "sigint_watch", caught)
    with pytest.raises(KeyboardInterrupt, match=r"highs: the solve was interrupted \(Ctrl-C\)"):
        b.solve(m, HERE)
    assert b._solver is None


def test_starts_and_ranges_see_the_models_changes():
    b = HighsBackend(isolate=False)
    m = knapsack()
    assert b.solve(m, HERE).objective == pytest.approx(7)
    m.x[3].fix(1)  # cost 6 in: 6 + 2 = 8 at least
    start = pyo.ComponentMap([(m.x[i], 1.0) for i in range(5)])
    assert b.solve(m, HERE, start=start).objective == pytest.approx(8)
    m.x[3].unfix()
    m.x[0].setub(0)
    m.x[1].setub(0)
    lo, hi = b.ranges(m, [m.x[0]], SolverSettings())[0]
    assert (lo, hi) == (0.0, 0.0)
