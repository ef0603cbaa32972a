"""Cuts against earlier counterfactuals (:mod:`cfopt.constraints.diversity_cuts`): the
helpers (changed features, weighted L1, change steps, small moves), the exact change
indicators, the no-good and distance cuts in tiny solves, and the raw re-checks."""

from __future__ import annotations

import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.constraints.diversity_cuts import (
    MIN_CHANGE,
    DiversityCuts,
    add_exact_change_indicators,
    change_steps,
    changed_features,
    small_moves,
    weighted_l1,
)
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace

SPACE = FeatureSpace([
    Feature("a", "continuous", lower=0.0, upper=10.0, scale=10.0),
    Feature("b", "continuous", lower=0.0, upper=10.0, scale=10.0),
    Feature("k", "integer", lower=0, upper=300, scale=300.0),
    Feature("c", "categorical", categories=("p", "q", "r")),
    Feature("s", "continuous", lower=0.0, upper=1.0, immutable=True),
])
FRAME = pd.DataFrame({"a": [0.0, 2, 4, 6, 8, 10], "b": [0.0, 2, 4, 6, 8, 10],
                      "k": [0, 60, 120, 180, 240, 300], "c": ["p", "q", "r", "p", "q", "r"],
                      "s": [0.5] * 6})
MODEL = LogisticRegression(C=100).fit(SPACE.transform(FRAME), [0, 0, 0, 1, 1, 1])
FACTUAL = pd.DataFrame([{"a": 2.0, "b": 2.0, "k": 60, "c": "q", "s": 0.5}])


def row(**changes):
    return pd.Series({**FACTUAL.iloc[0].to_dict(), **changes})


def test_the_helpers():
    assert MIN_CHANGE == 0.01
    f = FACTUAL.iloc[0]
    assert changed_features(SPACE, f, row(a=3.0, c="r")) == {"a", "c"}
    assert changed_features(SPACE, f, row()) == frozenset()
    weights = {"a": 2.0, "b": 1.0, "k": 0.5, "c": 3.0, "s": 1.0}
    assert weighted_l1(SPACE, weights, f, row(a=3.5, k=50, c="p")) == pytest.approx(
        2 * 1.5 + 0.5 * 10 + 3.0)
    assert weighted_l1(SPACE, weights, row(b=0.0), f) == pytest.approx(2.0)
    assert change_steps(SPACE, ["a", "k"], 0.05) == {"a": pytest.approx(0.5), "k": 1.0}
    assert change_steps(SPACE, ["a", "k"], 0.05, integers_too=True) == {
        "a": pytest.approx(0.5), "k": 15.0}
    assert change_steps(SPACE, ["k"], 0.001, integers_too=True) == {"k": 1.0}  # at least 1
    assert change_steps(SPACE, ["k"], 0.02, integers_too=True) == {"k": 6.0}  # not 7


def test_small_moves_in_words():
    f = FACTUAL.iloc[0]
    steps = {"a": 0.5, "k": 6.0}
    assert small_moves(SPACE, steps, f, row()) == []
    assert small_moves(SPACE, steps, f, row(a=2.3, k=63)) == [
        "a moves by 0.3, less than the 0.5 that counts as a change",
        "k moves by 3, less than the 6 that counts as a change"]
    assert small_moves(SPACE, steps, f, row(a=1.7)) == [
        "a moves by 0.3, less than the 0.5 that counts as a change"]
    assert small_moves(SPACE, steps, f, row(a=2.5, k=66)) == []
    assert small_moves(SPACE, steps, f, row(a=2.5 - 5e-6)) == []  # within the tolerance
    assert len(small_moves(SPACE, steps, f, row(a=2.5 - 2e-5))) == 1


def test_bad_arguments():
    for bad in (0, 2, True, "0.1", 1e-6):
        with pytest.raises(ValueError, match=r"min_change must be a fraction of the range in "
                                             r"\[1e-5, 1\]"):
            DiversityCuts(min_change=bad)
    assert DiversityCuts(min_change=1).min_change == 1.0
    assert DiversityCuts(min_change=1e-5).min_change == 1e-5
    cuts = DiversityCuts()
    assert cuts.name == "diversity" and cuts.min_change == MIN_CHANGE
    assert cuts.integers_too is False and DiversityCuts.kind == "diversity"
    with pytest.raises(ValueError, match=r"diversity weights given for unknown feature\(s\) "
                                         r"\['x', 'z'\]"):
        cfopt.Explainer(MODEL, SPACE, constraints=[DiversityCuts({"z": 1, "a": 1, "x": 2})])


def query(cuts, **options):
    explainer = cfopt.Explainer(MODEL, SPACE, mip_gap=0.0, constraints=[cuts], **options)
    m = explainer.milp
    m.set_factual(FACTUAL)
    m.set_target(1)
    return explainer, m


def test_the_exact_change_indicators():
    m = cfopt.Explainer(MODEL, SPACE).milp
    m.set_factual(FACTUAL)
    block = m.block_test = pyo.Block()
    add_exact_change_indicators(m, block, 0.05)
    assert list(block.MUTABLE) == ["a", "b", "k"]
    m.block_two = pyo.Block()
    add_exact_change_indicators(m, m.block_two, 0.05, ["k"], integers_too=True)
    assert list(m.block_two.MUTABLE) == ["k"]

    def feasible(b, x, up, down):
        m.x_unit["a"].set_value(x / 10)
        b.up["a"].set_value(up)
        b.down["a"].set_value(down)
        rows = (b.one_way["a"], b.up_link["a"], b.down_link["a"], b.up_min["a"],
                b.down_min["a"])
        return all((r.lower is None or pyo.value(r.body) >= pyo.value(r.lower) - 1e-9) and
                   (r.upper is None or pyo.value(r.body) <= pyo.value(r.upper) + 1e-9)
                   for r in rows)

    assert feasible(block, 2.0, 0, 0) and not feasible(block, 2.1, 0, 0)
    assert feasible(block, 2.5, 1, 0) and not feasible(block, 2.4, 1, 0)
    assert feasible(block, 10.0, 1, 0) and not feasible(block, 1.0, 1, 0)
    assert feasible(block, 1.5, 0, 1) and not feasible(block, 1.6, 0, 1)
    assert feasible(block, 0.0, 0, 1) and not feasible(block, 3.0, 0, 1)
    assert not feasible(block, 2.0, 1, 1)
    k = m.block_two
    k.up["k"].set_value(1)
    k.down["k"].set_value(0)
    row_ = k.up_min["k"]  # x - x0 >= 15 up - 300 down: tau = 5 % of 300
    for steps, holds in ((74, False), (75, True)):
        m.x_steps["k"].set_value(steps)
        assert (pyo.value(row_.body) >= pyo.value(row_.lower) - 1e-9 if row_.lower is not None
                else pyo.value(row_.body) <= pyo.value(row_.upper) + 1e-9) == holds


def test_a_nogood_cut_changes_the_set_of_changed_features():
    cuts = DiversityCuts()
    explainer, m = query(cuts)
    first = explainer.explain(FACTUAL, target=1)
    moved = changed_features(SPACE, FACTUAL.iloc[0], first.counterfactual.iloc[0])
    assert moved and "s" not in moved
    assert m.diversity.component("up") is None
    cuts.add_nogood(m, moved)
    assert list(m.diversity.MUTABLE) == ["a", "b", "k"]
    assert len(m.diversity.cuts) == 1
    f = FACTUAL.iloc[0]
    assert cuts.violations(m, f, first.counterfactual.iloc[0]) == [
        f"diversity: changes the features {sorted(moved)}, within Hamming distance 1 of an "
        f"earlier counterfactual's {sorted(moved)}"]
    other = row(c="r") if moved != {"c"} else row(a=9.0)
    other_moved = changed_features(SPACE, f, other)
    assert cuts.violations(m, f, other) == []
    cuts.add_nogood(m, other_moved, hamming=3)
    assert len(m.diversity.cuts) == 2
    assert cuts.violations(m, f, row(a=9.0, c="r")) == [
        "diversity: changes the features ['a', 'c'], within Hamming distance 3 of an "
        f"earlier counterfactual's {sorted(other_moved)}"]
    assert cuts.violations(m, f, row(a=2.01)) == [
        "diversity: a moves by 0.01, less than the 0.1 that counts as a change",
        f"diversity: changes the features ['a'], within Hamming distance 3 of an earlier "
        f"counterfactual's {sorted(other_moved)}"]
    cuts.update(m, m.diversity)  # a new query drops the cuts
    assert len(m.diversity.cuts) == 0 and cuts.violations(m, f, first.counterfactual.iloc[0]) == []


def test_nogood_rows_in_the_milp():
    cuts = DiversityCuts()
    _, m = query(cuts)
    cuts.add_nogood(m, frozenset({"a", "c"}), hamming=2)
    row_ = m.diversity.cuts[1]
    for pattern, holds in ((dict(a=1, b=0, k=0, c=1), False), (dict(a=1, b=1, k=0, c=1), False),
                           (dict(a=0, b=1, k=0, c=1), True), (dict(a=0, b=0, k=0, c=0), True),
                           (dict(a=1, b=1, k=1, c=1), True)):
        for n in "abk":
            m.diversity.up[n].set_value(pattern[n])
            m.diversity.down[n].set_value(0)
        m.onehot["c", "q"].set_value(1 - pattern["c"])
        m.onehot["c", "r"].set_value(pattern["c"])
        m.onehot["c", "p"].set_value(0)
        value = pyo.value(row_.body)
        ok = value >= pyo.value(row_.lower) - 1e-9 if row_.lower is not None else \
            value <= pyo.value(row_.upper) + 1e-9
        assert ok == holds, pattern


def test_a_distance_cut_in_the_milp_and_its_check():
    cuts = DiversityCuts({"b": 0.0, "k": 0.0})
    _, m = query(cuts)
    assert cuts._weights["a"] == pytest.approx(0.1) and cuts._weights["b"] == 0.0
    point = row(a=6.0, c="r")
    cuts.add_distance(m, point, 1.5)
    # a (weight 1/10) and c (weight 1): b and k weigh 0, s is immutable
    assert len(m.diversity.gap) == 1 and len(m.diversity.side) == 1
    assert m.diversity.gap[1].ub == 10.0
    assert len(m.diversity.cuts) == 3
    f = FACTUAL.iloc[0]
    assert cuts.violations(m, f, row(a=1.0, c="p")) == []  # 0.5 + 1 = 1.5
    assert cuts.violations(m, f, row(a=6.0, c="p")) == [
        "diversity: at weighted L1 distance 1 from an earlier counterfactual, below the "
        "required 1.5"]
    assert cuts.violations(m, f, row(a=1.0 + 1e-6, c="p")) == []  # within the slack
    assert len(cuts.violations(m, f, row(a=1.01, c="p"))) == 1
    # the rows: e <= |x - c| for either side, the weighted sum >= the radius
    e, s = m.diversity.gap[1], m.diversity.side[1]
    lower1, lower2, total = (m.diversity.cuts[i] for i in (1, 2, 3))
    m.x_unit["a"].set_value(0.3)  # a = 3, |a - 6| = 3
    e.set_value(3.0)
    s.set_value(0)
    assert pyo.value(lower2.body) <= pyo.value(lower2.upper) + 1e-9
    e.set_value(3.1)
    assert pyo.value(lower2.body) > pyo.value(lower2.upper) + 1e-9
    s.set_value(1)
    e.set_value(3.0)
    assert pyo.value(lower1.body) > pyo.value(lower1.upper) + 1e-9  # 3 <= -3 + 0
    m.x_unit["a"].set_value(0.9)  # a = 9
    assert pyo.value(lower1.body) <= pyo.value(lower1.upper) + 1e-9
    e.set_value(3.0)
    m.onehot["c", "r"].set_value(0.0)
    assert pyo.value(total.body) == pytest.approx(0.3 + 1.0)
    m.onehot["c", "r"].set_value(1.0)
    assert pyo.value(total.body) == pytest.approx(0.3)
    assert pyo.value(total.lower) == 1.5


def test_integers_too_sets_the_step_of_an_integral_feature():
    cuts = DiversityCuts(min_change=0.05, integers_too=True)
    _, m = query(cuts)
    cuts.add_nogood(m, frozenset({"k"}))
    f = FACTUAL.iloc[0]
    assert "diversity: k moves by 10, less than the 15 that counts as a change" in \
        cuts.violations(m, f, row(k=70))
    plain = DiversityCuts(min_change=0.05, name="plain")
    _, m = query(plain)
    plain.add_nogood(m, frozenset({"a"}))
    assert not any("k moves" in p for p in plain.violations(m, f, row(k=70)))


def test_a_move_exactly_at_the_step_less_its_tolerance_counts_as_a_change():
    f = FACTUAL.iloc[0]
    assert small_moves(SPACE, {"a": 0.25 + 1e-5}, f, row(a=2.25)) == []


def test_a_move_down_is_a_change_in_a_nogood_and_the_indicators_are_made_once():
    from pyomo.core.expr.visitor import identify_variables

    cuts = DiversityCuts(min_change=0.05, integers_too=True)
    _, m = query(cuts)
    cuts.add_nogood(m, frozenset({"a", "c"}), hamming=2)
    up = m.diversity.up
    cuts.add_nogood(m, frozenset({"b"}))
    assert m.diversity.up is up  # the indicators of the first cut stay
    own = {id(v) for v in m.diversity.up.values()} | {id(v) for v in m.diversity.down.values()}
    for k in (1, 2):
        used = [v for v in identify_variables(m.diversity.cuts[k].body)
                if v.parent_component().local_name in ("up", "down")]
        assert used and all(id(v) in own for v in used)
    first = m.diversity.cuts[1]
    for n in "abk":
        m.diversity.up[n].set_value(0)
        m.diversity.down[n].set_value(0)
    m.diversity.down["a"].set_value(1)  # a moved down, c changed: the same pattern
    for level in "pqr":
        m.onehot["c", level].set_value(float(level == "r"))
    assert not satisfied(first)
    # integers_too: k's indicator needs a move of 15 (5 % of 300)
    k = m.diversity
    k.up["k"].set_value(1)
    k.down["k"].set_value(0)
    for steps, holds in ((74, False), (75, True)):
        m.x_steps["k"].set_value(steps)
        assert satisfied(k.up_min["k"]) == holds


def test_a_nogood_at_exactly_the_hamming_distance_holds():
    cuts = DiversityCuts()
    _, m = query(cuts)
    cuts.add_nogood(m, frozenset({"a"}), hamming=1)
    f = FACTUAL.iloc[0]
    assert not any("Hamming" in p for p in cuts.violations(m, f, row(a=5.0, c="r")))
    assert any("Hamming" in p for p in cuts.violations(m, f, row(a=5.0)))


def test_the_big_m_of_a_distance_cut_admits_either_side():
    cuts = DiversityCuts()
    _, m = query(cuts)
    cuts.add_distance(m, row(a=10.0), 0.5)
    e, s = m.diversity.gap[1], m.diversity.side[1]
    first, second = m.diversity.cuts[1], m.diversity.cuts[2]
    m.x_unit["a"].set_value(0.0)  # a = 0, the point at 10: e = 10 on the side s = 0
    e.set_value(10.0)
    s.set_value(0)
    assert pyo.value(first.body) <= pyo.value(first.upper) + 1e-9
    assert pyo.value(second.body) <= pyo.value(second.upper) + 1e-9
    cuts.add_distance(m, row(a=0.0), 0.5)
    e, s = m.diversity.gap[4], m.diversity.side[4]  # after a, b, k of the first
    third, fourth = m.diversity.cuts[8], m.diversity.cuts[9]
    m.x_unit["a"].set_value(1.0)  # a = 10, the point at 0: e = 10 on the side s = 1
    e.set_value(10.0)
    s.set_value(1)
    assert pyo.value(third.body) <= pyo.value(third.upper) + 1e-9
    assert pyo.value(fourth.body) <= pyo.value(fourth.upper) + 1e-9


def test_a_distance_cut_with_a_categorical_before_numeric_features():
    space = FeatureSpace([Feature("c", "categorical", categories=("p", "q")),
                          Feature("a", "continuous", lower=0.0, upper=10.0, scale=10.0)])
    frame = pd.DataFrame({"c": ["p", "q", "p", "q"], "a": [0.0, 3.0, 6.0, 9.0]})
    model = LogisticRegression().fit(space.transform(frame), [0, 0, 1, 1])
    cuts = DiversityCuts({"c": 1.0, "a": 0.5})
    m = cfopt.Explainer(model, space, constraints=[cuts]).milp
    m.set_factual(frame.iloc[[0]])
    m.set_target(1)
    cuts.add_distance(m, pd.Series({"c": "q", "a": 6.0}), 2.0)
    assert len(m.diversity.gap) == 1  # a's term after c's
    total = m.diversity.cuts[3]
    m.onehot["c", "q"].set_value(0.0)
    m.diversity.gap[1].set_value(2.0)
    assert pyo.value(total.body) == pytest.approx(1.0 + 0.5 * 2.0)


def satisfied(row):
    body = pyo.value(row.body)
    return bool((row.lower is None or body >= pyo.value(row.lower) - 1e-9) and
                (row.upper is None or body <= pyo.value(row.upper) + 1e-9))


NEGATIVE = FeatureSpace([Feature("u", "continuous", lower=-6.0, upper=-2.0, shift=-6.0,
                                 scale=4.0),
                         Feature("v", "continuous", lower=0.0, upper=1.0)])


def test_steps_and_big_ms_of_a_negative_range():
    assert change_steps(NEGATIVE, ["u"], 0.25) == {"u": 1.0}
    frame = pd.DataFrame({"u": [-6.0, -5.0, -3.0, -2.0], "v": [0.0, 0.5, 0.5, 1.0]})
    model = LogisticRegression().fit(NEGATIVE.transform(frame), [0, 0, 1, 1])
    cuts = DiversityCuts(min_change=0.25)
    m = cfopt.Explainer(model, NEGATIVE, constraints=[cuts]).milp
    m.set_factual(frame.iloc[[0]])  # u = -6
    m.set_target(1)
    cuts.add_nogood(m, frozenset({"u"}))
    b = m.diversity
    assert all(b.up[n].is_binary() and b.down[n].is_binary() for n in b.MUTABLE)
    m.x_unit["u"].set_value(1.0)  # u = -2: a move of 4, the whole range
    b.up["u"].set_value(1)
    b.down["u"].set_value(0)
    assert satisfied(b.up_link["u"]) and satisfied(b.up_min["u"])
    m.x_unit["u"].set_value(0.2)  # u = -5.2: a move of 0.8, below the step of 1
    assert not satisfied(b.up_min["u"])
    cuts.add_distance(m, pd.Series({"u": -2.0, "v": 0.5}), 0.5)
    assert b.gap[1].ub == 4.0 and b.gap[1].lb == 0 and b.side[1].is_binary()
    e, s = b.gap[1], b.side[1]
    m.x_unit["u"].set_value(0.0)  # u = -6, the point at -2: e = 4 with s = 0
    e.set_value(4.0)
    s.set_value(0)
    assert satisfied(b.cuts[2]) and satisfied(b.cuts[3])


def test_the_default_indicators_count_any_move_of_an_integral_feature():
    m = cfopt.Explainer(MODEL, SPACE).milp
    m.set_factual(FACTUAL)
    m.block_test = pyo.Block()
    add_exact_change_indicators(m, m.block_test, 0.05)
    b = m.block_test
    b.up["k"].set_value(1)
    b.down["k"].set_value(0)
    m.x_steps["k"].set_value(61)  # one unit up
    assert satisfied(b.up_min["k"])
