"""Diverse sets (:mod:`cfopt.query.diverse`) driven by a scripted query runner: the
iterative methods' cuts, solves, stopping reasons, cut-off and restoration; the pool's
harvest (de-duplication, verification, bounds, statuses, stopping reasons); the options
checked with the culprit named. The cuts, decoding and the result classes are replaced by
recorders, so every value handed on is checked exactly."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pandas as pd
import pytest

from cfopt.query import diverse as D
from cfopt.query.diverse import check_set_request, explain_diverse
from cfopt.results.status import Status
from cfopt.solvers import SolveOutcome, SolverSettings

SETTINGS = SolverSettings(time_limit=None, mip_gap=0.01)


def row(a: float, b: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame([{"a": a, "b": b}])


def ce(a, objective, status=Status.OPTIMAL, found=True):
    return SimpleNamespace(found=found, status=status, objective=objective,
                           counterfactual=row(a), name=f"ce{a}")


class Cuts:
    def __init__(self, name, min_change, integers_too):
        self.name, self.min_change, self.integers_too = name, min_change, integers_too
        self.calls = []

    def add_distance(self, m, last, radius):
        assert m is self.m
        self.calls.append(("distance", last["a"], radius))

    def add_nogood(self, m, changed, hamming):
        assert m is self.m
        self.calls.append(("nogood", changed, hamming))


class Milp:
    max_objective = 99.0
    declared_margin = 0.25
    factual_class = 0

    def __init__(self, taken=()):
        self.taken, self.added, self.removed = set(taken), [], []
        self.cutoff = self.max_objective
        self.factual, self.target, self.space = row(0.0), 1, "space"

    def component(self, name):
        return object() if name in self.taken else None

    def add_constraint(self, c):
        c.m = self
        self.added.append(c)

    def remove_constraint(self, name):
        self.removed.append(name)

    def distances(self, r):
        return {"l1": float(r["a"].iloc[0])}


class Runner:
    margin = 0.5

    def __init__(self, answers, has_pool=False, taken=(), pool=None, outcome=None):
        self.milp = Milp(taken)
        self.answers, self.asked, self.started = list(answers), [], []
        self.backend = SimpleNamespace(has_pool=has_pool, name="hi", pool_kind="its pool",
                                       solve_pool=self.solve_pool)
        self.pool, self.outcome, self.pooled = pool, outcome, []

    def start(self, x, target, options):
        self.started.append((x, target, options))
        return SETTINGS

    def answer(self, settings, t0, diagnose_infeasible=True):
        assert isinstance(t0, float) and time.perf_counter() - 30 < t0 <= time.perf_counter()
        cuts = self.milp.added[-1].calls if self.milp.added else None
        self.asked.append((settings, diagnose_infeasible, self.milp.cutoff,
                           None if cuts is None else list(cuts)))
        if not self.answers:
            raise RuntimeError("answer re-solved")
        return self.answers.pop(0)

    def solve_pool(self, m, settings, size, mode, gap):
        assert m is self.milp
        self.pooled.append((settings, size, mode, gap))
        return self.outcome, self.pool


@pytest.fixture(autouse=True)
def recorders(monkeypatch):
    monkeypatch.setattr(D, "DiversityCuts", Cuts)
    monkeypatch.setattr(D, "changed_features",
                        lambda space, factual, last: (space, factual["a"], last["a"]))
    monkeypatch.setattr(D, "CounterfactualSet", lambda **kw: kw)
    monkeypatch.setattr(D, "Counterfactual", lambda **kw: SimpleNamespace(**kw))


def check_restored(runner):
    m = runner.milp
    assert m.cutoff == 99.0 and m.removed == [m.added[0].name] and len(m.added) == 1


def test_nogood_members_and_cuts():
    runner = Runner([ce(1, 1.0), ce(2, 2.0), ce(3, 3.0)])
    got = explain_diverse(runner, "x", "t", n=3, mip_gap=0.01, hamming=2)
    assert runner.started == [("x", "t", {"mip_gap": 0.01})]
    assert [c.name for c in got["members"]] == ["ce1", "ce2", "ce3"]
    assert (got["method"], got["requested"], got["status"], got["cfd"], got["stopped"],
            got["epsilon"]) == ("nogood", 3, Status.OPTIMAL, 1.0, "complete", None)
    assert got["details"] == {"min_change": 0.1, "hamming": 2}
    assert got["factual"] is runner.milp.factual and got["target"] == 1
    assert 0 <= got["total_time"] < 30
    cuts = runner.milp.added[0]
    assert (cuts.name, cuts.min_change, cuts.integers_too) == ("diversity", 0.1, True)
    assert cuts.calls == [("nogood", ("space", 0.0, 1.0), 2), ("nogood", ("space", 0.0, 2.0), 2)]
    # the first solve before any cut, with the diagnosis; the others without
    assert runner.asked == [(SETTINGS, True, 99.0, None), (SETTINGS, False, 99.0, [cuts.calls[0]]),
                            (SETTINGS, False, 99.0, cuts.calls)]
    check_restored(runner)


def test_nogood_default_hamming_and_a_free_name():
    runner = Runner([ce(1, 1.0), ce(2, 2.0)], taken=("diversity", "diversity_2"))
    got = explain_diverse(runner, "x", n=2, min_change=0.3)
    assert runner.started == [("x", None, {})]
    assert runner.milp.added[0].name == "diversity_3" and runner.milp.added[0].min_change == 0.3
    assert runner.milp.added[0].calls == [("nogood", ("space", 0.0, 1.0), 1)]
    assert got["details"] == {"min_change": 0.3, "hamming": 1}
    runner = Runner([ce(1, 1.0)], taken=("diversity",))
    explain_diverse(runner, "x", n=1)
    assert runner.milp.added[0].name == "diversity_2" and runner.milp.added[0].calls == []
    check_restored(runner)


@pytest.mark.parametrize("method, last, stopped", [
    ("nogood", ce(9, 0, Status.INFEASIBLE, found=False), "exhausted"),
    ("distance", ce(9, 0, Status.INFEASIBLE, found=False), "exhausted"),
    ("epsilon", ce(9, 0, Status.INFEASIBLE, found=False), "no further set within (1+ε)·cfd"),
    ("nogood", ce(9, 0, Status.NO_SOLUTION, found=False), "time_limit"),
    ("nogood", ce(9, 0, Status.ERROR, found=False), "error"),
    ("nogood", ce(9, 0, Status.VERIFICATION_FAILED, found=False), "verification_failed"),
])
def test_stopping_reasons(method, last, stopped):
    runner = Runner([ce(1, 1.0), ce(2, 2.0), last, ce(3, 3.0)])
    got = explain_diverse(runner, "x", n=4, method=method)
    assert [c.name for c in got["members"]] == ["ce1", "ce2"] and got["stopped"] == stopped
    assert len(runner.asked) == 3
    assert len(runner.answers) == 1
    check_restored(runner)


def test_the_first_not_found():
    runner = Runner([ce(1, None, Status.NO_SOLUTION, found=False), ce(2, 2.0)])
    got = explain_diverse(runner, "x", n=3, method="epsilon")
    assert got["members"] == [] and got["stopped"] == "no_solution" and got["cfd"] is None
    assert got["status"] is Status.NO_SOLUTION and len(runner.asked) == 1
    assert runner.asked[0][2] == 99.0  # no cut-off without a first member
    check_restored(runner)
    runner = Runner([ce(1, 1.0, Status.OPTIMAL, found=False)])
    got = explain_diverse(runner, "x", n=3, method="distance")
    assert got["cfd"] is None and got["details"] == {"min_distance": None}


def test_a_feasible_first_has_no_cfd():
    runner = Runner([ce(1, 1.0, Status.FEASIBLE), ce(2, 2.0)])
    got = explain_diverse(runner, "x", n=2)
    assert got["cfd"] is None and got["status"] is Status.FEASIBLE and len(got["members"]) == 2
    runner = Runner([ce(1, 1.0, Status.FEASIBLE), ce(2, 2.0)])
    got = explain_diverse(runner, "x", n=2, method="epsilon")
    assert got["stopped"] == ("cfd not proven optimal: no certified reference for the "
                              "ε-enumeration")
    assert len(got["members"]) == 1 and got["epsilon"] == 0.1 and len(runner.asked) == 1
    check_restored(runner)
    runner = Runner([ce(1, 1.0, Status.FEASIBLE)])  # the one member asked for: complete
    assert explain_diverse(runner, "x", n=1, method="epsilon")["stopped"] == "complete"


def test_epsilon_cutoff():
    runner = Runner([ce(1, 2.0), ce(2, 2.5), ce(3, 2.9)])
    got = explain_diverse(runner, "x", n=3, method="epsilon", epsilon=0.5)
    cutoff = 2.0 * 1.5 * (1 + 1e-9) + 1e-12
    assert [a[2] for a in runner.asked] == [99.0, cutoff, cutoff]
    assert cutoff > 3.0
    assert got["epsilon"] == 0.5 and got["cfd"] == 2.0 and got["method"] == "epsilon"
    assert got["details"] == {"min_change": 0.01, "epsilon": 0.5}
    cuts = runner.milp.added[0]
    assert (cuts.min_change, cuts.integers_too) == (0.01, False)
    assert cuts.calls == [("nogood", ("space", 0.0, 1.0), 1), ("nogood", ("space", 0.0, 2.0), 1)]
    check_restored(runner)
    runner = Runner([ce(1, 1e-13), ce(2, 0.0)])  # the absolute slack at a zero cfd
    explain_diverse(runner, "x", n=2, method="epsilon", epsilon=0.0)
    assert runner.asked[1][2] == 1e-13 * (1 + 1e-9) + 1e-12


def test_distance_radius():
    runner = Runner([ce(1, 2.0), ce(2, 3.0), ce(3, 4.0)])
    got = explain_diverse(runner, "x", n=3, method="distance")
    assert runner.milp.added[0].calls == [("distance", 1.0, 2.0), ("distance", 2.0, 2.0)]
    assert got["details"] == {"min_distance": 2.0} and got["epsilon"] is None
    assert runner.milp.added[0].min_change == 0.01 and not runner.milp.added[0].integers_too
    runner = Runner([ce(1, 2.0), ce(2, 3.0)])
    got = explain_diverse(runner, "x", n=2, method="distance", min_distance=0.5)
    assert runner.milp.added[0].calls == [("distance", 1.0, 0.5)]
    assert got["details"] == {"min_distance": 0.5}


def test_time_up(monkeypatch):
    budgets = [SolverSettings(time_limit=3.0), None]
    seen = []
    monkeypatch.setattr(D, "time_left", lambda s, t0: seen.append((s, type(t0))) or budgets.pop(0))
    runner = Runner([ce(1, 1.0), ce(2, 2.0), ce(3, 3.0)])
    got = explain_diverse(runner, "x", n=3)
    assert got["stopped"] == "time_limit" and len(got["members"]) == 2
    assert seen == [(SETTINGS, float), (SETTINGS, float)]
    assert runner.asked[1][0] == SolverSettings(time_limit=3.0)
    check_restored(runner)


def test_restored_after_an_error():
    runner = Runner([ce(1, 1.0)], taken=())
    runner.milp.cutoff = 5.0
    with pytest.raises(RuntimeError, match="re-solved"):
        explain_diverse(runner, "x", n=3, method="epsilon")
    check_restored(runner)


def test_pool_falls_back_to_nogood():
    runner = Runner([ce(1, 1.0), ce(2, 2.0)], has_pool=False)
    got = explain_diverse(runner, "x", n=2, method="pool", pool_mode=1)
    assert got["method"] == "nogood" and runner.pooled == []
    assert got["details"] == {"fallback": "solver 'hi' has no solution pool; no-good cuts "
                                          "used instead", "hamming": 1, "min_change": 0.1}
    cuts = runner.milp.added[0]
    assert (cuts.min_change, cuts.integers_too) == (0.1, True)
    assert cuts.calls == [("nogood", ("space", 0.0, 1.0), 1)]


def outcome(status=Status.OPTIMAL, bound=1.0):
    return SolveOutcome(status, 1.0, bound, 2.0, 3.0, "t")


def harvest(monkeypatch, pool, n=3, out=None, verified=(), **options):
    """The pool ``[(objective, a)]``; points whose ``a`` is in ``verified`` pass."""
    loaded = []
    monkeypatch.setattr(D, "load_member", lambda values: loaded.append(values))

    def verify(m, margin):
        assert margin == 0.25 and isinstance(m, Milp)
        a = loaded[-1]
        return SimpleNamespace(row=row(a), verified=a in verified, predicted=1)

    monkeypatch.setattr(D, "verified_solution", verify)
    monkeypatch.setattr(D, "objective_value",
                        lambda m, r: isinstance(m, Milp) and float(r["a"].iloc[0]))
    runner = Runner([], has_pool=True, pool=pool, outcome=out or outcome())
    got = explain_diverse(runner, "x", n=n, method="pool", **options)
    return got, runner, loaded


def test_pool_harvest(monkeypatch):
    pool = [(1.0, 1.0), (1.5, 1.0), (2.0, 2.0), (2.5, 2.0), (3.0, 3.0), (4.0, 4.0), (5.0, 5.0)]
    got, runner, loaded = harvest(monkeypatch, pool, n=2, verified=(1.0, 3.0, 4.0),
                                  pool_gap=0.5)
    assert runner.pooled == [(SETTINGS, 102, 2, 0.5)]
    # a duplicate skipped, an unverified point rejected once (its duplicate skipped)
    assert loaded == [1.0, 1.0, 2.0, 2.0, 3.0]
    first, second = got["members"]
    assert first.status is Status.OPTIMAL and first.objective == 1.0 and first.bound == 1.0
    assert first.message == "" and first.solve_time == 3.0 and first.solver_time == 2.0
    assert second.status is Status.FEASIBLE and second.bound == 1.0
    assert second.message == "pool member 5 (feasible, not the optimum)"
    assert second.solve_time == 0.0 and second.solver_time is None
    assert second.details == {"solver_objective": 3.0} and second.distances == {"l1": 3.0}
    assert (first.solver, first.margin, first.attempts, first.verified, first.space,
            first.predicted_class, first.factual_class, first.target) == (
        "hi", 0.5, 1, True, "space", 1, 0, 1)
    assert first.factual is runner.milp.factual
    assert list(first.counterfactual["a"]) == [1.0]
    assert (got["method"], got["requested"], got["status"], got["cfd"], got["stopped"]) == (
        "pool", 2, Status.OPTIMAL, 1.0, "complete")
    assert got["details"] == {"pool_mode": 2, "pool_gap": 0.5, "harvested": 7,
                              "rejected_by_verification": 1, "solver_status": "optimal"}
    assert 0 <= got["total_time"] < 30 and got["target"] == 1
    assert got["factual"] is runner.milp.factual


def test_pool_bounds_and_statuses(monkeypatch):
    # a member cheaper than the solver's bound lowers the bound to its own value
    got, _, _ = harvest(monkeypatch, [(0.5, 0.5), (1.0, 1.005)], n=3, verified=(0.5, 1.005),
                        out=outcome(Status.FEASIBLE, bound=1.0), pool_mode=1)
    a, b = got["members"]
    assert a.bound == 0.5 and a.status is Status.OPTIMAL
    assert b.bound == 1.0 and b.status is Status.OPTIMAL  # within the 1 % gap
    assert got["stopped"] == ("pool exhausted: 2 harvested from its pool, 2 distinct and "
                              "verified; diversity='nogood' finds more")
    assert got["details"]["pool_mode"] == 1 and got["details"]["solver_status"] == "feasible"
    got, _, _ = harvest(monkeypatch, [(1.0, 1.1)], verified=(1.1,), out=outcome(bound=None))
    (a,) = got["members"]
    assert a.bound is None and a.status is Status.FEASIBLE and got["cfd"] is None
    assert got["status"] is Status.FEASIBLE
    got, _, _ = harvest(monkeypatch, [(1.0, 1.1)], verified=(1.1,), out=outcome(bound=1.0))
    assert got["members"][0].status is Status.FEASIBLE and got["cfd"] is None


def test_pool_without_members(monkeypatch):
    got, _, _ = harvest(monkeypatch, [], out=outcome(Status.NO_SOLUTION, bound=None))
    assert got["members"] == [] and got["stopped"] == "no_solution"
    assert got["status"] is Status.NO_SOLUTION and got["cfd"] is None
    got, _, _ = harvest(monkeypatch, [(1.0, 1.0)], out=outcome(Status.OPTIMAL))
    assert got["members"] == [] and got["status"] is Status.OPTIMAL
    assert got["details"]["rejected_by_verification"] == 1
    assert got["stopped"].startswith("pool exhausted: 1 harvested")


def test_pool_members_of_a_stopped_solve(monkeypatch):
    got, _, _ = harvest(monkeypatch, [(1.0, 1.0)], verified=(1.0,),
                        out=outcome(Status.NO_SOLUTION, bound=1.0))
    assert len(got["members"]) == 1 and got["stopped"] == "no_solution"
    got, _, _ = harvest(monkeypatch, [(1.0, 1.0)], n=1, verified=(1.0,),
                        out=outcome(Status.NO_SOLUTION, bound=1.0))
    assert got["stopped"] == "complete"


def test_an_infeasible_pool_is_re_solved_for_the_diagnosis(monkeypatch):
    asked = []
    monkeypatch.setattr(Runner, "answer", lambda self, settings, t0: asked.append(
        (settings, type(t0))) or pytest.fail("raises"))
    with pytest.raises(pytest.fail.Exception):
        harvest(monkeypatch, [], out=outcome(Status.INFEASIBLE, bound=None))
    assert asked == [(SETTINGS, float)]


def test_rejections_counted(monkeypatch):
    got, _, _ = harvest(monkeypatch, [(1.0, 1.0), (2.0, 2.0), (3.0, 3.0)], verified=(3.0,))
    assert got["details"]["rejected_by_verification"] == 2 and len(got["members"]) == 1


def test_five_members_by_default():
    runner = Runner([ce(k, float(k)) for k in range(1, 8)])
    got = explain_diverse(runner, "x")
    assert got["requested"] == 5 and len(got["members"]) == 5 and len(runner.answers) == 2


@pytest.mark.parametrize("n", [0, -1, 1.0, True, "2"])
def test_bad_n(n):
    with pytest.raises(ValueError, match=f"^n must be a positive integer, got {n!r}$"):
        check_set_request(n, "nogood", {})


def test_bad_method_and_options():
    with pytest.raises(ValueError, match=r"^unknown diversity method 'x'; use one of "
                                         r"\['nogood', 'distance', 'epsilon', 'pool'\]$"):
        check_set_request(1, "x", {})
    with pytest.raises(TypeError, match=r"^unknown option\(s\) \['k', 'z'\] for a diverse "
                                        r"explain\(\); accepted: \['time_limit', "):
        check_set_request(1, "nogood", {"z": 1, "k": 2, "mip_gap": 0.1, "hamming": 1})
    with pytest.raises(TypeError, match=r"^option\(s\) \['epsilon', 'pool_gap'\] do not apply "
                                        r"to diversity='nogood' \(it takes \['hamming', "
                                        r"'min_change'\]\)$"):
        check_set_request(1, "nogood", {"pool_gap": 1, "epsilon": 2})


def test_set_options():
    assert check_set_request(1, "nogood", {"time_limit": 3}) == {"min_change": 0.1,
                                                                 "hamming": 1}
    assert check_set_request(1, "nogood", {"hamming": 3, "min_change": 0.0}) == {
        "min_change": 0.0, "hamming": 3}
    assert check_set_request(1, "epsilon", {}) == {"min_change": 0.01, "epsilon": 0.1}
    got = check_set_request(1, "epsilon", {"epsilon": 0, "min_change": 0.2})
    assert got == {"min_change": 0.2, "epsilon": 0.0} and type(got["epsilon"]) is float
    assert check_set_request(1, "distance", {}) == {"min_distance": None}
    assert check_set_request(1, "distance", {"min_distance": 2}) == {"min_distance": 2}
    assert check_set_request(1, "distance", {"min_distance": 1e-9}) == {"min_distance": 1e-9}
    assert check_set_request(1, "pool", {}) == {"pool_mode": 2, "pool_gap": None}
    assert check_set_request(1, "pool", {"pool_mode": 1, "pool_gap": 0}) == {
        "pool_mode": 1, "pool_gap": 0}
    assert check_set_request(1, "pool", {"pool_gap": 0.5}) == {"pool_mode": 2,
                                                               "pool_gap": 0.5}


@pytest.mark.parametrize("method, options, error, text", [
    ("nogood", {"hamming": 0}, ValueError, "hamming must be a positive integer, got 0"),
    ("nogood", {"hamming": True}, ValueError, "hamming must be a positive integer, got True"),
    ("nogood", {"hamming": 1.0}, ValueError, "hamming must be a positive integer, got 1.0"),
    ("distance", {"min_distance": 0}, ValueError, "min_distance must be a positive number, got 0"),
    ("distance", {"min_distance": -1.0}, ValueError,
     "min_distance must be a positive number, got -1.0"),
    ("distance", {"min_distance": float("inf")}, ValueError,
     "min_distance must be a positive number, got inf"),
    ("distance", {"min_distance": True}, ValueError,
     "min_distance must be a positive number, got True"),
    ("distance", {"min_distance": "1"}, ValueError,
     "min_distance must be a positive number, got '1'"),
    ("epsilon", {"epsilon": -1e-9}, ValueError,
     "epsilon must be a non-negative number, got -1e-09"),
    ("epsilon", {"epsilon": float("nan")}, ValueError,
     "epsilon must be a non-negative number, got nan"),
    ("epsilon", {"epsilon": float("inf")}, ValueError,
     "epsilon must be a non-negative number, got inf"),
    ("epsilon", {"epsilon": False}, ValueError, "epsilon must be a non-negative number, got False"),
    ("epsilon", {"epsilon": "0.1"}, ValueError,
     "epsilon must be a non-negative number, got '0.1'"),
    ("pool", {"pool_mode": 3}, ValueError,
     "pool_mode must be 1 (more solutions, any quality) or 2 (the n best), got 3"),
    ("pool", {"pool_mode": 0}, ValueError,
     "pool_mode must be 1 (more solutions, any quality) or 2 (the n best), got 0"),
    ("pool", {"pool_gap": -0.1}, ValueError, "pool_gap must be a non-negative number, got -0.1"),
    ("pool", {"pool_gap": True}, ValueError, "pool_gap must be a non-negative number, got True"),
    ("pool", {"pool_gap": "1"}, ValueError, "pool_gap must be a non-negative number, got '1'"),
])
def test_bad_set_options(method, options, error, text):
    with pytest.raises(error) as info:
        check_set_request(2, method, options)
    assert str(info.value) == text
