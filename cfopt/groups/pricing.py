r"""The action MILP: action slots, a copy of the learned model per (slot, row).

One **slot** :math:`s` holds an action (:mod:`cfopt.groups.actions`): per movable
numeric feature a shift :math:`\delta_f \in [\underline d_f c_f, \overline d_f c_f]`
(integer for integral features) with the change binary :math:`c_f`, per movable
categorical feature level binaries :math:`\lambda_{f,l}` with
:math:`\sum_l \lambda_{f,l} = c_f`, and :math:`\sum_f c_f \le` ``max_changes``
(Lodi & Ramírez-Ayerbe 2024, arXiv 2402.09473, §3: the sparsity of one explanation).
:math:`[\underline d_f, \overline d_f]` is every shift that keeps some row within the
feature's bounds, cut to the feature's direction.

Each row :math:`i` has, per slot, a binary :math:`y_i` ("the action covers row
:math:`i`") and a copy of the model (:func:`~cfopt.formulations.predictors.add_predictor`)
on its own inputs :math:`v^i` within the feature box, tied to the row only when
:math:`y_i = 1`:

.. math:: -(x^i_f + \overline d_f - \ell_f)(1 - y_i) \le v^i_f - x^i_f - \delta_f
          \le (u_f - x^i_f - \underline d_f)(1 - y_i),

the copy's one-hot :math:`o^i_{f,l} = r^i_l (1 - c_f) + \lambda_{f,l}` (:math:`r^i` the
row's level: exact for every action), the target with margin μ only when
:math:`y_i = 1` (:func:`~cfopt.formulations.validity.add_switched_validity`), the
user's declared and raw constraints with the row as the factual only when
:math:`y_i = 1` (:meth:`~cfopt.groups.declared.DeclaredConstraints.add_to_copy`), and, with
``max_cost``, the row's weighted L1 cost
:math:`\sum_f w_f |\delta_f| + \sum_{f\ \text{cat.}} w_f (c_f - \lambda_{f,r^i})` at most
the cap when :math:`y_i = 1`. When :math:`y_i = 0` the copy's numeric inputs are free in
the box, so every constraint of the copy can be met (at :math:`v^i = x^i`); when
:math:`y_i = 1` the copy sees exactly :math:`x^i \oplus a`. Either way its input is the row
with at most ``max_changes`` features changed, each within its actionable range, so a
network copy's layer bounds are those of that set
(:meth:`~cfopt.models.network.ReLUNetwork.sparse_bounds` at the row, the first layer
exact), within those over the row's actionable box.

**Pricing** (one slot): maximise :math:`\sum_i \pi_i y_i` for the master's duals
:math:`\pi` (Lodi & Ramírez-Ayerbe's pricing problem: the column of most negative
reduced cost :math:`1 - \sum_i \pi_i y_i`); rows with :math:`\pi_i = 0` add nothing
and their copies are switched off (a row's copy is built at its first positive price:
set-cover duals are sparse, so most rows never need one). For the least total cost
(``costed``, :class:`~cfopt.groups.master.CostMaster`) each priced row pays its cost
when covered, :math:`\kappa_i \ge \text{cost}_i - M (1 - y_i)`, and the pricing maximises
:math:`\sum_i (\pi_i y_i - \kappa_i)`. **The direct MILP** (a number
of ``slots``: the compact model the paper compares with): minimise :math:`\sum_s u_s` with
:math:`y_{s,i} \le u_s`, :math:`\sum_s y_{s,i} \ge 1` and :math:`u_s \ge u_{s+1}`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyomo.environ as pyo

from ..formulations.features import encode_inputs
from ..formulations.predictors import add_predictor
from ..formulations.validity import add_switched_validity
from ..models.network import LayerBounds
from ..space.encoding import spec_bounds, spec_grids, spec_rounding
from .actions import Action, GroupRows


class ActionModel:
    """The action MILP over ``rows`` (module docstring) with ``slots`` action slots.

    Args:
        rows: the group (:class:`~cfopt.groups.actions.GroupRows`).
        milp: the explainer's :class:`~cfopt.CounterfactualModel` (its encoding, layer
            bounds and tree formulation are the copies').
        target_indices: the target's class indices.
        members: positions of the rows the model holds (the others cannot be covered).
        slots: ``None`` for pricing (one slot, prices set by :meth:`set_prices`); a
            number of slots for the direct MILP.
        bounds_of: row position → a network copy's layer bounds for that row (e.g.
            :meth:`cfopt.groups.solve.GroupSearch.row_layer_bounds`), valid for every input
            the copy can see: the row with an action applied when it is covered, and,
            when it is not, the row's numeric values (its inputs are free then) with the
            action's categorical changes; default: the model's global bounds.
    """

    def __init__(self, rows: GroupRows, milp: Any, target_indices: Sequence[int],
                 members: Sequence[int], slots: int | None = None,
                 bounds_of: Callable[[int], LayerBounds] | None = None,
                 costed: bool = False) -> None:
        self.rows, self.milp, self.bounds_of = rows, milp, bounds_of
        self.costed = costed
        self.members = list(members)
        space = rows.space
        self.numeric = [f.name for f in space if not f.is_onehot and not f.immutable]
        self.categorical = [f.name for f in space if f.is_onehot and not f.immutable]
        self.shift_range = {n: rows.shift_range(n) for n in self.numeric}
        self.numeric = [n for n in self.numeric if self.shift_range[n] != (0.0, 0.0)]
        self.model = pyo.ConcreteModel(name="group_actions")
        self.pricing = slots is None
        #: rows whose copy is built (pricing builds a row's copy at its first price)
        self.built: set[int] = set()
        self.slots = [self._add_slot(k, list(target_indices))
                      for k in range(1 if slots is None else slots)]
        if self.pricing:
            self.prices = pyo.Param(self.members, mutable=True, initialize=0.0)
            self.model.prices = self.prices
            slot = self.slots[0]
            slot.used.fix(1)
            self.model.objective = pyo.Objective(expr=pyo.quicksum(
                self.prices[i] * slot.covers[i] for i in self.members), sense=pyo.maximize)
        else:
            m = self.model
            m.cover = pyo.Constraint(self.members, rule=lambda _, i: pyo.quicksum(
                s.covers[i] for s in self.slots) >= 1)
            m.order = pyo.Constraint(range(len(self.slots) - 1), rule=lambda _, k: (
                self.slots[k].used >= self.slots[k + 1].used))
            m.objective = pyo.Objective(expr=pyo.quicksum(s.used for s in self.slots))

    # -------------------------------------------------------------- building
    def _add_slot(self, k: int, target: list[int]) -> pyo.Block:
        rows, space = self.rows, self.rows.space
        slot = pyo.Block()
        self.model.add_component(f"slot_{k}", slot)
        slot.used = pyo.Var(domain=pyo.Binary)
        slot.changed = pyo.Var(self.numeric + self.categorical, domain=pyo.Binary)
        slot.shift = pyo.Var(self.numeric, bounds=lambda _, n: self.shift_range[n],
                             domain=lambda _, n: pyo.Integers if space[n].is_integral
                             else pyo.Reals)
        slot.shift_low = pyo.Constraint(self.numeric, rule=lambda b, n: (
            b.shift[n] >= self.shift_range[n][0] * b.changed[n]))
        slot.shift_high = pyo.Constraint(self.numeric, rule=lambda b, n: (
            b.shift[n] <= self.shift_range[n][1] * b.changed[n]))
        pairs = [(n, lv) for n in self.categorical for lv in space[n].categories]
        slot.level = pyo.Var(pairs, domain=pyo.Binary)
        slot.one_level = pyo.Constraint(self.categorical, rule=lambda b, n: pyo.quicksum(
            b.level[n, lv] for lv in space[n].categories) == b.changed[n])
        slot.cap = pyo.Constraint(expr=pyo.quicksum(slot.changed.values())
                                  <= rows.max_changes * slot.used)
        if rows.max_cost is not None or self.costed:
            slot.size = pyo.Var(self.numeric, bounds=lambda _, n: (
                0.0, max(-self.shift_range[n][0], self.shift_range[n][1])))
            slot.size_up = pyo.Constraint(self.numeric, rule=lambda b, n: b.size[n] >= b.shift[n])
            slot.size_down = pyo.Constraint(self.numeric, rule=lambda b, n:
                                            b.size[n] >= -b.shift[n])
        slot.covers = pyo.Var(self.members, domain=pyo.Binary)
        slot.used_by = pyo.Constraint(self.members, rule=lambda b, i: b.covers[i] <= b.used)
        slot.copies = pyo.Block(self.members)
        self.target = target
        for i in self.members:
            if self.pricing:  # built when the row first has a price (set_prices)
                slot.covers[i].fix(0)
            else:
                self._add_copy(slot, slot.copies[i], i, target)
        return slot

    def _add_copy(self, slot: pyo.Block, copy: pyo.Block, i: int, target: list[int]) -> None:
        rows, space, milp = self.rows, self.rows.space, self.milp
        self.built.add(i)
        on = slot.covers[i]
        row = rows.X.iloc[i]
        copy.v = pyo.Var(self.numeric, bounds=lambda _, n: (space[n].lower, space[n].upper))
        numeric_names = [f.name for f in space if not f.is_onehot]
        copy.x = pyo.Expression(numeric_names, rule=lambda b, n: b.v[n] if n in self.numeric
                                else rows.codes[n][i])
        onehot = [(f.name, lv) for f in space if f.is_onehot for lv in f.categories]
        copy.onehot = pyo.Expression(onehot, rule=lambda b, n, lv: (
            float(row[n] == lv) * (1 - slot.changed[n]) + slot.level[n, lv]
            if n in self.categorical else float(row[n] == lv)))

        def tie(b: pyo.Block, n: str, side: str) -> Any:
            f, x = space[n], rows.codes[n][i]
            lo, hi = self.shift_range[n]
            gap = b.v[n] - x - slot.shift[n]
            if side == "up":
                return gap <= (f.upper - x - lo) * (1 - on)
            return gap >= -(x + hi - f.lower) * (1 - on)

        copy.tie = pyo.Constraint(self.numeric, ["up", "down"], rule=tie)
        specs = milp.input_specs
        pred = add_predictor(copy, milp.adapter, encode_inputs(copy, space, specs),
                             name="predictor", input_bounds=spec_bounds(space, specs),
                             input_grids=spec_grids(space, specs),
                             input_rounding=spec_rounding(space, specs),
                             library_input=milp.library_input,
                             formulation=milp.tree_formulation)
        if milp.global_layer_bounds and self.bounds_of is not None:
            pred.set_layer_bounds(self.bounds_of(i))
        elif milp.global_layer_bounds:
            pred.set_layer_bounds(milp.global_layer_bounds)
        add_switched_validity(copy, pred.outputs, pred.output_bounds(), milp.adapter,
                              rows.margin, target, on)
        if rows.declared is not None:  # the row's own declared problem, when covered
            rows.declared.add_to_copy(copy, rows.X.iloc[[i]], on)
        if rows.max_cost is None and not self.costed:
            return
        w = rows.weights
        cost = pyo.quicksum(w[n] * slot.size[n] for n in self.numeric) + pyo.quicksum(
            w[n] * (slot.changed[n] - slot.level[n, row[n]]) for n in self.categorical)
        most = self.most_cost()
        if rows.max_cost is not None:
            copy.cost_cap = pyo.Constraint(expr=cost <= rows.max_cost + max(
                0.0, most - rows.max_cost) * (1 - on))
        if self.costed:  # the row's cost when covered: κ_i ≥ cost_i − most (1 − y_i)
            copy.paid = pyo.Var(bounds=(0.0, most))
            copy.pays = pyo.Constraint(expr=copy.paid >= cost - most * (1 - on))

    def most_cost(self) -> float:
        """The most any action can cost a row (every feature moved its farthest)."""
        w = self.rows.weights
        return sum(w[n] * max(-lo, hi) for n, (lo, hi) in self.shift_range.items()
                   if n in self.numeric) + sum(w[n] for n in self.categorical)

    # --------------------------------------------------------------- reading
    def set_prices(self, prices: dict[int, float],
                   together: Sequence[tuple[int, int]] = (),
                   apart: Sequence[tuple[int, int]] = ()) -> None:
        """The master's duals: row position → π, and a branch-and-price node's
        Ryan–Foster constraints (:mod:`cfopt.groups.branching`): :math:`y_r = y_s` for
        each pair ``together``, :math:`y_r + y_s \\le 1` for each pair ``apart``.

        Rows tied together form groups; a group whose prices sum to at most 0 adds
        nothing to the objective and its copies are switched off (:math:`y = 0`)."""
        slot = self.slots[0]
        group = {i: i for i in self.members}

        def root(i: int) -> int:
            while group[i] != i:
                i = group[i]
            return i

        for r, s in together:
            group[root(r)] = root(s)
        total: dict[int, float] = {}
        for i in self.members:
            total[root(i)] = total.get(root(i), 0.0) + float(prices.get(i, 0.0))
        on = {i for i in self.members if total[root(i)] > 0}
        for i in self.members:
            self.prices[i] = float(prices.get(i, 0.0))
            if i in on:
                if i not in self.built:
                    self._add_copy(slot, slot.copies[i], i, self.target)
                slot.covers[i].unfix()
                slot.copies[i].activate()
            else:
                slot.covers[i].fix(0)
                slot.copies[i].deactivate()
        if self.model.find_component("branching") is not None:
            self.model.del_component("branching")
        self.model.branching = pyo.ConstraintList()
        for r, s in together:
            if r in on:
                self.model.branching.add(slot.covers[r] == slot.covers[s])
        for r, s in apart:
            if r in on and s in on:
                self.model.branching.add(slot.covers[r] + slot.covers[s] <= 1)
        if self.costed:  # the priced rows' costs are paid: Σ π_i y_i − Σ κ_i
            self.model.del_component("objective")
            self.model.objective = pyo.Objective(expr=pyo.quicksum(
                self.prices[i] * slot.covers[i] for i in self.members) - pyo.quicksum(
                slot.copies[i].paid for i in sorted(on)), sense=pyo.maximize)

    def require_change(self, names: Sequence[str] | None) -> None:
        r"""Price only actions that change at least one feature of ``names``
        (:math:`\sum_{f \in \text{names}} c_f \ge 1`: the others are enumerated,
        :func:`~cfopt.groups.enumeration.partial_grid`); ``None`` lifts it."""
        if self.model.find_component("required_change") is not None:
            self.model.del_component("required_change")
        if names:
            changed = self.slots[0].changed
            self.model.required_change = pyo.Constraint(
                expr=pyo.quicksum(changed[n] for n in names) >= 1)

    def assigned(self) -> np.ndarray:
        """The rows the pricing's point assigns to its action (:math:`y_i = 1`), a mask
        over ``members``' positions."""
        slot = self.slots[0]
        return np.array([pyo.value(slot.covers[i]) > 0.5 for i in self.members], dtype=bool)

    def action(self, k: int = 0) -> Action:
        """The action slot ``k`` holds at the solver's point (integral shifts rounded;
        a feature not switched on is not changed)."""
        slot = self.slots[k]
        space = self.rows.space
        shifts, levels = {}, {}
        for n in self.numeric:
            if pyo.value(slot.changed[n]) < 0.5:
                continue
            d = float(pyo.value(slot.shift[n]))
            shifts[n] = float(round(d)) if space[n].is_integral else d
        for n in self.categorical:
            if pyo.value(slot.changed[n]) < 0.5:
                continue
            values = [pyo.value(slot.level[n, lv]) for lv in space[n].categories]
            levels[n] = space[n].categories[int(np.argmax(values))]
        return Action(shifts, levels)

    def used_slots(self) -> list[int]:
        """The slots the direct MILP's point uses."""
        return [k for k, s in enumerate(self.slots) if pyo.value(s.used) > 0.5]
