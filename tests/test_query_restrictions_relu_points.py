"""The heuristic points of a ReLU network's query (:mod:`cfopt.query.restrictions.relu_points`)
on tiny hand-made networks: the target score and its gradient (against finite
differences), the factual's score, the greedy walk's moves (their size, direction,
rounding, the cap on changes and actionability) and the single moves' guards."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

import cfopt
from cfopt.models.network import ReLUNetwork
from cfopt.query.restrictions import relu_points as rp

MARGIN = 1e-3
GOAL = 2 * MARGIN
FRAME = pd.DataFrame({"a": [-4.0, 4.0, 0.0], "b": [-4.0, 4.0, 0.0], "c": ["x", "y", "z"]})
FACTUAL = pd.DataFrame({"a": [0.0], "b": [0.0], "c": ["z"]})


# ------------------------------------------------------------------ the score
def random_net(outputs: int, seed: int = 0) -> ReLUNetwork:
    rng = np.random.default_rng(seed)
    return ReLUNetwork.from_parameters([
        (rng.normal(size=(6, 3)), rng.normal(size=6)),
        (rng.normal(size=(5, 6)), rng.normal(size=5)),
        (rng.normal(size=(outputs, 5)), rng.normal(size=outputs))])


def numeric_gradient(net, z, decision, targets, h=1e-6):
    return np.array([(rp._score(net, z + h * e, decision, targets, False)[0]
                      - rp._score(net, z - h * e, decision, targets, False)[0]) / (2 * h)
                     for e in np.eye(len(z))])


@pytest.mark.parametrize("outputs, decision, targets", [
    (3, "argmax", [0]), (3, "argmax", [0, 2]), (3, "argmax", [1]),
    (1, "sign", [1]), (1, "sign", [0]), (1, "regression", [-5.0, 0.5]),
    (1, "regression", [-0.5, 5.0])])
def test_the_gradient_is_the_scores_slope(outputs, decision, targets):
    net = random_net(outputs)
    rng = np.random.default_rng(1)
    for _ in range(6):
        z = rng.normal(size=3)
        score, grad = rp._score(net, z, decision, targets)
        expected = rp.target_scores(net, z[None, :], decision, targets)[0]
        assert score == pytest.approx(expected, abs=1e-12)
        np.testing.assert_allclose(grad, numeric_gradient(net, z, decision, targets),
                                   atol=1e-5)
        assert rp._score(net, z, decision, targets, with_grad=False) == (score, None)


def test_the_networks_tried_have_neurons_active_below_one_and_inactive():
    pres = np.concatenate([p[:, :-0 or None].ravel() for p in
                           random_net(3).pre_activations(
                               np.random.default_rng(1).normal(size=(6, 3)))[:-1]])
    assert ((pres > 0) & (pres < 1)).any() and (pres < 0).any()


def test_a_regressor_in_the_middle_of_its_interval_climbs_from_the_low_side():
    net = ReLUNetwork.from_parameters([(np.array([[1.0]]), np.array([0.0])),
                                       (np.array([[2.0]]), np.array([0.0]))])
    score, grad = rp._score(net, np.array([0.25]), "regression", [0.0, 1.0])
    assert score == 0.5 and list(grad) == [2.0]  # h - low = high - h: +1
    score, grad = rp._score(net, np.array([0.375]), "regression", [0.0, 1.0])
    assert score == 0.25 and list(grad) == [-2.0]


def test_the_batch_scores_take_one_row_too():
    net = random_net(3)
    z = np.array([0.1, -0.2, 0.3])
    assert rp.target_scores(net, z, "argmax", [1]).shape == (1,)
    assert rp.target_scores(net, z, "argmax", [1])[0] == rp._score(net, z, "argmax", [1],
                                                                    False)[0]


# ------------------------------------------------------------------ queries
def space_of(**kinds: str) -> cfopt.FeatureSpace:
    return cfopt.FeatureSpace.from_frame(FRAME, kinds={"a": "continuous", "b": "continuous",
                                                       **kinds})


def network(space, a=0.0, b=2.0, bias=-1.5, cx=0.0) -> torch.nn.Sequential:
    """logit = a z_a + b z_b + cx [c = x] + bias on the scaled inputs z = (v + 4) / 8,
    through ReLU neurons always active (z_a, z_b, [c = x] ≥ 0)."""
    slices = space.input_slices()
    first = torch.nn.Linear(space.n_inputs, 3)
    last = torch.nn.Linear(3, 1)
    with torch.no_grad():
        first.weight.zero_()
        first.bias.zero_()
        first.weight[0, slices["a"].start] = 1.0
        first.weight[1, slices["b"].start] = 1.0
        first.weight[2, slices["c"].start + space["c"].categories.index("x")] = 1.0
        last.weight.copy_(torch.tensor([[a, b, cx]]))
        last.bias.fill_(bias)
    return torch.nn.Sequential(first, torch.nn.ReLU(), last)


def query(space, target=1, **weights):
    options = {key: weights.pop(key) for key in ("max_changes",) if key in weights}
    explainer = cfopt.Explainer(network(space, **weights), space, margin=MARGIN,
                                bound_tightening=None, **options)
    explainer.milp.set_factual(FACTUAL)
    explainer.milp.set_target(target)
    return explainer.milp


def step(score, slope=0.25):
    """The walk's move of a numeric feature from ``score`` (slope per raw unit)."""
    return (GOAL - score) / slope * 1.05 + 1e-9 * 8


def test_the_factual_score_is_the_networks():
    m = query(space_of(), a=1.0, b=2.0, bias=-2.0)  # 0.5 + 1 - 2
    assert rp.factual_score(m) == pytest.approx(-0.5, abs=1e-12)
    assert rp.factual_score(query(space_of(), target=0, a=1.0, bias=-1.0)) == \
        pytest.approx(-(0.5 + 1 - 1), abs=1e-12)


@pytest.mark.parametrize("change", [{"factual": None}, {"target": ()},
                                    {"adapter": SimpleNamespace(structure=None)}])
def test_no_score_and_no_points_without_a_network_or_a_query(change):
    m = query(space_of())
    stand_in = SimpleNamespace(**{**{k: getattr(m, k) for k in (
        "adapter", "factual", "target", "factual_inputs", "change_cap")}, **change})
    assert rp.factual_score(stand_in) is None
    assert rp.greedy_counterfactual(stand_in) is None
    assert rp.single_moves(stand_in) == []


def test_one_move_of_the_feature_that_raises_the_score():
    m = query(space_of())  # 2 z_b - 1.5: -0.5 at the factual, 1/4 per unit of b
    row = rp.greedy_counterfactual(m)
    assert row["b"].iloc[0] == pytest.approx(step(-0.5), abs=1e-12)
    assert row["a"].iloc[0] == 0 and row["c"].iloc[0] == "z"


def test_an_integral_move_rounds_up_to_whole_units():
    row = rp.greedy_counterfactual(query(space_of(b="integer")))
    assert row["b"].iloc[0] == 3


@pytest.mark.parametrize("declare", [lambda s: s.decrease_only("b"),
                                     lambda s: s.immutable("b")])
def test_no_walk_against_the_actionability(declare):
    assert rp.greedy_counterfactual(query(declare(space_of()))) is None


def test_a_feature_at_its_bound_gives_way_to_the_next():
    # 2 z_a + 2 z_b - 3.5: a (first of equal ratios) to its bound, then b the rest
    m = query(space_of(), a=2.0, bias=-3.5)
    row = rp.greedy_counterfactual(m)
    assert row["a"].iloc[0] == 4.0
    assert row["b"].iloc[0] == pytest.approx(step(-0.5), abs=1e-12)
    assert rp.greedy_counterfactual(m, max_steps=1) is None


def test_a_falling_slope_moves_down_to_the_lower_bound():
    m = query(space_of(), a=-2.0, bias=-1.5)  # -2 z_a + 2 z_b - 1.5
    row = rp.greedy_counterfactual(m)
    assert row["a"].iloc[0] == -4.0
    assert row["b"].iloc[0] == pytest.approx(step(-0.5), abs=1e-12)
    assert rp.greedy_counterfactual(query(space_of().increase_only("a"), a=-2.0,
                                          bias=-1.5)) is None


def test_the_cap_on_changes_stops_the_walk():
    m = query(space_of(), a=2.0, bias=-3.5, max_changes=1)
    assert rp.greedy_counterfactual(m) is None
    m = query(space_of(), max_changes=1)
    assert rp.greedy_counterfactual(m)["b"].iloc[0] == pytest.approx(step(-0.5), abs=1e-12)


def test_the_cheapest_gain_wins_and_a_switch_is_one_step():
    # c = x adds 3 for a weight of 1 (ratio 3); b adds 1/4 per unit, weight 1/8 (ratio 2)
    row = rp.greedy_counterfactual(query(space_of(), cx=3.0))
    assert row.iloc[0].to_dict() == {"a": 0.0, "b": 0.0, "c": "x"}
    # c = x adds 1 (ratio 1): b first, which alone reaches the goal
    row = rp.greedy_counterfactual(query(space_of(), cx=1.0))
    assert row["c"].iloc[0] == "z" and row["b"].iloc[0] == pytest.approx(step(-0.5))
    # a switch that lowers the score is never taken
    row = rp.greedy_counterfactual(query(space_of(), cx=-1.0))
    assert row["c"].iloc[0] == "z"


def test_the_single_moves_of_one_feature_and_a_switch():
    moves = rp.single_moves(query(space_of(), cx=3.0))
    assert [mv.feature for mv in moves] == ["b", "c"]  # a never reaches the goal
    b, c = moves
    assert b.code == pytest.approx((GOAL + 0.5) / 0.25, abs=1e-8)
    assert b.move == pytest.approx(b.code / 8, abs=1e-9)
    assert c.code == 0.0 and c.move == 1.0  # x, level 0: a switch costs the weight


def test_no_single_move_under_a_cap_of_zero():
    m = query(space_of(), max_changes=1)
    assert [mv.feature for mv in rp.single_moves(m)] == ["b"]
    stand_in = SimpleNamespace(**{k: getattr(m, k) for k in (
        "adapter", "factual", "target", "factual_inputs")}, change_cap=0.0)
    assert rp.single_moves(stand_in) == []


def test_a_move_costs_its_distance_from_the_factual():
    m = query(space_of())
    m.set_factual(pd.DataFrame({"a": [0.0], "b": [1.0], "c": ["z"]}))  # score -0.25
    (move,) = [mv for mv in rp.single_moves(m) if mv.feature == "b"]
    assert move.code == pytest.approx((GOAL + 1.5) / 0.25 - 4, abs=1e-8)
    assert move.move == pytest.approx((move.code - 1.0) / 8, abs=1e-9)


def hump(space, at, width=1e-4, height=5000.0) -> torch.nn.Sequential:
    """logit = height (relu(z_b - at + w) - 2 relu(z_b - at) + relu(z_b - at - w)) - 1/4:
    -1/4 but on a narrow peak at z_b = ``at`` (height w - 1/4 there)."""
    slices = space.input_slices()
    first, last = torch.nn.Linear(space.n_inputs, 3), torch.nn.Linear(3, 1)
    with torch.no_grad():
        first.weight.zero_()
        first.weight[:, slices["b"].start] = 1.0
        first.bias.copy_(torch.tensor([width - at, -at, -at - width], dtype=torch.float64))
        last.weight.copy_(torch.tensor([[height, -2 * height, height]]))
        last.bias.fill_(-0.25)
    return torch.nn.Sequential(first, torch.nn.ReLU(), last)


def test_the_scan_finds_a_crossing_its_first_sample_alone_sees():
    # b's segment up runs from z_b = 1/2 to 1: its first sample, 1/64 of it, is on the
    # peak (within 1e-4 / 2 of the segment); 1/62, 1/63, 1/65 or 1/49 of it would miss it
    space = space_of()
    at = 0.5 + 0.5 / rp.SCAN_SAMPLES
    explainer = cfopt.Explainer(hump(space, at), space, margin=MARGIN, bound_tightening=None)
    m = explainer.milp
    m.set_factual(FACTUAL)
    m.set_target(1)
    net = m.adapter.structure
    assert rp.factual_score(m) == pytest.approx(-0.25, abs=1e-9)
    (move,) = rp.single_moves(m)
    assert move.feature == "b"
    # the crossing: height (z_b - at + w) - 1/4 = 2μ on the rising side (the float64
    # network of the float32 weights)
    rise, shift = float(net.layers[1].weight[0, 0]), float(net.layers[0].bias[0])
    crossing = (GOAL - float(net.layers[1].bias[0])) / rise - shift
    assert move.code == pytest.approx(8 * crossing - 4, abs=1e-6)


# ------------------------------------------------------------------ the walk's choices
def walk(space, factual=FACTUAL, weights="range", max_changes=None, **net):
    explainer = cfopt.Explainer(network(space, **net), space, margin=MARGIN,
                                bound_tightening=None, weights=weights,
                                max_changes=max_changes)
    explainer.milp.set_factual(factual)
    explainer.milp.set_target(1)
    return rp.greedy_counterfactual(explainer.milp)


@pytest.mark.parametrize("declare, a", [
    (lambda s: s.decrease_only("a"), 3.0),   # a's slope up: forbidden
    (lambda s: s.increase_only("a"), -3.0),  # a's slope down: forbidden
    (lambda s: s.immutable("a"), 3.0)])
def test_a_forbidden_feature_gives_way_to_the_next(declare, a):
    # a: 3/8 per unit (ratio 3), b: 2/8 (ratio 2); -1/2 at the factual
    row = walk(declare(space_of()), a=a, bias=-3.0 if a > 0 else 0.0)
    assert row["a"].iloc[0] == 0 and row["b"].iloc[0] == pytest.approx(step(-0.5), abs=1e-12)


def test_weights_in_raw_units_still_move():
    row = walk(space_of(), weights={"a": 1.0, "b": 1.0, "c": 1.0})  # ratio 1/4
    assert row["b"].iloc[0] == pytest.approx(step(-0.5), abs=1e-12)


def test_a_free_feature_goes_first():
    row = walk(space_of(), weights={"a": 1.0, "b": 0.0, "c": 1.0}, a=3.0, bias=-3.0)
    assert row["a"].iloc[0] == 0 and row["b"].iloc[0] == pytest.approx(step(-0.5), abs=1e-12)


def test_an_integral_move_short_of_a_unit_is_one_unit():
    row = walk(space_of(b="integer"), bias=-1.1)  # -0.1: 0.43 of a unit would do
    assert row["b"].iloc[0] == 1


def test_a_switch_by_its_gain_per_weight():
    # c = x gains 3 for a weight of 2 (1.5) against b's 2: b
    row = walk(space_of(), weights={"a": 0.125, "b": 0.125, "c": 2.0}, cx=3.0)
    assert row["c"].iloc[0] == "z" and row["b"].iloc[0] > 0
    # c = x gains 0.9 for a weight of 0.1 (9): the switch alone
    row = walk(space_of(), weights={"a": 0.125, "b": 0.125, "c": 0.1}, cx=0.9)
    assert row.iloc[0].to_dict() == {"a": 0.0, "b": 0.0, "c": "x"}
    # a tie (2 and 2): the first feature, b
    row = walk(space_of(), cx=2.0)
    assert row["c"].iloc[0] == "z" and row["b"].iloc[0] > 0


def test_a_category_first_in_the_space_does_not_end_the_search():
    space = cfopt.FeatureSpace.from_frame(FRAME[["c", "a", "b"]],
                                          kinds={"a": "continuous", "b": "continuous"})
    row = walk(space, factual=FACTUAL[["c", "a", "b"]], cx=-1.0)
    assert row["c"].iloc[0] == "z" and row["b"].iloc[0] == pytest.approx(step(-0.5),
                                                                         abs=1e-12)


def test_a_move_down_has_the_room_down():
    # a at 3: room 1 up, 7 down; -2 z_a + 2 z_b: -0.75 at the factual
    row = walk(space_of(), factual=pd.DataFrame({"a": [3.0], "b": [0.0], "c": ["z"]}),
               a=-2.0, bias=0.0)
    assert row["a"].iloc[0] == pytest.approx(3 - step(-0.75), abs=1e-12)
    assert row["b"].iloc[0] == 0


def test_a_slope_of_one_per_unit_moves():
    row = walk(space_of(), b=8.0, bias=-4.5)
    assert row["b"].iloc[0] == pytest.approx(step(-0.5, slope=1.0), abs=1e-12)


def test_a_feature_within_a_hair_of_its_bound_stays():
    factual = pd.DataFrame({"a": [4.0 - 4e-12], "b": [0.0], "c": ["z"]})
    row = walk(space_of(), factual=factual, a=2.0, bias=-3.5)
    assert row["a"].iloc[0] == 4.0 - 4e-12 and row["b"].iloc[0] > 0


# ------------------------------------------------------------------ the scans, exactly
EXACT = 2.0 ** -10  # a margin whose goal, 2^-9, and crossings are exact in binary


def exact_query(space, factual=FACTUAL, **net):
    explainer = cfopt.Explainer(network(space, **net), space, margin=EXACT,
                                bound_tightening=None)
    explainer.milp.set_factual(factual)
    explainer.milp.set_target(1)
    return explainer.milp


def test_a_sample_exactly_at_the_goal_is_the_crossing():
    # 2 z_b - 1.498046875 is 2^-9 exactly at b = 2, the scan's 32nd of 64 samples up;
    # c = x (+1/2) reaches it exactly too
    m = exact_query(space_of(), bias=-1.498046875, cx=0.5)
    moves = {mv.feature: mv for mv in rp.single_moves(m)}
    assert set(moves) == {"b", "c"} and moves["b"].code == 2.0 and moves["c"].code == 0.0
    m = exact_query(space_of(b="integer"), bias=-1.498046875)
    assert [mv.code for mv in rp.single_moves(m) if mv.feature == "b"] == [2.0]


def test_an_integral_move_short_of_the_goal_by_twice_is_kept():
    # 2 z_b - 1.747 is 0.003 at b = 3 (between 2μ and 4μ), the first whole unit past 2.996
    m = query(space_of(b="integer"), bias=-1.747)
    assert [mv.code for mv in rp.single_moves(m) if mv.feature == "b"] == [3.0]


def test_an_integral_move_down_to_a_bound_at_zero():
    frame = pd.DataFrame({"a": [0, 6], "b": [0, 6]})
    space = cfopt.FeatureSpace.from_frame(frame, kinds={"a": "integer", "b": "integer"})
    slices = space.input_slices()
    layer = torch.nn.Linear(space.n_inputs, 1)
    with torch.no_grad():
        layer.weight.zero_()
        layer.weight[0, slices["b"].start] = -2.0  # -2 z_b + 0.5 on z = b / 6
        layer.bias.fill_(0.5)
    explainer = cfopt.Explainer(torch.nn.Sequential(layer), space, margin=MARGIN,
                                bound_tightening=None)
    explainer.milp.set_factual(pd.DataFrame({"a": [0], "b": [3]}))  # -0.5
    explainer.milp.set_target(1)
    (move,) = rp.single_moves(explainer.milp)
    assert (move.feature, move.code) == ("b", 1.0)  # 0.5 - 2/6 b >= 2μ: b <= 1.497


def test_an_immutable_or_categorical_first_feature_does_not_end_the_scan():
    assert [mv.feature for mv in rp.single_moves(query(space_of().immutable("a")))] == ["b"]
    space = cfopt.FeatureSpace.from_frame(FRAME[["c", "a", "b"]],
                                          kinds={"a": "continuous", "b": "continuous"})
    explainer = cfopt.Explainer(network(space), space, margin=MARGIN, bound_tightening=None)
    explainer.milp.set_factual(FACTUAL[["c", "a", "b"]])
    explainer.milp.set_target(1)
    assert [mv.feature for mv in rp.single_moves(explainer.milp)] == ["b"]


def test_a_neuron_exactly_at_its_kink_counts_as_inactive():
    net = ReLUNetwork.from_parameters([(np.array([[1.0], [1.0]]), np.array([0.0, 1.0])),
                                       (np.array([[1.0, 1.0]]), np.array([0.0]))])
    score, grad = rp._score(net, np.array([0.0]), "sign", [1])
    assert score == 1.0 and list(grad) == [1.0]  # the first neuron, at 0, adds nothing
