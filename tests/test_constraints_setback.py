"""The C-setback cost (:mod:`cfopt.constraints.setback`): with the features fixed at a
row, the least cost the block admits is the exact cost of undoing the row's maximal
setback (:func:`cfopt.space.perturbations.setback_cost`, computed without the MILP), for
absolute and relative numeric perturbations in both directions, capped and not, and for
categorical and binary features that may switch away."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt import Perturbation
from cfopt.constraints.setback import SetbackCost
from cfopt.formulations.features import code_variable
from cfopt.solvers import SolverSettings, make_solver
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace

SPACE = FeatureSpace([
    Feature("a", "continuous", lower=-4.0, upper=6.0,
            perturbation=Perturbation.absolute(increase=1.5, decrease=0.5)),
    Feature("b", "continuous", lower=-3.0, upper=5.0,
            perturbation=Perturbation.relative(increase=0.2, decrease=0.4)),
    Feature("k", "integer", lower=0, upper=6),
    Feature("c", "categorical", categories=("p", "q", "r"),
            perturbation=Perturbation.to_categories("p", "q")),
    Feature("e", "categorical", categories=("p", "q", "r"),
            perturbation=Perturbation.to_categories("r")),
    Feature("y", "binary", lower=0, upper=1, perturbation=Perturbation.to_categories(1)),
    Feature("n", "binary", lower=0, upper=1, perturbation=Perturbation.to_categories(0)),
    Feature("w", "binary", lower=0, upper=1, perturbation=Perturbation.to_categories(0, 1)),
    Feature("r", "continuous", lower=-3.0, upper=5.0,
            perturbation=Perturbation.relative(increase=3.0, decrease=3.0)),
    Feature("s", "continuous", lower=0.0, upper=1.0, immutable=True,
            perturbation=Perturbation.absolute(1.0, 1.0)),
    # labelled binaries: the switch back is to a label, not a code
    Feature("t", "binary", categories=("no", "yes"),
            perturbation=Perturbation.to_categories("yes")),
    Feature("u", "binary", categories=("no", "yes"),
            perturbation=Perturbation.to_categories("no")),
    # a relative reach (3 x 5) beyond the span (6): the big-M must cover the reach
    Feature("v", "continuous", lower=-5.0, upper=1.0,
            perturbation=Perturbation.relative(increase=0.0, decrease=3.0)),
])
FACTUAL = {"a": 1.0, "b": -2.0, "k": 3, "c": "r", "e": "p", "y": 1, "n": 0, "w": 1,
           "r": 4.0, "s": 0.5, "t": "yes", "u": "no", "v": 0.0}
ROWS = pd.DataFrame([{k: v for k, v in FACTUAL.items()}] * 4).assign(
    a=[-4.0, 0.0, 6.0, 2.0], b=[5.0, -3.0, 0.0, 1.0], c=["p", "q", "r", "q"],
    e=["q", "r", "p", "r"], y=[0, 1, 1, 0], n=[1, 0, 1, 0], w=[0, 1, 0, 1],
    r=[-3.0, 5.0, 0.0, 1.0], t=["no", "yes", "yes", "no"], u=["yes", "no", "no", "yes"],
    v=[-5.0, 1.0, 0.0, -2.0])
MODEL = LogisticRegression().fit(SPACE.transform(ROWS), [0, 1, 0, 1])


def least_cost(m, block, row: dict) -> float:
    """The least value of the block's cost with the features fixed at ``row``."""
    for f in m.space:
        if f.is_onehot:
            for level in f.categories:
                m.onehot[f.name, level].fix(1.0 if row[f.name] == level else 0.0)
        else:
            var, offset, scale = code_variable(m, m.space, f.name)
            var.fix((f.to_code(row[f.name]) - offset) / scale)
    m.test_objective = pyo.Objective(expr=block.cost)
    outcome = make_solver("highs").solve(m, SolverSettings(mip_gap=0.0))
    assert outcome.status is cfopt.Status.OPTIMAL
    value = pyo.value(m.test_objective)
    m.del_component(m.test_objective)
    return value


@pytest.fixture
def milp():  # built per test: mutmut links a test to the functions its own run calls
    rule = SetbackCost()
    m = cfopt.CounterfactualModel(MODEL, SPACE, constraints=[rule], objective={"l1": 2.0})
    m.set_factual(pd.DataFrame([FACTUAL]))
    for c in m.component_data_objects(pyo.Constraint, active=True):
        if not c.name.startswith(("setback.", "onehot_sum")):
            c.deactivate()
    m.objective.deactivate()
    return m, m.component("setback"), rule


@pytest.mark.parametrize("changes, by_hand", [
    ({}, 0.0),
    ({"a": 3.0}, 0.5),             # increased by 2: set back by 0.5 (decrease)
    ({"a": 1.25}, 0.25),           # increased by 0.25: capped at the move
    ({"a": -1.0}, 1.5),            # decreased by 2: set back by 1.5 (increase)
    ({"a": 0.5}, 0.5),             # decreased by 0.5: capped
    ({"b": 4.0}, 0.4 * 4.0),       # relative, at the new value 4
    ({"b": -3.0}, 0.2 * 3.0),      # decreased by 1: 0.2 x |-3| = 0.6
    ({"b": -1.5}, 0.5),            # increased by 0.5: 0.4 x 1.5 = 0.6, capped at 0.5
    ({"k": 5}, 0.0),               # no annotation
    ({"c": "q"}, 1.0), ({"c": "p"}, 1.0),     # may switch to the other of p, q
    ({"e": "q"}, 1.0), ({"e": "r"}, 0.0),
    ({"y": 0}, 1.0), ({"n": 1}, 1.0), ({"w": 0}, 1.0),
    ({"b": 0.5}, 0.4 * 0.5),        # relative at |z| = 0.5 < 1
    ({"r": 5.0}, 1.0),              # reach 3 x 5 = 15, capped at the move 1
    ({"t": "no"}, 1.0), ({"u": "yes"}, 1.0),   # labelled: may switch back to the factual's
    ({"v": -5.0}, 0.0),             # decreased to |z| = 5: no increase to undo
    ({"v": 1.0}, 1.0),              # increased by 1: 3 x 1 = 3, capped at the move 1
    ({"a": 3.0, "b": 4.0, "c": "q", "n": 1}, None),
])
def test_the_least_cost_at_a_row_is_its_exact_setback_cost(milp, changes, by_hand):
    m, block, rule = milp
    row = {**FACTUAL, **changes}
    exact = rule.cost(m, pd.Series(FACTUAL), pd.Series(row))
    weights = m.weights
    assert least_cost(m, block, row) == pytest.approx(exact, abs=1e-7)
    if by_hand is not None:
        (name,) = [k for k in changes] if len(changes) == 1 else [None]
        expected = 0.0 if name is None else 2.0 * weights[name] * by_hand
        assert exact == pytest.approx(expected, abs=1e-12)


def test_a_categories_perturbation_on_a_numeric_feature_is_refused():
    space = FeatureSpace([Feature("a", "integer", lower=0, upper=3),
                          Feature("d", "ordinal", categories=("lo", "mid", "hi"),
                                  perturbation=Perturbation.to_categories("lo"))])
    with pytest.raises(ValueError, match="setback cost: feature 'd' is ordinal with a "
                                         "'categories' perturbation; only categorical and "
                                         "binary features may switch categories"):
        SetbackCost().validate(space)
    SetbackCost().validate(SPACE)
    assert SetbackCost().name == "setback" and SetbackCost("other").name == "other"


def test_the_cost_is_the_objective_term_and_no_row_a_violation(milp):
    m, block, rule = milp
    assert rule.objective_term(m, block) is block.cost
    assert rule.violations(m, pd.Series(FACTUAL), pd.Series({**FACTUAL, "a": 3.0})) == []
    assert list(block.NUM) == ["a", "b", "r", "v"]
    assert list(block.SWITCH) == ["c", "e", "y", "n", "w", "t", "u"]
    np.testing.assert_allclose([block.size[n].ub for n in block.NUM], [6.0, 5.0, 5.0, 5.0])


def test_without_an_l1_term_the_cost_is_counted_once():
    m = cfopt.CounterfactualModel(MODEL, SPACE, constraints=[SetbackCost()],
                                  objective={"l0": 1.0})
    m.set_factual(pd.DataFrame([FACTUAL]))
    rule = m.constraints["setback"]
    row = pd.Series({**FACTUAL, "a": 3.0})
    assert rule.cost(m, pd.Series(FACTUAL), row) == pytest.approx(0.5 * m.weights["a"])
