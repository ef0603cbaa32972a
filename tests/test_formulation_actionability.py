"""Actionability rows and their check on raw rows
(:mod:`cfopt.formulations.actionability`), on fixed values without a solver: a row of
the MILP admits a move exactly when :func:`actionability_violations` finds nothing
wrong with the same move."""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pyomo.environ as pyo
import pytest

import cfopt
from cfopt.formulations.actionability import (
    actionability_violations,
    add_actionability,
    add_max_changes,
)
from cfopt.formulations.features import add_feature_variables, code_variable

FRAME = pd.DataFrame({"up": [0.0, 10.0, 4.5], "down": [0, 6, 2], "still": [1.0, 5.0, 2.5],
                      "free": [0, 3, 1], "c": ["red", "green", "blue"],
                      "fixed_c": ["x", "y", "z"]})
FACTUAL = {"up": 4.5, "down": 2, "still": 2.5, "free": 1, "c": "blue", "fixed_c": "y"}


def space():
    s = cfopt.FeatureSpace.from_frame(FRAME)
    s.increase_only("up").decrease_only("down").immutable("still", "fixed_c")
    return s


def block(s, cap=None):
    m = pyo.ConcreteModel()
    add_feature_variables(m, s)
    add_actionability(m, s)
    if cap is not None:
        add_max_changes(m, s, cap)
    return m


def satisfied(m) -> bool:
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        if (c.lower is not None and body < pyo.value(c.lower) - 1e-9) or \
                (c.upper is not None and body > pyo.value(c.upper) + 1e-9):
            return False
    return True


def place(m, s, row: dict) -> None:
    for f in s:
        if f.is_onehot:
            for level in f.categories:
                m.onehot0[f.name, level] = float(FACTUAL[f.name] == level)
                m.onehot[f.name, level].set_value(float(row[f.name] == level))
            continue
        m.x0[f.name] = f.to_code(FACTUAL[f.name])
        var, offset, w = code_variable(m, s, f.name)
        var.set_value((f.to_code(row[f.name]) - offset) / w, skip_validation=True)
        if hasattr(m, "changed"):
            m.changed[f.name].set_value(float(row[f.name] != FACTUAL[f.name]))


MOVES = {"up": (3.0, 4.5, 6.0), "down": (1, 2, 3), "still": (2.0, 2.5),
         "free": (0, 1, 3), "c": ("blue", "red"), "fixed_c": ("y", "x")}


@pytest.mark.parametrize("cap", [None, 0, 2, 4])
def test_rows_admit_exactly_the_actionable_moves(cap):
    s = space()
    m = block(s, cap)
    before = pd.Series(FACTUAL)
    count = 0
    for values in itertools.product(*MOVES.values()):
        row = dict(zip(MOVES, values))
        place(m, s, row)
        problems = actionability_violations(s, before, pd.Series(row),
                                            math.inf if cap is None else cap)
        assert satisfied(m) is (not problems), (row, problems)
        count += not problems
    assert count >= 1 + (cap != 0)


def test_declared_rows():
    s = space()
    m = block(s, 3)
    assert list(m.immutable) == ["still", "fixed_c"]
    assert list(m.increase_only) == ["up"] and list(m.decrease_only) == ["down"]
    assert pyo.value(m.max_changes_limit) == 3
    m.max_changes_limit = 1  # a mutable Param: the cap changes without a rebuild
    place(m, s, {**FACTUAL, "up": 6.0, "free": 3})
    assert not satisfied(m)
    m.max_changes_limit = 2
    assert satisfied(m)


def test_an_immutable_monotone_feature_is_only_immutable():
    s = space()
    s.increase_only("still")
    m = block(s)
    assert "still" not in list(m.increase_only) and "still" in list(m.immutable)
    s = space()
    s.decrease_only("still")
    assert "still" not in list(block(s).decrease_only)


def test_violation_messages():
    s = space()
    before = pd.Series(FACTUAL)
    after = pd.Series({**FACTUAL, "up": 3.0, "down": 3, "still": 2.0, "fixed_c": "x",
                       "c": "red"})
    assert actionability_violations(s, before, after, 4) == [
        "increase-only feature 'up' moved the other way",
        "decrease-only feature 'down' moved the other way",
        "immutable feature 'still' changed",
        "immutable feature 'fixed_c' changed",
        "5 features changed, above the cap of 4",
    ]
    assert actionability_violations(s, before, after, 5) == actionability_violations(
        s, before, after, 4)[:-1]
    assert actionability_violations(s, before, before, 0) == []
