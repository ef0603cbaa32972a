"""The model-shift baselines (:mod:`cfopt.methods.milp_r`): MILP-R's master and its
margin rounds by hand with scripted solves, its adversary's check and cut, and both
methods end to end on a two-feature network built by hand (tiny HiGHS solves)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pyomo.environ as pyo
import pytest
import torch

import cfopt
from cfopt.methods import MILPR, NonRobustMILP
from cfopt.methods import milp_r as mr
from cfopt.methods.cutting_set import MasterAnswer
from cfopt.results.robust import RobustStatus
from cfopt.results.status import Status


# ------------------------------------------------------------------ the master
class Backend:
    def __init__(self, *outcomes) -> None:
        self.outcomes, self.margins = list(outcomes), []

    def solve(self, m, settings):
        self.margins.append((m.margin, settings))
        return self.outcomes.pop(0)


def outcome(status, bound=None, termination="optimal"):
    return SimpleNamespace(status=status, bound=bound, termination=termination)


class Deadline:
    def __init__(self, settings="s") -> None:
        self.settings = settings

    def left(self):
        return self.settings


def margin_master(*outcomes, margin=0.5, growth=2.0):
    return mr.MarginMaster(SimpleNamespace(margin=None), Backend(*outcomes), margin, growth)


def test_a_solve_at_the_masters_margin_gives_its_point(monkeypatch):
    row = pd.DataFrame({"a": [1.0]})
    monkeypatch.setattr(mr, "verified_solution", lambda m: SimpleNamespace(row=row))
    p = margin_master(outcome(Status.OPTIMAL, 0.75))
    answer = p.solve(Deadline())
    assert answer == MasterAnswer(Status.OPTIMAL, point=row, bound=0.75)
    assert p.backend.margins == [(0.5, "s")] and p.m.margin == 0.5 and p.bound == 0.75
    assert (p.low, p.high, p.growth) == (None, None, 2.0)


def test_no_time_no_solve():
    p = margin_master()
    assert p.solve(Deadline(None)) == MasterAnswer(Status.NO_SOLUTION, solved=False,
                                                   message="time limit reached")
    assert p.m.margin is None


def test_a_first_infeasible_margin_is_the_answer():
    p = margin_master(outcome(Status.INFEASIBLE, termination="infeasible"))
    assert p.solve(Deadline()) == MasterAnswer(
        Status.INFEASIBLE, message="no counterfactual with margin 0.5 (infeasible)")
    assert p.high is None and p.margin == 0.5


def test_an_infeasible_margin_after_an_uncertified_one_bisects():
    p = margin_master(outcome(Status.INFEASIBLE), margin=1.0)
    p.low = 0.25
    assert p.solve(Deadline()) == MasterAnswer(Status.INFEASIBLE, retry=True)
    assert p.high == 1.0 and p.margin == 0.625


def test_the_margin_rises_by_the_growth_or_the_drop():
    p = margin_master(margin=0.5, growth=2.0)
    p.raise_margin(SimpleNamespace(value=0.25))  # drop 0.25: the growth wins
    assert p.low == 0.5 and p.margin == 1.0
    p.raise_margin(SimpleNamespace(value=-2.0))  # drop 3.0
    assert p.low == 1.0 and p.margin == 3.0
    p.raise_margin(SimpleNamespace(value=None))
    assert p.low == 3.0 and p.margin == 6.0


def test_the_margin_rises_no_further_than_the_middle_below_an_infeasible_one():
    p = margin_master(margin=1.0, growth=2.0)
    p.high = 1.5
    p.raise_margin(SimpleNamespace(value=0.5))
    assert p.low == 1.0 and p.margin == 1.25
    p.high = 10.0
    p.raise_margin(SimpleNamespace(value=0.5))
    assert p.margin == 2.5


# ------------------------------------------------------------------ the adversary
def test_the_adversary_checks_at_zero_and_its_cut_raises_the_margin():
    p = margin_master(margin=0.5)
    adversary = mr.MarginAdversary("checker", "m", 1, p)
    assert adversary.threshold == 0.0 and adversary.master is p and adversary.target == 1
    for robust, certified in [(True, True), (False, False), (None, False)]:
        verdict = SimpleNamespace(robust=robust, bound=0.125, value=-0.5)
        adversary.verdict = lambda point, deadline, v=verdict: v
        check = adversary.check(MasterAnswer(Status.OPTIMAL, point="x"), "d")
        assert check.certified is certified and check.bound == 0.125
        assert check.verdict is verdict and check.counterexample is verdict
    adversary.add_cut(check)
    assert p.low == 0.5 and p.margin == 1.0


# ------------------------------------------------------------------ end to end
FRAME = pd.DataFrame({"a": [0.0, 1.0], "b": [0.0, 1.0]})
FACTUAL = pd.DataFrame({"a": [0.0], "b": [0.0]})


def net() -> torch.nn.Sequential:
    """logit = z_a + z_b - 1 (min-max scaled: z = v), through ReLUs always active."""
    first, last = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
    with torch.no_grad():
        first.weight.copy_(torch.eye(2))
        first.bias.zero_()
        last.weight.fill_(1.0)
        last.bias.fill_(-1.0)
    return torch.nn.Sequential(first, torch.nn.ReLU(), last)


@pytest.fixture(scope="module")
def space():
    return cfopt.FeatureSpace.from_frame(FRAME, kinds={"a": "continuous", "b": "continuous"})


def test_the_plain_milp_is_checked_afterwards(space):
    method = NonRobustMILP(net(), space, delta=0.01, margin=1e-3)
    r = method.explain(FACTUAL, target=1)
    assert r.status is RobustStatus.NOT_ROBUST and r.certificate.robust is False
    assert r.counterfactual["a"].iloc[0] + r.counterfactual["b"].iloc[0] == \
        pytest.approx(1.001, abs=1e-6)
    assert r.certificate.iterations == 1 and r.details["margin"] == 1e-3
    assert r.certificate.verdict.value < 0 and r.certificate.bound is not None
    assert set(r.certificate.times) == {"master", "adversary"}
    robust = NonRobustMILP(net(), space, delta=1e-4, margin=0.05).explain(FACTUAL, 1)
    assert robust.status is RobustStatus.CERTIFIED and robust.certificate.robust is True


def test_the_plain_milp_without_a_point_says_why(space):
    r = NonRobustMILP(net(), space, delta=0.01, time_limit=1e-9).explain(FACTUAL, target=1)
    assert r.status is RobustStatus.TIME_LIMIT and r.counterfactual is None
    assert r.certificate.verdict is None and r.certificate.iterations == 1
    assert r.certificate.robust is None and r.certificate.times == {}
    assert r.message == "time limit reached before any counterfactual was found"


def test_milp_r_raises_the_margin_until_certified(space):
    method = MILPR(net(), space, delta=0.01, initial_margin=1e-3, growth=2.0)
    r = method.explain(FACTUAL, target=1)
    assert r.status is RobustStatus.CERTIFIED and r.certificate.robust is True
    margin = r.details["margin"]
    assert margin > 1e-3 and pyo.value(method.milp.margin) == pytest.approx(1e-3)
    cf = r.counterfactual.iloc[0]
    assert cf["a"] + cf["b"] == pytest.approx(1 + margin, abs=1e-6)
    assert r.certificate.iterations >= 2 and r.certificate.verdict.robust is True
    assert r.certificate.bound == r.certificate.verdict.bound
    assert r.bound == pytest.approx(r.objective, abs=1e-6)
    assert method._build_pending is False
    again = method.explain(FACTUAL, target=1)
    assert again.details["margin"] == margin


def test_milp_r_capped_rounds_stop_uncertified(space):
    r = MILPR(net(), space, delta=0.05, initial_margin=1e-3, growth=1.5,
              max_rounds=1).explain(FACTUAL, target=1)
    assert r.status is RobustStatus.ITERATION_LIMIT and not r.certified
    assert r.certificate.iterations == 1 and r.certificate.robust is False


def test_milp_r_with_no_point_at_any_margin(space):
    fixed = cfopt.FeatureSpace.from_frame(FRAME, kinds={"a": "continuous", "b": "continuous"})
    fixed.immutable("a").immutable("b")
    r = MILPR(net(), fixed, delta=0.01).explain(FACTUAL, target=1)
    assert r.status is RobustStatus.INFEASIBLE and r.counterfactual is None


@pytest.mark.parametrize("option, value, says", [
    ("initial_margin", 0.0, "initial_margin must be a positive number, got 0.0"),
    ("growth", 1.0, "growth must be > 1 (the margin must increase), got 1.0"),
    ("growth", -1.0, "growth must be a positive number"),
    ("max_rounds", 0, "max_rounds must be a positive integer, got 0")])
def test_milp_r_names_a_bad_option(space, option, value, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        MILPR(net(), space, delta=0.01, **{option: value})


def test_milp_r_keeps_its_options(space):
    method = MILPR(net(), space, delta=0.01, initial_margin=0.25, growth=3, max_rounds=7)
    assert (method.initial_margin, method.growth, method.max_rounds) == (0.25, 3.0, 7)
    assert method.loop.max_iterations == 7
    assert pyo.value(method.milp.margin) == 0.25
    assert math.isclose(method.build_time, method.milp.build_time)
    assert method.method == "milp-r" and NonRobustMILP.method == "milp"


def test_the_plain_milp_hands_its_options_to_the_explainer_and_the_checker(space):
    method = NonRobustMILP(net(), space, delta=0.02, margin=0.05, time_limit=7.0,
                           mip_gap=1e-3, threads=2, seed=3, objective="linf")
    settings = method.explainer.settings
    assert (settings.time_limit, settings.mip_gap, settings.threads, settings.seed) == \
        (7.0, 1e-3, 2, 3)
    assert pyo.value(method.milp.margin) == 0.05 and method.milp is method.explainer.milp
    assert method.milp.objective_terms == {"linf": 1.0}
    assert method.explainer.backend is method.backend
    assert method.checker.delta == 0.02 and method.checker.backend.name == "highs"


def test_milp_r_hands_its_options_to_its_milp_and_checker(space):
    method = MILPR(net(), space, delta=0.02, objective="linf", max_changes=1,
                   bound_tightening=None)
    assert method.milp.objective_terms == {"linf": 1.0} and method.milp.change_cap == 1
    assert method.checker.delta == 0.02 and method.checker.backend.name == "highs"


def test_a_verdict_without_a_value_grows_the_margin_only():
    p = margin_master(margin=0.25, growth=2.0)
    assert p.bound is None
    p.raise_margin(SimpleNamespace(value=None))
    assert p.margin == 0.5


def test_milp_r_settings_and_milp_take_every_option(space):
    rule = cfopt.LinearConstraint({"a": 1.0}, "<=", 0.5)
    method = MILPR(net(), space, delta=0.02, time_limit=9.0, mip_gap=1e-3, threads=2,
                   seed=5, solver_options={"presolve": "off"}, weights={"a": 2.0, "b": 1.0},
                   bound_tightening=None, constraints=[rule])
    s = method.settings
    assert (s.time_limit, s.mip_gap, s.threads, s.seed) == (9.0, 1e-3, 2, 5)
    assert s.options["presolve"] == "off"
    assert method.milp.weights == {"a": 2.0, "b": 1.0}
    assert method.milp.bound_tightening.method == "interval"  # none asked: intervals only
    assert MILPR(net(), space, delta=0.02).milp.bound_tightening.method == "lp"
    r = method.explain(FACTUAL, target=1)
    assert r.counterfactual["a"].iloc[0] <= 0.5 + 1e-6  # the declared rule holds
    assert method.checker.backend.name == method.backend.name


def test_the_first_query_counts_the_build(space):
    method = MILPR(net(), space, delta=0.01)
    assert method._build_pending is True
    first = method.explain(FACTUAL, target=1)
    second = method.explain(FACTUAL, target=1)
    assert first.total_time >= method.build_time and method._build_pending is False
    assert second.total_time < first.total_time + method.build_time


def test_the_plain_milp_settings_take_every_option(space):
    method = NonRobustMILP(net(), space, delta=0.02, time_limit=9.0, threads=2, seed=5)
    s = method.settings
    assert (s.time_limit, s.threads, s.seed) == (9.0, 2, 5)


def test_the_defaults(space):
    method = MILPR(net(), space, delta=0.01)
    assert (method.initial_margin, method.growth, method.max_rounds) == (0.01, 2.0, 20)
    s = method.settings
    assert (s.time_limit, s.mip_gap, s.threads, s.seed) == (None, 1e-4, 1, 0)
    plain = NonRobustMILP(net(), space, delta=0.01)
    assert pyo.value(plain.milp.margin) == 1e-3
    s = plain.settings
    assert (s.time_limit, s.mip_gap, s.threads, s.seed) == (None, 1e-4, 1, 0)
    assert plain.explainer.backend.name == plain.backend.name == "highs"


def test_the_checkers_use_the_methods_solver(space):
    assert MILPR(net(), space, delta=0.01, solver="cbc").checker.backend.name == "cbc"
    assert NonRobustMILP(net(), space, delta=0.01, solver="cbc").checker.backend.name == "cbc"
