"""The cutoff of a cutting-set master (:mod:`cfopt.query.incumbents`) with scripted
pieces and scores: the restriction of each candidate's pieces solved in turn (only the
copies seeing the counterfactual's own inputs fixed, always unfixed), no time, no point;
the cutoff's slack; and the walk toward the target by hand on segments whose scores are
a known function of the point."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cfopt.query import incumbents as IC
from cfopt.query.incumbents import (
    CUTOFF_SLACK,
    WALK_STEPS,
    cutoff_above,
    pattern_cutoff,
    piece_point,
    toward_target,
)
from cfopt.results.status import Status
from cfopt.solvers import SolveOutcome, SolverSettings

M = SimpleNamespace(adapter=SimpleNamespace(decision="logit"), target=(1,))
SETTINGS = SolverSettings(time_limit=5.0)


class Var:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def unfix(self):
        self.log.append(("unfix", self.name))


class Predictor:
    def __init__(self, log, name, net=None):
        self.log, self.name = log, name
        self.adapter = SimpleNamespace(structure=net)

    def fix_pattern(self, inputs):
        self.log.append(("fix", self.name, float(inputs[0])))
        return [Var(self.log, f"{self.name}{float(inputs[0])}")]


class Backend:
    def __init__(self, log, outcomes):
        self.log, self.outcomes = log, list(outcomes)

    def solve(self, m, settings):
        assert m is M and settings is SETTINGS
        self.log.append(("solve",))
        return self.outcomes.pop(0)


def outcome(status, objective):
    return SolveOutcome(status, objective, None, None, 0.0, "t")


def test_each_candidates_pieces_until_one_has_a_point():
    log: list = []
    copies = [(Predictor(log, "p"), None), (Predictor(log, "k"), "base"),
              (Predictor(log, "q"), None)]
    found = outcome(Status.FEASIBLE, 2.0)
    backend = Backend(log, [outcome(Status.INFEASIBLE, None),
                            outcome(Status.NO_SOLUTION, 3.0), found])
    got = piece_point(M, backend, lambda: SETTINGS, copies,
                      [np.array([1.0]), np.array([2.0]), np.array([3.0]), np.array([4.0])])
    assert got is found
    assert log == [("fix", "p", 1.0), ("fix", "q", 1.0), ("solve",), ("unfix", "p1.0"),
                   ("unfix", "q1.0"),
                   ("fix", "p", 2.0), ("fix", "q", 2.0), ("solve",), ("unfix", "p2.0"),
                   ("unfix", "q2.0"),
                   ("fix", "p", 3.0), ("fix", "q", 3.0), ("solve",), ("unfix", "p3.0"),
                   ("unfix", "q3.0")]


def test_no_point_no_time_and_a_point_without_objective():
    log: list = []
    copies = [(Predictor(log, "p"), None)]
    backend = Backend(log, [outcome(Status.FEASIBLE, None), outcome(Status.INFEASIBLE, None)])
    assert piece_point(M, backend, lambda: SETTINGS, copies,
                       [np.array([1.0]), np.array([2.0])]) is None
    assert piece_point(M, backend, lambda: SETTINGS, copies, []) is None
    log.clear()
    assert piece_point(M, Backend(log, []), lambda: None, copies, [np.array([1.0])]) is None
    assert log == [("fix", "p", 1.0), ("unfix", "p1.0")]  # unfixed though no solve


def test_pattern_cutoff_is_above_the_points_objective():
    assert CUTOFF_SLACK == 1e-6
    assert cutoff_above(2.0) == pytest.approx(2.0 * (1 + 1e-6) + 1e-9, rel=1e-15)
    assert cutoff_above(0.0) == 1e-9
    log: list = []
    copies = [(Predictor(log, "p"), None)]
    got = pattern_cutoff(M, Backend(log, [outcome(Status.OPTIMAL, 2.0)]), lambda: SETTINGS,
                         copies, [np.array([1.0])])
    assert got == cutoff_above(2.0)
    assert pattern_cutoff(M, Backend(log, [outcome(Status.INFEASIBLE, None)]),
                          lambda: SETTINGS, copies, [np.array([1.0])]) is None


def test_toward_target_the_nearest_first_step_reaching_the_margin(monkeypatch):
    """Scores: net a gives x0 - 0.5, net b gives x1 - 0.25 (the target's least of them)."""
    def scores(net, points, decision, targets):
        assert decision == "logit" and targets == "T"
        return points[:, net] - (0.5 if net == 0 else 0.25)

    monkeypatch.setattr(IC, "target_scores", scores)
    monkeypatch.setattr(IC, "score_targets", lambda adapter, target: (
        adapter is M.adapter and target == (1,)) and "T")
    copies = [(Predictor([], "a", 0), None), (Predictor([], "k", 9), "base"),
              (Predictor([], "b", 1), None)]
    start = np.array([0.0, 0.0])
    ends = np.array([[1.0, 1.0], [2.0, 0.5], [0.0, 1.0]])
    # segment 1: both >= 0.5 at t = 0.5 (distance 1.0); segment 2: x0 = 2t >= 0.5 and
    # x1 = 0.5 t >= 0.25 at t = 0.5 (distance 1.25); segment 3 never (x0 = 0)
    got = toward_target(M, copies, start, ends, 0.0)
    assert got.tolist() == pytest.approx([0.5, 0.5])
    assert WALK_STEPS == 40
    got = toward_target(M, copies, start, ends, 0.25)  # t = 0.75 and t = 1.0 (distance 2.5)
    assert got.tolist() == pytest.approx([0.75, 0.75])
    assert toward_target(M, copies, start, ends[2:], 0.0) is None
    assert toward_target(M, copies, start, np.array([2.0, 0.5]), 0.0).tolist() == \
        pytest.approx([1.0, 0.25])
    # the first step of a segment is one step, not the start
    got = toward_target(M, copies, start, np.array([[4.0, 4.0]]), -1.0)
    assert got.tolist() == pytest.approx([0.1, 0.1])


def test_toward_target_prefers_the_nearer_and_the_first_of_a_tie(monkeypatch):
    monkeypatch.setattr(IC, "target_scores", lambda net, points, d, t: points.sum(axis=1)
                        - 0.5)
    monkeypatch.setattr(IC, "score_targets", lambda adapter, target: "T")
    copies = [(Predictor([], "a", 0), None)]
    ends = np.array([[2.0, -1.0], [1.0, 0.0], [2.0, -0.5]])  # L1 1.5, 0.5, 0.875
    got = toward_target(M, copies, np.zeros(2), ends, 0.0)
    assert got.tolist() == pytest.approx([0.5, 0.0])
    ends = np.array([[1.0, 0.0], [0.0, 1.0]])  # both at L1 0.5: the first kept
    assert toward_target(M, copies, np.zeros(2), ends, 0.0).tolist() == \
        pytest.approx([0.5, 0.0])


def test_toward_target_from_a_start_off_the_origin(monkeypatch):
    monkeypatch.setattr(IC, "target_scores", lambda net, points, d, t: points[:, 0] - 1.5)
    monkeypatch.setattr(IC, "score_targets", lambda adapter, target: "T")
    copies = [(Predictor([], "a", 0), None)]
    start = np.array([1.0, -1.0])
    ends = np.array([[2.0, 2.0], [2.0, -1.0]])  # both reach x0 = 1.5 at t = 0.5
    got = toward_target(M, copies, start, ends, 0.0)  # L1 from the start: 2.0, 0.5
    assert got.tolist() == pytest.approx([1.5, -1.0])
