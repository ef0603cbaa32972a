r"""Robustness to adverse input perturbations (Virgolin & Fracaros 2023): the K-scenario master.

**K-robustness master** (:class:`KScenarios`; Def. 5-6). Each scenario is a point the
adversary found: a perturbation :math:`\omega` of the kept features. The master
requires the model to classify :math:`z + \omega \odot (1 - \text{changed})` as the
target too, through one more copy of the learned model per scenario. ``changed`` are
the exact change indicators of :func:`~cfopt.constraints.diversity_cuts.add_exact_change_indicators`
(a feature counts as changed only when it moves by at least ``min_change`` of its
range, so the solver cannot dodge a scenario by declaring a kept feature changed).
A kept numeric feature is at :math:`\hat x`, so the scenario value is the constant
:math:`\hat x + \omega`; a kept categorical switches to the scenario's category:
:math:`\text{onehot} + (\sum_l \hat o_l\,\text{onehot}_l)(e_c - \hat o)`, linear since
the factual one-hot :math:`\hat o` is a parameter.

**Each copy's bounds from its own input box** (:meth:`KScenarios.add_scenario` with
the master's ``box``). A copy's model inputs are the master's, except those of the
scenario's features: a numeric one is :math:`x_f + \omega_f (1 - \text{changed}_f)`,
which is the scenario's value :math:`\hat x_f + \omega_f` when the feature is kept
(the exact indicators give :math:`x_f = \hat x_f`) and the master's :math:`x_f` when
it changed; a categorical one is the scenario's category when kept and the master's
one-hot when changed, and each model input is linear in the one-hot. So every copy
input lies in the master's box on that input widened to the scenario point's input:
the copy's big-M constants are the interval bounds over that box (intersected with
the model's global ones), valid for every point the copy can see, instead of the
global bounds over the whole feature box.

The exact K-adversary whose counterexamples become scenarios, and the loop, are in
:mod:`cfopt.methods` (``adversaries.k_neighbourhood``, ``k_robust``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from ..formulations.features import encode_inputs
from ..formulations.predictors import add_predictor
from ..formulations.validity import add_validity, set_target
from ..space.encoding import encode, spec_bounds, spec_grids, spec_rounding
from .blocks import ConstraintBlock
from .diversity_cuts import (
    MIN_CHANGE,
    add_exact_change_indicators,
    change_steps,
    small_moves,
)

if TYPE_CHECKING:
    from ..formulations.predictors import NetworkCopy
    from ..problem import CounterfactualModel
    from ..space.space import FeatureSpace


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
        self._copies: list[NetworkCopy] = []  # network, its base

    @property
    def scenarios(self) -> list[dict[str, Any]]:
        """The scenarios of the current query: feature → the value a K-perturbation gives
        it while the feature is kept."""
        return [dict(s) for s in self._scenarios]


    @staticmethod
    def _perturbed(space: FeatureSpace) -> list[str]:
        """The numeric features a K-perturbation moves (those with exact indicators)."""
        return [f.name for f in space if not f.is_onehot and f.perturbation is not None]

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        add_exact_change_indicators(m, block, self.min_change, self._perturbed(m.space))

    def update(self, m: CounterfactualModel, block: pyo.Block) -> None:
        self.remove_scenarios(m)

    def remove_scenarios(self, m: CounterfactualModel) -> None:
        """Delete every scenario of the current query (a loop that ends drops its
        cuts)."""
        block = m.component(self.name)
        for k in range(1, len(self._scenarios) + 1):
            block.del_component(f"scenario_{k}")
        self._scenarios.clear()
        self._copies.clear()

    def add_scenario(self, m: CounterfactualModel, scenario: dict[str, Any],
                     box: tuple[np.ndarray, np.ndarray] | None = None) -> pyo.Block:
        """Require the target class also at the current counterfactual with the kept
        features of ``scenario`` (feature → raw value) set to those values.

        ``box``: bounds of the master's model inputs at this query (every point the
        master can take lies in it); the copy's layer bounds are then those over
        :meth:`scenario_box` (module docstring), else the model's global bounds."""
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
        if m.global_layer_bounds and box is not None:
            pred.set_layer_bounds(m.adapter.structure.box_bounds(
                *self.scenario_box(m, scenario, box), within=m.global_layer_bounds))
        elif m.global_layer_bounds:
            pred.set_layer_bounds(m.global_layer_bounds)
        add_validity(sc, pred.outputs, pred.output_bounds(), m.adapter, m.margin)
        set_target(sc, m.adapter, [m.adapter.class_index(t) for t in m.target])
        self._scenarios.append(dict(scenario))
        if m.global_layer_bounds and m.uses_space_encoding:
            self._copies.append((pred, self.scenario_inputs(m, scenario)))
        return sc

    def scenario_inputs(self, m: CounterfactualModel, scenario: dict[str, Any]) -> np.ndarray:
        """The model inputs of ``scenario``'s copy when the counterfactual changes no
        feature: the factual with the scenario's values."""
        factual = m.factual.iloc[0]
        return encode(m.space, m.input_specs,
                      self.apply(factual, factual, scenario).to_frame().T)[0]

    def network_copies(self, m: CounterfactualModel) -> list[NetworkCopy]:
        """The network copies of the current query's scenarios (ReLU networks on the
        space's own encoding), each with its base: the factual with the scenario's
        values. A changed feature's inputs are the counterfactual's own, the others the
        scenario's, so a copy sees its base with at most as many features moved as the
        counterfactual changes, each within its reach."""
        return list(self._copies)

    def scenario_box(self, m: CounterfactualModel, scenario: dict[str, Any],
                     box: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The input box of ``scenario``'s copy: the master's ``box`` with the inputs of
        the scenario's features widened to the factual-with-the-scenario's inputs
        (module docstring)."""
        point = self.scenario_inputs(m, scenario)
        lo, hi = np.array(box[0], dtype=float), np.array(box[1], dtype=float)
        for k, spec in enumerate(m.input_specs):
            if spec.feature in scenario:
                lo[k], hi[k] = min(lo[k], point[k]), max(hi[k], point[k])
        return lo, hi

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
        mutable = [n for n in self._perturbed(m.space) if not m.space[n].immutable]
        problems = [f"{self.name}: {p}" for p in small_moves(
            m.space, change_steps(m.space, mutable, self.min_change), factual, row)]
        if not self._scenarios:
            return problems
        rows = pd.DataFrame([self.apply(factual, row, s) for s in self._scenarios])
        labels = m.classify(rows)
        return problems + [
            f"{self.name}: K-perturbation scenario {k + 1} ({self._scenarios[k]}) is "
            f"classified as {label!r}, not {list(m.target)}"
            for k, label in enumerate(labels) if not m.is_target(label)]
