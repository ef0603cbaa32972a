"""Command line: ``cfopt demo`` and ``cfopt explain``.

``cfopt explain`` reads ONNX models (protobuf), CSV data and FeatureSpace JSON, none
of which can run code. A pickled scikit-learn model is loaded only with the explicit
``--allow-pickle`` flag, because unpickling a file runs whatever code it holds.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .demo import demo, print_counterfactual
from .errors import CfoptError
from .explainer import Explainer
from .results.counterfactual import Counterfactual
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


def explain_file(model: str, data: str, target_col: str, row: int, *, space_file: str | None,
                 scaling: str, solver: str, time_limit: float | None, immutable: list[str],
                 increase_only: list[str], decrease_only: list[str],
                 as_json: bool, allow_pickle: bool = False,
                 target: str | None = None) -> Counterfactual:
    """Explain row ``row`` of the CSV file ``data`` for the model file ``model`` (see
    :func:`load_model_file`) towards ``target`` (see :func:`parse_target`) and print the
    result.

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
    if not 0 <= row < len(X):
        raise ValueError(f"--row {row} is out of range: {data!r} has {len(X)} rows (0-based)")
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
    ce = explainer.explain(X.iloc[[row]], target=goal)
    if as_json:
        print(ce.to_json())
    else:
        print_counterfactual(ce, f"Row {row} of {data}: predicted {ce.factual_class!r}, "
                      f"target {list(ce.target)}")
    return ce


def _names(text: str | None) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()] if text else []


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cfopt", description="Counterfactual explanations "
                                     "by mixed-integer optimization")
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="explain three rejected German-credit applicants")
    p_demo.add_argument("--n", type=int, default=3, help="number of applicants")
    p_demo.add_argument("--solver", default="highs")
    p_exp = sub.add_parser("explain", help="explain one row of a CSV file for an ONNX model")
    p_exp.add_argument("--model", required=True, help="ONNX file taking the encoded features "
                       "(a pickled scikit-learn model needs --allow-pickle)")
    p_exp.add_argument("--allow-pickle", action="store_true",
                       help="also load a pickled (pickle/joblib) scikit-learn model. WARNING: "
                       "unpickling runs arbitrary code from the file; use it only for files "
                       "you trust")
    p_exp.add_argument("--data", required=True, help="CSV file of raw rows (with the target)")
    p_exp.add_argument("--target-col", required=True, help="label column to drop")
    p_exp.add_argument("--row", type=int, required=True, help="0-based row to explain")
    p_exp.add_argument("--target", help="the class to reach, as the model's classes spell it "
                       "(e.g. 1 or good), or 'opposite' (default): any class other than the "
                       "row's. For a regressor, LOW,HIGH: the interval its prediction must "
                       "reach, a side left empty being open (--target=250,)")
    p_exp.add_argument("--space", help="FeatureSpace JSON (FeatureSpace.to_json) the model "
                       "was trained with; the CSV's columns are matched to its features by "
                       "name. Default: inferred from the CSV, in its column order")
    p_exp.add_argument("--scaling", default="minmax", choices=["minmax", "standard", "none"],
                       help="scaling when the space is inferred (default minmax)")
    p_exp.add_argument("--immutable", help="comma-separated immutable features")
    p_exp.add_argument("--increase-only", help="comma-separated increase-only features")
    p_exp.add_argument("--decrease-only", help="comma-separated decrease-only features")
    p_exp.add_argument("--solver", default="highs")
    p_exp.add_argument("--time-limit", type=float, default=None)
    p_exp.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            results = demo(n=args.n, solver=args.solver)
            return 0 if all(ce.verified for ce in results) else 1
        ce = explain_file(args.model, args.data, args.target_col, args.row,
                          space_file=args.space, scaling=args.scaling, solver=args.solver,
                          time_limit=args.time_limit, immutable=_names(args.immutable),
                          increase_only=_names(args.increase_only),
                          decrease_only=_names(args.decrease_only), as_json=args.json,
                          allow_pickle=args.allow_pickle, target=args.target)
        return 0 if ce.verified else 1
    except (CfoptError, ValueError, TypeError, FileNotFoundError, KeyError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"cfopt: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
