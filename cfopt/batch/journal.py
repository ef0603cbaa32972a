"""A batch's answers on disk, one JSON line each, so a batch can be resumed.

``explain_many(X, out="answers.jsonl")`` appends every answer to ``out`` the moment it is
known (written, flushed and ``fsync``-ed by the process that called ``explain_many``),
so a crash of that process, even ``SIGKILL``, loses at most the queries in flight.
Running the same call again reads ``out`` back, skips the rows answered there and
solves only the others.

The file is JSON Lines. The first line is the header: what the answers depend on
(the model's digest, the feature space, the solver, its settings, the declared
constraints, the target and the query options). Resuming with any of these changed
would mix answers to different problems, so it raises ``ValueError`` naming what
changed. Every other line is one answer::

    {"label": <X's index label>, "row": <digest of the row's values>,
     "answer": <Counterfactual.to_dict()>}   (a CounterfactualSet's for sets)

Rows are matched by index label (so the index must be unique); a row whose values
differ from the answered one raises ``ValueError``. A row recorded more than once (an
``error`` retried) is read as its last record. Rows whose answer was ``error`` are
solved again when resuming (a crashed solver or a dead worker may not crash twice);
every other status is final. A line cut short by a crash is dropped and the file
truncated to its last complete line before new answers are appended.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..constraints.query_range import QueryRange
from ..results.counterfactual import Counterfactual, CounterfactualSet, answer_from_dict
from ..results.serialize import json_value
from ..results.status import Status

if TYPE_CHECKING:
    from ..explainer import Explainer

FORMAT = "cfopt-batch/1"


def row_key(label: Any) -> str:
    """The JSON text of an index label (numpy scalars as Python ones)."""
    return json.dumps(json_value(label), default=str)


def row_digest(row: pd.DataFrame) -> str:
    """A digest of a one-row frame's raw values (column names included)."""
    values = {str(k): json_value(v) for k, v in row.iloc[0].items()}
    text = json.dumps(values, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def batch_header(explainer: Explainer, target: Any, options: Mapping[str, Any]) -> dict:
    """What the answers of a batch depend on (the journal's first line). Declared
    constraint blocks are recorded by class and name."""
    fingerprint = explainer.milp.adapter.fingerprint()
    space = json.dumps(explainer.space.to_dict(), sort_keys=True, default=str)
    settings = explainer.settings
    arguments = {k: v for k, v in explainer.build_arguments.items()
                 if k not in ("model", "space")}
    return _plain_json({
        "format": FORMAT,
        "model": fingerprint.hex() if fingerprint is not None else None,
        "space": hashlib.blake2b(space.encode(), digest_size=16).hexdigest(),
        "arguments": arguments,
        "solver": explainer.backend.name,
        "settings": {"time_limit": settings.time_limit, "mip_gap": settings.mip_gap,
                     "seed": settings.seed, "options": settings.options},
        "constraints": [f"{type(c).__qualname__}:{name}"  # a query's narrowing: options
                        for name, c in explainer.milp.constraints.items()
                        if not isinstance(c, QueryRange)],
        "target": target,
        "options": dict(options),
    })


def _plain_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (so a header compares equal to its copy)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


class BatchJournal:
    """The answers of one batch in ``path`` (see the module docstring).

    Args:
        path: the JSON Lines file (created with its header if missing).
        header: :func:`batch_header` of this batch.

    Raises:
        ValueError: ``path`` holds answers of a different batch (the differing header
            fields are named) or is not a cfopt batch file.
    """

    def __init__(self, path: str | os.PathLike, header: dict) -> None:
        self.path = Path(path)
        self.records: dict[str, dict] = {}
        if self.path.exists() and self.path.stat().st_size > 0:
            self._read(header)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w", encoding="utf-8") as f:
                f.write(json.dumps(header) + "\n")
                _sync(f)

    def _read(self, header: dict) -> None:
        with open(self.path, "rb") as f:
            data = f.read()
        complete = data[:data.rfind(b"\n") + 1]  # a line cut short by a crash is dropped
        lines = complete.decode("utf-8").splitlines()
        try:
            found = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError:
            found = None
        if not isinstance(found, dict) or found.get("format") != FORMAT:
            raise ValueError(f"out={str(self.path)!r} is not a cfopt batch file (its first "
                             f"line is not a {FORMAT!r} header); pass another path")
        changed = sorted(k for k in set(header) | set(found) if header.get(k) != found.get(k))
        if changed:
            raise ValueError(f"out={str(self.path)!r} holds answers of another batch: "
                             f"{', '.join(changed)} changed since. Resume with the same "
                             f"explainer and options, or pass another path")
        for n, line in enumerate(lines[1:], start=2):
            try:
                record = json.loads(line)
                self.records[record["label"]] = record
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"out={str(self.path)!r}, line {n}: not a batch answer "
                                 f"({exc})") from exc
        if len(complete) < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(len(complete))

    def resumed(self, explainer: Explainer, frame: pd.DataFrame
                ) -> dict[int, Counterfactual | CounterfactualSet]:
        """The final answers of ``frame``'s rows read back, by row position.

        Raises:
            ValueError: ``frame``'s index has duplicate labels, or a row's values differ
                from those of its recorded answer.
        """
        duplicated = frame.index[frame.index.duplicated()].unique()
        if len(duplicated):
            raise ValueError(f"out= identifies rows by their index label, and X's index "
                             f"repeats {list(duplicated[:5])}; give X a unique index")
        out: dict[int, Counterfactual | CounterfactualSet] = {}
        for i, label in enumerate(frame.index):
            record = self.records.get(row_key(label))
            if record is None:
                continue
            row = frame.iloc[[i]]
            if record["row"] != row_digest(row):
                raise ValueError(f"row {label!r} of X differs from the row answered in "
                                 f"out={str(self.path)!r}; pass another path")
            answer = answer_from_dict(record["answer"], space=explainer.space)
            if answer.status is Status.ERROR:
                continue  # solved again
            out[i] = _typed(explainer, row, answer)
        return out

    def append(self, frame: pd.DataFrame,
               answers: Mapping[int, Counterfactual | CounterfactualSet]) -> None:
        """Write the answers of ``frame``'s rows (by position), durably. Interrupted
        queries are not answers and are not written."""
        lines = [json.dumps({"label": row_key(frame.index[i]),
                             "row": row_digest(frame.iloc[[i]]),
                             "answer": answer.to_dict()}, default=str) + "\n"
                 for i, answer in answers.items() if answer.status is not Status.INTERRUPTED]
        if not lines:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("".join(lines))
            _sync(f)


def _typed(explainer: Explainer, row: pd.DataFrame, answer: Counterfactual | CounterfactualSet
           ) -> Counterfactual | CounterfactualSet:
    """``answer`` (and a set's every member) with the factual as validated now (JSON
    keeps its values, not its dtypes; the counterfactual's dtypes are inferred from its
    JSON values)."""
    try:
        factual = explainer.space.validate(row).reset_index(drop=True)
    except ValueError:
        return answer  # a bad row's answer keeps the values as written
    for each in [answer, *(answer if isinstance(answer, CounterfactualSet) else [])]:
        each.factual = factual
    return answer


def _sync(f: Any) -> None:
    f.flush()
    os.fsync(f.fileno())
