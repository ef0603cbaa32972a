"""One query's narrowing (:mod:`cfopt.constraints.query_range`): ``features_to_vary``
and ``permitted_range`` validated with errors naming the option and the feature, then
set as bounds on the model built (its rows, decoding intervals and raw checks)."""

from __future__ import annotations

import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.constraints.query_range import OPTIONS, QueryRange, QueryRequest, query_request
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace

SPACE = FeatureSpace([
    Feature("a", "continuous", lower=-2.0, upper=8.0),
    Feature("k", "integer", lower=0, upper=5),
    Feature("o", "ordinal", categories=("lo", "mid", "hi", "top")),
    Feature("c", "categorical", categories=("p", "q", "r")),
    Feature("s", "continuous", lower=0.0, upper=1.0, immutable=True),
])
FRAME = pd.DataFrame({"a": [-2.0, 0.0, 3.0, 8.0, 5.0, 1.0], "k": [0, 1, 5, 3, 2, 4],
                      "o": ["lo", "mid", "hi", "top", "lo", "hi"],
                      "c": ["p", "q", "r", "q", "p", "r"], "s": [0.5] * 6})
MODEL = LogisticRegression().fit(SPACE.transform(FRAME), [0, 0, 0, 1, 1, 1])
FACTUAL = pd.Series({"a": 1.0, "k": 2, "o": "mid", "c": "q", "s": 0.5})


def test_no_option_narrows_nothing():
    assert OPTIONS == ("features_to_vary", "permitted_range")
    request = query_request(SPACE)
    assert request == QueryRequest() and not request.narrows
    assert request.code_range(SPACE["a"], 1.0) == (-2.0, 8.0)
    assert request.allowed(SPACE["c"], "q") == {"p", "q", "r"}


def test_features_to_vary_hold_the_others_at_the_factual():
    request = query_request(SPACE, features_to_vary=["a", "c"])
    assert request.narrows and request.vary == {"a", "c"}
    assert request.code_range(SPACE["a"], 1.0) == (-2.0, 8.0)
    assert request.code_range(SPACE["k"], 2.0) == (2.0, 2.0)
    assert request.allowed(SPACE["c"], "q") == {"p", "q", "r"}
    held = query_request(SPACE, features_to_vary=("a",))
    assert held.allowed(SPACE["c"], "q") == {"q"}
    assert query_request(SPACE, features_to_vary=[]).narrows
    assert query_request(SPACE, features_to_vary={"k"}).vary == {"k"}


@pytest.mark.parametrize("given, error, message", [
    ("a", TypeError, "features_to_vary must be a list of feature names, got 'a'"),
    (3, TypeError, "features_to_vary must be a list of feature names, got 3"),
    (["a", "zz"], ValueError, r"features_to_vary: unknown feature\(s\) \['zz'\]; the "
                              r"feature space has \['a', 'k', 'o', 'c', 's'\]"),
    (["a", "s"], ValueError, r"features_to_vary names \['s'\], which the feature space "
                             r"declares immutable"),
])
def test_bad_features_to_vary(given, error, message):
    with pytest.raises(error, match=message):
        query_request(SPACE, features_to_vary=given)


def test_permitted_ranges_of_each_kind():
    request = query_request(SPACE, permitted_range={
        "a": (None, 3), "k": (1, None), "o": ["hi", "mid"], "c": {"p", "r"}})
    assert request.narrows and request.vary is None
    assert request.codes == {"a": (-2.0, 3.0), "k": (1.0, 5.0), "o": (1.0, 2.0)}
    assert request.levels == {"c": frozenset({"p", "r"})}
    assert request.code_range(SPACE["a"], 1.0) == (-2.0, 3.0)
    assert request.allowed(SPACE["c"], "q") == {"p", "r"}
    clipped = query_request(SPACE, permitted_range={"a": (-10, 20.5), "k": [2, 2]})
    assert clipped.codes == {"a": (-2.0, 8.0), "k": (2.0, 2.0)}
    assert query_request(SPACE, permitted_range={}).narrows is False
    one = query_request(SPACE, permitted_range={"o": ("top",)})
    assert one.codes == {"o": (3.0, 3.0)}


@pytest.mark.parametrize("given, error, message", [
    ([("a", (0, 1))], TypeError, "permitted_range must be a mapping feature -> range, "
                                 "got list"),
    ({"zz": (0, 1)}, ValueError, r"permitted_range: unknown feature\(s\) \['zz'\]"),
    ({"a": "0-1"}, ValueError, r"permitted_range\['a'\]: give \(low, high\) in raw units"),
    ({"a": 3}, ValueError, r"permitted_range\['a'\]: give \(low, high\)"),
    ({"a": (1, 2, 3)}, ValueError, r"permitted_range\['a'\]: give \(low, high\)"),
    ({"a": (0,)}, ValueError, r"permitted_range\['a'\]: give \(low, high\)"),
    ({"a": (True, 2)}, ValueError, r"permitted_range\['a'\]: ends must be finite numbers "
                                   r"or None, got \(True, 2\)"),
    ({"a": ("0", 2)}, ValueError, r"permitted_range\['a'\]: ends must be finite"),
    ({"a": (0, float("inf"))}, ValueError, r"permitted_range\['a'\]: ends must be finite"),
    ({"a": (5, 4)}, ValueError, r"permitted_range\['a'\]: \(5, 4\) leaves nothing of the "
                                r"feature's bounds \[-2, 8\]"),
    ({"a": (9, None)}, ValueError, r"permitted_range\['a'\]: \(9, None\) leaves nothing"),
    ({"a": (None, -3)}, ValueError, r"permitted_range\['a'\]: \(None, -3\) leaves nothing"),
    ({"c": "p"}, ValueError, r"permitted_range\['c'\]: give a non-empty list of its levels "
                             r"\['p', 'q', 'r'\], got 'p'"),
    ({"c": []}, ValueError, r"permitted_range\['c'\]: give a non-empty list"),
    ({"c": 3}, ValueError, r"permitted_range\['c'\]: give a non-empty list"),
    ({"c": ["p", "z"]}, ValueError, r"permitted_range\['c'\]: unknown level\(s\) \['z'\]; "
                                    r"its levels are \['p', 'q', 'r'\]"),
    ({"o": ["lo", "hi"]}, ValueError, r"permitted_range\['o'\]: the levels of an ordinal "
                                      r"feature must be consecutive, got \['lo', 'hi'\]"),
    ({"o": ["lo", "mid", "top"]}, ValueError, r"must be consecutive"),
])
def test_bad_permitted_ranges(given, error, message):
    with pytest.raises(error, match=message):
        query_request(SPACE, permitted_range=given)


def test_a_single_point_range_is_kept():
    assert query_request(SPACE, permitted_range={"a": (4, 4)}).codes == {"a": (4.0, 4.0)}


def narrowed(request):
    m = cfopt.Explainer(MODEL, SPACE).milp
    block = QueryRange()
    assert block.name == "query_range" and QueryRange.per_query is True
    assert block.request == QueryRequest()
    m.add_constraint(block)
    m.set_factual(FACTUAL.to_frame().T)
    block.request = request
    block.update(m, m.query_range)
    return m, block


def test_a_query_without_options_leaves_the_rows_slack():
    m, block = narrowed(QueryRequest())
    b = m.query_range
    assert {n: (pyo.value(b.lower[n]), pyo.value(b.upper[n])) for n in b.lower} == {
        "a": (-2.0, 8.0), "k": (0.0, 5.0), "o": (0.0, 3.0), "s": (0.0, 1.0)}
    assert all(pyo.value(b.allowed[i]) == 1.0 for i in b.allowed)
    assert block.feature_intervals(m, b) == {"a": (-2.0, 8.0), "k": (0.0, 5.0),
                                             "o": (0.0, 3.0), "s": (0.0, 1.0)}
    assert block.violations(m, FACTUAL, FACTUAL) == []


def test_the_rows_hold_the_querys_ranges():
    request = query_request(SPACE, features_to_vary=["a", "o", "c"],
                            permitted_range={"a": (0, 3), "o": ["mid", "hi"],
                                             "c": ["p", "q"]})
    m, block = narrowed(request)
    b = m.query_range
    assert (pyo.value(b.lower["a"]), pyo.value(b.upper["a"])) == (0.0, 3.0)
    assert (pyo.value(b.lower["k"]), pyo.value(b.upper["k"])) == (2.0, 2.0)
    assert (pyo.value(b.lower["o"]), pyo.value(b.upper["o"])) == (1.0, 2.0)
    assert [pyo.value(b.allowed["c", v]) for v in "pqr"] == [1.0, 1.0, 0.0]
    assert block.feature_intervals(m, b)["a"] == (0.0, 3.0)
    assert block.feature_intervals(m, b)["k"] == (2.0, 2.0)
    # the rows: x within [0, 3] for a, scaled by the width 10
    m.x_unit["a"].set_value(0.15)  # a = -0.5
    assert pyo.value(b.low["a"].body) == pytest.approx(-0.05)
    m.x_unit["a"].set_value(0.6)  # a = 4
    assert pyo.value(b.high["a"].body) == pytest.approx(-0.1)
    assert b.level["c", "r"].upper is b.allowed["c", "r"] or \
        pyo.value(b.level["c", "r"].upper) == 0.0
    assert block.violations(m, FACTUAL, FACTUAL) == []
    row = pd.Series({"a": 3.5, "k": 3, "o": "top", "c": "r", "s": 0.5})
    assert block.violations(m, FACTUAL, row) == [
        "'a' = 3.5 is outside this query's [0, 3] (permitted_range)",
        "'k' = 3 is outside this query's [2, 2] (not in features_to_vary)",
        "'o' = 'top' is outside this query's ['mid', 'hi'] (permitted_range)",
        "'c' = 'r' is not allowed in this query (permitted_range)"]
    edge = pd.Series({"a": 3.0, "k": 2, "o": "mid", "c": "p", "s": 0.5})
    assert block.violations(m, FACTUAL, edge) == []
    below = pd.Series({"a": -0.001, "k": 2, "o": "lo", "c": "q", "s": 0.5})
    assert block.violations(m, FACTUAL, below) == [
        "'a' = -0.001 is outside this query's [0, 3] (permitted_range)",
        "'o' = 'lo' is outside this query's ['mid', 'hi'] (permitted_range)"]


def test_a_categorical_held_at_the_factual():
    m, block = narrowed(query_request(SPACE, features_to_vary=["a"]))
    b = m.query_range
    assert [pyo.value(b.allowed["c", v]) for v in "pqr"] == [0.0, 1.0, 0.0]
    row = FACTUAL.copy()
    row["c"] = "p"
    assert block.violations(m, FACTUAL, row) == [
        "'c' = 'p' is not allowed in this query (not in features_to_vary)"]


def test_immutable_names_of_mixed_types_are_listed_in_text_order():
    space = FeatureSpace([Feature(3, "continuous", lower=0, upper=1, immutable=True),
                          Feature("b", "continuous", lower=0, upper=1, immutable=True),
                          Feature("a", "continuous", lower=0, upper=1)])
    with pytest.raises(ValueError, match=r"features_to_vary names \[3, 'b'\], which the "
                                         r"feature space declares immutable"):
        query_request(space, features_to_vary=["b", 3, "a"])


def test_a_block_built_before_any_query_constrains_nothing():
    m = cfopt.Explainer(MODEL, SPACE, constraints=[QueryRange()]).milp
    b = m.query_range
    assert {n: (pyo.value(b.lower[n]), pyo.value(b.upper[n])) for n in b.lower} == {
        "a": (-2.0, 8.0), "k": (0.0, 5.0), "o": (0.0, 3.0), "s": (0.0, 1.0)}
    assert [pyo.value(b.allowed["c", v]) for v in "pqr"] == [1.0, 1.0, 1.0]


def test_the_rows_at_their_ends():
    m, _ = narrowed(query_request(SPACE, permitted_range={"a": (1, 3)}))
    b = m.query_range
    assert pyo.value(b.low["a"].lower) == 0 and b.low["a"].upper is None
    assert pyo.value(b.high["a"].lower) == 0 and b.high["a"].upper is None
    m.x_unit["a"].set_value(0.3)  # a = 1: on the low end, 2 below the high end
    assert pyo.value(b.low["a"].body) == pytest.approx(0.0)
    assert pyo.value(b.high["a"].body) == pytest.approx(0.2)
    m.x_unit["a"].set_value(0.5)  # a = 3
    assert pyo.value(b.low["a"].body) == pytest.approx(0.2)
    assert pyo.value(b.high["a"].body) == pytest.approx(0.0)


def test_a_held_categorical_at_the_factual_and_the_features_after_it():
    m, block = narrowed(query_request(SPACE, features_to_vary=["a"]))
    assert block.violations(m, FACTUAL, FACTUAL) == []
    row = FACTUAL.copy()
    row["s"] = 0.6  # immutable, after the categorical c
    assert block.violations(m, FACTUAL, row) == [
        "'s' = 0.6 is outside this query's [0.5, 0.5] (not in features_to_vary)"]
