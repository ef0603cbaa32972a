"""What every solver backend shares (:mod:`cfopt.solvers.base`), with no solver: the
settings' checks, the outcome's gap, a scripted backend's solve under a cutoff (the
re-solve without it, the time left), its ranges, the defaults a backend inherits, the
time left of a limit and the Ctrl-C watch."""

from __future__ import annotations

import math
import signal
import threading
from types import SimpleNamespace

import pyomo.environ as pyo
import pytest

import cfopt
from cfopt.errors import SolverError
from cfopt.solvers import base
from cfopt.solvers.base import (
    SolveOutcome,
    SolverBackend,
    SolverSettings,
    sigint_watch,
    time_left,
)

Status = cfopt.Status


def outcome(status=Status.OPTIMAL, objective=1.0, bound=1.0, wall=0.5, message=""):
    return SolveOutcome(status, objective, bound, 0.25, wall, "done", message)


class Scripted(SolverBackend):
    """Answers each solve from ``script`` (one outcome per call, or a function of the
    model) and records the settings and start of every call; ``cutoff_options`` sends
    the cutoff as the raw option ``objective_bound`` (a HiGHS option)."""

    name = "highs"

    def __init__(self, script=(), clock=None, cost=0.0, cut=True) -> None:
        self.script, self.calls, self.clock, self.cost = list(script), [], clock, cost
        self.cut, self.models = cut, []

    def available(self) -> bool:
        return True

    def _solve(self, model, settings):
        self.calls.append((settings, None))
        return self._answer(model)

    def _answer(self, model):
        self.models.append(model)
        if self.clock is not None:
            self.clock.now += self.cost
        step = self.script.pop(0)
        return step(model) if callable(step) else step

    def cutoff_options(self, cutoff):
        return {"objective_bound": cutoff} if self.cut else super().cutoff_options(cutoff)


class Starting(Scripted):
    """Takes MIP starts: its calls with a start are ``(settings, start, "from")``."""

    def _solve_from(self, model, settings, start):
        self.calls.append((settings, start, "from"))
        return self._answer(model)


def tiny(sense=pyo.minimize):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 4))
    m.y = pyo.Var(bounds=(-1, 2))
    m.obj = pyo.Objective(expr=m.x + m.y, sense=sense)
    return m


@pytest.fixture
def clock(monkeypatch):
    """A clock for :mod:`cfopt.solvers.base` that moves only when told."""
    now = SimpleNamespace(now=100.0)
    monkeypatch.setattr(base, "time", SimpleNamespace(perf_counter=lambda: now.now))
    return now


# -- settings ---------------------------------------------------------------------------


def test_settings_defaults():
    s = SolverSettings()
    assert (s.time_limit, s.mip_gap, s.threads, s.seed, s.options, s.verbose) == \
        (None, 1e-4, 1, 0, {}, False)
    assert SolverSettings().options is not s.options


@pytest.mark.parametrize("kwargs, error, message", [
    ({"time_limit": True}, TypeError, "time_limit must be a number of seconds, got True"),
    ({"time_limit": "10"}, TypeError, "time_limit must be a number of seconds, got '10'"),
    ({"time_limit": 0}, ValueError, "time_limit must be a positive number of seconds, got 0"),
    ({"time_limit": -2.0}, ValueError, "positive number of seconds, got -2.0"),
    ({"time_limit": math.inf}, ValueError, "positive number of seconds, got inf"),
    ({"time_limit": math.nan}, ValueError, "positive number of seconds, got nan"),
    ({"mip_gap": 1}, ValueError, r"mip_gap must be a relative gap in \[0, 1\), got 1"),
    ({"mip_gap": -1e-9}, ValueError, r"relative gap in \[0, 1\), got -1e-09"),
    ({"mip_gap": "0.1"}, ValueError, r"relative gap in \[0, 1\), got '0.1'"),
    ({"threads": 0}, ValueError, "threads must be a positive integer or None, got 0"),
    ({"threads": 2.0}, ValueError, "threads must be a positive integer or None, got 2.0"),
    ({"seed": -1}, ValueError, "seed must be a non-negative integer or None, got -1"),
    ({"seed": 1.0}, ValueError, "seed must be a non-negative integer or None, got 1.0"),
    ({"options": [("a", 1)]}, TypeError, r"options must be a dict of solver options, got \["),
])
def test_bad_settings_name_the_setting_and_value(kwargs, error, message):
    with pytest.raises(error, match=message):
        SolverSettings(**kwargs)


def test_settings_at_their_limits_are_accepted():
    for kwargs in ({"time_limit": 1e-9}, {"time_limit": 3}, {"mip_gap": 0}, {"mip_gap": 0.999},
                   {"mip_gap": 0.0}, {"threads": 1}, {"threads": None}, {"seed": 0},
                   {"seed": None}, {"options": {}}):
        s = SolverSettings(**kwargs)
        assert getattr(s, next(iter(kwargs))) == next(iter(kwargs.values()))


def test_gap_is_relative_to_the_objective():
    assert outcome(objective=None, bound=1.0).gap is None
    assert outcome(objective=1.0, bound=None).gap is None
    assert outcome(objective=-2.0, bound=-3.0).gap == pytest.approx(0.5)
    assert outcome(objective=4.0, bound=5.0).gap == pytest.approx(0.25)
    assert outcome(objective=0.0, bound=1e-12).gap == pytest.approx(1e-2)


# -- solve under a cutoff ----------------------------------------------------------------


def test_solve_without_a_cutoff_is_one_solve_with_the_settings():
    done = outcome()
    backend = Scripted([done])
    assert backend.solve(tiny()) is done
    settings, start = backend.calls[0]
    assert settings == SolverSettings() and start is None
    given = SolverSettings(time_limit=3.0, threads=2)
    backend = Scripted([done])
    assert backend.solve(tiny(), given) is done and backend.calls[0][0] is given


def test_solve_refuses_options_the_solver_does_not_know():
    backend = Scripted([outcome()])
    with pytest.raises(ValueError, match="solver_options: highs .*no_such_option"):
        backend.solve(tiny(), SolverSettings(options={"no_such_option": 1}))
    assert backend.calls == []


def test_a_start_goes_to_solve_from_and_by_default_is_dropped():
    start = pyo.ComponentMap()
    m = tiny()
    start[m.x] = 1.0
    settings = SolverSettings(time_limit=4.0)
    backend = Starting([outcome(), outcome()])
    backend.solve(m, settings, start=start)
    assert backend.calls[0] == (settings, start, "from") and backend.models == [m]
    backend.solve(m, settings)  # no start: the plain solve
    assert backend.calls[1] == (settings, None) and backend.models == [m, m]
    plain = Scripted([outcome()])
    plain.solve(m, settings, start=start)
    assert plain.calls == [(settings, None)] and plain.models == [m]  # _solve_from: _solve


def test_a_cutoff_above_the_incumbent_is_one_solve(clock):
    bounded = outcome(objective=2.0)
    backend = Scripted([bounded])
    settings = SolverSettings(time_limit=10.0, options={"threads": 1})
    assert backend.solve(tiny(), settings, cutoff=2.5) is bounded
    assert backend.calls[0][0].options == {"threads": 1, "objective_bound": 2.5}
    assert backend.calls[0][0].time_limit == 10.0
    assert settings.options == {"threads": 1}


@pytest.mark.parametrize("bounded", [
    outcome(objective=2.5),  # at the cutoff: the solver may have dropped better points
    outcome(objective=3.0),
    outcome(Status.INFEASIBLE, objective=None, bound=None),
    outcome(Status.FEASIBLE, objective=None),
    outcome(Status.NO_SOLUTION, objective=1.0),
])
def test_no_point_below_the_cutoff_solves_again_without_it(clock, bounded):
    final = outcome(objective=1.5, wall=0.125)
    backend = Scripted([bounded, final], clock, cost=2.0)
    settings = SolverSettings(time_limit=10.0, options={"threads": 1})
    m = tiny()
    got = backend.solve(m, settings, start=None, cutoff=2.5)
    assert backend.models == [m, m]
    assert [c[0].options for c in backend.calls] == [
        {"threads": 1, "objective_bound": 2.5}, {"threads": 1}]
    assert backend.calls[1][0].time_limit == pytest.approx(8.0)
    assert got.objective == 1.5 and got.status is Status.OPTIMAL
    assert got.wall_time == pytest.approx(4.0)  # both solves, not the last one's 0.125


def test_the_second_solve_keeps_the_start(clock):
    m = tiny()
    start = pyo.ComponentMap([(m.x, 2.0)])
    backend = Starting([outcome(Status.INFEASIBLE, None, None), outcome()], clock)
    backend.solve(m, cutoff=0.5, start=start)
    assert [c[1:] for c in backend.calls] == [(start, "from"), (start, "from")]
    assert backend.models == [m, m]


def test_no_time_left_after_the_cutoff_solve_is_no_solution(clock):
    bounded = outcome(Status.FEASIBLE, objective=3.0, bound=0.5, message="")
    backend = Scripted([bounded], clock, cost=10.0)
    got = backend.solve(tiny(), SolverSettings(time_limit=10.0), cutoff=2.5)
    assert len(backend.calls) == 1
    assert got.status is Status.NO_SOLUTION and got.bound is None
    assert got.objective == 3.0 and got.wall_time == bounded.wall_time
    assert got.message == "time limit reached after a solve under a cutoff found no point"


def test_without_a_limit_the_second_solve_has_none(clock):
    backend = Scripted([outcome(Status.INFEASIBLE, None, None), outcome()], clock, cost=1e6)
    got = backend.solve(tiny(), SolverSettings(), cutoff=2.5)
    assert got.status is Status.OPTIMAL and backend.calls[1][0].time_limit is None


def test_a_cutoff_of_a_maximisation_is_refused():
    backend = Scripted([outcome()])
    with pytest.raises(ValueError, match="a cutoff is an upper limit of a minimisation; "
                                         "this model maximises"):
        backend.solve(tiny(pyo.maximize), cutoff=1.0)
    assert backend.calls == []
    # no cutoff, or a backend that does not use one: nothing to refuse
    assert Scripted([outcome()]).solve(tiny(pyo.maximize)).status is Status.OPTIMAL
    # the sense is the active objective's
    m = tiny()
    m.first = pyo.Objective(expr=m.x, sense=pyo.maximize)
    m.first.deactivate()
    m.del_component(m.obj)
    m.obj = pyo.Objective(expr=m.y)
    assert Scripted([outcome(objective=0.5)]).solve(m, cutoff=1.0).objective == 0.5
    unused = Scripted([outcome(objective=9.0)], cut=False)
    assert unused.solve(tiny(pyo.maximize), cutoff=1.0).objective == 9.0
    assert unused.calls[0][0].options == {}


# -- ranges ------------------------------------------------------------------------------


def test_ranges_solve_each_side_of_each_variable_with_its_own_objective_set_aside():
    m = tiny()
    m.other = pyo.Objective(expr=m.x, sense=pyo.maximize)
    m.other.deactivate()
    seen = []

    def side(model):
        active = list(model.component_data_objects(pyo.Objective, active=True))
        assert [o.local_name for o in active] == ["_range_objective"]
        obj = model._range_objective
        var, sense = obj.expr, obj.sense
        seen.append((var.local_name, sense))
        value = (var.lb if sense == pyo.minimize else var.ub) + 0.5
        status = Status.FEASIBLE if (var.local_name, sense) == ("y", pyo.maximize) \
            else Status.OPTIMAL
        return outcome(status, objective=value)

    backend = Scripted([side] * 4)
    settings = SolverSettings(time_limit=7.0)
    found = backend.ranges(m, [m.x, m.y], settings)
    assert [c for c in backend.calls] == [(settings, None)] * 4 and backend.models == [m] * 4
    assert found == [(0.5, 4.5), (-0.5, None)]
    assert seen == [("x", pyo.minimize), ("x", pyo.maximize), ("y", pyo.minimize),
                    ("y", pyo.maximize)]
    assert m.obj.active and not m.other.active and m.component("_range_objective") is None


def test_ranges_restore_the_objective_when_a_solve_fails():
    m = tiny()

    def fail(model):
        raise RuntimeError("solver crashed")

    with pytest.raises(RuntimeError, match="solver crashed"):
        Scripted([fail]).ranges(m, [m.x], SolverSettings())
    assert m.obj.active and m.component("_range_objective") is None


# -- what a backend inherits ---------------------------------------------------------------


def test_backend_defaults():
    backend = Scripted()
    assert (backend.persistent, backend.has_pool) == (False, False)
    assert backend.pool_kind == "the solver's solution pool"
    assert backend.cutoff_options(3.0) == {"objective_bound": 3.0}
    assert Scripted(cut=False).cutoff_options(3.0) == {}
    assert backend.light_heuristics() == {} and backend.tree_options() == {}
    assert backend.overhead(tiny()) == 0.0
    assert backend.limit_counts_loading(10 ** 9) is False
    assert backend.reset() is None
    assert repr(backend) == "Scripted('highs')"
    with pytest.raises(SolverError, match="solver 'highs' has no solution pool cfopt "
                                                "can read; use an iterative diversity"):
        backend.solve_pool(tiny(), SolverSettings(), 3)


# -- the time left of a limit --------------------------------------------------------------


def test_time_left(clock):
    unlimited = SolverSettings()
    assert time_left(unlimited, 0.0) is unlimited
    settings = SolverSettings(time_limit=10.0, threads=2)
    left = time_left(settings, clock.now - 3.0)
    assert left.time_limit == pytest.approx(7.0) and left.threads == 2
    assert time_left(settings, clock.now - 9.5).time_limit == pytest.approx(0.5)
    assert time_left(settings, clock.now - 10.0) is None
    assert time_left(settings, clock.now - 11.0) is None


# -- Ctrl-C --------------------------------------------------------------------------------


@pytest.fixture
def handler():
    """Restores the process's SIGINT handler after the test."""
    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_with_pythons_handler_is_seen_and_raised(handler):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with sigint_watch() as interrupted:
        assert not interrupted()
        record = signal.getsignal(signal.SIGINT)
        assert record is not signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            record(signal.SIGINT, None)
        assert interrupted()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_with_the_default_action_is_seen_and_raised(handler):
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    with sigint_watch() as interrupted:
        with pytest.raises(KeyboardInterrupt):
            signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
        assert interrupted()
    assert signal.getsignal(signal.SIGINT) == signal.SIG_DFL


def test_ctrl_c_ignored_or_handled_by_the_user_goes_on(handler):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with sigint_watch() as interrupted:
        assert signal.getsignal(signal.SIGINT)(signal.SIGINT, None) is None
        assert not interrupted()
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    calls = []
    signal.signal(signal.SIGINT, lambda signum, frame: calls.append((signum, frame)))
    with sigint_watch() as interrupted:
        signal.getsignal(signal.SIGINT)(signal.SIGINT, "frame")
        assert not interrupted() and calls == [(signal.SIGINT, "frame")]


def test_ctrl_c_off_the_main_thread_is_not_watched(handler):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    found = []

    def work():
        with sigint_watch() as interrupted:
            found.append((interrupted(), signal.getsignal(signal.SIGINT)))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert found == [(False, signal.default_int_handler)]
