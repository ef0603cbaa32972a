"""The answers of a batch (:meth:`Explainer.explain_many <cfopt.Explainer.explain_many>`)
as a sequence and as frames: the queries' figures (:meth:`BatchResult.to_frame`), the
counterfactuals indexed like ``X`` (:meth:`BatchResult.counterfactuals`, also DiCE's
"changes only" view) and one row per changed feature (:meth:`BatchResult.changes`). A
batch of diverse sets (``explain_many(..., n=k)``, DiCE's ``total_CFs=k`` over many
queries) has a :class:`~cfopt.CounterfactualSet` per row and a row per member in its
frames, indexed by (row, member)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..results.counterfactual import Counterfactual, CounterfactualSet
from ..results.display import card, tone
from ..results.status import Status

if TYPE_CHECKING:
    from .audit import RecourseAudit

#: DiCE's mark of an unchanged value in its "changes only" view
UNCHANGED = "-"

#: one row's answer: a counterfactual, or a diverse set of them
BatchAnswer = Counterfactual | CounterfactualSet


@dataclass
class BatchResult(Sequence[BatchAnswer]):
    """The answers to a batch of queries, one :class:`~cfopt.Counterfactual` (or, asked
    for ``n``, one :class:`~cfopt.CounterfactualSet`) per row of ``X`` in order (a
    sequence: index it, iterate it, ``len`` it).

    Attributes:
        results: the answers; rows not reached before an interrupt have status
            ``INTERRUPTED`` and no counterfactual.
        interrupted: the batch was stopped by Ctrl-C (``KeyboardInterrupt``).
        backend: ``"serial"``, ``"loky"`` or ``"dask"``.
        workers: parallel workers used (1 serially).
        solver_threads: solver threads per worker.
        total_time: wall seconds of the whole batch.
        index: the index of ``X`` (the rows' labels; ``to_frame`` keeps it).
        resumed: rows whose answers were read back from ``out`` (not solved again).
        out: the file the answers were written to (``None``: none).
    """

    results: list[BatchAnswer]
    interrupted: bool = False
    backend: str = "serial"
    workers: int = 1
    solver_threads: int | None = 1
    total_time: float = 0.0
    index: pd.Index | None = None
    resumed: int = 0
    out: str | None = None

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, i: Any) -> Any:
        """The answer at position ``i`` (an int or a slice, as a list); ``TypeError``
        naming :meth:`by_label` for anything else, e.g. a row's label."""
        if isinstance(i, bool) or not isinstance(i, (int, np.integer, slice)):
            raise TypeError(f"a BatchResult is indexed by position (0 to {len(self) - 1}) or "
                            f"a slice, got {i!r}; for the answer of the row labelled "
                            f"{i!r} in X's index, use results.by_label({i!r})")
        return self.results[i]

    def by_label(self, label: Any) -> BatchAnswer:
        """The answer of the row of ``X`` labelled ``label``; ``KeyError`` naming the
        labels when there is none (or it labels several rows)."""
        index = self.index if self.index is not None else pd.RangeIndex(len(self))
        where = [k for k, v in enumerate(index) if v == label]
        if len(where) != 1:
            shown = list(index[:10])
            raise KeyError(f"{len(where) or 'no'} rows labelled {label!r} in the batch; its "
                           f"labels are {shown}{' ...' if len(index) > 10 else ''}")
        return self.results[where[0]]

    def __iter__(self) -> Iterator[BatchAnswer]:
        return iter(self.results)

    @property
    def finished(self) -> list[BatchAnswer]:
        """The answers of the queries that ran to the end."""
        return [r for r in self.results if r.status is not Status.INTERRUPTED]

    def counts(self) -> dict[str, int]:
        """How many answers have each status (by status value)."""
        out: dict[str, int] = {}
        for r in self.results:
            out[r.status.value] = out.get(r.status.value, 0) + 1
        return out

    @property
    def of_sets(self) -> bool:
        """The answers are diverse sets (``explain_many(..., n=k)``)."""
        return any(isinstance(r, CounterfactualSet) for r in self.results)

    def to_frame(self) -> pd.DataFrame:
        """One row per query, indexed like ``X``: status, verified, objective, bound,
        changed features (of a set: its closest member's, and ``members`` found), times
        (total, the solver's own) and the message."""
        frame = pd.DataFrame([{
            "status": r.status.value, "verified": r.verified, "objective": r.objective,
            "bound": r.bound, "changed": len(r.closest.changes()) if r.found else None,
            "total_s": r.total_time, "solver_s": r.solver_time, "message": r.message}
            for r in self.results], index=self.index)
        if self.of_sets:
            frame.insert(4, "members", [len(r) for r in self.results])
        return frame

    def _rows(self) -> tuple[list[Counterfactual | None], pd.Index]:
        """The counterfactuals of the frames and their index: one per query (``None``
        where none was found) indexed like ``X``; for sets, one per member (``None``,
        member 0, for a set without one) indexed by (row, member)."""
        if not self.of_sets:
            return [r if r.found else None for r in self.results], self.labels
        rows, keys = [], []
        for label, r in zip(self.labels, self.results):
            members = list(r) if r.found else [None]
            rows.extend(members)
            keys.extend((label, k) for k in range(len(members)))
        return rows, pd.MultiIndex.from_tuples(keys, names=[self.labels.name, "member"])

    @property
    def labels(self) -> pd.Index:
        """The rows' labels: ``X``'s index (positions when none was recorded)."""
        return self.index if self.index is not None else pd.RangeIndex(len(self))

    def factuals(self) -> pd.DataFrame:
        """The queries' raw rows (as validated: category labels), indexed like ``X``."""
        if not self.results:
            return pd.DataFrame(index=self.labels)
        frame = pd.concat([r.factual for r in self.results], ignore_index=True)
        frame.index = self.labels
        return frame

    def counterfactuals(self, *, changes_only: bool = False) -> pd.DataFrame:
        """One row per query, indexed like ``X``, in raw units and category labels: the
        verified counterfactual, or missing values where none was found
        (``.dropna(how="all")`` keeps the answered rows); for a batch of sets, one row
        per member, indexed by (row, member). An integer column with a missing row is a
        nullable ``Int64`` column.

        Args:
            changes_only: DiCE's "changes only" view: a value is shown where it differs
                from the factual (as in :meth:`changes`), ``"-"`` (:data:`UNCHANGED`)
                where it does not; a row without a counterfactual stays missing.
        """
        factuals = self.factuals()
        found, index = self._rows()
        rows = [c.counterfactual.iloc[0].to_dict() if c is not None else {} for c in found]
        frame = pd.DataFrame(rows, index=index, columns=factuals.columns)
        for name in frame.columns:
            frame[name] = _as_dtype(frame[name], factuals[name].dtype)
        if not changes_only:
            return frame
        view = frame.astype(object)
        for k, c in enumerate(found):
            if c is not None:
                changed = set(c.changes().index)
                for j, name in enumerate(frame.columns):
                    if name not in changed:
                        view.iat[k, j] = UNCHANGED
        return view

    def changes(self) -> pd.DataFrame:
        """One row per changed feature of every verified counterfactual, in the order of
        ``X``: columns ``row`` (the query's label in ``X``), for sets ``member``,
        ``feature``, ``from`` and ``to`` (raw units, labels)."""
        found, index = self._rows()
        columns = ["row", "member", "feature", "from", "to"] if self.of_sets else \
            ["row", "feature", "from", "to"]
        rows = [dict(zip(columns, (*((key,) if not self.of_sets else key), name,
                                   change["from"], change["to"])))
                for key, c in zip(index, found) if c is not None
                for name, change in c.changes().iterrows()]
        return pd.DataFrame(rows, columns=columns)

    def _repr_html_(self) -> str:
        """A card for notebooks: how many counterfactuals were found and proven (green:
        every query proven, optimal or infeasible or already in its target; amber: some
        found; red: none), the batch's figures, each query's figures and the
        counterfactuals in the "changes only" view (:mod:`cfopt.results.display`)."""
        found = sum(r.found for r in self.results)
        proven = not self.interrupted and all(
            r.optimal or r.status in (Status.INFEASIBLE, Status.ALREADY_TARGET)
            for r in self.results)
        status = f"{found} of {len(self)} found"
        fields = {"queries": len(self), "statuses": ", ".join(
            f"{n} {name}" for name, n in self.counts().items()), "backend": self.backend,
            "workers": self.workers, "seconds": self.total_time}
        if self.resumed:
            fields["resumed"] = self.resumed
        tables = [("queries", self.to_frame().drop(columns="message")),
                  ("counterfactuals (changes only)",
                   self.counterfactuals(changes_only=True).dropna(how="all"))]
        message = "interrupted (Ctrl-C): the rows not reached have status interrupted" \
            if self.interrupted else ""
        return card("BatchResult", status, tone(found > 0, proven), fields, tables, message)

    def audit(self, by: str | pd.Series, **options: Any) -> RecourseAudit:
        """How the cost of recourse and its absence differ between the groups ``by``
        (a column of the rows, or a Series indexed like ``X``):
        :func:`cfopt.batch.audit.recourse_audit` (``reference``, ``confidence``,
        ``n_boot``, ``seed``)."""
        from .audit import recourse_audit

        return recourse_audit(self, by, **options)

    def to_dict(self) -> dict[str, Any]:
        return {"interrupted": self.interrupted, "backend": self.backend,
                "resumed": self.resumed, "out": self.out,
                "workers": self.workers, "solver_threads": self.solver_threads,
                "total_time": self.total_time, "counts": self.counts(),
                "results": [r.to_dict() for r in self.results]}

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **{"indent": 2, **kwargs})

    def __repr__(self) -> str:
        tail = ", interrupted" if self.interrupted else ""
        tail += f", {self.resumed} resumed" if self.resumed else ""
        return (f"BatchResult({len(self.results)} queries, {self.counts()}, "
                f"backend={self.backend!r}, workers={self.workers}{tail})")


def _as_dtype(column: pd.Series, dtype: Any) -> pd.Series:
    """``column`` in the factual column's ``dtype``; with missing rows, integers as
    ``Int64`` and booleans as ``boolean`` (pandas' nullable types), others as they are."""
    if not column.isna().any():
        return column.astype(dtype)
    if pd.api.types.is_bool_dtype(dtype):
        return column.astype("boolean")
    if pd.api.types.is_integer_dtype(dtype):
        return column.astype("Int64")
    return column
