"""The greedy incumbent of a tree-ensemble query (:mod:`cfopt.query.restrictions.tree_walk`)
by hand: the walk's objective of code moves, the candidate codes of each feature (split
sides mapped to codes, whole units, bounds, actionability, the even spread of many), and
walks on a depth-2 tree of known splits (class 1 iff a > 7.5 or k > 3.5): the cheapest
single move, the user's rules kept, no walk where nothing reaches the target."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

import cfopt
from cfopt.query.restrictions import tree_walk as W
from cfopt.query.restrictions.tree_walk import (
    MAX_MOVES,
    _Encoder,
    _moves,
    greedy_tree_counterfactual,
)
from cfopt.query.separable import Rule, SeparableForm
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace


def space_of(**options) -> FeatureSpace:
    return FeatureSpace([
        Feature("a", "continuous", lower=0.0, upper=10.0),
        Feature("k", "integer", lower=0, upper=5),
        Feature("c", "categorical", categories=("x", "y", "z")),
        Feature("u", "continuous", lower=0.0, upper=4.0),
        Feature("d", "continuous", lower=0.0, upper=8.0),
    ]).increase_only("u").decrease_only("d")


SPACE = space_of()
GRID = pd.DataFrame(list(itertools.product(range(11), range(6), "xyz", [1.0], [2.0])),
                    columns=["a", "k", "c", "u", "d"]).astype({"a": float})
LABELS = ((GRID.a >= 8) | (GRID.k >= 4)).astype(int)
TREE = DecisionTreeClassifier(max_depth=2, random_state=0).fit(SPACE.transform(GRID), LABELS)
FACTUAL = pd.DataFrame({"a": [5.0], "k": [2], "c": ["y"], "u": [1.0], "d": [2.0]})


def query(space=SPACE, model=TREE, target=1, **options):
    m = cfopt.Explainer(model, space, **options).milp
    m.set_factual(FACTUAL)
    if target is not None:
        m.set_target(target)
    return m


# ============================================================ the objective of moves
def test_the_walks_objective_of_code_moves():
    m = query(objective={"l1": 2.0, "l0": 0.5, "linf": 3.0})
    enc = _Encoder(m)
    assert enc.weights.tolist() == pytest.approx([0.1, 0.2, 1.0, 0.25, 0.125])
    delta = np.array([[2.0, 1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0],
                      [0.0, 0.0, 0.0, 4.0, 0.0]])
    # weighted moves 0.2, 0.2, 1 | none | 1 (u 4 x 0.25)
    assert enc.objective(delta).tolist() == pytest.approx([
        2.0 * 1.4 + 0.5 * 3 + 3.0 * 1.0, 0.0, 2.0 * 1.0 + 0.5 + 3.0 * 1.0])
    l1 = _Encoder(query())
    assert l1.objective(delta).tolist() == pytest.approx([1.4, 0.0, 1.0])
    linf = _Encoder(query(objective="linf"))
    assert linf.objective(delta).tolist() == pytest.approx([1.0, 0.0, 1.0])
    assert linf.objective(np.zeros((1, 5))).tolist() == [0.0]


# ============================================================ candidate codes
def moves_of(m, name, values, x0):
    enc = _Encoder(m)
    k = enc.specs_of[name][0][0]
    return _moves(m, enc, name, x0, {k: np.asarray(values, dtype=float)}).tolist()


def test_candidate_codes_of_each_kind():
    m = query()
    assert moves_of(m, "a", [2.5, 11.0, -1.0, 2.5, 7.25], 5.0) == [2.5, 7.25]
    assert moves_of(m, "a", [0.0, 10.0], 5.0) == [0.0, 10.0]
    # whole units: both sides of a cut, a value within 1e-9 of a unit is that unit
    assert moves_of(m, "k", [2.5, 3.0 + 5e-10, 5.5], 2.0) == [2.0, 3.0, 5.0]
    assert moves_of(m, "k", [4.0 - 5e-10], 2.0) == [4.0]
    assert moves_of(m, "u", [0.5, 1.0, 3.5], 1.0) == [1.0, 3.5]  # increase only
    assert moves_of(m, "d", [0.5, 2.0, 3.5], 2.0) == [0.5, 2.0]  # decrease only
    enc = _Encoder(m)
    assert _moves(m, enc, "c", 1.0, {}).tolist() == [0.0, 1.0, 2.0]
    assert _moves(m, enc, "a", 5.0, {}).tolist() == []
    assert _moves(m, enc, "a", 5.0, {enc.specs_of["k"][0][0]: np.array([1.0])}).tolist() \
        == []


def test_candidate_codes_map_inputs_back_to_codes(monkeypatch):
    m = query()
    enc = _Encoder(m)
    k, spec = enc.specs_of["a"][0]
    enc.specs_of["a"] = [(k, dataclasses.replace(spec, a=0.5, b=1.0))]  # input = a / 2 + 1
    assert _moves(m, enc, "a", 5.0, {k: np.array([2.0, 4.0, 7.0])}).tolist() == [2.0, 6.0]
    enc.specs_of["a"] = [(k, dataclasses.replace(spec, a=0.0, b=1.0))]
    assert _moves(m, enc, "a", 5.0, {k: np.array([2.0])}).tolist() == []


def test_many_candidates_keep_the_nearest_and_an_even_spread():
    m = query()
    values = np.round(np.arange(100) * 0.1, 10)  # 0.0 .. 9.9
    got = moves_of(m, "a", values, 5.0)
    near = MAX_MOVES // 4
    below = [v for v in values if v < 5.0][-near:]
    above = [v for v in values if v > 5.0][:near]
    spread = values[np.linspace(0, 99, MAX_MOVES // 2).astype(int)]
    assert got == sorted(set(below) | set(above) | set(spread.tolist()))
    assert len(below) == len(above) == 16 and below[-1] == 4.9 and above[0] == 5.1
    assert got[0] == 0.0 and got[-1] == 9.9 and 5.0 not in got
    assert moves_of(m, "a", values[:MAX_MOVES], 5.0) == values[:MAX_MOVES].tolist()
    assert len(moves_of(m, "a", values[:MAX_MOVES + 1], 5.0)) < MAX_MOVES + 1


# ============================================================ walks
def test_the_cheapest_single_move_reaches_the_target():
    m = query()
    row = greedy_tree_counterfactual(m)
    # a: 2.5 units x 0.1 = 0.25 (just past its cut) < k: 2 units x 0.2 = 0.4
    assert 7.5 < row["a"].iloc[0] < 7.5 + 1e-6
    assert row[["k", "c", "u", "d"]].iloc[0].tolist() == [2, "y", 1.0, 2.0]
    m = query(weights={"a": 0.5})  # a: 1.25 > k: 0.4
    row = greedy_tree_counterfactual(m)
    assert row["k"].iloc[0] == 4 and row["a"].iloc[0] == 5.0


def test_the_walk_keeps_a_users_rule_and_guesses_without_it():
    block = cfopt.LinearConstraint({"k": 1.0}, "<=", 0.0, relative=True, name="no_k")
    m = query(weights={"a": 0.5}, constraints=[block])
    row = greedy_tree_counterfactual(m)
    assert 7.5 < row["a"].iloc[0] < 7.5 + 1e-6 and row["k"].iloc[0] == 2
    assert not m.violations(row)
    # a rule no move keeps: the walk without it is only a guess
    both = cfopt.LinearConstraint({"a": 1.0}, "<=", 0.0, relative=True, name="no_a")
    m = query(weights={"a": 0.5}, constraints=[block, both])
    row = greedy_tree_counterfactual(m)
    assert row["k"].iloc[0] == 4 and m.violations(row)


def test_the_cap_on_changes_and_actionability():
    m = query(space=space_of().immutable("k").decrease_only("a"))
    assert greedy_tree_counterfactual(m) is None
    m = query(space=space_of().decrease_only("a"), max_changes=1)
    row = greedy_tree_counterfactual(m)
    assert row["k"].iloc[0] == 4 and row["a"].iloc[0] == 5.0


def test_no_walk_without_trees_a_factual_or_a_target():
    frame = GRID.copy()
    lr = LogisticRegression().fit(SPACE.transform(frame), LABELS)
    assert greedy_tree_counterfactual(query(model=lr)) is None
    m = cfopt.Explainer(TREE, SPACE).milp
    assert greedy_tree_counterfactual(m) is None  # no factual
    m.set_factual(FACTUAL)
    assert greedy_tree_counterfactual(m) is None  # no target


def test_the_walk_stops_after_max_steps(monkeypatch):
    m = query()
    assert greedy_tree_counterfactual(m, max_steps=0) is None
    assert greedy_tree_counterfactual(m, max_steps=1) is not None


def partial_tree() -> DecisionTreeClassifier:
    """P(class 1) 0.4 with a > 7.5 alone, 0.3 with k > 3.5 alone, 1 with both, else 0:
    no single move reaches the target."""
    rows, labels = [], []
    for a, k in itertools.product(range(11), range(6)):
        share = {(True, True): 10, (True, False): 4, (False, True): 3}.get((a >= 8, k >= 4), 0)
        for j in range(10):
            rows.append((float(a), k, "y", 1.0, 2.0))
            labels.append(int(j < share))
    frame = pd.DataFrame(rows, columns=["a", "k", "c", "u", "d"])
    return DecisionTreeClassifier(max_depth=2, random_state=0).fit(SPACE.transform(frame),
                                                                   labels)


def test_the_walk_takes_the_best_gain_per_cost_then_the_target():
    m = query(model=partial_tree())
    walk = W._Walk(m, m.adapter.structure, [], None)
    assert not walk.reach(1)  # a first: gain 0.4 for 0.25 against 0.3 for 0.4
    assert 7.5 < walk.c[0] < 7.5 + 1e-6 and walk.c[1] == 2
    assert walk.reach(1)
    assert walk.c[1] == 4 and walk.cost() == pytest.approx(0.25 + 0.4, abs=1e-6)
    row = greedy_tree_counterfactual(m)
    assert 7.5 < row["a"].iloc[0] < 7.5 + 1e-6 and row["k"].iloc[0] == 4


def test_the_users_term_joins_the_walks_cost():
    m = query()
    m.objective.set_value(m.objective.expr + 1.0 * m.dev["a"])  # a: 0.2 a unit
    m.set_factual(FACTUAL)
    m.set_target(1)
    row = greedy_tree_counterfactual(m)
    assert row["k"].iloc[0] == 4 and row["a"].iloc[0] == 5.0


def test_the_cap_stops_a_walk_needing_a_second_change():
    assert greedy_tree_counterfactual(query(model=partial_tree(), max_changes=1)) is None


def test_the_descent_tries_changed_features_back_toward_the_factual():
    m = query(model=partial_tree())
    walk = W._Walk(m, m.adapter.structure, [], None)
    assert walk.reach(30)
    owners, Z, scores, costs = walk.moves(closer=True)
    # a back to 5 or to the cut's left side; k back to 2 or 3; unchanged features none
    assert [i for i, _ in owners] == [0, 0, 1, 1]
    assert [v for _, v in owners] == pytest.approx([5.0, 7.5, 2.0, 3.0], abs=1e-6)
    assert costs.tolist() == pytest.approx([0.4, 0.65, 0.25, 0.45], abs=1e-6)
    assert (scores < walk.goal).all() and len(Z) == 4
    before = walk.c.copy()
    walk.descend(30)
    assert walk.c.tolist() == before.tolist()


def test_a_category_change_counts_one_whatever_its_codes():
    m = query()
    walk = W._Walk(m, m.adapter.structure, [], None)
    walk.c = walk.c.copy()
    walk.c[2] = 0.0  # c: y (1) -> x (0)
    walk.c[0] = 7.0
    assert walk.delta().tolist() == [2.0, 0.0, 1.0, 0.0, 0.0]
    far = query()
    far.set_factual(FACTUAL.assign(c="x"))
    far.set_target(1)
    other = W._Walk(far, far.adapter.structure, [], None)
    other.c = other.c.copy()
    other.c[2] = 2.0  # x (0) -> z (2)
    assert other.delta().tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert other.cost() == pytest.approx(1.0)


def test_the_rules_kept_are_the_inequalities_the_factual_meets():
    m = query()
    form = SeparableForm(0.0, {"a": [1.0, 0.0, 0.0]})  # g = a
    other = SeparableForm(0.0, {"a": [-1.0, 0.0, 0.0]})  # g = -a
    rules = [Rule(form, -np.inf, 6.0, 0.0), Rule(form, 5.0, 5.0, 0.0),
             Rule(form, -np.inf, 4.0, 0.0), Rule(other, -np.inf, -4.5, 0.0)]
    walk = W._Walk(m, m.adapter.structure, rules, None)
    assert walk.rules == [rules[0], rules[3]]  # an equality and a broken one dropped
    assert walk.values.tolist() == [5.0, -5.0]
    codes = np.array([4.0, 4.5, 6.0, 7.0])
    assert walk.kept("a", 0, codes).tolist() == [4.5, 6.0]  # a <= 6 and a >= 4.5
    walk.c = walk.c.copy()
    walk.c[0] = 6.0
    walk.refresh()
    assert walk.values.tolist() == [6.0, -6.0]
    assert walk._change(form, "a", 0, codes).tolist() == [-2.0, -1.5, 0.0, 1.0]
    assert walk.kept("a", 0, codes).tolist() == [4.5, 6.0]
    assert walk.kept("k", 1, np.array([1.0, 5.0])).tolist() == [1.0, 5.0]


def test_the_walk_stops_at_twice_the_margin():
    rows, labels = [], []
    for a, k in itertools.product(range(11), range(6)):
        share = 6 if a >= 8 else 0
        for j in range(10):
            rows.append((float(a), k, "y", 1.0, 2.0))
            labels.append(int(j < share))
    frame = pd.DataFrame(rows, columns=["a", "k", "c", "u", "d"])
    tree = DecisionTreeClassifier(max_depth=2, random_state=0).fit(SPACE.transform(frame),
                                                                   labels)
    m = query(model=tree, margin=0.08)  # 0.16 < 0.2 < 0.24
    walk = W._Walk(m, m.adapter.structure, [], None)
    assert walk.goal == pytest.approx(0.16)
    assert walk.reach(30) and walk.score == pytest.approx(0.2, abs=1e-9)


def test_the_moves_of_a_step_and_their_costs():
    m = query()
    walk = W._Walk(m, m.adapter.structure, [], None)
    owners, Z, scores, costs = walk.moves(closer=False)
    got = {owner: cost for owner, cost in zip(owners, costs.tolist())}
    assert got[2, 0.0] == pytest.approx(1.0) and got[2, 2.0] == pytest.approx(1.0)
    assert (2, 1.0) not in got  # the current level
    assert got[1, 4.0] == pytest.approx(0.4) and got[1, 3.0] == pytest.approx(0.2)
    a_moves = [v for i, v in owners if i == 0]
    assert all(got[0, v] == pytest.approx(0.1 * abs(v - 5.0)) for v in a_moves)
    assert len(Z) == len(owners) == len(scores)
    none = W._Walk(query(space=space_of().immutable("a", "k", "c", "u", "d")),
                   m.adapter.structure, [], None)
    owners, Z, scores, costs = none.moves(closer=False)
    assert owners == [] and Z.shape == (0, 7) and scores.shape == costs.shape == (0,)
    assert none.reach(5) is False


def test_a_users_term_in_the_costs_of_moves():
    m = query()
    m.objective.set_value(m.objective.expr + 1.0 * m.dev["a"])
    m.set_factual(FACTUAL)
    m.set_target(1)
    rules, term = W.walk_rules(m)
    walk = W._Walk(m, m.adapter.structure, rules, term)
    walk.c = walk.c.copy()
    walk.c[0] = 7.0
    walk.refresh()
    assert walk.term_value == pytest.approx(0.2)
    assert walk.cost() == pytest.approx(0.2 + 0.2)
    owners, _, _, costs = walk.moves(closer=False)
    got = {owner: cost for owner, cost in zip(owners, costs.tolist())}
    assert got[1, 4.0] == pytest.approx(0.2 + 0.4 + 0.2)  # a at 7 and k at 4
    a_moves = [v for i, v in owners if i == 0]
    assert all(got[0, v] == pytest.approx(0.2 * abs(v - 5.0)) for v in a_moves)


def test_the_descent_takes_the_cheapest_valid_point_back():
    m = query()
    walk = W._Walk(m, m.adapter.structure, [], None)
    z = walk.enc.inputs(walk.z, "a", np.array([10.0]))[0]
    walk.take((0, 10.0), z, float(W._target_score(m, m.adapter.structure.outputs(z[None]))[0]))
    assert walk.score >= walk.goal and walk.cost() == pytest.approx(0.5)
    walk.descend(30)
    assert 7.5 < walk.c[0] < 7.5 + 1e-6 and walk.score >= walk.goal
    assert walk.cost() == pytest.approx(0.25, abs=1e-6)
    # one unit away: k back to the factual's own value only
    walk.c = walk.c.copy()
    walk.c[1] = 3.0
    owners, *_ = walk.moves(closer=True)
    assert (1, 2.0) in owners and all(v == 2.0 for i, v in owners if i == 1)


def test_the_objective_adds_every_term_in_any_order():
    m = query(objective={"l0": 0.5, "l1": 2.0})
    enc = _Encoder(m)
    delta = np.array([[2.0, 1.0, 0.0, 0.0, 0.0]])
    assert enc.objective(delta).tolist() == pytest.approx([0.5 * 2 + 2.0 * 0.4])
