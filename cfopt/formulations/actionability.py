r"""Actionability: immutable features, monotone features, and a cap on changes.

* ``m.immutable[f]`` — :math:`x_f = \hat x_f` (numeric) or
  ``category_changed[f] == 0`` (categorical) (CE-OCL eq. 6);
* ``m.increase_only[f]`` / ``m.decrease_only[f]`` — :math:`x_f \ge \hat x_f` /
  :math:`x_f \le \hat x_f`;

(numeric rows divided by the feature's width, as in :mod:`.distances`);
* ``m.max_changes`` — :math:`\sum_f \text{changed}_f \le K` with ``m.max_changes_limit``
  a mutable Param (CE-OCL eq. 5, hard form), on the change indicators of
  :func:`~cfopt.formulations.distances.add_change_indicators`.

:func:`actionability_violations` checks the same rules on a raw row.
"""

from __future__ import annotations

import pandas as pd
import pyomo.environ as pyo

from ..space.space import FeatureSpace
from .distances import add_change_indicators, l0_expression
from .features import width


def add_actionability(m: pyo.Block, space: FeatureSpace) -> None:
    immutable = [f.name for f in space if f.immutable]
    up = [f.name for f in space if f.direction == "increase" and not f.immutable]
    down = [f.name for f in space if f.direction == "decrease" and not f.immutable]

    def fixed(b: pyo.Block, n: str) -> object:
        if space[n].is_onehot:
            return b.category_changed[n] == 0
        return (b.x[n] - b.x0[n]) / width(space, n) == 0

    m.immutable = pyo.Constraint(immutable, rule=fixed)
    m.increase_only = pyo.Constraint(up, rule=lambda b, n: (
        b.x[n] - b.x0[n]) / width(space, n) >= 0)
    m.decrease_only = pyo.Constraint(down, rule=lambda b, n: (
        b.x0[n] - b.x[n]) / width(space, n) >= 0)


def add_max_changes(m: pyo.Block, space: FeatureSpace, limit: int) -> None:
    """The change indicators ``changed[f]`` and ``m.max_changes``: at most ``limit``
    changed features (declared before the objective, which then reuses the
    indicators)."""
    add_change_indicators(m, space)
    m.max_changes_limit = pyo.Param(mutable=True, initialize=limit)
    m.max_changes = pyo.Constraint(expr=l0_expression(m) <= m.max_changes_limit)


def actionability_violations(space: FeatureSpace, before: pd.Series, after: pd.Series,
                             cap: float) -> list[str]:
    """What the raw row ``after`` breaks of the rows above, with respect to the factual
    ``before``: an immutable feature changed, a monotone one moved the other way, more
    than ``cap`` features changed (a category change counts once)."""
    problems = []
    changed = 0
    for f in space:
        moved = before[f.name] != after[f.name]
        changed += int(moved)
        if f.immutable and moved:
            problems.append(f"immutable feature {f.name!r} changed")
        if not f.is_onehot and f.direction != "any" and moved:
            delta = f.to_code(after[f.name]) - f.to_code(before[f.name])
            if (f.direction == "increase") != (delta > 0):
                problems.append(f"{f.direction}-only feature {f.name!r} moved the other way")
    if changed > cap:
        problems.append(f"{changed} features changed, above the cap of {cap:g}")
    return problems
