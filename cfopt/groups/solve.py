r"""Group counterfactuals: the fewest actions that move a group, by column generation.

The problem (Lodi & Ramírez-Ayerbe 2024, *One-for-many counterfactual explanations by
column generation*, arXiv 2402.09473): given rows :math:`X` and a target, choose actions
(:mod:`.actions`: a shift per numeric feature, a level per categorical, at most
``max_changes`` features, actionability respected) and give each row one that moves it
to the target — the fewest actions covering every row that any action can cover
(``objective="count"``), or the most rows with at most ``n_actions`` (``"coverage"``).

``method="column_generation"`` (the paper's framework), after a first stage: when the
actions are few, each is checked on every row and the cover over all of them is solved
exactly (:mod:`.enumeration`, no pricing); otherwise

1. each row's own closest counterfactual with at most ``max_changes`` changes
   (:meth:`cfopt.Explainer.explain`) is a first column, asked of the rows in order, but
   not of a row an earlier row's action already moves (it is reachable; the pricing
   finds what else it needs); a row whose query is proven infeasible cannot be covered
   by any action (an action on one row *is* such a counterfactual) and leaves the
   group, proven; when one of these actions moves every row, one action is proven
   (there is one row to move at least); otherwise every action on the features of
   fewest options (categorical ones, narrow integer ranges) is checked on every row and
   enters too (:func:`.enumeration.enumerated_columns`), so the pricing MILP is asked
   only for actions changing one of the other features;
2. the restricted master's LP (:mod:`.master`) gives duals :math:`\pi`; the pricing MILP
   (:mod:`.pricing`) finds the action of largest :math:`\sum_i \pi_i y_i`; its cover set
   is re-computed by the real model (:meth:`.actions.GroupRows.covers`) and enters when
   its reduced cost is negative; when the pricing's *proven* bound :math:`P` leaves no
   such action the LP is solved over all actions (otherwise Farley's bound with
   :math:`P` still bounds it);
3. the integer master over the columns found gives the actions; it is ``OPTIMAL`` when
   it meets the ceiling of the LP bound; for the fewest actions, a gap left is decided
   by branch-and-price (:mod:`.branching`); for the coverage a gap is reported as one.

The explainer's declared blocks and raw Pyomo constraints hold for every row as its
own factual: in the check of every action and in each row's pricing copy
(:mod:`.declared`).

``"greedy"``: the common heuristic — set-cover greedy over the rows' own
counterfactuals as actions (step 1's columns, each verified on every row): repeatedly
the one moving most rows not yet moved; no bound. ``"direct_milp"``: the compact model
with as many action slots as that greedy cover uses (:class:`.pricing.ActionModel`),
solved whole.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InfeasibleError
from ..models.network import LayerBounds
from ..query.restrictions.relu import radius_bounds
from ..query.restrictions.trees import query_input_box
from ..results.status import Status
from ..solvers.backends import make_solver
from ..solvers.base import SolveOutcome, SolverSettings
from .actions import Action, GroupRows
from .branching import BranchAndPrice, Priced
from .costs import least_cost
from .enumeration import enumerated_columns, solve_enumerated
from .master import CoverMaster, MasterSolution, greedy_cover
from .pricing import ActionModel
from .request import GroupRequest, check_group_request
from .result import GroupCounterfactuals

#: a column enters when its verified reduced cost is below -REDUCED_COST_TOLERANCE
REDUCED_COST_TOLERANCE = 1e-6
#: relative gap of the pricing MILPs (their bound is what proves the LP; a 10 % gap did
#: not make German's pricing faster: 42 s against 54 s of 60)
PRICING_GAP = 1e-6


def explain_group(explainer: Any, X: pd.DataFrame, target: Any = None, *,
                  max_changes: int = 2, objective: str = "count",
                  n_actions: int | None = None, max_cost: float | None = None,
                  method: str = "column_generation", time_limit: float | None = None,
                  row_time_limit: float | None = 30.0,
                  max_iterations: int = 500) -> GroupCounterfactuals:
    """See :meth:`cfopt.Explainer.explain_group`."""
    t0 = time.perf_counter()
    request = check_group_request(explainer, X, target, max_changes=max_changes,
                                  objective=objective, n_actions=n_actions,
                                  max_cost=max_cost, method=method, time_limit=time_limit,
                                  row_time_limit=row_time_limit,
                                  max_iterations=max_iterations)
    return GroupSearch(explainer, request, t0).run()


class GroupSearch:
    """One group query (module docstring)."""

    def __init__(self, explainer: Any, request: GroupRequest, t0: float) -> None:
        self.explainer, self.request, self.t0 = explainer, request, t0
        self.reasons: dict[int, str] = dict(request.already_target)
        self.first: dict[int, Action] = {}
        #: rows some action found so far moves (their own counterfactual's, or another's)
        self.reachable: set[int] = set()
        self.pricing_seconds = 0.0
        self.iterations = 0
        self.notes: list[str] = []
        #: the master's columns' actions, in column order
        self.column_actions: list[Action] = []

    # ------------------------------------------------------------------ time
    def left(self) -> float | None:
        limit = self.request.time_limit
        return None if limit is None else limit - (time.perf_counter() - self.t0)

    def settings(self, cap: float | None = None, gap: float = 1e-6
                 ) -> SolverSettings | None:
        """Solver settings for the time left (``None`` when it is up)."""
        left = self.left()
        if cap is not None:
            left = cap if left is None else min(left, cap)
        if left is not None and left <= 0.05:
            return None
        base = self.explainer.settings
        return SolverSettings(time_limit=left, mip_gap=gap, threads=base.threads,
                              seed=base.seed, options=dict(base.options),
                              verbose=base.verbose)

    # ------------------------------------------------------------------- run
    def run(self) -> GroupCounterfactuals:
        req = self.request
        candidates = [i for i in range(len(req.X)) if i not in self.reasons]
        if req.method == "column_generation" and req.objective != "cost" and candidates:
            enumerated = solve_enumerated(self, candidates)
            if enumerated is not None:
                return enumerated
        candidates = self.first_columns(candidates,
                                        skip_moved=req.method == "column_generation")
        members = candidates
        if req.method == "direct_milp":  # it must cover every member: only proven ones
            members = [i for i in candidates if i in self.reachable]
            self.reasons.update({i: "undecided" for i in candidates
                                 if i not in self.reachable})
        if not members:
            return self.finish([], members=[], value=0.0, bound=0.0, proven=True)
        rows = req.rows(members)
        if req.method == "greedy":
            return self.greedy(rows, members)
        model = ActionModel(rows, req.milp, req.target_indices, range(len(members)),
                            slots=self.slot_count(rows) if req.method == "direct_milp" else None,
                            bounds_of=lambda j: self.row_layer_bounds(members[j]),
                            costed=req.objective == "cost")
        backend = make_solver(self.explainer.backend.name)
        if req.method == "direct_milp":
            return self.direct(rows, model, backend, members)
        if req.objective == "cost":
            return least_cost(self, rows, model, backend, members, PRICING_GAP)
        return self.column_generation(rows, model, backend, members)

    def first_columns(self, candidates: list[int], skip_moved: bool = False) -> list[int]:
        """Each row's own counterfactual (step 1); returns the rows left in the group.
        With ``skip_moved``, a row an earlier row's action already moves (checked on the
        real model) is not queried: it is reachable, and the pricing finds the rest."""
        req = self.request
        runner = req.capped.runner
        group = req.rows(candidates)
        moved = np.zeros(len(candidates), dtype=bool)
        kept = []
        for j, i in enumerate(candidates):
            settings = self.settings(req.row_time_limit)
            if settings is None or (skip_moved and moved[j]):
                kept.append(i)
                continue
            t = time.perf_counter()
            options = {"max_changes": req.max_changes, "time_limit": settings.time_limit}
            query = runner.start(req.X.iloc[[i]], list(req.target), options)
            try:
                ce = runner.answer(query, t, diagnose_infeasible=False)
            except InfeasibleError:  # pragma: no cover (diagnosis off: a status instead)
                ce = None
            if ce is None or ce.status is Status.INFEASIBLE:
                self.reasons[i] = "no action (proven)"
                continue
            if req.max_cost is not None and ce.bound is not None and \
                    req.objective_is_l1 and ce.bound > req.max_cost * (1 + 1e-9) + 1e-9:
                self.reasons[i] = "no action (proven)"
                continue
            kept.append(i)
            if ce.counterfactual is not None:
                action = Action.between(req.space, req.X.iloc[i], ce.counterfactual.iloc[0])
                self.first[i] = action
                moved |= group.covers(action)[0]
        self.reachable = {i for j, i in enumerate(candidates) if moved[j]}
        return kept

    def row_layer_bounds(self, i: int) -> LayerBounds:
        """A network copy's layer bounds for row ``i`` (:class:`.pricing.ActionModel`):
        over the row with at most ``max_changes`` features moved within their actionable
        ranges (:func:`~cfopt.query.restrictions.relu.radius_bounds` at the row as
        factual, no radius: the first layer exact, then back-substituted), within those
        over its actionable box, cut to the cost cap's reach when the objective is the
        cost's L1 (:func:`~cfopt.query.restrictions.trees.query_input_box`)."""
        req = self.request
        m = req.capped.milp
        m.set_factual(req.X.iloc[[i]])
        m.set_max_changes(req.max_changes)
        radius = math.inf
        if req.max_cost is not None and req.objective_is_l1:
            radius = req.max_cost * m.objective_terms["l1"]
        box = m.adapter.structure.box_bounds(*query_input_box(m, radius=radius),
                                             within=m.global_layer_bounds)
        return radius_bounds(m, math.inf, within=box)

    def slot_count(self, rows: GroupRows) -> int:
        """Slots of the direct MILP: the actions the greedy cover by the first columns
        uses (every row has its own), or ``n_actions``."""
        if self.request.n_actions is not None:
            return self.request.n_actions
        masks = [rows.covers(a)[0] for a in self.first.values()]
        chosen, left = greedy_cover(masks, rows.n)
        return max(1, len(chosen) + int(left.sum()))

    # ---------------------------------------------------------------- pricing
    def price(self, model: ActionModel, backend: Any, prices: np.ndarray,
              gap: float = 1e-6, together: Sequence[tuple[int, int]] = (),
              apart: Sequence[tuple[int, int]] = ()
              ) -> tuple[SolveOutcome | None, Action | None]:
        """One pricing solve for ``prices`` (and a branch-and-price node's pairs) to
        the relative ``gap``; ``(None, None)`` when time is up."""
        settings = self.settings(gap=gap)
        if settings is None:
            return None, None
        model.set_prices({i: float(p) for i, p in enumerate(prices)}, together, apart)
        t = time.perf_counter()
        outcome = backend.solve(model.model, settings)
        self.pricing_seconds += time.perf_counter() - t
        self.iterations += 1
        action = model.action() if outcome.status.has_solution else None
        return outcome, action

    def column_generation(self, rows: GroupRows, model: ActionModel, backend: Any,
                          members: list[int]) -> GroupCounterfactuals:
        req = self.request
        master = CoverMaster(rows.n, req.objective, req.n_actions)
        seen: set = set()
        for i, action in self.first.items():
            self.add_column(master, rows, action, seen)
        for enumerate_now in (False, True):  # the enumeration only when it may matter
            if enumerate_now:
                enumerated_columns(self, master, rows, model, seen)
            if np.any(master.columns, axis=0).all():
                # one action for every row, or every row covered, needs no pricing: the
                # fewest is at least 1 and the rows covered at most all of them
                ip = master.solve_integer(self.left())
                if ip.optimal and not ip.uncovered and (req.objective == "coverage" or
                                                        len(ip.chosen) == 1):
                    return self.integer_master(master, rows, members, float(
                        1 if req.objective == "count" else rows.n), model, backend)
        bound: float | None = None
        while True:
            lp = master.solve_lp()
            threshold = 1.0 if req.objective == "count" else lp.budget_price
            if self.iterations >= req.max_iterations:
                self.notes.append(f"stopped after {self.iterations} pricing rounds "
                                  f"(max_iterations)")
                bound = None
                break
            outcome, action = self.price(model, backend, lp.prices, PRICING_GAP)
            if outcome is None:
                self.notes.append("the time limit ended the column generation")
                break
            proven = 0.0 if outcome.status is Status.INFEASIBLE else \
                outcome.bound if outcome.status.has_solution else None
            if proven is not None and not (req.objective == "count" and lp.uncovered):
                bound = self.best_bound(bound, self.lp_bound(master, lp, proven))
            claimed = outcome.objective if outcome.objective is not None else 0.0
            if action is not None and claimed > threshold + REDUCED_COST_TOLERANCE and \
                    self.add_column(master, rows, action, seen, lp.prices, threshold):
                continue
            if proven is None:
                self.notes.append(f"a pricing MILP ended {outcome.status.value} "
                                  f"({outcome.termination})")
                break
            if req.objective == "count" and lp.uncovered and \
                    proven <= threshold + REDUCED_COST_TOLERANCE:
                # the LP pays the artificial price n + 1 for these rows and no action
                # prices above 1: no action covers them (module docstring, step 2)
                master.drop(lp.uncovered)
                bound = None  # the bounds so far asked for these rows too
                for j in lp.uncovered:
                    self.reasons[members[j]] = "no action (proven)"
                continue
            break
        return self.integer_master(master, rows, members, bound, model, backend)

    def add_column(self, master: CoverMaster, rows: GroupRows, action: Action, seen: set,
                   prices: np.ndarray | None = None, threshold: float = 0.0) -> bool:
        """Add ``action`` with its verified cover set when it is new and (with
        ``prices``) of negative reduced cost; returns whether it was added."""
        covers = rows.covers(action)[0]
        if prices is not None and float(prices[covers].sum()) <= \
                threshold + REDUCED_COST_TOLERANCE:
            self.notes.append(f"the pricing's action ({action.describe(rows.space)}) moves "
                              f"fewer rows on the real model than in the MILP")
            return False
        if action.key() in seen or not covers.any():
            return False
        seen.add(action.key())
        master.add(covers)
        self.column_actions.append(action)
        return True

    def best_bound(self, old: float | None, new: float) -> float:
        """The tighter of two valid bounds (the higher lower bound on the fewest
        actions, the lower upper bound on the rows covered)."""
        if old is None:
            return new
        return max(old, new) if self.request.objective == "count" else min(old, new)

    def lp_bound(self, master: CoverMaster, lp: MasterSolution, pricing_bound: float
                 ) -> float:
        if self.request.objective == "count":
            return master.lower_bound(lp, pricing_bound)
        return master.upper_bound(lp, pricing_bound)

    def integer_master(self, master: CoverMaster, rows: GroupRows, members: list[int],
                       bound: float | None, model: ActionModel, backend: Any
                       ) -> GroupCounterfactuals:
        req = self.request
        if not master.columns:
            return self.finish([], members, value=0.0, bound=bound, proven=False,
                               rows=rows, uncovered=list(range(rows.n)))
        left = self.left()
        ip = master.solve_integer(None if left is None else max(left, 1.0))
        actions = [self.column_actions[a] for a in sorted(ip.chosen)]
        if req.objective == "count":
            value = float(len(actions))
            limit = None if bound is None else math.ceil(bound - 1e-6)
            proven = limit is not None and not ip.uncovered and value <= limit
        else:
            value = float(rows.n - len(ip.uncovered))
            limit = None if bound is None else math.floor(bound + 1e-6)
            proven = limit is not None and value >= limit
        if not ip.optimal:
            self.notes.append("the integer master hit the time limit")
        if req.objective == "count" and limit is not None and not proven and \
                not ip.uncovered and bound is not None:
            model.require_change(None)  # a node's assignments may be any subsets
            tree = BranchAndPrice(master.active, ActionPricer(self, model, backend, rows),
                                  self.column_actions, master.columns, sorted(ip.chosen),
                                  bound, self.left).run()
            actions, value = tree.actions, float(len(tree.actions))
            limit, proven = tree.bound, tree.proven
            self.notes.append(f"branch-and-price solved {tree.nodes} node(s)"
                              + (f"; {tree.note}" if tree.note else ""))
        if limit is not None and not proven:
            self.notes.append(f"the best cover found uses {value:g} actions where the "
                              f"bound allows {limit}")
        return self.finish(actions, members, value=value, bound=limit, proven=proven,
                           rows=rows, uncovered=ip.uncovered)

    def greedy(self, rows: GroupRows, members: list[int]) -> GroupCounterfactuals:
        """Set-cover greedy over the rows' own counterfactuals (module docstring)."""
        actions = list(self.first.values())
        masks = [rows.covers(a)[0] for a in actions]
        chosen, left = greedy_cover(masks, rows.n, self.request.n_actions)
        value = float(len(chosen)) if self.request.objective == "count" else \
            float(rows.n - left.sum())
        return self.finish([actions[k] for k in chosen], members, value=value, bound=None,
                           proven=False, rows=rows, uncovered=list(np.flatnonzero(left)))

    def direct(self, rows: GroupRows, model: ActionModel, backend: Any, members: list[int]
               ) -> GroupCounterfactuals:
        settings = self.settings()
        if settings is None:
            return self.finish([], members, value=0.0, bound=None, proven=False, rows=rows,
                               uncovered=list(range(rows.n)))
        t = time.perf_counter()
        outcome = backend.solve(model.model, settings)
        self.pricing_seconds += time.perf_counter() - t
        actions = [model.action(k) for k in model.used_slots()] if \
            outcome.status.has_solution else []
        covered = np.zeros(rows.n, dtype=bool)
        for a in actions:
            covered |= rows.covers(a)[0]
        bound = None if outcome.bound is None else math.ceil(outcome.bound - 1e-6)
        value = float(len(actions))
        proven = outcome.status is Status.OPTIMAL and covered.all() and bound is not None \
            and value <= bound and all(i in self.reachable for i in members)
        if outcome.status is not Status.OPTIMAL:
            self.notes.append(f"the direct MILP ended {outcome.status.value} "
                              f"({outcome.termination})")
        return self.finish(actions, members, value=value, bound=bound, proven=proven,
                           rows=rows, uncovered=list(np.flatnonzero(~covered)))

    # ---------------------------------------------------------------- answer
    def finish(self, actions: list[Action], members: list[int], *, value: float,
               bound: float | None, proven: bool, rows: GroupRows | None = None,
               uncovered: list[int] = ()) -> GroupCounterfactuals:
        req = self.request
        n = len(req.X)
        assignment = np.full(n, -1)
        costs = np.full(n, np.nan)
        after = req.X.copy()
        if rows is not None and actions:
            checks = [rows.covers(a) for a in actions]
            for j, i in enumerate(members):
                options = [(c[1][j], k) for k, c in enumerate(checks) if c[0][j]]
                if options:
                    cost, k = min(options)
                    assignment[i], costs[i] = k, cost
                    after.iloc[i] = checks[k][2].iloc[j]
        for j, i in enumerate(members):
            if assignment[i] < 0 and i not in self.reasons:
                self.reasons[i] = "not chosen" if req.objective != "count" and \
                    j in uncovered and i in self.reachable else "undecided"
        if any(r == "undecided" for r in self.reasons.values()) and req.objective != "coverage":
            proven, bound = False, None
        used = sorted({int(k) for k in assignment if k >= 0})
        renumber = {k: new for new, k in enumerate(used)}
        actions = [actions[k] for k in used]
        assignment = np.array([renumber.get(int(k), -1) for k in assignment])
        if req.objective == "count":
            value = float(len(actions))
        elif req.objective == "cost":
            value = float(np.nansum(costs))
        status = self.status(actions, proven, members)
        index = req.X_raw.index
        after.index = index
        return GroupCounterfactuals(
            status=status, objective=req.objective, method=req.method, actions=actions,
            assignment=pd.Series(assignment, index=index, name="action"),
            costs=pd.Series(costs, index=index, name="cost"),
            reasons=pd.Series([self.reasons.get(i, "") for i in range(n)], index=index,
                              name="reason"),
            value=value, bound=bound, X=req.X_raw, counterfactuals=after,
            max_changes=req.max_changes, max_cost=req.max_cost, n_actions=req.n_actions,
            iterations=self.iterations, columns=len(self.column_actions),
            seconds=time.perf_counter() - self.t0, pricing_seconds=self.pricing_seconds,
            message=self.message(status), space=req.space)

    def status(self, actions: list[Action], proven: bool, members: list[int]) -> Status:
        if proven and (actions or members):
            return Status.OPTIMAL
        if actions:
            return Status.FEASIBLE
        if not members:
            proven_none = "no action (proven)" in self.reasons.values()
            return Status.INFEASIBLE if proven_none else Status.OPTIMAL
        return Status.NO_SOLUTION

    def message(self, status: Status) -> str:
        counts: dict[str, int] = {}
        for r in self.reasons.values():
            counts[r] = counts.get(r, 0) + 1
        parts = [f"{count} row(s): {reason}" for reason, count in sorted(counts.items())]
        if status is Status.OPTIMAL:
            parts.insert(0, "proven optimal over every action")
        return "; ".join(parts + self.notes)


class ActionPricer:
    """The pricing side of branch-and-price (:class:`~.branching.Pricer`): the group's
    action MILP, solved within the search's time and rounds."""

    def __init__(self, search: GroupSearch, model: ActionModel, backend: Any,
                 rows: GroupRows) -> None:
        self.search, self.model, self.backend, self.rows = search, model, backend, rows

    def price(self, prices: np.ndarray, together: Sequence[tuple[int, int]],
              apart: Sequence[tuple[int, int]]) -> Priced | None:
        search = self.search
        if search.iterations >= search.request.max_iterations:
            search.notes.append(f"stopped after {search.iterations} pricing rounds "
                                f"(max_iterations)")
            return None
        outcome, action = search.price(self.model, self.backend, prices, PRICING_GAP,
                                       together, apart)
        if outcome is None:
            return None
        bound = 0.0 if outcome.status is Status.INFEASIBLE else \
            outcome.bound if outcome.status.has_solution else None
        assigned = self.model.assigned() if action is not None else \
            np.zeros(self.rows.n, dtype=bool)
        claimed = outcome.objective if outcome.objective is not None else 0.0
        return Priced(action, assigned, claimed, bound)

    def covers(self, action: Action) -> np.ndarray:
        return self.rows.covers(action)[0]

    def key(self, action: Action) -> Hashable:
        return action.key()
