r"""Branch-and-price for the fewest actions: closing the gap the integer master leaves.

When the integer master over the columns the root's column generation found uses more
actions than the ceiling of the LP bound, the root LP does not decide the optimum. This
module decides it exactly by branch-and-price (Barnhart, Johnson, Nemhauser, Savelsbergh
& Vance 1998, *Branch-and-price: column generation for solving huge integer programs*,
Oper. Res. 46(3), §4: branching for set partitioning; the integrality step Lodi &
Ramírez-Ayerbe 2024, arXiv 2402.09473, leave to a MILP over the columns found).

**Master**: the partition form of :class:`~cfopt.groups.master.CoverMaster`: columns are
*assignments* :math:`T \subseteq C_a` (rows given to action :math:`a`, inside its
verified cover set :math:`C_a`), every row in exactly one. Any subset of a cover set is
one, so the fewest actions is the same as for the cover (a cover is trimmed to a
partition row by row).

**Branching** (Ryan & Foster 1981): at a node whose LP is fractional there are rows
:math:`r, s` with :math:`0 < \sum_{T \ni r, s} z_T < 1` (for a partition over distinct
columns, a fractional point always has one). One child asks :math:`r, s` *together*
(every column holds both or neither), the other *apart* (no column holds both); both
exclude the LP point, and every integer partition lies in one of them. The pricing MILP
(:class:`~cfopt.groups.pricing.ActionModel`) takes them as :math:`y_r = y_s` and
:math:`y_r + y_s \le 1`; a priced action's column is its assignment :math:`y`,
intersected with its verified cover set and repaired to meet the node's pairs.

**Bounds**: a node's LP over all its columns bounds its integer optimum from below; when
its column generation stops early, Farley's bound (:meth:`CoverMaster.lower_bound`)
does, and never less than its parent's. A node whose bound's ceiling reaches the best
cover found is pruned; nodes are taken lowest bound first. The best cover is improved
by the cover master's integer solve over every action found, and by each integral node
LP. Optimal when no node is left; otherwise the lowest open bound's ceiling is the
bound.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .master import CoverMaster

#: a column enters when its reduced cost is below -TOLERANCE; LP values within it of an
#: integer are that integer
TOLERANCE = 1e-6


@dataclass(frozen=True)
class Priced:
    """A pricing solve at a node: its ``action`` (``None``: no point), the rows it
    assigns (``assigned``, a mask), its objective :math:`\\sum_i \\pi_i y_i` there
    (``claimed``) and the proven bound on that objective over every action (``bound``,
    ``None`` when not proven)."""

    action: Any
    assigned: np.ndarray
    claimed: float
    bound: float | None


class Pricer(Protocol):
    """What branch-and-price needs of the pricing side."""

    def price(self, prices: np.ndarray, together: Sequence[tuple[int, int]],
              apart: Sequence[tuple[int, int]]) -> Priced | None:
        """The best action for ``prices`` under the node's pairs (``None``: stop, time
        or rounds are up)."""

    def covers(self, action: Any) -> np.ndarray:
        """The rows ``action`` moves to the target, checked on the real model."""

    def key(self, action: Any) -> Hashable:
        """The action's identity."""


@dataclass(order=True)
class Node:
    """A node: its lower bound and its Ryan–Foster pairs."""

    bound: float
    order: int
    together: tuple[tuple[int, int], ...] = field(compare=False, default=())
    apart: tuple[tuple[int, int], ...] = field(compare=False, default=())

    def allows(self, column: np.ndarray) -> bool:
        """Whether an assignment meets the node's pairs."""
        return all(column[r] == column[s] for r, s in self.together) and \
            not any(column[r] and column[s] for r, s in self.apart)

    def repair(self, column: np.ndarray) -> np.ndarray:
        """The largest subset of ``column`` that keeps every pair together (apart pairs
        only lose rows by it)."""
        column = column.copy()
        changed = True
        while changed:
            changed = False
            for r, s in self.together:
                if column[r] != column[s]:
                    column[r] = column[s] = False
                    changed = True
        return column


@dataclass(frozen=True)
class BranchResult:
    """Branch-and-price's answer: the best cover's actions, its ``bound`` (the fewest
    actions is at least this), whether it is proven, and the nodes solved."""

    actions: list[Any]
    bound: int
    proven: bool
    nodes: int
    note: str = ""


class BranchAndPrice:
    """Branch-and-price over ``n`` rows (module docstring).

    Args:
        active: the rows to cover (a row no action covers is not asked for).
        pricer: the pricing side (:class:`Pricer`).
        actions: the actions found so far, with ``covers`` their verified cover sets.
        incumbent: positions in ``actions`` of the best cover found (it covers every
            active row).
        root_bound: a valid lower bound on the fewest actions (the root LP's).
        left: seconds left (``None``: no limit).
    """

    def __init__(self, active: np.ndarray, pricer: Pricer, actions: Sequence[Any],
                 covers: Sequence[np.ndarray], incumbent: Sequence[int], root_bound: float,
                 left: Callable[[], float | None]) -> None:
        self.active = np.asarray(active, dtype=bool)
        n = len(self.active)
        self.pricer, self.left, self.root_bound = pricer, left, root_bound
        self.actions: list[Any] = []
        self.keys: dict[Hashable, int] = {}
        self.cover = CoverMaster(n, "count")
        self.partition = CoverMaster(n, "count", partition=True)
        for master in (self.cover, self.partition):
            master.drop(list(np.flatnonzero(~self.active)))
        self.column_action: list[int] = []
        self.seen: set[bytes] = set()
        for action, covers in zip(actions, covers, strict=True):
            self.add_action(action, np.asarray(covers, dtype=bool))
        self.best = [self.keys[pricer.key(actions[a])] for a in incumbent]
        # the incumbent as a partition: each row to the first of its actions covering it
        taken = ~self.active
        for a in self.best:
            self.add_column(a, self.cover.columns[a] & ~taken)
            taken = taken | self.cover.columns[a]
        self.nodes = 0
        self.tried = len(self.actions)  # actions the cover master's integer solve saw

    # -------------------------------------------------------------- columns
    def add_action(self, action: Any, covers: np.ndarray) -> int:
        """An action and its cover set, once; its full cover set is a partition column."""
        key = self.pricer.key(action)
        if key not in self.keys:
            self.keys[key] = len(self.actions)
            self.actions.append(action)
            self.cover.add(covers)
            self.add_column(self.keys[key], covers & self.active)
        return self.keys[key]

    def add_column(self, action: int, column: np.ndarray) -> bool:
        """A partition column (an assignment of ``action``); ``False`` when it is empty
        or already there."""
        key = column.tobytes()
        if not column.any() or key in self.seen:
            return False
        self.seen.add(key)
        self.partition.add(column)
        self.column_action.append(action)
        return True

    # ------------------------------------------------------------------ run
    def run(self) -> BranchResult:
        counter = itertools.count()
        open_nodes = [Node(self.root_bound, next(counter))]
        stuck: list[float] = []  # bounds of nodes whose column generation could not end
        note = ""
        while open_nodes:
            node = heapq.heappop(open_nodes)
            if math.ceil(node.bound - TOLERANCE) >= len(self.best):
                continue
            left = self.left()
            if left is not None and left <= 0:
                heapq.heappush(open_nodes, node)
                note = "the time limit stopped branch-and-price"
                break
            solved = self.solve_node(node)
            if solved is None:
                heapq.heappush(open_nodes, node)
                note = "the time limit or max_iterations stopped branch-and-price"
                break
            bound, chosen, converged = solved
            self.improve(chosen)
            if math.ceil(bound - TOLERANCE) >= len(self.best):
                continue
            pair = self.branching_pair(chosen) if converged else None
            if pair is None:
                stuck.append(bound)
                continue
            heapq.heappush(open_nodes, Node(bound, next(counter), node.together + (pair,),
                                            node.apart))
            heapq.heappush(open_nodes, Node(bound, next(counter), node.together,
                                            node.apart + (pair,)))
        bounds = [n.bound for n in open_nodes] + stuck
        bound = len(self.best) if not bounds else min(
            len(self.best), math.ceil(max(min(bounds), self.root_bound) - TOLERANCE))
        if stuck and not note:
            note = (f"{len(stuck)} node(s) whose pricing could not price out on the real "
                    f"model keep the bound")
        return BranchResult([self.actions[a] for a in self.best], bound,
                            bound >= len(self.best), self.nodes, note)

    def solve_node(self, node: Node) -> tuple[float, dict[int, float], bool] | None:
        """Column generation at ``node``: its bound, its LP point (column → value) and
        whether its LP is proven over every column (``None``: stopped)."""
        self.nodes += 1
        allowed = [node.allows(c) for c in self.partition.columns]
        bound = node.bound
        while True:
            lp = self.partition.solve_lp(np.array(allowed, dtype=bool))
            priced = self.pricer.price(lp.prices, node.together, node.apart)
            if priced is None:
                return None
            if priced.bound is not None:
                bound = max(bound, self.partition.lower_bound(lp, priced.bound))
            if priced.action is not None and priced.claimed > 1 + TOLERANCE:
                before = len(self.partition.columns)
                covers = self.pricer.covers(priced.action)
                action = self.add_action(priced.action, covers)
                self.add_column(action, node.repair(priced.assigned & covers & self.active))
                new = self.partition.columns[before:]
                allowed += [node.allows(c) for c in new]
                if any(node.allows(c) and float(lp.prices[c].sum()) > 1 + TOLERANCE
                       for c in new):
                    continue
            if priced.bound is not None and priced.bound <= 1 + TOLERANCE:
                return max(bound, float(lp.objective_value)), lp.chosen, True
            return bound, lp.chosen, False

    def improve(self, chosen: dict[int, float]) -> None:
        """A better cover: the node's LP point when it is integral and uses no artificial
        row, else the cover master's integer solve over every action found."""
        integral = all(abs(x - round(x)) <= TOLERANCE for x in chosen.values())
        rows = np.zeros(len(self.active), dtype=bool)
        for c, x in chosen.items():
            if x > 0.5:
                rows |= self.partition.columns[c]
        if integral and rows[self.active].all():
            used = sorted({self.column_action[c] for c, x in chosen.items() if x > 0.5})
            if len(used) < len(self.best):
                self.best = used
        if self.tried == len(self.actions):
            return
        self.tried = len(self.actions)
        left = self.left()
        ip = self.cover.solve_integer(None if left is None else max(left, 1.0))
        if not ip.uncovered and len(ip.chosen) < len(self.best):
            self.best = sorted(ip.chosen)

    def branching_pair(self, chosen: dict[int, float]) -> tuple[int, int] | None:
        """Ryan–Foster's pair: rows ``r < s`` whose share of columns holding both is
        fractional, the closest to one half; ``None`` when the LP point is integral."""
        together: dict[tuple[int, int], float] = {}
        for c, x in chosen.items():
            if TOLERANCE < x < 1 - TOLERANCE:
                rows = np.flatnonzero(self.partition.columns[c])
                for pair in itertools.combinations(rows.tolist(), 2):
                    together[pair] = together.get(pair, 0.0) + x
        fractional = [(abs(f - 0.5), pair) for pair, f in together.items()
                      if TOLERANCE < f < 1 - TOLERANCE]
        return min(fractional)[1] if fractional else None
