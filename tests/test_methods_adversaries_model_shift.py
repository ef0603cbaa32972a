"""The model-shift adversary Δ (:mod:`cfopt.methods.adversaries.model_shift`) on a tiny
ReLU network: each stage of a check (interval screen, attack, LP relaxation, exact
MILP) and its verdict, the verdicts of several margins combined by hand, the Δ-robust
nearest rows and their cache, and the loop's step (its copies, held or left out)."""

from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
import torch

import cfopt
from cfopt.methods.adversaries import model_shift as ms
from cfopt.methods.cutting_set import Check, MasterAnswer
from cfopt.results.robust import RobustnessVerdict
from cfopt.results.status import Status


def net() -> torch.nn.Sequential:
    """logit = relu(z_a - z_b) + relu(z_a + z_b - 0.5) - 0.5 on two inputs in [0, 1]."""
    first, last = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
    with torch.no_grad():
        first.weight.copy_(torch.tensor([[1.0, -1.0], [1.0, 1.0]]))
        first.bias.copy_(torch.tensor([0.0, -0.5]))
        last.weight.copy_(torch.tensor([[1.0, 1.0]]))
        last.bias.fill_(-0.5)
    return torch.nn.Sequential(first, torch.nn.ReLU(), last)


@pytest.fixture
def checker():
    return ms.RobustnessChecker(net(), 0.05)


FAR = np.array([1.0, 0.0])    # logit 1 + 0.5 - 0.5 = 1: robust at δ = 0.05
NEAR = np.array([0.5, 0.45])  # logit 0.05 + 0.45 - 0.5 = 0: not robust
EDGE = np.array([0.6, 0.2])   # logit 0.4 + 0.3 - 0.5 = 0.2


def test_a_far_point_is_certified_by_the_interval_screen(checker):
    v = checker.check(FAR)
    assert v.robust is True and v.method == "interval" and v.value is None
    lower, upper = checker.screen(FAR[None, :])
    assert v.bound == lower[0] and 0 < lower[0] <= upper[0] < 1.0  # 1: the logit
    assert checker.milp_checks == 0 and checker.lp_checks == 0 and v.threshold == 0.0


def test_a_point_on_the_boundary_is_refuted_by_the_attack(checker):
    v = checker.check(NEAR)
    assert v.robust is False and v.method == "attack" and v.value < 0
    assert v.shift <= 0.05 * (1 + 1e-9) and v.parameters is not None
    assert v.bound <= v.value + 1e-12 and checker.milp_checks == 0


def test_the_exact_milp_decides_without_the_screen(checker):
    for z in (FAR, EDGE, NEAR):
        v = checker.check(z, screen=False)
        e = checker.exact(z)
        assert v.method == "milp" and v.robust == e.robust and v.solver_status == "optimal"
        assert v.bound == pytest.approx(e.bound, abs=1e-6)
        assert v.value == pytest.approx(v.solver_value, abs=1e-6)
        assert v.value >= v.bound - 1e-6 and v.shift <= 0.05 * (1 + 1e-9)
        lower, upper = checker.screen(z[None, :])
        assert lower[0] - 1e-6 <= v.bound and v.value <= upper[0] + 1e-6
    assert checker.milp_checks == 6
    assert checker.check(FAR, screen=False).robust is True
    assert checker.check(NEAR, screen=False).robust is False


def test_a_threshold_above_the_least_margin_refutes(checker):
    least = checker.exact(EDGE).bound
    assert checker.exact(EDGE, threshold=least - 1e-3).robust is True
    v = checker.exact(EDGE, threshold=least + 1e-3)
    assert v.robust is False and v.threshold == least + 1e-3
    assert checker.check(EDGE, threshold=least + 1e-3, screen=False).robust is False


def test_the_lp_relaxation_certifies_only(checker):
    v = checker.check(FAR, screen=False, lp_screen=True)
    assert v.method == "lp" and v.robust is True and checker.lp_checks == 1
    assert v.solver_status == "optimal" and checker.milp_checks == 0
    v = checker.check(NEAR, screen=False, lp_screen=True)
    assert v.method == "milp" and v.robust is False
    assert checker.lp_checks == 2 and checker.milp_checks == 1


def test_no_time_no_verdict(checker):
    v = checker.check(EDGE, screen=False, time_limit=1e-12)
    assert v.robust is None and v.bound is None and v.solver_status == "no_solution"
    assert checker.milp_checks == 0
    assert checker.check(EDGE, screen=False, lp_screen=True, time_limit=1e-12).robust is None
    assert checker.lp_checks == 0


def test_the_adversary_model_is_built_once_per_margin_and_moved(checker):
    checker.exact(FAR)
    checker.exact(NEAR)
    assert len(checker._adversaries) == 1
    checker.check(FAR, screen=False, lp_screen=True)
    assert len(checker._adversaries) == 2


def test_the_checker_keeps_its_settings():
    c = ms.RobustnessChecker(net(), 0.1, solver="highs", time_limit=3.0, mip_gap=1e-3)
    assert c.delta == 0.1 and c.backend.name == "highs"
    assert (c.settings.time_limit, c.settings.mip_gap, c.settings.threads,
            c.settings.seed) == (3.0, 1e-3, 1, 0)
    with pytest.raises(ValueError, match="delta"):
        ms.RobustnessChecker(net(), 0.0)
    # a backend given: one of its own by that name (the persistent solver is not shared)
    given = cfopt.solvers.make_solver("highs")
    c = ms.RobustnessChecker(net(), 0.1, solver=given)
    assert c.backend is not given and c.backend.name == "highs"


# ------------------------------------------------------------------ combining margins
def verdict(robust, bound, value, method="milp", status="optimal", competitor=0):
    return RobustnessVerdict(robust=robust, bound=bound, value=value, solver_value=None,
                             method=method, threshold=0.0, solver_status=status,
                             competitor=competitor)


def test_every_margin_robust_is_robust_at_the_least_bound():
    out = ms._combine([verdict(True, 0.5, None, "interval", None, 1),
                       verdict(True, 0.25, 0.3, "milp", "optimal", 2)], 0.0)
    assert out.robust is True and out.bound == 0.25 and out.method == "milp"
    assert out.competitor == 2 and out.solver_status == "optimal" and out.seconds > 0


def test_one_margin_refuted_is_refuted_by_the_worst_model():
    out = ms._combine([verdict(True, 0.5, None, "interval", None, 1),
                       verdict(False, -0.5, -0.25, "attack", None, 2),
                       verdict(False, -0.5, -0.4, "milp", "optimal", 3)], 0.0)
    assert out.robust is False and out.competitor == 3 and out.value == -0.4
    assert out.method == "milp" and out.bound == -0.5
    out = ms._combine([verdict(False, -0.5, -0.25, "attack", None, 2),
                       verdict(None, None, 0.1, "milp", "time_limit", 3)], 0.0)
    assert out.robust is False and out.method == "attack" and out.bound is None
    assert out.solver_status == "time_limit"


def test_an_undecided_margin_leaves_it_unproven():
    out = ms._combine([verdict(True, 0.5, None, "interval", None, 1),
                       verdict(None, 0.1, 0.2, "milp", "time_limit", 2)], 0.0)
    assert out.robust is None and out.bound == 0.1 and out.competitor == 2
    assert out.method == "milp" and out.solver_status == "time_limit"
    out = ms._combine([verdict(None, None, None, "milp", "optimal", 1),
                       verdict(None, None, 0.3, "milp", "optimal", 2),
                       verdict(None, None, 0.2, "milp", "optimal", 3)], 0.0)
    assert out.competitor == 3  # the least value among those with one
    out = ms._combine([verdict(True, 0.5, None, "interval", None, 1),
                       verdict(True, 0.4, None, "lp", None, 2)], 0.0)
    assert out.method == "interval" and out.solver_status is None and out.competitor == 1


# ------------------------------------------------------------------ the region's rows
def test_the_nearest_robust_rows_in_order_and_cached(checker):
    Z = np.array([FAR, NEAR, [0.9, 0.1], [0.0, 0.0], EDGE, [0.95, 0.0]])
    rows = np.array([0, 1, 2, 4, 5])
    z0 = np.array([0.5, 0.5])
    found, report = checker.nearest_robust(Z, rows, z0, 2, cache_key="d")
    robust = [r for r in rows if checker.exact(Z[r]).robust]
    order = sorted(robust, key=lambda r: np.linalg.norm(Z[r] - z0))
    assert found == order[:2] and report.neighbours == 2 and report.candidates == 5
    assert report.screened == 5 and 0 < report.seconds < 60  # wide: a loaded machine
    assert report.milp_checks == 0  # the screen is exact on every row here
    again, report = checker.nearest_robust(Z, rows, z0, 2, cache_key="d")
    assert again == found and report.screened == 0 and report.milp_checks == 0
    every, report = checker.nearest_robust(Z, rows, z0, 10, cache_key="e")
    assert every == order and report.neighbours == len(order)
    none, report = checker.nearest_robust(Z, np.array([], dtype=int), z0, 2)
    assert none == [] and (report.neighbours, report.candidates, report.screened,
                           report.milp_checks) == (0, 0, 0, 0)
    assert 0 <= report.seconds < 60  # wide: a loaded machine


def test_undecided_rows_go_to_the_milp(checker, monkeypatch):
    Z = np.array([EDGE, FAR])
    monkeypatch.setattr(checker, "screen", lambda Z, target: (np.full(len(Z), -1.0),
                                                              np.full(len(Z), 1.0)))
    found, report = checker.nearest_robust(Z, np.array([0, 1]), EDGE, 1)
    assert checker.exact(EDGE).robust is False  # the nearer row is refuted by the MILP
    assert found == [1] and report.milp_checks == 2 and report.screened == 2


# ------------------------------------------------------------------ the loop's step
@pytest.fixture
def master():
    frame = pd.DataFrame({"a": [0.0, 1.0, 0.5], "b": [0.0, 1.0, 0.5]})
    space = cfopt.FeatureSpace.from_frame(frame, kinds={"a": "continuous",
                                                        "b": "continuous"})
    explainer = cfopt.Explainer(net(), space, margin=1e-3)
    explainer.milp.set_factual(pd.DataFrame({"a": [0.0], "b": [0.0]}))
    explainer.milp.set_target(1)
    return explainer.milp


def test_the_step_checks_the_point_and_adds_the_worst_model(checker, master):
    box = (np.zeros(2), np.ones(2))
    step = ms.ModelShiftAdversary(checker, master, 1, 0.1, box)
    point = pd.DataFrame({"a": [0.5], "b": [0.45]})
    check = step.check(MasterAnswer(Status.OPTIMAL, point=point),
                       SimpleNamespace(left=lambda: SimpleNamespace(time_limit=5.0)))
    assert check.certified is False and check.verdict.threshold == 0.1
    assert check.counterexample is check.verdict.parameters is not None
    assert check.note == "the adversary could not decide (solver limit); robustness unproven"
    step.add_cut(check)
    assert step.models == [check.counterexample] and len(step.network_copies(master)) == 1
    assert hasattr(master, "shifted_1")
    step.add_cut(check)
    assert hasattr(master, "shifted_2") and len(step.network_copies(master)) == 2
    step.hold({1})
    assert len(step.network_copies(master)) == 1
    assert step.missed(np.array([0.5, 0.45]), 0.0) == [0]
    assert step.missed(np.array([1.0, 0.0]), 0.0) == []
    step.hold({0, 1})
    assert step.missed(np.array([0.5, 0.45]), 0.0) == []
    step.remove_cuts()
    assert not hasattr(master, "shifted_1") and step.network_copies(master) == []


def test_a_far_point_is_certified_at_the_threshold(checker, master):
    step = ms.ModelShiftAdversary(checker, master, 1, 0.1, lp_screen=True)
    seen = []
    real = checker.check
    checker.check = lambda *args, **kw: seen.append((args, kw)) or real(*args, **kw)
    point = pd.DataFrame({"a": [1.0], "b": [0.0]})
    check = step.check(MasterAnswer(Status.OPTIMAL, point=point),
                       SimpleNamespace(left=lambda: None))
    assert check.certified is True and check.bound >= 0.1
    (z, target, threshold), kw = seen[0]
    assert list(z) == [1.0, 0.0] and target == 1 and threshold == 0.1
    assert kw == {"time_limit": None, "lp_screen": True}
    with pytest.raises(ValueError, match="this model-shift adversary has no input box"):
        step.add_cut(Check(certified=False, bound=None, verdict=None, counterexample=[]))


def test_a_cut_at_a_guess_only_when_its_model_misses_the_threshold(checker, master):
    step = ms.ModelShiftAdversary(checker, master, 1, 0.1, (np.zeros(2), np.ones(2)))
    assert step.cut_at(FAR) is False and step.models == []
    assert step.cut_at(NEAR) is True and len(step.models) == 1
    v = ms._margin_value(step.models[0], NEAR, checker.margins(1)[0])
    assert v < 0.1
    step.remove_cuts()


# ------------------------------------------------------------------ more by hand
def test_the_tree_is_kept_for_the_same_rows_and_rebuilt_for_others(checker):
    Z = np.array([FAR, NEAR, [0.9, 0.1], [0.0, 0.0], EDGE, [0.95, 0.0]])
    z0 = np.array([1.0, 0.0])
    first = checker._tree(("d", 1, 6), Z, np.array([0, 2, 5]))
    assert checker._tree(("d", 1, 6), Z, np.array([0, 2, 5])) is first
    found, _ = checker.nearest_robust(Z, [0.0, 2.0, 5.0], z0, 3, cache_key="d")
    assert found == [0, 5, 2]  # rows given as floats are row indices
    found, _ = checker.nearest_robust(Z, np.array([2, 4]), z0, 1, cache_key="d")
    assert found == [2]  # the same key, other rows: their own tree
    assert checker._tree(("d", 1, 6), Z, np.array([2, 4])) is not first


def test_the_verdicts_are_cached_per_data_set(checker):
    Z1 = np.array([FAR, NEAR])
    Z2 = np.array([NEAR, FAR])
    assert checker.nearest_robust(Z1, np.array([0, 1]), FAR, 2, cache_key="one")[0] == [0]
    assert checker.nearest_robust(Z2, np.array([0, 1]), FAR, 2, cache_key="two")[0] == [1]
    assert checker.nearest_robust(Z1, np.array([0, 1]), FAR, 2, cache_key="one")[0] == [0]


def test_the_step_hands_its_box_hull_and_weights_to_each_copy(checker, master, monkeypatch):
    seen = []
    monkeypatch.setattr(ms, "add_shifted_copy", lambda *args: seen.append(args) or (
        SimpleNamespace(active=True), "pred"))
    box, hull, weights = (np.zeros(2), np.ones(2)), np.eye(2), ["w1", "w2"]
    step = ms.ModelShiftAdversary(checker, master, 1, 0.1, box, hull=hull,
                                  hull_weights=weights)
    assert step.lp_screen is False
    step.add_cut(Check(certified=False, bound=None, verdict=None, counterexample="p1"))
    step.add_cut(Check(certified=False, bound=None, verdict=None, counterexample="p2"))
    assert seen == [(master, "p1", box, "shifted_1", hull, weights),
                    (master, "p2", box, "shifted_2", hull, weights)]
    assert step.models == ["p1", "p2"] and step.network_copies(master) == [("pred", None)] * 2


def test_the_step_without_a_box_names_why():
    step = ms.ModelShiftAdversary("checker", "m", 1, 0.1)
    with pytest.raises(ValueError, match="^this model-shift adversary has no input box for "
                                         "the copies$"):
        step.add_cut(Check(certified=False, bound=None, verdict=None, counterexample=[]))


def test_the_step_checks_within_the_deadlines_time_left(checker, master):
    step = ms.ModelShiftAdversary(checker, master, 1, 0.1)
    seen = []
    checker.check = lambda *args, **kw: seen.append(kw) or "verdict"
    point = pd.DataFrame({"a": [1.0], "b": [0.0]})
    assert step.verdict(point, SimpleNamespace(
        left=lambda: SimpleNamespace(time_limit=5.0))) == "verdict"
    assert seen == [{"time_limit": 5.0, "lp_screen": False}]


def three_class_net() -> torch.nn.Sequential:
    """Logits (0.5, z_a, 2 z_b): target 0 keeps y0 - y1 and y0 - y2."""
    first, last = torch.nn.Linear(2, 2), torch.nn.Linear(2, 3)
    with torch.no_grad():
        first.weight.copy_(torch.eye(2))
        first.bias.zero_()
        last.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]]))
        last.bias.copy_(torch.tensor([0.5, 0.0, 0.0]))
    return torch.nn.Sequential(first, torch.nn.ReLU(), last)


def test_a_cut_at_a_guess_takes_the_least_margins_model(master):
    checker = ms.RobustnessChecker(three_class_net(), 0.01)
    step = ms.ModelShiftAdversary(checker, master, 0, 0.0, (np.zeros(2), np.ones(2)))
    z = np.array([[0.3, 0.4]])  # margins 0.2 and -0.3 (class 2 wins): given as a row
    assert step.cut_at(z) is True
    values = [ms._margin_value(step.models[0], z[0], margin)
              for margin in checker.margins(0)]
    assert values[1] < -0.3 and values[1] < values[0]
    assert step.missed(z, 0.0) == [] and step.missed(z[0], 0.0) == []
    step.hold(set())
    assert step.missed(z, 0.0) == [0]
    step.remove_cuts()


def test_each_data_set_has_its_own_tree(checker):
    Z1 = np.array([FAR, [0.9, 0.1]])
    Z2 = np.array([[0.9, 0.1], FAR])  # both robust, in the other order
    assert checker.nearest_robust(Z1, np.array([0, 1]), FAR, 1, cache_key="one")[0] == [0]
    assert checker.nearest_robust(Z2, np.array([0, 1]), FAR, 1, cache_key="two")[0] == [1]


def test_the_search_stops_at_k_past_its_first_batch(checker):
    rng = np.random.default_rng(0)
    Z = np.clip(FAR + rng.uniform(-0.05, 0.05, size=(150, 2)), 0, 1)
    Z[:100] = NEAR  # the 100 nearest to NEAR are not robust
    found, report = checker.nearest_robust(Z, np.arange(150), NEAR, 3)
    assert len(found) == 3 and all(r >= 100 for r in found)
    assert report.screened == 150  # a first batch of 64 rows, then the rest
    found, _ = checker.nearest_robust(Z, np.arange(150), NEAR, 1)
    assert len(found) == 1
    robust = np.clip(FAR + rng.uniform(-0.05, 0.05, size=(150, 2)), 0, 1)
    found, _ = checker.nearest_robust(robust, np.arange(150), FAR, 1, cache_key="r")
    assert len(found) == 1  # found in the first batch: no second one


def test_rows_at_equal_distances_are_each_visited_once(checker):
    # 60 rows at NEAR (not robust), then 10 robust rows at one distance, across the end
    # of the first batch (64 rows): each found once, none skipped
    Z = np.array([NEAR] * 60 + [FAR] * 10)
    found, report = checker.nearest_robust(Z, np.arange(70), NEAR, 16)
    assert sorted(found) == list(range(60, 70))
    assert report.neighbours == 10 and report.screened == 70


def test_the_screen_per_row_is_the_least_over_the_margins_and_sound():
    checker = ms.RobustnessChecker(three_class_net(), 0.05)
    Z = np.array([[0.1, 0.1], [0.2, 0.05], [0.05, 0.15]])  # class 0: y0 = 0.5 leads
    lower, upper = checker.screen(Z, 0)
    assert lower.shape == upper.shape == (3,)
    for i, z in enumerate(Z):
        each = [checker._screen(z[None, :], margin) for margin in checker.margins(0)]
        assert lower[i] == min(lo[0] for lo, _ in each)
        assert upper[i] == min(up[0] for _, up in each)
        exact = checker.exact(z, 0)
        assert lower[i] <= exact.bound + 1e-7 and exact.value <= upper[i] + 1e-7


class Recorded:
    """A backend recording the settings of each solve, reporting ``status`` instead of
    its own (``None``: its own)."""

    def __init__(self, backend, status=None):
        self.backend, self.status, self.settings = backend, status, []

    def solve(self, model, settings=None):
        self.settings.append(settings)
        outcome = self.backend.solve(model, settings)
        return outcome if self.status is None else \
            dataclasses.replace(outcome, status=self.status)


def test_the_lp_relaxation_its_verdict_settings_and_proof():
    checker = ms.RobustnessChecker(three_class_net(), 0.01, mip_gap=1e-3)
    z = np.array([0.1, 0.1])
    v = checker.check(z, 0, screen=False, lp_screen=True, time_limit=50.0)
    assert v.method == "lp" and v.robust is True and v.threshold == 0.0
    assert type(v.bound) is float and v.competitor == 1 and v.solver_status == "optimal"
    margin = checker.margins(0)[0]
    lp, backend = checker._adversaries[(margin, True)]
    assert not any(var.is_integer() for var in lp.component_data_objects(pyo.Var))
    recorded = checker._adversaries[(margin, True)] = (lp, Recorded(backend))
    bound = checker._relaxed(z, margin, 0.0, time.perf_counter(), 50.0).bound
    (settings,) = recorded[1].settings
    assert 49 < settings.time_limit <= 50 and settings.mip_gap == 1e-3
    at = checker._relaxed(z, margin, bound, time.perf_counter(), None)  # at the threshold
    assert at.robust is True and at.bound == bound and at.threshold == bound
    assert checker._relaxed(z, margin, bound + 1e-6, time.perf_counter(), None) is None
    checker._adversaries[(margin, True)] = (lp, Recorded(backend, Status.FEASIBLE))
    assert checker._relaxed(z, margin, 0.0, time.perf_counter(), None) is None  # no proof


def test_a_bound_at_the_threshold_certifies_and_names_its_competitor():
    checker = ms.RobustnessChecker(three_class_net(), 0.01)
    z = np.array([0.1, 0.1])
    lower, _ = checker.screen(z[None, :], 0)
    v = checker.check(z, 0, threshold=float(lower[0]))
    assert v.robust is True and v.method == "interval" and v.bound == lower[0]
    assert v.competitor == 1  # no margin has a value: the first (y0 - y1)


def test_the_exact_check_within_its_time_limit():
    checker = ms.RobustnessChecker(three_class_net(), 0.01, mip_gap=1e-3)
    z = np.array([0.1, 0.1])
    assert checker.exact(z, 0, time_limit=50.0).robust is True
    v = checker.exact(z, 0, threshold=0.1, time_limit=1e-12)
    assert v.robust is None and v.solver_status == "no_solution"
    assert (v.method, v.threshold, v.competitor) == ("milp", 0.1, 1)
    margin = checker.margins(0)[0]
    model, backend = checker._adversaries[(margin, False)]
    recorded = checker._adversaries[(margin, False)] = (model, Recorded(backend))
    checker.exact(z, 0, time_limit=50.0)
    assert all(49 < s.time_limit <= 50 and s.mip_gap == 1e-3 for s in recorded[1].settings)


def test_the_exact_verdicts_by_the_solvers_answer():
    checker = ms.RobustnessChecker(three_class_net(), 0.01)
    z = np.array([0.3, 0.4])  # y0 - y2 = -0.3 < 0: refuted by the worst model found
    v = checker.exact(z, 0)
    assert v.robust is False and v.competitor == 2 and v.method == "milp"
    assert v.value == pytest.approx(
        ms._margin_value(v.parameters, z, checker.margins(0)[1]), abs=1e-12)
    z = np.array([0.1, 0.1])
    bound = checker.exact(z, 0).bound
    assert checker.exact(z, 0, threshold=bound).robust is True  # at the threshold
    for margin in checker.margins(0):
        model, backend = checker._adversaries[(margin, False)]
        checker._adversaries[(margin, False)] = (model, Recorded(backend, Status.INFEASIBLE))
    v = checker.exact(z, 0)
    assert v.robust is None and v.bound is None  # an infeasible adversary proves nothing
    for margin in checker.margins(0):
        model, backend = checker._adversaries[(margin, False)]
        checker._adversaries[(margin, False)] = (model, Recorded(backend.backend,
                                                                 Status.NO_SOLUTION))
    v = checker.exact(z, 0, threshold=1.0)
    assert v.robust is None and v.value is None and v.parameters is None


def test_a_value_at_or_above_the_threshold_refutes_nothing():
    # a bound below the threshold (a gap) and the worst model's value at it: unproven
    checker = ms.RobustnessChecker(net(), 0.05)
    value = checker.exact(EDGE).value
    model, backend = checker._adversaries[(checker.margins(1)[0], False)]

    class Gap(Recorded):
        def solve(self, model, settings=None):
            outcome = self.backend.solve(model, settings)
            return dataclasses.replace(outcome, bound=outcome.bound - 1.0)

    checker._adversaries[(checker.margins(1)[0], False)] = (model, Gap(backend))
    v = checker.exact(EDGE, threshold=value)
    assert v.robust is None and v.value == value


def test_undecided_rows_are_checked_for_the_target(checker, monkeypatch):
    Z = np.array([[0.0, 0.0], FAR])  # logits -0.5 and 1: class 0, class 1
    monkeypatch.setattr(checker, "screen", lambda Z, target: (np.full(len(Z), -1.0),
                                                              np.full(len(Z), 1.0)))
    found, report = checker.nearest_robust(Z, np.array([0, 1]), FAR, 1, target=0)
    assert found == [0] and report.milp_checks == 2


def test_an_attack_names_the_margin_it_breaks():
    checker = ms.RobustnessChecker(three_class_net(), 0.01)
    v = checker.check(np.array([0.3, 0.4]), 0)  # y0 - y2 = -0.3
    assert v.robust is False and v.method == "attack" and v.competitor == 2


def test_a_refuted_margin_is_the_worst_even_below_an_unproven_value():
    # an unproven margin may have a lower value (its model shifted beyond δ)
    out = ms._combine([verdict(False, -0.5, -0.25, "milp", "optimal", 2),
                       verdict(None, -0.9, -0.5, "milp", "optimal", 3)], 0.0)
    assert out.robust is False and out.competitor == 2 and out.value == -0.25


def test_a_milp_among_the_margins_names_the_method():
    out = ms._combine([verdict(True, 0.5, None, "interval", None, 1),
                       verdict(True, 0.4, None, "milp", "optimal", 2)], 0.0)
    assert out.method == "milp" and out.competitor == 1


def test_the_checkers_own_time_limit():
    checker = ms.RobustnessChecker(net(), 0.05, time_limit=1e-12)
    v = checker.exact(EDGE)
    assert v.robust is None and v.solver_status == "no_solution"
