"""The raw feature variables and their map to the model inputs
(:mod:`cfopt.formulations.features`) on a five-feature space (continuous, integer,
binary, constant, categorical), checked by fixing the variables and reading the
expressions: the codes, the model inputs (the space's own encoding), the category
change, the factual hold."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest

import cfopt
from cfopt.formulations.features import (
    add_feature_variables,
    code_variable,
    encode_inputs,
    hold_at_factual,
    width,
)
from cfopt.space.encoding import InputSpec

FRAME = pd.DataFrame({"income": [10.0, 55.5, 100.0], "age": [20, 45, 70],
                      "owner": [0, 1, 1], "flat": [3.5, 3.5, 3.5],
                      "colour": ["red", "green", "blue"]})


def block():
    space = cfopt.FeatureSpace.from_frame(FRAME)
    m = pyo.ConcreteModel()
    inputs = add_feature_variables(m, space)
    return m, space, inputs


def set_row(m, space, row: dict) -> None:
    """Fix every variable to the codes of ``row``."""
    for f in space:
        if f.is_onehot:
            for level in f.categories:
                m.onehot[f.name, level].fix(1.0 if row[f.name] == level else 0.0)
        else:
            var, offset, scale = code_variable(m, space, f.name)
            var.fix((row[f.name] - offset) / scale)


def test_the_variables_and_their_domains():
    m, space, _ = block()
    assert list(m.NUMERIC) == ["income", "age", "owner", "flat"]
    assert list(m.CATEGORICAL) == ["colour"]
    assert set(m.ONEHOT) == {("colour", c) for c in ("red", "green", "blue")}
    assert list(m.x_steps) == ["age", "owner"] and list(m.x_unit) == ["income", "flat"]
    assert m.x_steps["age"].domain is pyo.NonNegativeIntegers
    assert m.x_steps["age"].bounds == (0, 50)
    assert m.x_steps["owner"].domain is pyo.Binary and m.x_steps["owner"].bounds == (0, 1)
    assert m.x_unit["income"].bounds == (0.0, 1.0) and m.x_unit["flat"].bounds == (0.0, 0.0)
    assert all(m.onehot[p].domain is pyo.Binary for p in m.ONEHOT)
    assert [pyo.value(m.x0[f]) for f in m.NUMERIC] == [10.0, 20, 0, 3.5]
    assert all(pyo.value(m.onehot0[p]) == 0.0 for p in m.ONEHOT)
    assert width(space, "income") == 90.0 and width(space, "flat") == 1.0
    assert code_variable(m, space, "age") == (m.x_steps["age"], 20, 1.0)
    assert code_variable(m, space, "income") == (m.x_unit["income"], 10.0, 90.0)


@pytest.mark.parametrize("row", [{"income": 55.5, "age": 45, "owner": 1, "flat": 3.5,
                                  "colour": "green"},
                                 {"income": 100.0, "age": 21, "owner": 0, "flat": 3.5,
                                  "colour": "blue"}])
def test_the_codes_and_model_inputs_are_the_spaces_encoding(row):
    m, space, inputs = block()
    set_row(m, space, row)
    assert [pyo.value(m.x[f]) for f in m.NUMERIC] == pytest.approx(
        [row[f] for f in m.NUMERIC], abs=1e-12)
    expected = space.encode(pd.DataFrame([row]))[0]
    np.testing.assert_allclose([pyo.value(e) for e in inputs], expected, atol=1e-12)
    for row_constraint in m.component_data_objects(pyo.Constraint):
        assert row_constraint.lower == pyo.value(row_constraint.body) == row_constraint.upper
    m.onehot["colour", "red"].fix(1.0)  # two levels at once
    assert pyo.value(m.onehot_sum["colour"].body) > m.onehot_sum["colour"].upper


def test_a_category_change_counts_once():
    m, space, _ = block()
    m.onehot0["colour", "red"] = 1.0
    set_row(m, space, {**FRAME.iloc[0].to_dict(), "colour": "red"})
    assert pyo.value(m.category_changed["colour"]) == 0.0
    set_row(m, space, {**FRAME.iloc[0].to_dict(), "colour": "blue"})
    assert pyo.value(m.category_changed["colour"]) == 1.0


def test_hold_at_factual_fixes_the_others_and_releases_them():
    """Inside: every feature but the free ones at the factual; a variable fixed before
    keeps its value and stays fixed after; all others are released, even on an error."""
    m, space, _ = block()
    m.x0["income"] = 55.5
    m.x0["age"] = 30
    m.onehot0["colour", "green"] = 1.0
    m.x_steps["owner"].fix(1)
    with hold_at_factual(m, space, free={"age"}):
        assert m.x_unit["income"].fixed
        assert pyo.value(m.x["income"]) == pytest.approx(55.5)
        assert not m.x_steps["age"].fixed
        assert m.x_steps["owner"].value == 1  # fixed before: kept
        assert [m.onehot["colour", c].value for c in ("red", "green", "blue")] == [0, 1, 0]
        assert all(m.onehot[p].fixed for p in m.ONEHOT)
    assert m.x_steps["owner"].fixed and not m.x_unit["income"].fixed
    assert not any(m.onehot[p].fixed for p in m.ONEHOT)
    with pytest.raises(RuntimeError), hold_at_factual(m, space, free=()):
        assert m.x_steps["age"].fixed and m.x_steps["age"].value == 10
        raise RuntimeError
    assert not m.x_steps["age"].fixed and not m.onehot["colour", "red"].fixed


def test_encode_inputs_of_every_kind_of_spec():
    """Affine codes, one-hot indicators, the value of a category's integer code (levels)
    and constants."""
    m, space, _ = block()
    set_row(m, space, {"income": 55.5, "age": 45, "owner": 1, "flat": 3.5,
                       "colour": "green"})
    specs = [InputSpec("affine", "income", a=2.0, b=-1.0),
             InputSpec("indicator", "colour", level="green"),
             InputSpec("indicator", "colour", level="red"),
             InputSpec("levels", "colour", a=0.5, b=-0.5,
                       codes=(("red", 1), ("green", 3), ("blue", 2))),
             InputSpec("levels", "colour", a=1.0, b=-3.0,
                       codes=(("red", 1), ("green", 3), ("blue", 2))),
             InputSpec("constant", b=7.25)]
    inputs = encode_inputs(m, space, specs)
    assert [pyo.value(e) for e in inputs] == [110.0, 1.0, 0.0, 1.0, 0.0, 7.25]
