"""Your own constraints and objectives (issue 37): raw Pyomo components and terms added to
the objective are part of the declared problem (checked on every returned point at its
raw values, reported, refused before any solve when they cannot be checked), declared
rules of your own (:class:`cfopt.CustomConstraint`) travel to parallel workers, and every
speed path serves them: the answers equal brute force on a grid, with honest statuses."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

import cfopt
import cfopt.formulations.predictors.trees as tree_formulation
import cfopt.formulations.tree_regions as tree_regions
from cfopt import Status
from cfopt.query.restrictions.relu import objective_value
from cfopt.query.restrictions.tree_walk import greedy_tree_counterfactual

from .conftest import grid, noisy_grid

MARGIN = 1e-3


@pytest.fixture(scope="module")
def forest():
    """Noisy labels on a 10 x 8 x 3 x 4 grid: a forest of 12 trees of depth 8."""
    frame, y = noisy_grid()
    space = cfopt.FeatureSpace.from_frame(frame)
    model = RandomForestClassifier(12, max_depth=8, random_state=0).fit(
        space.transform(frame), y)
    return frame, space, model


def explainer_of(monkeypatch, model, space, per_query: bool, **options) -> cfopt.Explainer:
    """An explainer whose trees are built per query (``per_query``) or whole."""
    with monkeypatch.context() as patch:
        if per_query:
            patch.setattr(tree_formulation, "PER_QUERY_TERMS", 0)
        return cfopt.Explainer(model, space, margin=MARGIN, mip_gap=0.0, **options)


def rejected(frame, space, model, n: int) -> list[int]:
    return np.flatnonzero(model.predict(space.transform(frame)) == 0)[:n].tolist()


def brute_force(explainer: cfopt.Explainer, x: pd.DataFrame) -> tuple[float, pd.DataFrame]:
    """The least objective (the user's: :func:`objective_value`) over every grid point
    the real model puts in class 1 with the margin, meeting every declared and raw
    constraint; and its point."""
    m = explainer.milp
    m.set_factual(x)
    m.set_target(1)
    points = grid(explainer.space)
    margin = m.adapter.structure.logits(explainer.space.transform(points))[:, 0]
    valid = points[(margin >= MARGIN) & (m.predict(points) == 1)].reset_index(drop=True)
    rows = [valid.iloc[[k]].reset_index(drop=True) for k in range(len(valid))]
    values = [objective_value(m, row) for row in rows]
    for k in np.argsort(values, kind="stable"):  # the cheapest that breaks no constraint
        if not m.violations(rows[k]):
            return values[k], rows[k]
    return math.inf, None


def no_rise(name: str):
    """A raw rule: feature ``name`` may not increase."""
    def add(m):
        m.no_rise = pyo.Constraint(expr=m.x[name] <= m.x0[name])
    return add


@pytest.mark.parametrize("per_query", [True, False])
def test_a_raw_rule_and_its_block_equal_brute_force(forest, monkeypatch, per_query):
    """The rule the heuristic breaks (a rises in the unconstrained optimum): as a raw
    constraint and as a declared block, the answer is brute force's, proven optimal,
    and the raw one is named in the answer."""
    frame, space, model = forest
    raw = explainer_of(monkeypatch, model, space, per_query)
    no_rise("a")(raw.milp)
    block = explainer_of(monkeypatch, model, space, per_query, constraints=[
        cfopt.LinearConstraint({"a": 1}, "<=", 0, relative=True, name="no_rise")])
    plain = explainer_of(monkeypatch, model, space, per_query)
    binding = 0
    for i in rejected(frame, space, model, 8):
        x = frame.iloc[[i]]
        free = plain.explain(x, target=1)
        binding += free.counterfactual["a"].iloc[0] > x["a"].iloc[0]
        expected, _ = brute_force(block, x)
        for e in (raw, block):
            ce = e.explain(x, target=1)
            assert ce.status is Status.OPTIMAL and ce.verified
            assert ce.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
            assert ce.bound <= expected + 1e-9
            assert ce.counterfactual["a"].iloc[0] <= x["a"].iloc[0]
        assert ce.details.get("raw_constraints") is None
        assert raw.explain(x, target=1).to_dict()["details"]["raw_constraints"] == ["no_rise"]
    assert binding >= 2  # the rule binds on some rows


def test_a_raw_constraint_is_checked_at_the_points_raw_values(forest):
    """``dev[a] >= 0.5`` read by its definition, |a - a0| / range: the solver may meet
    the row by raising dev alone, but the decoded point does not move a that far, so it
    is never returned as verified."""
    frame, space, model = forest
    explainer = cfopt.Explainer(model, space, margin=MARGIN)
    m = explainer.milp
    m.far = pyo.Constraint(expr=m.dev["a"] >= 0.5)
    x = frame.iloc[[rejected(frame, space, model, 1)[0]]]
    ce = explainer.explain(x, target=1)
    moved = ce.counterfactual is not None and abs(
        ce.counterfactual["a"].iloc[0] - x["a"].iloc[0]) >= 0.5 * 9
    assert ce.verified == moved
    if not moved:
        assert ce.status is Status.VERIFICATION_FAILED and "'far'" in ce.message
    row = x.assign(a=x["a"].iloc[0])  # the factual itself: dev = 0
    m.set_factual(x)
    m.set_target(1)
    assert any("'far'" in p and "violated" in p for p in m.violations(row, witness=True))


@pytest.mark.parametrize("per_query", [True, False])
@pytest.mark.parametrize("term", ["cost", "reward"])
def test_a_term_added_to_the_objective_is_the_users_objective(forest, monkeypatch, per_query,
                                                             term):
    """``m.objective + 3 dev[b]`` (a cost of moving b) or ``- 1.5 (b - b0) / 7`` (a
    reward for raising it, beyond its cost): the objective and bound reported are of the
    user's objective, proven optimal and equal to brute force's; the reward's least
    value, -1.5 (7 - b0) / 7, widens the radius the tree regions read on the distance,
    so they stay exact."""
    frame, space, model = forest
    explainer = explainer_of(monkeypatch, model, space, per_query)
    m = explainer.milp
    added = 3.0 * m.dev["b"] if term == "cost" else -1.5 * (m.x["b"] - m.x0["b"]) / 7
    m.objective.set_value(m.objective.expr + added)
    for i in rejected(frame, space, model, 5 if per_query else 3):
        x = frame.iloc[[i]]
        expected, _ = brute_force(explainer, x)
        ce = explainer.explain(x, target=1)
        assert ce.status is Status.OPTIMAL and ce.verified
        assert ce.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
        assert ce.bound <= expected + 1e-9
        move = (ce.counterfactual["b"].iloc[0] - x["b"].iloc[0]) / 7
        value = 3.0 * abs(move) if term == "cost" else -1.5 * move
        assert ce.objective == pytest.approx(ce.distances["l1"] + value)
        assert ce.details["raw_objective_term"]
        least = 0.0 if term == "cost" else -1.5 * (7 - x["b"].iloc[0]) / 7
        assert m.raw.extra_floor == pytest.approx(least)


def test_what_cannot_be_checked_is_refused_before_any_solve(forest, monkeypatch):
    frame, space, model = forest
    explainer = cfopt.Explainer(model, space)
    m = explainer.milp
    x = frame.iloc[[rejected(frame, space, model, 1)[0]]]
    monkeypatch.setattr(explainer.backend, "solve", lambda *a, **k: pytest.fail("solved"))
    leaf = m.predictor_constr.block.leaf[next(iter(m.predictor_constr.block.leaf))]
    m.inner = pyo.Constraint(expr=leaf >= 0)
    with pytest.raises(ValueError, match="'inner' uses .*formulation"):
        explainer.explain(x, target=1)
    m.del_component(m.inner)
    m.objective.sense = pyo.maximize
    with pytest.raises(ValueError, match="minimised"):
        explainer.explain(x, target=1)
    m.objective.sense = pyo.minimize
    m.other = pyo.Objective(expr=m.x["a"])
    with pytest.raises(ValueError, match="another active objective"):
        explainer.explain(x, target=1)
    m.del_component(m.other)
    composed = m.objective.expr
    m.objective.set_value(composed + m.x["a"] * m.x["b"])
    with pytest.raises(ValueError, match="not linear"):
        explainer.explain(x, target=1)
    m.objective.set_value(composed - 2 * m.dev["b"])  # the solver would raise dev alone
    with pytest.raises(ValueError, match=r"rewards dev\[b\].*m.x\[f\]"):
        explainer.explain(x, target=1)


def test_a_region_too_large_to_build_is_said_so_and_the_ascent_answers(forest, monkeypatch):
    """Per-query trees whose whole region cannot be built in the query's time: with the
    rule, the heuristic's point is no answer, and the old path built the whole region
    and answered 'time limit' long before it; the ascent's regions are small, so the
    answer is proven; with no time even for the first rung, the status says why."""
    frame, space, model = forest
    explainer = explainer_of(monkeypatch, model, space, True, time_limit=30)
    m = explainer.milp  # a rule with a variable of one's own: no heuristic point is admitted
    m.slack = pyo.Var(bounds=(0, 0))
    m.no_rise = pyo.Constraint(expr=m.x["a"] <= m.x0["a"] + m.slack)
    declared = cfopt.Explainer(model, space, margin=MARGIN, constraints=[
        cfopt.LinearConstraint({"a": 1}, "<=", 0, relative=True)])  # the same rule
    rows = []
    for i in rejected(frame, space, model, 12):
        x = frame.iloc[[i]]
        expected, point = brute_force(declared, x)
        explainer.runner.start(x, 1, {})
        candidate = greedy_tree_counterfactual(m)
        if candidate is not None and candidate["a"].iloc[0] > x["a"].iloc[0]:
            rows.append((x, expected))
    assert rows
    total = sum(len(t.leaves) for t in m.adapter.structure.trees)
    monkeypatch.setattr(tree_regions, "BUILD_SECONDS_PER_LEAF", 30 / (0.8 * total))
    for x, expected in rows:
        ce = explainer.explain(x, target=1)
        assert ce.status is Status.OPTIMAL
        assert ce.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
        assert "ascent" in ce.details
    monkeypatch.setattr(tree_regions, "BUILD_SECONDS_PER_LEAF", 30.0)
    ce = explainer.explain(rows[0][0], target=1)
    assert ce.status is Status.NO_SOLUTION and ce.total_time < 10
    assert ce.details["reason"] == "region_too_large"
    assert "could not be built" in ce.message and "time limit" not in ce.message


def test_a_region_too_large_to_load_in_the_time_left_is_said_so(forest, monkeypatch):
    """Per-query trees built around the verified heuristic point, but the time left too
    short to load them into the solver: the heuristic point is returned, FEASIBLE,
    with the reason region_too_large, long before the limit (not "time limit")."""
    import cfopt.query.runner as runner

    frame, space, model = forest
    explainer = explainer_of(monkeypatch, model, space, True, time_limit=20)
    monkeypatch.setattr(runner, "BUILD_SECONDS_PER_LEAF", 20.0)  # one leaf: the limit
    ce = explainer.explain(frame.iloc[[rejected(frame, space, model, 1)[0]]], target=1)
    assert ce.status is Status.FEASIBLE and ce.verified and ce.total_time < 10
    assert ce.details["reason"] == "region_too_large"
    assert "could not be loaded into the solver" in ce.message
    assert "time limit" not in ce.message


@pytest.mark.parametrize("isolate", [True, False])
def test_the_loading_of_a_region_is_reserved_once(forest, monkeypatch, isolate):
    """A solve in a HiGHS child counts the loading in its limit, so the query reserves
    no time for it (ExtraTrees on Adult left 5.6 s of 60 unused); in process it reserves
    the load; below twice the load nothing is started."""
    import cfopt.query.runner as runner
    from cfopt.solvers.highs import HighsBackend

    _, space, model = forest
    explainer = cfopt.Explainer(model, space, solver=HighsBackend(isolate=isolate))
    monkeypatch.setattr(runner, "BUILD_SECONDS_PER_LEAF", 0.005)  # 1000 leaves: 5 s
    query = explainer.runner
    details = {"region_leaves": 1000}
    for limit, left in ((30.0, 30.0 if isolate else 25.0), (10.5, 10.5 if isolate else 5.5),
                        (10.0, None)):
        settings = dataclasses.replace(explainer.settings, time_limit=limit)
        budget = query._load_budget(query.milp, settings, time.perf_counter(), details)
        if left is None:
            assert budget is None
        else:
            assert budget.time_limit == pytest.approx(left, abs=0.05)


def test_a_diverse_set_on_per_query_trees_finds_every_member(forest, monkeypatch):
    """The no-good cuts break every heuristic point after the first member, and the
    whole region cannot be built in the set's time (as a default forest's cannot): each
    member is found up the ascent, verified, changes its own features, and the set is
    complete (it stopped at 'time_limit' with one member, long before the limit)."""
    frame, space, model = forest
    explainer = explainer_of(monkeypatch, model, space, True, time_limit=30)
    total = sum(len(t.leaves) for t in explainer.milp.adapter.structure.trees)
    monkeypatch.setattr(tree_regions, "BUILD_SECONDS_PER_LEAF", 30 / (0.8 * total))
    for i in rejected(frame, space, model, 3):
        found = explainer.explain(frame.iloc[[i]], target=1, n=3)
        assert found.stopped == "complete" and len(found.members) == 3
        patterns = {frozenset(c.changes().index) for c in found.members}
        assert len(patterns) == 3
        assert all(c.verified for c in found.members)


def one_changes(features):
    """A rule of one's own: at most one of ``features`` changes (own binaries)."""
    def rule(m, b):
        span = {f: m.space[f].upper - m.space[f].lower for f in features}
        b.moved = pyo.Var(features, domain=pyo.Binary)
        return [*(m.x[f] - m.x0[f] <= span[f] * b.moved[f] for f in features),
                *(m.x0[f] - m.x[f] <= span[f] * b.moved[f] for f in features),
                sum(b.moved.values()) <= 1]
    return rule


def piecewise(feature):
    """A convex piecewise-linear cost of lowering ``feature`` (an epigraph variable)."""
    def rule(m, b):
        fall = (m.x0[feature] - m.x[feature]) / (m.space[feature].upper
                                                 - m.space[feature].lower)
        b.cost_of = pyo.Var(bounds=(0, 10))
        return [b.cost_of >= 0.5 * fall, b.cost_of >= 3 * fall - 0.5]
    return rule


@pytest.mark.parametrize("case", ["one_changes", "piecewise", "budget"])
def test_custom_constraints_equal_brute_force_and_run_in_parallel(forest, case):
    """Three research rules as :class:`cfopt.CustomConstraint`: each answer is brute
    force's, proven optimal; a rule with variables of its own is never satisfied by a
    heuristic point (it is checked at the solver's values only); the same explainer's
    batch in two worker processes gives the serial answers."""
    frame, space, model = forest
    if case == "one_changes":
        block = cfopt.CustomConstraint(one_changes(["a", "b", "d"]), name="one")
    elif case == "piecewise":
        block = cfopt.CustomConstraint(piecewise("b"), cost=lambda m, b: b.cost_of,
                                       name="pwl")
    else:  # a budget in raw units across two features: |da| + 2 |db| <= 4
        block = cfopt.CustomConstraint(lambda m, b: 9 * m.dev["a"] + 2 * 7 * m.dev["b"] <= 4,
                                       name="budget")
    explainer = cfopt.Explainer(model, space, margin=MARGIN, mip_gap=0.0, constraints=[block])
    assert block.needs_witness == (case != "budget")
    rows = rejected(frame, space, model, 4)
    answers = []
    for i in rows:
        x = frame.iloc[[i]]
        ce = explainer.explain(x, target=1)
        expected = _custom_brute_force(explainer, x, case)
        assert ce.status is Status.OPTIMAL and ce.verified
        assert ce.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
        if block.needs_witness:
            assert "heuristic_objective" not in ce.details
        answers.append(ce.objective)
    batch = explainer.explain_many(frame.iloc[rows], target=1, n_jobs=2)
    assert [r.objective for r in batch] == pytest.approx(answers, rel=1e-6, abs=1e-9)


def _custom_brute_force(explainer: cfopt.Explainer, x: pd.DataFrame, case: str) -> float:
    """Brute force of the three rules of the test above, written on raw rows."""
    m = explainer.milp
    m.set_factual(x)
    m.set_target(1)
    points = grid(explainer.space)
    best = math.inf
    x0 = x.iloc[0]
    margin = m.adapter.structure.logits(explainer.space.transform(points))[:, 0]
    for k in np.flatnonzero((margin >= MARGIN) & (m.predict(points) == 1)):
        point = points.iloc[[k]].reset_index(drop=True)
        p = point.iloc[0]
        if m.space_violations(point):
            continue
        extra = 0.0
        if case == "one_changes" and sum(p[f] != x0[f] for f in "abd") > 1:
            continue
        if case == "budget" and abs(p["a"] - x0["a"]) + 2 * abs(p["b"] - x0["b"]) > 4:
            continue
        if case == "piecewise":
            fall = (x0["b"] - p["b"]) / 7
            extra = max(0.0, 0.5 * fall, 3 * fall - 0.5)
        best = min(best, m.distances(point)["l1"] + extra)
    return best


def test_the_walk_keeps_the_rules_it_can_read(forest):
    """The tree walk keeps a declared linear rule and a raw one (both sums of one
    function per feature): its point is admitted where the rules bind; a rule it cannot
    read leaves its point a guess only."""
    frame, space, model = forest
    plain = cfopt.Explainer(model, space)
    ruled = cfopt.Explainer(model, space, constraints=[
        cfopt.LinearConstraint({"a": 1}, "<=", 0, relative=True)])
    no_rise("b")(ruled.milp)
    kept = 0
    for i in rejected(frame, space, model, 12):
        x = frame.iloc[[i]]
        for e in (plain, ruled):
            e.milp.set_factual(x)
            e.milp.set_target(1)
        free = greedy_tree_counterfactual(plain.milp)
        if free is None or (free["a"].iloc[0] <= x["a"].iloc[0]
                            and free["b"].iloc[0] <= x["b"].iloc[0]):
            continue
        row = greedy_tree_counterfactual(ruled.milp)
        if row is not None and not ruled.milp.violations(row):
            kept += 1
            assert row["a"].iloc[0] <= x["a"].iloc[0] and row["b"].iloc[0] <= x["b"].iloc[0]
    assert kept >= 2


def test_boosting_with_a_raw_rule_keeps_its_heuristic_start(forest):
    """A whole-built ensemble (gradient boosting) with a raw rule the walk reads: its
    heuristic point is admitted, so the query is restricted around it and started from
    it (the raw constraint made a query 10x slower when it was not)."""
    frame, space, _ = forest
    Z = space.transform(frame)
    y = (frame["a"] - frame["b"] > 1).astype(int)
    model = GradientBoostingClassifier(n_estimators=30, random_state=0).fit(Z, y)
    explainer = cfopt.Explainer(model, space, margin=MARGIN, mip_gap=0.0)
    no_rise("a")(explainer.milp)
    admitted = 0
    for i in np.flatnonzero(model.predict(Z) == 0)[:8]:
        x = frame.iloc[[i]]
        expected, _ = brute_force(explainer, x)
        if math.isinf(expected):
            continue
        ce = explainer.explain(x, target=1)
        assert ce.status is Status.OPTIMAL
        assert ce.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
        admitted += "heuristic_objective" in ce.details
    assert admitted >= 2


def test_raw_components_name_the_declared_way_for_parallel_and_cpsat(forest):
    frame, space, model = forest
    explainer = cfopt.Explainer(model, space)
    no_rise("a")(explainer.milp)
    with pytest.raises(ValueError, match="no_rise.*CustomConstraint"):
        explainer.explain_many(frame.iloc[:4], target=1, n_jobs=2)
    pytest.importorskip("ortools")
    cpsat = cfopt.Explainer(model, space, solver="cpsat")
    m = cpsat.milp
    m.objective.set_value(m.objective.expr + m.dev["a"])
    with pytest.raises(ValueError, match="a term added to m.objective"):
        cpsat.explain(frame.iloc[[rejected(frame, space, model, 1)[0]]], target=1)


def test_tree_models_solve_without_probing_unless_the_user_says(forest, german, german_model):
    """HiGHS's presolve probing is off for tree ensembles only (``tree_options``: it
    grows far faster than a forest's region), and the user's own option wins."""
    frame, space, model = forest
    x = frame.iloc[[rejected(frame, space, model, 1)[0]]]
    net, german_space = german_model
    seen = {}
    for name, e in (("trees", cfopt.Explainer(model, space)),
                    ("user", cfopt.Explainer(model, space,
                                             solver_options={"presolve_rule_off": 0})),
                    ("network", cfopt.Explainer(net, german_space))):
        settings = e.runner.start(x if name != "network" else german.X.iloc[[1]], 1, {})
        seen[name] = settings.options.get("presolve_rule_off")
    assert seen == {"trees": 1 << 15, "user": 0, "network": None}
    assert cfopt.solvers.make_solver("cbc").tree_options() == {}
