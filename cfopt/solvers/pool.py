"""Harvesting the solver's own pool of solutions from one solve.

* **Gurobi**: the solution pool (``PoolSolutions``, ``PoolSearchMode`` 1 — more
  solutions of any quality — or 2 — the ``size`` best, proven when the solve is
  optimal —, ``PoolGap``); each member read through ``SolutionNumber`` / ``Xn``.
* **HiGHS**: every improving incumbent of the branch and bound, collected by highspy's
  ``cbMipImprovingSolution`` callback (the last one is the optimum; the others are
  feasible and strictly worse). HiGHS has no pool search mode: ``mode`` and ``gap``
  do not apply.

Members come back best first as ``(objective, values)`` with ``values`` a map from each
Pyomo variable to its value in that member; the caller decodes and verifies them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pyomo.common.collections import ComponentMap

PoolMember = tuple[float | None, ComponentMap]


#: Gurobi's defaults of the pool parameters (restored after a pool solve: a persistent
#: model keeps its parameters)
GUROBI_POOL_DEFAULTS = {"PoolSolutions": 10, "PoolSearchMode": 0, "PoolGap": 1e100}


def gurobi_pool_options(size: int, mode: int, gap: float | None) -> dict[str, Any]:
    """Gurobi parameters asking for a pool of ``size`` members."""
    opts: dict[str, Any] = {"PoolSolutions": int(size), "PoolSearchMode": int(mode)}
    if gap is not None:
        opts["PoolGap"] = float(gap)
    return opts


def read_gurobi_pool(solver: Any) -> list[PoolMember]:
    """The pool of the last solve of a ``gurobi_persistent`` solver, best first."""
    gm = solver._solver_model
    pairs = list(solver._pyomo_var_to_solver_var_map.items())
    pyomo_vars = [v for v, _ in pairs]
    gurobi_vars = [g for _, g in pairs]
    members: list[PoolMember] = []
    for k in range(int(gm.SolCount)):
        gm.Params.SolutionNumber = k
        values = gm.getAttr("Xn", gurobi_vars)
        members.append((float(gm.PoolObjVal), ComponentMap(zip(pyomo_vars, values))))
    gm.Params.SolutionNumber = 0
    return members


class HighsIncumbents:
    """Collects HiGHS's improving incumbents during one solve (a context manager
    around the solve of a contrib ``highs`` solver already holding the model).

    Entering also turns HiGHS's output off until the solve applies its own options
    (``HighsBackend`` always sets ``output_flag``): a model just loaded by
    ``set_instance`` has HiGHS's default output on, and Pyomo's update before the solve
    sends every mutable coefficient, zeros included, with ``Highs::changeCoeff`` — HiGHS
    then printed one C-level ``|Value| of 0 supplied to Highs::changeCoeff`` warning per
    zero to the process's stdout, outside Pyomo's output capture. (A zero that is not a
    stored nonzero is ignored by HiGHS, which is the right effect.)
    """

    def __init__(self, solver: Any) -> None:
        self._solver = solver
        self._found: list[tuple[float, np.ndarray]] = []

    def _record(self, event: Any) -> None:
        self._found.append((float(event.data_out.objective_function_value),
                            np.array(event.data_out.mip_solution, dtype=float)))

    def __enter__(self) -> HighsIncumbents:
        highs = self._solver._solver_model
        highs.setOptionValue("output_flag", False)  # the solve sets it as asked
        highs.cbMipImprovingSolution.subscribe(self._record)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._solver._solver_model.cbMipImprovingSolution.unsubscribe(self._record)

    def add(self, objective: float, x: np.ndarray) -> None:
        """Record an incumbent found elsewhere (streamed by a child solve)."""
        self._found.append((float(objective), x))

    def members(self, size: int) -> list[PoolMember]:
        """The last ``size`` incumbents (best first), mapped back to Pyomo variables."""
        columns = self._solver._pyomo_var_to_solver_var_map
        variables = [(var, columns[vid]) for vid, (var, *_) in self._solver._vars.items()
                     if vid in columns]
        out: list[PoolMember] = []
        for objective, x in reversed(self._found[-size:]):
            out.append((objective, ComponentMap((v, float(x[j])) for v, j in variables)))
        return out


def load_member(values: ComponentMap) -> None:
    """Put one pool member's values into its Pyomo variables."""
    for var, value in values.items():
        var.set_value(value, skip_validation=True)

