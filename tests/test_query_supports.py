"""The split by support (:mod:`cfopt.query.supports`): the maximal affordable sets by hand
from scripted moves (each objective term, the radius's tolerance on both sides, the caps
on the changes and on the number of sets, the early stop of a family too large), and the
split solve's verdict from a scripted backend (the best point reloaded, the bound as the
least proven one, infeasible sets skipped, a budget running out, errors)."""

from __future__ import annotations

import math
from contextlib import contextmanager
from types import SimpleNamespace

import pyomo.environ as pyo
import pytest

from cfopt.query import supports as S
from cfopt.query.supports import MAX_SUPPORTS, solve_split, supports
from cfopt.results.status import Status
from cfopt.solvers import SolveOutcome, SolverSettings


def query(monkeypatch, least, most, terms, scale=1.0, radius=4.0):
    """``supports`` of a query whose moves are ``least`` (feature -> least move)."""
    seen = []

    def radius_moves(m_, r):
        assert m_ is m
        seen.append(r)
        return SimpleNamespace(most=most, moves=set(least), least=least)

    m = SimpleNamespace(objective_terms=terms,
                        raw=SimpleNamespace(distance_radius=lambda r: r * scale))
    monkeypatch.setattr(S, "radius_moves", radius_moves)
    got = supports(m, radius)
    assert seen == [radius]
    return got


def test_l1_and_l0_sets_by_hand(monkeypatch):
    least = {"a": 1.0, "b": 2.0, "c": 0.0, "d": 5.0}
    # kappa: a 2, b 3, c 1, d 6; ac 3, bc 4 (= r), ab 5
    assert query(monkeypatch, least, 2, {"l1": 1.0, "l0": 1.0}) == [("a", "c"), ("b", "c")]
    # a third feature would fit the radius but not the cap of two changes
    assert query(monkeypatch, least, 2, {"l1": 1.0, "l0": 1.0}, radius=10.0) == [
        ("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")]
    # the radius in the raw objective's units
    assert query(monkeypatch, least, 2, {"l1": 1.0, "l0": 1.0}, scale=0.5,
                 radius=8.0) == [("a", "c"), ("b", "c")]
    assert query(monkeypatch, least, 2, {"l1": 1.0, "l0": 1.0}, scale=0.5,
                 radius=7.9) == [("b",), ("a", "c")]


def test_the_radius_tolerance(monkeypatch):
    terms = {"l1": 1.0, "l0": 1.0}
    inside = {"a": 1.0, "b": 2.0 + 3e-9, "c": 0.0}
    assert query(monkeypatch, inside, 2, terms) == [("a", "c"), ("b", "c")]
    outside = {"a": 1.0, "b": 2.0 + 5e-9, "c": 0.0}
    assert query(monkeypatch, outside, 2, terms) == [("b",), ("a", "c")]
    # the absolute slack at a zero radius
    assert query(monkeypatch, {"a": 0.0, "b": 0.0, "c": 0.0}, 2, {"l0": 1e-13},
                 radius=0.0) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert query(monkeypatch, {"a": 0.0, "b": 0.0}, 2, {"l0": 2e-12},
                 radius=0.0) == [()]
    # a cost of exactly the limit fits
    assert query(monkeypatch, {"a": 0.0, "b": 0.0}, 2, {"l0": 1e-12},
                 radius=0.0) == [("a",), ("b",)]


def test_linf_term_is_the_largest_move(monkeypatch):
    least = {"a": 1.0, "b": 2.0}
    # kappa: a 1+2, b 1+4, ab 2+4 (the largest move, not the sum or the least)
    assert query(monkeypatch, least, 5, {"l0": 1.0, "linf": 2.0}, radius=5.0) == [("a",),
                                                                                  ("b",)]
    assert query(monkeypatch, least, 5, {"l0": 1.0, "linf": 2.0}, radius=6.0) is None


def test_features_sorted_by_name(monkeypatch):
    least = {"z": 0.0, "m": 0.0, "b": 0.0}
    assert query(monkeypatch, least, 2, {"l0": 1.0}, radius=5.0) == [
        ("b", "m"), ("b", "z"), ("m", "z")]
    assert query(monkeypatch, least, 1, {"l0": 1.0}, radius=5.0) == [("b",), ("m",), ("z",)]


def test_names_sorted_as_text(monkeypatch):
    got = query(monkeypatch, {10: 0.0, 9: 0.0, 8: 0.0}, 2, {"l0": 1.0}, radius=5.0)
    assert got == [(10, 8), (10, 9), (8, 9)]


def test_whole_when_uncapped_or_one_set_holds_all(monkeypatch):
    least = {"a": 0.0, "b": 0.0}
    assert query(monkeypatch, least, math.inf, {"l0": 1.0}) is None
    assert query(monkeypatch, least, 2, {"l0": 1.0}) is None
    assert query(monkeypatch, least, 1, {"l0": 1.0}) == [("a",), ("b",)]
    assert query(monkeypatch, {}, 3, {"l0": 1.0}) is None  # the empty set holds all


def test_at_most_max_supports_sets(monkeypatch):
    assert MAX_SUPPORTS == 64
    least = {f"f{i:02d}": 0.0 for i in range(64)}
    got = query(monkeypatch, least, 1, {"l0": 1.0})
    assert got == [(f,) for f in sorted(least)]
    least["f64"] = 0.0
    assert query(monkeypatch, least, 1, {"l0": 1.0}) is None


def test_a_family_too_large_stops_early(monkeypatch):
    # ten free features, nine changes: 1023 affordable sets, the ten of nine returned
    least = {f"f{i}": 0.0 for i in range(10)}
    got = query(monkeypatch, least, 9, {})
    assert len(got) == 10 and all(len(s) == 9 for s in got)
    # eleven, ten changes: 2047 affordable sets (more than 16 x MAX_SUPPORTS)
    least["f10"] = 0.0
    assert query(monkeypatch, least, 10, {}) is None


def test_the_family_limit_exactly(monkeypatch):
    # ten cheap features and z, which fits alone only: 1023 sets of the ten (empty
    # included) and {z}: 1024 = 16 x MAX_SUPPORTS sets, not too many
    least = {f"f{i}": 1e-3 for i in range(10)} | {"z": 1.0}
    got = query(monkeypatch, least, 9, {"l1": 1.0}, radius=1.0)
    assert len(got) == 11 and got[0] == ("z",) and all(len(s) == 9 for s in got[1:])
    least["z2"] = 1.0  # 1025
    assert query(monkeypatch, least, 9, {"l1": 1.0}, radius=1.0) is None


# ---- the split solve


class Backend:
    def __init__(self, m, outcomes):
        self.m, self.outcomes, self.calls = m, list(outcomes), []

    def solve(self, m, settings):
        assert m is self.m
        self.calls.append((settings, list(self.m.log)))
        outcome, values = self.outcomes.pop(0)
        if values is not None:
            self.m.x.set_value(values[0], skip_validation=True)
            self.m.b.y.set_value(values[1], skip_validation=True)
        return outcome


def model(domain=pyo.Reals):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.b = pyo.Block()
    m.b.y = pyo.Var(domain=domain)
    m.space = "space"
    m.log = []
    return m


def out(status, objective=None, bound=None, solver_time=1.0, wall=2.0, termination="t"):
    return SolveOutcome(status, objective, bound, solver_time, wall, termination)


def split(monkeypatch, outcomes, sets=(("a",), ("b",), ("c",)), budgets=None,
          domain=pyo.Reals):
    m = model(domain)
    m.x.set_value(0.5)

    @contextmanager
    def hold(model_, space, support):
        assert model_ is m and space == "space"
        m.log.append(("hold", support))
        yield
        m.log.append(("free", support))

    @contextmanager
    def restrict(support):
        m.log.append(("restrict", support))
        yield
        m.log.append(("unrestrict", support))

    monkeypatch.setattr(S, "hold_at_factual", hold)
    backend = Backend(m, outcomes)
    settings = [SolverSettings(time_limit=float(k + 1)) for k in range(len(sets))]
    budgets = list(settings if budgets is None else budgets)
    got = solve_split(m, backend, lambda: budgets.pop(0), list(sets), restrict)
    return got, m, backend


def test_the_best_set_and_the_least_bound(monkeypatch):
    got, m, backend = split(monkeypatch, [
        (out(Status.OPTIMAL, 3.0, 2.5, termination="first"), (0.3, 3.0)),
        (out(Status.OPTIMAL, 2.0, 2.0, solver_time=None, termination="second"), (0.2, 2.0)),
        (out(Status.OPTIMAL, 4.0, 3.5, termination="third"), (0.4, 4.0))])
    assert (got.status, got.objective, got.bound, got.termination) == (
        Status.OPTIMAL, 2.0, 2.0, "second")
    assert (got.solver_time, got.wall_time) == (2.0, 6.0)
    assert got.message == "split by support: 3 sets of features"
    assert (m.x.value, m.b.y.value) == (0.2, 2.0)  # the best point reloaded
    assert [c[0].time_limit for c in backend.calls] == [1.0, 2.0, 3.0]
    assert backend.calls[1][1][-2:] == [("restrict", ("b",)), ("hold", ("b",))]
    assert m.log[-2:] == [("free", ("c",)), ("unrestrict", ("c",))]


def test_ties_keep_the_first_and_a_lower_bound_elsewhere(monkeypatch):
    got, m, _ = split(monkeypatch, [
        (out(Status.OPTIMAL, 2.0, 2.0, termination="first"), (0.3, 3.0)),
        (out(Status.OPTIMAL, 2.0, 1.5), (0.2, 2.0)),
        (out(Status.INFEASIBLE, bound=0.5), None)])
    assert (got.status, got.objective, got.bound, got.termination) == (
        Status.OPTIMAL, 2.0, 1.5, "first")
    assert (m.x.value, m.b.y.value) == (0.3, 3.0)
    # a value outside the variable's bounds is reloaded as found
    got, m, _ = split(monkeypatch, [(out(Status.OPTIMAL, 2.0, 2.0), (1.5, 3.0))], sets=[("a",)])
    assert m.x.value == 1.5


def test_a_value_off_the_domain_reloaded_without_a_warning(monkeypatch, caplog):
    # a solver's value within its integrality tolerance
    got, m, _ = split(monkeypatch, [(out(Status.OPTIMAL, 2.0, 2.0), (0.0, 1.0 + 1e-7)),
                                    (out(Status.OPTIMAL, 3.0, 3.0), (0.0, 0.0))],
                      sets=[("a",), ("b",)], domain=pyo.Integers)
    assert m.b.y.value == 1.0 + 1e-7 and caplog.records == []


def test_all_infeasible(monkeypatch):
    got, m, backend = split(monkeypatch, [(out(Status.INFEASIBLE, bound=9.0), None)] * 3)
    assert (got.status, got.objective, got.bound, got.termination) == (
        Status.INFEASIBLE, None, None, "infeasible")
    assert (got.solver_time, got.wall_time) == (3.0, 6.0) and len(backend.calls) == 3
    assert m.x.value == 0.5
    got, _, _ = split(monkeypatch, [], sets=[])
    assert got.status is Status.INFEASIBLE and got.message == "split by support: 0 sets of features"


def test_an_optimum_without_a_point_is_no_counterfactual(monkeypatch):
    got, _, _ = split(monkeypatch, [(out(Status.OPTIMAL, None, 2.0), None)], sets=[("a",)])
    assert (got.status, got.bound) == (Status.INFEASIBLE, None)


def test_a_set_not_solved_to_the_end(monkeypatch):
    got, m, _ = split(monkeypatch, [
        (out(Status.OPTIMAL, 3.0, 3.0), (0.3, 3.0)),
        (out(Status.FEASIBLE, 2.5, 1.0, termination="limit"), (0.25, 2.5)),
        (out(Status.INFEASIBLE), None)])
    assert (got.status, got.objective, got.bound, got.termination) == (
        Status.FEASIBLE, 2.5, 1.0, "limit")
    got, _, _ = split(monkeypatch, [
        (out(Status.OPTIMAL, 3.0, 3.0), (0.3, 3.0)),
        (out(Status.NO_SOLUTION, None, None), None),
        (out(Status.OPTIMAL, 4.0, 4.0), (0.4, 4.0))])
    assert (got.status, got.objective, got.bound) == (Status.FEASIBLE, 3.0, None)
    got, _, _ = split(monkeypatch, [(out(Status.NO_SOLUTION, None, 1.0), None)], sets=[("a",)])
    assert (got.status, got.objective, got.bound, got.termination) == (
        Status.NO_SOLUTION, None, 1.0, "maxTimeLimit")


def test_errors(monkeypatch):
    got, _, _ = split(monkeypatch, [(out(Status.ERROR), None), (out(Status.NO_SOLUTION), None),
                                    (out(Status.INFEASIBLE), None)])
    assert (got.status, got.objective, got.bound, got.termination) == (
        Status.ERROR, None, None, "error")
    got, _, _ = split(monkeypatch, [(out(Status.NO_SOLUTION), None), (out(Status.ERROR), None),
                                    (out(Status.INFEASIBLE), None)])
    assert got.status is Status.ERROR
    got, _, _ = split(monkeypatch, [(out(Status.ERROR), None),
                                    (out(Status.OPTIMAL, 1.0, 1.0), (0.1, 1.0)),
                                    (out(Status.INFEASIBLE), None)])
    assert (got.status, got.objective, got.bound) == (Status.FEASIBLE, 1.0, None)


def test_the_budget_runs_out(monkeypatch):
    got, _, backend = split(monkeypatch, [(out(Status.OPTIMAL, 3.0, 3.0), (0.3, 3.0))],
                            budgets=[SolverSettings(time_limit=5.0), None, None])
    assert (got.status, got.objective, got.bound) == (Status.FEASIBLE, 3.0, None)
    assert len(backend.calls) == 1 and (got.solver_time, got.wall_time) == (1.0, 2.0)
    got, _, backend = split(monkeypatch, [(out(Status.INFEASIBLE), None)],
                            budgets=[SolverSettings(time_limit=5.0), None, None])
    assert (got.status, got.objective, got.bound, got.termination) == (
        Status.NO_SOLUTION, None, None, "maxTimeLimit")
    got, _, backend = split(monkeypatch, [], budgets=[None])
    assert got.status is Status.NO_SOLUTION and backend.calls == []


@pytest.mark.parametrize("status", [Status.OPTIMAL, Status.FEASIBLE])
def test_a_point_without_objective_is_not_the_best(monkeypatch, status):
    got, m, _ = split(monkeypatch, [(out(status, None, 1.0), (0.9, 9.0)),
                                    (out(Status.OPTIMAL, 5.0, 5.0), (0.5, 5.0))],
                      sets=[("a",), ("b",)])
    assert got.objective == 5.0 and (m.x.value, m.b.y.value) == (0.5, 5.0)
