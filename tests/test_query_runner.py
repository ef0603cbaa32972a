"""The query engine (:mod:`cfopt.query.runner`), step by step on a logistic model of two
features: the query's settings and narrowing, the retries with a larger margin, and each
stage of a solve driven by a scripted backend and restriction (every branch: which
solve runs, with what budget, what the answer carries). The clock is frozen where a
budget's edge is checked."""

from __future__ import annotations

import dataclasses
import math
import time
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.constraints.query_range import QueryRange
from cfopt.errors import AlreadyTargetError, InfeasibleError
from cfopt.formulations.predictors.base import PredictorConstr
from cfopt.formulations.tree_regions import RegionTooLarge
from cfopt.problem import CounterfactualModel
from cfopt.query import runner as R
from cfopt.query.inner_radius import InnerStage
from cfopt.query.ladder import NO_TIME, too_large, too_large_to_load
from cfopt.query.restrictions import Restricted, Restriction
from cfopt.query.solution import Verification
from cfopt.results.status import Status
from cfopt.solvers import SolveOutcome, SolverSettings
from cfopt.solvers.cpsat import CpSatBackend

FRAME = pd.DataFrame({"a": np.linspace(0.0, 1.0, 21), "b": np.linspace(1.0, 0.0, 21)})
SPACE = cfopt.FeatureSpace.from_frame(FRAME)
MODEL = LogisticRegression(C=100.0).fit(SPACE.transform(FRAME),
                                        (FRAME.a + FRAME.b * 0.1 > 0.6).astype(int))
X0 = pd.DataFrame({"a": [0.0], "b": [1.0]})
ROW = pd.DataFrame({"a": [1.0], "b": [0.5]})  # of class 1


def a_model(m) -> CounterfactualModel:
    """``m``, checked to be the query's model (a stub's argument)."""
    assert isinstance(m, CounterfactualModel)
    return m


def verifying(point: Verification):
    """A stub of ``verified_solution`` that checks its arguments."""
    def verified_solution(m, margin):
        assert margin == a_model(m).declared_margin
        return point
    return verified_solution


def outcome(status: Status = Status.OPTIMAL, objective: float | None = 1.0,
            bound: float | None = 1.0, solver_time: float | None = 0.5,
            wall: float = 0.25, termination: str = "optimal") -> SolveOutcome:
    return SolveOutcome(status, objective, bound, solver_time, wall, termination)


class Backend:
    """A scripted backend: each solve returns the next outcome (or solves for real with
    ``real``) and is recorded with its settings, start and the model's margin."""

    name = "fake"

    def __init__(self, outcomes=(), overhead: float = 0.0, counts: bool = False,
                 real=None) -> None:
        self.outcomes = list(outcomes)
        self.solves: list[tuple[SolverSettings, object, float]] = []
        self.resets = 0
        self._overhead, self.counts, self.real = overhead, counts, real
        self.loading: list[int] = []

    def solve(self, m, settings=None, start=None):
        a_model(m)
        self.solves.append((settings, start, pyo.value(m.margin)))
        if self.real is not None:
            return self.real.solve(m, settings)
        return self.outcomes.pop(0)

    def reset(self) -> None:
        self.resets += 1

    def overhead(self, m) -> float:
        a_model(m)
        return self._overhead

    def limit_counts_loading(self, columns: int) -> bool:
        self.loading.append(columns)
        return self.counts

    def tree_options(self) -> dict:
        return {"tree": 1, "both": "tree"}


class Fake(Restriction):
    """A scripted restriction recording its calls."""

    def __init__(self, candidate=None, applies: bool = True, restricted="ctx",
                 whole: bool | Exception = False, restrict_raises: bool = False) -> None:
        self.candidate, self._applies, self._whole = candidate, applies, whole
        self.restricted = restricted
        self.restrict_raises = restrict_raises
        self.calls: list[tuple] = []
        self.entered = 0

    def applies(self, m) -> bool:
        a_model(m)
        return self._applies

    def heuristic(self, m):
        a_model(m)
        self.calls.append(("heuristic",))
        return self.candidate

    def restrict(self, m, candidate, radius, details, deadline, verified):
        a_model(m)
        assert isinstance(details, dict) and candidate is ROW
        self.calls.append(("restrict", radius, deadline, verified))
        if self.restrict_raises:
            raise RegionTooLarge
        if self.restricted is None:
            return None
        rebuilt = self.restricted == "rebuilt"

        @contextmanager
        def context():
            self.entered += 1
            yield

        return Restricted(context(), rebuilt=rebuilt)

    def whole(self, m, details, deadline) -> bool:
        a_model(m)
        assert isinstance(details, dict)
        self.calls.append(("whole", deadline))
        if isinstance(self._whole, Exception):
            raise self._whole
        return self._whole


def runner(backend=None, *, tighten: bool = True, retries: int = 2, max_changes=None,
           settings: SolverSettings | None = None) -> R.QueryRunner:
    ex = cfopt.Explainer(MODEL, SPACE, max_changes=max_changes)
    run = R.QueryRunner(ex.milp, backend if backend is not None else ex.runner.backend,
                        settings or ex.runner.settings, margin=1e-3, max_changes=max_changes,
                        verify_retries=retries, tighten_per_query=tighten)
    run.start(X0, 1, {})
    return run


@pytest.fixture
def frozen(monkeypatch):
    """The clock stopped: ``time_left`` leaves a limit as it is."""
    def time_left(settings, t0):
        assert isinstance(t0, float) and isinstance(settings, SolverSettings)
        return settings

    monkeypatch.setattr(R, "time_left", time_left)


def verification(verified: bool, score=None, short_of=None, problems=()) -> Verification:
    return Verification(ROW, 1, list(problems), verified, score, short_of)


# ============================================================ retry_margin
def test_retry_margin_repairs_a_shortfall_by_twice_it():
    assert R.retry_margin(verification(False, 0.25, 0.75), 1e-3) == pytest.approx(1.001)
    assert R.retry_margin(verification(False, -0.5, 0.0), 0.5) == pytest.approx(1.5)


def test_retry_margin_is_ten_times_for_another_class_or_a_broken_constraint():
    assert R.retry_margin(verification(False), 1e-3) == pytest.approx(1e-2)
    assert R.retry_margin(verification(False, 0.25, 0.75, ["c"]), 2e-3) == pytest.approx(2e-2)


# ============================================================ construction and start
def test_cpsat_is_detected_and_checked_at_construction():
    ex = cfopt.Explainer(MODEL, SPACE)
    assert ex.runner.cpsat is False
    with pytest.raises(cfopt.UnsupportedModelError, match="tree ensembles only"):
        R.QueryRunner(ex.milp, CpSatBackend(), ex.runner.settings, margin=1e-3,
                      max_changes=None, verify_retries=0, tighten_per_query=False)


@pytest.mark.parametrize("tighten, cpsat, deferred", [
    (True, False, True), (False, False, False), (False, True, True), (True, True, True)])
def test_per_query_trees_are_deferred_when_tightened_or_cpsat(monkeypatch, tighten, cpsat,
                                                               deferred):
    ex = cfopt.Explainer(MODEL, SPACE)
    ex.milp.predictor_constr.deferred = False
    monkeypatch.setattr(R, "check_supported", lambda m: (a_model(m), None)[1])
    backend = CpSatBackend() if cpsat else ex.runner.backend
    for per in (False, True):
        monkeypatch.setattr(R, "per_query", lambda m, per=per: (a_model(m), per)[1])
        ex.milp.predictor_constr.deferred = False
        R.QueryRunner(ex.milp, backend, ex.runner.settings, margin=1e-3, max_changes=None,
                      verify_retries=0, tighten_per_query=tighten)
        assert ex.milp.predictor_constr.deferred is (per and deferred)


def test_start_takes_the_query_time_and_gap_only():
    run = runner(max_changes=2)
    got = run.start(X0, 1, {"time_limit": 7.0, "mip_gap": 0.25, "max_changes": 1})
    assert got == dataclasses.replace(run.settings, time_limit=7.0, mip_gap=0.25)
    assert run.start(X0, 1, {}) == run.settings


def test_start_gives_tree_models_the_backend_tree_options_the_users_winning(monkeypatch):
    run = runner(Backend(), settings=SolverSettings(options={"both": "user", "own": 2}))
    assert run.start(X0, 1, {}).options == {"both": "user", "own": 2}
    monkeypatch.setattr(R, "TreePredictorConstr", PredictorConstr)
    assert run.start(X0, 1, {}).options == {"tree": 1, "both": "user", "own": 2}
    assert run.settings.options == {"both": "user", "own": 2}


def test_start_sets_factual_and_target():
    run = runner()
    run.start(pd.DataFrame({"a": [0.25], "b": [0.5]}), 1, {})
    assert run.milp.factual.iloc[0].tolist() == [0.25, 0.5]
    assert run.milp.target == (1,)
    with pytest.raises(AlreadyTargetError):  # the target as given, not the default
        run.start(X0, 0, {})


def test_a_query_cap_holds_for_that_query_and_the_next_goes_back_to_the_runners():
    run = runner(max_changes=None)
    assert math.isinf(run.milp.change_cap)
    with pytest.raises(ValueError, match="built without max_changes"):
        run.start(X0, 1, {"max_changes": 1})
    capped = runner(max_changes=1)  # of two features: None would read as 2
    capped.start(X0, 1, {"max_changes": 2})
    assert capped.milp.change_cap == 2
    capped.start(X0, 1, {})
    assert capped.milp.change_cap == 1


def test_a_narrowed_query_adds_the_box_and_the_next_resets_it():
    run = runner()
    assert QueryRange.kind not in run.milp.constraints
    run.start(X0, 1, {"features_to_vary": ["a"]})
    box = run.milp.constraints[QueryRange.kind]
    assert isinstance(box, QueryRange) and box.request.narrows
    run.start(X0, 1, {})
    assert run.milp.constraints[QueryRange.kind] is box and not box.request.narrows
    run.start(X0, 1, {"permitted_range": {"b": (0.5, 1.0)}})
    assert run.milp.constraints[QueryRange.kind] is box and box.request.narrows


def test_narrowing_is_refused_on_cpsat_and_beside_a_foreign_block_of_that_name():
    run = runner()
    assert not run.narrowing({}).narrows
    assert run.narrowing({"features_to_vary": ["a"]}).narrows
    run.cpsat = True
    assert not run.narrowing({}).narrows
    with pytest.raises(ValueError, match="cpsat"):
        run.narrowing({"features_to_vary": ["a"]})
    run.cpsat = False
    run.milp._constraints[QueryRange.kind] = object()
    assert not run.narrowing({}).narrows
    with pytest.raises(ValueError, match="of type object"):
        run.narrowing({"permitted_range": {"b": (0.5, 1.0)}})


# ============================================================ answer
def test_answer_retries_with_a_larger_margin_and_restores_it(monkeypatch):
    ex = cfopt.Explainer(MODEL, SPACE)
    backend = Backend(real=ex.runner.backend)
    run = runner(backend, tighten=False, retries=2)
    short = verification(False, 0.25, 0.75)
    monkeypatch.setattr(R, "verified_solution", verifying(short))
    got = run.answer(run.settings, time.perf_counter(), diagnose_infeasible=False)
    margins = [s[2] for s in backend.solves]
    assert margins == pytest.approx([1e-3, 1.001, 2.001])
    assert got.attempts == 3 and got.margin == pytest.approx(2.001)
    assert pyo.value(run.milp.margin) == pytest.approx(1e-3)
    assert got.counterfactual is None


def test_answer_stops_at_a_verified_point(monkeypatch):
    ex = cfopt.Explainer(MODEL, SPACE)
    backend = Backend(real=ex.runner.backend)
    run = runner(backend, tighten=False, retries=3)
    got = run.answer(run.settings, time.perf_counter())
    assert got.attempts == 1 and got.verified and got.status is Status.OPTIMAL
    assert got.margin == pytest.approx(1e-3)
    assert got.details["solver_objective"] == pytest.approx(got.objective)
    assert got.solver == "fake"


def test_answer_without_retries_solves_once(monkeypatch):
    ex = cfopt.Explainer(MODEL, SPACE)
    backend = Backend(real=ex.runner.backend)
    run = runner(backend, tighten=False, retries=0)
    monkeypatch.setattr(R, "verified_solution", verifying(verification(False)))
    assert run.answer(run.settings, time.perf_counter()).attempts == 1


def test_answer_times_sum_the_solves_and_charge_the_build_once(monkeypatch):
    run = runner(Backend([outcome(Status.FEASIBLE, wall=0.25, solver_time=0.5),
                          outcome(Status.FEASIBLE, wall=0.5, solver_time=None),
                          outcome(Status.NO_SOLUTION, None, None, None, 1.0, "limit")]),
                 tighten=False, retries=2)
    monkeypatch.setattr(R, "verified_solution", verifying(verification(False)))
    run.milp.build_time = 1000.0
    got = run.answer(run.settings, time.perf_counter(), diagnose_infeasible=False)
    assert got.attempts == 3 and got.solve_time == pytest.approx(1.75)
    assert got.solver_time == pytest.approx(0.5)
    assert 1000.0 <= got.build_time < 1001.0 and 1000.0 <= got.total_time < 1001.0
    assert "solver_objective" not in got.details
    again = runner(Backend([outcome(solver_time=None)]), tighten=False, retries=0)
    again.milp.build_time = 1000.0
    monkeypatch.setattr(R, "verified_solution", verifying(verification(False)))
    first = again.answer(again.settings, time.perf_counter(), diagnose_infeasible=False)
    assert first.solver_time is None and first.build_time >= 1000.0
    assert first.details["solver_objective"] == 1.0
    again.backend.outcomes.append(outcome())
    second = again.answer(again.settings, time.perf_counter(), diagnose_infeasible=False)
    assert second.build_time < 0.5 and second.total_time < 0.5


def test_exclude_build_time_charges_no_answer():
    run = runner(Backend([outcome(Status.NO_SOLUTION, None, None)]), tighten=False)
    run.milp.build_time = 1000.0
    run.exclude_build_time()
    got = run.answer(run.settings, time.perf_counter(), diagnose_infeasible=False)
    assert got.build_time < 0.5 and got.total_time < 0.5


def test_an_infeasible_first_solve_is_not_retried_and_is_diagnosed(monkeypatch):
    run = runner(Backend([outcome(Status.INFEASIBLE, None, None)]), tighten=False)
    got = run.answer(run.settings, time.perf_counter(), diagnose_infeasible=False)
    assert got.status is Status.INFEASIBLE and got.attempts == 1

    class Diagnosis:
        groups, members = ["g"], {"g": ["m"]}

        def message(self, target):
            assert target == run.milp.describe_target()
            return f"no point of {target}"

    built: list[object] = []
    def diagnose(m, backend, settings):
        assert a_model(m) is run.milp and backend is run.backend and settings == run.settings
        return Diagnosis()

    monkeypatch.setattr(R, "diagnose", diagnose)
    monkeypatch.setattr(R, "build_box_region", lambda m: built.append(a_model(m)))
    for per, cpsat, box in ((False, False, 0), (True, True, 0), (True, False, 1)):
        monkeypatch.setattr(R, "per_query", lambda m, per=per: (a_model(m), per)[1])
        built.clear()
        run.backend.outcomes.append(outcome(Status.INFEASIBLE, None, None))
        run.backend.resets = 0
        run.cpsat = cpsat
        if cpsat:
            monkeypatch.setattr(run, "_solve_cpsat", lambda m, *a: (
                (a_model(m), outcome(Status.INFEASIBLE, None, None))[1], None))
        with pytest.raises(InfeasibleError, match="no point of") as err:
            run.answer(run.settings, time.perf_counter())
        assert err.value.groups == ["g"] and err.value.details == {"g": ["m"]}
        assert len(built) == box and run.backend.resets == box


def test_answer_out_of_time_tries_the_heuristic_only(monkeypatch):
    run = runner(Backend(), tighten=True)
    seen: list[int] = []
    monkeypatch.setattr(run, "_heuristic_only", lambda m, d, h: seen.append(
        (a_model(m), d == {}, len(h))[1:]))
    settings = dataclasses.replace(run.settings, time_limit=1.0)
    got = run.answer(settings, time.perf_counter() - 5.0, diagnose_infeasible=False)
    assert seen == [(True, 0)] and run.backend.solves == [] and got.attempts == 1
    assert got.margin == 1e-3 and got.solve_time == 0.0 and got.details["reason"] == "time_limit"
    assert got.message.startswith("time limit reached")
    assert got.status is Status.NO_SOLUTION and got.counterfactual is None


def test_answer_out_of_time_after_a_solve_stops_without_the_heuristic(monkeypatch):
    run = runner(Backend([outcome(Status.FEASIBLE, 2.0, 1.0)]), tighten=False, retries=3)
    seen: list[int] = []
    monkeypatch.setattr(run, "_heuristic_only", lambda m, d, h: seen.append(1))
    monkeypatch.setattr(R, "time_left", lambda s, t0: None if run.backend.solves else s)
    monkeypatch.setattr(R, "verified_solution", verifying(verification(False)))
    got = run.answer(run.settings, time.perf_counter(), diagnose_infeasible=False)
    assert got.attempts == 1 and seen == [] and len(run.backend.solves) == 1


def test_answer_reports_the_reason_and_the_raw_parts(monkeypatch):
    run = runner(Backend([outcome(Status.NO_SOLUTION, None, None)]), tighten=False,
                 retries=0)
    got = run.answer(run.settings, time.perf_counter(), diagnose_infeasible=False)
    assert got.details["reason"]
    assert "raw_constraints" not in got.details and "raw_objective_term" not in got.details
    m = run.milp
    m.mine = pyo.Constraint(expr=m.x["a"] >= -5.0)
    run.start(X0, 1, {})
    run.backend.outcomes.append(outcome(Status.NO_SOLUTION, None, None))
    got = run.answer(run.settings, time.perf_counter(), diagnose_infeasible=False)
    assert got.details["raw_constraints"] == ["mine"] and "raw_objective_term" not in got.details
    m.objective.set_value(m.objective.expr + 0.5 * m.dev["b"])
    run.start(X0, 1, {})
    run.backend.outcomes.append(outcome(Status.NO_SOLUTION, None, None))
    got = run.answer(run.settings, time.perf_counter(), diagnose_infeasible=False)
    assert got.details["raw_objective_term"] == str(m.raw.term) and "dev" in str(m.raw.term)


def test_answer_through_cpsat_verifies_the_decoded_row(monkeypatch):
    run = runner(Backend(), tighten=False, retries=0)
    run.cpsat = True
    seen = []
    def solve_cpsat(m, settings, t0, details, heuristic):
        assert a_model(m) is run.milp and settings == run.settings
        assert isinstance(t0, float) and details == {} and heuristic == []
        return outcome(Status.FEASIBLE, 2.0, 1.0), ROW

    monkeypatch.setattr(run, "_solve_cpsat", solve_cpsat)

    def verify(m, row, margin):
        a_model(m)
        seen.append((row, margin))
        return verification(False)

    monkeypatch.setattr(R, "verify_row", verify)
    monkeypatch.setattr(R, "verified_solution", lambda m, margin: pytest.fail("not cpsat"))
    run.answer(run.settings, time.perf_counter(), diagnose_infeasible=False)
    assert seen == [(ROW, run.milp.declared_margin)]


def test_answer_passes_the_floor_to_the_solve(monkeypatch):
    run = runner(Backend([outcome()]), tighten=False, retries=0)
    got = []
    monkeypatch.setattr(run, "_solve", lambda m, s, t0, d, h, floor: got.append(floor) or
                        outcome(Status.NO_SOLUTION, None, None))
    run.answer(run.settings, time.perf_counter(), diagnose_infeasible=False, floor=0.75)
    assert got == [0.75]


# ============================================================ the stages of a solve
def test_a_climb_from_a_floor(monkeypatch, frozen):
    run = runner(Backend(overhead=3.0), tighten=True)
    calls = []
    monkeypatch.setattr(R, "can_climb", lambda m, lower: calls.append(lower) or True)

    def climb(m, backend, budget, lower, details):
        assert a_model(m) is run.milp and details == {}
        calls.append((backend, budget(), lower))
        return "climbed"

    monkeypatch.setattr(R, "climb", climb)
    settings = dataclasses.replace(run.settings, time_limit=3.5)
    assert run._solve(run.milp, settings, 0.0, {}, [], 0.5) == "climbed"
    assert calls == [0.5, (run.backend, settings, 0.5)]
    off = runner(Backend([outcome()]), tighten=False)
    monkeypatch.setattr(R, "can_climb", lambda m, lower: True)
    assert off._solve(off.milp, off.settings, 0.0, {}, [], 0.5) == outcome()
    monkeypatch.setattr(R, "can_climb", lambda m, lower: False)
    on = runner(Backend([outcome()]), tighten=True)
    monkeypatch.setattr(R, "restriction_of", lambda m: (a_model(m), None)[1])
    assert on._solve(on.milp, on.settings, 0.0, {}, [], 0.5) == outcome()


def test_no_restriction_solves_whole(monkeypatch):
    for tighten, applies in ((False, True), (True, False)):
        fake = Fake(ROW, applies=applies)
        monkeypatch.setattr(R, "restriction_of", lambda m, fake=fake: (a_model(m), fake)[1])
        run = runner(Backend([outcome()]), tighten=tighten)
        details: dict = {}
        assert run._solve(run.milp, run.settings, 0.0, details, [], None) == outcome()
        assert fake.calls == [] and details == {}
        assert run.backend.solves[0][1] is None
        assert run.backend.solves[0][0] == run.settings


def test_no_heuristic_solves_whole_restored(monkeypatch):
    fake = Fake(None, whole=True)
    monkeypatch.setattr(R, "restriction_of", lambda m: (a_model(m), fake)[1])
    run = runner(Backend([outcome()]), tighten=True)
    details: dict = {}
    settings = dataclasses.replace(run.settings, time_limit=100.0)
    t0 = time.perf_counter()
    assert run._solve(run.milp, settings, t0, details, [], None) == outcome()
    assert details == {"heuristic": "none found"}
    assert fake.calls == [("heuristic",), ("whole", t0 + 100.0)] and run.backend.resets == 1
    fake.calls.clear()
    run.backend.outcomes.append(outcome())
    assert run._solve(run.milp, run.settings, t0, {}, [], None) == outcome()
    assert fake.calls[1] == ("whole", math.inf)


def test_an_unverified_heuristic_ascends(monkeypatch, frozen):
    fake = Fake(ROW)
    monkeypatch.setattr(R, "restriction_of", lambda m: (a_model(m), fake)[1])
    monkeypatch.setattr(R, "verify_row", lambda m, row, margin: (
        margin == a_model(m).declared_margin or pytest.fail("margin")) and verification(False))
    run = runner(Backend(overhead=1.0), tighten=True)
    got = []

    def ascend(m, backend, budget, restriction, candidate, guess, details, deadline,
               heuristic, no_budget):
        assert a_model(m) is run.milp
        got.append((backend, budget(), restriction, candidate, guess, dict(details),
                    deadline, list(heuristic), no_budget()))
        return "ascended"

    monkeypatch.setattr(R, "ascend", ascend)
    settings = dataclasses.replace(run.settings, time_limit=5.0)
    details: dict = {}
    assert run._solve(run.milp, settings, 2.0, details, [], None) == "ascended"
    guess = R.distance_value(run.milp, ROW)
    assert got == [(run.backend, settings, fake, ROW, guess,
                    {"heuristic_guess": guess, "restricted": True}, 7.0, [], NO_TIME)]


def test_a_verified_heuristic_solves_around_it(monkeypatch):
    fake = Fake(ROW)
    monkeypatch.setattr(R, "restriction_of", lambda m: (a_model(m), fake)[1])
    run = runner(Backend(), tighten=True)
    seen = []
    monkeypatch.setattr(run, "_around", lambda *a: seen.append(a) or "around")
    details: dict = {}
    heuristic: list = []
    assert run._solve(run.milp, run.settings, 0.0, details, heuristic, None) == "around"
    assert len(heuristic) == 1 and heuristic[0].row is ROW and seen[0][5] is fake
    assert seen[0][6] == math.inf
    assert details["heuristic_objective"] == pytest.approx(R.objective_value(run.milp, ROW))


# ============================================================ _whole / _whole_budget
def test_whole_too_large_and_out_of_time(monkeypatch, frozen):
    run = runner(Backend(overhead=2.0))
    fake = Fake(whole=RegionTooLarge())
    assert run._whole(run.milp, run.settings, 0.0, {}, math.inf, fake) == too_large(math.inf)
    settings = dataclasses.replace(run.settings, time_limit=2.0)
    assert run._whole(run.milp, settings, 0.0, {}, math.inf, Fake()) == NO_TIME
    assert run.backend.solves == [] and run.backend.resets == 0
    budget, stop = run._whole_budget(run.milp, run.settings, 0.0, {}, 1.0, Fake(whole=True))
    assert budget == run.settings and stop == NO_TIME and run.backend.resets == 1
    budget, stop = run._whole_budget(run.milp, settings, 0.0, {"region_leaves": 10}, 1.0,
                                     None)
    assert budget is None and stop == too_large_to_load(10, 2.0)


# ============================================================ budgets
def test_budget_needs_more_than_the_overhead(frozen):
    run = runner(Backend(overhead=2.0))
    at = dataclasses.replace(run.settings, time_limit=2.0)
    assert run._budget(run.milp, at, 0.0) is None
    over = dataclasses.replace(run.settings, time_limit=2.0001)
    assert run._budget(run.milp, over, 0.0) == over
    assert run._budget(run.milp, run.settings, 0.0) == run.settings


def test_budget_out_of_time():
    run = runner(Backend())
    settings = dataclasses.replace(run.settings, time_limit=1.0)
    assert run._budget(run.milp, settings, time.perf_counter() - 2.0) is None


def test_load_budget_reserves_the_loading(frozen):
    run = runner(Backend())
    at = dataclasses.replace(run.settings, time_limit=2.0)  # 1000 leaves load in 1 s
    assert run._load_budget(run.milp, at, 0.0, {"region_leaves": 1000}) is None
    assert run._load_budget(run.milp, at, 0.0, {}) == at
    above = dataclasses.replace(run.settings, time_limit=2.5)
    assert run._load_budget(run.milp, above, 0.0, {"region_leaves": 1000}).time_limit == \
        pytest.approx(1.5)
    assert run.backend.loading == [1000]
    run.backend.counts = True
    assert run._load_budget(run.milp, above, 0.0, {"region_leaves": 1000}) == above
    assert run._load_budget(run.milp, run.settings, 0.0, {"region_leaves": 1000}) == \
        run.settings
    run.backend._overhead = 3.0
    assert run._load_budget(run.milp, above, 0.0, {}) is None


def test_no_budget_says_why(monkeypatch):
    run = runner(Backend())
    settings = dataclasses.replace(run.settings, time_limit=3.0)
    monkeypatch.setattr(R, "time_left", lambda s, t0: None)
    assert run._no_budget(settings, 0.0, {"region_leaves": 5}) == NO_TIME
    monkeypatch.setattr(R, "time_left", lambda s, t0: (s.time_limit, t0 + 1.0) and s)
    assert run._no_budget(settings, 0.0, {}) == NO_TIME
    assert run._no_budget(settings, 0.0, {"region_leaves": 5}) == \
        too_large_to_load(5, 3.0)


# ============================================================ heuristics
def test_heuristic_joins_only_a_verified_point_within_the_cutoff(monkeypatch):
    run = runner(Backend())
    m = run.milp
    value, distance = R.objective_value(m, ROW), R.distance_value(m, ROW)
    assert R.QueryRunner._heuristic(run, m, {}, [], Fake(None)) == (None, math.inf)
    details: dict = {}
    heuristic: list = []
    assert run._heuristic(m, details, heuristic, Fake(ROW)) == (ROW, distance)
    assert details == {"heuristic_objective": value} and len(heuristic) == 1
    assert heuristic[0].verified
    # a second one does not join
    details = {}
    assert run._heuristic(m, details, heuristic, Fake(ROW)) == (ROW, distance)
    assert details == {"heuristic_guess": distance} and len(heuristic) == 1
    # the cutoff's edge
    m.cutoff = value
    heuristic = []
    run._heuristic(m, {}, heuristic, Fake(ROW))
    assert len(heuristic) == 1
    m.cutoff = value * (1 - 1e-9)
    heuristic, details = [], {}
    run._heuristic(m, details, heuristic, Fake(ROW))
    assert heuristic == [] and details == {"heuristic_guess": distance}
    # a point of another class
    heuristic, details = [], {}
    m.cutoff = 1e9
    run._heuristic(m, details, heuristic, Fake(X0))
    assert heuristic == [] and details == {"heuristic_guess": 0.0}


def test_heuristic_only_when_tightened_and_applicable(monkeypatch):
    for tighten, fake, joins in ((True, Fake(ROW), 1), (False, Fake(ROW), 0),
                                 (True, Fake(ROW, applies=False), 0), (True, None, 0)):
        monkeypatch.setattr(R, "restriction_of", lambda m, fake=fake: (a_model(m), fake)[1])
        run = runner(Backend(), tighten=tighten)
        heuristic: list = []
        run._heuristic_only(run.milp, {}, heuristic)
        assert len(heuristic) == joins


def test_cpsat_solve_radius_and_candidate(monkeypatch):
    run = runner(Backend(), tighten=True)
    monkeypatch.setattr(R, "check_supported", lambda m: (a_model(m), None)[1])
    seen = []
    run.backend.solve_query = lambda m, budget, radius, candidate: seen.append(
        (a_model(m), budget, radius, candidate)[1:]) or ("q", None)
    fake = Fake(ROW)
    monkeypatch.setattr(R, "restriction_of", lambda m: (a_model(m), fake)[1])
    assert run._solve_cpsat(run.milp, run.settings, 0.0, {}, []) == ("q", None)
    assert seen[-1] == (run.settings, R.distance_value(run.milp, ROW), ROW)
    monkeypatch.setattr(R, "restriction_of", lambda m: (a_model(m), None)[1])
    run._solve_cpsat(run.milp, run.settings, 0.0, {}, [])
    assert seen[-1] == (run.settings, math.inf, None)
    off = runner(Backend(), tighten=False)
    off.backend.solve_query = run.backend.solve_query
    monkeypatch.setattr(R, "restriction_of", lambda m: (a_model(m), fake)[1])
    fake.calls.clear()
    off._solve_cpsat(off.milp, off.settings, 0.0, {}, [])
    assert seen[-1] == (off.settings, math.inf, None) and fake.calls == []
    late = dataclasses.replace(run.settings, time_limit=1.0)
    assert run._solve_cpsat(run.milp, late, time.perf_counter() - 2.0, {}, []) == (
        NO_TIME, None)
    assert fake.calls == []


def test_cpsat_checks_the_model_at_each_query(monkeypatch):
    run = runner(Backend(), tighten=False)
    with pytest.raises(cfopt.UnsupportedModelError):
        run._solve_cpsat(run.milp, run.settings, 0.0, {}, [])


# ============================================================ _around
def around(monkeypatch, outcomes, fake, *, per=False, stage=None, leaves=7, overhead=0.0,
           limit=None, whole_budget=None):
    run = runner(Backend(outcomes, overhead=overhead), tighten=True)
    m = run.milp
    monkeypatch.setattr(R, "per_query", lambda m: (a_model(m), per)[1])
    monkeypatch.setattr(R, "objective_value", lambda m, row: (a_model(m), row is ROW)[1] and 2.0)
    monkeypatch.setattr(R, "start_of", lambda m, row: (a_model(m), row is ROW)[1] and "start")
    if stage is not None:
        monkeypatch.setattr(R, "inner_stage", lambda *a: stage(*a))
    regions = []
    monkeypatch.setattr(R, "build_query_region", lambda m, radius, deadline: regions.append(
        (a_model(m), radius, deadline)[1:]) or leaves)
    if whole_budget is not None:
        monkeypatch.setattr(run, "_whole_budget", lambda *a: whole_budget)
    settings = dataclasses.replace(run.settings, time_limit=limit)
    details: dict = {}
    got = run._around(m, settings, 0.0, details, [verification(True)], fake, 9.0)
    return got, run, details, regions


def test_around_solves_the_restriction_from_the_heuristic(monkeypatch, frozen):
    fake = Fake(restricted="ctx")
    got, run, details, _ = around(monkeypatch, [outcome(objective=2.0, bound=1.0)], fake)
    assert got == outcome(objective=2.0, bound=1.0)
    assert fake.calls == [("restrict", 2.0, 9.0, True)] and fake.entered == 1
    assert run.backend.solves[0][1] == "start" and run.backend.resets == 0
    assert details == {"restricted": True}
    fake = Fake(restricted="rebuilt")
    got, run, details, _ = around(monkeypatch, [outcome(objective=1.0)], fake)
    assert run.backend.resets == 1


def test_around_without_a_restriction_solves_whole(monkeypatch, frozen):
    fake = Fake(restricted=None)
    got, run, details, _ = around(monkeypatch, [outcome()], fake)
    assert got == outcome() and fake.calls[-1] == ("whole", 9.0)
    assert run.backend.solves[0][1] is None


def test_around_out_of_time_before_the_restricted_solve(monkeypatch, frozen):
    got, run, details, _ = around(monkeypatch, [], Fake(), overhead=5.0, limit=5.0)
    assert got == NO_TIME and run.backend.solves == []


def test_around_too_large_keeps_the_radius(monkeypatch, frozen):
    got, run, details, _ = around(monkeypatch, [], Fake(restrict_raises=True))
    assert got == too_large(2.0)


def test_around_beyond_the_radius_falls_back_to_the_whole_problem(monkeypatch, frozen):
    beyond = 2.0 * (1 + 1e-6) + 1e-9
    got, run, details, _ = around(monkeypatch, [outcome(objective=beyond * 1.0000001),
                                                outcome(objective=1.5, bound=1.0)],
                                  Fake(whole=True))
    assert details == {"restricted": True, "fallback": True}
    assert got.objective == 1.5 and got.wall_time == 0.5 and got.solver_time == 1.0
    assert [s[1] for s in run.backend.solves] == ["start", "start"]
    assert run.backend.resets == 1
    # at the edge it is no fallback
    got, run, details, _ = around(monkeypatch, [outcome(objective=beyond, bound=0.5)],
                                  Fake())
    assert "fallback" not in details and got.objective == beyond


def test_around_infeasible_falls_back(monkeypatch, frozen):
    got, run, details, _ = around(monkeypatch, [outcome(Status.INFEASIBLE, None, None),
                                                outcome(objective=3.0, bound=2.5)], Fake())
    assert details["fallback"] and got.objective == 3.0 and got.bound == 2.5


def test_around_fallback_out_of_time_keeps_what_it_has(monkeypatch, frozen):
    stop = too_large(math.inf)
    got, *_ = around(monkeypatch, [outcome(Status.FEASIBLE, 2.5, 1.0)], Fake(),
                     whole_budget=(None, stop))
    assert got == dataclasses.replace(outcome(Status.FEASIBLE, 2.5, 1.0),
                                      termination=stop.termination, message=stop.message)
    got, *_ = around(monkeypatch, [outcome(Status.FEASIBLE, 2.5, None)], Fake(),
                     whole_budget=(None, stop))
    assert got.bound == 2.0 and got.status is Status.FEASIBLE
    got, *_ = around(monkeypatch, [outcome(Status.FEASIBLE, 2.5, 3.0)], Fake(),
                     whole_budget=(None, stop))
    assert got.bound == 2.0
    got, *_ = around(monkeypatch, [outcome(Status.INFEASIBLE, None, 0.75)], Fake(),
                     whole_budget=(None, stop))
    assert got.status is Status.NO_SOLUTION and got.bound == 0.75


def stage_of(result: InnerStage, seen: list):
    def stage(m, backend, budget, radius, heuristic, details, deadline):
        a_model(m)
        assert isinstance(backend, Backend) and isinstance(details, dict)
        assert heuristic[0].row is ROW
        seen.append((budget, radius, deadline))
        return result
    return stage


def test_around_inside_out_final_stage(monkeypatch, frozen):
    seen: list = []
    final = InnerStage(outcome(objective=0.5), True, None, 2.0)
    got, run, details, regions = around(monkeypatch, [], Fake(), per=True,
                                        stage=stage_of(final, seen))
    assert got == final.outcome and seen == [(run.settings, 2.0, 9.0)] and regions == []


def test_around_inside_out_second_stage(monkeypatch, frozen):
    seen: list = []
    first = InnerStage(outcome(Status.INFEASIBLE, None, None, 0.5, 0.25), False, 0.5, 1.5)
    got, run, details, regions = around(
        monkeypatch, [outcome(Status.FEASIBLE, 1.25, 0.25, 1.0, 1.0)], Fake(), per=True,
        stage=stage_of(first, seen), leaves=7)
    assert regions == [(1.5, 9.0)] and details["region_leaves"] == 7
    assert run.backend.resets == 1
    assert got.status is Status.FEASIBLE and got.bound == 0.5
    assert got.wall_time == 1.25 and got.solver_time == 1.5
    # the second stage's bound counts up to its radius (1.5), then the floor
    got, *_ = around(monkeypatch, [outcome(Status.FEASIBLE, 1.4, 1.0, 1.0, 1.0)], Fake(),
                     per=True, stage=stage_of(first, []))
    assert got.bound == 1.0
    # beyond the second radius: the whole problem's bound is not capped
    got, run, details, _ = around(
        monkeypatch, [outcome(Status.FEASIBLE, 1.6, 1.0, 1.0, 1.0),
                      outcome(Status.OPTIMAL, 1.6, 1.6, 1.0, 1.0)], Fake(), per=True,
        stage=stage_of(first, []))
    assert details["fallback"] and got.bound == 1.6 and got.wall_time == 2.25


def test_around_inside_out_too_large_or_out_of_time(monkeypatch, frozen):
    first = InnerStage(outcome(Status.INFEASIBLE, None, None, 0.5, 0.25), False, 0.5, 1.5)

    def large(*a):
        raise RegionTooLarge

    monkeypatch.setattr(R, "build_query_region", large)
    run = runner(Backend(), tighten=True)
    monkeypatch.setattr(R, "per_query", lambda m: (a_model(m), True)[1])
    monkeypatch.setattr(R, "objective_value", lambda m, row: (a_model(m), row is ROW)[1] and 2.0)
    monkeypatch.setattr(R, "inner_stage", stage_of(first, []))
    got = run._around(run.milp, run.settings, 0.0, {}, [verification(True)], Fake(), 9.0)
    assert got == dataclasses.replace(too_large(1.5), bound=0.5, wall_time=0.25,
                                      solver_time=0.5)
    # the region built but no time left to load it
    monkeypatch.setattr(R, "build_query_region", lambda m, radius, deadline: (a_model(m), 5000)[1])
    settings = dataclasses.replace(run.settings, time_limit=4.0)
    got = run._around(run.milp, settings, 0.0, {}, [verification(True)], Fake(), 9.0)
    assert got == dataclasses.replace(too_large_to_load(5000, 4.0), bound=0.5,
                                      wall_time=0.25, solver_time=0.5)


# ============================================================ what an answer carries
def test_the_answer_is_the_claims_verdict_on_the_first_solve(monkeypatch):
    """A real solve: every field of the answer comes from the verdict of
    :func:`claim` on the outcomes, the point, the gap and margin used and the verified
    heuristic point (here the restriction's)."""
    ex = cfopt.Explainer(MODEL, SPACE)
    fake = Fake(ROW)
    monkeypatch.setattr(R, "restriction_of", lambda m: (a_model(m), fake)[1])
    run = runner(Backend(real=ex.runner.backend), tighten=True)
    seen = []
    real_claim = R.claim

    def claim(outcomes, point, m, gap, margin, heuristic):
        seen.append((list(outcomes), point, gap, margin, heuristic))
        seen.append(real_claim(outcomes, point, m, gap, margin, heuristic))
        return seen[-1]

    monkeypatch.setattr(R, "claim", claim)
    settings = dataclasses.replace(run.settings, mip_gap=0.125, time_limit=100.0)
    got = run.answer(settings, time.perf_counter())
    (outcomes, point, gap, margin, heuristic), verdict = seen
    assert gap == 0.125 and margin == 1e-3 and point.verified
    assert heuristic.row is ROW and heuristic.verified
    assert 99.0 < run.backend.solves[0][0].time_limit < 100.0  # the query's time left
    assert run.backend.solves[0][1] is not None  # started from the heuristic point
    assert got.status is verdict.status and got.objective == verdict.objective
    assert got.bound == verdict.bound and got.message == verdict.message
    assert got.predicted_class == verdict.predicted and got.counterfactual is verdict.row
    assert got.factual.equals(run.milp.factual) and got.target == run.milp.target
    assert got.factual_class == run.milp.factual_class == 0
    assert got.distances == run.milp.distances(verdict.row) and got.distances["l1"] > 0
    assert got.space is run.milp.space and got.verified
    assert got.details["restricted"] is True


def test_around_passes_the_budget_and_the_deadline(monkeypatch, frozen):
    fake = Fake(whole=False)
    got, run, details, _ = around(monkeypatch, [outcome(Status.INFEASIBLE, None, None),
                                                outcome(objective=3.0, bound=2.5)], fake,
                                  limit=50.0)
    assert [s[0].time_limit for s in run.backend.solves] == [50.0, 50.0]
    assert fake.calls == [("restrict", 2.0, 9.0, True), ("whole", 9.0)]


def test_around_fallback_out_of_time_keeps_its_own_bound_when_not_beyond(monkeypatch,
                                                                         frozen):
    stop = too_large(math.inf)
    got, *_ = around(monkeypatch, [outcome(Status.INFEASIBLE, None, 3.0)], Fake(),
                     whole_budget=(None, stop))
    assert got.status is Status.NO_SOLUTION and got.bound == 3.0


def test_around_inside_out_floor_after_the_fallback(monkeypatch, frozen):
    first = InnerStage(outcome(Status.INFEASIBLE, None, None, 0.5, 0.25), False, 0.5, 1.5)
    got, run, details, _ = around(
        monkeypatch, [outcome(Status.FEASIBLE, 1.6, 0.25, 1.0, 1.0),
                      outcome(Status.FEASIBLE, 1.6, 0.25, 1.0, 1.0)], Fake(), per=True,
        stage=stage_of(first, []))
    assert details["fallback"] and got.bound == 0.5
    stop = too_large(math.inf)
    got, *_ = around(monkeypatch, [outcome(Status.FEASIBLE, 1.6, 0.25, 1.0, 1.0)], Fake(),
                     per=True, stage=stage_of(first, []), whole_budget=(None, stop))
    assert got.bound == 0.5 and got.status is Status.FEASIBLE
    got, *_ = around(monkeypatch, [outcome(Status.FEASIBLE, 1.6, 1.75, 1.0, 1.0)], Fake(),
                     per=True, stage=stage_of(first, []), whole_budget=(None, stop))
    assert got.bound == 1.5  # min(bound, r) of the second radius


def test_the_heuristic_is_verified_with_the_declared_margin(monkeypatch):
    run = runner(Backend())
    seen = []

    def verify(m, row, margin):
        seen.append(margin)
        return verification(False)

    monkeypatch.setattr(R, "verify_row", verify)
    run._heuristic(run.milp, {}, [], Fake(ROW))
    assert seen == [run.milp.declared_margin]
