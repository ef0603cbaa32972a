"""Pyomo's persistent HiGHS interface as cfopt batches it
(:mod:`cfopt.solvers.highs_persistent`): the map of external functions that pops an absent
key without naming it, and columns added and dropped outside a change of constraints (an
objective on a variable of no constraint, then a new objective)."""

from __future__ import annotations

import pyomo.environ as pyo
import pytest

from cfopt.solvers import SolverSettings, make_solver
from cfopt.solvers.highs_persistent import persistent_highs


def test_the_map_pops_a_present_key_and_gives_the_default_of_an_absent_one():
    solver = persistent_highs()
    m = pyo.ConcreteModel()
    m.a, m.b = pyo.Var(), pyo.Var()
    functions = type(solver._external_functions)()
    functions[m.a] = "f"
    assert functions.pop(m.b, None) is None and functions.pop(m.b, 3) == 3
    assert functions.pop(m.a, "default") == "f" and m.a not in functions
    functions[m.a] = "g"
    assert functions.pop(m.a) == "g" and len(functions) == 0
    with pytest.raises(KeyError):
        functions.pop(m.b)


def test_a_column_of_the_objective_alone_comes_and_goes_with_the_objective():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 4))
    m.z = pyo.Var(bounds=(-3, 5))  # in no constraint
    m.cap = pyo.Constraint(expr=m.x <= 2)
    m.obj = pyo.Objective(expr=m.z - m.x)
    backend = make_solver("highs")
    assert backend.solve(m, SolverSettings()).objective == pytest.approx(-5)
    m.obj.deactivate()
    m.obj2 = pyo.Objective(expr=-m.x)  # z is in nothing now: its column is dropped
    assert backend.solve(m, SolverSettings()).objective == pytest.approx(-2)
    m.obj2.deactivate()
    m.obj.activate()
    assert backend.solve(m, SolverSettings()).objective == pytest.approx(-5)


def test_outside_a_batch_nothing_is_collected():
    """Columns go to HiGHS at once, and unused ones are dropped at once, unless a change
    of constraints is under way (Pyomo may add or drop a column first thing)."""
    solver = persistent_highs()
    assert solver._unused is None and solver._new_columns is None
