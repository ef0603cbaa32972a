"""The single-feature scans of a ReLU network's query (issue 39): each is the least
move of one feature along its whole segment that makes the target win by twice the
margin, within bounds and actionability, and the query's heuristic point is the
cheapest of them (and of the greedy walk) that the declared problem admits."""

from __future__ import annotations

import pandas as pd
import pyomo.environ as pyo
import pytest
import torch

import cfopt
from cfopt.query.restrictions.relu import ReluRestriction, objective_value
from cfopt.query.restrictions.relu_points import single_moves

MARGIN = 1e-3
FRAME = pd.DataFrame({"a": [-4.0, 4.0, 0.0], "b": [-4.0, 4.0, 0.0], "c": ["x", "y", "z"]})
FACTUAL = pd.DataFrame({"a": [0.0], "b": [0.0], "c": ["z"]})


def space_of(**kinds: str) -> cfopt.FeatureSpace:
    return cfopt.FeatureSpace.from_frame(FRAME, kinds={"a": "continuous", "b": "continuous",
                                                       **kinds})


def network(space: cfopt.FeatureSpace) -> torch.nn.Sequential:
    """logit = 8 relu(z_a - 0.625) + 8 relu(0.25 - z_a) + 2 z_b + 3 [c = x] - 2 on the
    min-max scaled inputs (z = (v + 4) / 8): -1 at the factual; a alone reaches 2μ at
    a = 2 + 2μ going up and at a = -3 - 2μ going down, b alone never (2 z_b - 2 ≤ 0),
    c = "x" alone gives 2."""
    slices = space.input_slices()
    za, zb = slices["a"].start, slices["b"].start
    cx = slices["c"].start + space["c"].categories.index("x")
    first = torch.nn.Linear(space.n_inputs, 4)
    last = torch.nn.Linear(4, 1)
    with torch.no_grad():
        first.weight.zero_()
        first.weight[0, za], first.weight[1, za] = 1.0, -1.0
        first.weight[2, zb], first.weight[3, cx] = 1.0, 1.0
        first.bias.copy_(torch.tensor([-0.625, 0.25, 0.0, 0.0]))
        last.weight.copy_(torch.tensor([[8.0, 8.0, 2.0, 3.0]]))
        last.bias.fill_(-2.0)
    return torch.nn.Sequential(first, torch.nn.ReLU(), last)


def query(space: cfopt.FeatureSpace, **options) -> cfopt.Explainer:
    explainer = cfopt.Explainer(network(space), space, margin=MARGIN, **options)
    explainer.milp.set_factual(FACTUAL)
    explainer.milp.set_target(1)
    return explainer


def moves(space: cfopt.FeatureSpace) -> list[tuple[float, dict]]:
    m = query(space).milp
    return [(move.move, move.row(m).iloc[0].to_dict()) for move in single_moves(m)]


def test_each_move_is_the_first_crossing_of_its_segment() -> None:
    found = moves(space_of())
    assert [cost for cost, _ in found] == sorted(cost for cost, _ in found)
    a_moves = sorted(row["a"] for _, row in found if row["a"] != 0)
    assert a_moves == [pytest.approx(-3 - 2 * MARGIN, abs=1e-6),
                       pytest.approx(2 + 2 * MARGIN, abs=1e-6)]
    assert [row["c"] for _, row in found if row["c"] != "z"] == ["x"]
    for cost, row in found:  # one feature each, at its weighted move
        changed = [k for k in row if row[k] != FACTUAL[k].iloc[0]]
        assert len(changed) == 1
        if changed == ["a"]:
            assert cost == pytest.approx(abs(row["a"]) / 8)  # weight 1 / range
        if changed == ["c"]:  # a switch costs the feature's weight, whatever the levels
            assert cost == pytest.approx(1.0)
        assert row["b"] == 0  # b alone never reaches the goal


def test_integral_moves_round_up_to_whole_units_on_both_sides_of_zero() -> None:
    found = moves(space_of(a="integer"))
    assert sorted(row["a"] for _, row in found if row["a"] != 0) == [-4, 3]
    assert [cost for cost, row in found if row["a"] == -4] == [pytest.approx(4 / 8)]


@pytest.mark.parametrize("declare, kept", [
    (lambda s: s.increase_only("a"), [2 + 2 * MARGIN]),
    (lambda s: s.decrease_only("a"), [-3 - 2 * MARGIN]),
    (lambda s: s.immutable("a"), []),
])
def test_moves_respect_actionability(declare, kept) -> None:
    found = moves(declare(space_of()))
    assert sorted(row["a"] for _, row in found if row["a"] != 0) == \
        [pytest.approx(v, abs=1e-6) for v in kept]


def test_the_heuristic_is_the_cheapest_point_a_users_constraint_admits() -> None:
    explainer = query(space_of())
    m = explainer.milp
    restriction = ReluRestriction()
    first = restriction.heuristic(m)
    assert first["a"].iloc[0] == pytest.approx(2 + 2 * MARGIN, abs=1e-6)
    m.no_raise = pyo.Constraint(expr=m.x["a"] <= m.x0["a"])  # the user's own rule
    second = restriction.heuristic(m)
    assert second["a"].iloc[0] == pytest.approx(-3 - 2 * MARGIN, abs=1e-6)
    r = explainer.explain(FACTUAL, target=1)
    assert r.status is cfopt.Status.OPTIMAL and r.counterfactual["a"].iloc[0] <= 0
    assert r.details["heuristic_objective"] == pytest.approx(objective_value(m, second))
    assert r.objective == pytest.approx((3 + MARGIN) / 8, abs=1e-6)


def test_the_heuristic_skips_points_a_declared_block_excludes() -> None:
    # a ≤ 0 (the factual's value) as a declared linear block: the cheapest move, a up,
    # is excluded; a down (relative change -3 - 2μ) is the next one the block admits
    block = cfopt.LinearConstraint({"a": 1.0}, "<=", 0.0, relative=True)
    explainer = query(space_of(), constraints=[block])
    row = ReluRestriction().heuristic(explainer.milp)
    assert row["a"].iloc[0] == pytest.approx(-3 - 2 * MARGIN, abs=1e-6)
    r = explainer.explain(FACTUAL, target=1)
    assert r.status is cfopt.Status.OPTIMAL and r.counterfactual["a"].iloc[0] <= 0
    assert r.objective == pytest.approx((3 + MARGIN) / 8, abs=1e-6)
