"""Counterfactuals certified both Δ-robust (model shift) and K-robust (input
perturbations), against exhaustive search on small integer grids: every vertex shift of
Δ, every grid K-perturbation, and the cheapest grid point that is both."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest

import cfopt
from cfopt import Perturbation
from cfopt.formulations.robustness import target_margins
from cfopt.methods import (
    CombinedRobustExplainer,
    PerturbationRobustExplainer,
    Proplace,
    RobustnessChecker,
)
from cfopt.methods import proplace_master as proplace_module
from cfopt.methods.base import query_input_box
from cfopt.models.network import ReLUNetwork
from cfopt.query import ladder
from cfopt.query.solution import start_of
from cfopt.results.robust import CombinedRobustCounterfactual, RobustStatus
from cfopt.space import perturbations as P

from .conftest import train_torch
from .test_perturbations import grid_rows, grid_space, k_neighbours, l1, predict, trained

PERTURBED = {"a": Perturbation.absolute(increase=1, decrease=1),
             "b": Perturbation.absolute(increase=1, decrease=1),
             "c": Perturbation.absolute(increase=1, decrease=0),
             "d": Perturbation.to_categories("p", "q")}
SIGMA, TOLERANCE = 0.01, 0.005


def structure(model) -> ReLUNetwork:
    return cfopt.models.parse_model(model).structure


def least_margin(net: ReLUNetwork, Z: np.ndarray, target: int) -> np.ndarray:
    """The nominal network's least margin of the target class per row of ``Z``."""
    logits = net.logits(Z)
    return np.min([margin.of(logits) for margin in target_margins(net, target)], axis=0)


def vertex_minimum(net: ReLUNetwork, z: np.ndarray, delta: float, target: int) -> float:
    """The least margin of the target at ``z`` over *every* vertex of Δ (every weight and
    bias at ±δ) of a network with one hidden layer, without enumerating the 2^65
    vertices: hidden neuron i reaches the values H_i of ReLU(w_i·z + b_i) over the 2^(d+1)
    vertices of its own parameters (independent of every other neuron's); for fixed
    h ≥ 0 the output vertices give at least c(Wh + b) - |c|₁δ(1ᵀh + 1), attained; that is
    Σ_i g_i h_i + const, least over the product of the H_i coordinate by coordinate."""
    (w1, b1), (w2, b2) = net.parameters
    d = len(z)
    signs = delta * np.array(list(itertools.product((-1.0, 1.0), repeat=d + 1)))
    H = np.maximum((w1[:, None, :] + signs[None, :, :d]) @ z + b1[:, None]
                   + signs[None, :, d], 0.0)                  # (width, 2^(d+1))
    best = np.inf
    for margin in target_margins(net, target):
        c = np.asarray(margin.coefficients)
        g = c @ w2 - margin.scale * delta
        const = c @ b2 - margin.scale * delta
        best = min(best, float((g[:, None] * H).min(axis=1).sum() + const))
    return best


def sampled_vertex_minimum(net: ReLUNetwork, z: np.ndarray, delta: float, target: int,
                           n: int, rng: np.random.Generator) -> float:
    """The least margin over ``n`` random vertices of Δ (forward passes)."""
    worst = np.inf
    for _ in range(n):
        shifted = ReLUNetwork.from_parameters(
            [(w + delta * rng.choice([-1.0, 1.0], w.shape),
              b + delta * rng.choice([-1.0, 1.0], b.shape)) for w, b in net.parameters])
        worst = min(worst, float(least_margin(shifted, z[None, :], target)[0]))
    return worst


def assert_survives(model, space: cfopt.FeatureSpace, r, delta: float, target: int,
                    label, rng: np.random.Generator) -> None:
    """No vertex shift of Δ and no grid K-perturbation flips the certified answer."""
    net = structure(model)
    z = space.encode(r.counterfactual)[0]
    assert vertex_minimum(net, z, delta, target) >= 0
    assert sampled_vertex_minimum(net, z, delta, target, 200, rng) >= 0
    worst = RobustnessChecker(model, delta).exact(z, target).parameters
    assert least_margin(ReLUNetwork.from_parameters(worst), z[None, :], target)[0] >= 0
    neighbours = k_neighbours(space, r.factual.iloc[0], r.counterfactual.iloc[0])
    assert (predict(model, space, neighbours) == label).all()


def brute_force(model, space: cfopt.FeatureSpace, rows: pd.DataFrame, x: pd.DataFrame,
                delta: float, target: int, label, weights=None, l0: float = 0.0
                ) -> tuple[float, float]:
    """The cheapest grid point that is Δ-robust and K-robust, at two levels: every
    margin ≥ σ (the master's: a lower cost than the answer's is impossible), and the
    least the certificates allow (nominal ≥ σ, Δ ≥ σ - t, K > 0, the real model's
    labels). ``weights``: add the setback cost with these L1 weights; ``l0``: add this
    much per changed feature."""
    net = structure(model)
    Z = space.encode(rows)
    costs = l1(space, x.iloc[0], rows) + l0 * (rows != x.iloc[0]).sum(axis=1).to_numpy()
    if weights is not None:
        costs = costs + np.array([P.setback_cost(space, weights, x, rows.iloc[[k]])
                                  for k in range(len(rows))])
    nominal = least_margin(net, Z, target)
    labels = predict(model, space, rows)
    strict = loose = np.inf
    for k in np.argsort(costs, kind="stable"):
        if costs[k] >= strict or labels[k] != label or nominal[k] < SIGMA - 1e-6:
            continue
        shift = vertex_minimum(net, Z[k], delta, target)
        if shift < SIGMA - TOLERANCE:
            continue
        neighbours = k_neighbours(space, x.iloc[0], rows.iloc[k])
        k_margin = least_margin(net, space.encode(neighbours), target).min()
        if k_margin <= 0 or (predict(model, space, neighbours) != label).any():
            continue
        loose = min(loose, costs[k])
        if shift >= SIGMA and k_margin >= SIGMA and nominal[k] >= SIGMA:
            strict = costs[k]
    return strict, loose


def optimal_and_unflippable(method: CombinedRobustExplainer, model, space, rows, x, delta,
                            target, label, rng, setback: bool = False) -> bool:
    """The method's answer for ``x`` is the brute-force optimum (or proven infeasible
    when there is none) and survives every shift and perturbation; whether it found
    one."""
    r = method.explain(x, label)
    strict, loose = brute_force(model, space, rows, x, delta, target, label,
                                method.milp.weights if setback else None,
                                method.milp.objective_terms.get("l0", 0.0))
    assert strict == loose  # the instance pins the optimum down (no margin in between)
    if not np.isfinite(strict):
        assert r.status is RobustStatus.INFEASIBLE and r.counterfactual is None
        return False
    assert r.status is RobustStatus.CERTIFIED, r.message
    assert r.certified and r.certificate.robust and r.k_verdict.robust
    assert r.objective == pytest.approx(strict, abs=1e-6)
    assert r.bound is not None and r.bound <= r.objective + 1e-6
    if setback:
        assert r.setback_cost == pytest.approx(
            P.setback_cost(space, method.milp.weights, x, r.counterfactual))
    assert_survives(model, space, r, delta, target, label, rng)
    return True


@pytest.mark.parametrize("seed,delta,setback", [(0, 0.05, False), (3, 0.02, False),
                                                (0, 0.03, True)])
def test_optimum_equals_brute_force_and_no_certified_point_flips(seed, delta, setback):
    space = grid_space(PERTURBED)
    model, rows = trained(space, seed)
    labels = predict(model, space, rows)
    method = CombinedRobustExplainer(model, space, delta=delta, setback=setback,
                                     sigma=SIGMA, tolerance=TOLERANCE)
    rng = np.random.default_rng(seed)
    done = sum(optimal_and_unflippable(method, model, space, rows,
                                       rows.iloc[[i]].reset_index(drop=True), delta, 1, 1, rng,
                                       setback)
               for i in np.flatnonzero(labels == 0)[::173][:3])
    assert done >= 2


@pytest.mark.parametrize("seed,delta", [(0, 0.05), (3, 0.02), (5, 0.03)])
def test_the_ladder_keeps_the_brute_force_optimum_with_a_cost_per_change(seed, delta,
                                                                         monkeypatch):
    """L1 + L0 (one per changed feature): the first master climbs from one change's
    cost and each later one from the last bound, split by the features a point within
    each radius can change; the optimum is the brute force's with the ladder on and
    off."""
    space = grid_space(PERTURBED)
    model, rows = trained(space, seed)
    labels = predict(model, space, rows)
    climbs: list[float] = []
    climb = proplace_module.climb

    def counting(m, backend, budget, floor, details, parts=()):
        climbs.append(floor)
        return climb(m, backend, budget, floor, details, parts)

    monkeypatch.setattr(proplace_module, "climb", counting)
    monkeypatch.setattr(ladder, "HARD_NEURONS", -1)  # even these small masters climb
    rng = np.random.default_rng(seed)
    for climbing in (True, False):
        method = CombinedRobustExplainer(model, space, delta=delta, sigma=SIGMA,
                                         tolerance=TOLERANCE, ladder=climbing,
                                         objective={"l1": 1.0, "l0": 1.0})
        done = sum(optimal_and_unflippable(method, model, space, rows,
                                           rows.iloc[[i]].reset_index(drop=True), delta, 1,
                                           1, rng)
                   for i in np.flatnonzero(labels == 0)[::173][:3])
        assert done >= 2
        assert bool(climbs) == climbing and (not climbs or min(climbs) == 1.0)
        climbs.clear()


def test_delta_alone_and_k_alone_are_cheaper_and_differ():
    space = grid_space(PERTURBED)
    model, rows = trained(space, 0)
    x = rows.iloc[[0]].reset_index(drop=True)
    delta = 0.05
    # Δ alone: PROPLACE, its region spanned by every Δ-robust grid row (all grid points)
    shift = Proplace(model, space, rows, delta=delta, k=len(rows), sigma=SIGMA,
                     tolerance=TOLERANCE).explain(x, 1)
    alone_k = PerturbationRobustExplainer(model, space, robustness="K", margin=SIGMA).explain(x, 1)
    both = CombinedRobustExplainer(model, space, delta=delta, sigma=SIGMA,
                                   tolerance=TOLERANCE).explain(x, 1)
    for r in (shift, alone_k, both):
        assert r.certified, r.message
    assert shift.objective < both.objective - 1e-6 and alone_k.objective < both.objective - 1e-6
    points = [r.counterfactual.iloc[0].to_dict() for r in (shift, alone_k, both)]
    assert points[0] != points[1] != points[2] != points[0]
    # the Δ-robust answer has a grid K-perturbation that flips it
    neighbours = k_neighbours(space, x.iloc[0], shift.counterfactual.iloc[0])
    assert (predict(model, space, neighbours) != 1).any()
    # the K-robust answer is flipped by the shifted model the Δ-adversary returns
    z = space.encode(alone_k.counterfactual)[0]
    verdict = RobustnessChecker(model, delta).exact(z, 1)
    assert verdict.robust is False
    assert least_margin(ReLUNetwork.from_parameters(verdict.parameters), z[None, :], 1)[0] < 0
    # both adversaries cut the master: shifted models and scenarios
    assert both.certificate.models and both.scenarios


def test_light_heuristics_reach_every_solve_of_the_method_unless_off(monkeypatch):
    """``light_heuristics=True`` (default): every solve on the method's backend (the
    masters and the K-adversary's MILPs) carries the backend's light heuristics, the
    user's ``solver_options`` winning; ``False``: none; the same certified optimum."""
    space = grid_space(PERTURBED)
    model, rows = trained(space, 0)
    x = rows.iloc[[0]].reset_index(drop=True)
    light = cfopt.solvers.make_solver("highs").light_heuristics()
    seen: dict[str, list[dict]] = {}
    answers = {}
    for key, kwargs in {"light": {}, "full": {"light_heuristics": False},
                        "user": {"solver_options": {"mip_heuristic_run_rins": True}}}.items():
        method = CombinedRobustExplainer(model, space, delta=0.05, sigma=SIGMA,
                                         tolerance=TOLERANCE, **kwargs)
        solve = method.backend.solve

        def recording(model_, settings=None, start=None, key=key, solve=solve, **kwargs):
            seen.setdefault(key, []).append(dict(settings.options))
            return solve(model_, settings, start, **kwargs)

        monkeypatch.setattr(method.backend, "solve", recording)
        answers[key] = method.explain(x, 1)
        assert answers[key].certified, answers[key].message
        assert answers[key].certificate.models and answers[key].scenarios
    assert len(seen["light"]) >= 3 and all(o == light for o in seen["light"])
    assert all(o == {} for o in seen["full"])
    assert all(o == {**light, "mip_heuristic_run_rins": True} for o in seen["user"])
    assert answers["light"].objective == pytest.approx(answers["full"].objective, rel=1e-4)
    with pytest.raises(TypeError, match="light_heuristics"):
        CombinedRobustExplainer(model, space, delta=0.05, light_heuristics=1)


def test_multiclass_grid_network():
    space = grid_space(PERTURBED)
    rows = grid_rows(space)
    Z = space.transform(rows)
    rng = np.random.default_rng(4)
    scores = Z @ rng.normal(size=(Z.shape[1], 3))
    model = train_torch(Z, scores.argmax(axis=1), hidden=(8,), n_classes=3, epochs=150)
    labels = predict(model, space, rows)
    delta = 0.02
    method = CombinedRobustExplainer(model, space, delta=delta, sigma=SIGMA,
                                     tolerance=TOLERANCE)
    done = sum(optimal_and_unflippable(method, model, space, rows,
                                       rows.iloc[[i]].reset_index(drop=True), delta,
                                       (labels[i] + 1) % 3, (labels[i] + 1) % 3, rng)
               for i in range(0, len(rows), 257))
    assert done >= 2


def test_answer_is_in_the_result_family_and_statuses_are_honest():
    space = grid_space(PERTURBED)
    model, rows = trained(space, 0)
    x = rows.iloc[[0]].reset_index(drop=True)
    method = cfopt.CombinedRobustExplainer(model, space, delta=0.05)
    r = method.explain(x, 1)
    assert isinstance(r, CombinedRobustCounterfactual) and isinstance(r, cfopt.RobustCounterfactual)
    assert r.status is RobustStatus.CERTIFIED and r.verified and r.method == "delta+k"
    assert list(r.changes().index) == ["c", "d"]
    payload = json.loads(r.to_json())
    assert payload["certified"] and payload["k_verdict"]["robust"] is True
    assert payload["certificate"]["robust"] is True and payload["scenarios"]
    assert "parameters" not in repr(r) and repr(r).startswith("CombinedRobustCounterfactual(")
    # one iteration is not enough here: the last point comes back without a proof
    capped = CombinedRobustExplainer(model, space, delta=0.05, max_iterations=1).explain(x, 1)
    assert capped.status is RobustStatus.ITERATION_LIMIT and not capped.certified
    late = CombinedRobustExplainer(model, space, delta=0.05, time_limit=1e-4).explain(x, 1)
    assert late.status is RobustStatus.TIME_LIMIT and not late.certified
    # a region without any Δ-robust row, and immutables that leave no robust point
    empty = CombinedRobustExplainer(model, space, rows, delta=3.0, k=5).explain(x, 1)
    assert empty.status is RobustStatus.INFEASIBLE and "no Δ-robust data point" in empty.message
    fixed = grid_space(PERTURBED).immutable("a", "b", "d")
    stuck = CombinedRobustExplainer(model, fixed, delta=0.05).explain(x, 1)
    assert stuck.status is RobustStatus.INFEASIBLE and stuck.counterfactual is None
    assert "both Δ-robust and K-robust" in stuck.message
    # the proof covers the counterfactuals whose perturbed features move by min_change
    coarse = CombinedRobustExplainer(model, fixed, delta=0.05, min_change=0.2).explain(x, 1)
    assert coarse.status is RobustStatus.INFEASIBLE
    assert "min_change=0.2 of its range: proven only for those" in coarse.message


def test_a_capped_loop_claims_what_its_checks_proved_and_no_optimality():
    """A loop stopped by its cap returns its last point: ``certified`` is exactly what
    the checks proved at level 0 (here both, the Δ bound below σ - t), the status is the
    cap, and neither the answer nor its message claims optimality."""
    space = grid_space(PERTURBED)
    model, rows = trained(space, 3)
    x = rows.iloc[[0]].reset_index(drop=True)
    options = {"delta": 0.05, "sigma": 0.3, "tolerance": 0.01}
    capped = CombinedRobustExplainer(model, space, max_iterations=1, **options).explain(x, 1)
    done = CombinedRobustExplainer(model, space, **options).explain(x, 1)
    late = CombinedRobustExplainer(model, space, time_limit=1e-4, **options).explain(x, 1)
    for r in (capped, done, late):
        proven = (r.found and r.certificate.robust is True and r.k_verdict is not None
                  and r.k_verdict.robust is True)
        assert r.certified is proven
        assert r.to_dict()["certified"] is proven
        assert r.optimal is (r.status is RobustStatus.CERTIFIED)
        assert r.to_dict()["optimal"] is r.optimal
    assert capped.status is RobustStatus.ITERATION_LIMIT and capped.certified
    assert 0 <= capped.certificate.bound < 0.3 - 0.01
    assert "not claimed optimal" in capped.message and "unproven" not in capped.message
    assert done.status is RobustStatus.CERTIFIED and done.optimal
    assert done.certificate.bound >= 0.3 - 0.01
    assert late.status is RobustStatus.TIME_LIMIT and not late.optimal


def test_composes_with_the_region_and_declared_constraints():
    space = grid_space(PERTURBED).increase_only("c")
    model, rows = trained(space, 3)
    labels = predict(model, space, rows)
    rule = cfopt.LinearConstraint({"a": 1}, "<=", 1, relative=True, name="a_budget")
    method = CombinedRobustExplainer(model, space, rows, delta=0.02, k=30, constraints=[rule])
    certified = 0
    for i in np.flatnonzero(labels == 0)[::211][:3]:
        x = rows.iloc[[i]].reset_index(drop=True)
        r = method.explain(x, 1)
        if not r.certified:
            assert r.status is RobustStatus.INFEASIBLE, r.message
            continue
        before, after = x.iloc[0], r.counterfactual.iloc[0]
        assert after["c"] >= before["c"] and after["a"] <= before["a"] + 1
        assert r.details["neighbours"] == 30
        assert not method.milp.violations(r.counterfactual)  # in the region's hull
        assert_survives(model, space, r, 0.02, 1, 1, np.random.default_rng(0))
        certified += 1
    assert certified >= 1


def test_bad_input_names_the_option():
    space = grid_space(PERTURBED)
    model, rows = trained(space, 0)
    with pytest.raises(ValueError, match="tolerance"):
        CombinedRobustExplainer(model, space, delta=0.05, sigma=0.01, tolerance=0.01)
    with pytest.raises(ValueError, match="labels"):
        CombinedRobustExplainer(model, space, delta=0.05, labels=np.zeros(len(rows)))
    with pytest.raises(ValueError, match="k_tolerance"):
        CombinedRobustExplainer(model, space, delta=0.05, k_tolerance=0)
    with pytest.raises(ValueError, match="delta"):
        CombinedRobustExplainer(model, space, delta=-1)
    for method in (lambda **kw: CombinedRobustExplainer(model, space, delta=0.05, **kw),
                   lambda **kw: PerturbationRobustExplainer(model, space, robustness="K",
                                                            **kw)):
        with pytest.raises(TypeError, match="ladder"):
            method(ladder="yes")


def big_m_widths(block) -> tuple[float, int]:
    """The summed pre-activation bound widths and the stable (fixed) ReLU binaries of a
    block's network copy."""
    variables = list(block.component_data_objects(pyo.Var))
    return (sum(v.ub - v.lb for v in variables if v.parent_component().local_name == "zhat"),
            sum(v.fixed for v in variables if v.parent_component().local_name == "q_relu"))


def test_scenario_copies_get_the_bounds_of_their_own_input_box():
    """A scenario copy's input box is the master's widened by the scenario (exhaustive
    over every grid point the copy can see), and the copy built with it has more stable
    pre-activation bounds than one with the global bounds; the query's answer is the
    same."""
    space = grid_space(PERTURBED).immutable("a").increase_only("b")
    model, rows = trained(space, 0)
    x = rows.iloc[[3 * 7 * 3 + 2 * 3]].reset_index(drop=True)  # a=0, b=3, c=2, d=p
    ex = PerturbationRobustExplainer(model, space, robustness="K", margin=SIGMA)
    m = ex.milp
    ex.explainer.runner.start(x, 1, {})
    scenarios = m.constraints["k_scenarios"]
    scenario = {"a": 1, "b": 2, "d": "q"}
    box = query_input_box(m)
    lo, hi = scenarios.scenario_box(m, scenario, box)
    seen = rows[(rows.a == x.a[0]) & (rows.b >= x.b[0])]  # what the master can take
    copies = pd.DataFrame([scenarios.apply(x.iloc[0], r, scenario) for _, r in seen.iterrows()])
    Z = space.encode(copies)
    assert (Z >= lo - 1e-9).all() and (Z <= hi + 1e-9).all()
    assert (hi - lo).sum() < (box[1] - box[0]).sum() + len(scenario) and (lo <= box[0]).all()
    tight = big_m_widths(scenarios.add_scenario(m, scenario, box))
    loose = big_m_widths(scenarios.add_scenario(m, scenario))
    assert tight[0] < 0.95 * loose[0] and tight[1] >= loose[1]
    scenarios.remove_scenarios(m)
    answers = [PerturbationRobustExplainer(model, space, robustness="K", margin=SIGMA,
                                           query_bounds=on).explain(x, 1) for on in (True, False)]
    assert answers[0].certified and answers[1].certified
    assert answers[0].objective == pytest.approx(answers[1].objective, abs=1e-6)


def test_the_master_gets_the_bounds_of_the_query_box():
    """With ``query_bounds`` the master's network (and each shifted copy, over the same
    box) is bounded over the points that respect actionability: the immutable feature's
    input is pinned and the big-M bounds are tighter than the global ones."""
    space = grid_space(PERTURBED).immutable("a")
    model, rows = trained(space, 0)
    x = rows.iloc[[69]].reset_index(drop=True)
    method = CombinedRobustExplainer(model, space, delta=0.05)
    m, pred = method.milp, method.milp.predictor_constr
    m.set_factual(x)
    m.set_target(1)

    def width(bounds) -> float:
        return float(sum((hi - lo).sum() for lo, hi in bounds[:-1]))

    lo, hi = method.master_box(m, None, True)
    j = space.input_slices()["a"].start
    assert hi[j] - lo[j] < 1e-5
    assert width(pred.layer_bounds()) < 0.95 * width(m.global_layer_bounds)
    pred.set_layer_bounds(m.global_layer_bounds)
    lo, hi = method.master_box(m, None, False)
    assert hi[j] - lo[j] == 1.0 and width(pred.layer_bounds()) == width(m.global_layer_bounds)
    # without actionability constraints the query's box is the region's (or the whole)
    free = CombinedRobustExplainer(model, grid_space(PERTURBED), delta=0.05).milp
    free.set_factual(x)
    whole = [np.array(side) for side in zip(*free.predictor_constr.input_bounds)]
    region = (whole[0] + 0.1, whole[1] - 0.1)
    for given, expected in ((None, whole), (region, region)):
        box = query_input_box(free, given)
        assert all((side == want).all() for side, want in zip(box, expected))


@pytest.mark.parametrize("warm", [True, False])
def test_each_master_solve_after_the_first_starts_from_the_last_point(warm, monkeypatch):
    """``warm_start`` (without the ladder, whose masters after the first climb from a
    bound): the master's second and later solves get the last point's feature values
    as a MIP start (off: none); the answer is the same."""
    space = grid_space(PERTURBED)
    model, rows = trained(space, 0)
    x = rows.iloc[[0]].reset_index(drop=True)
    method = CombinedRobustExplainer(model, space, delta=0.05, warm_start=warm, ladder=False)
    starts, points = [], []
    solve = method.backend.solve

    def recording(solved, settings=None, start=None, **kwargs):
        outcome = solve(solved, settings, start, **kwargs)
        if solved is method.milp:
            starts.append(start)
            points.append(method.milp.decode())
        return outcome

    monkeypatch.setattr(method.backend, "solve", recording)
    r = method.explain(x, 1)
    assert r.certified and r.optimal and r.certificate.iterations == len(starts) >= 2
    assert starts[0] is None
    if not warm:
        assert all(start is None for start in starts)
        return
    for start, previous in zip(starts[1:], points):
        assert start is not None
        values = {v.name: value for v, value in start.items()}
        expected = {v.name: value for v, value in start_of(method.milp, previous).items()}
        assert values == pytest.approx(expected)


def test_the_lp_screen_switch_reaches_the_delta_adversary():
    """``lp_screen``: the Δ-adversary's checks solve LP relaxations before any MILP (off:
    none), fewer MILPs run, and the answer is the same. Two hidden layers: with one,
    the interval screen is exact and decides every check."""
    space = grid_space(PERTURBED)
    rows = grid_rows(space)
    Z = space.transform(rows)
    score = Z @ np.random.default_rng(5).normal(size=Z.shape[1])
    model = train_torch(Z, (score > np.median(score)).astype(int), hidden=(8, 8), epochs=80)
    labels = predict(model, space, rows)
    answers, milps = [], []
    for on in (True, False):
        method = CombinedRobustExplainer(model, space, delta=0.05, lp_screen=on)
        for i in np.flatnonzero(labels == 0)[::151][:4]:
            answers.append(method.explain(rows.iloc[[i]].reset_index(drop=True), 1))
        assert (method.checker.lp_checks > 0) is on
        milps.append(method.checker.milp_checks)
    assert milps[0] < milps[1]
    for a, b in zip(answers[:4], answers[4:]):
        assert a.status is b.status and a.certified is b.certified
        assert a.objective == pytest.approx(b.objective, abs=1e-6)
