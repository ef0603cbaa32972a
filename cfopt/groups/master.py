r"""The restricted master of the group problem: a set cover over the actions found so far.

Columns are actions (:mod:`cfopt.groups.actions`) with their *verified* cover sets
:math:`A_{ia} \in \{0, 1\}` over the group's rows :math:`i`. Two masters (Lodi &
Ramírez-Ayerbe 2024, arXiv 2402.09473, §3, the restricted master problem, and its
budgeted variant):

* **fewest actions** ``"count"``: :math:`\min \sum_a z_a + B \sum_i s_i` s.t.
  :math:`\sum_a A_{ia} z_a + s_i \ge 1`, with an artificial :math:`s_i` of cost
  :math:`B = n + 1` per row, so the master is feasible before a row has a column. Its
  LP duals :math:`\pi \ge 0` price a new action by :math:`1 - \sum_i \pi_i A_{ia}`.
  For any :math:`P \ge \max_a \sum_i \pi_i A_{ia}` over *all* actions (the pricing
  MILP's bound), :math:`\pi / \max(1, P)` is dual feasible, so
  :math:`\sum_i \pi_i / \max(1, P)` bounds the LP over all actions from below
  (Farley 1990), and its ceiling bounds the fewest actions.
* **most rows with at most k actions** ``"coverage"``: :math:`\max \sum_i u_i` s.t.
  :math:`u_i \le \sum_a A_{ia} z_a`, :math:`u_i \le 1`, :math:`\sum_a z_a \le k`. With
  duals :math:`\pi_i \ge 0` of the rows and :math:`\nu \ge 0` of the budget, an action
  enters when :math:`\sum_i \pi_i A_{ia} > \nu`; for :math:`P` as above,
  :math:`k \max(\nu, P) + \sum_i \max(0, 1 - \pi_i)` bounds the coverage over all
  actions from above (LP duality).

Both are solved by HiGHS (``highspy``) directly: the LP for duals, then the integer
master over the columns found.

**Partition form** (``partition=True``, the branch-and-price nodes of
:mod:`cfopt.groups.branching`): the count master with :math:`\sum_a A_{ia} z_a + s_i = 1`,
its columns being *assignments* (a subset of an action's verified cover set: any subset
of a cover set is one, so the set-partition and set-cover optima coincide, over all
columns, for the LP and the integers alike). Its duals :math:`\pi` are free in sign;
Farley's bound holds as before (:math:`\pi / \max(1, P)` is dual feasible for any
:math:`P \ge \max_T \pi(T)`).
"""

from __future__ import annotations

from dataclasses import dataclass

import highspy
import numpy as np

INF = highspy.kHighsInf


def _highs() -> highspy.Highs:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    return h


def _run(h: highspy.Highs, what: str, integral: bool, time_limit: float | None = None
         ) -> bool:
    """Solve a master (the integer one to a zero gap within ``time_limit``); whether
    HiGHS proved it optimal. Raises when it ends without a point."""
    if integral:
        if time_limit is not None:
            h.setOptionValue("time_limit", max(float(time_limit), 0.1))
        h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    status = h.getModelStatus()
    limited = integral and status == highspy.HighsModelStatus.kTimeLimit
    if status != highspy.HighsModelStatus.kOptimal and not limited or \
            integral and h.getInfo().primal_solution_status != 2:  # 2: a feasible point
        raise RuntimeError(f"the {what} ended with {status}")
    return status == highspy.HighsModelStatus.kOptimal


@dataclass(frozen=True)
class MasterSolution:
    """A master's solve: ``value`` (fewest actions, or rows covered), the columns used
    (``chosen``, weights for the LP), the rows left uncovered, the LP duals ``prices``
    per row and ``budget_price`` ν (coverage), whether HiGHS proved it optimal, and the
    master's objective value (artificial costs included: a bound for the count master)."""

    value: float
    chosen: dict[int, float]
    uncovered: list[int]
    prices: np.ndarray
    budget_price: float
    optimal: bool
    bound: float | None = None
    objective_value: float | None = None


class CoverMaster:
    """The restricted master over ``n`` rows (module docstring).

    Args:
        n: the rows (positions ``0..n-1``).
        objective: ``"count"`` or ``"coverage"``.
        budget: ``k``, the most actions (``"coverage"`` only).
    """

    def __init__(self, n: int, objective: str = "count", budget: int | None = None,
                 partition: bool = False) -> None:
        if objective not in ("count", "coverage"):
            raise ValueError(f"objective must be 'count' or 'coverage', got {objective!r}")
        if objective == "coverage" and (budget is None or budget < 1):
            raise ValueError("the coverage master needs a budget of at least one action")
        if partition and objective != "count":
            raise ValueError("the partition form is the count master's")
        self.n, self.objective, self.budget = n, objective, budget
        self.partition = partition
        self.columns: list[np.ndarray] = []
        #: rows the master must cover (a row proven out of reach of every action is not)
        self.active = np.ones(n, dtype=bool)

    def drop(self, rows: list[int]) -> None:
        """Rows no action can cover: the master no longer asks for them."""
        self.active[list(rows)] = False

    def add(self, covers: np.ndarray) -> int:
        """Add a column (its rows as a boolean mask); returns its index."""
        covers = np.asarray(covers, dtype=bool)
        if covers.shape != (self.n,):
            raise ValueError(f"a column covers {self.n} rows, got shape {covers.shape}")
        self.columns.append(covers)
        return len(self.columns) - 1

    def _model(self, integral: bool, allowed: np.ndarray | None = None) -> highspy.Highs:
        h = _highs()
        n, cols = self.n, len(self.columns)
        count = self.objective == "count"
        # columns: z_0..z_{cols-1}, then s_i (count) or u_i (coverage)
        cost_z = 1.0 if count else 0.0
        upper = [INF if allowed is None or allowed[a] else 0.0 for a in range(cols)] + [
            1.0 if count or self.active[i] else 0.0 for i in range(n)]
        h.addVars(cols + n, np.zeros(cols + n), np.array(upper))
        costs = [cost_z] * cols + ([float(n + 1)] * n if count else [-1.0] * n)
        h.changeColsCost(cols + n, np.arange(cols + n, dtype=np.int32), np.array(costs))
        for i in range(n):
            idx = [a for a in range(cols) if self.columns[a][i]] + [cols + i]
            val = [1.0] * (len(idx) - 1) + [1.0 if count else -1.0]
            need = 1.0 if count and self.active[i] else 0.0
            h.addRow(need, need if self.partition and self.active[i] else INF, len(idx),
                     np.array(idx, dtype=np.int32),
                     np.array(val))
        if not count:
            h.addRow(-float(self.budget), INF, cols, np.arange(cols, dtype=np.int32),
                     -np.ones(cols))
        if integral and cols:
            h.changeColsIntegrality(cols, np.arange(cols, dtype=np.int32),
                                    np.array([highspy.HighsVarType.kInteger] * cols))
        return h

    def solve_lp(self, allowed: np.ndarray | None = None) -> MasterSolution:
        """The LP relaxation with its duals, over the ``allowed`` columns (a mask; all
        when ``None``)."""
        h = self._model(integral=False, allowed=allowed)
        return self._read(h, optimal=_run(h, "master LP", integral=False), cut=1e-9)

    def solve_integer(self, time_limit: float | None = None) -> MasterSolution:
        """The integer master over the columns found (``optimal``: proven by HiGHS)."""
        h = self._model(integral=True)
        solution = self._read(h, optimal=_run(h, "integer master", True, time_limit))
        bound = h.getInfo().mip_dual_bound
        return MasterSolution(**{**solution.__dict__, "bound": float(
            bound if self.objective == "count" else -bound)})

    def _read(self, h: highspy.Highs, optimal: bool, cut: float = 0.5) -> MasterSolution:
        n, cols = self.n, len(self.columns)
        sol = h.getSolution()
        x = np.asarray(sol.col_value, dtype=float)
        chosen = {a: float(x[a]) for a in range(cols) if x[a] > 1e-9}
        if self.objective == "count":
            uncovered = [i for i in range(n) if x[cols + i] > cut]
            value = float(sum(x[:cols]))
        else:
            uncovered = [i for i in range(n) if self.active[i] and x[cols + i] < 1 - cut]
            value = float(sum(x[cols:]))
        duals = np.asarray(sol.row_dual, dtype=float) if sol.dual_valid else np.zeros(n + 1)
        prices = duals[:n] if self.partition else np.maximum(duals[:n], 0.0)
        prices = np.where(self.active, prices, 0.0)
        budget_price = 0.0 if self.objective == "count" else max(float(duals[n]), 0.0)
        return MasterSolution(value, chosen, uncovered, prices, budget_price, optimal,
                              objective_value=float(h.getInfo().objective_function_value))

    def lower_bound(self, lp: MasterSolution, pricing_bound: float) -> float:
        """Fewest actions: Farley's bound :math:`\\sum_i \\pi_i / \\max(1, P)`
        (module docstring)."""
        return float(lp.prices.sum()) / max(1.0, pricing_bound)

    def upper_bound(self, lp: MasterSolution, pricing_bound: float) -> float:
        """Most rows covered: :math:`k \\max(\\nu, P) + \\sum_i \\max(0, 1 - \\pi_i)`."""
        return float(self.budget * max(lp.budget_price, pricing_bound)
                     + np.maximum(0.0, 1.0 - lp.prices)[self.active].sum())


class CostMaster:
    r"""The least total cost with at most ``k`` actions (the budgeted variant of Lodi &
    Ramírez-Ayerbe 2024, §3, with costs): a facility-location master over the actions
    found so far. Action :math:`a` is opened by :math:`z_a`; row :math:`i` is given to
    an open action that moves it (:math:`x_{ia} \le z_a`) at its cost :math:`c_{ia}`,
    or left over at the price :math:`B`:

    .. math:: \min \sum_{i,a} c_{ia} x_{ia} + B \sum_i s_i \quad\text{s.t.}\quad
              \sum_a x_{ia} + s_i = 1 \ [\pi_i], \quad x_{ia} \le z_a, \quad
              \sum_a z_a \le k \ [\nu].

    With :math:`B` above any total cost, the most rows are moved first and then at the
    least cost. A new action :math:`a` improves the LP when
    :math:`\sum_i \max(0, \pi_i - c_{ia}) > \nu` (its :math:`z_a`'s reduced cost, the
    :math:`x_{ia}` priced out); for any :math:`P` at least that sum over *all* actions,
    :math:`(\pi, \max(\nu, P))` is dual feasible, so
    :math:`\sum_i \pi_i - k \max(\nu, P)` bounds the LP over all actions from below.
    The integer master (binary :math:`z`; :math:`x` stays continuous: each row takes
    its cheapest open action) is exact over the actions found.
    """

    def __init__(self, n: int, budget: int, artificial: float) -> None:
        if budget < 1:
            raise ValueError("the cost master needs a budget of at least one action")
        self.n, self.budget, self.artificial = n, budget, float(artificial)
        self.columns: list[np.ndarray] = []
        self.costs: list[np.ndarray] = []
        self.active = np.ones(n, dtype=bool)

    def add(self, covers: np.ndarray, costs: np.ndarray) -> int:
        """An action: the rows it moves (a mask) and each row's cost."""
        covers = np.asarray(covers, dtype=bool)
        if covers.shape != (self.n,) or np.shape(costs) != (self.n,):
            raise ValueError(f"an action covers {self.n} rows")
        self.columns.append(covers)
        self.costs.append(np.asarray(costs, dtype=float))
        return len(self.columns) - 1

    def _model(self, integral: bool) -> tuple[highspy.Highs, list[tuple[int, int]]]:
        h = _highs()
        n, cols = self.n, len(self.columns)
        pairs = [(i, a) for a in range(cols) for i in np.flatnonzero(self.columns[a])
                 if self.active[i]]
        # variables: z_a, then s_i, then x_ia
        total = cols + n + len(pairs)
        upper = [1.0] * cols + [1.0 if self.active[i] else 0.0 for i in range(n)] + \
            [1.0] * len(pairs)
        h.addVars(total, np.zeros(total), np.array(upper))
        costs = [0.0] * cols + [self.artificial] * n + \
            [float(self.costs[a][i]) for i, a in pairs]
        h.changeColsCost(total, np.arange(total, dtype=np.int32), np.array(costs))
        given: dict[int, list[int]] = {i: [] for i in range(n)}
        for k, (i, _) in enumerate(pairs):
            given[i].append(cols + n + k)
        for i in range(n):
            idx = given[i] + [cols + i]
            need = 1.0 if self.active[i] else 0.0
            h.addRow(need, need, len(idx), np.array(idx, dtype=np.int32),
                     np.ones(len(idx)))
        h.addRow(-float(self.budget), INF, cols, np.arange(cols, dtype=np.int32),
                 -np.ones(cols))
        for k, (_, a) in enumerate(pairs):
            h.addRow(0.0, INF, 2, np.array([a, cols + n + k], dtype=np.int32),
                     np.array([1.0, -1.0]))
        if integral and cols:
            h.changeColsIntegrality(cols, np.arange(cols, dtype=np.int32),
                                    np.array([highspy.HighsVarType.kInteger] * cols))
        return h, pairs

    def solve_lp(self) -> MasterSolution:
        """The LP relaxation with its duals."""
        h, _ = self._model(integral=False)
        return self._read(h, optimal=_run(h, "cost master LP", integral=False), cut=1e-9)

    def solve_integer(self, time_limit: float | None = None) -> MasterSolution:
        """The integer master over the actions found (``optimal``: proven by HiGHS)."""
        h, _ = self._model(integral=True)
        solution = self._read(h, optimal=_run(h, "integer cost master", True, time_limit))
        return MasterSolution(**{**solution.__dict__,
                                 "bound": float(h.getInfo().mip_dual_bound)})

    def _read(self, h: highspy.Highs, optimal: bool, cut: float = 0.5) -> MasterSolution:
        n, cols = self.n, len(self.columns)
        sol = h.getSolution()
        x = np.asarray(sol.col_value, dtype=float)
        chosen = {a: float(x[a]) for a in range(cols) if x[a] > 1e-9}
        uncovered = [i for i in range(n) if self.active[i] and x[cols + i] > cut]
        duals = np.asarray(sol.row_dual, dtype=float) if sol.dual_valid else \
            np.zeros(n + 1)
        prices = np.where(self.active, duals[:n], 0.0)
        return MasterSolution(float(h.getInfo().objective_function_value), chosen,
                              uncovered, prices, max(float(duals[n]), 0.0), optimal,
                              objective_value=float(h.getInfo().objective_function_value))

    def lower_bound(self, lp: MasterSolution, pricing_bound: float) -> float:
        """:math:`\\sum_i \\pi_i - k \\max(\\nu, P)` (class docstring)."""
        return float(lp.prices.sum() - self.budget * max(lp.budget_price, pricing_bound))


def greedy_cover(masks: list[np.ndarray], n: int, budget: int | None = None
                 ) -> tuple[list[int], np.ndarray]:
    """Set-cover greedy: repeatedly the mask with most rows not yet covered (the first
    on ties), until none adds a row or ``budget`` masks are chosen. Returns the chosen
    masks' positions and the rows left uncovered."""
    left = np.ones(n, dtype=bool)
    chosen: list[int] = []
    while left.any() and masks and (budget is None or len(chosen) < budget):
        gains = [int((mask & left).sum()) for mask in masks]
        best = int(np.argmax(gains))
        if gains[best] == 0:
            break
        chosen.append(best)
        left &= ~masks[best]
    return chosen, left
