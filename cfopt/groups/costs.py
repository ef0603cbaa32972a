r"""The least total cost with at most ``n_actions`` actions, by column generation.

``objective="cost"``: the most rows ``k = n_actions`` actions can move, and among those
choices the least total cost :math:`\sum_i c_{i, a(i)}` of the rows moved, each row
given the cheapest chosen action that moves it (its cost the explainer's weighted L1,
:meth:`~cfopt.groups.actions.GroupRows.costs`). The master is
:class:`~cfopt.groups.master.CostMaster` (facility location over the actions found);
the pricing MILP (:class:`~cfopt.groups.pricing.ActionModel` with ``costed``) finds the
action of largest :math:`\sum_i \max(0, \pi_i - c_{ia})` or proves it at most the
budget's price :math:`\nu`, which proves the LP over every action; the integer master
over the actions found is then ``OPTIMAL`` when it meets the LP bound (within
:data:`COST_TOLERANCE`), else its gap is reported (no branch-and-price for costs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..results.status import Status
from .actions import Action, GroupRows
from .master import CostMaster
from .pricing import ActionModel
from .result import GroupCounterfactuals

#: relative tolerance of "the integer master meets the LP bound" (HiGHS's own
#: feasibility tolerance on the costs is far below it)
COST_TOLERANCE = 1e-6
#: a column enters when its priced gain passes the budget's price by more than this
GAIN_TOLERANCE = 1e-6


def least_cost(search: Any, rows: GroupRows, model: ActionModel, backend: Any,
               members: list[int], pricing_gap: float) -> GroupCounterfactuals:
    """Column generation for ``objective="cost"`` (module docstring); ``search`` is the
    :class:`~cfopt.groups.solve.GroupSearch` (time, rounds, notes, the answer)."""
    req = search.request
    master = CostMaster(rows.n, req.n_actions, artificial=rows.n * model.most_cost() + 1.0)
    seen: set = set()

    def add(action: Action, prices: np.ndarray | None = None, price: float = 0.0) -> bool:
        covers, costs, _ = rows.covers(action)
        if prices is not None and float(np.maximum(0.0, prices - costs)[covers].sum()) <= \
                price + GAIN_TOLERANCE:
            search.notes.append(f"the pricing's action ({action.describe(rows.space)}) "
                                f"gains less on the real model than in the MILP")
            return False
        if action.key() in seen or not covers.any():
            return False
        seen.add(action.key())
        master.add(covers, np.where(covers, costs, 0.0))
        search.column_actions.append(action)
        return True

    for action in search.first.values():
        add(action)
    bound: float | None = None
    while True:
        lp = master.solve_lp()
        if search.iterations >= req.max_iterations:
            search.notes.append(f"stopped after {search.iterations} pricing rounds "
                                f"(max_iterations)")
            break
        outcome, action = search.price(model, backend, lp.prices, pricing_gap)
        if outcome is None:
            search.notes.append("the time limit ended the column generation")
            break
        proven = 0.0 if outcome.status is Status.INFEASIBLE else \
            outcome.bound if outcome.status.has_solution else None
        if proven is not None:
            new = master.lower_bound(lp, proven)
            bound = new if bound is None else max(bound, new)
        claimed = outcome.objective if outcome.objective is not None else 0.0
        if action is not None and claimed > lp.budget_price + GAIN_TOLERANCE and \
                add(action, lp.prices, lp.budget_price):
            continue
        if proven is None:
            search.notes.append(f"a pricing MILP ended {outcome.status.value} "
                                f"({outcome.termination})")
        break
    if not master.columns:
        return search.finish([], members, value=0.0, bound=None, proven=False, rows=rows,
                             uncovered=list(range(rows.n)))
    left = search.left()
    ip = master.solve_integer(None if left is None else max(left, 1.0))
    actions = [search.column_actions[a] for a in sorted(ip.chosen) if ip.chosen[a] > 0.5]
    combined = float(ip.objective_value)
    proven = bound is not None and ip.optimal and \
        combined <= bound + COST_TOLERANCE * max(1.0, abs(bound))
    if not ip.optimal:
        search.notes.append("the integer master hit the time limit")
    if bound is not None and not proven and ip.optimal:
        search.notes.append(f"the integer master over the {len(master.columns)} actions "
                            f"found is above the LP bound: branch-and-price for costs is "
                            f"not built")
    left_over = master.artificial * len(ip.uncovered)
    cost_bound = None
    if proven:
        cost_bound = combined - left_over
    elif bound is not None and bound > left_over - 1.0 + COST_TOLERANCE * left_over:
        # a choice leaving fewer rows would be worth at most B u - 1 (B is above any
        # total cost): none exists, and the cost of one leaving u is at least L - B u
        cost_bound = max(0.0, bound - left_over)
    return search.finish(actions, members, value=0.0, bound=cost_bound, proven=proven,
                         rows=rows, uncovered=ip.uncovered)
