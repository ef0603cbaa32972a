"""Validation of raw rows against the declared features: missing, extra or duplicate
columns, non-numeric values, NaN and infinities, non-integral integers, unseen categories
and values outside the declared bounds, each named by column and row."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .feature import Feature, Kind, plain


def as_frame(X: pd.DataFrame | pd.Series | Mapping) -> pd.DataFrame:
    """Rows as a DataFrame: a DataFrame as is, a Series or a mapping as one row."""
    if isinstance(X, pd.DataFrame):
        return X
    if isinstance(X, pd.Series):
        return X.to_frame().T.infer_objects()
    if isinstance(X, Mapping):
        return pd.DataFrame([dict(X)])
    raise TypeError(f"expected a pandas DataFrame, Series or dict of raw feature values, "
                    f"got {type(X).__name__}")


def validate_column(f: Feature, raw: np.ndarray, index: pd.Index,
                     check_bounds: bool) -> np.ndarray:
    """One column's values, checked, as an object array of labels or a numeric array
    (``index``: the row labels as Python objects, ``index.astype(object)``, which the
    messages name)."""
    name = f.name
    if f.labelled:
        values, levels = _labels(f, raw, index)
        if check_bounds and not f.is_onehot:
            _check_bounds(f, index, levels, values)
        return values
    # numeric arrays take a fast path: the general one, value by value, gives them the same
    # floats (so narrowing the fast path changes nothing; widening it to other arrays does)
    numeric = (raw.dtype.kind in "iuf"  # pragma: no mutate (narrows the fast path only)
               or (raw.dtype == bool and f.kind is Kind.BINARY))
    if numeric:
        values = raw.astype(float)  # pragma: no mutate (astype(None) is float64 too)
    else:
        values = np.array([_number(f, v, row) for v, row in zip(raw, index)],
                          dtype=float)  # pragma: no mutate (_number returns floats)
    nan = np.isnan(values)
    if nan.any():
        raise ValueError(f"column {name!r}: missing value (NaN) in row {index[nan][0]!r}")
    inf = np.isinf(values)
    if inf.any():
        k = int(np.flatnonzero(inf)[0])
        raise ValueError(f"column {name!r}: infinite value {float(values[k])!r} in row "
                         f"{index[k]!r}")
    if f.is_integral:
        frac = values != np.round(values)
        if frac.any():
            k = int(np.flatnonzero(frac)[0])
            raise ValueError(f"column {name!r}: {f.kind.value} feature has non-integer "
                             f"value {plain(raw[k])!r} in row {index[k]!r}")
    if check_bounds:
        _check_bounds(f, index, values, values)
    return values.astype(np.int64) if f.is_integral else values


#: pandas' inferred types of a column whose values are all of one kind, none missing
_UNIFORM = frozenset({"string", "integer", "boolean"})


def _labels(f: Feature, raw: np.ndarray, index: pd.Index) -> tuple[np.ndarray, np.ndarray]:
    """A labelled column's values as Python scalars (an object array) and their
    positions in ``f.categories``; ``ValueError`` naming the first missing value or
    unseen category. A column of one kind (all strings, integers or booleans, as
    pandas infers) is checked per distinct value (``pd.factorize`` numbers them in
    order of first appearance, so the first unseen one is the earliest row); any other
    row by row."""
    name, known = f.name, set(f.categories)

    def unseen(v: Any, k: int) -> ValueError:
        return ValueError(f"column {name!r}: unseen category {v!r} in row {index[k]!r}; "
                          f"known categories: {list(f.categories)}")

    inferred = pd.api.types.infer_dtype(
        raw, skipna=False)  # pragma: no mutate (skipna=None is falsy: the same as False)
    if inferred in _UNIFORM:
        rows, distinct = pd.factorize(raw)
        labels = [plain(v) for v in distinct]
        for u, v in enumerate(labels):
            if v not in known:
                raise unseen(v, int(np.flatnonzero(rows == u)[0]))
        values = np.empty(len(labels), dtype=object)
        values[:] = labels
        levels = np.array([f.categories.index(v) for v in labels],
                          dtype=float)  # pragma: no mutate (int positions compare alike)
        return values[rows], levels[rows]
    values = np.empty(len(raw), dtype=object)
    for k, v in enumerate(raw):
        if _is_missing(v):
            raise ValueError(f"column {name!r}: missing value (NaN) in row {index[k]!r}")
        v = plain(v)
        if v not in known:
            raise unseen(v, k)
        values[k] = v
    positions = np.array([f.categories.index(v) for v in values],
                         dtype=float)  # pragma: no mutate (int positions compare alike)
    return values, positions


def _number(f: Feature, value: Any, row: Any) -> float:
    """One raw value of a numeric feature as a float (NaN if missing); text, complex
    numbers and booleans (unless the feature is binary) are not numbers."""
    if _is_missing(value):
        return math.nan
    v = plain(value)
    why = ""
    if isinstance(v, bool) and f.kind is not Kind.BINARY:
        why = f" (a boolean, but the feature is {f.kind.value})"
    elif isinstance(v, complex):
        why = " (complex)"
    if not why:
        try:
            return float(v)
        except (TypeError, ValueError):
            pass
    raise ValueError(f"column {f.name!r}: value {v!r} in row {row!r} is not a number{why}")


def check_unique_columns(frame: pd.DataFrame) -> None:
    duplicated = frame.columns[frame.columns.duplicated()]
    if len(duplicated):
        raise ValueError(f"duplicate column(s) {list(dict.fromkeys(duplicated))}; each "
                         f"feature must appear once")


def _check_bounds(f: Feature, index: pd.Index, codes: np.ndarray, shown: np.ndarray) -> None:
    outside = (codes < f.lower) | (codes > f.upper)
    if outside.any():
        k = int(np.flatnonzero(outside)[0])
        lo, hi = f.from_code(f.lower), f.from_code(f.upper)
        value = plain(shown[k])
        if f.is_integral and not f.labelled and isinstance(value, float):
            value = int(value)  # an integer's code, not a label (an ordinal's may be 0.5)
        raise ValueError(f"column {f.name!r}: value {value!r} in row {index[k]!r} "
                         f"is outside the declared bounds [{lo!r}, {hi!r}]; widen them with "
                         f"space.set({f.name!r}, lower=..., upper=...)")


def _is_missing(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False
