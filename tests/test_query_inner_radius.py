"""The inside-out stage of a per-query tree model (:mod:`cfopt.query.inner_radius`) with a
scripted backend: the inner radius and its build, half the time, which outcomes are the
answer, the floor each proves (both sides of the radius's tolerance), a better verified
point replacing the incumbent; and the bounds and times of :func:`with_floor` and
:func:`after` by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from cfopt.query import inner_radius as IR
from cfopt.query.inner_radius import INNER, InnerStage, after, inner_stage, with_floor
from cfopt.results.status import Status
from cfopt.solvers import SolveOutcome, SolverSettings

M = SimpleNamespace(declared_margin=1e-3)


def outcome(status=Status.OPTIMAL, objective=1.0, bound=1.0, solver_time=0.5, wall=0.25):
    return SolveOutcome(status, objective, bound, solver_time, wall, "t")


class Backend:
    def __init__(self, result: SolveOutcome) -> None:
        self.result, self.solves, self.resets = result, [], 0

    def reset(self) -> None:
        self.resets += 1

    def solve(self, m, settings):
        assert m is M and self.resets == 1  # reloaded after the build
        self.solves.append(settings)
        return self.result


def stage(monkeypatch, result, radius=2.0, limit=8.0, point=None, value=None):
    builds = []
    monkeypatch.setattr(IR, "build_query_region", lambda m, r, deadline: (
        m is M or pytest.fail("model")) and builds.append((r, deadline)) or 42)

    def verified(m, margin):
        assert m is M and margin == 1e-3
        return point

    monkeypatch.setattr(IR, "verified_solution", verified)
    monkeypatch.setattr(IR, "objective_value", lambda m, row: (m is M and row == "row")
                        and value)
    backend = Backend(result)
    incumbent = ["old"]
    details: dict = {}
    got = inner_stage(M, backend, SolverSettings(time_limit=limit), radius, incumbent,
                      details, 9.0)
    assert builds == [(INNER * radius, 9.0)] and details == {"inner_leaves": 42}
    return got, backend, incumbent


def test_a_proven_optimum_within_the_inner_radius_is_the_answer(monkeypatch):
    assert INNER == 0.5
    got, backend, incumbent = stage(monkeypatch, outcome(objective=1.0))
    assert got == InnerStage(outcome(objective=1.0), True, None, 2.0)
    assert backend.solves == [SolverSettings(time_limit=4.0)] and incumbent == ["old"]
    edge = 1.0 * (1 + 1e-6) + 1e-9
    got, *_ = stage(monkeypatch, outcome(objective=edge))
    assert got.final


def test_beyond_or_infeasible_the_inner_radius_is_the_floor(monkeypatch):
    beyond = 1.0 * (1 + 1e-6) + 2e-9
    got, *_ = stage(monkeypatch, outcome(objective=beyond, bound=0.25), value=5.0,
                    point=SimpleNamespace(verified=False, row="row"))
    assert not got.final and got.floor == 1.0 and got.radius == 2.0
    got, *_ = stage(monkeypatch, outcome(Status.INFEASIBLE, None, None))
    assert got == InnerStage(outcome(Status.INFEASIBLE, None, None), False, 1.0, 2.0)


def test_otherwise_its_bound_up_to_the_inner_radius(monkeypatch):
    unverified = SimpleNamespace(verified=False, row="row")
    got, *_ = stage(monkeypatch, outcome(Status.FEASIBLE, 1.5, 0.25), point=unverified)
    assert got.floor == 0.25 and not got.final
    got, *_ = stage(monkeypatch, outcome(Status.FEASIBLE, 1.5, 1.5), point=unverified)
    assert got.floor == 1.0
    got, *_ = stage(monkeypatch, outcome(Status.FEASIBLE, 1.5, None), point=unverified)
    assert got.floor is None
    got, *_ = stage(monkeypatch, outcome(Status.NO_SOLUTION, None, 0.5))
    assert got.floor == 0.5 and got.radius == 2.0


def test_a_cheaper_verified_point_becomes_the_incumbent(monkeypatch):
    point = SimpleNamespace(verified=True, row="row")
    got, _, incumbent = stage(monkeypatch, outcome(Status.FEASIBLE, 1.5, 0.5), point=point,
                              value=1.5)
    assert incumbent == [point] and got.radius == 1.5
    got, _, incumbent = stage(monkeypatch, outcome(Status.FEASIBLE, 2.0, 0.5), point=point,
                              value=2.0)
    assert incumbent == ["old"] and got.radius == 2.0
    unverified = SimpleNamespace(verified=False, row="row")
    got, _, incumbent = stage(monkeypatch, outcome(Status.FEASIBLE, 1.5, 0.5),
                              point=unverified, value=1.5)
    assert incumbent == ["old"] and got.radius == 2.0


def test_without_a_time_limit_the_budget_is_whole(monkeypatch):
    got, backend, _ = stage(monkeypatch, outcome(objective=1.0), limit=None)
    assert backend.solves == [SolverSettings(time_limit=None)]


def test_with_floor_the_larger_valid_bound():
    assert with_floor(outcome(bound=0.5), None, 2.0) == outcome(bound=0.5)
    assert with_floor(outcome(bound=0.5), 0.75, 2.0).bound == 0.75
    assert with_floor(outcome(bound=1.0), 0.75, 2.0).bound == 1.0
    assert with_floor(outcome(bound=3.0), 0.75, 2.0).bound == 2.0
    assert with_floor(outcome(bound=None), 0.75, 2.0).bound == 0.75
    assert with_floor(outcome(bound=3.0), 0.75, math.inf).bound == 3.0
    for status in (Status.INFEASIBLE, Status.ERROR):
        assert with_floor(outcome(status, None, 0.25), 0.75, 2.0).bound == 0.25
    assert with_floor(outcome(Status.NO_SOLUTION, None, 0.25), 0.75, 2.0).bound == 0.75


def test_after_adds_the_times_of_an_earlier_solve():
    later = outcome(solver_time=0.5, wall=0.25)
    assert after(None, later) is later
    got = after(outcome(solver_time=2.0, wall=1.0), later)
    assert (got.wall_time, got.solver_time, got.objective) == (1.25, 2.5, 1.0)
    got = after(outcome(solver_time=None, wall=1.0), later)
    assert (got.wall_time, got.solver_time) == (1.25, 0.5)
    got = after(outcome(solver_time=None, wall=1.0), outcome(solver_time=None, wall=0.25))
    assert got.solver_time is None
    got = after(outcome(solver_time=2.0, wall=1.0), outcome(solver_time=None))
    assert got.solver_time == 2.0
