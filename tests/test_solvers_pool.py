"""The solver's own pool of solutions (:mod:`cfopt.solvers.pool`): Gurobi's pool
parameters and members read from a scripted model, HiGHS's improving incumbents from a
real solve of a tiny MILP (and from a scripted callback), members best first mapped to
their Pyomo variables, and a member loaded back."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyomo.environ as pyo
import pytest
from pyomo.common.collections import ComponentMap

from cfopt.solvers import SolverSettings, make_solver
from cfopt.solvers import pool as sp


def test_gurobi_pool_options():
    assert sp.gurobi_pool_options(5.0, 2.0, None) == {"PoolSolutions": 5, "PoolSearchMode": 2}
    opts = sp.gurobi_pool_options(3, 1, 1)
    assert opts == {"PoolSolutions": 3, "PoolSearchMode": 1, "PoolGap": 1.0}
    assert [type(v) for v in opts.values()] == [int, int, float]
    assert sp.GUROBI_POOL_DEFAULTS == {"PoolSolutions": 10, "PoolSearchMode": 0,
                                       "PoolGap": 1e100}


class GurobiModel:
    """A solved Gurobi model with a pool of two members over two variables."""

    def __init__(self):
        self.SolCount = 2.0
        self.Params = SimpleNamespace(SolutionNumber=0)
        self.numbers = []

    @property
    def PoolObjVal(self):
        return [1, 4][self.Params.SolutionNumber]

    def getAttr(self, name, gvars):
        assert name == "Xn"
        self.numbers.append(self.Params.SolutionNumber)
        k = self.Params.SolutionNumber
        return [{"gx": [1.0, 2.0], "gy": [0.0, 3.0]}[g][k] for g in gvars]


def test_read_gurobi_pool_best_first():
    m = pyo.ConcreteModel()
    m.x, m.y = pyo.Var(), pyo.Var()
    gm = GurobiModel()
    varmap = ComponentMap([(m.x, "gx"), (m.y, "gy")])
    members = sp.read_gurobi_pool(SimpleNamespace(_solver_model=gm,
                                                  _pyomo_var_to_solver_var_map=varmap))
    assert [obj for obj, _ in members] == [1.0, 4.0]
    assert all(type(obj) is float for obj, _ in members)
    assert [(vals[m.x], vals[m.y]) for _, vals in members] == [(1.0, 0.0), (2.0, 3.0)]
    assert gm.numbers == [0, 1] and gm.Params.SolutionNumber == 0  # reset to the best


def knapsack():
    """min -(5a + 4b + 3c) s.t. 2a + 3b + c <= 5 over binaries: -9 at a = b = 1."""
    m = pyo.ConcreteModel()
    m.v = pyo.Var(["a", "b", "c"], domain=pyo.Binary)
    m.cap = pyo.Constraint(expr=2 * m.v["a"] + 3 * m.v["b"] + m.v["c"] <= 5)
    m.obj = pyo.Objective(expr=-(5 * m.v["a"] + 4 * m.v["b"] + 3 * m.v["c"]))
    return m


def test_highs_incumbents_of_a_real_solve():
    m = knapsack()
    backend = make_solver("highs")
    outcome, members = backend.solve_pool(m, SolverSettings(), 5)
    assert outcome.status.has_solution and members
    objectives = [obj for obj, _ in members]
    assert objectives[0] == pytest.approx(-9.0) and objectives == sorted(objectives)
    for obj, values in members:
        assert sorted(v.name for v in values) == ["v[a]", "v[b]", "v[c]"]
        assert obj == pytest.approx(-sum(c * values[m.v[k]] for k, c in
                                         (("a", 5), ("b", 4), ("c", 3))))
    best = members[0][1]
    sp.load_member(best)
    assert [m.v[k].value for k in "abc"] == [1.0, 1.0, 0.0]


class Callback:
    def __init__(self):
        self.subscribed = []

    def subscribe(self, f):
        self.subscribed.append(f)

    def unsubscribe(self, f):
        self.subscribed.remove(f)


def test_highs_incumbents_recorded_by_the_callback_and_mapped_back():
    m = pyo.ConcreteModel()
    m.x, m.y, m.z = pyo.Var(), pyo.Var(), pyo.Var()
    options = []
    highs = SimpleNamespace(setOptionValue=lambda k, v: options.append((k, v)),
                            cbMipImprovingSolution=Callback())
    # columns: y is 0, x is 1; z has no column
    solver = SimpleNamespace(_solver_model=highs,
                             _pyomo_var_to_solver_var_map={id(m.y): 0, id(m.x): 1},
                             _vars={id(m.x): (m.x,), id(m.y): (m.y,), id(m.z): (m.z,)})
    with sp.HighsIncumbents(solver) as found:
        assert options == [("output_flag", False)]
        (record,) = highs.cbMipImprovingSolution.subscribed
        for value, x in ((9, [1, 2]), (7, [3, 4]), (5, [5, 6])):
            record(SimpleNamespace(data_out=SimpleNamespace(
                objective_function_value=value, mip_solution=x)))
    assert highs.cbMipImprovingSolution.subscribed == []
    found.add(4, np.array([7.0, 8.0]))
    members = found.members(2)
    assert [obj for obj, _ in members] == [4.0, 5.0]
    assert all(type(obj) is float for obj, _ in members)
    assert [(vals[m.x], vals[m.y], m.z in vals) for _, vals in members] == \
        [(8.0, 7.0, False), (6.0, 5.0, False)]
    assert [obj for obj, _ in found.members(10)] == [4.0, 5.0, 7.0, 9.0]


def test_load_member_sets_values_outside_the_domain_too():
    m = pyo.ConcreteModel()
    m.b = pyo.Var(domain=pyo.Binary)
    m.x = pyo.Var(bounds=(0, 1))
    sp.load_member(ComponentMap([(m.b, 0.9999999), (m.x, 2.0)]))
    assert (m.b.value, m.x.value) == (0.9999999, 2.0)
