"""Group counterfactuals (cfopt.groups) against brute force on tiny grids.

Every action of a small integer/categorical grid is enumerated, its cover set computed
independently of cfopt (the model's own scores, the bounds, the margin), and the fewest
actions (or the most rows with k actions) found by enumerating subsets of cover sets.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.groups import Action
from cfopt.groups.master import CoverMaster
from tests.conftest import train_torch

MARGIN = 1e-3


@pytest.fixture(autouse=True)
def path(request, monkeypatch):
    """Column generation with pricing MILPs unless a test asks for ``path="enumerated"``
    (every action of these tiny grids checked: :mod:`cfopt.groups.enumeration`)."""
    from cfopt.groups import enumeration

    chosen = getattr(request, "param", "priced")
    if chosen == "priced":
        monkeypatch.setattr(enumeration, "ENUMERATION_LIMIT", 0)
    if chosen == "partial":  # a's changes left to the pricing MILP, the others enumerated
        options = enumeration.feature_options
        monkeypatch.setattr(enumeration, "feature_options",
                            lambda rows: {**options(rows), "a": None})
    return chosen


BOTH = pytest.mark.parametrize("path", ["priced", "enumerated"], indirect=True)


def make_data(seed: int, n: int = 240, classes: int = 2) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"a": rng.integers(0, 5, n), "b": rng.integers(0, 4, n),
                      "c": rng.choice(["x", "y", "z"], n), "d": rng.integers(0, 3, n)})
    score = X.a + 0.8 * X.b + 1.5 * (X.c == "z") - 0.5 * X.d + rng.normal(0, 1, n)
    y = (score > 4.5).astype(int) if classes == 2 else np.digitize(score, [3.5, 5.5])
    return X, y.to_numpy() if hasattr(y, "to_numpy") else y


def scorer(kind: str, Z: np.ndarray, y: np.ndarray, seed: int):
    """A fitted model and an independent ``scores(Z) -> (class, margin or None)``."""
    if kind == "lr":
        model = LogisticRegression().fit(Z, y)
        return model, lambda Q: (model.predict(Q), model.decision_function(Q))
    if kind == "rf":
        model = RandomForestClassifier(n_estimators=4, max_depth=3, random_state=seed).fit(Z, y)
        return model, lambda Q: (model.predict(Q), None)
    classes = len(set(y))
    net = train_torch(Z, y, hidden=(6,), n_classes=classes, epochs=200, seed=seed)

    def scores(Q):
        with torch.no_grad():
            out = net(torch.tensor(Q, dtype=torch.float32)).double().numpy()
        if classes == 2:
            return (out[:, 0] > 0).astype(int), out[:, 0]
        return out.argmax(axis=1), out
    return net, scores


def brute_covers(space, scores, rows: pd.DataFrame, target: set, max_changes: int,
                 fixed=(), max_cost=None, weights=None, margin=MARGIN, rule=None):
    """Every admissible action's cover set on the grid (frozensets of positions)."""
    return {c for c, _ in brute_actions(space, scores, rows, target, max_changes, fixed,
                                        max_cost, weights, margin, rule) if c}


def brute_actions(space, scores, rows: pd.DataFrame, target: set, max_changes: int,
                  fixed=(), max_cost=None, weights=None, margin=MARGIN, rule=None):
    """Every admissible action on the grid: its cover set (a frozenset of positions)
    and each row's cost (with ``weights``); with ``rule(before, after)``, a row is
    covered only where it gives True (a user's constraint, written here by hand)."""
    movable = [f for f in space if not f.immutable and f.name not in fixed]
    options = {}
    for f in movable:
        if f.is_onehot:
            options[f.name] = [("level", lv) for lv in f.categories]
        else:
            span = int(f.upper - f.lower)
            shifts = [d for d in range(-span, span + 1) if d != 0 and not (
                f.direction == "increase" and d < 0) and not (f.direction == "decrease" and d > 0)]
            options[f.name] = [("shift", d) for d in shifts]
    covers = []
    for k in range(1, max_changes + 1):
        for names in itertools.combinations(options, k):
            for choice in itertools.product(*(options[n] for n in names)):
                after = rows.copy()
                inside = np.ones(len(rows), dtype=bool)
                cost = np.zeros(len(rows))
                for n, (kind, v) in zip(names, choice):
                    if kind == "level":
                        cost += weights[n] * (after[n].to_numpy() != v) if weights else 0
                        after[n] = v
                    else:
                        new = after[n].to_numpy() + v
                        inside &= (new >= space[n].lower) & (new <= space[n].upper)
                        cost += weights[n] * abs(v) if weights else 0
                        after[n] = np.clip(new, space[n].lower, space[n].upper)
                label, s = scores(space.transform(after))
                hit = np.isin(label, list(target)) & inside
                if s is not None:
                    if s.ndim == 1:
                        t = list(target)[0]
                        hit &= (s if t == 1 else -s) >= margin
                    else:
                        t = list(target)
                        others = [j for j in range(s.shape[1]) if j not in t]
                        hit &= s[:, t].max(axis=1) - s[:, others].max(axis=1) >= margin
                if max_cost is not None:
                    hit &= cost <= max_cost + 1e-9
                if rule is not None:
                    hit &= np.asarray(rule(rows.reset_index(drop=True),
                                           after.reset_index(drop=True)), dtype=bool)
                covers.append((frozenset(np.flatnonzero(hit)), np.asarray(cost, dtype=float)))
    return covers


def fewest(sets: set, universe: set) -> int:
    sets = [s for s in sets if not any(s < t for t in sets)]  # maximal sets suffice
    for k in range(0, len(universe) + 1):
        for combo in itertools.combinations(sets, k):
            if set().union(*combo) >= universe:
                return k
    raise AssertionError("not coverable")


def proven_fewest(explainer, rows, sets: set, max_changes: int, path: str):
    """The group's answer, asserted proven and equal to the fewest actions over the brute
    force's cover ``sets``; with the rows any action covers and that fewest."""
    coverable = set().union(*sets) if sets else set()
    best = fewest(sets, coverable)
    got = explainer.explain_group(rows, max_changes=max_changes)
    assert got.status is cfopt.Status.OPTIMAL, got.message
    assert got.value == best == got.bound
    assert ("no pricing" in got.message) == (path == "enumerated")
    return got, coverable, best


def most(sets: set, k: int) -> int:
    sets = [s for s in sets if not any(s < t for t in sets)]
    return max((len(set().union(*combo)) for combo in itertools.combinations(sets, min(k, len(sets)))),
               default=0)


def group(seed: int, kind: str, classes: int = 2, rows: int = 7, margin: float = MARGIN):
    X, y = make_data(seed, classes=classes)
    space = cfopt.FeatureSpace.from_frame(X, kinds={"d": "integer"})
    space.increase_only("b")
    Z = space.transform(X)
    model, scores = scorer(kind, Z, y, seed)
    explainer = cfopt.Explainer(model, space, margin=margin)
    pred, _ = scores(Z)
    rejected = X[pred == 0].head(rows)
    return explainer, space, scores, rejected


CASES = [(seed, kind, k) for seed, kind in [(1, "lr"), (2, "net"), (3, "rf"), (4, "net")]
         for k in (1, 2)]


@pytest.mark.parametrize("seed,kind,max_changes,path", [
    (*case, path) for case in CASES for path in ("priced", "enumerated", "partial")
    if path != "partial" or case[1:] in (("net", 2), ("lr", 2), ("rf", 1))],
    indirect=["path"])
def test_fewest_actions_match_brute_force(seed, kind, max_changes, path):
    explainer, space, scores, rows = group(seed, kind)
    target = {1}
    sets = brute_covers(space, scores, rows, target, max_changes)
    got, coverable, best = proven_fewest(explainer, rows, sets, max_changes, path)
    assert ("checked on every row" in got.message) == (path != "priced")
    assert ("changing none of a checked" in got.message) == (path == "partial")
    assert (got.iterations == 0) or path != "enumerated"
    covered = {rows.index.get_loc(i) for i in rows.index[got.assignment.to_numpy() >= 0]}
    assert covered == coverable
    proven_out = {rows.index.get_loc(i) for i, r in got.reasons.items()
                  if r == "no action (proven)"}
    assert proven_out == set(range(len(rows))) - coverable
    # every assigned row, re-checked here on the model's own scores
    after = got.counterfactuals.iloc[sorted(covered)]
    label, _ = scores(space.transform(after))
    assert set(label) <= target
    greedy = explainer.explain_group(rows, max_changes=max_changes, method="greedy")
    assert greedy.value >= best and greedy.status is cfopt.Status.FEASIBLE
    assert (greedy.assignment >= 0).sum() == len(coverable)
    direct = explainer.explain_group(rows, max_changes=max_changes, method="direct_milp")
    assert direct.status is cfopt.Status.OPTIMAL and direct.value == best


def test_the_direct_milp_with_one_slot_minimises_too():
    explainer, space, scores, rows = group(2, "net")
    one = rows.head(1)  # its own counterfactual is one action: one slot
    got = explainer.explain_group(one, max_changes=2, method="direct_milp")
    assert got.status is cfopt.Status.OPTIMAL and got.value == 1 and got.coverage == 1.0


@pytest.mark.parametrize("seed,kind", [(7, "lr"), (8, "net")])
def test_a_wide_margin_is_met_by_every_assigned_row(seed, kind):
    explainer, space, scores, rows = group(seed, kind, margin=1.0)
    wide = brute_covers(space, scores, rows, {1}, 2, margin=1.0)
    narrow = brute_covers(space, scores, rows, {1}, 2)
    coverable = set().union(*wide)
    assert fewest(wide, coverable) != fewest(narrow, set().union(*narrow)) or \
        coverable != set().union(*narrow), "the margin must matter in this case"
    got = explainer.explain_group(rows, max_changes=2)
    assert got.status is cfopt.Status.OPTIMAL and got.value == fewest(wide, coverable)
    assert {rows.index.get_loc(i) for i in rows.index[got.assignment.to_numpy() >= 0]} \
        == coverable


@pytest.mark.parametrize("seed,kind", [(2, "net"), (5, "lr"), (3, "rf")])
@pytest.mark.parametrize("budget", [1, 2])
@BOTH
def test_most_rows_with_a_budget_match_brute_force(seed, kind, budget, path):
    explainer, space, scores, rows = group(seed, kind)
    sets = brute_covers(space, scores, rows, {1}, 2)
    best = most(sets, budget)
    got = explainer.explain_group(rows, max_changes=2, objective="coverage", n_actions=budget)
    assert got.status is cfopt.Status.OPTIMAL, got.message
    assert got.value == best == got.bound
    assert len(got.actions) <= budget and (got.assignment >= 0).sum() == best


@BOTH
def test_three_classes_and_a_cost_cap_match_brute_force(path):
    explainer, space, scores, rows = group(6, "net", classes=3)
    target = {2}
    weights = explainer.milp.weights
    seen = []
    # 0: no row moves; 0.5: exactly two steps of a (weight 1/4) or one of d (1/2)
    for cap in (0.0, 0.4, 0.5, 0.9, 1.6):
        sets = brute_covers(space, scores, rows, target, 2, max_cost=cap, weights=weights)
        coverable = set().union(*sets) if sets else set()
        seen.append(len(coverable))
        got = explainer.explain_group(rows, target=2, max_changes=2, max_cost=cap)
        if not coverable:
            assert got.status is cfopt.Status.INFEASIBLE and not got.actions
            continue
        assert got.status is cfopt.Status.OPTIMAL, got.message
        assert got.value == fewest(sets, coverable)
        assert (got.costs.dropna() <= cap + 1e-9).all()
        assert (got.assignment >= 0).sum() == len(coverable)
    assert seen[0] < seen[-1] and seen[-1] > 0, seen  # the cap matters here


def test_immutable_and_monotone_features_are_kept_by_every_action():
    explainer, space, scores, rows = group(2, "net")
    got = explainer.explain_group(rows, max_changes=2)
    for a in got.actions:
        assert a.shifts.get("b", 0) >= 0
    space2 = cfopt.FeatureSpace.from_frame(rows, kinds={"d": "integer"}).immutable("a")
    del space2


def test_actions_apply_shifts_and_levels_and_refuse_what_breaks_actionability():
    explainer, space, scores, rows = group(1, "lr")
    from cfopt.groups.actions import GroupRows

    g = GroupRows(space, explainer.milp.adapter, explainer.milp.input_specs,
                  rows.reset_index(drop=True), (1,), MARGIN, explainer.milp.weights, 2, None)
    a = Action({"a": 2.0}, {"c": "z"})
    after, inside = g.apply(a)
    assert list(after.a) == list(np.clip(rows.a + 2, 0, 4))
    assert list(inside) == list(rows.a + 2 <= 4)
    assert set(after.c) == {"z"}
    assert g.admissible(Action({"b": -1.0})) == ["increase-only feature 'b' shifted by -1"]
    assert g.admissible(Action({"a": 0.5})) == ["integral feature 'a' shifted by 0.5"]
    assert "more than max_changes=2" in g.admissible(Action({"a": 1, "b": 1}, {"c": "x"}))[0]
    assert g.admissible(Action({}, {"c": "w"})) == ["'w' is not a level of 'c'"]
    assert not g.covers(Action({"b": -1.0}))[0].any()
    costs = g.covers(a)[1]
    w = explainer.milp.weights
    expected = w["a"] * (np.clip(rows.a + 2, 0, 4) - rows.a).abs().to_numpy() + \
        w["c"] * (rows.c != "z").to_numpy()
    assert np.allclose(costs, expected)
    assert Action.between(space, rows.iloc[0], after.iloc[0]).shifts.get("a") == \
        after.a.iloc[0] - rows.a.iloc[0] or after.a.iloc[0] == rows.a.iloc[0]


def test_master_duals_and_bounds_by_hand():
    # three rows; columns {0,1}, {1,2}, {0,2}: LP optimum 1.5 (each at 1/2), duals 1/2
    master = CoverMaster(3)
    for cols in ([1, 1, 0], [0, 1, 1], [1, 0, 1]):
        master.add(np.array(cols, dtype=bool))
    lp = master.solve_lp()
    assert lp.value == pytest.approx(1.5) and np.allclose(lp.prices, 0.5)
    assert master.lower_bound(lp, 1.0) == pytest.approx(1.5)
    assert master.lower_bound(lp, 1.5) == pytest.approx(1.0)  # Farley: Σπ / P
    ip = master.solve_integer()
    assert ip.value == 2 and ip.optimal and not ip.uncovered
    master.drop([2])
    assert master.solve_lp().value == pytest.approx(1.0)
    cover = CoverMaster(3, "coverage", budget=1)
    for cols in ([1, 1, 0], [0, 0, 1]):
        cover.add(np.array(cols, dtype=bool))
    lp = cover.solve_lp()
    assert lp.value == pytest.approx(2.0)
    # no column prices above the budget's dual ν: the LP is optimal over these columns
    assert all(lp.prices[c].sum() <= lp.budget_price + 1e-9 for c in cover.columns)
    assert cover.upper_bound(lp, lp.budget_price) == pytest.approx(2.0)
    assert cover.upper_bound(lp, 3.0) >= 3.0 - 1e-9
    assert cover.solve_integer().value == 2


def test_an_uncoverable_row_with_no_first_column_is_proven_by_the_pricing():
    explainer, space, scores, rows = group(1, "lr")
    sets = brute_covers(space, scores, rows, {1}, 1)
    out = set(range(len(rows))) - set().union(*sets)
    assert out, "the case needs a row no single change moves"
    got = explainer.explain_group(rows, max_changes=1, method="column_generation")
    assert {rows.index.get_loc(i) for i, r in got.reasons.items()
            if r == "no action (proven)"} == out


@pytest.mark.parametrize("kwargs,match", [
    ({"max_changes": 0}, "max_changes must be an integer of at least 1"),
    ({"max_changes": 9}, "at most 4"),
    ({"objective": "total"}, "objective must be one of"),
    ({"objective": "cost"}, "least total cost with at most n_actions"),
    ({"objective": "cost", "n_actions": 2, "method": "direct_milp"}, "direct_milp"),
    ({"objective": "coverage"}, "give n_actions"),
    ({"n_actions": 2}, "budget of objective='coverage'"),
    ({"method": "exact"}, "method must be one of"),
    ({"max_cost": -1.0}, "max_cost must be a non-negative"),
    ({"max_cost": float("nan")}, "max_cost must be"),
    ({"time_limit": 0}, "time_limit must be a positive"),
    ({"objective": "coverage", "n_actions": 1, "method": "direct_milp"}, "direct_milp"),
])
def test_bad_requests_are_refused_before_any_solve(kwargs, match):
    explainer, space, scores, rows = group(1, "lr")
    with pytest.raises(ValueError, match=match):
        explainer.explain_group(rows, **kwargs)


def test_bad_rows_and_targets_are_named():
    explainer, space, scores, rows = group(1, "lr")
    with pytest.raises(TypeError, match="DataFrame"):
        explainer.explain_group(rows.to_numpy())
    with pytest.raises(ValueError, match="no rows"):
        explainer.explain_group(rows.iloc[:0])
    bad = rows.copy()
    bad.iloc[0, bad.columns.get_loc("c")] = "w"
    with pytest.raises(ValueError, match="'w'"):
        explainer.explain_group(bad)
    X, _ = make_data(1)
    mixed = X.head(40)
    with pytest.raises(ValueError, match="needs every row of the group in one class"):
        explainer.explain_group(mixed)
    with pytest.raises(ValueError):
        explainer.explain_group(rows, target="nope")


def test_rows_already_in_the_target_are_set_aside():
    explainer, space, scores, rows = group(1, "lr")
    X, _ = make_data(1)
    label, _ = scores(space.transform(X))
    accepted = X[label == 1].head(2)
    both = pd.concat([rows, accepted])
    got = explainer.explain_group(both, target=1, max_changes=2)
    assert list(got.reasons.loc[accepted.index]) == ["already target"] * 2
    assert (got.assignment.loc[accepted.index] == -1).all()
    only = explainer.explain_group(accepted, target=1)
    assert only.status is cfopt.Status.OPTIMAL and only.value == 0 and not only.actions


def test_result_serialises_and_renders():
    explainer, space, scores, rows = group(2, "net")
    got = explainer.explain_group(rows, max_changes=2)
    data = got.to_dict()
    assert data["status"] == "optimal" and data["value"] == len(data["actions"])
    assert set(data["assignment"]) == {str(i) for i in rows.index}
    assert "Group counterfactuals" in got._repr_html_()
    frame = got.actions_frame()
    assert frame["rows"].sum() == (got.assignment >= 0).sum()
    assert list(got.to_frame().columns) == ["action", "cost", "reason"]
    assert got.to_json()


def test_greedy_cover_by_hand():
    from cfopt.groups.master import greedy_cover

    masks = [np.array(m, dtype=bool) for m in ([1, 1, 0, 0, 0], [0, 1, 1, 1, 0],
                                                [1, 0, 0, 0, 0], [0, 0, 0, 0, 1])]
    chosen, left = greedy_cover(masks, 5)
    assert chosen == [1, 0, 3] and not left.any()
    chosen, left = greedy_cover(masks, 5, budget=1)
    assert chosen == [1] and list(left) == [True, False, False, False, True]
    chosen, left = greedy_cover(masks[:1], 5)
    assert chosen == [0] and left.sum() == 3  # nothing else adds a row: stops
    assert greedy_cover([], 2)[0] == []


@pytest.mark.parametrize("objective", ["count", "coverage"])
def test_a_group_one_action_moves_is_answered_with_one(objective):
    explainer, space, scores, rows = group(2, "net")
    sets = brute_covers(space, scores, rows, {1}, 2)
    biggest = max(sets, key=len)
    assert len(biggest) >= 2
    sub = rows.iloc[sorted(biggest)]
    budget = {"n_actions": 1} if objective == "coverage" else {}
    got = explainer.explain_group(sub, max_changes=2, objective=objective, **budget)
    assert got.status is cfopt.Status.OPTIMAL and len(got.actions) == 1
    assert got.coverage == 1.0 and got.bound == (1 if objective == "count" else len(sub))


@pytest.mark.parametrize("path", ["partial"], indirect=True)
def test_actions_are_enumerated_only_when_the_first_columns_leave_the_group_open(
        path, monkeypatch):
    """One row's own action moving every row proves one action: nothing is enumerated.
    A group that needs more enumerates once, then prices."""
    from cfopt.groups import solve

    explainer, space, scores, rows = group(2, "net")
    calls = []
    enumerate_ = solve.enumerated_columns
    monkeypatch.setattr(solve, "enumerated_columns",
                        lambda *args: calls.append(1) or enumerate_(*args))
    same = rows.iloc[[0, 0, 0]].set_axis(["x", "y", "z"])
    got = explainer.explain_group(same, max_changes=2)
    assert got.status is cfopt.Status.OPTIMAL and len(got.actions) == 1 and calls == []
    sets = brute_covers(space, scores, rows, {1}, 2)
    assert fewest(sets, set().union(*sets)) > 1
    got = explainer.explain_group(rows, max_changes=2)
    assert got.status is cfopt.Status.OPTIMAL and len(got.actions) > 1 and calls == [1]


@pytest.mark.parametrize("seed,kind", [(2, "net"), (3, "rf")])
def test_column_generation_queries_only_rows_no_earlier_action_moves(seed, kind, monkeypatch):
    from cfopt.query.runner import QueryRunner

    explainer, space, scores, rows = group(seed, kind)
    answers: dict[int, pd.DataFrame] = {}
    start, answer = QueryRunner.start, QueryRunner.answer
    asked: list[int] = []

    def starting(self, x, *args, **kwargs):
        asked.append(int(x.index[0]))  # the group's rows are at positions 0..n-1
        return start(self, x, *args, **kwargs)

    def recording(self, *args, **kwargs):
        ce = answer(self, *args, **kwargs)
        answers[asked[-1]] = ce.counterfactual
        return ce

    monkeypatch.setattr(QueryRunner, "start", starting)
    monkeypatch.setattr(QueryRunner, "answer", recording)
    greedy = explainer.explain_group(rows, max_changes=2, method="greedy")
    assert sorted(answers) == list(range(len(rows)))  # the greedy asks every row
    answers.clear()
    got = explainer.explain_group(rows, max_changes=2)
    assert got.status is cfopt.Status.OPTIMAL and got.value <= greedy.value
    skipped = sorted(set(range(len(rows))) - set(answers))
    assert skipped, "the case needs a row an earlier row's action moves"
    for j in skipped:  # moved, on the model's own scores, by an earlier row's action
        moved = False
        for i, ce in answers.items():
            if i > j or ce is None:
                continue
            action = Action.between(space, rows.iloc[i], ce.iloc[0])
            after = rows.iloc[[j]].copy()
            for n, d in action.shifts.items():
                after[n] = after[n] + d
            for n, level in action.levels.items():
                after[n] = level
            if not all(space[n].lower <= after[n].iloc[0] <= space[n].upper
                       for n in action.shifts):
                continue
            label, s = scores(space.transform(after))
            moved |= label[0] == 1 and (s is None or s[0] >= MARGIN - 1e-9)
        assert moved, f"row {j} was not asked, and no earlier action moves it"


def least_total_cost(actions, k: int) -> tuple[int, float]:
    """(most rows moved, least total cost of them) with at most k actions."""
    kept = {}
    for cover, cost in actions:
        if cover:
            key = (cover, tuple(np.round(cost[sorted(cover)], 12)))
            kept[key] = (cover, cost)
    actions = list(kept.values())
    best = (0, 0.0)
    for m in range(1, k + 1):
        for combo in itertools.combinations(actions, m):
            covered = set().union(*(c for c, _ in combo))
            total = sum(min(cost[i] for c, cost in combo if i in c) for i in covered)
            if (len(covered), -total) > (best[0], -best[1]):
                best = (len(covered), total)
    return best


@pytest.mark.parametrize("seed,kind,budget,proves", [
    (1, "lr", 1, True), (2, "net", 2, False), (3, "rf", 2, False), (4, "net", 1, True),
    (6, "rf", 1, True)])
def test_least_total_cost_with_a_budget_matches_brute_force(seed, kind, budget, proves):
    """The most rows ``budget`` actions move, at the least total cost. Where the LP over
    every action meets the integer optimum the answer is proven (``proves``: these
    cases); elsewhere the gap is reported (no branch-and-price for costs)."""
    explainer, space, scores, rows = group(seed, kind)
    actions = brute_actions(space, scores, rows, {1}, 2, weights=explainer.milp.weights)
    moved, cost = least_total_cost(actions, budget)
    got = explainer.explain_group(rows, max_changes=2, objective="cost", n_actions=budget)
    assert (got.assignment >= 0).sum() == moved and len(got.actions) <= budget
    assert got.value == pytest.approx(float(got.costs.sum()))
    assert cost - 1e-6 <= got.value
    assert (got.status is cfopt.Status.OPTIMAL) == proves, got.message
    if got.status is cfopt.Status.OPTIMAL:
        assert got.value == pytest.approx(cost, abs=1e-6) and got.bound == pytest.approx(cost)
    else:
        assert got.status is cfopt.Status.FEASIBLE and "branch-and-price" in got.message
        assert got.bound is None or got.bound <= cost + 1e-6
    # each row's cost is its weighted L1 to its counterfactual, re-computed here
    w = explainer.milp.weights
    for i, a in got.assignment.items():
        if a >= 0:
            before, after = rows.loc[i], got.counterfactuals.loc[i]
            l1 = sum(w[f] * (before[f] != after[f]) if space[f].is_onehot else
                     w[f] * abs(after[f] - before[f]) for f in rows.columns)
            assert got.costs[i] == pytest.approx(l1)


def continuous_rows(explainer, rows, max_changes):
    """The group's rows in a space where ``a`` is continuous (so its shifts are not
    enumerable), as :class:`~cfopt.groups.actions.GroupRows`."""
    from cfopt.groups.actions import GroupRows

    floats = rows.assign(a=rows.a.astype(float))
    space = cfopt.FeatureSpace.from_frame(floats, kinds={"d": "integer", "a": "continuous"})
    space.increase_only("b")
    return GroupRows(space, explainer.milp.adapter, explainer.milp.input_specs,
                     floats.reset_index(drop=True), (1,), MARGIN, explainer.milp.weights,
                     max_changes, None)


@pytest.mark.parametrize("path", ["enumerated"], indirect=True)
def test_the_enumeration_limit_is_on_the_checks_and_a_continuous_feature_hands_over(path, monkeypatch):
    from cfopt.groups import enumeration
    from cfopt.groups.actions import GroupRows

    explainer, space, scores, rows = group(2, "net")
    grid = GroupRows(space, explainer.milp.adapter, explainer.milp.input_specs,
                     rows.reset_index(drop=True), (1,), MARGIN, explainer.milp.weights, 1, None)
    # one change: a every nonzero shift keeping some row in [0, 4], b up only (in
    # [0, 3]), d within [0, 2], or one of c's 3 levels
    every = enumeration.action_grid(grid, 1)
    a, b, d = rows.a, rows.b, rows.d
    expected = (4 - a.min()) + a.max() + (3 - b.min()) + (2 - d.min()) + d.max() + 3
    assert len(every) == expected
    assert len({a.key() for a in every}) == len(every)
    monkeypatch.setattr(enumeration, "ENUMERATION_LIMIT", len(every) * grid.n)
    assert len(enumeration.action_grid(grid, 1)) == len(every)  # exactly on the limit
    monkeypatch.setattr(enumeration, "ENUMERATION_LIMIT", len(every) * grid.n - 1)
    assert enumeration.action_grid(grid, 1) is None
    got = explainer.explain_group(rows, max_changes=1)
    assert got.status is cfopt.Status.OPTIMAL and "no pricing" not in got.message
    monkeypatch.setattr(enumeration, "ENUMERATION_LIMIT", 10**9)
    assert enumeration.action_grid(continuous_rows(explainer, rows, 1), 1) is None  # a continuous shift: not enumerable
    # the one-frame check of many actions is the one-action check of each
    ok, costs, _ = grid.covers_many(every)
    for k, a in enumerate(every):
        one, cost, _ = grid.covers(a)
        assert (ok[k] == one).all() and np.allclose(costs[k], cost)


@pytest.mark.parametrize("max_changes", [1, 2])
def test_a_copys_layer_bounds_hold_every_point_of_few_changes_and_beat_the_box(max_changes):
    """The pricing copies' layer bounds (GroupSearch.row_layer_bounds) contain the
    pre-activations of the row with every admissible change of at most ``max_changes``
    features (grid enumeration) and, at one change, are tighter than the box's."""
    from cfopt.groups.request import check_group_request
    from cfopt.groups.solve import GroupSearch
    from cfopt.query.restrictions.trees import query_input_box

    explainer, space, _, rows = group(2, "net")
    request = check_group_request(explainer, rows, 1, max_changes=max_changes,
                                  objective="count", n_actions=None, max_cost=None,
                                  method="column_generation", time_limit=None,
                                  row_time_limit=None, max_iterations=10)
    search = GroupSearch(explainer, request, 0.0)
    net = explainer.milp.adapter.structure
    levels = {"a": range(5), "b": range(4), "c": ["x", "y", "z"], "d": range(3)}
    tighter = False
    for i in range(len(request.X)):
        row = request.X.iloc[i]
        bounds = search.row_layer_bounds(i)
        m = request.capped.milp
        box = net.box_bounds(*query_input_box(m), within=m.global_layer_bounds)
        points = []
        for changed in itertools.combinations(levels, max_changes):
            for values in itertools.product(*(levels[f] for f in changed)):
                point = row.copy()
                for f, v in zip(changed, values):
                    point[f] = v
                if point["b"] >= row["b"]:  # b is increase-only
                    points.append(point)
        z = space.transform(pd.DataFrame(points))
        for (lo, hi), pre in zip(bounds, net.pre_activations(z)):
            assert (pre >= lo - 1e-9).all() and (pre <= hi + 1e-9).all()
        tighter |= any((hi < bh - 1e-6).any() or (lo > bl + 1e-6).any()
                       for (lo, hi), (bl, bh) in zip(bounds, box))
    assert tighter or max_changes > 1


def test_the_partial_grid_takes_the_features_of_fewest_options_within_the_limit(monkeypatch):
    """Features in order of their count of changes (b: 3 shifts up, c: 3 levels, d: 4
    shifts, a: 8), each taken while every action on those taken, checked on every row,
    stays within the limit (exactly on it: taken); a continuous one is never taken."""
    from cfopt.groups import enumeration
    from cfopt.groups.actions import GroupRows

    explainer, space, _, rows = group(1, "lr")
    rows = rows.assign(a=([0, 4] * len(rows))[:len(rows)], b=0,
                       d=([0, 2] * len(rows))[:len(rows)])
    grid = GroupRows(space, explainer.milp.adapter, explainer.milp.input_specs,
                     rows.reset_index(drop=True), (1,), MARGIN, explainer.milp.weights, 2, None)
    n = grid.n
    bc = 3 + 3 + 3 * 3  # b alone, c alone, both
    monkeypatch.setattr(enumeration, "ENUMERATION_LIMIT", bc * n)
    actions, wide = enumeration.partial_grid(grid, 2)
    assert len(actions) == bc and wide == ["d", "a"]
    assert all(set(a.features) <= {"b", "c"} for a in actions)
    monkeypatch.setattr(enumeration, "ENUMERATION_LIMIT", bc * n - 1)
    actions, wide = enumeration.partial_grid(grid, 2)
    assert len(actions) == 3 and wide == ["c", "d", "a"]
    monkeypatch.setattr(enumeration, "ENUMERATION_LIMIT", 10**9)
    actions, wide = enumeration.partial_grid(grid, 2)
    assert wide == [] and len(actions) == len(enumeration.action_grid(grid, 2))
    assert enumeration.partial_grid(continuous_rows(explainer, rows, 2), 2)[1] == ["a"]
