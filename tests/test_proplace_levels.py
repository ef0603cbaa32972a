"""PROPLACE's claims at σ (issue 38 item 4): a query whose master at margin σ is
infeasible is decided again at the certification level σ - t, and once more at t/100
when that master is infeasible too, so the status does not depend on the speed levers,
and the answer says which margin its claims are about (``certificate.master_margin``)."""

from __future__ import annotations

import dataclasses

import pytest

from cfopt.results.robust import RobustStatus

from .differential_robust import build, check_claim, reference_for, solve
from .differential_robust_instances import make_robust_instance


@pytest.fixture(scope="module")
def instance():
    # the harness's seed 1197: with every lever on, the first master at σ = 0.05 is
    # infeasible after one cut; with every lever off, the loop stops at a point whose
    # worst case over Δ is 0.045, in [σ - t, σ)
    return dataclasses.replace(make_robust_instance(1197, "proplace"), solver="highs")


def test_the_status_does_not_depend_on_the_levers(instance) -> None:
    on, off = (build(instance, levers).explain(instance.x, target=instance.target)
               for levers in (True, False))
    assert on.status is off.status is RobustStatus.CERTIFIED
    assert on.certified and off.certified
    assert on.objective == pytest.approx(off.objective)
    # levers on: the σ-master was infeasible, so the claims are about σ - t
    assert on.certificate.master_margin == pytest.approx(instance.sigma - instance.tolerance)
    assert on.certificate.threshold == 0.0 and on.certificate.bound >= 0
    assert "no point is Δ-robust with margin σ=0.05 (master infeasible); decided at " \
           "margin 0.04" in on.message
    assert on.to_dict()["certificate"]["master_margin"] == pytest.approx(0.04)
    # levers off: the loop stopped at σ's master, whose claims are about σ
    assert off.certificate.master_margin == instance.sigma
    assert off.certificate.threshold == pytest.approx(instance.sigma - instance.tolerance)


def test_the_referee_accepts_both_answers(instance) -> None:
    claims = [solve(instance, levers) for levers in (True, False)]
    ref = reference_for(instance, claims[0].region)
    for claim in claims:
        assert claim.status == "certified" and check_claim(instance, ref, claim) == []


@pytest.mark.parametrize("cap, status, margin", [
    (1, RobustStatus.ITERATION_LIMIT, 0.05),  # the cap: the σ-master's one solve
    (2, RobustStatus.CERTIFIED, 0.04),        # one iteration left for σ - t
])
def test_the_iteration_cap_is_shared_by_both_decisions(instance, cap, status, margin) -> None:
    method = build(instance)
    method.max_iterations = cap
    r = method.explain(instance.x, target=instance.target)
    assert r.status is status and r.certificate.master_margin == pytest.approx(margin)
    assert r.certificate.iterations == cap and not (r.optimal and cap == 1)
    if status is RobustStatus.ITERATION_LIMIT:
        assert r.counterfactual is None
        assert "the iteration cap came before deciding at margin 0.04" in r.message


def test_the_combined_method_decides_at_sigma_minus_t_too() -> None:
    # the harness's Δ+K seed 5006: no point is Δ- and K-robust with margin σ = 0.05,
    # one is with σ - t = 0.025 (a certified answer, not "infeasible")
    inst = make_robust_instance(5006, "delta+k")
    claim = solve(inst)
    assert claim.status == "certified" and claim.master_margin == pytest.approx(0.025)
    assert "decided at margin 0.025" in claim.message
    ref = reference_for(inst, claim.region)
    assert check_claim(inst, ref, claim) == []


@pytest.fixture(scope="module")
def two_levels_down():
    # the harness's seed 122332 (σ = 0.01, t = 0.005): with every lever on, the masters
    # at σ and at σ - t are infeasible; with every lever off, the loop at σ - t stops at
    # a point whose worst case over Δ is 0.0021, in [0, σ - t)
    return make_robust_instance(122332, "proplace")


def test_an_infeasible_master_at_sigma_minus_t_descends_to_t_over_100(two_levels_down) -> None:
    inst = two_levels_down
    on, off = (build(inst, levers).explain(inst.x, target=inst.target)
               for levers in (True, False))
    assert on.status is off.status is RobustStatus.CERTIFIED
    assert on.objective == pytest.approx(off.objective) and on.optimal
    assert on.certificate.master_margin == pytest.approx(inst.tolerance / 100)
    assert off.certificate.master_margin == pytest.approx(inst.sigma - inst.tolerance)
    assert 0 <= on.certificate.bound < inst.sigma - inst.tolerance
    assert "no point is Δ-robust with margin σ=0.01 nor 0.005 (master infeasible); decided " \
           "at margin 5e-05" in on.message
    claims = [solve(inst, levers) for levers in (True, False)]
    ref = reference_for(inst, claims[0].region)
    for claim in claims:
        assert check_claim(inst, ref, claim) == []


def test_the_iteration_cap_comes_before_the_last_level(two_levels_down) -> None:
    method = build(two_levels_down)
    method.max_iterations = 2  # one master at σ, one at σ - t, none left for t/100
    r = method.explain(two_levels_down.x, target=two_levels_down.target)
    assert r.status is RobustStatus.ITERATION_LIMIT and r.counterfactual is None
    assert r.certificate.master_margin == pytest.approx(0.005) and not r.optimal
    assert "the iteration cap came before deciding at margin 5e-05" in r.message
