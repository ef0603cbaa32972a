"""Group counterfactuals with the user's own constraints (cfopt.groups.declared).

Each rule is written twice: once for cfopt (a declared block or a Pyomo constraint added
to ``explainer.milp`` by hand) and once here by hand on the raw rows, with each row as
its own factual. Brute force enumerates every action of the tiny grid, keeps the rows
the model moves *and* the hand-written rule admits, and finds the fewest actions.
"""

from __future__ import annotations

import copy

import numpy as np
import pyomo.environ as pyo
import pytest

import cfopt
from cfopt.groups import enumeration
from cfopt.groups.request import check_group_request
from tests.test_groups import MARGIN, brute_covers, fewest, group, proven_fewest


def no_more_a_than_3(before, after):
    return after.a <= 3


def a_rises_then_d_rises(before, after):
    return (after.a <= before.a) | (after.d >= before.d + 1)


def z_keeps_a(before, after):
    return ~((after.c == "z") & (before.c != "z")) | (after.a == before.a)


def a_in_steps_of_two(before, after):
    return (after.a - before.a) % 2 == 0


def a_and_b_rise_at_most_2(before, after):
    return (after.a - before.a) + (after.b - before.b) <= 2


def a_rises_at_most_1(before, after):
    return after.a - before.a <= 1


def raw_a_plus_b(m):
    """By hand, on the factual: a + b may rise by at most 2 over the row's own."""
    m.hand_rule = pyo.Constraint(expr=m.x["a"] + m.x["b"] <= m.x0["a"] + m.x0["b"] + 2)


def raw_keep_x(m):
    """By hand, on the one-hot: a row at level "x" of c keeps it."""
    m.hand_level = pyo.Constraint(expr=m.onehot["c", "x"] >= m.onehot0["c", "x"])


def keeps_x(before, after):
    return (before.c != "x") | (after.c == "x")


RULES = {
    "linear": ([cfopt.LinearConstraint({"a": 1.0}, "<=", 3.0, name="cap_a")], None,
               no_more_a_than_3),
    "relative": ([cfopt.LinearConstraint({"a": 1.0, "b": 1.0}, "<=", 2.0, relative=True)],
                 None, a_and_b_rise_at_most_2),
    "if_increases": ([cfopt.IfIncreases("a", "d", 1.0)], None, a_rises_then_d_rises),
    "if_category": ([cfopt.IfCategory("c", "z", ["a"])], None, z_keeps_a),
    "step": ([cfopt.Step("a", 2.0)], None, a_in_steps_of_two),
    "custom": ([cfopt.CustomConstraint(lambda m, b: m.x["a"] - m.x0["a"] <= 1)], None,
               a_rises_at_most_1),
    "raw": ([], raw_a_plus_b, a_and_b_rise_at_most_2),
    "raw_onehot": ([], raw_keep_x, keeps_x),
}


def constrained(seed: int, kind: str, rule: str, features_to_vary=None):
    """A group's explainer with ``rule`` (a fresh copy of its blocks) and its check."""
    explainer, space, scores, rows = group(seed, kind)
    blocks, by_hand, check = RULES[rule]
    fenced = cfopt.Explainer(explainer.milp.adapter.model, space, margin=MARGIN,
                             constraints=copy.deepcopy(blocks),
                             features_to_vary=features_to_vary)
    if by_hand is not None:
        by_hand(fenced.milp)
    return fenced, space, scores, rows, check


@pytest.mark.parametrize("path", ["priced", "enumerated"])
@pytest.mark.parametrize("seed,kind,rule,max_changes", [
    (1, "lr", "linear", 2), (2, "net", "relative", 2), (3, "rf", "if_increases", 2),
    (4, "net", "if_category", 2), (1, "lr", "step", 1), (3, "rf", "step", 2),
    (2, "net", "raw", 2), (1, "lr", "raw_onehot", 2), (3, "rf", "raw", 1),
    (4, "net", "if_increases", 1), (2, "net", "custom", 2)])
def test_fewest_actions_with_a_users_rule_match_brute_force(seed, kind, rule, max_changes,
                                                            path, monkeypatch):
    if path == "priced":  # the pricing MILP's copies hold the rule
        monkeypatch.setattr(enumeration, "ENUMERATION_LIMIT", 0)
    explainer, space, scores, rows, check = constrained(seed, kind, rule)
    sets = brute_covers(space, scores, rows, {1}, max_changes, rule=check)
    free = brute_covers(space, scores, rows, {1}, max_changes)
    assert sets != free  # the rule matters on this group
    got, coverable, best = proven_fewest(explainer, rows, sets, max_changes, path)
    covered = np.flatnonzero(got.assignment.to_numpy() >= 0)
    assert set(covered) == coverable
    proven_out = {rows.index.get_loc(i) for i, r in got.reasons.items()
                  if r == "no action (proven)"}
    assert proven_out == set(range(len(rows))) - coverable
    after = got.counterfactuals.iloc[covered].reset_index(drop=True)
    before = rows.iloc[covered].reset_index(drop=True)
    assert np.all(check(before, after))  # every assigned row meets the rule, by hand
    direct = explainer.explain_group(rows, max_changes=max_changes, method="direct_milp")
    held = np.flatnonzero(direct.assignment.to_numpy() >= 0)
    assert np.all(check(rows.iloc[held].reset_index(drop=True),
                        direct.counterfactuals.iloc[held].reset_index(drop=True)))
    if direct.status is cfopt.Status.OPTIMAL:
        assert direct.value == best
    else:  # each row's own counterfactual holds the blocks, not a rule by hand: a row
        # whose own breaks it and no other row's action moves is left undecided
        assert RULES[rule][1] is not None and direct.status is cfopt.Status.FEASIBLE
        assert set(held) <= coverable and "undecided" in set(direct.reasons)
    greedy = explainer.explain_group(rows, max_changes=max_changes, method="greedy")
    assert greedy.value >= best


def test_most_rows_with_a_budget_and_a_rule_match_brute_force(monkeypatch):
    monkeypatch.setattr(enumeration, "ENUMERATION_LIMIT", 0)
    explainer, space, scores, rows, check = constrained(2, "net", "raw")
    sets = brute_covers(space, scores, rows, {1}, 2, rule=check)
    top = max(len(s) for s in sets)
    got = explainer.explain_group(rows, max_changes=2, objective="coverage", n_actions=1)
    assert got.status is cfopt.Status.OPTIMAL, got.message
    assert (got.assignment.to_numpy() >= 0).sum() == top


def test_a_query_narrowing_is_not_a_groups_constraint():
    explainer, space, scores, rows = group(1, "lr")
    explainer.explain(rows.iloc[[0]], target=1, features_to_vary=["a", "b"])  # query_range
    assert [c.per_query for c in explainer.milp.constraints.values()] == [True]
    request = check_group_request(
        explainer, rows, None, max_changes=2, objective="count", n_actions=None,
        max_cost=None, method="column_generation", time_limit=None, row_time_limit=None,
        max_iterations=10)
    assert request.declared is None
    sets = brute_covers(space, scores, rows, {1}, 2)
    got = explainer.explain_group(rows, max_changes=2)
    assert got.value == fewest(sets, set().union(*sets))


def test_each_rows_own_counterfactual_is_asked_under_the_declared_blocks():
    explainer, space, scores, rows, _ = constrained(1, "lr", "linear")
    request = check_group_request(
        explainer, rows, None, max_changes=2, objective="count", n_actions=None,
        max_cost=None, method="column_generation", time_limit=None, row_time_limit=None,
        max_iterations=10)
    assert list(request.capped.milp.constraints) == ["cap_a"]
    assert request.declared.names == ["cap_a"]
    explainer.milp.add_constraint(cfopt.Step("b", 2.0, name="even_b"))
    again = check_group_request(
        explainer, rows, None, max_changes=2, objective="count", n_actions=None,
        max_cost=None, method="column_generation", time_limit=None, row_time_limit=None,
        max_iterations=10)
    assert list(again.capped.milp.constraints) == ["cap_a", "even_b"]
    assert again.capped is not request.capped


class Unbounded(cfopt.ConstraintBlock):
    """a's rise is at most a free variable that is at most 1."""

    def build(self, m, block):
        block.slack = pyo.Var()
        block.rise = pyo.Constraint(expr=m.x["a"] - m.x0["a"] <= block.slack)
        block.cap = pyo.Constraint(expr=block.slack <= 1)

    def violations(self, m, factual, row):
        return [] if row["a"] - factual["a"] <= 1 else ["a rose by more than 1"]


def add_dev(m):
    m.by_dev = pyo.Constraint(expr=m.dev["a"] <= 0.5)


def add_own_variable(m):
    m.mine = pyo.Var(bounds=(0, 1))
    m.by_mine = pyo.Constraint(expr=m.x["a"] <= 3 + m.mine)


def add_term(m):
    m.objective.set_value(m.objective.expr + 0.1 * m.x["a"])


def add_square(m):
    m.square = pyo.Constraint(expr=m.x["a"] * m.x["a"] <= 9)


@pytest.mark.parametrize("blocks,by_hand,match", [
    ([cfopt.CustomConstraint(cost=lambda m, b: 0.1 * m.x["a"], name="pay")], None,
     r"\['pay'\] add costs"),
    ([Unbounded(name="loose")], None, r"uses loose\.slack without finite bounds"),
    ([], add_dev, r"'by_dev' uses dev\[a\]"),
    ([], add_own_variable, r"\['by_mine'\] use variables of your own"),
    ([], add_term, r"a term was added to m\.objective"),
    ([], add_square, r"'square' is not linear"),
])
def test_what_a_group_cannot_hold_is_refused_by_name_before_any_solve(blocks, by_hand,
                                                                       match, monkeypatch):
    explainer, space, scores, rows = group(1, "lr")
    fenced = cfopt.Explainer(explainer.milp.adapter.model, space, margin=MARGIN,
                             constraints=blocks)
    if by_hand is not None:
        by_hand(fenced.milp)
    solved = []
    monkeypatch.setattr(type(fenced.backend), "solve",
                        lambda *a, **k: solved.append(1) or (_ for _ in ()).throw(
                            AssertionError("solved")))
    with pytest.raises(ValueError, match=match):
        fenced.explain_group(rows, max_changes=2)
    assert solved == []


def test_a_custom_rule_with_its_own_variable_is_refused_for_its_check():
    explainer, space, scores, rows = group(1, "lr")

    def rule(m, b):
        b.u = pyo.Var(bounds=(0, 1))
        return m.x["a"] <= 3 + b.u

    fenced = cfopt.Explainer(explainer.milp.adapter.model, space, margin=MARGIN,
                             constraints=[cfopt.CustomConstraint(rule, name="own")])
    with pytest.raises(ValueError, match=r"'own' is checked on the solver's values"):
        fenced.explain_group(rows, max_changes=2)


@pytest.mark.parametrize("seed,kind,rule,vary", [
    (1, "lr", "raw_onehot", ["c", "d"]), (4, "net", "if_category", None),
    (3, "rf", "if_increases", None), (2, "net", "raw", None)])
def test_the_pricing_milp_with_a_rule_matches_every_action_checked(seed, kind, rule, vary):
    """The pricing's optimum for prices on one row (the others' copies on, at a small
    price) and random ones (some negative: those rows' copies are off) is the best
    priced cover over every action of the grid, each checked with the rule: a covered
    row's copy holds the rule, an uncovered row's copy holds nothing (with ``vary``,
    the rows at "x" keep it and the others move by c alone: an x row's copy that held
    the rule uncovered would forbid every action)."""
    from cfopt.groups.enumeration import action_grid
    from cfopt.groups.pricing import ActionModel
    from cfopt.solvers.backends import make_solver
    from cfopt.solvers.base import SolverSettings

    explainer, space, scores, rows, check = constrained(seed, kind, rule, vary)
    req = check_group_request(explainer, rows, None, max_changes=2, objective="count",
                              n_actions=None, max_cost=None, method="column_generation",
                              time_limit=None, row_time_limit=30.0, max_iterations=500)
    n = len(rows)
    grid = req.rows(range(n))
    masks = grid.covers_many(action_grid(grid, 2))[0]
    model = ActionModel(grid, req.milp, req.target_indices, range(n))
    backend = make_solver("highs")
    rng = np.random.default_rng(seed)
    one_each = [np.where(np.arange(n) == j, 1.0, 0.01) for j in range(n)]  # all copies on
    found = []
    for prices in [*one_each, *rng.uniform(-0.5, 1.0, (4, n))]:
        model.set_prices(dict(enumerate(prices)))
        outcome = backend.solve(model.model, SolverSettings(mip_gap=0.0, threads=1))
        best = max(float(np.clip(prices, 0, None)[mask].sum()) for mask in masks)
        assert outcome.objective == pytest.approx(best, abs=1e-6)
        found.append(best)
        assigned = model.assigned()
        assert not (assigned & ~grid.covers(model.action())[0]).any()
    assert max(found[:n]) >= 1.0  # some row is covered


def regions(name: str, space):
    from sklearn.ensemble import IsolationForest

    from tests.test_groups import make_data

    X, _ = make_data(1)
    if name == "hull":
        return cfopt.ConvexHull(X, epsilon=0.3, norm="l1", max_points=50)
    if name == "knn":
        return cfopt.NearestNeighbourHull(X, k=10)
    if name == "clusters":
        return cfopt.ClusterHulls(X, n_clusters=3)
    Z = space.transform(X)
    forest = IsolationForest(n_estimators=5, max_samples=32, random_state=0).fit(Z)
    return cfopt.IsolationForestScore(forest, contamination=0.2, data=Z)


@pytest.mark.parametrize("name", ["hull", "knn", "clusters", "iforest"])
def test_trust_regions_and_an_outlier_score_priced_agree_with_every_action_checked(
        name, monkeypatch):
    """Every action of the grid checked by the block's own check (no pricing) and the
    pricing MILP's copies holding the block (its own variables, per row: the hull of
    each row's own neighbours) prove the same fewest actions."""
    explainer, space, scores, rows = group(1, "lr")
    fenced = cfopt.Explainer(explainer.milp.adapter.model, space, margin=MARGIN,
                             constraints=[regions(name, space)])
    checked = fenced.explain_group(rows, max_changes=2)
    assert "no pricing" in checked.message and checked.status is cfopt.Status.OPTIMAL
    monkeypatch.setattr(enumeration, "ENUMERATION_LIMIT", 0)
    priced = fenced.explain_group(rows, max_changes=2)
    assert priced.status is cfopt.Status.OPTIMAL, priced.message
    assert priced.value == checked.value == priced.bound
    free = explainer.explain_group(rows, max_changes=2)
    assert checked.value >= free.value
    m = fenced.milp
    for i in np.flatnonzero(priced.assignment.to_numpy() >= 0):
        m.set_factual(rows.iloc[[i]])
        m.set_target(1)
        assert m.violations(priced.counterfactuals.iloc[[i]]) == []


STATELESS = [cfopt.LinearConstraint({"a": 1.0, ("c", "z"): 2.0}, "<=", 4.0),
             cfopt.LinearConstraint({"a": 1.0}, ">=", -1.0, relative=True),
             cfopt.IfIncreases("a", "d", 1.0), cfopt.IfCategory("c", "z", ["a", "b"]),
             cfopt.Step("a", 2.0)]


@pytest.mark.parametrize("block", STATELESS, ids=lambda c: c.kind)
def test_a_check_that_reads_no_query_state_gives_the_same_answer_at_any_factual(block):
    """``check_reads_query = False`` lets a group check rows without setting each as
    the factual: the block's answer must not change with the model's factual."""
    from tests.test_groups import make_data

    assert block.check_reads_query is False
    explainer, space, scores, rows = group(1, "lr")
    fenced = cfopt.Explainer(explainer.milp.adapter.model, space, margin=MARGIN,
                             constraints=[copy.deepcopy(block)])
    m, c = fenced.milp, next(iter(fenced.milp.constraints.values()))
    X, _ = make_data(5, n=40)
    answers = []
    for state in (rows.iloc[[0]], rows.iloc[[3]]):
        m.set_factual(state)
        m.set_target(1)
        answers.append([c.violations(m, X.iloc[i], X.iloc[20 + i]) for i in range(20)])
    assert answers[0] == answers[1] and any(answers[0]) and not all(answers[0])


def test_rows_are_set_as_the_factual_only_for_a_check_that_reads_it(monkeypatch):
    from cfopt.groups.declared import DeclaredConstraints

    calls = []
    for blocks, expected in (([cfopt.Step("a", 2.0)], 1), ([regions("knn", None)], 3)):
        explainer, space, scores, rows = group(1, "lr")
        fenced = cfopt.Explainer(explainer.milp.adapter.model, space, margin=MARGIN,
                                 constraints=blocks)
        raw_a_plus_b(fenced.milp)
        declared = DeclaredConstraints(fenced.milp, (1,), rows.iloc[[0]])
        calls.clear()
        monkeypatch.setattr(declared, "at", lambda row, f=declared.at: calls.append(1) or f(row))
        moved = rows.iloc[[1, 2]].copy()
        first = [declared.holds(rows.iloc[[1]], moved) for _ in range(3)]
        assert len(calls) == expected
        assert all((f == first[0]).all() for f in first)


def test_a_rule_on_a_continuous_feature_is_read_in_its_own_units():
    """``m.x[e] = l + R t`` (a continuous feature's unit variable): the check and the
    pricing copy both put the rule's edge at the row's own value plus 1.5 raw units."""
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    from cfopt.groups.declared import DeclaredConstraints
    from cfopt.groups.pricing import ActionModel

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"e": rng.uniform(0, 10, 200), "a": rng.integers(0, 5, 200)})
    y = (X.e + X.a > 8).astype(int).to_numpy()
    space = cfopt.FeatureSpace.from_frame(X, kinds={"e": "continuous"})
    model = LogisticRegression().fit(space.transform(X), y)
    explainer = cfopt.Explainer(model, space)
    m = explainer.milp
    m.rise = pyo.Constraint(expr=m.x["e"] <= m.x0["e"] + 1.5)
    m.change = pyo.Constraint(expr=m.x["e"] - m.x0["e"] <= 1.5)  # the same, its sides apart
    rows = X[model.predict(space.transform(X)) == 0].head(3)
    declared = DeclaredConstraints(m, (1,), rows.iloc[[0]])
    row = rows.iloc[[0]]
    x0 = float(row.e.iloc[0])
    moved = pd.concat([row] * 3, ignore_index=True)
    moved["e"] = [x0 + 1.5 - 1e-3, x0 + 1.5 + 1e-3, x0 - 3.0]
    assert declared.holds(row, moved).tolist() == [True, False, True]
    near = pd.concat([row] * 41, ignore_index=True)  # the edge ± 4e-5, across the tolerance
    near["e"] = x0 + 1.5 + 2e-6 * np.arange(-20, 21)
    single = []
    for k in range(len(near)):  # the single query's own check, the row as the factual
        m.set_factual(row)
        m.set_target(1)
        single.append(not m.raw.problems(m, near.iloc[[k]], witness=False))
    assert declared.holds(row, near).tolist() == single
    assert 21 < sum(single) < 41  # some points past the edge are within its tolerance
    request = check_group_request(
        explainer, rows, None, max_changes=2, objective="count", n_actions=None,
        max_cost=None, method="column_generation", time_limit=None, row_time_limit=None,
        max_iterations=10)
    grid = request.rows(range(len(rows)))
    pricing = ActionModel(grid, m, request.target_indices, range(len(rows)))
    pricing.set_prices({0: 1.0, 1: 1.0, 2: 1.0})
    copy0 = pricing.slots[0].copies[0]
    pricing.slots[0].covers[0].value = 1
    for value, holds in ((x0 + 1.5 - 1e-3, True), (x0 + 1.5 + 1e-3, False)):
        copy0.v["e"].value = value
        met = [pyo.value(c.body) <= pyo.value(c.upper) + 1e-9 for c in copy0.declared.values()]
        assert all(met) == holds
    pricing.slots[0].covers[0].value = 0  # not covered: the rule is off
    copy0.v["e"].value = space["e"].upper
    assert all(pyo.value(c.body) <= pyo.value(c.upper) + 1e-9 for c in copy0.declared.values())
