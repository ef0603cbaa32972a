"""The ladder of radii (:mod:`cfopt.query.ladder`) step by step, with scripted stand-ins
for the MILP, the backend, the restriction and the solves: the first floor, the gate,
the rungs by hand, what each rung's outcome leads to (the next rung, the answer, the
whole problem), the ascent from a guess and the bounds each answer carries."""

from __future__ import annotations

import math
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from cfopt.formulations.tree_regions import RegionTooLarge
from cfopt.query import ladder
from cfopt.results.status import Status
from cfopt.solvers import SolveOutcome


def outcome(status=Status.OPTIMAL, objective=None, bound=None, wall=1.0, solver=0.5,
            termination="optimal", message="") -> SolveOutcome:
    return SolveOutcome(status, objective, bound, solver, wall, termination, message)


# ------------------------------------------------------------------ the outcomes
def test_a_region_too_large_to_load_says_its_size_and_time():
    out = ladder.too_large_to_load(120, 3.25)
    assert (out.status, out.objective, out.bound, out.solver_time, out.wall_time) == \
        (Status.NO_SOLUTION, None, None, None, 0.0)
    assert out.termination == "regionTooLarge"
    assert out.message == ("the trees' region of 120 leaves could not be loaded into the "
                           "solver and solved in the 3.2 s left")


@pytest.mark.parametrize("radius, where", [(math.inf, "the whole actionable region"),
                                           (1.5, "radius 1.5"), (2 / 3, "radius 0.666667")])
def test_a_region_too_large_to_build_says_where(radius, where):
    out = ladder.too_large(radius)
    assert (out.status, out.objective, out.bound, out.solver_time, out.wall_time) == \
        (Status.NO_SOLUTION, None, None, None, 0.0)
    assert out.termination == "regionTooLarge"
    assert out.message == (f"the trees' leaves within {where} of the factual could not be "
                           f"built in the time left")


def test_no_time_is_no_solution():
    assert ladder.NO_TIME == SolveOutcome(Status.NO_SOLUTION, None, None, None, 0.0,
                                          "maxTimeLimit")


@pytest.mark.parametrize("status, bound, floor, radius, expected", [
    (Status.OPTIMAL, 2.0, 1.0, 1.5, 1.5),     # the bound counts up to the radius
    (Status.OPTIMAL, 1.25, 1.0, 1.5, 1.25),
    (Status.OPTIMAL, 0.5, 1.0, 1.5, 1.0),     # below the floor: the floor
    (Status.FEASIBLE, None, 1.0, 1.5, 1.0),
    (Status.FEASIBLE, None, -math.inf, 1.5, None),
    (Status.OPTIMAL, 2.0, -math.inf, math.inf, 2.0),
    (Status.INFEASIBLE, None, 1.0, 1.5, 1.5),  # none within the radius
    (Status.INFEASIBLE, None, 2.0, 1.5, 2.0),
    (Status.ERROR, None, 1.0, 1.5, 1.0)])
def test_the_bound_of_a_restricted_solve(status, bound, floor, radius, expected):
    out = ladder._known(outcome(status, 3.0, bound), floor, radius)
    assert out.bound == expected and out.status is status and out.objective == 3.0


@pytest.mark.parametrize("status", [Status.INFEASIBLE, Status.ERROR])
def test_the_whole_problem_infeasible_or_failed_keeps_its_outcome(status):
    given = outcome(status, None, 7.0)
    assert ladder._known(given, 1.0, math.inf) is given


# ------------------------------------------------------------------ the first floor
def query(l0=0.5, target=(1,), is_target=False, extra=0.0, margin=0.01, cap=math.inf):
    terms = {"l1": 1.0} if l0 is None else {"l1": 1.0, "l0": l0}
    return SimpleNamespace(objective_terms=terms, target=target,
                           is_target=lambda c: c == 7 and is_target, factual_class=7,
                           margin=margin, raw=SimpleNamespace(extra_floor=extra),
                           change_cap=cap)


@pytest.mark.parametrize("m, score, floor", [
    (query(), -1.0, 0.5),
    (query(extra=0.25), -1.0, 0.75),
    (query(l0=0.0), -1.0, None),
    (query(l0=None), -1.0, None),
    (query(l0=0.0, extra=0.25), -1.0, None),
    (query(margin=1e-6), 0.0, None),             # exactly on the band's edge
    (query(target=()), -1.0, None),
    (query(is_target=True), -1.0, None),
    (query(), None, None),
    (query(margin=0.01), 0.01, None),
    (query(margin=0.01), 0.01 - 0.5e-6, None),   # within the band 1e-6 (1 + |s|)
    (query(margin=0.01), 0.01 - 2e-6, 0.5),
    (query(margin=10.0), 10.0 - 5e-6, None),     # the band grows with |s|
    (query(margin=10.0), 10.0 - 12e-6, 0.5),
    (query(margin=0.0), -0.5e-6, None),
    (query(margin=0.0), -2e-6, 0.5),
    (query(extra=-0.5), -1.0, None),
    (query(extra=-0.75), -1.0, None)])
def test_the_first_floor(monkeypatch, m, score, floor):
    monkeypatch.setattr(ladder, "factual_score", lambda q: score if q is m else -1.0)
    assert ladder.first_floor(m) == floor


# ------------------------------------------------------------------ the gate
class Restriction:
    def __init__(self, by_radius=True, applies=True) -> None:
        self.by_radius, self._applies, self.entered = by_radius, applies, []

    def applies(self, m):
        self.entered.append(("applies", m))
        return self._applies

    def within_radius(self, m, radius, details, support, copies):
        @contextmanager
        def inside():
            self.entered.append((m, radius, details, support, copies))
            yield
            self.entered.append("left")
        return inside()


@pytest.fixture
def gate(monkeypatch):
    state = SimpleNamespace(restriction=Restriction(), unstable=ladder.HARD_NEURONS + 1,
                            asked=[], of=[], own=[])

    def unstable(networks, first):
        state.asked.append((list(networks), first))
        return state.unstable

    monkeypatch.setattr(ladder, "restriction_of",
                        lambda m: state.of.append(m) or state.restriction)
    monkeypatch.setattr(ladder, "network_copies", lambda m: state.own.append(m) or ["own"])
    monkeypatch.setattr(ladder, "unstable_neurons", unstable)
    return state


def test_the_ladder_climbs_a_capped_hard_network_from_a_positive_floor(gate):
    m = query()
    assert ladder.can_climb(m, 0.5, ["copy"]) is True
    assert gate.asked == [(["own", "copy"], 1)]
    assert gate.of == [m] and gate.own == [m] and gate.restriction.entered == [("applies", m)]
    assert ladder.can_climb(query(l0=0.0, cap=2.0), 0.5) is True


@pytest.mark.parametrize("floor", [None, 0.0, -1.0, math.inf, math.nan])
def test_no_climb_without_a_positive_finite_floor(gate, floor):
    assert ladder.can_climb(query(), floor) is False


def test_no_climb_without_a_cap_a_restriction_or_hard_neurons(gate):
    assert ladder.can_climb(query(l0=0.0), 0.5) is False
    assert ladder.can_climb(query(l0=None), 0.5) is False
    gate.unstable = ladder.HARD_NEURONS
    assert ladder.can_climb(query(), 0.5) is False
    gate.unstable = ladder.HARD_NEURONS + 1
    gate.restriction = Restriction(by_radius=False)
    assert ladder.can_climb(query(), 0.5) is False
    gate.restriction = Restriction(applies=False)
    assert ladder.can_climb(query(), 0.5) is False
    gate.restriction = None
    assert ladder.can_climb(query(), 0.5) is False
    assert ladder.HARD_NEURONS == 8


def test_within_a_radius_is_the_restrictions(gate):
    m, details = query(), {}
    with ladder.within_radius(m, 1.5, details, {"a"}, ["copy"]):
        assert gate.restriction.entered == [(m, 1.5, details, {"a"}, ["copy"])]
    assert gate.restriction.entered[-1] == "left"
    with ladder.within_radius(m, 2.0, details):
        pass
    assert gate.restriction.entered[2] == (m, 2.0, details, None, ())
    assert gate.of == [m, m]
    gate.restriction = None
    with ladder.within_radius(m, 2.0, details):  # no restriction: nothing to enter
        pass


# ------------------------------------------------------------------ one rung
class Backend:
    def __init__(self, *outcomes) -> None:
        self.outcomes, self.calls, self.resets = list(outcomes), [], 0

    def solve(self, m, settings, start=None):
        self.calls.append((m, settings, start))
        return self.outcomes.pop(0)

    def reset(self):
        self.resets += 1


def test_a_rung_split_by_its_supports(gate, monkeypatch):
    split = []

    def solve_split(m, backend, budget, sets, restrict):
        with restrict({"b"}):
            split.append((m, backend, budget, sets, list(gate.restriction.entered)))
        return "split"

    asked = []
    monkeypatch.setattr(ladder, "supports",
                        lambda m, radius: asked.append((m, radius)) or [{"a"}, {"b"}])
    monkeypatch.setattr(ladder, "solve_split", solve_split)
    m, backend, details = query(), Backend(), {"split": 1}
    assert ladder.solve_within(m, backend, "budget", 1.5, details, ["c"]) == "split"
    assert split == [(m, backend, "budget", [{"a"}, {"b"}],
                      [(m, 1.5, details, {"b"}, ["c"])])]
    assert details["split"] == 3 and asked == [(m, 1.5)]
    ladder.solve_within(m, backend, "budget", 1.5, details)
    assert details["split"] == 5
    fresh: dict = {}
    ladder.solve_within(m, backend, "budget", 1.5, fresh)
    assert fresh["split"] == 2


def test_a_rung_solved_whole_within_its_radius(gate, monkeypatch):
    monkeypatch.setattr(ladder, "supports", lambda m, radius: None)
    m, details = query(), {}
    backend = Backend(outcome())
    assert ladder.solve_within(m, backend, lambda: "s", 1.5, details, ["c"]) == outcome()
    assert backend.calls == [(m, "s", None)] and details == {}
    assert gate.restriction.entered == [(m, 1.5, details, None, ["c"]), "left"]
    assert ladder.solve_within(m, Backend(), lambda: None, 1.5, details) is ladder.NO_TIME


# ------------------------------------------------------------------ the rungs
def terms(l0):
    return SimpleNamespace(objective_terms={"l1": 1.0, "l0": l0} if l0 else {"l1": 1.0})


@pytest.mark.parametrize("floor, l0, rungs", [
    (1.0, 0.0, [1.125, 1.5, 3.0]),
    (1.0, 0.5, [1.125, 1.5, 2 * (1 - 1e-6), 3.0]),
    (0.9, 1.0, [1 - 1e-6, 1.0125, 1.35, 2 * (1 - 1e-6), 2.7]),
    (1.9999995, 1.0, [1.9999995 * 1.125, 1.9999995 * 1.5, 4 * (1 - 1e-6),
                      1.9999995 * 3]),  # 2 (1 - 1e-6) and 3 (1 - 1e-6): not above
    (0.5, 0.2, [0.5625, 0.6 * (1 - 1e-6), 0.75, 0.8 * (1 - 1e-6), 1.5]),
    (1.9, 2.0, [2 * (1 - 1e-6), 2.1375, 2.85, 4 * (1 - 1e-6), 5.7]),
    (2 * (1 - 1e-6), 2.0, [2.25 * (1 - 1e-6), 3 * (1 - 1e-6), 4 * (1 - 1e-6),
                           6 * (1 - 1e-6)]),  # just below 2 is the floor itself: no rung
    (1.0, 1.1250005, [1.125, 1.5, 2.250001 * (1 - 1e-6), 3.0])])  # 1.125 (1 - 1e-6) < 1.125
def test_the_rungs_by_hand(floor, l0, rungs):
    assert ladder._rungs(terms(l0), floor) == pytest.approx(rungs, rel=1e-12)
    assert ladder.RUNGS == (1.125, 1.5, 3.0) and ladder.COUNT_RUNGS == 3


# ------------------------------------------------------------------ the climb
@pytest.fixture
def rungs(monkeypatch):
    """``solve_within`` answering from a script, recording the radii."""
    state = SimpleNamespace(script=[], radii=[], seen=[])

    def solve_within(m, backend, budget, radius, details, copies):
        state.radii.append(radius)
        state.seen.append((m, backend, budget, details, copies))
        return state.script.pop(0)

    monkeypatch.setattr(ladder, "solve_within", solve_within)
    return state


def test_a_rung_with_a_point_below_its_radius_is_the_answer(rungs):
    rungs.script = [outcome(Status.INFEASIBLE, wall=1.0, solver=0.5),
                    outcome(Status.OPTIMAL, 1.3, 1.2, wall=2.0, solver=1.0)]
    m, backend, details = terms(0.0), Backend(), {}
    out = ladder.climb(m, backend, "budget", 1.0, details, ["c"])
    assert rungs.radii == [1.125, 1.5] and rungs.seen[0] == (m, backend, "budget", details,
                                                             ["c"])
    assert out.status is Status.OPTIMAL and out.objective == 1.3 and out.bound == 1.2
    assert out.wall_time == 3.0 and out.solver_time == 1.5
    assert details["ladder"] == [(1.125, "infeasible", 1.0), (1.5, "optimal", 2.0)]
    assert backend.calls == []


def test_a_rung_bounded_at_its_radius_climbs_to_its_point(rungs):
    rungs.script = [outcome(Status.OPTIMAL, 1.4, 1.125),
                    outcome(Status.OPTIMAL, 1.4, 1.3)]
    out = ladder.climb(terms(0.0), Backend(), "budget", 1.0, {})
    assert rungs.radii == [1.125, pytest.approx(1.4 * (1 + 1e-6))]
    assert out.bound == 1.3 and out.objective == 1.4


def test_a_rung_out_of_time_keeps_the_floor_climbed(rungs):
    rungs.script = [outcome(Status.INFEASIBLE), outcome(Status.FEASIBLE, 1.6, 0.5)]
    out = ladder.climb(terms(0.0), Backend(), "budget", 1.0, {})
    assert out.bound == 1.125 and out.status is Status.FEASIBLE


def test_past_the_last_rung_the_whole_problem(rungs):
    rungs.script = [outcome(Status.INFEASIBLE)] * 3
    backend = Backend(outcome(Status.OPTIMAL, 4.0, 3.5, wall=2.0))
    details: dict = {}
    out = ladder.climb(terms(0.0), backend, lambda: "s", 1.0, details)
    assert rungs.radii == [1.125, 1.5, 3.0] and backend.calls == [(terms(0.0), "s", None)]
    assert out.bound == 3.5 and out.wall_time == 5.0
    assert details["ladder"][-1] == (math.inf, "optimal", 2.0)
    rungs.script = [outcome(Status.INFEASIBLE)] * 3
    backend = Backend(outcome(Status.OPTIMAL, 4.0, 2.5))
    assert ladder.climb(terms(0.0), backend, lambda: "s", 1.0, {}).bound == 3.0


def test_no_time_for_the_whole_problem(rungs):
    rungs.script = [outcome(Status.INFEASIBLE, wall=1.0)] * 3
    out = ladder.climb(terms(0.0), Backend(), lambda: None, 1.0, {})
    assert out.status is Status.NO_SOLUTION and out.bound == 3.0 and out.wall_time == 3.0
    assert out.termination == "maxTimeLimit"


# ------------------------------------------------------------------ the ascent
class Ascent:
    """A restriction whose ``restrict`` answers from a script."""

    def __init__(self, *answers, whole=False) -> None:
        self.answers, self.radii, self.whole_answer = list(answers), [], whole
        self.verified: list = []
        self.args: list = []
        self.whole_args: list = []

    def restrict(self, m, candidate, radius, details, deadline, verified):
        self.args.append((m, candidate, details, deadline))
        self.radii.append(radius)
        self.verified.append(verified)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def whole(self, m, details, deadline):
        self.whole_args.append((m, details, deadline))
        if isinstance(self.whole_answer, Exception):
            raise self.whole_answer
        return self.whole_answer


def rung(rebuilt=False):
    entered = []

    @contextmanager
    def context():
        entered.append("in")
        yield
        entered.append("out")

    return SimpleNamespace(rebuilt=rebuilt, context=context(), entered=entered)


def problem(extra=0.0, top=math.inf):
    return SimpleNamespace(raw=SimpleNamespace(extra_floor=extra), max_objective=top)


@pytest.fixture
def verified(monkeypatch):
    """``_verified`` answering from a script (``inf`` when it runs out)."""
    state = SimpleNamespace(script=[], starts=[], args=[], start_of=[])

    def verified(m, out, inc):
        state.args.append((m, out, inc))
        return state.script.pop(0) if state.script else math.inf

    def start_of(m, row):
        state.start_of.append(m)
        state.starts.append(row)
        return "st"

    monkeypatch.setattr(ladder, "_verified", verified)
    monkeypatch.setattr(ladder, "start_of", start_of)
    return state


def test_an_ascent_whose_first_rung_holds_the_optimum(verified):
    step = rung()
    restriction = Ascent(step)
    backend = Backend(outcome(Status.OPTIMAL, 1.2, 1.1, wall=2.0))
    details: dict = {}
    m, incumbent = problem(extra=0.25), []
    out = ladder.ascend(m, backend, lambda: "s", restriction, "cand",
                        1.0, details, 9.0, incumbent)
    assert restriction.args == [(m, "cand", details, 9.0)]
    (given_m, given_outcome, given_incumbent), = verified.args
    assert given_m is m and given_outcome.objective == 1.2 and given_incumbent is incumbent
    assert restriction.radii == [1.25] and restriction.verified == [False]
    assert backend.calls == [(problem(extra=0.25), "s", None)] and step.entered == ["in", "out"]
    assert out.bound == 1.1 and details["ascent"] == [(1.25, "optimal", 2.0)]
    assert backend.resets == 0


def test_an_empty_rung_doubles_the_distance(verified):
    restriction = Ascent(rung(), rung(rebuilt=True), rung())
    backend = Backend(outcome(Status.INFEASIBLE, wall=1.0),
                      outcome(Status.INFEASIBLE, wall=1.0),
                      outcome(Status.OPTIMAL, 3.0, 2.6, wall=1.0))
    out = ladder.ascend(problem(0.5), backend, lambda: "s", restriction, "c", 1.0, {}, 9.0, [])
    assert restriction.radii == [1.5, 2.5, 4.5] and backend.resets == 1
    assert out.bound == 2.6 and out.wall_time == 3.0 and out.objective == 3.0


def test_a_rung_bounded_at_its_radius_is_empty(verified):
    restriction = Ascent(rung(), rung())
    backend = Backend(outcome(Status.FEASIBLE, 1.0, 1.0), outcome(Status.OPTIMAL, 1.8, 1.7))
    out = ladder.ascend(problem(), backend, lambda: "s", restriction, "c", 1.0, {}, 9.0, [])
    assert restriction.radii == [1.0, 2.0] and out.bound == 1.7


def test_a_point_beyond_the_radius_makes_the_rung_empty_and_bounds_the_next(verified):
    verified.script = [1.5]
    restriction = Ascent(rung(), rung())
    radius = 1.0
    beyond = radius * (1 + 1e-6) + 2e-9
    backend = Backend(outcome(Status.OPTIMAL, beyond, 0.2), outcome(Status.OPTIMAL, 1.5, 1.4))
    incumbent = [SimpleNamespace(row="point")]
    out = ladder.ascend(problem(), backend, lambda: "s", restriction, "c", 1.0, {}, 9.0,
                        incumbent)
    assert restriction.radii == [1.0, 1.5 * (1 + 1e-6) + 1e-9] and out.bound == 1.4
    assert backend.calls[0][2] == "st" and verified.starts == ["point", "point"]
    assert verified.start_of == [problem(), problem()]


def test_a_point_at_the_radius_within_the_tolerance_is_the_answer(verified):
    at = 1.0 * (1 + 1e-6) + 1e-9  # exactly the tolerance: not beyond
    backend = Backend(outcome(Status.OPTIMAL, at, 0.9))
    out = ladder.ascend(problem(), backend, lambda: "s", Ascent(rung()), "c", 1.0, {}, 9.0, [])
    assert out.objective == at and out.bound == 0.9


def test_a_rung_out_of_time_answers_with_its_point(verified):
    restriction = Ascent(rung(), rung())
    backend = Backend(outcome(Status.INFEASIBLE), outcome(Status.FEASIBLE, 1.8, 0.5))
    out = ladder.ascend(problem(), backend, lambda: "s", restriction, "c", 1.0, {}, 9.0, [])
    assert out.status is Status.FEASIBLE and out.bound == 1.0  # the floor: the first rung
    restriction = Ascent(rung())
    backend = Backend(outcome(Status.FEASIBLE, 0.5, None))  # no bound: not empty
    out = ladder.ascend(problem(), backend, lambda: "s", restriction, "c", 1.0, {}, 9.0, [])
    assert out.status is Status.FEASIBLE and out.bound is None and out.objective == 0.5


@pytest.mark.parametrize("guess, top, answers", [
    (0.0, math.inf, []), (-1.0, math.inf, []), (1.0, 1.0, []), (math.inf, math.inf, []),
    (1.0, math.inf, [None])])
def test_an_ascent_that_cannot_start_solves_the_whole_problem(verified, guess, top,
                                                              answers):
    restriction = Ascent(*answers)
    backend = Backend(outcome(Status.OPTIMAL, 2.0, 2.0, wall=1.0))
    details: dict = {}
    out = ladder.ascend(problem(top=top), backend, lambda: "s", restriction, "c", guess,
                        details, 9.0, [])
    assert out.bound == 2.0 and details["ascent"] == [(math.inf, "optimal", 1.0)]
    assert len(restriction.radii) == len(answers) and backend.resets == 0


def test_the_ascent_stops_below_the_objectives_top(verified):
    restriction = Ascent(rung(), rung())
    backend = Backend(outcome(Status.INFEASIBLE), outcome(Status.INFEASIBLE),
                      outcome(Status.OPTIMAL, 5.0, 5.0))
    out = ladder.ascend(problem(top=2.0 + 1e-9), backend, lambda: "s", restriction, "c",
                        1.0, {}, 9.0, [])
    assert restriction.radii == [1.0, 2.0] and out.bound == 5.0 and out.wall_time == 3.0
    restriction = Ascent(rung(), rung())
    backend = Backend(outcome(Status.INFEASIBLE), outcome(Status.OPTIMAL, 3.0, 3.0))
    ladder.ascend(problem(top=2.0), backend, lambda: "s", restriction, "c", 1.0, {}, 9.0, [])
    assert restriction.radii == [1.0]


def test_the_ascent_has_at_most_its_rungs(verified):
    assert ladder.MAX_ASCENT == 12 and ladder.GROWTH == 2.0
    restriction = Ascent(*[rung() for _ in range(13)])
    backend = Backend(*[outcome(Status.INFEASIBLE)] * 12,
                      outcome(Status.OPTIMAL, 4096.0, 4096.0))
    out = ladder.ascend(problem(), backend, lambda: "s", restriction, "c", 1.0, {}, 9.0, [])
    assert restriction.radii == [2.0 ** k for k in range(12)]
    assert out.bound == 4096.0 and len(backend.calls) == 13


def test_a_region_too_large_for_a_rung(verified):
    restriction = Ascent(rung(), RegionTooLarge())
    backend = Backend(outcome(Status.INFEASIBLE, wall=1.5))
    out = ladder.ascend(problem(), backend, lambda: "s", restriction, "c", 1.0, {}, 9.0, [])
    assert out.termination == "regionTooLarge" and "radius 2 " in out.message
    assert out.bound == 1.0 and out.wall_time == 1.5


def test_a_region_too_large_for_the_whole_problem(verified):
    restriction = Ascent(None, whole=RegionTooLarge())
    out = ladder.ascend(problem(), Backend(), lambda: "s", restriction, "c", 1.0, {}, 9.0,
                        [])
    assert out.termination == "regionTooLarge" and "whole actionable region" in out.message
    assert out.bound is None
    restriction = Ascent(rung(), None, whole=RegionTooLarge())
    backend = Backend(outcome(Status.INFEASIBLE, wall=1.5))
    details: dict = {}
    out = ladder.ascend(problem(), backend, lambda: "s", restriction, "c", 1.0, details,
                        9.0, [])
    assert out.wall_time == 1.5 and out.bound == 1.0
    assert restriction.whole_args == [(problem(), details, 9.0)]


def test_a_whole_region_built_resets_the_backend(verified):
    restriction = Ascent(None, whole=True)
    backend = Backend(outcome(Status.OPTIMAL, 2.0, 2.0))
    settings = ["first", "second"]
    out = ladder.ascend(problem(), backend, lambda: settings.pop(0), restriction, "c", 1.0,
                        {}, 9.0, [SimpleNamespace(row="p")])
    assert backend.resets == 1 and backend.calls == [(problem(), "second", "st")]
    assert out.bound == 2.0 and verified.starts == ["p"] and verified.start_of == [problem()]


@pytest.mark.parametrize("whole, budgets", [(False, ["s", None]), (True, ["s", "s", None])])
def test_no_time_for_the_whole_problem_is_why_it_stopped(verified, whole, budgets):
    restriction = Ascent(rung(), whole=whole)
    backend = Backend(outcome(Status.INFEASIBLE, wall=1.0))
    why = outcome(Status.NO_SOLUTION, termination="interrupted", wall=0.0, solver=None)
    budgets = list(budgets)
    out = ladder.ascend(problem(top=1.5), backend, lambda: budgets.pop(0), restriction,
                        "c", 1.0, {}, 9.0, [], stopped=lambda: why)
    assert out.termination == "interrupted" and out.bound == 1.0 and out.wall_time == 1.0
    assert len(backend.calls) == 1


def test_no_time_for_a_rung_is_why_it_stopped(verified):
    restriction = Ascent(rung(), rung())
    backend = Backend(outcome(Status.INFEASIBLE, wall=1.0))
    budgets = ["s", None]
    out = ladder.ascend(problem(), backend, lambda: budgets.pop(0), restriction, "c", 1.0,
                        {}, 9.0, [])
    assert out.termination == "maxTimeLimit" and out.bound == 1.0 and out.wall_time == 1.0


# ------------------------------------------------------------------ the incumbent
@pytest.fixture
def points(monkeypatch):
    state = SimpleNamespace(point=None, m=None)

    def verified_solution(m, margin):
        assert m is state.m and margin == 0.1
        return state.point

    def objective_value(m, row):
        assert m is state.m
        return row

    monkeypatch.setattr(ladder, "verified_solution", verified_solution)
    monkeypatch.setattr(ladder, "objective_value", objective_value)
    return state


def test_a_verified_cheaper_point_replaces_the_incumbent(points):
    m = points.m = SimpleNamespace(declared_margin=0.1)
    points.point = SimpleNamespace(verified=True, row=2.0)
    incumbent: list = []
    assert ladder._verified(m, outcome(Status.FEASIBLE), incumbent) == 2.0
    assert incumbent == [points.point]
    points.point = SimpleNamespace(verified=True, row=3.0)
    assert ladder._verified(m, outcome(Status.OPTIMAL), incumbent) == 2.0
    kept = incumbent[0]
    points.point = SimpleNamespace(verified=True, row=2.0)  # as cheap: the first kept
    assert ladder._verified(m, outcome(Status.OPTIMAL), incumbent) == 2.0
    assert incumbent[0] is kept
    points.point = SimpleNamespace(verified=False, row=1.0)
    assert ladder._verified(m, outcome(Status.OPTIMAL), incumbent) == 2.0
    points.point = SimpleNamespace(verified=True, row=1.0)
    assert ladder._verified(m, outcome(Status.INFEASIBLE), incumbent) == 2.0
    assert ladder._verified(m, outcome(Status.OPTIMAL), incumbent) == 1.0
    assert ladder._verified(m, outcome(Status.INFEASIBLE), []) == math.inf
