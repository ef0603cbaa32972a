"""The Gurobi and classic-Pyomo backends and ``make_solver`` (:mod:`cfopt.solvers.backends`)
on tiny models: CBC's options, statuses, bounds and failures (scripted results where
a solver cannot be made to fail), Gurobi's options, errors and pool, and the names
``make_solver`` takes."""

from __future__ import annotations

import logging
import shutil
from types import SimpleNamespace

import pyomo.environ as pyo
import pytest
from pyomo.common.errors import ApplicationError
from pyomo.opt import SolverStatus
from pyomo.opt import TerminationCondition as TC

import cfopt
from cfopt.errors import SolverError, SolverLicenseError, SolverNotAvailableError
from cfopt.solvers import SolverSettings, backends
from cfopt.solvers.backends import (
    GurobiBackend,
    HighsBackend,
    LegacyBackend,
    make_solver,
    register_backend,
)
from cfopt.solvers.base import SolverBackend

Status = cfopt.Status
CBC_DEFAULTS = {"preprocess": "off", "increment": 0, "cuts": "off", "integerTolerance": 1e-8,
                "primalTolerance": 1e-9}


def cbc() -> LegacyBackend:
    if shutil.which("cbc") is None:
        pytest.skip("cbc executable not on PATH")
    return LegacyBackend("cbc")


def knapsack(sense=pyo.minimize):
    """Cover a weight of 10 at least cost: 7 (items 1 and 4, or 2 and 3 ...)."""
    m = pyo.ConcreteModel()
    costs, weights = [4, 3, 5, 6, 2], [6, 4, 7, 8, 3]
    m.x = pyo.Var(range(5), domain=pyo.Binary)
    m.cover = pyo.Constraint(expr=sum(w * m.x[i] for i, w in enumerate(weights)) >= 10)
    sign = 1 if sense == pyo.minimize else -1
    m.obj = pyo.Objective(expr=sign * sum(c * m.x[i] for i, c in enumerate(costs)), sense=sense)
    return m


# -- classic Pyomo solvers ----------------------------------------------------------------


def test_cbc_options_defaults_and_the_users():
    b = LegacyBackend("cbc")
    assert b._options(SolverSettings()) == {**CBC_DEFAULTS, "ratioGap": 1e-4, "threads": 1,
                                            "randomCbcSeed": 0}
    got = b._options(SolverSettings(time_limit=9.0, mip_gap=0.01, threads=3, seed=5,
                                    options={"cuts": "on", "log": 2}))
    assert got == {**CBC_DEFAULTS, "cuts": "on", "log": 2, "sec": 9.0, "ratioGap": 0.01,
                   "threads": 3, "randomCbcSeed": 5}
    got = b._options(SolverSettings(threads=None, seed=None))
    assert "threads" not in got and "randomCbcSeed" not in got
    # GLPK: no thread or seed option, no defaults of cfopt's
    glpk = LegacyBackend("glpk")
    assert glpk._options(SolverSettings(time_limit=3.0, threads=4, seed=2)) == \
        {"tmlim": 3.0, "mipgap": 1e-4}
    settings = SolverSettings(time_limit=3.0, mip_gap=0.5, threads=4, seed=2)
    assert LegacyBackend("cplex")._options(settings) == {
        "timelimit": 3.0, "mip_tolerances_mipgap": 0.5, "threads": 4, "randomseed": 2}
    assert LegacyBackend("scip")._options(settings) == {
        "limits/time": 3.0, "limits/gap": 0.5, "parallel/maxnthreads": 4,
        "randomization/randomseedshift": 2}


def test_an_unknown_classic_solver_takes_its_options_raw():
    b = LegacyBackend("ipopt")
    options = {"max_iter": 5}
    got = b._options(SolverSettings(options=options))
    assert got == options and got is not options
    with pytest.raises(ValueError, match="cfopt does not know the time-limit option of "
                                         "solver 'ipopt'; pass it through options"):
        b._options(SolverSettings(time_limit=1.0))


def test_cbc_optimum_and_the_bound_of_its_gap():
    b = cbc()
    assert b.available() and not b.persistent and repr(b) == "LegacyBackend('cbc')"
    m = knapsack()
    got = b.solve(m, SolverSettings(mip_gap=0.01))
    assert got.status is Status.OPTIMAL and got.objective == pytest.approx(7)
    assert got.bound == pytest.approx(7 - 0.07) and got.termination == "optimal"
    assert got.solver_time is not None and got.wall_time > 0 and got.message == ""
    assert pyo.value(m.obj) == pytest.approx(7)
    assert got.wall_time < 60
    m = knapsack(pyo.maximize)
    got = b.solve(m, SolverSettings(mip_gap=0.0))
    assert got.objective == pytest.approx(-7) and got.bound == got.objective + 1e-10
    # the active objective's value, not an inactive one's declared before it
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(2), domain=pyo.Binary)
    m.old = pyo.Objective(expr=10 * m.x[0] + 10 * m.x[1], sense=pyo.maximize)
    m.old.deactivate()
    m.pick = pyo.Constraint(expr=m.x[0] + m.x[1] >= 1)
    m.obj = pyo.Objective(expr=2 * m.x[0] + 3 * m.x[1])
    got = b.solve(m, SolverSettings(mip_gap=0.0))
    assert got.objective == pytest.approx(2) and got.bound == got.objective - 1e-10


@pytest.mark.parametrize("tc, status", [(TC.maxTimeLimit, Status.FEASIBLE),
                                        (TC.unbounded, Status.ERROR)])
def test_statuses_with_a_solution(monkeypatch, tc, status):
    """CBC's real answer, its termination changed: a point at a limit is FEASIBLE with
    CBC's own bound; a point of an error is not loaded."""
    b = cbc()
    m = knapsack()
    results = b._opt.solve(m, load_solutions=False)
    results.solver.termination_condition = tc
    results.problem.lower_bound = 6.5
    monkeypatch.setattr(b._opt, "solve", lambda *a, **k: results)
    got = b.solve(m, SolverSettings())
    assert got.status is status
    if status is Status.FEASIBLE:
        assert got.objective == pytest.approx(7) and got.bound == 6.5
    else:
        assert got.objective is None and got.bound is None


def test_cbc_infeasible():
    m = knapsack()
    m.none = pyo.Constraint(expr=sum(m.x.values()) <= 1)
    got = cbc().solve(m, SolverSettings())
    assert got.status is Status.INFEASIBLE and got.objective is None


def test_values_of_an_earlier_solve_do_not_survive():
    b = cbc()
    m = knapsack()
    m.unused = pyo.Var(bounds=(0, 1))  # in no constraint: CBC never sees it
    m.unused.set_value(0.5)
    m.pinned = pyo.Var(bounds=(0, 3))
    m.pinned.fix(2.0)
    m.sub = pyo.Block()
    m.sub.unused = pyo.Var(bounds=(0, 1))
    m.sub.unused.set_value(1.0)
    assert b.solve(m, SolverSettings()).status is Status.OPTIMAL
    assert m.unused.value is None and m.pinned.value == 2.0 and m.sub.unused.value is None


def test_the_objectives_variables_left_without_a_value():
    b = cbc()
    m = knapsack()
    m.pinned = pyo.Var(bounds=(0, 3))
    m.pinned.fix(2.0)
    m.obj.expr = m.obj.expr + m.pinned
    results = b._opt.solve(m, load_solutions=False)
    assert backends._load_complete(m, results, m.obj) == []
    results = b._opt.solve(m, load_solutions=False)
    results.solution(0).variable.clear()  # the solver's answer has no values
    assert backends._load_complete(m, results, m.obj) == [f"x[{i}]" for i in range(5)]
    assert m.pinned.value == 2.0


def test_missing_values_of_the_objective_are_an_error(monkeypatch):
    b = cbc()
    monkeypatch.setattr(backends, "_load_complete", lambda model, results, obj: ["x[3]", "x[4]"])
    got = b.solve(knapsack(), SolverSettings())
    assert got.status is Status.ERROR and got.bound is None and got.objective is None
    assert got.message == ("cbc reported optimal but returned no value for 2 variable(s) of "
                           "the objective (e.g. x[3]); the solve is not trusted (a tolerance "
                           "issue in the solver)")


def scripted(monkeypatch, b, tc, status=SolverStatus.ok, lower=None, upper=None, **solver):
    """``b``'s solver returns results with no solution and termination ``tc``."""
    results = SimpleNamespace(
        solver=SimpleNamespace(termination_condition=tc, status=status, **solver),
        solution=[], problem=SimpleNamespace(lower_bound=lower, upper_bound=upper))
    monkeypatch.setattr(b, "available", lambda: True)
    b.calls = []
    monkeypatch.setattr(b._opt, "solve", lambda *a, **k: b.calls.append(k) or results)


@pytest.mark.parametrize("tc, status, expected", [
    (TC.maxTimeLimit, SolverStatus.ok, Status.NO_SOLUTION),
    (TC.maxIterations, SolverStatus.aborted, Status.NO_SOLUTION),
    (TC.maxEvaluations, SolverStatus.warning, Status.NO_SOLUTION),
    (TC.intermediateNonInteger, SolverStatus.aborted, Status.NO_SOLUTION),
    (TC.feasible, SolverStatus.ok, Status.NO_SOLUTION),
    (TC.other, SolverStatus.ok, Status.NO_SOLUTION),
    (TC.maxTimeLimit, SolverStatus.error, Status.ERROR),
    (TC.infeasible, SolverStatus.ok, Status.INFEASIBLE),
    (TC.infeasibleOrUnbounded, SolverStatus.warning, Status.INFEASIBLE),
    (TC.optimal, SolverStatus.ok, Status.ERROR),  # optimal with no solution
    (TC.unbounded, SolverStatus.ok, Status.ERROR),
])
def test_statuses_without_a_solution(monkeypatch, tc, status, expected):
    b = LegacyBackend("cbc")
    scripted(monkeypatch, b, tc, status, lower=2.5, upper=9.0, wallclock_time=1.25)
    got = b.solve(knapsack(), SolverSettings(verbose=tc == TC.other))
    assert b.calls == [dict(load_solutions=False, tee=tc == TC.other,
                            options=b._options(SolverSettings()))]
    assert got.status is expected and got.objective is None
    assert got.termination == str(tc) and got.solver_time == 1.25 and 0 <= got.wall_time < 60
    assert got.bound == (None if expected is Status.ERROR else 2.5)


def test_the_bound_of_a_maximisation_and_the_solvers_time(monkeypatch):
    b = LegacyBackend("cbc")
    scripted(monkeypatch, b, TC.maxTimeLimit, lower=2.5, upper=9.0, wallclock_time=None,
             time=3.5)
    got = b.solve(knapsack(pyo.maximize), SolverSettings())
    assert got.bound == 9.0 and got.solver_time == 3.5
    scripted(monkeypatch, b, TC.maxTimeLimit, lower=float("-inf"), time="undefined")
    got = b.solve(knapsack(), SolverSettings())
    assert got.bound is None and got.solver_time is None
    scripted(monkeypatch, b, TC.maxTimeLimit, wallclock_time=None)  # no time at all
    assert b.solve(knapsack(), SolverSettings()).solver_time is None


def test_a_caught_ctrl_c_is_raised(monkeypatch):
    b = LegacyBackend("cbc")
    scripted(monkeypatch, b, TC.userInterrupt)
    with pytest.raises(KeyboardInterrupt, match="cbc: the solve was interrupted"):
        b.solve(knapsack(), SolverSettings())


def test_a_crashed_or_failing_solver(monkeypatch):
    b = LegacyBackend("cbc")
    monkeypatch.setattr(b, "available", lambda: True)

    def crash(*args, **kwargs):
        raise ApplicationError("no solution file")

    monkeypatch.setattr(b._opt, "solve", crash)
    got = b.solve(knapsack(), SolverSettings())
    assert (got.status, got.objective, got.bound, got.solver_time, got.termination) == \
        (Status.ERROR, None, None, None, "crashed")
    assert 0 <= got.wall_time < 60
    assert got.message == ("cbc crashed (no solution file); nothing is claimed: try another "
                           "solver or other solver_options")

    def logged(*args, **kwargs):  # the solver's log, on one line, at most 200 characters
        logging.getLogger("pyomo.opt").warning("a warning")
        logging.getLogger("pyomo.core").error("another module's error")
        logging.getLogger("pyomo.opt").error("segfault   at\nwrite " + "x" * 300)
        raise ApplicationError("no solution file")

    monkeypatch.setattr(b._opt, "solve", logged)
    got = b.solve(knapsack(), SolverSettings())
    assert got.message == (f"cbc crashed ({('segfault at write ' + 'x' * 300)[:200]}); "
                           f"nothing is claimed: try another solver or other solver_options")

    def fail(*args, **kwargs):
        raise RuntimeError("bad file")

    monkeypatch.setattr(b._opt, "solve", fail)
    with pytest.raises(SolverError, match="cbc failed: RuntimeError: bad file"):
        b.solve(knapsack(), SolverSettings())


def test_a_missing_classic_solver_says_how_to_install(monkeypatch):
    b = LegacyBackend("cbc")
    monkeypatch.setattr(b, "available", lambda: False)
    with pytest.raises(SolverNotAvailableError, match="solver 'cbc' is not available: "
                                                      "install it with `apt-get install"):
        b.solve(knapsack(), SolverSettings())
    other = LegacyBackend("glpk")
    monkeypatch.setattr(other, "available", lambda: False)
    with pytest.raises(SolverNotAvailableError, match="'glpk' is not available: install it "
                                                      "and put it on PATH"):
        other.solve(knapsack(), SolverSettings())

    def broken(exception_flag):
        raise OSError("no executable")

    monkeypatch.setattr(LegacyBackend("cbc")._opt, "available", broken)
    probe = LegacyBackend("cbc")
    monkeypatch.setattr(probe._opt, "available", broken)
    assert probe.available() is False


# -- Gurobi -------------------------------------------------------------------------------


def test_gurobi_options_and_errors():
    g = GurobiBackend()
    assert g._solver_options(SolverSettings()) == {
        "OutputFlag": 0, "IntFeasTol": 1e-7, "OptimalityTol": 1e-9, "FeasibilityTol": 1e-8,
        "Seed": 0}
    assert g._solver_options(SolverSettings(seed=None, verbose=True)) == \
        {"OutputFlag": 1, "IntFeasTol": 1e-7, "OptimalityTol": 1e-9, "FeasibilityTol": 1e-8}
    assert g._solver_time(SimpleNamespace(timing_info=SimpleNamespace(gurobi_time=2.5))) == 2.5
    assert g._solver_time(SimpleNamespace(timing_info=SimpleNamespace())) is None
    size = Exception("Model too large")
    size.errno = 10010
    err = g._translate_error(size)
    assert isinstance(err, SolverLicenseError)
    assert str(err) == ("Gurobi refused the model: its licence is size-limited (Model too "
                        "large). Use solver='highs', reduce the model, or install a full "
                        "Gurobi licence")
    assert g._translate_error(Exception("no errno")) is None
    near = Exception("Model too large")
    near.errno = 10011
    assert g._translate_error(near) is None
    assert isinstance(g._translate_error(Exception("a size-limited licence")),
                      SolverLicenseError)
    for errno in (10009, 10032):
        exc = Exception("no licence")
        exc.errno = errno
        err = g._translate_error(exc)
        assert isinstance(err, SolverLicenseError)
        assert str(err) == "Gurobi licence problem: no licence"
    other = Exception("other")
    other.errno = 10003
    assert g._translate_error(other) is None
    assert (g.name, g.has_pool, g.persistent) == ("gurobi", True, True)


def gurobi() -> GurobiBackend:
    g = GurobiBackend()
    if not g.available():
        pytest.skip("Gurobi not available")
    return g


def test_gurobi_solves_and_its_pool_is_reset():
    g = gurobi()
    m = knapsack()
    got = g.solve(m, SolverSettings(mip_gap=0.0))
    assert got.status is Status.OPTIMAL and got.objective == pytest.approx(7)
    assert got.solver_time is not None
    outcome, members = g.solve_pool(m, SolverSettings(mip_gap=0.0), 3, mode=2)
    assert outcome.status is Status.OPTIMAL and len(members) == 3
    assert [obj for obj, _ in members] == sorted(obj for obj, _ in members)
    assert members[0][0] == pytest.approx(7)
    gm = g._instance()._solver_model
    assert (gm.Params.PoolSolutions, gm.Params.PoolSearchMode) == (10, 0)
    outcome, members = g.solve_pool(m, SolverSettings(mip_gap=0.0), 50, mode=2, gap=0.2)
    assert all(obj <= 7 * 1.2 + 1e-9 for obj, _ in members) and len(members) >= 2
    m.none = pyo.Constraint(expr=sum(m.x.values()) <= 0)
    outcome, members = g.solve_pool(m, SolverSettings(), 3)
    assert outcome.status is Status.INFEASIBLE and members == []


# -- make_solver ---------------------------------------------------------------------------


class Missing(SolverBackend):
    name = "missing"

    def available(self):
        return False

    def _solve(self, model, settings):
        raise AssertionError


def test_make_solver_by_name(monkeypatch):
    given = HighsBackend()
    assert make_solver(given) is given
    assert isinstance(make_solver(" HiGHS "), HighsBackend)
    assert isinstance(make_solver("appsi_highs"), HighsBackend)
    assert type(make_solver("cpsat")).__name__ == "CpSatBackend"
    if GurobiBackend().available():
        for name in ("gurobi", "gurobi_persistent", "gurobi_direct"):
            assert isinstance(make_solver(name), GurobiBackend)
    if shutil.which("cbc"):
        legacy = make_solver("CBC")
        assert isinstance(legacy, LegacyBackend) and legacy.name == "cbc"
    with pytest.raises(TypeError, match="solver must be a name or a SolverBackend, got int"):
        make_solver(3)
    with pytest.raises(ValueError, match="unknown solver 'nope': use 'highs', 'gurobi', "
                                         "'cbc', 'cpsat' or the name of a solver"):
        make_solver("nope")
    monkeypatch.setitem(backends.REGISTERED_BACKENDS, "missing", Missing)
    with pytest.raises(SolverNotAvailableError, match="solver 'missing' is not available: "
                                                      "install it and put it on PATH"):
        make_solver("missing")
    register_backend("missing2", Missing)
    try:
        assert backends.REGISTERED_BACKENDS["missing2"] is Missing
    finally:
        del backends.REGISTERED_BACKENDS["missing2"]
    monkeypatch.setattr(HighsBackend, "available", lambda self: False)
    with pytest.raises(SolverNotAvailableError, match="solver 'highs' is not available: "
                                                      "install it with `pip install highspy`"):
        make_solver("highs")
