"""The answer to a group query: the actions, who each one moves, and what is proven."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..results.display import card, tone
from ..results.serialize import json_value
from ..results.status import Status
from .actions import Action


@dataclass
class GroupCounterfactuals:
    """Actions for a group of rows (:meth:`cfopt.Explainer.explain_group`).

    Attributes:
        status: ``OPTIMAL`` — the fewest actions (``objective="count"``), the most rows
            covered with at most ``n_actions`` (``"coverage"``), or the least total cost
            of the most rows ``n_actions`` can move (``"cost"``) is *proven*: ``value``
            equals ``bound``; every action is verified on every row it is assigned to
            with the real model's ``predict`` and the margin. ``FEASIBLE`` — verified
            actions without that proof (``bound`` says how far it may be, ``message``
            why). ``NO_SOLUTION`` — no row could be covered in the time given.
            ``INFEASIBLE`` — no row of the group can be moved by any action (each proven).
        objective: ``"count"``, ``"coverage"`` or ``"cost"``.
        method: ``"column_generation"``, ``"greedy"`` or ``"direct_milp"``.
        actions: the chosen actions, numbered from 0.
        assignment: per row of ``X`` (its index), the action it is given (``-1``: none).
        costs: per row, the weighted L1 cost of its action (NaN without one).
        reasons: per row without an action, why: ``already target``, ``no action
            (proven)``, ``undecided`` or ``not chosen`` (a budget's).
        value: actions used (count), rows covered (coverage) or the total cost of the
            rows moved (cost).
        bound: the proven bound on ``value`` (a lower bound for count and cost, an upper
            bound for coverage; ``None`` when nothing is proven).
        X: the rows of the group, as given.
        counterfactuals: each row with its action applied (rows without one keep theirs).
        max_changes, max_cost, n_actions: the query's settings.
        iterations: pricing rounds; columns: actions generated; seconds: wall time;
            pricing_seconds: time in pricing MILPs.
        message: what was proven and what was not.
    """

    status: Status
    objective: str
    method: str
    actions: list[Action]
    assignment: pd.Series
    costs: pd.Series
    reasons: pd.Series
    value: float
    bound: float | None
    X: pd.DataFrame
    counterfactuals: pd.DataFrame
    max_changes: int
    max_cost: float | None = None
    n_actions: int | None = None
    iterations: int = 0
    columns: int = 0
    seconds: float = 0.0
    pricing_seconds: float = 0.0
    message: str = ""
    space: Any = field(default=None, repr=False)

    @property
    def optimal(self) -> bool:
        return self.status is Status.OPTIMAL

    @property
    def coverage(self) -> float:
        """The share of the group's rows that get an action."""
        return float((self.assignment >= 0).mean()) if len(self.assignment) else 0.0

    @property
    def mean_cost(self) -> float | None:
        """The mean cost over the rows that get an action."""
        covered = self.costs[self.assignment >= 0]
        return float(covered.mean()) if len(covered) else None

    @property
    def gap(self) -> float | None:
        """``|value - bound|`` (0 when proven)."""
        return None if self.bound is None else abs(self.value - self.bound)

    def actions_frame(self) -> pd.DataFrame:
        """One row per action: what it changes, how many rows it moves and their mean
        cost."""
        rows = []
        for k, a in enumerate(self.actions):
            mine = self.assignment == k
            rows.append({"action": k, "changes": a.describe(self.space) if self.space
                         else str(a.to_dict()), "features": len(a.features),
                         "rows": int(mine.sum()),
                         "mean_cost": float(self.costs[mine].mean()) if mine.any() else None})
        return pd.DataFrame(rows, columns=["action", "changes", "features", "rows",
                                           "mean_cost"]).set_index("action")

    def to_frame(self) -> pd.DataFrame:
        """Per row of ``X``: its action (``-1``: none), the cost, and why it has none."""
        return pd.DataFrame({"action": self.assignment, "cost": self.costs,
                             "reason": self.reasons})

    def to_dict(self) -> dict[str, Any]:
        return json_value({
            "status": self.status.value, "objective": self.objective, "method": self.method,
            "value": self.value, "bound": self.bound, "coverage": self.coverage,
            "mean_cost": self.mean_cost, "max_changes": self.max_changes,
            "max_cost": self.max_cost, "n_actions": self.n_actions,
            "actions": [a.to_dict() for a in self.actions],
            "assignment": {str(k): int(v) for k, v in self.assignment.items()},
            "costs": {str(k): (None if np.isnan(v) else float(v))
                      for k, v in self.costs.items()},
            "reasons": {str(k): v for k, v in self.reasons.items() if v},
            "iterations": self.iterations, "columns": self.columns,
            "seconds": self.seconds, "pricing_seconds": self.pricing_seconds,
            "message": self.message})

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def _repr_html_(self) -> str:
        what = {"count": "fewest actions",
                "coverage": f"most rows with ≤ {self.n_actions} actions",
                "cost": f"least total cost with ≤ {self.n_actions} actions"}[self.objective]
        fields = {"objective": what, "actions": len(self.actions),
                  "rows covered": f"{int((self.assignment >= 0).sum())} of {len(self.X)}",
                  "bound": self.bound, "mean cost": self.mean_cost,
                  "max changes": self.max_changes, "seconds": round(self.seconds, 2)}
        return card("Group counterfactuals", self.status.value,
                    tone(bool(self.actions), self.optimal), fields,
                    [("actions", self.actions_frame().reset_index())], self.message)

    def __repr__(self) -> str:
        return (f"GroupCounterfactuals(status={self.status.value}, actions={len(self.actions)}"
                f", covered={int((self.assignment >= 0).sum())}/{len(self.X)}, "
                f"bound={self.bound})")
