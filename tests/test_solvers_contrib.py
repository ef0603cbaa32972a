"""The base of the persistent backends (:mod:`cfopt.solvers.contrib`), on a scripted Pyomo
solver: the arguments of each solve, statuses from terminations, objectives and bounds,
the time limit less the overhead of a loaded model, errors and Ctrl-C."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import pyomo.environ as pyo
import pytest
from pyomo.contrib.solver.common.results import SolutionStatus
from pyomo.contrib.solver.common.results import TerminationCondition as TC

import cfopt
from cfopt.errors import SolverError, SolverLicenseError, SolverNotAvailableError
from cfopt.solvers import SolverSettings
from cfopt.solvers import contrib as module
from cfopt.solvers.contrib import INSTALL_HINTS, ContribBackend, finite

Status = cfopt.Status


class Timer:
    def __init__(self, total):
        self.total = total

    def get_total_time(self, name):
        assert name == "optimize"
        if self.total is None:
            raise KeyError(name)
        return self.total


class Solver:
    """A Pyomo solver answering from a script, recording each call's arguments."""

    def __init__(self, answers, available=True):
        self.answers, self.calls, self.loads, self._model = list(answers), [], [], None
        self.is_available = available

    def available(self):
        if isinstance(self.is_available, Exception):
            raise self.is_available
        return self.is_available

    def solve(self, model, **kwargs):
        self.calls.append(kwargs)
        self._model = model
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        tc, sol, objective, bound, total = answer
        return SimpleNamespace(
            termination_condition=tc, solution_status=sol, incumbent_objective=objective,
            objective_bound=bound, timing_info=SimpleNamespace(timer=Timer(total)),
            solution_loader=SimpleNamespace(load_vars=lambda: self.loads.append(model)))


class Scripted(ContribBackend):
    name = "highs"

    def __init__(self, *answers, available=True):
        super().__init__()
        self._solver = Solver(answers, available)
        self.translated = None

    def _instance(self):
        return self._solver

    def reset(self):
        self.resets = getattr(self, "resets", 0) + 1
        self._overhead = 0.0

    def _translate_error(self, exc):
        self.errors = getattr(self, "errors", []) + [exc]
        return self.translated


def tiny():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.obj = pyo.Objective(expr=m.x)
    return m


OK = (TC.convergenceCriteriaSatisfied, SolutionStatus.optimal, 2.0, 1.5, 0.25)


def test_a_solve_sends_the_settings_and_reads_the_answer():
    b = Scripted(OK)
    m = tiny()
    got = b.solve(m, SolverSettings(time_limit=8.0, mip_gap=0.01, threads=2, verbose=True,
                                    options={"presolve": "off"}))
    assert b._solver.calls == [dict(load_solutions=False,
                                    raise_exception_on_nonoptimal_result=False, tee=True,
                                    threads=2, rel_gap=0.01, time_limit=8.0,
                                    solver_options={"presolve": "off"})]
    assert (got.status, got.objective, got.bound, got.solver_time, got.termination) == \
        (Status.OPTIMAL, 2.0, 1.5, 0.25, "convergenceCriteriaSatisfied")
    assert got.wall_time >= 0 and b._solver.loads == [m]
    b = Scripted(OK)
    b.solve(m, SolverSettings())
    assert b._solver.calls[0]["time_limit"] == math.inf
    assert b._solver.calls[0]["solver_options"] == {}


@pytest.mark.parametrize("tc, sol, expected, loads", [
    (TC.convergenceCriteriaSatisfied, SolutionStatus.feasible, Status.OPTIMAL, True),
    (TC.convergenceCriteriaSatisfied, SolutionStatus.noSolution, Status.ERROR, False),
    (TC.provenInfeasible, SolutionStatus.noSolution, Status.INFEASIBLE, False),
    (TC.locallyInfeasible, SolutionStatus.infeasible, Status.INFEASIBLE, False),
    (TC.infeasibleOrUnbounded, SolutionStatus.feasible, Status.INFEASIBLE, False),
    (TC.maxTimeLimit, SolutionStatus.feasible, Status.FEASIBLE, True),
    (TC.maxTimeLimit, SolutionStatus.noSolution, Status.NO_SOLUTION, False),
    (TC.iterationLimit, SolutionStatus.optimal, Status.FEASIBLE, True),
    (TC.objectiveLimit, SolutionStatus.noSolution, Status.NO_SOLUTION, False),
    (TC.minStepLength, SolutionStatus.feasible, Status.FEASIBLE, True),
    (TC.unbounded, SolutionStatus.feasible, Status.ERROR, True),
    (TC.error, SolutionStatus.noSolution, Status.ERROR, False),
])
def test_statuses(tc, sol, expected, loads):
    b = Scripted((tc, sol, 3.0, float("-inf"), None))
    m = tiny()
    got = b.solve(m, SolverSettings())
    assert got.status is expected and got.termination == tc.name
    assert got.objective == (3.0 if sol in (SolutionStatus.optimal, SolutionStatus.feasible)
                             else None)
    assert got.bound is None and got.solver_time is None
    assert b._solver.loads == ([m] if loads else [])


def test_the_limit_less_the_overhead_of_a_loaded_model(monkeypatch):
    b = Scripted(OK, OK, OK, OK)
    now = SimpleNamespace(t=0.0)

    def clock():
        now.t += 0.5
        return now.t

    monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=clock))
    m = tiny()
    b.solve(m, SolverSettings(time_limit=10.0))
    assert b._overhead == 0.0 and b.overhead(m) == 0.0  # loaded now: not measured
    b.solve(m, SolverSettings(time_limit=10.0))
    assert b._solver.calls[1]["time_limit"] == 10.0
    assert b._overhead == pytest.approx(0.25) and b.overhead(m) == 0.25
    assert b.overhead(tiny()) == 0.0
    b.solve(m, SolverSettings(time_limit=10.0))
    assert b._solver.calls[2]["time_limit"] == pytest.approx(9.75)
    b._overhead = 50.0
    b.solve(m, SolverSettings(time_limit=10.0))
    assert b._solver.calls[3]["time_limit"] == pytest.approx(1.0)  # a tenth at least
    assert b._time_limit(SolverSettings(time_limit=10.0), loaded=False) == 10.0


def test_a_negative_overhead_is_none(monkeypatch):
    b = Scripted(OK, (TC.convergenceCriteriaSatisfied, SolutionStatus.optimal, 2.0, 1.5, 9.0))
    m = tiny()
    b.solve(m, SolverSettings())
    b.solve(m, SolverSettings())
    assert b._overhead == 0.0


def test_failures_are_solver_errors_and_forget_the_model():
    b = Scripted(RuntimeError("bad model"))
    with pytest.raises(SolverError, match="highs failed: RuntimeError: bad model"):
        b.solve(tiny(), SolverSettings())
    assert b.resets == 1
    b = Scripted(RuntimeError("size"))
    b.translated = SolverLicenseError("licence")
    with pytest.raises(SolverLicenseError, match="licence") as info:
        b.solve(tiny(), SolverSettings())
    assert isinstance(info.value.__cause__, RuntimeError) and b.resets == 1
    assert b.errors == [info.value.__cause__]


def test_ctrl_c_caught_by_the_solver_is_raised():
    b = Scripted((TC.interrupted, SolutionStatus.feasible, 1.0, 0.0, 0.1))
    with pytest.raises(KeyboardInterrupt, match="highs: the solve was interrupted"):
        b.solve(tiny(), SolverSettings())
    assert b.resets == 1


def test_availability_and_defaults():
    b = Scripted(available=False)
    assert b.available() is False
    with pytest.raises(SolverNotAvailableError, match=re.escape(
            "solver 'highs' is not available: " + INSTALL_HINTS["highs"])):
        b.solve(tiny(), SolverSettings())
    assert Scripted(available=ImportError("no module")).available() is False
    assert Scripted(available=1).available() is True
    base = ContribBackend.__new__(ContribBackend)
    ContribBackend.__init__(base)
    assert (base._solver, base._overhead, base.persistent) == (None, 0.0, True)
    assert base._solver_options(SolverSettings()) == {}
    assert base._translate_error(RuntimeError()) is None
    base._overhead = 3.0
    ContribBackend.reset(base)
    assert (base._solver, base._overhead) == (None, 0.0)
    result = SimpleNamespace(timing_info=SimpleNamespace(timer=Timer(None)))
    assert base._solver_time(result) is None


def test_finite():
    assert finite(2) == 2.0 and type(finite(2)) is float
    assert finite("1.5") == 1.5
    for bad in (None, "undefined", float("inf"), float("-inf"), float("nan"), object()):
        assert finite(bad) is None
    assert INSTALL_HINTS["cbc"].startswith("install it with `apt-get install coinor-cbc`")


def test_the_pyomo_solver_is_made_once_until_a_reset():
    class Highs(ContribBackend):
        name = "highs"
        _pyomo_name = "highs"

    b = Highs()
    solver = b._instance()
    assert type(solver).__name__ == "Highs" and b._instance() is solver
    b.reset()
    assert b._solver is None and b._instance() is not solver
    b._solver = object()  # a solver that holds no model yet
    assert b.overhead(tiny()) == 0.0
