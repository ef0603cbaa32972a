"""The cutting-set engine alone: statuses, cuts from several adversaries, the shared
deadline (a scripted master and adversaries, no solver)."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from cfopt.methods.cutting_set import (
    Adversary,
    Check,
    CuttingSet,
    Deadline,
    Master,
    MasterAnswer,
)
from cfopt.results.robust import RobustStatus
from cfopt.results.status import Status
from cfopt.solvers import SolverSettings


class Scripted(Master):
    """Answers in turn from a script: a status, or a point (its value)."""

    def __init__(self, script: list) -> None:
        self.script, self.cuts = list(script), []

    def solve(self, deadline: Deadline) -> MasterAnswer:
        if deadline.expired:
            return MasterAnswer(Status.NO_SOLUTION, solved=False, message="out of time")
        step = self.script.pop(0)
        if isinstance(step, Status):
            return MasterAnswer(step, message=step.value)
        return MasterAnswer(Status.OPTIMAL, point=pd.DataFrame({"v": [step]}), bound=step)


class Threshold(Adversary):
    """Certifies points with value ≥ ``level``; else the cut is the value (or none)."""

    def __init__(self, master: Scripted, level: float, undecided: bool = False,
                 sleep: float = 0.0) -> None:
        self.master, self.level, self.undecided, self.sleep = master, level, undecided, sleep
        self.seen: list[float] = []

    def check(self, answer: MasterAnswer, deadline: Deadline) -> Check:
        time.sleep(self.sleep)
        v = float(answer.point.iloc[0, 0])
        self.seen.append(v)
        ok = v >= self.level
        return Check(certified=ok, bound=v - self.level, verdict=v,
                     counterexample=None if ok or self.undecided else (self, v),
                     note="undecided")

    def add_cut(self, check: Check) -> None:
        self.master.cuts.append(check.counterexample)


class Undecided(Threshold):
    """A :class:`Threshold` that cannot decide the point of value ``at``."""

    def __init__(self, master: Scripted, level: float, at: float) -> None:
        super().__init__(master, level)
        self.at = at

    def check(self, answer: MasterAnswer, deadline: Deadline) -> Check:
        check = super().check(answer, deadline)
        if float(answer.point.iloc[0, 0]) == self.at:
            return Check(certified=False, bound=None, verdict=self.at, note="undecided")
        return check


def _deadline(limit: float | None = None) -> Deadline:
    return Deadline(SolverSettings(time_limit=limit))


def test_every_adversary_checks_and_cuts_until_all_certify():
    master = Scripted([1.0, 2.0, 3.0])
    a, b = Threshold(master, 2.0), Threshold(master, 3.0)
    out = CuttingSet(10).run(master, [a, b], _deadline())
    assert out.status is RobustStatus.CERTIFIED and out.optimal
    assert out.iterations == 3 and float(out.candidate.point.iloc[0, 0]) == 3.0
    assert a.seen == b.seen == [1.0, 2.0, 3.0]
    # iteration 1: both cut; iteration 2: only b
    assert master.cuts == [(a, 1.0), (b, 1.0), (b, 2.0)]
    assert [c.verdict for c in out.checks] == [3.0, 3.0]


def test_no_adversary_certifies_the_first_point():
    out = CuttingSet(3).run(Scripted([5.0]), [], _deadline())
    assert out.status is RobustStatus.CERTIFIED and out.iterations == 1 and out.checks == []


@pytest.mark.parametrize("status,expected", [
    (Status.INFEASIBLE, RobustStatus.INFEASIBLE),
    (Status.NO_SOLUTION, RobustStatus.TIME_LIMIT),
    (Status.VERIFICATION_FAILED, RobustStatus.VERIFICATION_FAILED),
    (Status.ERROR, RobustStatus.ERROR),
])
def test_a_failed_master_maps_its_status_and_keeps_the_last_point_unless_infeasible(
        status, expected):
    master = Scripted([1.0, status])
    out = CuttingSet(5).run(master, [Threshold(master, 2.0)], _deadline())
    assert out.status is expected and out.master_failed and out.iterations == 2
    assert out.message == status.value and not out.optimal
    if expected is RobustStatus.INFEASIBLE:
        assert out.candidate is None
    else:
        assert float(out.candidate.point.iloc[0, 0]) == 1.0


def test_iteration_cap_returns_the_last_point_unproven():
    master = Scripted([1.0, 1.5])
    out = CuttingSet(2).run(master, [Threshold(master, 2.0)], _deadline())
    assert out.status is RobustStatus.ITERATION_LIMIT and out.iterations == 2
    assert "without the loop's certificate" in out.message and not out.optimal
    assert "not claimed optimal" in out.message


def test_undecided_check_is_not_robust_with_time_left_and_a_time_limit_without():
    master = Scripted([1.0])
    out = CuttingSet(5).run(master, [Threshold(master, 2.0, undecided=True)], _deadline())
    assert out.status is RobustStatus.NOT_ROBUST and out.message == "undecided"
    master = Scripted([1.0])
    slow = Threshold(master, 2.0, undecided=True, sleep=0.05)
    out = CuttingSet(5).run(master, [slow], _deadline(0.02))
    assert out.status is RobustStatus.TIME_LIMIT


def test_checks_are_those_of_the_returned_point():
    # b certifies point 1 (a cuts it); at point 2, a is undecided and ends the loop:
    # b never checked point 2, so no verdict of b may be reported for it
    master = Scripted([1.0, 2.0])
    b = Threshold(master, 0.0)
    out = CuttingSet(5).run(master, [Undecided(master, 1.5, at=2.0), b], _deadline())
    assert out.status is RobustStatus.NOT_ROBUST and b.seen == [1.0]
    assert float(out.candidate.point.iloc[0, 0]) == 2.0
    assert out.checks[0].verdict == 2.0 and out.checks[1] is None


def test_the_deadline_is_shared_by_checks_and_the_next_master():
    master = Scripted([1.0, 2.0, 3.0])
    first = Threshold(master, 5.0, sleep=0.05)
    second = Threshold(master, 5.0)
    out = CuttingSet(5).run(master, [first, second], _deadline(0.02))
    # the first check spends the time: the second never runs, the point is kept
    assert out.status is RobustStatus.TIME_LIMIT and second.seen == []
    assert "before the adversary checked" in out.message and out.iterations == 1
    master = Scripted([1.0, 2.0])
    out = CuttingSet(5).run(master, [Threshold(master, 5.0, sleep=0.05)], _deadline(0.02))
    # the next master solve does not start: not counted, the last point kept
    assert out.status is RobustStatus.TIME_LIMIT and out.iterations == 1
    assert not out.master_failed and float(out.candidate.point.iloc[0, 0]) == 1.0


def test_bad_iteration_cap_is_named():
    with pytest.raises(ValueError, match="max_iterations"):
        CuttingSet(0)


class Pieces(Scripted):
    """A scripted master whose points are a restriction's (``proven`` False): a value,
    or ``("proof", what)`` steps answered by :meth:`prove` in turn, ``what`` being
    ``"keep"`` (the candidate, proven optimal), ``"time"`` (the candidate, unproven) or
    a better value (the master's own point)."""

    def __init__(self, script: list, proofs: list) -> None:
        super().__init__(script)
        self.proofs, self.proved = list(proofs), []

    def solve(self, deadline: Deadline) -> MasterAnswer:
        answer = super().solve(deadline)
        answer.status, answer.bound, answer.proven = Status.FEASIBLE, None, False
        return answer

    def prove(self, candidate: MasterAnswer, deadline: Deadline) -> MasterAnswer:
        self.proved.append(float(candidate.point.iloc[0, 0]))
        what = self.proofs.pop(0)
        if what == "keep":
            return MasterAnswer(Status.OPTIMAL, point=candidate.point, bound=0.5)
        if what == "time":
            return MasterAnswer(Status.FEASIBLE, point=candidate.point, message="no proof")
        return MasterAnswer(Status.OPTIMAL, point=pd.DataFrame({"v": [what]}), bound=what)


def test_a_certified_point_of_a_restriction_ends_the_loop_only_once_the_master_proves_it():
    """A certified unproven point asks the master for its proof (one more iteration):
    kept, the loop stops certified and optimal with the proof's bound; a better point
    of the proof is checked as any other; a proof without a point keeps the candidate
    certified, not optimal; so does an iteration cap before the proof."""
    master = Pieces([1.0, 2.5], ["keep"])
    a = Threshold(master, 2.0)
    out = CuttingSet(10).run(master, [a], _deadline())
    assert out.status is RobustStatus.CERTIFIED and out.optimal and out.iterations == 3
    assert master.proved == [2.5] and a.seen == [1.0, 2.5]  # the proof is not re-checked
    assert float(out.candidate.point.iloc[0, 0]) == 2.5 and out.candidate.bound == 0.5
    assert [c.verdict for c in out.checks] == [2.5]
    # the proof finds 2.2, which is checked (robust: certified by a proven master)
    master = Pieces([2.5], [2.2])
    a = Threshold(master, 2.0)
    out = CuttingSet(10).run(master, [a], _deadline())
    assert out.status is RobustStatus.CERTIFIED and out.optimal and out.iterations == 2
    assert a.seen == [2.5, 2.2] and float(out.candidate.point.iloc[0, 0]) == 2.2
    # the proof finds 1.5, not robust: its cut, then the master's next point
    master = Pieces([2.5, 3.0], [1.5, "keep"])
    a = Threshold(master, 2.0)
    out = CuttingSet(10).run(master, [a], _deadline())
    assert a.seen == [2.5, 1.5, 3.0] and master.cuts == [(a, 1.5)]
    assert out.status is RobustStatus.CERTIFIED and out.optimal and out.iterations == 4
    # no proof: certified, not claimed optimal, with the proof's message
    master = Pieces([2.5], ["time"])
    out = CuttingSet(10).run(master, [Threshold(master, 2.0)], _deadline())
    assert out.status is RobustStatus.CERTIFIED and not out.optimal
    assert out.message == "no proof" and float(out.candidate.point.iloc[0, 0]) == 2.5
    # the cap comes before the proof
    master = Pieces([1.0, 2.5], ["keep"])
    out = CuttingSet(2).run(master, [Threshold(master, 2.0)], _deadline())
    assert out.status is RobustStatus.CERTIFIED and not out.optimal and master.proved == []
    assert "not claimed optimal" in out.message


def test_a_masters_default_proof_is_its_next_solve_which_the_loop_checks():
    """A master without a proof of its own answers ``prove`` with its next solve: a
    new answer, which the loop checks (2.5 certified, proven by the solve of 3.0)."""
    master = Scripted([2.5, 3.0])
    first = master.solve(_deadline())
    first.proven = False
    answer = master.prove(first, _deadline())
    assert answer.point is not first.point and float(answer.point.iloc[0, 0]) == 3.0

    class Unproven(Scripted):
        def solve(self, deadline):
            answer = super().solve(deadline)
            answer.proven = answer.point is None or float(answer.point.iloc[0, 0]) != 2.5
            return answer

    master = Unproven([2.5, 3.0])
    a = Threshold(master, 2.0)
    out = CuttingSet(10).run(master, [a], _deadline())
    assert a.seen == [2.5, 3.0] and out.iterations == 2
    assert out.status is RobustStatus.CERTIFIED and out.optimal
    assert float(out.candidate.point.iloc[0, 0]) == 3.0


@pytest.mark.parametrize("cap", [0, -1, True, False, 2.0, "3", None])
def test_an_iteration_cap_other_than_a_positive_int_is_refused(cap):
    with pytest.raises(ValueError) as err:
        CuttingSet(cap)
    assert str(err.value) == f"max_iterations must be a positive integer, got {cap!r}"


def test_one_iteration_is_a_cap():
    master = Scripted([1.0, 2.0])
    out = CuttingSet(1).run(master, [Threshold(master, 2.0)], _deadline())
    assert out.status is RobustStatus.ITERATION_LIMIT and out.iterations == 1
    assert out.message == ("1 iterations without the loop's stop; the last point is returned "
                           "without the loop's certificate (the answer's certificate says "
                           "what its checks proved) and is not claimed optimal")
    assert CuttingSet(1).max_iterations == 1


def test_a_deadline_keeps_its_start():
    settings = SolverSettings(time_limit=3.0)
    deadline = Deadline(settings, 12.5)
    assert deadline.started == 12.5 and deadline.settings is settings
    t0 = time.perf_counter()
    assert t0 <= Deadline(settings).started <= time.perf_counter()


def test_the_observer_sees_every_check_and_each_adversary_the_loops_deadline():
    seen = []
    master = Scripted([1.0, 3.0])
    a, b = Threshold(master, 2.0), Threshold(master, 0.0)
    deadlines = []
    for adversary in (a, b):
        check = adversary.check

        def spy(answer, deadline, check=check):
            deadlines.append(deadline)
            return check(answer, deadline)

        adversary.check = spy
    deadline = _deadline(60.0)
    out = CuttingSet(5, observer=lambda *args: seen.append(args)).run(master, [a, b],
                                                                     deadline)
    assert out.status is RobustStatus.CERTIFIED and out.message == ""
    assert [(float(ans.point.iloc[0, 0]), adv, chk.verdict) for ans, adv, chk in seen] == \
        [(1.0, a, 1.0), (1.0, b, 1.0), (3.0, a, 3.0), (3.0, b, 3.0)]
    assert seen[-1][0] is out.candidate and seen[-1][2] is out.checks[1]
    assert deadlines == [deadline] * 4


class Slow(Scripted):
    """A scripted master that takes ``sleep`` seconds per solve."""

    def __init__(self, script: list, sleep: float) -> None:
        super().__init__(script)
        self.sleep = sleep

    def solve(self, deadline: Deadline) -> MasterAnswer:
        time.sleep(self.sleep)
        return super().solve(deadline)


def test_the_time_in_solves_and_in_checks_adds_up():
    master = Slow([1.0, 3.0], 0.03)
    a, b = Threshold(master, 2.0, sleep=0.02), Threshold(master, 0.0, sleep=0.01)
    out = CuttingSet(5).run(master, [a, b], _deadline())
    assert 0.06 <= out.master_seconds < 60.0  # a wide top: CI machines are loaded
    assert 0.06 <= out.adversary_seconds < 60.0


def test_a_first_failed_master_reports_no_checks_and_its_answer():
    master = Scripted([Status.INFEASIBLE])
    out = CuttingSet(5).run(master, [Threshold(master, 2.0), Threshold(master, 1.0)],
                            _deadline())
    assert out.status is RobustStatus.INFEASIBLE and out.checks == [None, None]
    assert out.last.status is Status.INFEASIBLE and out.candidate is None
    master = Scripted([1.0, 3.0])
    out = CuttingSet(5).run(master, [Threshold(master, 2.0)], _deadline())
    assert out.last is out.candidate and float(out.last.point.iloc[0, 0]) == 3.0


class Retrying(Scripted):
    """A scripted master whose ``"retry"`` steps answer without a point, to be solved
    again (MILP-R halving its margin)."""

    def solve(self, deadline: Deadline) -> MasterAnswer:
        if self.script[0] == "retry":
            self.script.pop(0)
            return MasterAnswer(Status.INFEASIBLE, retry=True, message="again")
        return super().solve(deadline)


def test_a_master_asking_for_a_retry_is_solved_again():
    master = Retrying(["retry", "retry", 3.0])
    a = Threshold(master, 2.0)
    out = CuttingSet(5).run(master, [a], _deadline())
    assert out.status is RobustStatus.CERTIFIED and out.iterations == 3 and a.seen == [3.0]
    master = Retrying(["retry", "retry"])
    out = CuttingSet(2).run(master, [Threshold(master, 2.0)], _deadline())
    assert out.status is RobustStatus.ITERATION_LIMIT and out.candidate is None
    assert out.last.retry and out.iterations == 2


def test_a_kept_proof_says_nothing_more():
    """A proof that keeps the candidate optimal: no message, whatever the solve said."""

    class Chatty(Pieces):
        def prove(self, candidate, deadline):
            answer = super().prove(candidate, deadline)
            answer.message = "the solve's words"
            return answer

    master = Chatty([2.5], ["keep"])
    out = CuttingSet(10).run(master, [Threshold(master, 2.0)], _deadline())
    assert out.status is RobustStatus.CERTIFIED and out.message == ""
    assert out.last is out.candidate and out.candidate.bound == 0.5
