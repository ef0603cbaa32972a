"""The radius restriction of a ReLU network's query (:mod:`cfopt.query.restrictions.relu`)
by hand on a small space: what a point of objective at most ``r`` can change
(:func:`radius_moves`: each feature's reach, category switches, the count and the L1
budget), the fractional knapsack and the region's concretizer on hand-made moves, the
layer bounds of the query and of a network copy, and the restriction's entry points."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import cfopt
from cfopt.problem import CounterfactualModel
from cfopt.query.restrictions import relu as RL
from cfopt.query.restrictions.relu import (
    HEURISTIC_TRIES,
    RadiusMoves,
    ReluRestriction,
    _knapsack,
    copies_within_radius,
    distance_value,
    network_copies,
    objective_value,
    radius_bounds,
    radius_moves,
    region_concretizer,
    unstable_neurons,
)

FRAME = pd.DataFrame({"a": [-4.0, 4.0, 0.0], "k": [0, 10, 5], "c": ["x", "y", "z"],
                      "i": [0.0, 1.0, 0.5], "u": [0.0, 2.0, 1.0], "d": [0.0, 4.0, 2.0]})
SPACE = cfopt.FeatureSpace.from_frame(FRAME, kinds={
    "a": "continuous", "k": "integer", "i": "continuous", "u": "continuous",
    "d": "continuous"}).immutable("i").increase_only("u").decrease_only("d")
# weights 1 / range: a 1/8, k 1/10, c 1, i 1, u 1/2, d 1/4; inputs min-max scaled
FACTUAL = pd.DataFrame({"a": [1.0], "k": [5], "c": ["z"], "i": [0.5], "u": [1.0],
                        "d": [2.0]})


def net(seed: int = 0, hidden: int = 3) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(SPACE.n_inputs, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, 1))


def model(objective=None, factual=FACTUAL, target=None, **options):
    ex = cfopt.Explainer(net(), SPACE, objective=objective or {"l1": 1.0, "l0": 0.25},
                         **options)
    m = ex.milp
    m.set_factual(factual)
    if target is not None:
        m.set_target(target)
    return m


def ends(reach: RadiusMoves, name: str) -> list[float]:
    return reach.moves[name][1][:, 0].tolist()


# ============================================================ radius_moves
def test_radius_moves_by_hand():
    """r = 1/2, L1 + L0/4: a change moves w |Δ| <= 1/4 at most, at most 2 change."""
    r = radius_moves(model(), 0.5)
    assert sorted(r.moves) == ["a", "d", "k", "u"]  # i immutable, c costs 1 > 1/4
    assert ends(r, "a") == pytest.approx([(-1 + 4) / 8, (3 + 4) / 8])  # 1 -/+ 2
    assert r.costs["a"] == pytest.approx([0.25, 0.25]) and r.least["a"] == 0.0
    assert r.moves["a"][0].tolist() == [0]
    assert ends(r, "k") == pytest.approx([0.3, 0.7])  # 2.5 units: 2 whole ones
    assert r.costs["k"] == pytest.approx([0.2, 0.2]) and r.least["k"] == 0.1
    assert ends(r, "u") == pytest.approx([0.5, 0.75])  # increase only: 1 -> 1.5
    assert r.costs["u"] == pytest.approx([0.0, 0.25]) and r.least["u"] == 0.0
    assert r.moves["u"][0].tolist() == [6]
    assert ends(r, "d") == pytest.approx([0.25, 0.5])  # decrease only: 2 -> 1
    assert r.costs["d"] == pytest.approx([0.25, 0.0])
    assert r.most == 2
    assert r.budget == pytest.approx(0.5, rel=1e-8)  # no target: the factual may answer


def test_the_radius_keeps_a_point_at_it_by_a_hair():
    r = radius_moves(model(), 0.5)
    assert r.budget > 0.5 and r.budget == pytest.approx(0.5 * (1 + 1e-9) + 1e-12, rel=1e-13)
    zero = radius_moves(model({"l1": 1.0}), 0.0)
    assert sorted(zero.moves) == ["a", "d", "u"]  # k: no whole unit
    assert "a" in zero.moves and 0 < ends(zero, "a")[1] - 5 / 8 < 1e-10
    assert zero.budget == pytest.approx(1e-12, rel=1e-6)


def test_a_target_away_from_the_factual_class_spends_the_l0_first():
    other = 1 - int(model().factual_class)
    assert radius_moves(model(target=other), 0.5).budget == pytest.approx(0.25, rel=1e-8)
    assert radius_moves(model(), 0.5).budget == pytest.approx(0.5, rel=1e-8)


def test_a_category_switch_within_the_cap():
    r = radius_moves(model(), 1.3)  # cap 1.05 >= w_c = 1
    at, options = r.moves["c"]
    assert at.tolist() == [2, 3, 4]
    assert options.tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    assert r.costs["c"].tolist() == [1.0, 1.0, 0.0] and r.least["c"] == 1.0
    assert "c" not in radius_moves(model(), 1.2).moves  # cap 0.95
    assert r.most == 5


def test_reach_clipped_at_the_bounds_and_integral_reach():
    m = model({"l1": 1.0}, factual=FACTUAL.assign(a=3.5, k=9))
    r = radius_moves(m, 1.0)  # a reaches 8 units, k 10
    assert ends(r, "a") == pytest.approx([(-4 + 4) / 8, 1.0])
    assert ends(r, "k") == pytest.approx([0.0, 1.0])
    r = radius_moves(m, 0.3)  # k: exactly 3 units
    assert ends(r, "k") == pytest.approx([0.6, 1.0])
    assert ends(radius_moves(m, 0.2999), "k") == pytest.approx([0.7, 1.0])
    assert "k" not in radius_moves(m, 0.0999).moves  # less than one unit
    assert "k" in radius_moves(m, 0.1).moves
    assert ends(r, "a") == pytest.approx([(3.5 - 2.4 + 4) / 8, 1.0])


def test_below_the_l0_coefficient_nothing_changes():
    r = radius_moves(model({"l1": 1.0, "l0": 0.5}), 0.4999)
    assert r.moves == {} and r.most == 0
    at = radius_moves(model({"l1": 1.0, "l0": 0.5}), 0.5)  # at b: hairline moves
    assert sorted(at.moves) == ["a", "d", "u"] and at.most == 1
    assert 0 < ends(at, "a")[1] - 5 / 8 < 1e-8


def test_l0_only_and_linf():
    r = radius_moves(model({"l0": 1.0}), 2.5)
    assert r.most == 2 and r.budget == np.inf
    assert ends(r, "a") == pytest.approx([0.0, 1.0]) and "c" in r.moves
    r = radius_moves(model({"linf": 2.0}), 0.5)  # cap 0.25 as L1 1 and 0.5 / 2
    assert ends(r, "a") == pytest.approx([0.375, 0.875]) and r.budget == np.inf
    assert r.most == np.inf
    r = radius_moves(model({"l1": 1.0, "linf": 1.0}), 0.5)  # cap (a + c) = 0.25
    assert ends(r, "a") == pytest.approx([0.375, 0.875])
    assert r.budget == pytest.approx(0.5, rel=1e-8)


def test_support_and_the_change_cap():
    r = radius_moves(model(), 0.5, support=["a", "c"])
    assert sorted(r.moves) == ["a"] and r.most == 2
    assert radius_moves(model(), 0.5, support=["a"]).most == 1
    assert radius_moves(model(), 0.5, support=[]).most == 0
    assert radius_moves(model(max_changes=1), 0.5).most == 1


def test_costs_beyond_the_distance_shrink_the_radius(monkeypatch):
    m = model({"l1": 1.0})
    m.raw.extra_floor = 0.25
    r = radius_moves(m, 0.5)
    assert r.budget == pytest.approx(0.25, rel=1e-8)
    assert ends(r, "a") == pytest.approx([(1 - 2 + 4) / 8, (1 + 2 + 4) / 8])


# ============================================================ _knapsack
def item(up: float, down: float) -> np.ndarray:
    return np.array([[up], [down]])


def test_knapsack_takes_the_best_ratio_first_and_a_fraction_of_the_next():
    values = [item(6.0, 1.0), item(4.0, 0.0), item(0.0, 3.0)]
    costs = [2.0, 1.0, 1.0]
    got = _knapsack(values, costs, 2.0, 1)
    assert got[:, 0].tolist() == pytest.approx([4.0 + 3.0, 3.0 + 0.5])
    assert _knapsack(values, costs, 0.0, 1)[:, 0].tolist() == [0.0, 0.0]
    assert _knapsack(values, costs, np.inf, 1)[:, 0].tolist() == [10.0, 4.0]
    assert _knapsack(values, costs, 10.0, 1)[:, 0].tolist() == [10.0, 4.0]
    assert _knapsack([], [], 1.0, 3).tolist() == [[0.0] * 3, [0.0] * 3]


def test_knapsack_free_items_are_taken_whole_and_worthless_ones_spend_nothing():
    values = [item(0.0, 0.0), item(1.0, 0.0), item(2.0, 0.0)]
    got = _knapsack(values, [0.5, 0.0, 4.0], 1.0, 1)
    assert got[:, 0].tolist() == pytest.approx([1.0 + 0.5, 0.0])
    two = [np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([[3.0, 1.0], [1.0, 0.0]])]
    got = _knapsack(two, [1.0, 2.0], 1.0, 2)
    assert np.allclose(got, [[1.5, 0.5], [0.5, 2.0]])


# ============================================================ region_concretizer
def concretizer(moves, costs, most, budget, z0):
    m = model()
    reach = RadiusMoves(moves, costs, {}, most, budget)
    return region_concretizer(m, reach, np.asarray(z0, dtype=float))


def numeric_moves():
    return ({"a": (np.array([0]), np.array([[-1.0], [2.0]])),
             "k": (np.array([1]), np.array([[0.0], [1.0]]))},
            {"a": np.array([1.0, 2.0]), "k": np.array([0.0, 0.5])})


def test_concretizer_knapsack_and_the_largest_moves():
    moves, costs = numeric_moves()
    A = np.array([[1.0, 2.0]])
    lo, hi = concretizer(moves, costs, np.inf, 1.5, [0.0, 0.0])(A)
    assert (lo.tolist(), hi.tolist()) == ([-1.0], [3.0])  # knapsack: k up, half of a up
    lo, hi = concretizer(moves, costs, 1, 1.5, [0.0, 0.0])(A)
    assert (lo.tolist(), hi.tolist()) == ([-1.0], [2.0])  # one move: the largest
    lo, hi = concretizer(moves, costs, 2, 10.0, [0.0, 0.0])(A)
    assert (lo.tolist(), hi.tolist()) == ([-1.0], [4.0])
    lo, hi = concretizer(moves, costs, 0, 10.0, [0.0, 0.0])(A)
    assert (lo.tolist(), hi.tolist()) == ([0.0], [0.0])
    lo, hi = concretizer(moves, costs, 0.5, 10.0, [0.0, 0.0])(A)
    assert (lo.tolist(), hi.tolist()) == ([0.0], [0.0])
    lo, hi = concretizer(moves, costs, np.inf, np.inf, [0.0, 0.0])(A)
    assert (lo.tolist(), hi.tolist()) == ([-1.0], [4.0])
    lo, hi = concretizer(moves, costs, np.inf, 10.0, [0.5, 0.25])(np.array([1.0, 2.0]))
    assert (lo.tolist(), hi.tolist()) == ([1.0 - 1.5 - 0.5], [1.0 + 1.5 + 1.5])


def test_concretizer_rows_and_signs():
    moves, costs = numeric_moves()
    A = np.array([[1.0, 2.0], [-1.0, -2.0], [0.0, 0.0]])
    lo, hi = concretizer(moves, costs, 1, 1.5, [0.0, 0.0])(A)
    assert lo.tolist() == [-1.0, -2.0, 0.0] and hi.tolist() == [2.0, 1.0, 0.0]


def test_concretizer_without_moves_is_the_point():
    lo, hi = concretizer({}, {}, np.inf, 1.0, [0.5, 0.25])(np.array([[2.0, 4.0]]))
    assert lo.tolist() == [2.0] and hi.tolist() == [2.0]


def test_concretizer_a_category_switch_is_one_item_of_its_weight():
    at = np.array([2, 3, 4])
    moves = {"c": (at, np.eye(3))}
    z0 = np.zeros(7)
    z0[4] = 1.0
    A = np.zeros((1, 7))
    A[0, 2:5] = [3.0, -2.0, 1.0]
    lo, hi = concretizer(moves, {"c": np.array([1.0, 1.0, 0.0])}, np.inf, 0.5, z0)(A)
    assert lo.tolist() == pytest.approx([1.0 - 1.5]) and hi.tolist() == pytest.approx([2.0])
    lo, hi = concretizer(moves, {"c": np.array([1.0, 1.0, 0.0])}, 1, 2.0, z0)(A)
    assert lo.tolist() == [-2.0] and hi.tolist() == [3.0]


# ============================================================ radius_bounds
def brute(m, radius: float, n: int = 4000) -> np.ndarray:
    """First-layer pre-activations of sampled points of objective <= radius."""
    rng = np.random.default_rng(0)
    rows = pd.DataFrame({"a": rng.uniform(-4, 4, n), "k": rng.integers(0, 11, n),
                         "c": rng.choice(["x", "y", "z"], n), "i": 0.5,
                         "u": rng.uniform(1, 2, n), "d": rng.uniform(0, 2, n)})
    keep = rng.random((n, 5)) < 0.5
    for j, name in enumerate(["a", "k", "c", "u", "d"]):
        rows.loc[keep[:, j], name] = FACTUAL[name].iloc[0]
    inside = rows[[objective_value(m, rows.iloc[[i]]) <= radius for i in range(n)]]
    Z = SPACE.transform(inside)
    first = m.adapter.structure.layers[0]
    return Z @ first.weight.T + first.bias


def test_radius_bounds_hold_the_points_within_and_are_tighter_than_the_box():
    m = model()
    bounds = radius_bounds(m, 0.5)
    pre = brute(m, 0.5, 1500)
    lo, hi = bounds[0]
    assert (pre >= lo - 1e-9).all() and (pre <= hi + 1e-9).all()
    glo, ghi = m.global_layer_bounds[0]
    assert ((hi - lo) < (ghi - glo) - 1e-3).all()
    # the first layer's exact region, widened by 1e-6 (1 + |value|)
    reach = radius_moves(m, 0.5)
    z0 = np.asarray(m.factual_inputs, dtype=float)
    first = m.adapter.structure.layers[0]
    least, most = region_concretizer(m, reach, z0)(first.weight)
    few = m.adapter.structure.sparse_bounds(z0, list(reach.moves.values()), reach.most,
                                            m.global_layer_bounds)
    want_lo = np.maximum(least + first.bias, few[0][0])
    want_hi = np.minimum(most + first.bias, few[0][1])
    assert (lo <= want_lo).all() and np.allclose(lo, want_lo, atol=1e-5)
    assert hi == pytest.approx(want_hi, abs=1e-5)
    assert len(bounds) == 2


def test_radius_bounds_widen_the_exact_first_layer(monkeypatch):
    m = model()
    reach = radius_moves(m, 0.5)
    z0 = np.asarray(m.factual_inputs, dtype=float)
    first = m.adapter.structure.layers[0]
    least, most = region_concretizer(m, reach, z0)(first.weight)
    seen = []

    def back(self, first_bounds, concretize, within=None):
        seen.append((first_bounds, within))
        return "out"

    monkeypatch.setattr(type(m.adapter.structure), "back_substituted", back)
    assert radius_bounds(m, 0.5) == "out"
    (lo, hi), within = seen[0]
    lo0, hi0 = least + first.bias, most + first.bias
    widen = 1e-6 * (1.0 + np.maximum(np.abs(lo0), np.abs(hi0)))
    assert lo == pytest.approx(lo0 - widen, rel=1e-12, abs=1e-15)
    assert hi == pytest.approx(hi0 + widen, rel=1e-12, abs=1e-15)
    few = m.adapter.structure.sparse_bounds(z0, list(reach.moves.values()), reach.most,
                                            m.global_layer_bounds)
    assert all((a == b).all() and (c == d).all() for (a, c), (b, d) in zip(within, few))


def test_radius_bounds_of_a_copy_are_its_few_moves_around_its_base():
    m = model()
    base = np.asarray(m.factual_inputs, dtype=float).copy()
    base[0] = 0.0
    reach = radius_moves(m, 0.5, ["a", "k"])
    want = m.adapter.structure.sparse_bounds(base, list(reach.moves.values()), reach.most,
                                             m.global_layer_bounds)
    got = radius_bounds(m, 0.5, base=base, support=["a", "k"])
    assert all(np.array_equal(a, b) and np.array_equal(c, d)
               for (a, c), (b, d) in zip(got, want))
    inner = [(lo + 0.01, hi - 0.01) for lo, hi in m.global_layer_bounds]
    shifted = cfopt.Explainer(net(1), SPACE).milp.adapter.structure
    got = radius_bounds(m, 0.5, base=base, within=inner)
    want = m.adapter.structure.sparse_bounds(base, list(radius_moves(m, 0.5).moves.values()),
                                             radius_moves(m, 0.5).most, inner)
    assert all(np.array_equal(a, b) and np.array_equal(c, d)
               for (a, c), (b, d) in zip(got, want))
    # another network on the same inputs
    got = radius_bounds(m, 0.5, base=base, net=shifted)
    want = shifted.sparse_bounds(base, list(radius_moves(m, 0.5).moves.values()),
                                 radius_moves(m, 0.5).most, m.global_layer_bounds)
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(got, want))


# ============================================================ copies and the restriction
def test_objective_and_distance_values():
    m = model({"l1": 1.0, "l0": 0.25})
    row = FACTUAL.assign(a=3.0, c="x")
    assert distance_value(m, row) == pytest.approx(2 / 8 + 1.0 + 2 * 0.25)
    assert objective_value(m, row) == pytest.approx(distance_value(m, row))
    m.objective.set_value(m.objective.expr + 2.0 * m.dev["a"])
    m.set_factual(FACTUAL)
    assert objective_value(m, row) == pytest.approx(1.75 + 2.0 * 2 / 8)


def test_unstable_neurons_count_the_straddling_ones():
    class Pred:
        def __init__(self, bounds):
            self.bounds = bounds

        def layer_bounds(self):
            return self.bounds

    one = Pred([(np.array([-1.0, 0.0, -2.0]), np.array([1.0, 1.0, 0.0])),
                (np.array([-1.0, -1.0]), np.array([1.0, 2.0])),
                (np.array([-5.0]), np.array([5.0]))])
    assert unstable_neurons([(one, None)]) == 1 + 2
    assert unstable_neurons([(one, None)], first=1) == 2
    assert unstable_neurons([(one, None), (one, "b")]) == 6
    assert unstable_neurons([]) == 0


def test_network_copies_and_the_restriction_in_context():
    m = model(target=1)
    copies = network_copies(m)
    assert copies == [(m.predictor_constr, None)]
    before = m.predictor_constr.layer_bounds()
    restriction = ReluRestriction()
    assert restriction.applies(m) is True and restriction.by_radius is True
    assert restriction.restrict(m, None, 0.5, {}, np.inf, True) is None
    details: dict = {}
    restricted = restriction.restrict(m, FACTUAL, 0.5, details, np.inf, True)
    assert restricted.rebuilt is False
    with restricted.context:
        inside = m.predictor_constr.layer_bounds()
        want = radius_bounds(m, 0.5, within=before)
        assert all(np.allclose(a, b) for (a, _), (b, _) in zip(inside, want))
        assert not all(np.array_equal(a, b) for (a, _), (b, _) in zip(inside, before))
    assert isinstance(details["stable_neurons"], int | np.integer)
    after = m.predictor_constr.layer_bounds()
    assert all(np.array_equal(a, b) and np.array_equal(c, d)
               for (a, c), (b, d) in zip(after, before))
    with restriction.within_radius(m, 0.5, details, support=["a"]):
        inside = m.predictor_constr.layer_bounds()
        want = radius_bounds(m, 0.5, within=before, support=["a"])
        assert all(np.allclose(a, b) for (a, _), (b, _) in zip(inside, want))
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(
        m.predictor_constr.layer_bounds(), before))


def test_copies_within_radius_restores_on_error_and_reports_the_first_copy():
    m = model(target=1)
    before = m.predictor_constr.layer_bounds()
    with pytest.raises(KeyError):
        with copies_within_radius(m, 0.5, network_copies(m)):
            raise KeyError
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(
        m.predictor_constr.layer_bounds(), before))
    seen = []
    pred = m.predictor_constr
    original = pred.set_layer_bounds

    stable = []

    def record(bounds):
        seen.append(bounds)
        stable.append(original(bounds))
        return stable[-1]

    pred.set_layer_bounds = record
    base = np.asarray(m.factual_inputs, dtype=float)
    details: dict = {}
    with copies_within_radius(m, 0.5, [(pred, None), (pred, base)], ["a"], details):
        pass
    assert len(seen) == 4
    assert all(np.allclose(a, b) for (a, _), (b, _) in zip(
        seen[0], radius_bounds(m, 0.5, within=before, support=["a"])))
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(seen[3], before))
    assert details["stable_neurons"] == stable[0]
    with copies_within_radius(m, 0.5, [(pred, None)]):
        pass


def test_the_heuristic_tries_the_cheapest_points_first(monkeypatch):
    m = model(target=1)
    rows = [FACTUAL.assign(a=float(v)) for v in range(12)]

    class Move:
        def __init__(self, k):
            self.move, self.k = k / 100, k

        def row(self, m):
            return rows[self.k]

    monkeypatch.setattr(RL, "single_moves", lambda m: [Move(k) for k in (5, 3, 9, 1, 7, 2,
                                                                         8, 4, 6, 10, 11)])
    monkeypatch.setattr(RL, "greedy_counterfactual", lambda m: rows[0])
    monkeypatch.setattr(RL, "distance_value", lambda m, row: 0.005)
    checked = []

    def violations(row):
        checked.append(row["a"].iloc[0])
        return [] if row["a"].iloc[0] == 8.0 else ["no"]

    monkeypatch.setattr(m, "violations", violations)
    # the walk and seven moves: none admitted, the cheapest (the walk's) is the guess
    assert ReluRestriction().heuristic(m)["a"].iloc[0] == 0.0
    assert checked == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0] and HEURISTIC_TRIES == 8
    checked.clear()
    monkeypatch.setattr(RL, "greedy_counterfactual", lambda m: None)
    assert ReluRestriction().heuristic(m)["a"].iloc[0] == 8.0
    assert checked == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    monkeypatch.setattr(RL, "single_moves", lambda m: [])
    assert ReluRestriction().heuristic(m) is None


def test_the_heuristic_weighs_a_move_by_its_objective(monkeypatch):
    m = model({"l1": 2.0, "l0": 0.5, "linf": 1.0}, target=1)

    class Move:
        def __init__(self, move, value):
            self.move, self.value = move, value

        def row(self, m):
            return FACTUAL.assign(a=self.value)

    # the moves cost 0.5 + 3 x 0.2 = 1.1 and 0.5 + 3 x 0.3 = 1.4, the walk 1.15 or 1.45
    monkeypatch.setattr(RL, "single_moves", lambda m: [Move(0.3, 1.0), Move(0.2, 2.0)])
    monkeypatch.setattr(RL, "greedy_counterfactual", lambda m: FACTUAL.assign(a=3.0))
    monkeypatch.setattr(m, "violations", lambda row: [] if row["a"].iloc[0] != 2.0 else ["no"])
    monkeypatch.setattr(RL, "distance_value", lambda m, row: 1.15)
    assert ReluRestriction().heuristic(m)["a"].iloc[0] == 3.0
    monkeypatch.setattr(RL, "distance_value", lambda m, row: 1.45)
    assert ReluRestriction().heuristic(m)["a"].iloc[0] == 1.0


def test_concretizer_gains_below_one_and_a_category_before_a_number():
    moves, costs = numeric_moves()
    A = np.array([[0.25, 0.5]])  # a: -0.25 / +0.5, k: +0.5 (free)
    lo, hi = concretizer(moves, costs, 1, 10.0, [0.0, 0.0])(A)
    assert (lo.tolist(), hi.tolist()) == ([-0.25], [0.5])
    lo, hi = concretizer(moves, costs, np.inf, 0.25, [0.0, 0.0])(A)
    # up: half of k's 0.5 (cost 0.5); down: a quarter of a's 0.25 (cost 1)
    assert (lo.tolist(), hi.tolist()) == ([-0.25 * 0.25], [0.25])
    z0 = np.zeros(7)
    z0[4] = 1.0
    both = {"c": (np.array([2, 3, 4]), np.eye(3)), "a": (np.array([0]), np.array([[-1.0],
                                                                                 [2.0]]))}
    A = np.zeros((1, 7))
    A[0, 0], A[0, 2] = 1.0, 0.5
    lo, hi = concretizer(both, {"c": np.array([1.0, 1.0, 0.0]), "a": np.array([1.0, 2.0])},
                         np.inf, np.inf, z0)(A)
    assert (lo.tolist(), hi.tolist()) == ([-1.0], [2.5])


class Block:
    """A declared block of a cost and network copies of its own, recording its calls."""

    kind = "fake"

    def __init__(self, m):
        self.m = m
        self.seen = []

    def cost(self, m, x0, x):
        assert m is self.m and isinstance(x0, pd.Series) and isinstance(x, pd.Series)
        self.seen.append((x0["a"], x["a"]))
        return 0.5 * abs(x["a"] - x0["a"])

    def network_copies(self, m):
        assert m is self.m
        return [("copy", "base")]


def test_objective_value_adds_the_declared_costs(monkeypatch):
    m = model({"l1": 1.0})
    block = Block(m)
    m.raw  # read before the fake block joins  # noqa: B018
    monkeypatch.setattr(type(m), "constraints", property(lambda self: {"fake": block}))
    row = FACTUAL.assign(a=3.0)
    assert objective_value(m, row) == pytest.approx(2 / 8 + 1.0)
    assert block.seen == [(1.0, 3.0)]
    assert network_copies(m) == [(m.predictor_constr, None), ("copy", "base")]


def test_radius_bounds_within_given_bounds():
    m = model()
    inner = [(lo + 0.25 * (hi - lo), hi - 0.25 * (hi - lo))
             for lo, hi in m.global_layer_bounds]
    got = radius_bounds(m, 5.0, within=inner)
    wide = radius_bounds(m, 5.0)
    for (lo, hi), (ilo, ihi) in zip(got, inner):
        assert (lo >= ilo - 1e-9).all() and (hi <= ihi + 1e-9).all()
    assert any((a != b).any() for (a, _), (b, _) in zip(got, wide))


def test_the_heuristic_without_linf_or_l0_weighs_their_absence(monkeypatch):
    class Move:
        def __init__(self, move, value):
            self.move, self.value = move, value

        def row(self, m):
            assert isinstance(m, CounterfactualModel)
            return FACTUAL.assign(a=self.value)

    seen = []

    def walk(m):
        seen.append(type(m))
        return FACTUAL.assign(a=3.0)

    def distance(m, row):
        seen.append(type(m))
        assert row["a"].iloc[0] == 3.0
        return 0.9

    monkeypatch.setattr(RL, "greedy_counterfactual", walk)
    monkeypatch.setattr(RL, "distance_value", distance)
    monkeypatch.setattr(RL, "single_moves", lambda m: seen.append(type(m)) or [
        Move(0.3, 1.0)])
    m = model({"l1": 1.0, "l0": 0.5}, target=1)  # the move: 0.8 < 0.9 (1.1 with linf 1)
    monkeypatch.setattr(m, "violations", lambda row: [])
    assert ReluRestriction().heuristic(m)["a"].iloc[0] == 1.0
    assert seen == [CounterfactualModel] * 3
    m = model({"l1": 2.0}, target=1)  # 0.6 < 0.9 (1.6 with l0 1)
    monkeypatch.setattr(m, "violations", lambda row: [])
    assert ReluRestriction().heuristic(m)["a"].iloc[0] == 1.0


def test_the_heuristic_orders_ties_by_cost_alone(monkeypatch):
    class Move:
        def __init__(self, value):
            self.move, self.value = 0.25, value

        def row(self, m):
            return FACTUAL.assign(a=self.value)

    monkeypatch.setattr(RL, "greedy_counterfactual", lambda m: None)
    monkeypatch.setattr(RL, "single_moves", lambda m: [Move(2.0), Move(1.0)])
    m = model(target=1)
    monkeypatch.setattr(m, "violations", lambda row: [])
    assert ReluRestriction().heuristic(m)["a"].iloc[0] == 2.0


def test_within_radius_reports_the_stable_neurons():
    m = model(target=1)
    details: dict = {}
    with ReluRestriction().within_radius(m, 0.5, details):
        pass
    assert isinstance(details["stable_neurons"], int | np.integer)


def test_radius_moves_at_the_exact_edges():
    # r' = r (1 + 1e-9) + 1e-12 is exactly b: a change of no move is within it
    at_b = radius_moves(model({"l1": 1.0, "l0": 0.25}), 0.24999999974899997)
    assert sorted(at_b.moves) == ["a", "d", "u"] and ends(at_b, "a") == [5 / 8, 5 / 8]
    # r' is exactly w_c = 1: the switch is within the cap
    at_w = radius_moves(model({"l1": 1.0}), 0.9999999989989999)
    assert "c" in at_w.moves


def test_integral_reach_a_hair_below_a_unit_is_that_unit():
    r = radius_moves(model({"l1": 1.0}), 0.3 * (1 - 1.5e-9))  # k: 3 (1 - 5e-10) units
    assert ends(r, "k") == pytest.approx([0.2, 0.8])


def test_a_feature_of_weight_zero_reaches_its_bounds():
    r = radius_moves(model({"l1": 1.0}, weights={"a": 0.0}), 0.1)
    assert ends(r, "a") == [0.0, 1.0] and r.costs["a"].tolist() == [0.0, 0.0]


def test_the_l1_budget_is_the_spend_over_its_coefficient():
    assert radius_moves(model({"l1": 2.0}), 0.5).budget == pytest.approx(0.25, rel=1e-8)


def test_a_factual_already_of_the_target_spends_no_l0():
    """set_factual keeps the target: a new factual of the target class needs no change."""
    m = cfopt.Explainer(net(6), SPACE, objective={"l1": 1.0, "l0": 0.25}).milp
    m.set_factual(FACTUAL)
    other = 1 - int(m.factual_class)
    m.set_target(other)
    rows = [FACTUAL.assign(a=a, k=k, c=c, u=u, d=d) for a in (-4.0, 4.0) for k in (0, 10)
            for c in "xyz" for u in (1.0, 2.0) for d in (0.0, 2.0)]
    found = [row for row in rows if m.classify(row)[0] == other]
    assert found
    m.set_factual(found[0])
    assert m.target and m.is_target(m.factual_class)
    assert radius_moves(m, 0.5).budget == pytest.approx(0.5, rel=1e-8)


def test_knapsack_free_items_whole_even_without_budget():
    values = [item(1.0, 0.0), item(2.0, 0.0)]
    assert _knapsack(values, [0.0, 4.0], 0.5, 1)[:, 0].tolist() == [1.0 + 0.25, 0.0]
    assert _knapsack(values, [0.0, 4.0], 0.0, 1)[:, 0].tolist() == [1.0, 0.0]
