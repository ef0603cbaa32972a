"""Command line: ``cfopt demo``, ``cfopt explain`` (one row, a diverse set of one row,
or many rows into a resumable JSON Lines file) and ``cfopt --version``.

``cfopt explain`` reads ONNX models (protobuf), CSV data and FeatureSpace JSON, none
of which can run code. A pickled scikit-learn model is loaded only with the explicit
``--allow-pickle`` flag, because unpickling a file runs whatever code it holds.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import __version__
from .batch.result import BatchResult
from .demo import demo, print_counterfactual, print_set
from .errors import CfoptError
from .explainer import Explainer
from .results.counterfactual import Counterfactual, CounterfactualSet
from .space.space import FeatureSpace

#: file name endings of pickled models (pickle, joblib)
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib", ".sav")
#: the first byte of a pickle of protocol 2 or later (joblib files included)
_PICKLE_MAGIC = b"\x80"


def check_regular_file(path: str, option: str) -> None:
    """Refuse, before anything reads it, a ``path`` given as ``option`` that is not a
    regular file: ``FileNotFoundError`` when nothing is there, ``ValueError`` for a
    directory or a special file (a FIFO or a device would block the read forever)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{option} {path!r} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"{option} {path!r} is a directory; give the file inside it")
    if not os.path.isfile(path):
        raise ValueError(f"{option} {path!r} is not a regular file (a FIFO, socket or "
                         f"device); save its contents to a file and give that")


def load_model_file(path: str, allow_pickle: bool = False) -> Any:
    """The model of ``cfopt explain --model``: an ONNX file (returned as its path, parsed
    by :class:`~cfopt.models.onnx_graph.OnnxAdapter`), or, only with ``allow_pickle``, a
    pickled or joblib-dumped model. Raises ``ValueError`` for a pickle without
    ``allow_pickle`` (unpickling runs arbitrary code)."""
    check_regular_file(path, "--model")
    with open(path, "rb") as fh:
        pickled = path.lower().endswith(PICKLE_SUFFIXES) or fh.read(1) == _PICKLE_MAGIC
    if not pickled:
        return path
    if not allow_pickle:
        raise ValueError(f"--model {path!r} is a pickle: unpickling runs arbitrary code, so "
                         f"cfopt explain loads ONNX models only; export the model to ONNX, or "
                         f"pass --allow-pickle if you trust this file")
    import joblib  # a scikit-learn dependency; reads plain pickles too

    try:
        return joblib.load(path)
    except Exception as exc:  # unpickling raises many types (EOFError, ImportError ...)
        raise ValueError(f"--model {path!r} could not be unpickled: "
                         f"{type(exc).__name__}: {exc}") from exc


#: ``--target``'s word for "any class other than the row's" (unless a class is so named)
OPPOSITE = "opposite"


def parse_target(text: str | None, classes: Sequence[Any], regressor: bool = False) -> Any:
    """``--target`` as :meth:`Explainer.explain` takes it.

    For a classifier: ``None`` or ``"opposite"`` (unless a class has that name) mean any
    class other than the row's (``None``); otherwise the class whose label the text
    spells, in the type of the model's classes (``"1"`` is the class ``1`` of a model
    with classes ``(0, 1)``, ``"true"`` the class ``True``, ``"good"`` the class
    ``"good"``). For a regressor: ``"LOW,HIGH"`` (a side left empty is open), the
    interval the prediction must reach.

    Raises:
        ValueError: a label that is not a class of the model (the message names the
            classes), or a regressor's target that is missing or not ``LOW,HIGH``.
    """
    if regressor:
        return _parse_interval(text)
    if text is None:
        return None
    labels = [str(c) for c in classes]
    if text in labels:
        return classes[labels.index(text)]
    if text == OPPOSITE:
        return None
    for c in classes:
        if isinstance(c, (bool, np.bool_)):
            if text.strip().lower() == str(bool(c)).lower():
                return c
        elif isinstance(c, (int, float, np.number)):
            try:
                if float(text) == c:
                    return c
            except ValueError:
                pass
        elif text.strip() == str(c).strip():
            return c
    raise ValueError(f"--target {text!r} is not a class of the model; its classes are "
                     f"{list(classes)} (or {OPPOSITE!r}: any class other than the row's)")


def _parse_interval(text: str | None) -> tuple[float | None, float | None]:
    usage = ("a regressor's --target is the interval LOW,HIGH its prediction must reach, a "
             "side left empty being open (e.g. --target=250, for at least 250)")
    if text is None:
        raise ValueError(f"--target is required: {usage}")
    sides = text.split(",")
    if len(sides) != 2:
        raise ValueError(f"--target {text!r}: {usage}")
    try:
        low, high = (float(v) if v.strip() else None for v in sides)
    except ValueError:
        raise ValueError(f"--target {text!r}: {usage}") from None
    return low, high


def _model_columns(fitted: Any) -> list[str] | None:
    """The raw column names a model was fitted on, when it knows them (a scikit-learn
    ``Pipeline`` fitted on a DataFrame); ``None`` for an ONNX file or a model of encoded
    inputs."""
    if isinstance(fitted, str) or type(fitted).__name__ != "Pipeline":
        return None
    names = getattr(fitted, "feature_names_in_", None)
    return None if names is None else [str(n) for n in names]


def match_columns(X: pd.DataFrame, names: Sequence[str], expected_by: str, data: str,
                  target_col: str) -> pd.DataFrame:
    """The rows with their columns matched by name to ``names`` (in that order).

    Raises:
        ValueError: naming the missing and the unexpected columns (a wrong
            ``--target-col`` drops a feature and keeps the label).
    """
    missing = [n for n in names if n not in X.columns]
    unexpected = [str(c) for c in X.columns if c not in set(names)]
    if missing or unexpected:
        found = "; ".join(f"{what} column(s) {cols}" for what, cols in
                          (("missing", missing), ("unexpected", unexpected)) if cols)
        hint = (f"; --target-col {target_col!r} is a feature: name the label column"
                if target_col in names else "")
        raise ValueError(f"the columns of {data!r} (without --target-col {target_col!r}) "
                         f"do not match {expected_by}: {found}{hint}")
    return X[list(names)]


def _check_label_column(frame: pd.DataFrame, target_col: str, classes: Sequence[Any]) -> None:
    """Without names to match (an inferred space, an ONNX model), a wrong --target-col
    that keeps the model's input width would shift every later column silently; a label
    column holds at most as many values as the model has classes."""
    values = pd.unique(frame[target_col].dropna())
    if len(values) > len(classes):
        shown = ", ".join(repr(v.item() if isinstance(v, np.generic) else v)
                          for v in values[:5])
        raise ValueError(f"--target-col {target_col!r} holds {len(values)} distinct values "
                         f"({shown}, ...), more than the model's {len(classes)} classes "
                         f"{list(classes)}: it is not the label column. Name the label "
                         f"column, or pass --space so that the columns are matched by name")


@dataclass
class FileQuery:
    """What ``cfopt explain`` read: the explainer, the rows (columns matched to its
    space), the target as :meth:`Explainer.explain` takes it, and the CSV's name."""

    explainer: Explainer
    X: pd.DataFrame
    goal: Any
    data: str


def load_file_query(model: str, data: str, target_col: str, *, space_file: str | None,
                    scaling: str, solver: str, time_limit: float | None,
                    immutable: list[str], increase_only: list[str],
                    decrease_only: list[str], allow_pickle: bool = False,
                    target: str | None = None) -> FileQuery:
    """Read the model file (:func:`load_model_file`), the CSV file ``data`` and the
    space, and build the explainer.

    The CSV's columns (less ``target_col``) are matched by name to the features of
    ``space_file`` or, for a model that knows its columns (a ``Pipeline``), to those;
    without either the space is inferred from the CSV in its column order.
    """
    check_regular_file(data, "--data")
    if space_file is not None:
        check_regular_file(space_file, "--space")
    fitted = load_model_file(model, allow_pickle)
    try:
        frame = pd.read_csv(data)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{data!r} is not a readable CSV file: {exc}") from exc
    if target_col not in frame.columns:
        raise ValueError(f"--target-col {target_col!r} is not a column of {data!r}; columns: "
                         f"{list(frame.columns)}")
    X = frame.drop(columns=[target_col])
    space = FeatureSpace.from_json(space_file) if space_file else None
    named = _model_columns(fitted)
    if space is not None:
        X = match_columns(X, space.names, f"the features of --space {space_file!r}", data,
                          target_col)
    elif named is not None:
        X = match_columns(X, named, "the columns the model was fitted on", data, target_col)
    if space is None:
        space = FeatureSpace.from_frame(X, scaling=scaling)
    space.immutable(*immutable).increase_only(*increase_only).decrease_only(*decrease_only)
    explainer = Explainer(fitted, space, solver=solver, time_limit=time_limit)
    adapter = explainer.milp.adapter
    if space_file is None and named is None and not adapter.is_regressor:
        _check_label_column(frame, target_col, adapter.classes)
    goal = parse_target(target, adapter.classes, adapter.is_regressor)
    return FileQuery(explainer, X, goal, data)


def explain_file(model: str, data: str, target_col: str, row: int, *, as_json: bool,
                 n: int | None = None, diversity: str | None = None,
                 **loading: Any) -> Counterfactual | CounterfactualSet:
    """Explain row ``row`` (0-based) of the CSV file ``data`` for the model file
    ``model`` (``loading``: the options of :func:`load_file_query`) and print the
    answer; with ``n`` or ``diversity``, a diverse set of up to ``n`` counterfactuals."""
    query = load_file_query(model, data, target_col, **loading)
    if not 0 <= row < len(query.X):
        raise ValueError(f"--row {row} is out of range: {data!r} has {len(query.X)} rows "
                         f"(0-based)")
    ce = query.explainer.explain(query.X.iloc[[row]], target=query.goal, n=n,
                                 diversity=diversity)
    if as_json:
        print(ce.to_json())
    elif isinstance(ce, CounterfactualSet):
        print_set(ce, f"Row {row} of {data}: {len(ce)} counterfactuals of {ce.requested} "
                      f"asked ({ce.method}), status {ce.status.value}, stopped: {ce.stopped}")
    else:
        print_counterfactual(ce, f"Row {row} of {data}: predicted {ce.factual_class!r}, "
                      f"target {list(ce.target)}")
    return ce


def parse_rows(text: str, n_rows: int, data: str) -> list[int]:
    """``--rows``: ``all``, or 0-based positions and ranges, ``0,3,10-19`` (a range
    includes both ends), in the order given, each once."""
    if text.strip() == "all":
        return list(range(n_rows))
    rows: list[int] = []
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            span = range(int(first), int(last) + 1) if dash else [int(first)]
        except ValueError:
            raise ValueError(f"--rows {text!r}: give 'all' or 0-based rows and ranges such "
                             f"as 0,3,10-19") from None
        if dash and not span:
            raise ValueError(f"--rows {text!r}: the range {part.strip()!r} is empty")
        for r in span:
            if not 0 <= r < n_rows:
                raise ValueError(f"--rows {text!r}: row {r} is out of range: {data!r} has "
                                 f"{n_rows} rows (0-based)")
            if r not in rows:
                rows.append(r)
    return rows


def explain_rows(model: str, data: str, target_col: str, rows: str, *, out: str | None,
                 as_json: bool, progress: bool | None = None, n: int | None = None,
                 diversity: str | None = None, **loading: Any) -> BatchResult:
    """Explain the rows ``rows`` (:func:`parse_rows`) of the CSV file ``data`` (with
    ``n`` or ``diversity``: a diverse set per row), each answer appended to the JSON
    Lines file ``out`` as it arrives; a re-run with the same ``out`` solves only the rows
    not answered yet (:mod:`cfopt.batch.journal`). Prints each row's status and changes
    (or, ``as_json``, the batch as JSON)."""
    query = load_file_query(model, data, target_col, **loading)
    chosen = parse_rows(rows, len(query.X), data)
    batch = query.explainer.explain_many(query.X.iloc[chosen], target=query.goal, out=out,
                                         progress=progress, n=n, diversity=diversity)
    if as_json:
        print(batch.to_json())
        return batch
    table = batch.to_frame()[["status", "objective", "changed",
                              *(["members"] if batch.of_sets else []), "total_s"]]
    print(f"{len(batch)} rows of {data}: " + ", ".join(
        f"{k} {v}" for k, v in batch.counts().items())
          + (f" ({batch.resumed} read back from {out})" if batch.resumed else ""))
    print(table.to_string())
    changes = batch.changes()
    if len(changes):
        print(changes.to_string(index=False))
    if out is not None:
        print(f"answers in {out}")
    return batch


def _names(text: str | None) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()] if text else []


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cfopt", description="Counterfactual explanations "
                                     "by mixed-integer optimization")
    parser.add_argument("--version", action="version", version=f"cfopt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="explain three rejected German-credit applicants")
    p_demo.add_argument("--n", type=int, default=3, help="number of applicants (default 3)")
    p_demo.add_argument("--solver", default="highs", help="solver name (default highs)")
    p_exp = sub.add_parser(
        "explain", help="explain rows of a CSV file for a model file",
        description="Explain one row (--row) or many (--rows, with --out to keep every "
        "answer in a JSON Lines file and resume from it) of a CSV file of raw rows, for an "
        "ONNX model or, with --allow-pickle, a pickled scikit-learn model.")
    p_exp.add_argument("--model", required=True, metavar="FILE",
                       help="the model: an ONNX file taking the encoded features, or a "
                       "pickled/joblib scikit-learn model (Pipeline or estimator) with "
                       "--allow-pickle")
    p_exp.add_argument("--allow-pickle", action="store_true",
                       help="also load a pickled (pickle/joblib) scikit-learn model. WARNING: "
                       "unpickling runs arbitrary code from the file; use it only for files "
                       "you trust")
    p_exp.add_argument("--data", required=True, metavar="CSV",
                       help="CSV file of raw rows, with a header and the label column")
    p_exp.add_argument("--target-col", required=True, metavar="NAME",
                       help="the CSV's label column (dropped before explaining)")
    which = p_exp.add_mutually_exclusive_group(required=True)
    which.add_argument("--row", type=int, metavar="K", help="the 0-based row to explain")
    which.add_argument("--rows", metavar="SPEC", help="the rows to explain: 'all', or "
                       "0-based rows and ranges such as 0,3,10-19")
    p_exp.add_argument("--out", metavar="JSONL", help="with --rows: append every answer "
                       "to this JSON Lines file as it arrives; a re-run with the same file "
                       "solves only the rows not answered yet")
    p_exp.add_argument("--target", help="the class to reach, as the model's classes spell it "
                       "(e.g. 1 or good), or 'opposite' (default): any class other than the "
                       "row's. For a regressor, LOW,HIGH: the interval its prediction must "
                       "reach, a side left empty being open (--target=250,)")
    p_exp.add_argument("--space", metavar="JSON", help="FeatureSpace JSON "
                       "(FeatureSpace.to_json) the model was trained with; the CSV's "
                       "columns are matched to its features by name. Default: inferred "
                       "from the CSV, in its column order")
    p_exp.add_argument("--scaling", default="minmax", choices=["minmax", "standard", "none"],
                       help="scaling when the space is inferred (default minmax)")
    p_exp.add_argument("--immutable", metavar="A,B", help="comma-separated immutable "
                       "features")
    p_exp.add_argument("--increase-only", metavar="A,B",
                       help="comma-separated increase-only features")
    p_exp.add_argument("--decrease-only", metavar="A,B",
                       help="comma-separated decrease-only features")
    p_exp.add_argument("--n", type=int, metavar="N", help="a diverse set of up to N "
                       "counterfactuals (of the --row, or of each of the --rows)")
    p_exp.add_argument("--diversity", choices=["nogood", "distance", "epsilon", "pool"],
                       help="how a set's members differ (default nogood)")
    p_exp.add_argument("--solver", default="highs", help="solver name: highs (default), "
                       "gurobi, cbc, cpsat (tree ensembles) or any Pyomo solver")
    p_exp.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                       help="seconds per row (default: none)")
    p_exp.add_argument("--json", action="store_true", help="print the result as JSON")
    p_exp.add_argument("--no-progress", action="store_true",
                       help="with --rows: no progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "explain":
        if args.row is not None and (args.out is not None or args.no_progress):
            parser.error("--out and --no-progress go with --rows")
    try:
        if args.command == "demo":
            results = demo(n=args.n, solver=args.solver)
            return 0 if all(ce.verified for ce in results) else 1
        loading = {"space_file": args.space, "scaling": args.scaling, "solver": args.solver,
                   "time_limit": args.time_limit, "immutable": _names(args.immutable),
                   "increase_only": _names(args.increase_only),
                   "decrease_only": _names(args.decrease_only),
                   "allow_pickle": args.allow_pickle, "target": args.target}
        if args.rows is not None:
            batch = explain_rows(args.model, args.data, args.target_col, args.rows,
                                 out=args.out, as_json=args.json,
                                 progress=False if args.no_progress else None, n=args.n,
                                 diversity=args.diversity, **loading)
            return 0 if all(r.status.value not in ("error", "interrupted")
                            for r in batch) else 1
        ce = explain_file(args.model, args.data, args.target_col, args.row, as_json=args.json,
                          n=args.n, diversity=args.diversity, **loading)
        return 0 if ce.verified else 1
    except (CfoptError, ValueError, TypeError, FileNotFoundError, KeyError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"cfopt: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
