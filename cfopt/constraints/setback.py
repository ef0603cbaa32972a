r"""Robustness to adverse input perturbations (Virgolin & Fracaros 2023), exact in the MILP.

Features carry :class:`~cfopt.Perturbation` annotations (see :mod:`cfopt.space.perturbations`
for the definitions). Three pieces:

**C-robustness** (:class:`SetbackCost`; Def. 3-4, Eq. 6). The objective becomes the
cost of the intervention *plus* the cost of undoing its maximal C-setback,
:math:`\delta(z, x) + \lambda_1 \sum_i w_i s_i` (:math:`\lambda_1` the L1 coefficient,
:math:`w_i` the L1 weights), so the optimum is the counterfactual whose worst setback
is cheapest to undo. For a numeric feature with range :math:`R`, the split
:math:`z - \hat x = u^+ - u^-`, :math:`0 \le u^+ \le R d`, :math:`0 \le u^- \le R(1 - d)`
with the *direction binary* :math:`d` (1: the intervention increases it), the room of
the setback :math:`r^-` = ``decrease`` (absolute) or ``decrease`` · :math:`t` with
:math:`t \ge \pm z` (relative, taken at :math:`z`; :math:`t = |z|` at the optimum),
likewise :math:`r^+`, and the *cap binary* :math:`c`:

.. math:: s \ge r^- - M(1 - d) - Mc,\quad s \ge r^+ - Md - Mc,\quad
          s \ge u^+ + u^- - M(1 - c),\quad s \ge 0

so that, minimised, :math:`s = \min(r^{\mp}(z), |z - \hat x|)` exactly (unchanged
features get :math:`s = 0`). A categorical (or binary) feature whose annotation lets
the new value switch to another category costs one more change :math:`w_i` when it
changes.

The K-robustness master is :mod:`cfopt.constraints.scenarios`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd
import pyomo.environ as pyo

from ..space.feature import Feature, Kind
from ..space.perturbations import setback_cost
from ..space.space import FeatureSpace
from .blocks import ConstraintBlock

if TYPE_CHECKING:
    from ..problem import CounterfactualModel


def _switchable(f: Feature) -> bool:
    return f.perturbation is not None and not f.perturbation.is_numeric


class SetbackCost(ConstraintBlock):
    """The cost of undoing the maximal C-setback, added to the objective (module
    docstring; Virgolin & Fracaros Eq. 6). Features without a perturbation annotation
    add nothing."""

    kind = "setback"

    def __init__(self, name: str | None = "setback") -> None:
        super().__init__(name)

    def validate(self, space: FeatureSpace) -> None:
        for f in space:
            if _switchable(f) and not (f.is_onehot or f.kind is Kind.BINARY):
                raise ValueError(f"setback cost: feature {f.name!r} is {f.kind.value} with a "
                                 f"'categories' perturbation; only categorical and binary "
                                 f"features may switch categories")

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        space, w = m.space, m.weights
        self._coef = m.objective_terms.get("l1", 1.0)
        numeric = [f for f in space if not f.is_onehot and not f.immutable
                   and f.perturbation is not None and f.perturbation.is_numeric]
        span = {f.name: f.upper - f.lower for f in numeric}
        mag = {f.name: max(abs(f.lower), abs(f.upper)) for f in numeric}
        pert = {f.name: f.perturbation for f in numeric}
        room = {n: max(p.increase, p.decrease) * (mag[n] if p.kind == "relative" else 1.0)
                for n, p in pert.items()}
        big = {n: max(span[n], room[n]) + 1.0 for n in span}
        block.NUM = pyo.Set(initialize=list(span), ordered=True)  # pragma: no mutate (the default)
        block.up = pyo.Var(block.NUM, bounds=lambda _, n: (0.0, span[n]))
        block.down = pyo.Var(block.NUM, bounds=lambda _, n: (0.0, span[n]))
        block.increased = pyo.Var(block.NUM, domain=pyo.Binary)
        block.capped = pyo.Var(block.NUM, domain=pyo.Binary)
        block.size = pyo.Var(block.NUM, bounds=lambda _, n: (0.0, mag[n]))
        block.setback = pyo.Var(block.NUM, bounds=lambda _, n: (0.0, span[n]))
        block.split = pyo.Constraint(block.NUM, rule=lambda b, n:
                                     m.x[n] - m.x0[n] == b.up[n] - b.down[n])
        block.up_side = pyo.Constraint(block.NUM, rule=lambda b, n:
                                       b.up[n] <= span[n] * b.increased[n])
        block.down_side = pyo.Constraint(block.NUM, rule=lambda b, n:
                                         b.down[n] <= span[n] * (1 - b.increased[n]))
        block.size_pos = pyo.Constraint(block.NUM, rule=lambda b, n: b.size[n] >= m.x[n])
        block.size_neg = pyo.Constraint(block.NUM, rule=lambda b, n: b.size[n] >= -m.x[n])

        def reach(b: pyo.Block, n: str, side: str) -> Any:
            p = pert[n]
            amount = {"down": p.decrease, "up": p.increase}[side]
            return amount * b.size[n] if p.kind == "relative" else amount

        block.after_increase = pyo.Constraint(block.NUM, rule=lambda b, n: b.setback[n] >= reach(
            b, n, "down") - big[n] * (1 - b.increased[n]) - big[n] * b.capped[n])
        block.after_decrease = pyo.Constraint(block.NUM, rule=lambda b, n: b.setback[n] >= reach(
            b, n, "up") - big[n] * b.increased[n] - big[n] * b.capped[n])
        block.cap = pyo.Constraint(block.NUM, rule=lambda b, n: b.setback[n] >= b.up[n] +
                                   b.down[n] - big[n] * (1 - b.capped[n]))
        switches = {f.name: f for f in space if _switchable(f) and not f.immutable}
        block.SWITCH = pyo.Set(initialize=list(switches),
                               ordered=True)  # pragma: no mutate (insertion order either way)
        block.switch = pyo.Var(block.SWITCH, bounds=(0.0, 1.0))  # pragma: no mutate (ub: slack)
        block.switch_cost = pyo.Constraint(block.SWITCH, rule=lambda b, n: b.switch[n] >=
                                           self._switch_away(m, switches[n]))
        block.cost = pyo.Expression(expr=self._coef * (
            pyo.quicksum(w[n] * block.setback[n] for n in block.NUM)
            + pyo.quicksum(w[n] * block.switch[n] for n in block.SWITCH)))

    @staticmethod
    def _switch_away(m: CounterfactualModel, f: Feature) -> Any:
        """An expression that is 1 when the feature changes and its new value may switch
        to another allowed category, and ≤ 0 otherwise (linear: the factual is a
        parameter)."""
        allowed = tuple(dict.fromkeys(f.perturbation.categories))
        if f.is_onehot:
            moved = m.category_changed[f.name]
            return moved if len(allowed) >= 2 else moved - m.onehot[f.name, allowed[0]]
        moved = m.x0[f.name] + m.x[f.name] - 2 * m.x0[f.name] * m.x[f.name]
        if len(allowed) >= 2:
            return moved
        code = f.to_code(allowed[0]) if f.labelled else float(allowed[0])
        return moved - (m.x[f.name] if code == 1.0 else 1 - m.x[f.name])

    def objective_term(self, m: CounterfactualModel, block: pyo.Block) -> Any:
        return block.cost

    def cost(self, m: CounterfactualModel, factual: pd.Series, row: pd.Series) -> float:
        return self._coef * setback_cost(m.space, m.weights, factual, row)

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        return []
