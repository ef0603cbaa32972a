"""PROPLACE: the exact Δ-robustness adversary, the plausible region, the cutting-set
loop and its baselines."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
import torch
from sklearn.neural_network import MLPRegressor

import cfopt
from cfopt.formulations.robustness import (
    AdversaryModel,
    Margin,
    add_shifted_copy,
    attack,
    max_shift,
    recover_parameters,
)
from cfopt.methods import MILPR, RNCE, NonRobustMILP, Proplace, RobustnessChecker
from cfopt.methods import proplace_master as proplace_module
from cfopt.methods.adversaries.model_shift import ModelShiftAdversary
from cfopt.methods.cutting_set import Check, MasterAnswer
from cfopt.models.network import ReLUNetwork
from cfopt.query import incumbents, ladder
from cfopt.query.ladder import within_radius
from cfopt.query.restrictions.relu import objective_value
from cfopt.results.robust import RobustStatus
from cfopt.results.status import Status

from .conftest import train_torch


def _net(sizes: tuple[int, ...], seed: int) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1]).double()


def _params(net: torch.nn.Sequential) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy())
            for m in net if isinstance(m, torch.nn.Linear)]


def forward(params: list, Z: np.ndarray) -> np.ndarray:
    """The logit of the network ``params`` on the rows of ``Z``."""
    return ReLUNetwork.from_parameters(params).logits(Z)[:, 0]


def _vertex_minimum(params: list, z: np.ndarray, delta: float, sign: int) -> float:
    """The minimum signed logit over every vertex of the parameter box (2-h-1 nets:
    the minimum is attained at a vertex, see the test)."""
    (w1, b1), (w2, b2) = params
    h_all = []
    n1 = w1.size + b1.size
    for s in itertools.product((-delta, delta), repeat=n1):
        s = np.array(s)
        w = w1 + s[:w1.size].reshape(w1.shape)
        h_all.append(np.maximum(w @ z + b1 + s[w1.size:], 0.0))
    H = np.array(h_all)                                  # (vertices, hidden)
    best = np.inf
    for s in itertools.product((-delta, delta), repeat=w2.size + 1):
        s = np.array(s)
        out = sign * (H @ (w2[0] + s[:-1]) + b2[0] + s[-1])
        best = min(best, float(out.min()))
    return best


@pytest.mark.parametrize("seed", range(4))
def test_adversary_equals_vertex_enumeration(seed: int) -> None:
    # For one hidden layer the minimum over the box is attained at a vertex: the output
    # is linear in the output parameters, and each hidden neuron's ReLU(w·z + b) is a
    # monotone function of an affine function of its own parameters.
    net = _net((2, 3, 1), seed)
    params = _params(net)
    rng = np.random.default_rng(seed)
    checker = RobustnessChecker(net, 0.1)
    for _ in range(3):
        z = rng.uniform(-1.5, 1.5, 2)  # negative inputs: the first layer uses |z|
        for sign in (1, -1):
            verdict = checker.exact(z, 1 if sign == 1 else 0)
            expected = _vertex_minimum(params, z, 0.1, sign)
            assert verdict.bound == pytest.approx(expected, abs=1e-6)
            assert verdict.value == pytest.approx(expected, abs=1e-6)
            assert verdict.robust is (expected >= 0)


def test_certificates_never_contradicted_by_sampled_models() -> None:
    net = _net((4, 8, 8, 1), 3)
    params = _params(net)
    delta = 0.05
    checker = RobustnessChecker(net, delta)
    rng = np.random.default_rng(0)
    for _ in range(4):
        z = rng.uniform(0, 1, 4)
        verdict = checker.exact(z)
        # 400 models: uniform in the box and on its vertices
        worst = np.inf
        for k in range(400):
            draw = (lambda shape: rng.uniform(-delta, delta, shape)) if k % 2 else \
                (lambda shape: delta * rng.choice([-1.0, 1.0], shape))
            shifted = [(w + draw(w.shape), b + draw(b.shape)) for w, b in params]
            worst = min(worst, float(forward(shifted, z[None, :])[0]))
        assert verdict.bound <= worst + 1e-9
        # the screen brackets the exact minimum
        lower = checker.net.shifted_bounds(z[None, :], delta)[-1][0][0, 0]
        upper = attack(checker.net, z[None, :], delta, Margin((1.0,)))[0]
        assert lower <= verdict.bound + 1e-9 and verdict.value <= upper + 1e-9


def test_recovered_parameters_reproduce_the_adversary() -> None:
    net = _net((5, 6, 4, 1), 7)
    delta = 0.03
    checker = RobustnessChecker(net, delta)
    rng = np.random.default_rng(1)
    for sign in (1, -1):
        z = rng.uniform(-1, 1, 5)
        model = AdversaryModel(checker.net, z, delta, Margin((float(sign),)))
        outcome = checker.backend.solve(model, checker.settings)
        assert outcome.status is cfopt.Status.OPTIMAL
        params = recover_parameters(checker.net, z, delta, model.targets(),
                                    Margin((float(sign),)))
        assert max_shift(checker.net, params) <= delta * (1 + 1e-12)
        assert sign * forward(params, z[None, :])[0] == pytest.approx(outcome.objective,
                                                                      abs=1e-6)


def test_adversary_models_are_built_once_and_moved_to_each_point(monkeypatch) -> None:
    # one MILP per margin, moved between points by its bounds (set_point): the same
    # verdicts as a model built afresh at each point, stable neurons fixed and freed
    import cfopt.methods.adversaries.model_shift as model_shift

    built = []

    class Counted(AdversaryModel):
        def __init__(self, *args) -> None:
            built.append(args[-1])
            super().__init__(*args)

    monkeypatch.setattr(model_shift, "AdversaryModel", Counted)
    net = _net((4, 8, 8, 1), 13)
    checker = RobustnessChecker(net, 0.05)
    rng = np.random.default_rng(3)
    for z in rng.uniform(-1, 1, (6, 4)):
        for target, sign in ((1, 1.0), (0, -1.0)):
            verdict = checker.exact(z, target)
            fresh = AdversaryModel(checker.net, z, 0.05, Margin((sign,)))
            outcome = checker.backend.solve(fresh, checker.settings)
            assert verdict.bound == pytest.approx(outcome.bound, abs=1e-6)
    assert sorted(m.coefficients for m in built) == [(-1.0,), (1.0,)]  # one per margin


@pytest.mark.parametrize("sizes,seed", [((4, 8, 8, 1), 3), ((3, 6, 3), 5)])
def test_lp_screen_certifies_only_what_the_exact_adversary_proves(sizes, seed) -> None:
    """The LP relaxation's bound lies between the interval screen's and the exact
    minimum (it only certifies), and it decides points the interval screen leaves to the
    MILP: the same verdicts with fewer MILP solves, on points a persistent LP moves to."""
    net = _net(sizes, seed)
    delta = 0.05
    exact, plain, screened = (RobustnessChecker(net, delta) for _ in range(3))
    rng = np.random.default_rng(seed)
    by_lp = 0
    for z in rng.uniform(-1, 1, (12, sizes[0])):
        for target in range(max(2, sizes[-1])):
            truth = exact.exact(z, target)  # the minimum lies in [bound, value]
            lower = screened.screen(z[None, :], target)[0][0]
            for threshold in (lower, (lower + truth.bound) / 2, truth.bound - 1e-4,
                              truth.bound + 1e-4):
                verdict = screened.check(z, target, threshold, lp_screen=True)
                assert verdict.robust is plain.check(z, target, threshold).robust
                if verdict.robust:
                    assert truth.value >= threshold - 1e-6
                if truth.bound >= threshold + 1e-6:
                    assert verdict.robust is True
                if verdict.method == "lp":
                    by_lp += 1
                    assert lower - 1e-9 <= verdict.bound <= truth.value + 1e-6
    assert by_lp >= 1 and screened.lp_checks > 0 and plain.lp_checks == 0
    assert screened.milp_checks <= plain.milp_checks - by_lp


def test_same_certificate_on_highs_cbc_and_gurobi() -> None:
    net = _net((4, 8, 8, 1), 5)
    rng = np.random.default_rng(2)
    Z = rng.uniform(0, 1, (3, 4))
    results = {}
    for solver in ("highs", "cbc", "gurobi"):
        try:
            checker = RobustnessChecker(net, 0.02, solver=solver)
        except cfopt.SolverNotAvailableError:
            assert solver == "gurobi"
            continue
        results[solver] = [checker.exact(z) for z in Z]
    for solver, verdicts in results.items():
        for v, ref in zip(verdicts, results["highs"]):
            assert v.robust == ref.robust, solver
            assert v.value == pytest.approx(ref.value, abs=1e-5), solver


# ------------------------------------------------------------------- the loop
@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.uniform(0, 1, (300, 4)), columns=["a", "b", "c", "d"])
    y = ((X["a"] + X["b"] - 0.5 * X["c"] + 0.2 * rng.normal(size=300)) > 0.8).astype(int)
    space = cfopt.FeatureSpace.from_frame(X)
    net = train_torch(space.transform(X), y.to_numpy(), hidden=(8, 8), epochs=200)
    Z = space.transform(X)
    with torch.no_grad():
        rejected = (net(torch.tensor(Z, dtype=torch.float32))[:, 0] <= 0).numpy()
    return X, space, net, X[rejected].iloc[:3].reset_index(drop=True)


def _sampled_logits(net: torch.nn.Module, z: np.ndarray, delta: float, n: int = 200,
                    seed: int = 0) -> np.ndarray:
    params = [(w.astype(np.float64), b.astype(np.float64)) for w, b in
              [(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in net
               if isinstance(m, torch.nn.Linear)]]
    rng = np.random.default_rng(seed)
    return np.array([forward([(w + rng.uniform(-delta, delta, w.shape),
                               b + rng.uniform(-delta, delta, b.shape)) for w, b in params],
                             z[None, :])[0] for _ in range(n)])


def test_proplace_certified_and_valid_under_sampled_models(toy) -> None:
    X, space, net, queries = toy
    delta = 0.05
    outcomes = {}
    for solver in ("highs", "cbc"):
        method = Proplace(net, space, X, delta=delta, k=10, solver=solver)
        outcomes[solver] = method.explain_many(queries, target=1)
    for r_h, r_c in zip(outcomes["highs"], outcomes["cbc"]):
        for r in (r_h, r_c):
            assert r.status is RobustStatus.CERTIFIED, r.message
            assert r.certified and r.verified and r.certificate.bound >= 0
            z = space.transform(r.counterfactual)[0]
            assert (_sampled_logits(net, z, delta) > 0).all()
        assert r_h.objective == pytest.approx(r_c.objective, rel=1e-3, abs=1e-4)
    r = outcomes["highs"][0]
    payload = json.loads(r.to_json())
    assert payload["status"] == "certified" and payload["certificate"]["delta"] == delta
    assert payload["certificate"]["iterations"] == r.certificate.iterations >= 1
    assert len(r.certificate.models) == r.certificate.iterations - 1 + r.details["first_cut"]


def test_proplace_on_gurobi_when_licensed(toy) -> None:
    X, space, net, queries = toy
    try:
        method = Proplace(net, space, X, delta=0.05, k=10, solver="gurobi")
        r = method.explain(queries.iloc[[0]], target=1)
    except (cfopt.SolverNotAvailableError, cfopt.SolverLicenseError):
        pytest.skip("Gurobi not available or the model exceeds its licence")
    assert r.status is RobustStatus.CERTIFIED


def test_region_cache_pays_once(toy) -> None:
    X, space, net, queries = toy
    method = Proplace(net, space, X, delta=0.05, k=10)
    first = method.explain(queries.iloc[[0]], target=1)
    again = method.explain(queries.iloc[[0]], target=1)
    assert again.details["region_screened"] == 0 and again.details["region_milp_checks"] == 0
    assert again.objective == pytest.approx(first.objective)


def test_the_region_search_builds_its_tree_once_per_rows(monkeypatch) -> None:
    """The k Δ-robust nearest neighbours search one KD-tree per data set, target and
    rows, built at the first query and reused; other rows under the same key get a tree
    of their own, and every answer equals a fresh checker's."""
    import cfopt.methods.adversaries.model_shift as model_shift

    net = _net((4, 8, 1), 3)
    Z = np.random.default_rng(3).normal(size=(300, 4))
    rows, fewer = np.arange(0, 300, 2), np.arange(0, 300, 3)
    searches = [(Z[0], rows), (Z[1], rows), (Z[2], fewer), (Z[3], rows), (Z[4], rows)]
    fresh = [RobustnessChecker(net, 0.02).nearest_robust(Z, these, z0, 5)[0]
             for z0, these in searches]
    built: list[int] = []
    tree = model_shift.cKDTree

    def counting(points, *args, **kwargs):
        built.append(len(points))
        return tree(points, *args, **kwargs)

    monkeypatch.setattr(model_shift, "cKDTree", counting)
    checker = RobustnessChecker(net, 0.02)
    found = [checker.nearest_robust(Z, these, z0, 5, cache_key="data")[0]
             for z0, these in searches]
    assert found == fresh and all(len(f) == 5 for f in found)
    assert built == [150, 100, 150]


def _widths(block) -> float:
    """The summed pre-activation bound widths of a block's network copy."""
    return sum(v.ub - v.lb for v in block.component_data_objects(pyo.Var)
               if v.parent_component().local_name == "zhat")


def _first_query_in_region(toy) -> tuple[Proplace, np.ndarray, tuple]:
    """PROPLACE on ``toy`` at its first query, the master's network bounded over the
    region's hull within its box; the method, the hull and the box."""
    X, space, net, queries = toy
    method = Proplace(net, space, X, delta=0.05, k=10)
    method.milp.set_factual(queries.iloc[[0]])
    method.milp.set_target(1)
    hull, box = method.region.hull(method.milp), method.region.box(method.milp)
    method.master_box(method.milp, box, True, hull)
    return method, hull, box


def test_the_master_and_its_copies_are_bounded_over_the_plausible_region(toy, monkeypatch
                                                                       ) -> None:
    """``query_bounds``: the master's network and each shifted copy get first-layer
    bounds within their values at the region's points (every master point lies in their
    convex hull), tighter than over the region's box alone; the answer is the same with
    ``query_bounds`` off."""
    X, space, net, queries = toy
    method, hull, box = _first_query_in_region(toy)
    m, pred = method.milp, method.milp.predictor_constr
    structure = pred.adapter.structure
    at_points = hull @ structure.layers[0].weight.T + structure.layers[0].bias
    (lb, ub), *_ = pred.layer_bounds()
    assert (lb >= at_points.min(axis=0) - 1e-4).all()
    assert (ub <= at_points.max(axis=0) + 1e-4).all()
    with_hull = sum((hi - lo).sum() for lo, hi in pred.layer_bounds())
    method.master_box(m, box, True)
    assert with_hull < 0.9 * sum((hi - lo).sum() for lo, hi in pred.layer_bounds())
    pred.set_layer_bounds(m.global_layer_bounds)
    shifted = [(w + 0.05, b - 0.05) for w, b in structure.parameters]
    tight, _ = add_shifted_copy(m, shifted, box, "tight", hull)
    loose, _ = add_shifted_copy(m, shifted, box, "loose")
    assert _widths(tight) < 0.9 * _widths(loose)
    m.del_component(tight)
    m.del_component(loose)
    hulls = []
    box_bounds = ReLUNetwork.box_bounds

    def recording(self, lower, upper, within=None, hull=None):
        hulls.append(hull is not None)
        return box_bounds(self, lower, upper, within, hull)

    monkeypatch.setattr(ReLUNetwork, "box_bounds", recording)
    answers = []
    for on in (True, False):
        hulls.clear()
        answers.append(Proplace(net, space, X, delta=0.05, k=10, query_bounds=on).explain(
            queries.iloc[[0]], target=1))
        # the master's network, then each copy the adversary added
        assert sum(hulls) == (1 + len(answers[-1].certificate.models) if on else 0)
    assert answers[0].certificate.models and all(r.certified for r in answers)
    assert answers[0].objective == pytest.approx(answers[1].objective, abs=1e-6)


def test_the_ladder_bounds_the_master_and_its_copies_within_a_radius(toy, monkeypatch
                                                                     ) -> None:
    """``ladder``: within a radius, the master's network and each shifted copy are bounded
    over the points of at most that L1 cost (tighter than the region's hull bounds), and
    on leaving, each gets back the bounds it had (the hull's, not the global ones); the
    answer is the one without the ladder, and its bound is at most its objective."""
    X, space, net, queries = toy
    method, hull, box = _first_query_in_region(toy)
    m, pred = method.milp, method.milp.predictor_constr
    shifted = [(w + 0.05, b - 0.05) for w, b in pred.adapter.structure.parameters]
    adversary = ModelShiftAdversary(method.checker, m, 1, 0.005, box, hull=hull)
    adversary.add_cut(Check(False, None, None, counterexample=shifted))
    (_, copy), = adversary._copies
    before = [pred.layer_bounds(), copy.layer_bounds()]

    def width(bounds) -> float:
        return sum(float((hi - lo).sum()) for lo, hi in bounds)

    with within_radius(m, 0.05, {}, copies=adversary.network_copies(m)):
        inside = [pred.layer_bounds(), copy.layer_bounds()]
    for was, now in zip(before, inside):
        assert width(now) < 0.7 * width(was)
    for was, after in zip(before, [pred.layer_bounds(), copy.layer_bounds()]):
        assert all(np.allclose(a, b) for pa, pb in zip(was, after) for a, b in zip(pa, pb))
    adversary.remove_cuts()
    pred.set_layer_bounds(m.global_layer_bounds)
    monkeypatch.setattr(ladder, "HARD_NEURONS", -1)  # the gate would solve these whole
    climbs = []
    climb = proplace_module.climb
    monkeypatch.setattr(proplace_module, "climb", lambda *a: climbs.append(1) or climb(*a))
    answers = []
    for objective, flag in (({"l1": 1.0, "l0": 0.5}, True), ({"l1": 1.0, "l0": 0.5}, False),
                            ("l1", True)):
        climbs.clear()
        answers.append(Proplace(net, space, X, delta=0.05, k=10, ladder=flag,
                                objective=objective).explain(queries.iloc[[1]], target=1))
        # L1 alone has no cap on the changes within a radius: no master climbs
        assert bool(climbs) == (flag and objective != "l1")
    on, off, _ = answers
    assert on.certified and off.certified and on.certificate.models
    assert on.objective == pytest.approx(off.objective, abs=1e-6)
    assert on.bound <= on.objective + 1e-9


def _random_instance(seed: int):
    """A small random PROPLACE instance: 2-5 features, a 1-2 hidden-layer network, a
    large δ (so that some queries have no Δ-robust counterfactual in their region)."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 6))
    hidden = tuple(int(h) for h in rng.integers(3, 9, size=int(rng.integers(1, 3))))
    X = pd.DataFrame(rng.uniform(0, 1, (200, d)), columns=[f"f{i}" for i in range(d)])
    score = X.to_numpy() @ rng.normal(size=d)
    y = (score + 0.3 * rng.normal(size=200) > np.median(score)).astype(int)
    space = cfopt.FeatureSpace.from_frame(X)
    net = train_torch(space.transform(X), y, hidden=hidden, epochs=100, seed=seed)
    with torch.no_grad():
        rejected = (net(torch.tensor(space.transform(X), dtype=torch.float32))[:, 0]
                    <= 0).numpy()
    return X, space, net, X[rejected].iloc[[0]].reset_index(drop=True), \
        float(rng.choice([0.05, 0.1, 0.2, 0.3]))


def assert_the_switch_never_changes_the_answer(switch: str) -> None:
    """On random instances (certified and proven infeasible ones), the status and the
    optimum of :class:`Proplace` are the same with the speed lever ``switch`` on and
    off."""
    statuses = set()
    for seed in (180, 181, 182, 183, 184, 185, 186, 188):
        X, space, net, query, delta = _random_instance(seed)
        on, off = (Proplace(net, space, X, delta=delta, k=8, **{switch: flag}).explain(
            query, target=1) for flag in (True, False))
        assert on.status is off.status, seed
        statuses.add(on.status)
        if on.found:
            assert on.certified and on.objective == pytest.approx(off.objective, abs=1e-6)
    assert statuses == {RobustStatus.CERTIFIED, RobustStatus.INFEASIBLE}


@pytest.mark.parametrize("norm", ["l1", "linf"])
def test_the_region_box_holds_its_slack_ball(toy, norm) -> None:
    """With a slack ball (ε > 0) the plausible region reaches ε beyond its points along
    every axis; its box, to which PROPLACE's master sets its network's bounds, must hold
    those points (a box of the points alone cuts off part of the declared region)."""
    from cfopt.constraints.trust_regions import in_region

    X, space, net, queries = toy
    epsilon = 0.2
    region = cfopt.methods.RobustPlausibleRegion(X, 0.05, k=6, epsilon=epsilon, norm=norm,
                                                 name="region")
    m = cfopt.Explainer(net, space, constraints=[region]).milp
    m.set_factual(queries.iloc[[0]])
    m.set_target(1)
    points = region._reference_sets(m)[0]
    low, high = region.box(m)
    assert len(points) >= 2
    for p in points:
        for j in range(len(p)):
            for side in (-1.0, 1.0):
                q = p.copy()
                q[j] += side * epsilon
                assert in_region(q, points, epsilon, norm)
                assert low[j] <= q[j] <= high[j]
    assert np.all(low <= points.min(axis=0) - epsilon + 1e-12)


def test_query_bounds_never_change_the_answer() -> None:
    """The hull and box bounds of ``query_bounds`` are a speed lever only (an
    adversarial run of 196 such instances on HiGHS and Gurobi found no difference)."""
    assert_the_switch_never_changes_the_answer("query_bounds")


def test_a_failed_row_is_its_status_and_the_batch_goes_on(toy, monkeypatch) -> None:
    """A solver failure on one row of ``explain_many`` (Gurobi's size-limited licence
    refusing a master its cuts grew: COMPAS Table 1 on Gurobi) is that row's ``ERROR``
    with the error as its message; the rows after it get the answers they get alone, and
    ``errors="raise"`` raises it naming the row."""
    X, space, net, queries = toy
    method = Proplace(net, space, X, delta=0.05, k=10)
    alone = method.explain(queries.iloc[[2]], target=1)
    solve, calls = method.backend.solve, []

    def refusing(model, settings=None, start=None, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # the first master solve, of the first row
            raise cfopt.SolverLicenseError("Gurobi refused the model: size-limited licence")
        return solve(model, settings, start, **kwargs)

    monkeypatch.setattr(method.backend, "solve", refusing)
    batch = queries.set_axis(["a", "b", "c"])
    first, second, third = method.explain_many(batch, target=1)
    assert first.status is RobustStatus.ERROR and not first.found and not first.certified
    assert "row 'a': SolverLicenseError" in first.message and "size-limited" in first.message
    assert first.factual.equals(method.space.validate(batch.iloc[[0]]).reset_index(drop=True))
    assert second.certified and third.certified
    assert third.objective == pytest.approx(alone.objective, abs=1e-7)
    calls.clear()
    with pytest.raises(cfopt.SolverLicenseError) as raised:
        method.explain_many(batch, target=1, errors="raise")
    assert "in explain_many, row 'a' of X" in raised.value.__notes__
    with pytest.raises(ValueError, match="errors must be"):
        method.explain_many(batch, errors="ignore")


def test_composes_with_immutables_max_changes_rules_and_trust_regions(toy) -> None:
    X, _, net, queries = toy
    space = cfopt.FeatureSpace.from_frame(X).immutable("d").increase_only("a")
    rule = cfopt.LinearConstraint({"b": 1}, "<=", 0.3, relative=True, name="b_budget")
    hull = cfopt.ConvexHull(X, epsilon=0.5, max_points=50, name="hull")
    method = Proplace(net, space, X, delta=0.05, k=30, max_changes=3, constraints=[rule, hull])
    statuses = []
    for i in range(len(queries)):
        r = method.explain(queries.iloc[[i]], target=1)
        statuses.append(r.status)
        if r.status is RobustStatus.INFEASIBLE:  # immutables can empty the region
            assert r.counterfactual is None and "no point of the plausible region" in r.message
            assert "no point is Δ-robust with margin σ=0.01" in r.message
            assert "nor 0.005 (master infeasible); decided at margin 5e-05" in r.message
            assert "Δ-robust with margin 5e-05 (proven at that margin only" in r.message
            assert r.certificate.master_margin == pytest.approx(5e-05)
            continue
        assert r.certified, r.message
        before, after = r.factual.iloc[0], r.counterfactual.iloc[0]
        assert after["d"] == before["d"] and after["a"] >= before["a"]
        assert after["b"] <= before["b"] + 0.3 + 1e-6
        assert (r.counterfactual != r.factual).to_numpy().sum() <= 3
    assert RobustStatus.CERTIFIED in statuses
    assert "b_budget" in method.milp.constraints and "hull" in method.milp.constraints


def test_no_robust_point_is_infeasible_not_a_hang(toy) -> None:
    X, space, net, queries = toy
    r = Proplace(net, space, X, delta=3.0, k=5).explain(queries.iloc[[0]], target=1)
    assert r.status is RobustStatus.INFEASIBLE and r.counterfactual is None
    assert "no Δ-robust data point" in r.message
    plain = NonRobustMILP(net, space, delta=3.0).explain(queries.iloc[[0]], target=1)
    assert plain.status is RobustStatus.NOT_ROBUST and plain.certificate.robust is False
    assert plain.found  # still a valid (non-robust) counterfactual
    capped = MILPR(net, space, delta=3.0, max_rounds=2).explain(queries.iloc[[0]], target=1)
    assert capped.status in (RobustStatus.ITERATION_LIMIT, RobustStatus.INFEASIBLE)
    assert not capped.certified
    assert RNCE(net, space, X, delta=3.0).explain(queries.iloc[[0]], 1).status \
        is RobustStatus.INFEASIBLE


def test_iteration_cap_has_its_own_status(toy) -> None:
    X, space, net, queries = toy
    method = Proplace(net, space, X, delta=0.05, k=10, max_iterations=1)
    statuses = {method.explain(queries.iloc[[i]], 1).status for i in range(len(queries))}
    assert statuses <= {RobustStatus.CERTIFIED, RobustStatus.ITERATION_LIMIT}


def test_baselines_certify(toy) -> None:
    X, space, net, queries = toy
    x = queries.iloc[[0]]
    milpr = MILPR(net, space, delta=0.05).explain(x, 1)
    rnce = RNCE(net, space, X, delta=0.05).explain(x, 1)
    plain = NonRobustMILP(net, space, delta=0.05).explain(x, 1)
    for r in (milpr, rnce):
        assert r.certified, r.message
        z = space.transform(r.counterfactual)[0]
        assert (_sampled_logits(net, z, 0.05) > 0).all()
    assert plain.found and plain.objective <= milpr.objective + 1e-6


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_bad_input_names_the_option(toy) -> None:
    X, space, net, _ = toy
    with pytest.raises(ValueError, match="delta"):
        Proplace(net, space, X, delta=0.0)
    with pytest.raises(ValueError, match="tolerance"):
        Proplace(net, space, X, delta=0.05, sigma=0.01, tolerance=0.02)
    with pytest.raises(ValueError, match="k must"):
        Proplace(net, space, X, delta=0.05, k=0)
    with pytest.raises(ValueError, match="max_iterations"):
        Proplace(net, space, X, delta=0.05, max_iterations=0)
    with pytest.raises(ValueError, match="growth"):
        MILPR(net, space, delta=0.05, growth=1.0)
    regressor = MLPRegressor(hidden_layer_sizes=(4,), max_iter=5, random_state=0).fit(
        space.transform(X), X["a"].to_numpy())
    with pytest.raises(ValueError, match="classifiers with one logit"):
        RobustnessChecker(regressor, 0.05)
    with pytest.raises(ValueError, match="class index"):  # binary: 1 or 0, not a sign
        RobustnessChecker(net, 0.05).check(space.transform(X)[0], -1)


def test_the_masters_run_with_light_heuristics_unless_asked(toy, monkeypatch) -> None:
    """``light_heuristics=True`` (default): every master solve carries the backend's
    light heuristics (HiGHS: feasibility jump off), with the user's ``solver_options``
    winning; ``False``: the solver's defaults; the same optimum either way; a
    non-boolean is refused naming the switch."""
    X, space, net, queries = toy
    light = cfopt.solvers.make_solver("highs").light_heuristics()
    assert light["mip_heuristic_run_feasibility_jump"] is False
    seen: dict[str, list[dict]] = {}
    original = proplace_module.ProplaceMaster.solve

    def recording(self, deadline):
        seen.setdefault(key, []).append(dict(deadline.left().options))
        return original(self, deadline)

    monkeypatch.setattr(proplace_module.ProplaceMaster, "solve", recording)
    answers = {}
    for key, kwargs in {"light": {}, "full": {"light_heuristics": False},
                        "user": {"solver_options": {"mip_heuristic_run_feasibility_jump": True}}}.items():
        method = Proplace(net, space, X, delta=0.05, k=10, **kwargs)
        answers[key] = method.explain(queries.iloc[[0]], target=1)
        assert answers[key].status is RobustStatus.CERTIFIED
    assert seen["light"] and all(options == light for options in seen["light"])
    assert all(options == {} for options in seen["full"])
    assert all(options == {**light, "mip_heuristic_run_feasibility_jump": True}
               for options in seen["user"])
    assert answers["light"].objective == pytest.approx(answers["full"].objective, rel=1e-3)
    with pytest.raises(TypeError, match="light_heuristics"):
        Proplace(net, space, X, delta=0.05, light_heuristics="off")


def test_masters_with_copies_leave_the_model_out_and_keep_the_answers(toy, monkeypatch
                                                                      ) -> None:
    """``relax_model=True`` (default): every master solve with shifted copies runs
    without the model's own network and validity, every one without copies with them,
    and they are back after each query; ``False``: always in. The answers agree, and
    each is valid for the real model."""
    X, space, net, queries = toy
    seen: dict[bool, list[tuple[int, bool, bool]]] = {}
    original = proplace_module.ProplaceMaster.solve

    def recording(self, deadline):
        answer = original(self, deadline)
        seen[key].append((len(self.adversary.models), self.m.predictor_constr.block.active,
                          self.m.validity.active))
        return answer

    monkeypatch.setattr(proplace_module.ProplaceMaster, "solve", recording)
    answers: dict[bool, list] = {}
    for key in (True, False):
        seen[key] = []
        method = Proplace(net, space, X, delta=0.05, k=10, relax_model=key)
        answers[key] = []
        for i in range(3):
            answers[key].append(method.explain(queries.iloc[[i]], target=1))
            m = method.milp
            assert m.predictor_constr.block.active and m.validity.active
    assert any(copies for copies, _, _ in seen[True])
    assert all((held, valid) == (copies == 0, copies == 0)
               for copies, held, valid in seen[True])
    assert all(held and valid for _, held, valid in seen[False])
    for relaxed, full in zip(answers[True], answers[False]):
        assert relaxed.status is full.status is RobustStatus.CERTIFIED
        assert relaxed.objective == pytest.approx(full.objective, rel=1e-3)
        assert net(torch.tensor(space.transform(relaxed.counterfactual),
                                dtype=torch.float32)).item() > 0
    with pytest.raises(TypeError, match="relax_model"):
        Proplace(net, space, X, delta=0.05, relax_model=1)


def test_the_first_cut_seeds_the_first_master_and_keeps_the_answers(toy, monkeypatch
                                                                     ) -> None:
    """``first_cut=True`` (default): before the first master, the walk's point toward
    the region where the model gives margin σ gets the interval screen's concrete
    shifted model as a cut, so the first master already holds a copy; the loop takes
    no more masters than without it and the answers agree. ``cut_at`` adds a model of
    Δ that classifies its point below σ - t, and nothing at a point that model keeps
    above it."""
    X, space, net, queries = toy
    firsts: dict[bool, list[int]] = {True: [], False: []}
    original = proplace_module.ProplaceMaster.solve

    def recording(self, deadline):
        if not getattr(self, "seen", False):
            self.seen = True
            firsts[key].append(len(self.adversary.models))
        return original(self, deadline)

    monkeypatch.setattr(proplace_module.ProplaceMaster, "solve", recording)
    results = {}
    for key in (True, False):
        method = Proplace(net, space, X, delta=0.05, k=10, first_cut=key)
        results[key] = [method.explain(queries.iloc[[i]], target=1) for i in range(3)]
    assert firsts[False] == [0, 0, 0] and any(firsts[True])
    for seeded, plain in zip(results[True], results[False]):
        assert seeded.status is plain.status is RobustStatus.CERTIFIED
        assert seeded.objective == pytest.approx(plain.objective, rel=1e-3)
        assert seeded.certificate.iterations <= plain.certificate.iterations
    method, hull, box = _first_query_in_region(toy)
    m = method.milp
    adversary = ModelShiftAdversary(method.checker, m, 1, 0.005, box, hull=hull)
    structure = m.adapter.structure
    robust = hull[int(np.argmax(structure.logits(hull)[:, 0]))]
    assert not adversary.cut_at(robust) and adversary.models == []
    assert adversary.cut_at(m.factual_inputs)
    (params,) = adversary.models
    assert forward(params, m.factual_inputs[None, :])[0] < 0.005
    assert max_shift(structure, params) <= 0.05 + 1e-9
    adversary.remove_cuts()
    with pytest.raises(TypeError, match="first_cut"):
        Proplace(net, space, X, delta=0.05, first_cut="yes")


def test_masters_hold_the_newest_copy_and_those_missed_and_keep_the_answers(
        monkeypatch) -> None:
    """``active_set=True`` (default): every master solve holds the newest shifted copy
    and the kept ones only, the others deactivated; ``False``: every copy. The answers
    agree, in as many iterations (random instances whose loops collect 2-3 models). A
    solve whose point misses a model left out is solved again holding it (and every
    later solve too)."""
    seen: dict[bool, list[tuple[int, list[int]]]] = {}
    original = proplace_module.ProplaceMaster._solve_held

    def recording(self, deadline):
        answer = original(self, deadline)
        held = [i for i, (copy, _) in enumerate(self.adversary._copies) if copy.active]
        seen[key].append((len(self.adversary.models), held))
        return answer

    monkeypatch.setattr(proplace_module.ProplaceMaster, "_solve_held", recording)
    for seed in (300, 315, 327):
        X, space, net, query, delta = _random_instance(seed)
        results = {}
        for key in (True, False):
            seen[key] = []
            method = Proplace(net, space, X, delta=delta, k=10, active_set=key)
            results[key] = method.explain(query, target=1)
        assert any(n > 1 for n, _ in seen[True])
        assert all(held == ([n - 1] if n else []) for n, held in seen[True])
        assert all(held == list(range(n)) for n, held in seen[False])
        lean, full = results[True], results[False]
        assert lean.status is full.status is RobustStatus.CERTIFIED
        assert lean.objective == pytest.approx(full.objective, rel=1e-3)
        assert lean.certificate.iterations == full.certificate.iterations
        assert lean.details["master_resolves"] == 0
    # a point that misses the first model left out: solved again holding it, and so on
    misses = iter([[0]])
    monkeypatch.setattr(ModelShiftAdversary, "missed",
                        lambda self, z, level: next(misses, []) if self.models[1:] else [])
    key, seen[True] = True, []
    X, space, net, query, delta = _random_instance(315)
    result = Proplace(net, space, X, delta=delta, k=10).explain(query, target=1)
    assert result.status is RobustStatus.CERTIFIED and result.details["master_resolves"] == 1
    repeated = [(n, held) for n, held in seen[True] if n > 1]
    assert repeated[0][1] == [repeated[0][0] - 1] and len(repeated) >= 2
    assert all(0 in held for _, held in repeated[1:])
    with pytest.raises(TypeError, match="active_set"):
        Proplace(net, space, X, delta=0.05, active_set="no")


def test_the_adversary_names_the_models_left_out_that_a_point_misses(toy) -> None:
    """``missed(z, level)``: the models whose copies are out of the master and whose
    least margin at ``z`` is below ``level``; a held copy is never named."""
    method, hull, box = _first_query_in_region(toy)
    m = method.milp
    adversary = ModelShiftAdversary(method.checker, m, 1, 0.005, box, hull=hull)
    assert adversary.cut_at(m.factual_inputs)
    (params,) = adversary.models
    value = forward(params, m.factual_inputs[None, :])[0]
    adversary.hold([])
    assert adversary.network_copies(m) == []
    assert adversary.missed(m.factual_inputs, value + 1e-3) == [0]
    assert adversary.missed(m.factual_inputs, value - 1e-3) == []
    adversary.hold([0])
    assert len(adversary.network_copies(m)) == 1
    assert adversary.missed(m.factual_inputs, value + 1e-3) == []
    adversary.remove_cuts()


def test_fix_pattern_holds_the_network_to_its_linear_piece(toy) -> None:
    """``fix_pattern(z)`` fixes exactly the free ReLU binaries, each to the side of its
    neuron at ``z``; the MILP's point then lies in ``z``'s piece; unfixing frees them."""
    X, space, net, queries = toy
    m = cfopt.CounterfactualModel(net, space, margin=0.01)
    m.set_factual(queries.iloc[[0]])
    m.set_target(1)
    pred = m.predictor_constr
    structure = pred.adapter.structure
    Z = space.encode(X)
    scores = structure.logits(Z)[:, 0]
    z = Z[int(np.argmax(scores))]  # deep in the target: its piece holds points of margin
    free = [v for layer in pred.dense_layers()[:-1] for v in layer.q_relu.values()
            if not v.fixed]
    fixed = pred.fix_pattern(z)
    assert fixed and {id(v) for v in fixed} == {id(v) for v in free}
    signs = [pre[0] > 0 for pre in structure.pre_activations(z[None, :])[:-1]]
    backend = cfopt.solvers.make_solver("highs")
    outcome = backend.solve(m, cfopt.solvers.SolverSettings())
    assert outcome.status.has_solution
    point = np.array([pyo.value(m.predictor_constr.inputs[i])
                      for i in range(structure.n_inputs)])
    at_point = structure.pre_activations(point[None, :])[:-1]
    for k, layer in enumerate(pred.dense_layers()[:-1]):
        for j in layer.q_relu:
            if layer.q_relu[j].fixed and any(v is layer.q_relu[j] for v in fixed):
                side = at_point[k][0, j]
                assert (side >= -1e-6) if signs[k][j] else (side <= 1e-6)
    for var in fixed:
        var.unfix()
    assert all(not v.fixed for v in free)


@pytest.mark.parametrize("delta, walks, first_cut", [(0.02, False, False),
                                                    (0.05, True, False), (0.05, True, True)])
def test_the_cutoff_comes_from_a_point_of_the_master_and_keeps_the_answer(
        toy, monkeypatch, delta, walks, first_cut) -> None:
    """``cutoff=True``: each master with shifted copies (past the gate, here lowered) is
    solved under the objective of a point of it (its network and copies held to their
    pieces at the last point, or, where those hold none, as at δ = 0.05 on this toy,
    at the first point toward the region's points where every network gives a margin
    of 2σ), which is never below the master's proven bound nor, but for the gap, its
    optimum; the answers equal those without it; ``cutoff=False`` never computes one.
    With the first cut, a query's first master has a copy and gets its cutoff from the
    pieces at the cut's point (the guess of that master's point)."""
    X, space, net, queries = toy
    monkeypatch.setattr(proplace_module, "CUTOFF_NEURONS", -1)
    walked: list[np.ndarray | None] = []
    original_walk = proplace_module.toward_target

    def recording_walk(*args, **kwargs):
        walked.append(original_walk(*args, **kwargs))
        return walked[-1]

    monkeypatch.setattr(proplace_module, "toward_target", recording_walk)
    cutoffs: list[float | None] = []
    original_cutoff = proplace_module.pattern_cutoff

    def recording_cutoff(*args, **kwargs):
        cutoffs.append(original_cutoff(*args, **kwargs))
        return cutoffs[-1]

    masters: list[tuple[float | None, MasterAnswer, float]] = []
    firsts: list[bool] = []  # per master: the query's first (no last point)
    original_solve = proplace_module.ProplaceMaster.solve

    def recording_solve(self, deadline):
        before = len(cutoffs)
        firsts.append(self.found is False)
        answer = original_solve(self, deadline)
        masters.append((cutoffs[-1] if len(cutoffs) > before else None, answer,
                        objective_value(self.m, answer.point)))
        return answer

    monkeypatch.setattr(proplace_module, "pattern_cutoff", recording_cutoff)
    monkeypatch.setattr(proplace_module.ProplaceMaster, "solve", recording_solve)
    answers = {}
    for on in (True, False):
        cutoffs.clear()
        masters.clear()
        firsts.clear()
        method = Proplace(net, space, X, delta=delta, k=10, cutoff=on, first_cut=first_cut,
                          piece_points=False)
        given: list[float] = []
        solve = method.backend.solve

        def recording_backend(*args, cutoff=None, solve=solve, **kwargs):
            if cutoff is not None:
                given.append(cutoff)
            return solve(*args, cutoff=cutoff, **kwargs)

        monkeypatch.setattr(method.backend, "solve", recording_backend)
        answers[on] = method.explain_many(queries, target=1)
        if not on:
            assert not cutoffs and not given
            continue
        used = [(u, a, objective) for u, a, objective in masters if u is not None]
        assert used, "no master with shifted copies got a cutoff"
        assert given == [u for u, _, _ in used]  # each reached its master's solve
        assert any(point is not None for point in walked) == walks
        assert any(u is not None and first for (u, _, _), first in zip(masters, firsts)
                   ) == first_cut
        for u, answer, objective in used:
            assert answer.bound <= u and objective <= u * (1 + 1e-4) + 1e-9
    for with_cutoff, without in zip(answers[True], answers[False]):
        assert with_cutoff.status is without.status is RobustStatus.CERTIFIED
        assert with_cutoff.objective == pytest.approx(without.objective, rel=1e-4)


def test_toward_target_stops_at_the_first_step_with_the_margin(toy) -> None:
    """The walk's point lies on a segment from the start to one of the ends, every
    network gives the target at least the margin there and not one step before on that
    segment, and it is the nearest such point of all segments; an unreachable margin
    gives none."""
    X, space, net, queries = toy
    m = cfopt.CounterfactualModel(net, space, margin=0.01)
    m.set_factual(queries.iloc[[0]])
    m.set_target(1)
    networks = [(m.predictor_constr, None)]
    structure = m.predictor_constr.adapter.structure
    start = space.encode(queries.iloc[[0]])[0]
    ends = space.encode(X)[:40]
    point = incumbents.toward_target(m, networks, start, ends, 0.5)
    assert point is not None and structure.logits(point[None, :])[0, 0] >= 0.5
    steps = np.linspace(0, 1, incumbents.WALK_STEPS + 1)[1:]
    nearest = np.inf
    for end in ends:
        scores = structure.logits(start + steps[:, None] * (end - start))[:, 0]
        reached = np.flatnonzero(scores >= 0.5)
        if len(reached):
            first = start + steps[reached[0]] * (end - start)
            nearest = min(nearest, float(np.abs(first - start).sum()))
    assert float(np.abs(point - start).sum()) == pytest.approx(nearest)
    assert incumbents.toward_target(m, networks, start, ends, 1e6) is None


def test_the_first_master_answers_with_its_pieces_point_and_only_a_proof_ends_the_loop(
        monkeypatch) -> None:
    """``piece_points=True`` (default; the gate lowered here): a query's first master
    with a shifted copy answers with the point of its linear pieces, unproven. Cut by
    the adversary (seed 300), the loop goes on as Algorithm 1; certified, one solve of
    the master whole proves it optimal within the gap (seed 301: the point is kept,
    with the proof's bound) or finds a better point, which the loop checks and
    certifies (seed 303). The answers equal those with ``piece_points=False``."""
    monkeypatch.setattr(proplace_module, "CUTOFF_NEURONS", -1)
    events: list[tuple] = []
    piece_answer = proplace_module.ProplaceMaster._piece_answer
    prove = proplace_module.ProplaceMaster.prove

    def recording_piece(self, deadline):
        answer = piece_answer(self, deadline)
        events.append(("piece", answer is not None and not answer.proven))
        return answer

    def recording_prove(self, candidate, deadline):
        answer = prove(self, candidate, deadline)
        events.append(("prove", answer.point is candidate.point, answer.status))
        return answer

    monkeypatch.setattr(proplace_module.ProplaceMaster, "_piece_answer", recording_piece)
    monkeypatch.setattr(proplace_module.ProplaceMaster, "prove", recording_prove)
    expected = {300: [("piece", True)],
                301: [("piece", True), ("prove", True, Status.OPTIMAL)],
                303: [("piece", True), ("prove", False, Status.OPTIMAL)]}
    for seed, script in expected.items():
        X, space, net, query, delta = _random_instance(seed)
        results, seen = {}, {}
        for on in (True, False):
            events.clear()
            results[on] = Proplace(net, space, X, delta=delta, k=10,
                                   piece_points=on).explain(query, target=1)
            seen[on] = list(events)
        assert seen == {True: script, False: []}, seed
        pieces, whole = results[True], results[False]
        assert pieces.status is whole.status is RobustStatus.CERTIFIED
        assert pieces.optimal and whole.optimal and pieces.certificate.robust
        assert pieces.objective == pytest.approx(whole.objective, rel=1e-6)
        assert pieces.bound <= pieces.objective + 1e-9
        assert pieces.objective - pieces.bound <= 1e-4 * pieces.objective + 1e-9
        # the proof is one more master solve; a point it keeps is not checked again
        assert pieces.certificate.iterations == whole.certificate.iterations + (
            seed != 300)
    with pytest.raises(TypeError, match="piece_points"):
        Proplace(net, space, X, delta=0.05, piece_points=1)


def test_a_query_runs_with_the_garbage_collection_paused_and_resumes_it(
        toy, monkeypatch) -> None:
    """Every robust method's ``explain`` pauses Python's automatic garbage collection
    (its cuts build and drop Pyomo components; full collections walk the whole
    process) and resumes it as it was: on after a query, on after a query that
    failed, off after a query run with it off."""
    import gc

    from cfopt.methods.base import RobustMethod

    def leaves(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from leaves(sub)

    methods = {cls for cls in leaves(RobustMethod) if not getattr(
        cls.explain, "__isabstractmethod__", False)
        and cls.__module__.startswith("cfopt.")}  # not other tests' scripted methods
    assert {Proplace, MILPR, NonRobustMILP, RNCE} <= methods
    assert all(hasattr(cls.explain, "__wrapped__") for cls in methods), methods
    X, space, net, queries = toy
    during: list[bool] = []
    solve = proplace_module.ProplaceMaster.solve

    def recording(self, deadline):
        during.append(gc.isenabled())
        return solve(self, deadline)

    monkeypatch.setattr(proplace_module.ProplaceMaster, "solve", recording)
    method = Proplace(net, space, X, delta=0.02, k=10)
    assert gc.isenabled()
    assert method.explain(queries.iloc[[0]], target=1).found
    assert during and not any(during) and gc.isenabled()

    def failing(self, deadline):
        raise RuntimeError("solver gone")

    monkeypatch.setattr(proplace_module.ProplaceMaster, "solve", failing)
    with pytest.raises(RuntimeError, match="solver gone"):
        method.explain(queries.iloc[[0]], target=1)
    assert gc.isenabled()
    monkeypatch.setattr(proplace_module.ProplaceMaster, "solve", recording)
    gc.disable()
    try:
        method.explain(queries.iloc[[0]], target=1)
        assert not gc.isenabled()
    finally:
        gc.enable()
