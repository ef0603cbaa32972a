"""The master of PROPLACE's loop (:mod:`cfopt.methods.proplace_master`) in pieces, with
scripted stand-ins for the model, the adversary and the solves: the margin levels and
the decision below σ, the proof of a certified point of the pieces, the models kept,
the networks held, the pieces' gate and points, the messages."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from cfopt.methods import proplace_master as pm
from cfopt.methods.cutting_set import Deadline, LoopResult, MasterAnswer
from cfopt.query.incumbents import cutoff_above
from cfopt.results.robust import RobustStatus
from cfopt.results.status import Status
from cfopt.solvers import SolverSettings


# ------------------------------------------------------------------ the levels
def test_margin_levels_by_hand(monkeypatch):
    assert pm.LAST_LEVEL == 1e-2
    assert pm.margin_levels(0.1, 0.05) == (0.1 - 0.05, 0.05 * 1e-2)
    monkeypatch.setattr(pm, "LAST_LEVEL", 0.25)
    assert pm.margin_levels(0.75, 0.5) == (0.25, 0.125)
    assert pm.margin_levels(0.625, 0.5) == (0.125,)  # t/4 is σ - t: one level
    assert pm.margin_levels(0.6, 0.5) == (0.6 - 0.5,)


def loop(status=RobustStatus.INFEASIBLE, failed=True, iterations=3, message="m",
         master=1.0, adversary=2.0) -> LoopResult:
    return LoopResult(status=status, message=message, iterations=iterations,
                      master_failed=failed, master_seconds=master, adversary_seconds=adversary)


class Runs:
    """``run(level, iterations)`` answering from a list, recording the margins set."""

    def __init__(self, m, adversary, answers) -> None:
        self.m, self.adversary, self.answers, self.calls = m, adversary, list(answers), []

    def __call__(self, level, iterations):
        self.calls.append((level, iterations, self.m.margin, self.adversary.threshold))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def stand_ins(answers):
    m = SimpleNamespace(margin=0.1)
    adversary = SimpleNamespace(threshold=0.05)
    return m, adversary, Runs(m, adversary, answers)


@pytest.mark.parametrize("first", [loop(RobustStatus.CERTIFIED), loop(failed=False),
                                   loop(RobustStatus.TIME_LIMIT)])
def test_a_loop_not_proven_infeasible_by_its_master_is_the_answer(first):
    m, adversary, run = stand_ins([])
    out, level = pm.decide_below_sigma(first, m, adversary, 0.1, 0.05, 10, run)
    assert out is first and level == 0.1 and run.calls == []


def test_an_infeasible_master_decides_again_at_sigma_minus_t():
    m, adversary, run = stand_ins([loop(RobustStatus.CERTIFIED, False, 2, "then",
                                        0.5, 0.25)])
    out, level = pm.decide_below_sigma(loop(), m, adversary, 0.1, 0.04, 10, run)
    assert run.calls == [(0.1 - 0.04, 7, 0.1 - 0.04, 0.0)]
    assert level == 0.1 - 0.04 and out.status is RobustStatus.CERTIFIED
    assert out.iterations == 5 and out.master_seconds == 1.5 and out.adversary_seconds == 2.25
    assert out.message == ("no point is Δ-robust with margin σ=0.1 (master infeasible); "
                           "decided at margin 0.06: then")
    assert m.margin == 0.1 and adversary.threshold == 0.05


def test_an_infeasible_master_at_sigma_minus_t_descends_once_more():
    m, adversary, run = stand_ins([loop(iterations=1, message=""),
                                   loop(RobustStatus.CERTIFIED, False, 1, "")])
    out, level = pm.decide_below_sigma(loop(iterations=2), m, adversary, 0.1, 0.05, 10, run)
    assert [c[:2] for c in run.calls] == [(0.05, 8), (0.0005, 7)]
    assert [c[2:] for c in run.calls] == [(0.05, 0.0), (0.0005, 0.0)]
    assert level == 0.0005 and out.iterations == 4 and out.status is RobustStatus.CERTIFIED
    assert out.message == ("no point is Δ-robust with margin σ=0.1 nor 0.05 (master "
                           "infeasible); decided at margin 0.0005")
    assert out.master_seconds == 3.0 and out.adversary_seconds == 6.0


def test_the_last_level_stops_even_when_infeasible():
    m, adversary, run = stand_ins([loop(iterations=1), loop(iterations=1, message="none")])
    out, level = pm.decide_below_sigma(loop(iterations=1), m, adversary, 0.1, 0.05, 10, run)
    assert len(run.calls) == 2 and level == 0.0005 and out.status is RobustStatus.INFEASIBLE
    assert out.iterations == 3


@pytest.mark.parametrize("done, cap", [(5, 5), (6, 5)])
def test_no_iteration_left_is_the_iteration_limit(done, cap):
    m, adversary, run = stand_ins([])
    first = loop(iterations=done, message="infeasible")
    out, level = pm.decide_below_sigma(first, m, adversary, 0.1, 0.05, cap, run)
    assert run.calls == [] and level == 0.1
    assert out.status is RobustStatus.ITERATION_LIMIT and out.iterations == done
    assert out.message == ("infeasible; the iteration cap came before deciding at margin "
                           "0.05 whether a point robust at that margin exists")
    assert first.status is RobustStatus.INFEASIBLE


def test_one_iteration_left_is_used():
    m, adversary, run = stand_ins([loop(RobustStatus.CERTIFIED, False, 1)])
    out, _ = pm.decide_below_sigma(loop(iterations=4), m, adversary, 0.1, 0.05, 5, run)
    assert run.calls[0][1] == 1 and out.iterations == 5


def test_the_margins_are_restored_after_a_failed_run():
    m, adversary, run = stand_ins([RuntimeError("solver")])
    with pytest.raises(RuntimeError):
        pm.decide_below_sigma(loop(), m, adversary, 0.1, 0.05, 10, run)
    assert m.margin == 0.1 and adversary.threshold == 0.05


# ------------------------------------------------------------------ the master
class Adversary:
    def __init__(self, models=2, missed=(), hull=None) -> None:
        self.models, self.missed_at, self.hull = [object()] * models, list(missed), hull
        self.asked: list = []

    def missed(self, z, level):
        self.asked.append((z, level))
        return self.missed_at.pop(0) if self.missed_at else set()


class Space:
    def encode(self, frame):
        return frame.to_numpy(dtype=float)


def master(adversary=None, **options) -> pm.ProplaceMaster:
    m = SimpleNamespace(space=Space(), predictor_constr=object())
    return pm.ProplaceMaster(m, None, 0.25, adversary or Adversary(), **options)


def test_a_new_master_holds_nothing_yet():
    p = master(warm_start=True, ladder=True, cutoff=True, relax_model=True,
               active_set=True, piece_points=True)
    assert (p.warm_start, p.ladder, p.cutoff, p.relax_model, p.active_set,
            p.piece_points) == (True,) * 6
    assert p.sigma == 0.25 and p.kept == set() and p.resolves == 0
    assert p.bound is p.floor is p.guess is p._last is None and p.found is False
    assert p._pieces_answered is False and p._piece_objective is None
    q = master()
    assert (q.warm_start, q.ladder, q.cutoff, q.relax_model, q.active_set,
            q.piece_points) == (False,) * 6


def test_the_infeasible_message_names_the_margin_and_the_models():
    assert master(Adversary(3)).infeasible() == (
        "no point of the plausible region satisfies the constraints and is valid with "
        "margin 0.25 for the model and the 3 shifted model(s) collected: no counterfactual "
        "in the region is Δ-robust with margin 0.25 (proven at that margin only; one "
        "robust at a smaller margin is not excluded)")


def test_the_answer_is_the_point_with_its_status_and_bound():
    row = pd.DataFrame({"a": [1.0]})
    answer = master().answer(SimpleNamespace(row=row), Status.FEASIBLE, 0.5)
    assert answer.status is Status.FEASIBLE and answer.point is row and answer.bound == 0.5
    assert answer.proven and answer.solved


def test_models_missed_are_kept_and_the_solve_repeated():
    adversary = Adversary(missed=[{0, 2}, set()])
    p = master(adversary)
    point = pd.DataFrame({"a": [0.5], "b": [2.0]})
    assert p._keep_missed(point) is True
    assert p.kept == {0, 2} and p.resolves == 1
    z, level = adversary.asked[0]
    np.testing.assert_array_equal(z, [0.5, 2.0])
    assert level == 0.25 - pm.HELD_OUT_TOLERANCE and pm.HELD_OUT_TOLERANCE == 1e-6
    assert p._keep_missed(point) is False and p.kept == {0, 2} and p.resolves == 1
    adversary.missed_at = [{1}]
    assert p._keep_missed(point) is True and p.kept == {0, 1, 2} and p.resolves == 2


def test_held_networks_leave_the_models_own_out_when_relaxed():
    p = master()
    own = (p.m.predictor_constr, None)
    other = (object(), None)
    assert p._held([own, other], True) == [other]
    assert p._held([own, other], False) == [own, other]


@pytest.mark.parametrize("copies, last, guess, unstable, applies", [
    ([1], "x", None, pm.CUTOFF_NEURONS + 1, True),
    ([1], None, np.zeros(2), pm.CUTOFF_NEURONS + 1, True),
    ([1], "x", None, pm.CUTOFF_NEURONS, False),
    ([], "x", None, pm.CUTOFF_NEURONS + 1, False),
    ([1], None, None, pm.CUTOFF_NEURONS + 1, False)])
def test_the_pieces_gate(monkeypatch, copies, last, guess, unstable, applies):
    seen = []

    def count(networks, first):
        seen.append((networks, first))
        return unstable

    monkeypatch.setattr(pm, "unstable_neurons", count)
    p = master()
    p._last, p.guess = last, guess
    assert p._pieces_apply(copies, ["networks"]) is applies
    assert seen in ([], [(["networks"], 1)])


def test_the_pieces_points(monkeypatch):
    calls = []

    def toward(m, networks, start, hull, margin):
        assert m is p.m
        calls.append((networks, start, hull, margin))
        return None if len(calls) > 1 else np.array([9.0])

    monkeypatch.setattr(pm, "toward_target", toward)
    p = master(Adversary(hull="hull"))
    p.guess = np.array([1.0])
    assert [list(x) for x in p.pieces(["n"])] == [[1.0], [9.0]]
    assert calls == [(["n"], p.guess, "hull", 0.5)]
    p._last = pd.DataFrame({"a": [3.0]})
    assert [list(x) for x in p.pieces(["n"])] == [[3.0]]  # toward_target found none
    q = master(Adversary(hull=None))
    q.guess = np.array([1.0])
    points = q.pieces([])
    assert list(next(points)) == [1.0]
    assert list(points) == [] and len(calls) == 2


# ------------------------------------------------------------------ the proof
def proving(answer, gap=0.1, objective=2.0):
    p = master()
    p._piece_objective = objective
    seen = []

    def solve_active(deadline):
        assert deadline is given
        seen.append(p._proof_cutoff)
        if isinstance(answer, Exception):
            raise answer
        return answer

    p._solve_active = solve_active
    candidate = MasterAnswer(Status.FEASIBLE, point=pd.DataFrame({"a": [1.0]}), label="L",
                             proven=False)
    given = Deadline(SolverSettings(mip_gap=gap))
    return p, candidate, given, seen


@pytest.mark.parametrize("bound", [1.8, 1.9, 2.0])
def test_a_proof_within_the_gap_keeps_the_candidate(bound):
    p, candidate, deadline, seen = proving(MasterAnswer(Status.OPTIMAL, bound=bound,
                                                        point=pd.DataFrame({"a": [0.0]})))
    out = p.prove(candidate, deadline)
    assert out.point is candidate.point and out.status is Status.OPTIMAL
    assert out.bound == bound and out.label == "L"
    assert seen == [cutoff_above(2.0)] and p._proof_cutoff is None


def test_a_proof_beyond_the_gap_is_the_masters_own_answer():
    answer = MasterAnswer(Status.OPTIMAL, bound=1.79, point=pd.DataFrame({"a": [0.0]}))
    p, candidate, deadline, _ = proving(answer)
    assert p.prove(candidate, deadline) is answer
    answer = MasterAnswer(Status.OPTIMAL, bound=2.0 - 2e-9, point=pd.DataFrame({"a": [0.0]}))
    p, candidate, deadline, _ = proving(answer, gap=0.0)
    assert p.prove(candidate, deadline) is answer
    answer = MasterAnswer(Status.OPTIMAL, bound=2.0 - 0.5e-9, point=pd.DataFrame({"a": [0.0]}))
    p, candidate, deadline, _ = proving(answer, gap=0.0)
    assert p.prove(candidate, deadline).point is candidate.point
    # at 0 the gap is the 1e-9 alone, met exactly
    answer = MasterAnswer(Status.OPTIMAL, bound=-1e-9, point=pd.DataFrame({"a": [0.0]}))
    p, candidate, deadline, _ = proving(answer, gap=0.5, objective=0.0)
    assert p.prove(candidate, deadline).point is candidate.point
    answer = MasterAnswer(Status.OPTIMAL, bound=-2e-9, point=pd.DataFrame({"a": [0.0]}))
    p, candidate, deadline, _ = proving(answer, gap=0.5, objective=0.0)
    assert p.prove(candidate, deadline) is answer


@pytest.mark.parametrize("answer, says", [
    (MasterAnswer(Status.FEASIBLE, bound=1.9, message="time"),
     "the master's proof of the certified point ended with feasible (time); the point "
     "is not claimed optimal"),
    (MasterAnswer(Status.NO_SOLUTION),
     "the master's proof of the certified point ended with no_solution; the point is "
     "not claimed optimal"),
    (MasterAnswer(Status.OPTIMAL, bound=None, message="x"),
     "the master's proof of the certified point ended with optimal (x); the point is "
     "not claimed optimal")])
def test_a_proof_without_a_bound_keeps_the_candidate_unproven(answer, says):
    p, candidate, deadline, _ = proving(answer)
    out = p.prove(candidate, deadline)
    assert out.status is Status.FEASIBLE and out.point is candidate.point
    assert out.label == "L" and out.message == says and out.bound is None


def test_the_proofs_cutoff_is_dropped_even_on_error():
    p, candidate, deadline, seen = proving(RuntimeError("solver"))
    with pytest.raises(RuntimeError):
        p.prove(candidate, deadline)
    assert seen == [cutoff_above(2.0)] and p._proof_cutoff is None


# ------------------------------------------------------------------ the solves
def test_the_active_set_repeats_a_solve_that_missed_a_model():
    row = pd.DataFrame({"a": [1.0]})
    for active, status, missed, solves in [(True, Status.OPTIMAL, [True, False], 2),
                                           (False, Status.OPTIMAL, [True], 1),
                                           (True, Status.FEASIBLE, [True], 1)]:
        p = master(active_set=active)
        answers = []

        def held(deadline, p=p, answers=answers, status=status):
            answers.append(MasterAnswer(status, point=row))
            return answers[-1]

        p._solve_held = held
        flags = list(missed)
        p._keep_missed = lambda point, flags=flags: flags.pop(0)
        assert p._solve_active(None) is answers[-1] and len(answers) == solves
    p = master(active_set=True)
    p._solve_held = lambda deadline: MasterAnswer(Status.INFEASIBLE)
    p._keep_missed = lambda point: pytest.fail("no point to check")
    assert p._solve_active(None).status is Status.INFEASIBLE


def test_the_first_master_past_the_gate_answers_with_its_pieces_point():
    p = master(piece_points=True)
    pieces = MasterAnswer(Status.FEASIBLE, point=pd.DataFrame({"a": [1.0]}), proven=False)
    whole = MasterAnswer(Status.OPTIMAL, point=pd.DataFrame({"a": [2.0]}))
    script = [pieces, pieces]
    given = object()

    def piece_answer(deadline):
        assert deadline is given
        return script.pop(0)

    p._piece_answer = piece_answer
    p._solve_active = lambda deadline: whole
    assert p.solve(given) is pieces and p._pieces_answered
    assert p.solve(given) is whole and script == [pieces]
    p = master(piece_points=True)
    p._piece_answer = lambda deadline: None
    p._solve_active = lambda deadline: whole
    assert p.solve(None) is whole and not p._pieces_answered
    p = master(piece_points=False)
    p._piece_answer = lambda deadline: pytest.fail("no pieces")
    p._solve_active = lambda deadline: whole
    assert p.solve(None) is whole


def test_a_solve_without_time_gives_no_point():
    p = master()
    deadline = Deadline(SolverSettings(time_limit=1e-9), started=0.0)
    out = p._solve_held(deadline)
    assert out == MasterAnswer(Status.NO_SOLUTION, solved=False,
                               message="time limit reached before a certificate")
    assert dataclasses.asdict(out)["solved"] is False
