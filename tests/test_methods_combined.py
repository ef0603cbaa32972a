"""Counterfactuals certified Δ-robust and K-robust (:mod:`cfopt.methods.combined`): the
master's messages and answers by hand, the options and their errors, and the loop end
to end on a two-feature network built by hand (tiny HiGHS solves), with and without a
plausible region."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from cfopt import Perturbation
from cfopt.methods import combined as cb
from cfopt.results.robust import RobustStatus
from cfopt.results.status import Status
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace


# ------------------------------------------------------------------ the master
def master(region=False, models=2, scenarios=3):
    m = SimpleNamespace(predictor_constr=object())
    adversary = SimpleNamespace(models=[object()] * models)
    kept = SimpleNamespace(scenarios=[{}] * scenarios, min_change=0.05)
    return cb.CombinedMaster(m, None, 0.25, adversary, kept, region=region,
                             warm_start=True, ladder=True)


def test_the_master_keeps_its_options():
    p = master(region=True)
    assert p.region is True and p.warm_start is True and p.ladder is True
    assert p.sigma == 0.25 and p.cutoff is False and p.active_set is False
    q = cb.CombinedMaster(SimpleNamespace(), None, 0.5, SimpleNamespace(models=[]),
                          SimpleNamespace())
    assert (q.region, q.warm_start, q.ladder) == (False, False, False)


@pytest.mark.parametrize("region, where", [(False, ""), (True, " in the plausible region")])
def test_the_infeasible_master_names_what_it_covers(region, where):
    assert master(region).infeasible() == (
        f"no point{where} satisfies the constraints and is valid with margin 0.25 for the "
        f"model, the 2 shifted model(s) and the 3 K-perturbation scenario(s) collected, "
        f"with every perturbed numeric feature kept or moved by at least min_change=0.05 "
        f"of its range: proven only for those counterfactuals, none of which is both "
        f"Δ-robust and K-robust with margin 0.25{where} (a smaller move of such a feature "
        f"is not covered)")


def test_a_verified_point_goes_to_the_adversaries_with_its_class(monkeypatch):
    row = pd.DataFrame({"a": [1.0]})
    solution = SimpleNamespace(verified=True, row=row, predicted=1, problems=[])
    answer = master().answer(solution, Status.OPTIMAL, 0.75)
    assert (answer.status, answer.point, answer.bound, answer.label) == \
        (Status.OPTIMAL, row, 0.75, 1)


def test_an_unverified_point_is_no_answer(monkeypatch):
    p = master()
    seen = []
    monkeypatch.setattr(cb, "failed_checks",
                        lambda m, predicted, problems: seen.append((m, predicted,
                                                                    problems)) or "why")
    solution = SimpleNamespace(verified=False, row="row", predicted=0, problems=["p"])
    answer = p.answer(solution, Status.OPTIMAL, 0.75)
    assert answer.status is Status.VERIFICATION_FAILED and answer.point is None
    assert answer.bound == 0.75 and seen == [(p.m, 0, ["p"])]
    assert answer.message == ("the master's point failed verification: why; no "
                              "counterfactual returned")


# ------------------------------------------------------------------ end to end
SHIFT = Perturbation.absolute(increase=1, decrease=1)


def space_of() -> FeatureSpace:
    return FeatureSpace([Feature(name, "integer", lower=0, upper=6, shift=0, scale=6,
                                 spread=6, perturbation=SHIFT) for name in ("a", "b")])


def net() -> torch.nn.Sequential:
    """logit = z_a + z_b / 2 - 1 on z = v / 6 (ReLUs always active)."""
    first, last = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
    with torch.no_grad():
        first.weight.copy_(torch.eye(2))
        first.bias.zero_()
        last.weight.copy_(torch.tensor([[1.0, 0.5]]))
        last.bias.fill_(-1.0)
    return torch.nn.Sequential(first, torch.nn.ReLU(), last)


FACTUAL = pd.DataFrame({"a": [0], "b": [3]})
DATA = pd.DataFrame({"a": [6, 6, 5, 0, 1], "b": [6, 4, 6, 0, 1]})


def test_a_point_certified_both_ways():
    method = cb.CombinedRobustExplainer(net(), space_of(), delta=0.01, sigma=0.05,
                                        tolerance=0.025)
    r = method.explain(FACTUAL, 1)
    assert r.status is RobustStatus.CERTIFIED and r.certified and r.optimal
    assert r.k_verdict.robust is True and r.certificate.robust is True
    row = r.counterfactual.iloc[0]
    assert row["a"] / 6 + (row["b"] - 1 * (row["b"] == 3)) / 12 - 1 >= 0.05 - 1e-9
    assert r.certificate.threshold == pytest.approx(0.025)
    assert r.certificate.master_margin == 0.05 and r.certificate.iterations >= 2
    assert r.setback_cost is not None and r.scenarios
    assert set(r.certificate.times) == {"master", "adversary"}
    assert r.bound == pytest.approx(r.objective, rel=1e-3)
    assert method.scenarios.scenarios == [] and method._build_pending is False
    assert r.details == {}


def test_no_point_robust_both_ways_descends_below_sigma():
    # the greatest logit is 0.5 (at a = b = 6): σ = 2 and σ - t = 1 are out of reach
    method = cb.CombinedRobustExplainer(net(), space_of(), delta=0.01, sigma=2.0,
                                        tolerance=1.0)
    r = method.explain(FACTUAL, 1)
    assert r.certificate.master_margin == pytest.approx(0.01) and \
        r.certificate.threshold == 0.0
    assert r.message.startswith("no point is Δ-robust with margin σ=2 nor 1 (master "
                                "infeasible); decided at margin 0.01")


def test_the_iteration_cap_stops_the_loop():
    r = cb.CombinedRobustExplainer(net(), space_of(), delta=0.01, sigma=0.05,
                                   tolerance=0.025, max_iterations=1).explain(FACTUAL, 1)
    assert r.status is RobustStatus.ITERATION_LIMIT and not r.certified
    assert r.certificate.iterations == 1


def test_a_region_without_robust_points_is_infeasible():
    weak = pd.DataFrame({"a": [5, 0, 1], "b": [4, 0, 1]})  # one target row, logit 1/6
    method = cb.CombinedRobustExplainer(net(), space_of(), weak, delta=0.5,
                                        k=2, sigma=0.05, tolerance=0.025)
    r = method.explain(FACTUAL, 1)
    assert r.status is RobustStatus.INFEASIBLE and r.counterfactual is None
    assert r.message == ("no Δ-robust data point (δ=0.5) among the 1 rows predicted as "
                         "the target: the plausible region holds no robust point")
    assert r.details["neighbours"] == 0 and "region" in r.certificate.times
    assert r.optimal is False and r.bound is None


def test_a_point_in_the_plausible_region():
    method = cb.CombinedRobustExplainer(net(), space_of(), DATA, delta=0.01, k=2,
                                        sigma=0.05, tolerance=0.025)
    r = method.explain(FACTUAL, 1)
    assert r.status is RobustStatus.CERTIFIED and r.details["neighbours"] == 2
    assert set(r.details) == {"neighbours", "region_screened", "region_milp_checks"}
    hull = DATA.iloc[:3].to_numpy(dtype=float)
    row = r.counterfactual.iloc[0].to_numpy(dtype=float)
    assert np.all(row >= hull.min(axis=0) - 1e-9) and np.all(row <= hull.max(axis=0) + 1e-9)
    assert row[0] >= 5  # every point of the region has a >= 5


@pytest.mark.parametrize("options, error, says", [
    ({"sigma": 0.01, "tolerance": 0.02}, ValueError, "tolerance"),
    ({"k_tolerance": 0.0}, ValueError, "k_tolerance must be a positive number"),
    ({"max_iterations": 0}, ValueError, "max_iterations must be a positive integer"),
    ({"query_bounds": 1}, TypeError, "query_bounds must be True or False"),
    ({"vertex_envelope": 1}, TypeError, "vertex_envelope must be True or False"),
    ({"ladder": 1}, TypeError, "ladder must be True or False"),
    ({"warm_start": 1}, TypeError, "warm_start must be True or False"),
    ({"lp_screen": 1}, TypeError, "lp_screen must be True or False"),
    ({"labels": [1]}, ValueError,
     r"^labels are those of data; give data \(the plausible region\) too$")])
def test_bad_options_are_named(options, error, says):
    with pytest.raises(error, match=says):
        cb.CombinedRobustExplainer(net(), space_of(), delta=0.01, **options)


def test_the_options_are_kept():
    method = cb.CombinedRobustExplainer(net(), space_of(), delta=0.01, sigma=0.2,
                                        tolerance=0.1, k_tolerance=1e-3, max_iterations=7,
                                        query_bounds=False, vertex_envelope=False,
                                        ladder=False, warm_start=True, lp_screen=False,
                                        min_change=0.1)
    assert (method.sigma, method.tolerance, method.max_iterations) == (0.2, 0.1, 7)
    assert (method.query_bounds, method.vertex_envelope, method.ladder, method.warm_start,
            method.lp_screen) == (False, False, False, True, False)
    assert method.k_adversary.tolerance == 1e-3 and method.scenarios.min_change == 0.1
    assert method.region is None and method.build_time > 0
    assert method.method == "delta+k"


def test_the_defaults():
    method = cb.CombinedRobustExplainer(net(), space_of(), DATA, delta=0.01)
    assert (method.sigma, method.tolerance, method.max_iterations) == (0.01, 0.005, 50)
    assert (method.query_bounds, method.vertex_envelope, method.ladder, method.warm_start,
            method.lp_screen, method.light_heuristics) == (True, True, True, False, True, True)
    assert method.region.k == 20 and method.region.labels is None
    assert method.k_adversary.tolerance == 1e-6
    assert method.scenarios.min_change == cb.MIN_CHANGE
    s = method.settings
    assert (s.time_limit, s.mip_gap, s.threads, s.seed) == (None, 1e-4, 1, 0)
    assert s.options == method.backend.light_heuristics() and method.backend.name == "highs"
    assert method.k_adversary.settings is s
    m = method.milp
    assert m.bound_tightening.method == "lp" and m.objective_terms == {"l1": 1.0}
    assert m.change_cap == float("inf") and m.component("setback") is None
    assert method.k_adversary.m.bound_tightening.method == "lp"
    assert method.checker is method.region.checker(m)


def test_the_options_reach_the_settings_the_region_and_the_models():
    labels = np.array([1, 1, 1, 0, 0])
    t = time.perf_counter()
    method = cb.CombinedRobustExplainer(
        net(), space_of(), DATA, delta=0.01, labels=labels, setback=True, k=2,
        light_heuristics=False, time_limit=30.0, threads=2, seed=7, mip_gap=0.01,
        solver="cbc", solver_options={"seconds": 5}, objective="linf",
        weights={"a": 2.0, "b": 1.0}, max_changes=1, bound_tightening="interval")
    elapsed = time.perf_counter() - t
    assert method.light_heuristics is False
    s = method.settings
    assert (s.time_limit, s.mip_gap, s.threads, s.seed, s.options) == \
        (30.0, 0.01, 2, 7, {"seconds": 5})
    region = method.region
    assert list(region.labels) == list(labels) and region.k == 2
    assert (region.solver, region.name) == ("cbc", "plausible_region")
    m = method.milp
    assert m.component("plausible_region") is not None and m.component("setback") is not None
    assert m.objective_terms == {"linf": 1.0} and m.weights == {"a": 2.0, "b": 1.0}
    assert m.change_cap == 1 and m.bound_tightening.method == "interval"
    assert method.k_adversary.m.bound_tightening.method == "interval"
    assert method.k_adversary.backend is method.backend
    assert 0 < method.build_time <= elapsed


def test_without_a_region_the_checker_is_the_models_own():
    method = cb.CombinedRobustExplainer(net(), space_of(), delta=0.01, solver="cbc")
    assert method.checker.backend.name == "cbc" and method.checker.delta == 0.01


def test_the_build_time_counts_in_the_first_query_only():
    method = cb.CombinedRobustExplainer(net(), space_of(), delta=0.01, sigma=0.05,
                                        tolerance=0.025, max_iterations=1)
    method.build_time = 1000.0
    assert method.explain(FACTUAL, 1).total_time >= 1000.0
    assert method.explain(FACTUAL, 1).total_time < 1000.0
