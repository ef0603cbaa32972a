"""A solve up the ladder of radii (cfopt.query.ladder) keeps the declared problem's
optimum, from any proven lower bound, and K-robust masters climb from the last one."""

from __future__ import annotations

import time

import numpy as np
import pytest

import cfopt
from cfopt.constraints.scenarios import KScenarios
from cfopt.query import ladder
from cfopt.query.ladder import RUNGS, _rungs, within_radius
from cfopt.query.restrictions.relu import radius_moves

from .conftest import train_torch
from .test_perturbations import PERTURBED, cheapest_k_robust, grid_space, predict, trained

OBJECTIVE = {"l1": 1.0, "l0": 0.5}
#: every change costs 1 beside its weighted move: within a radius below 2, one change
ONE_PER_CHANGE = {"l1": 1.0, "l0": 1.0}


def rejected(explainer: cfopt.Explainer, X, n: int) -> list[int]:
    pred = explainer.milp.predict(X)
    return [i for i in range(len(X)) if pred[i] == 0][:n]


@pytest.mark.parametrize("objective, share", [(OBJECTIVE, 0.3), (OBJECTIVE, 0.8),
                                               (OBJECTIVE, 0.99), (ONE_PER_CHANGE, 0.5),
                                               (ONE_PER_CHANGE, 0.97)])
def test_a_climb_from_any_lower_bound_keeps_the_optimum(german, german_model, objective,
                                                        share, monkeypatch):
    """From a bound a little or far below the optimum: several rungs fail (no point
    within them), the last one holds the optimum, and the bound stays below it. With one
    per change, a radius below 2 allows one changed feature: the rung is solved as one
    problem per feature (split)."""
    monkeypatch.setattr(ladder, "HARD_NEURONS", -1)  # the gate would solve these whole
    net, space = german_model
    plain = cfopt.Explainer(net, space, objective=objective, tighten_per_query=False,
                            mip_gap=1e-9)
    climbing = cfopt.Explainer(net, space, objective=objective, mip_gap=1e-9)
    rungs, split = [], 0
    for i in rejected(plain, german.X, 4):
        x = german.X.iloc[[i]]
        want = plain.explain(x)
        settings = climbing.runner.start(x, None, {})
        got = climbing.runner.answer(settings, time.perf_counter(),
                                     floor=share * want.objective)
        assert got.status is cfopt.Status.OPTIMAL and got.verified
        assert got.objective == pytest.approx(want.objective, rel=1e-6, abs=1e-9)
        assert share * want.objective - 1e-9 <= got.bound <= got.objective + 1e-9
        radii = [radius for radius, *_ in got.details["ladder"]]
        # the ladder climbs past radii below the optimum only, and stops at one above it
        assert radii == sorted(radii) and all(r < want.objective for r in radii[:-1])
        assert radii[-1] >= want.objective * (1 - 1e-6)
        rungs.append(len(radii))
        split += got.details.get("split", 0)
    # far below, the first rungs hold no point: the solve climbs
    assert share > 0.9 or max(rungs) > 1
    assert split > 0 or objective is OBJECTIVE


@pytest.mark.parametrize("seed", [3, 5])
def test_k_robust_masters_climb_and_the_optimum_equals_brute_force(seed, monkeypatch):
    """With an L1 + L0 cost (at most r / 0.5 changed features within a radius r), each
    master after the first climbs from the last bound (even these small ones: the gate
    on unstable neurons is off), its scenario copies bounded within each radius, and
    the loop's optimum is the cheapest K-robust grid point."""
    monkeypatch.setattr(ladder, "HARD_NEURONS", -1)
    space = grid_space(PERTURBED)
    model, rows = trained(space, seed)
    labels = predict(model, space, rows)
    ex = cfopt.PerturbationRobustExplainer(model, space, robustness="K", margin=1e-4,
                                           objective=OBJECTIVE)
    flat = cfopt.PerturbationRobustExplainer(model, space, robustness="K", margin=1e-4,
                                             objective=OBJECTIVE, ladder=False)
    climbed = 0
    for i in np.flatnonzero(labels == 0)[::61][:4]:
        x = rows.iloc[[i]].reset_index(drop=True)
        result = ex.explain(x, 1)
        best = cheapest_k_robust(model, space, rows, labels, x, lambda z: 0.5 * sum(
            z.iloc[0][n] != x.iloc[0][n] for n in space.names))
        if not np.isfinite(best):
            assert result.status is cfopt.RobustStatus.INFEASIBLE
            continue
        assert result.certified and result.optimal, result.message
        assert result.objective == pytest.approx(best, abs=1e-6)
        without = flat.explain(x, 1)  # the switch off: no master climbs, same optimum
        assert "ladder" not in without.answer.details
        assert without.objective == pytest.approx(best, abs=1e-6)
        if result.iterations > 1:
            assert result.answer.details["ladder"]
            climbed += 1
    assert climbed >= 1


def test_scenario_copies_are_bounded_within_the_radius_and_restored():
    space = grid_space(PERTURBED)
    model, rows = trained(space, 3)
    labels = predict(model, space, rows)
    ex = cfopt.PerturbationRobustExplainer(model, space, robustness="K", objective=OBJECTIVE)
    m = ex.milp
    x = rows.iloc[[int(np.flatnonzero(labels == 0)[0])]].reset_index(drop=True)
    ex.explainer.runner.start(x, 1, {})
    scenarios = m.constraints["k_scenarios"]
    assert isinstance(scenarios, KScenarios)
    scenarios.add_scenario(m, {"a": 6, "d": "r"})
    ((copy, base),) = scenarios.network_copies(m)
    assert np.allclose(base, m.space.encode(scenarios.apply(x.iloc[0], x.iloc[0],
                                                            {"a": 6, "d": "r"}).to_frame().T)[0])

    def widths() -> list[np.ndarray]:
        return [hi - lo for lo, hi in copy.layer_bounds()]

    before = widths()
    with within_radius(m, 0.6, {}):  # one change at most, by 0.1 of a range
        inside = widths()
    assert sum(w.sum() for w in inside) < 0.5 * sum(w.sum() for w in before)
    assert all(np.array_equal(b, a) for b, a in zip(before, widths()))
    scenarios.remove_scenarios(m)
    assert scenarios.network_copies(m) == []


def test_rungs_stop_just_below_each_count_of_changes_they_pass(german, german_model):
    """With a cost b per change, the ladder tries the radius just below every multiple
    k b it passes (at most k - 1 changes, a far smaller problem; k - 1 up to
    COUNT_RUNGS) before going past it; without an L0 term, or far above those counts,
    the rungs are the floor's multiples only."""
    net, space = german_model
    with_l0 = cfopt.build(net, space, objective={"l1": 1.0, "l0": 0.5})
    assert _rungs(with_l0, 0.9) == pytest.approx(
        [1.0 * (1 - 1e-6), 0.9 * 1.125, 0.9 * 1.5, 1.5 * (1 - 1e-6), 2.0 * (1 - 1e-6),
         0.9 * 3], rel=1e-12)  # not below 2.5: at most COUNT_RUNGS = 3 changes
    assert _rungs(with_l0, 100.0) == pytest.approx([100.0 * f for f in RUNGS])
    with_l0.set_factual(german.X.iloc[[1]])
    with_l0.set_target(1 - int(with_l0.predict(german.X.iloc[[1]])[0]))
    for radius, changes in ((1.5 * (1 - 1e-6), 2), (2.0 * (1 - 1e-6), 3)):
        assert radius_moves(with_l0, radius).most == changes
    plain = cfopt.build(net, space, objective="l1")
    assert _rungs(plain, 0.9) == pytest.approx([0.9 * f for f in RUNGS])


def test_a_one_layer_network_is_solved_whole_and_a_deeper_one_climbs(german, german_model):
    """The gate counts unstable neurons beyond the first hidden layer: a one-layer
    network's solve does not climb, the two-layer one's does, both to the plain
    solve's optimum."""
    net, space = german_model
    shallow = train_torch(space.transform(german.X), german.y.to_numpy(), hidden=(10,))
    for model, climbs in ((shallow, False), (net, True)):
        ex = cfopt.Explainer(model, space, objective=OBJECTIVE, mip_gap=1e-9)
        plain = cfopt.Explainer(model, space, objective=OBJECTIVE, mip_gap=1e-9,
                                tighten_per_query=False)
        x = german.X.iloc[[rejected(ex, german.X, 1)[0]]]
        settings = ex.runner.start(x, None, {})
        got = ex.runner.answer(settings, time.perf_counter(),
                               floor=ladder.first_floor(ex.milp))
        assert ("ladder" in got.details) is climbs
        assert got.objective == pytest.approx(plain.explain(x).objective, rel=1e-6)
