r"""Robustness to adverse input perturbations (Virgolin & Fracaros 2023), exact in the MILP.

Features carry :class:`~cfopt.Perturbation` annotations (see :mod:`cfopt.perturbations`
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

**K-robustness master** (:class:`KScenarios`; Def. 5-6). Each scenario is a point the
adversary found: a perturbation :math:`\omega` of the kept features. The master
requires the model to classify :math:`z + \omega \odot (1 - \text{changed})` as the
target too, through one more copy of the learned model per scenario. ``changed`` are
the exact change indicators of :func:`~cfopt.formulations.diversity.add_exact_change_indicators`
(a feature counts as changed only when it moves by at least ``min_change`` of its
range, so the solver cannot dodge a scenario by declaring a kept feature changed).
A kept numeric feature is at :math:`\hat x`, so the scenario value is the constant
:math:`\hat x + \omega`; a kept categorical switches to the scenario's category:
:math:`\text{onehot} + (\sum_l \hat o_l\,\text{onehot}_l)(e_c - \hat o)`, linear since
the factual one-hot :math:`\hat o` is a parameter.

The exact K-adversary whose counterexamples become scenarios, and the loop, are in
:mod:`cfopt.methods` (``adversaries.k_neighbourhood``, ``k_robust``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd
import pyomo.environ as pyo

from ..bound_tightening import apply_layer_bounds
from ..encoding import spec_bounds, spec_grids, spec_rounding
from ..features import Feature, FeatureSpace, Kind
from ..perturbations import setback_cost
from .blocks import ConstraintBlock
from .diversity import MIN_CHANGE, add_exact_change_indicators
from .features import encode_inputs
from .predictors import add_predictor
from .validity import add_validity, set_target

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
        block.NUM = pyo.Set(initialize=list(span), ordered=True)
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
            amount = p.decrease if side == "down" else p.increase
            return amount * b.size[n] if p.kind == "relative" else amount

        block.after_increase = pyo.Constraint(block.NUM, rule=lambda b, n: b.setback[n] >= reach(
            b, n, "down") - big[n] * (1 - b.increased[n]) - big[n] * b.capped[n])
        block.after_decrease = pyo.Constraint(block.NUM, rule=lambda b, n: b.setback[n] >= reach(
            b, n, "up") - big[n] * b.increased[n] - big[n] * b.capped[n])
        block.cap = pyo.Constraint(block.NUM, rule=lambda b, n: b.setback[n] >= b.up[n] +
                                   b.down[n] - big[n] * (1 - b.capped[n]))
        switches = {f.name: f for f in space if _switchable(f) and not f.immutable}
        block.SWITCH = pyo.Set(initialize=list(switches), ordered=True)
        block.switch = pyo.Var(block.SWITCH, bounds=(0.0, 1.0))
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


class KScenarios(ConstraintBlock):
    """K-robustness master: one model copy per K-perturbation scenario (module
    docstring). Cleared at every new query; :meth:`add_scenario` adds one.

    Args:
        min_change: smallest move of a continuous feature, relative to its range, that
            counts as a change (so the features it does not move are kept).
        name: block name (default ``k_scenarios``).
    """

    kind = "k_scenarios"

    def __init__(self, min_change: float = MIN_CHANGE, name: str | None = "k_scenarios") -> None:
        super().__init__(name)
        if isinstance(min_change, bool) or not isinstance(min_change, (int, float)) or \
                not 1e-5 <= min_change <= 1:
            raise ValueError(f"min_change must be a fraction of the range in [1e-5, 1], got "
                             f"{min_change!r}")
        self.min_change = float(min_change)
        self._scenarios: list[dict[str, Any]] = []

    @property
    def scenarios(self) -> list[dict[str, Any]]:
        """The scenarios of the current query: feature → the value a K-perturbation gives
        it while the feature is kept."""
        return [dict(s) for s in self._scenarios]

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        names = [f.name for f in m.space if not f.is_onehot and f.perturbation is not None]
        add_exact_change_indicators(m, block, self.min_change, names)

    def update(self, m: CounterfactualModel, block: pyo.Block) -> None:
        for k in range(1, len(self._scenarios) + 1):
            block.del_component(f"scenario_{k}")
        self._scenarios.clear()

    def add_scenario(self, m: CounterfactualModel, scenario: dict[str, Any]) -> pyo.Block:
        """Require the target class also at the current counterfactual with the kept
        features of ``scenario`` (feature → raw value) set to those values."""
        space = m.space
        block = m.component(self.name)
        unknown = sorted(set(scenario) - set(space.names))
        if unknown:
            raise ValueError(f"scenario names unknown feature(s) {unknown}")
        shift = {n: space[n].to_code(v) - pyo.value(m.x0[n]) for n, v in scenario.items()
                 if not space[n].is_onehot}
        level = {n: v for n, v in scenario.items() if space[n].is_onehot}
        for n, v in level.items():
            if v not in space[n].categories:
                raise ValueError(f"scenario: {v!r} is not a category of {n!r}")
        sc = pyo.Block()
        block.add_component(f"scenario_{len(self._scenarios) + 1}", sc)

        def moved(n: str) -> Any:
            return block.up[n] + block.down[n] if n in block.MUTABLE else 0

        sc.x = pyo.Expression(m.NUMERIC, rule=lambda _, n: m.x[n] + shift[n] * (1 - moved(n))
                              if n in shift else m.x[n])
        sc.onehot = pyo.Expression(m.ONEHOT, rule=lambda _, n, lv: m.onehot[n, lv] + (
            1 - m.category_changed[n]) * (float(lv == level[n]) - m.onehot0[n, lv])
            if n in level else m.onehot[n, lv])
        specs = m.input_specs
        pred = add_predictor(sc, m.adapter, encode_inputs(sc, space, specs), name="predictor",
                             input_bounds=spec_bounds(space, specs),
                             input_grids=spec_grids(space, specs),
                             input_rounding=spec_rounding(space, specs),
                             library_input=m.library_input,
                             formulation=m.tree_formulation)
        if m.global_layer_bounds:
            apply_layer_bounds(pred, m.global_layer_bounds)
        add_validity(sc, pred.outputs, pred.output_bounds(), m.adapter, m.margin)
        set_target(sc, m.adapter, [m.adapter.class_index(t) for t in m.target])
        self._scenarios.append(dict(scenario))
        return sc

    def apply(self, factual: pd.Series, row: pd.Series, scenario: dict[str, Any]) -> pd.Series:
        """``row`` under ``scenario``: its kept features (equal to the factual's) take the
        scenario's values."""
        out = row.copy()
        for n, v in scenario.items():
            if row[n] == factual[n]:
                out[n] = v
        return out

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        if not self._scenarios:
            return []
        rows = pd.DataFrame([self.apply(factual, row, s) for s in self._scenarios])
        labels = m.classify(rows)
        return [f"{self.name}: K-perturbation scenario {k + 1} ({self._scenarios[k]}) is "
                f"classified as {label!r}, not {list(m.target)}"
                for k, label in enumerate(labels) if not m.is_target(label)]
