"""The base of the declarative constraints (:mod:`cfopt.constraints.blocks`): the name
check, the defaults of the optional hooks, and the helpers that check feature names,
measure a code's change and give a check's tolerance."""

from __future__ import annotations

import pandas as pd
import pytest

from cfopt.constraints.blocks import (
    CHECK_TOLERANCE,
    ConstraintBlock,
    check_features,
    code_change,
    tolerance,
)
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace

SPACE = FeatureSpace([
    Feature("a", "continuous", lower=-4.0, upper=6.0),
    Feature("s", "continuous", lower=0.0, upper=0.5),
    Feature("o", "ordinal", categories=("lo", "mid", "hi")),
    Feature("c", "categorical", categories=("p", "q")),
])


class Plain(ConstraintBlock):
    def build(self, m, block):
        pass

    def violations(self, m, factual, row):
        return []


def test_the_defaults_of_a_block():
    block = Plain()
    assert block.name is None
    assert Plain.kind == "constraint"
    assert Plain.per_query is False
    assert block.validate(SPACE) is None
    assert block.update(None, None) is None
    assert block.objective_term(None, None) is None
    assert block.cost(None, pd.Series(dtype=float), pd.Series(dtype=float)) == 0.0
    assert block.feature_intervals(None, None) == {}
    assert block.needs_witness is False
    assert block.network_copies(None) == []


@pytest.mark.parametrize("name", ["ok", "_x", "A9_b", "z"])
def test_identifier_names_are_kept(name):
    assert Plain(name).name == name


@pytest.mark.parametrize("name", ["9a", "a-b", "", "a b", "a.b", "é"])
def test_a_name_not_an_identifier_is_refused(name):
    with pytest.raises(ValueError, match=r"constraint name .* must be a Python identifier"):
        Plain(name)


def test_check_features_accepts_known_names():
    assert check_features(SPACE, ["a", "o", "c"], "rule") is None
    assert check_features(SPACE, ["a", "o"], "rule", numeric=True) is None


def test_check_features_names_the_unknown_feature():
    with pytest.raises(ValueError, match=r"rule: unknown feature 'zz'; the feature space "
                                         r"has \['a', 's', 'o', 'c'\]"):
        check_features(SPACE, ["a", "zz"], "rule")


def test_check_features_refuses_a_categorical_only_when_numeric():
    check_features(SPACE, ["c"], "rule")
    with pytest.raises(ValueError, match=r"rule: feature 'c' is categorical; use its levels"):
        check_features(SPACE, ["a", "c"], "rule", numeric=True)


def test_code_change_of_numeric_and_ordinal_features():
    factual = pd.Series({"a": 1.5, "o": "lo"})
    row = pd.Series({"a": -2.0, "o": "hi"})
    assert code_change(SPACE, "a", factual, row) == -3.5
    assert code_change(SPACE, "o", factual, row) == 2.0
    assert code_change(SPACE, "o", row, factual) == -2.0


def test_tolerance_is_relative_to_a_wide_range_and_absolute_for_a_narrow_one():
    assert CHECK_TOLERANCE == 1e-6
    assert tolerance(SPACE, "a") == pytest.approx(1e-5, rel=1e-12)
    assert tolerance(SPACE, "s") == 1e-6
    assert tolerance(SPACE, "o") == pytest.approx(2e-6, rel=1e-12)
    assert tolerance(SPACE, "c") == 1e-9
