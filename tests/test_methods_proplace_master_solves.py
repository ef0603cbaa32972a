"""The solve paths of PROPLACE's master (:mod:`cfopt.methods.proplace_master`) with its
speed levers (the ladder, the cutoff, the relaxed model, the active set, the pieces'
points), with scripted stand-ins for the MILP, the adversary, the backend and the
query helpers it calls: which copies each solve holds, what each helper is given, and
the answer and state each outcome leaves."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from cfopt.methods import proplace_master as pm
from cfopt.methods.cutting_set import UNCERTIFIED, MasterAnswer
from cfopt.results.status import Status


class Adversary:
    """Holds the copies of the models it is told; ``missed`` answers from a script."""

    def __init__(self, models=3, missed=(), hull=None) -> None:
        self.models, self.hull, self.missed_at = [object()] * models, hull, list(missed)
        self.holds: list[set] = []
        self.current: list[int] = []
        self.asked_for: list = []  # the MILPs whose copies were asked for
        self.asked_at: list = []   # the points checked for models missed

    def hold(self, which):
        self.holds.append(set(which))
        self.current = sorted(which)

    def network_copies(self, m):
        self.asked_for.append(m)
        return [("copy", i) for i in self.current]

    def missed(self, z, level):
        self.asked_at.append(list(z))
        return self.missed_at.pop(0) if self.missed_at else set()


class Backend:
    def __init__(self, outcome) -> None:
        self.outcome, self.calls = outcome, []

    def solve(self, m, settings, start, cutoff=None):
        self.calls.append((m, settings, start, cutoff))
        return self.outcome


def outcome(status=Status.OPTIMAL, bound=1.5, termination="optimal", objective=2.0):
    return SimpleNamespace(status=status, bound=bound, termination=termination,
                           objective=objective)


class Deadline:
    """``left()`` answers from a script (then the last settings again)."""

    def __init__(self, *lefts) -> None:
        self.lefts = list(lefts) or ["settings"]
        self.asked = 0

    def left(self):
        self.asked += 1
        return self.lefts.pop(0) if len(self.lefts) > 1 else self.lefts[0]


OWN = ("own", None)
ROW = pd.DataFrame({"a": [0.5], "b": [2.0]})


@pytest.fixture
def calls(monkeypatch):
    """The query helpers the master calls, recording their arguments."""
    record: dict[str, list] = {"hold_model": [], "can_climb": [], "first_floor": [],
                               "climb": [], "start_of": [], "pattern_cutoff": [],
                               "piece_point": [], "verified": [], "own": [], "unstable": [],
                               "hold_model_of": [], "toward": []}
    state = SimpleNamespace(climb=False, first_floor=0.75, cutoff=9.0,
                            piece=outcome(Status.FEASIBLE, None, "optimal", 3.5),
                            climbed=outcome(Status.OPTIMAL, 1.25), unstable=100)

    def first_floor(m):
        record["first_floor"].append(m)
        return state.first_floor

    def can_climb(m, floor, copies):
        record["can_climb"].append((m, floor, list(copies)))
        return state.climb

    def climb(m, backend, left, floor, options, copies):
        record["climb"].append((m, backend, left, floor, options, list(copies)))
        return state.climbed

    def start_of(m, last):
        record["start_of"].append((m, last))
        return "start"

    def pattern_cutoff(m, backend, left, held, points):
        record["pattern_cutoff"].append((m, backend, left, list(held), list(points)))
        return state.cutoff

    def piece_point(m, backend, left, held, points):
        record["piece_point"].append((m, backend, left, list(held), list(points)))
        return state.piece

    def verified(m):
        record["verified"].append(m)
        return SimpleNamespace(row=ROW)

    def hold_model(m, hold):
        record["hold_model_of"].append(m)
        record["hold_model"].append(hold)

    def own(m):
        record["own"].append(m)
        return [OWN]

    def unstable(networks, first):
        record["unstable"].append(list(networks))
        return state.unstable

    def toward(m, networks, start, hull, margin):
        record["toward"].append(list(networks))
        return None

    monkeypatch.setattr(pm, "hold_model", hold_model)
    monkeypatch.setattr(pm, "toward_target", toward)
    monkeypatch.setattr(pm, "first_floor", first_floor)
    monkeypatch.setattr(pm, "can_climb", can_climb)
    monkeypatch.setattr(pm, "climb", climb)
    monkeypatch.setattr(pm, "start_of", start_of)
    monkeypatch.setattr(pm, "pattern_cutoff", pattern_cutoff)
    monkeypatch.setattr(pm, "piece_point", piece_point)
    monkeypatch.setattr(pm, "verified_solution", verified)
    monkeypatch.setattr(pm, "network_copies", own)
    monkeypatch.setattr(pm, "unstable_neurons", unstable)
    return SimpleNamespace(record=record, state=state)


def master(adversary=None, result=None, **options) -> pm.ProplaceMaster:
    m = SimpleNamespace(space=SimpleNamespace(encode=lambda f: f.to_numpy(dtype=float)),
                        predictor_constr="own")
    return pm.ProplaceMaster(m, Backend(result or outcome()), 0.25,
                             adversary or Adversary(), **options)


# ------------------------------------------------------------------ the copies held
def test_without_levers_every_copy_and_the_model_are_held(calls):
    adversary = Adversary(3)
    p = master(adversary)
    assert p._hold(0.5) == ([("copy", 0), ("copy", 1), ("copy", 2)], False, False)
    assert adversary.holds == [{0, 1, 2}] and calls.record["hold_model"] == [True]
    assert calls.record["can_climb"] == []  # no ladder: not asked


@pytest.mark.parametrize("climbs", [True, False])
def test_the_ladder_climbs_when_it_can(calls, climbs):
    calls.state.climb = climbs
    adversary = Adversary(2)
    p = master(adversary, ladder=True)
    copies, climbing, relaxed = p._hold(0.5)
    assert climbing is climbs and relaxed is False and copies == [("copy", 0), ("copy", 1)]
    assert calls.record["can_climb"] == [(p.m, 0.5, [("copy", 0), ("copy", 1)])]


def test_the_active_set_holds_the_newest_and_the_kept(calls):
    adversary = Adversary(4)
    p = master(adversary, active_set=True)
    p.kept = {1}
    copies, climbing, relaxed = p._hold(None)
    assert adversary.holds == [{0, 1, 2, 3}, {1, 3}]
    assert copies == [("copy", 1), ("copy", 3)] and not climbing and not relaxed
    assert calls.record["hold_model"] == [True]


def test_a_climbing_ladder_holds_every_copy_even_with_the_active_set(calls):
    calls.state.climb = True
    adversary = Adversary(3)
    p = master(adversary, active_set=True, ladder=True, relax_model=True)
    copies, climbing, relaxed = p._hold(0.5)
    assert adversary.holds == [{0, 1, 2}] and len(copies) == 3
    assert climbing is True and relaxed is False and calls.record["hold_model"] == [True]


@pytest.mark.parametrize("models, relaxed", [(2, True), (0, False)])
def test_the_model_is_left_out_only_with_copies(calls, models, relaxed):
    p = master(Adversary(models), relax_model=True)
    assert p._hold(None)[2] is relaxed
    assert calls.record["hold_model"] == [not relaxed]


# ------------------------------------------------------------------ one solve
def test_a_plain_solve_gives_the_verified_point(calls):
    result = outcome(Status.OPTIMAL, 1.5)
    p = master(result=result)
    deadline = Deadline("s1")
    answer = p._solve_held(deadline)
    assert answer == MasterAnswer(Status.OPTIMAL, point=ROW, bound=1.5)
    assert p.backend.calls == [(p.m, "s1", None, None)]
    assert calls.record["first_floor"] == [p.m] and calls.record["verified"] == [p.m]
    assert p.bound == 1.5 and p.floor == 1.5 and p.found is True and p._last is ROW
    assert calls.record["climb"] == [] and calls.record["start_of"] == []


def test_the_floor_known_is_not_recomputed_and_only_rises(calls):
    p = master(result=outcome(Status.OPTIMAL, 1.0), ladder=True)
    p.floor = 2.0
    p._solve_held(Deadline())
    assert calls.record["first_floor"] == [] and calls.record["can_climb"][0][1] == 2.0
    assert p.floor == 2.0 and p.bound == 1.0
    p.backend.outcome = outcome(Status.OPTIMAL, 3.0)
    p._solve_held(Deadline())
    assert p.floor == 3.0


@pytest.mark.parametrize("bound", [None, math.inf, -math.inf, math.nan])
def test_no_finite_bound_leaves_the_floor(calls, bound):
    p = master(result=outcome(Status.FEASIBLE, bound))
    p._solve_held(Deadline())
    assert p.floor is None
    p.floor = 0.5
    p._solve_held(Deadline())
    assert p.floor == 0.5


def test_a_negative_bound_is_a_floor(calls):
    p = master(result=outcome(Status.OPTIMAL, -4.0))
    p._solve_held(Deadline())
    assert p.floor == -4.0


def test_the_ladder_climbs_from_the_floor(calls):
    calls.state.climb, calls.state.first_floor = True, 0.5
    adversary = Adversary(2)
    p = master(adversary, ladder=True, warm_start=True, cutoff=True)
    p._last = ROW
    deadline = Deadline()
    answer = p._solve_held(deadline)
    (m, backend, left, floor, options, copies), = calls.record["climb"]
    assert m is p.m and backend is p.backend and floor == 0.5 and options == {}
    assert left == deadline.left and copies == [("copy", 0), ("copy", 1)]
    assert p.backend.calls == [] and calls.record["start_of"] == []
    assert answer.status is Status.OPTIMAL and answer.bound == 1.25 and p.floor == 1.25


def test_a_warm_start_starts_from_the_last_point(calls):
    p = master(warm_start=True)
    p._solve_held(Deadline())
    assert p.backend.calls[0][2] is None and calls.record["start_of"] == []
    p._solve_held(Deadline())
    assert calls.record["start_of"] == [(p.m, ROW)] and p.backend.calls[1][2] == "start"
    q = master()
    q._last = ROW
    q._solve_held(Deadline())
    assert q.backend.calls[0][2] is None


def test_the_cutoff_of_the_pieces_bounds_the_solve(calls):
    p = master(Adversary(2), cutoff=True, relax_model=True)
    p.guess = np.array([1.0, 2.0])
    deadline = Deadline("first", "second")
    p._solve_held(deadline)
    (m, backend, left, held, points), = calls.record["pattern_cutoff"]
    assert m is p.m and backend is p.backend and left == deadline.left
    assert held == [("copy", 0), ("copy", 1)]  # the model's own left out: relaxed
    assert [list(x) for x in points] == [[1.0, 2.0]]
    assert p.backend.calls == [(p.m, "second", None, 9.0)] and deadline.asked == 2


def test_the_cutoff_with_the_model_held_keeps_its_network(calls):
    p = master(Adversary(1), cutoff=True)
    p.guess = np.array([1.0])
    p._solve_held(Deadline())
    assert calls.record["pattern_cutoff"][0][3] == [OWN, ("copy", 0)]


@pytest.mark.parametrize("unstable, guess, models", [
    (pm.CUTOFF_NEURONS, np.array([1.0]), 1), (100, None, 1), (100, np.array([1.0]), 0)])
def test_no_cutoff_before_the_gate(calls, unstable, guess, models):
    calls.state.unstable = unstable
    p = master(Adversary(models), cutoff=True)
    p.guess = guess
    deadline = Deadline("first", "second")
    p._solve_held(deadline)
    assert calls.record["pattern_cutoff"] == [] and deadline.asked == 1
    assert p.backend.calls == [(p.m, "first", None, None)]


def test_time_up_after_the_cutoff_gives_no_point(calls):
    p = master(Adversary(1), cutoff=True)
    p.guess = np.array([1.0])
    answer = p._solve_held(Deadline("first", None))
    assert answer == MasterAnswer(Status.NO_SOLUTION, solved=False,
                                  message="time limit reached before a certificate")
    assert p.backend.calls == [] and len(calls.record["pattern_cutoff"]) == 1


def test_the_proofs_cutoff_replaces_the_pieces(calls):
    p = master(Adversary(1), cutoff=True)
    p.guess = np.array([1.0])
    p._proof_cutoff = 4.5
    p._solve_held(Deadline())
    assert calls.record["pattern_cutoff"] == [] and p.backend.calls[0][3] == 4.5


def test_an_infeasible_master_says_what_it_proves(calls):
    p = master(Adversary(2), result=outcome(Status.INFEASIBLE, None, "infeasible"))
    answer = p._solve_held(Deadline())
    assert answer == MasterAnswer(Status.INFEASIBLE, message=p.infeasible())
    assert p.found is False and p._last is None and calls.record["verified"] == []


@pytest.mark.parametrize("found, says", [
    (False, "master solve ended with maxTimeLimit"),
    (True, f"master solve ended with maxTimeLimit; {UNCERTIFIED}")])
def test_a_solve_without_a_point_keeps_the_last(calls, found, says):
    p = master(result=outcome(Status.NO_SOLUTION, 0.5, "maxTimeLimit"))
    p.found, p._last, p.bound = found, "last", 0.25
    answer = p._solve_held(Deadline())
    assert answer == MasterAnswer(Status.NO_SOLUTION, message=says)
    assert p._last == "last" and p.bound == 0.25 and p.found is found and p.floor == 0.5


# ------------------------------------------------------------------ the pieces' answer
def test_the_pieces_answer_with_their_point(calls):
    p = master(Adversary(2), relax_model=True, piece_points=True)
    p.guess = np.array([1.0, 2.0])
    deadline = Deadline()
    answer = p._piece_answer(deadline)
    assert answer == MasterAnswer(Status.FEASIBLE, point=ROW, proven=False)
    (m, backend, left, held, points), = calls.record["piece_point"]
    assert m is p.m and backend is p.backend and left == deadline.left
    assert held == [("copy", 0), ("copy", 1)] and [list(x) for x in points] == [[1.0, 2.0]]
    assert p._last is ROW and p._piece_objective == 3.5 and p.found is True
    assert calls.record["first_floor"] == [p.m] and calls.record["hold_model"] == [False]
    assert p.backend.calls == []


def test_the_pieces_keep_the_models_own_network_when_held(calls):
    p = master(Adversary(1), piece_points=True)
    p.guess = np.array([1.0])
    p._piece_answer(Deadline())
    assert calls.record["piece_point"][0][3] == [OWN, ("copy", 0)]


def test_no_pieces_when_the_ladder_climbs(calls):
    calls.state.climb = True
    p = master(Adversary(1), ladder=True, piece_points=True)
    p.floor = 0.5
    p.guess = np.array([1.0])
    assert p._piece_answer(Deadline()) is None
    assert calls.record["piece_point"] == [] and calls.record["first_floor"] == []
    assert calls.record["can_climb"][0][1] == 0.5


def test_no_pieces_before_the_gate(calls):
    calls.state.unstable = pm.CUTOFF_NEURONS
    p = master(Adversary(1), piece_points=True)
    p.guess = np.array([1.0])
    assert p._piece_answer(Deadline()) is None and calls.record["piece_point"] == []


@pytest.mark.parametrize("piece", [None, outcome(Status.INFEASIBLE, None, "x", None)])
def test_no_pieces_point_no_answer(calls, piece):
    calls.state.piece = piece
    p = master(Adversary(1), piece_points=True)
    p.guess = np.array([1.0])
    assert p._piece_answer(Deadline()) is None
    assert p._last is None and p._piece_objective is None and p.found is False


def test_a_pieces_point_missing_a_model_left_out_is_no_answer(calls):
    p = master(Adversary(3, missed=[{0}]), piece_points=True, active_set=True)
    p.guess = np.array([1.0])
    assert p._piece_answer(Deadline()) is None
    assert p.kept == {0} and p.resolves == 1 and p._last is None and p.found is False
    q = master(Adversary(3, missed=[set()]), piece_points=True, active_set=True)
    q.guess = np.array([1.0])
    assert q._piece_answer(Deadline()).point is ROW and q.kept == set()
    r = master(Adversary(3, missed=[{0}]), piece_points=True)
    r.guess = np.array([1.0])
    assert r._piece_answer(Deadline()).point is ROW and r.kept == set()


def test_a_query_answers_with_its_pieces_once(calls):
    p = master(Adversary(1), piece_points=True)
    p.guess = np.array([1.0])
    first = p.solve(Deadline())
    assert first.proven is False and p.backend.calls == []
    second = p.solve(Deadline())
    assert second.proven is True and len(p.backend.calls) == 1
    assert len(calls.record["piece_point"]) == 1


# ------------------------------------------------------------------ what the helpers get
def test_every_helper_gets_the_masters_milp_and_networks(calls):
    adversary = Adversary(2, hull="hull")
    p = master(adversary, cutoff=True, active_set=True)
    p.guess = np.array([1.0, 2.0])
    p._solve_held(Deadline())
    networks = [OWN, ("copy", 1)]  # the active set: the newest copy
    assert calls.record["own"] == [p.m] and calls.record["hold_model_of"] == [p.m]
    assert adversary.asked_for == [p.m, p.m] and calls.record["verified"] == [p.m]
    assert calls.record["unstable"] == [networks] and calls.record["toward"] == [networks]


def test_the_pieces_helpers_get_the_masters_milp_and_networks(calls):
    adversary = Adversary(1, hull="hull")
    p = master(adversary, piece_points=True)
    p.guess = np.array([1.0, 2.0])
    p._piece_answer(Deadline())
    assert calls.record["own"] == [p.m] and calls.record["verified"] == [p.m]
    assert calls.record["unstable"] == [[OWN, ("copy", 0)]]
    assert calls.record["toward"] == [[OWN, ("copy", 0)]]


def test_the_active_set_checks_the_solves_point(calls):
    adversary = Adversary(2, missed=[{0}, set()])
    p = master(adversary, active_set=True)
    answer = p._solve_active(Deadline())
    assert answer.point is ROW and adversary.asked_at == [[0.5, 2.0], [0.5, 2.0]]
    assert p.kept == {0} and len(p.backend.calls) == 2 and adversary.holds[-1] == {0, 1}
