r"""Recourse audits: how the cost of recourse and its absence differ between groups.

From a batch of answers (:meth:`Explainer.explain_many <cfopt.Explainer.explain_many>`)
and a grouping of its rows (a column such as ``sex`` or ``race``, a feature or not),
:func:`recourse_audit` reports per group the rows that need recourse (those already in
the target need none and are left out, as are queries cut short by an interrupt), the
share with a verified counterfactual, the share *proven* to have none (``infeasible``)
and the share left undecided (no point within the time limit, an error), and the cost
of recourse and the number of features it changes.

A cost is exact only when proven: each answered row's least cost lies in
:math:`[\underline c_i, \bar c_i]`, its proven bound and its counterfactual's cost (equal
within the MIP gap for ``optimal``; a bound of 0 when none is known). The audit
reports the group mean of both ends: the mean least cost of the group lies between
them. Confidence intervals are bootstrap percentile intervals (Efron & Tibshirani 1993,
ch. 13): the group's rows resampled with replacement ``n_boot`` times; for the gap
between a group and the reference group, both resampled independently. The interval of a
mean cost is that of the mean counterfactual cost :math:`\bar c` (an upper end).
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..results.display import card
from ..results.status import Status

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .result import BatchAnswer, BatchResult

#: statuses of rows that need no recourse or were never answered: left out
EXCLUDED = (Status.ALREADY_TARGET, Status.INTERRUPTED)


@dataclass
class RecourseAudit:
    """The audit of a batch by one grouping (:func:`recourse_audit`).

    Attributes:
        by: the grouping's name.
        table: one row per group: ``rows`` (needing recourse), ``recourse``,
            ``no_recourse`` (proven infeasible), ``undecided``, their shares
            ``recourse_share`` and ``no_recourse_share`` (with ``..._low`` / ``..._high``
            bootstrap bounds), ``proven`` (answers proven optimal), ``mean_cost`` (of the
            counterfactuals; ``mean_cost_low`` / ``mean_cost_high``: its interval),
            ``mean_bound`` (of the proven bounds: the mean least cost is between it and
            ``mean_cost``), ``median_cost`` and ``mean_changed``.
        gaps: one row per group but the reference: the differences to the reference
            group of ``mean_cost`` and ``no_recourse_share``, each with its interval.
        reference: the reference group (default: the largest).
        confidence: the intervals' level.
        n_boot: bootstrap resamples.
        excluded: rows left out, by status.
        costs: the counterfactual cost of every answered row, by group (for plots).
    """

    by: str
    table: pd.DataFrame
    gaps: pd.DataFrame
    reference: Hashable
    confidence: float
    n_boot: int
    excluded: dict[str, int]
    costs: dict[Hashable, np.ndarray] = field(repr=False, default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        def records(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
            return {str(k): {c: _plain(frame.at[k, c]) for c in frame.columns}
                    for k in frame.index}

        return {"by": self.by, "reference": _plain(self.reference),
                "confidence": self.confidence, "n_boot": self.n_boot,
                "excluded": self.excluded, "groups": records(self.table),
                "gaps": records(self.gaps)}

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **{"indent": 2, **kwargs})

    def plot(self, *, ax: Axes | None = None) -> Axes:
        """The cost of recourse by group (:func:`cfopt.plots.plot_audit`)."""
        from ..plots import plot_audit

        return plot_audit(self, ax=ax)

    def _repr_html_(self) -> str:
        """A card for notebooks: the groups' table and the gaps."""
        fields = {"by": self.by, "reference": self.reference,
                  "confidence": self.confidence, "bootstrap resamples": self.n_boot,
                  **{f"left out ({k})": v for k, v in self.excluded.items()}}
        return card("RecourseAudit", None, None, fields,
                    [("groups", self.table), (f"gaps to {self.reference}", self.gaps)])

    def __repr__(self) -> str:
        return (f"RecourseAudit(by={self.by!r}, groups={list(self.table.index)}, "
                f"reference={self.reference!r})\n{self.table.to_string()}")


def recourse_audit(batch: BatchResult, by: str | pd.Series, *,
                   reference: Hashable | None = None, confidence: float = 0.95,
                   n_boot: int = 2000, seed: int = 0) -> RecourseAudit:
    """Audit ``batch`` by the groups ``by``: a column of the batch's factuals, or a
    Series holding each row's group, indexed like ``X`` (see the module).

    Raises:
        ValueError: ``by`` is no column of the factuals, or misses rows of the batch, or
            ``reference`` is not one of its groups, or ``confidence`` is not in (0, 1),
            or ``n_boot`` is not a positive integer; before anything is computed.
    """
    groups = _groups(batch, by)
    if not (isinstance(confidence, float) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must be a float in (0, 1), got {confidence!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    rows = pd.DataFrame({"group": groups.to_numpy(),
                         "status": [a.status.value for a in batch],  # pandas: no str Enum
                         "found": [a.found for a in batch],
                         "cost": [a.objective if a.found else np.nan for a in batch],
                         "bound": [_bound(a) for a in batch],
                         "changed": [_changed(a) for a in batch]})
    kept = ~rows["status"].isin([s.value for s in EXCLUDED])
    excluded = rows.loc[~kept, "status"].value_counts().to_dict()
    rows = rows[kept]
    names = list(pd.unique(rows["group"]))
    if reference is None and names:
        reference = rows["group"].value_counts().index[0]
    elif reference is not None and reference not in names:
        raise ValueError(f"reference {reference!r} is not a group of {groups.name!r} among "
                         f"the rows needing recourse; groups: {names}")
    rng = np.random.default_rng(seed)
    alpha = (1.0 - confidence) / 2
    table = pd.DataFrame([_group_row(rows[rows["group"] == g], rng, n_boot, alpha)
                          for g in names], index=pd.Index(names, name=groups.name))
    gaps = pd.DataFrame([_gap_row(rows[rows["group"] == g], rows[rows["group"] == reference],
                                  rng, n_boot, alpha) for g in names if g != reference],
                        index=pd.Index([g for g in names if g != reference],
                                       name=groups.name))
    costs = {g: rows.loc[(rows["group"] == g) & rows["found"], "cost"].to_numpy(float)
             for g in names}
    return RecourseAudit(str(groups.name), table, gaps, reference, confidence, n_boot,
                         {str(k): int(v) for k, v in excluded.items()}, costs)


def _groups(batch: BatchResult, by: str | pd.Series) -> pd.Series:
    """Each row's group, in the batch's order."""
    labels = batch.labels
    if isinstance(by, str):
        factuals = batch.factuals()
        if by not in factuals.columns:
            raise ValueError(f"by={by!r} is not a column of the batch's rows "
                             f"({list(factuals.columns)}); pass a Series of each row's "
                             f"group, indexed like X")
        return factuals[by].rename(by)
    if not isinstance(by, pd.Series):
        raise ValueError(f"by must be a column name or a pandas Series, got "
                         f"{type(by).__name__}")
    missing = [label for label in labels if label not in by.index]
    if missing:
        raise ValueError(f"by (a Series) has no group for the rows {missing[:5]} of the "
                         f"batch; index it like X")
    if by.index.has_duplicates:
        raise ValueError("by (a Series) has a duplicated index; index it like X")
    groups = by.loc[list(labels)]
    if groups.isna().any():
        raise ValueError(f"by has no group (NaN) for the rows "
                         f"{list(groups.index[groups.isna()][:5])}")
    return groups.rename(by.name if by.name is not None else "group")


def _bound(answer: BatchAnswer) -> float:
    """The row's proven lower bound on its least cost (0 when none is known)."""
    if not answer.found:
        return np.nan
    return max(0.0, float(answer.bound)) if answer.bound is not None else 0.0


def _changed(answer: BatchAnswer) -> float:
    """Features changed by the row's (closest) counterfactual."""
    return float(len(answer.closest.changes())) if answer.found else np.nan


def _interval(samples: np.ndarray, alpha: float) -> tuple[float, float]:
    if not len(samples) or np.isnan(samples).all():
        return np.nan, np.nan
    low, high = np.nanquantile(samples, [alpha, 1 - alpha])
    return float(low), float(high)


def _resampled_means(values: np.ndarray, rng: np.random.Generator, n_boot: int
                     ) -> np.ndarray:
    if not len(values):
        return np.full(n_boot, np.nan)
    picks = rng.integers(0, len(values), size=(n_boot, len(values)))
    return values[picks].mean(axis=1)


def _group_row(rows: pd.DataFrame, rng: np.random.Generator, n_boot: int, alpha: float
               ) -> dict[str, Any]:
    found = rows["found"].to_numpy(bool)
    none = (rows["status"] == Status.INFEASIBLE.value).to_numpy(bool)
    costs = rows.loc[found, "cost"].to_numpy(float)
    share_found = _interval(_resampled_means(found.astype(float), rng, n_boot), alpha)
    share_none = _interval(_resampled_means(none.astype(float), rng, n_boot), alpha)
    mean_cost = _interval(_resampled_means(costs, rng, n_boot), alpha)
    return {"rows": len(rows), "recourse": int(found.sum()), "no_recourse": int(none.sum()),
            "undecided": int(len(rows) - found.sum() - none.sum()),
            "recourse_share": found.mean() if len(rows) else np.nan,
            "recourse_share_low": share_found[0], "recourse_share_high": share_found[1],
            "no_recourse_share": none.mean() if len(rows) else np.nan,
            "no_recourse_share_low": share_none[0], "no_recourse_share_high": share_none[1],
            "proven": int((rows.loc[found, "status"] == Status.OPTIMAL.value).sum()),
            "mean_cost": costs.mean() if len(costs) else np.nan,
            "mean_cost_low": mean_cost[0], "mean_cost_high": mean_cost[1],
            "mean_bound": rows.loc[found, "bound"].mean() if len(costs) else np.nan,
            "median_cost": float(np.median(costs)) if len(costs) else np.nan,
            "mean_changed": rows.loc[found, "changed"].mean() if len(costs) else np.nan}


def _gap_row(group: pd.DataFrame, reference: pd.DataFrame, rng: np.random.Generator,
             n_boot: int, alpha: float) -> dict[str, Any]:
    def costs(rows: pd.DataFrame) -> np.ndarray:
        return rows.loc[rows["found"], "cost"].to_numpy(float)

    def none(rows: pd.DataFrame) -> np.ndarray:
        return (rows["status"] == Status.INFEASIBLE.value).to_numpy(float)

    cost_gap = _resampled_means(costs(group), rng, n_boot) - \
        _resampled_means(costs(reference), rng, n_boot)
    none_gap = _resampled_means(none(group), rng, n_boot) - \
        _resampled_means(none(reference), rng, n_boot)
    cost_low, cost_high = _interval(cost_gap, alpha)
    none_low, none_high = _interval(none_gap, alpha)
    return {"mean_cost_gap": _mean(costs(group)) - _mean(costs(reference)),
            "mean_cost_gap_low": cost_low, "mean_cost_gap_high": cost_high,
            "no_recourse_gap": _mean(none(group)) - _mean(none(reference)),
            "no_recourse_gap_low": none_low, "no_recourse_gap_high": none_high}


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else np.nan


def _plain(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        value = value.item()
    if isinstance(value, float) and np.isnan(value):
        return None
    return value
