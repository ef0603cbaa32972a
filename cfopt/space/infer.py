"""Inference of a feature from a column of raw training rows: its kind (from the dtype
and the values), its categories, bounds, scaling and spread."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from .feature import Feature, Kind, plain


def sorted_labels(values: Iterable) -> tuple:
    vals = [plain(v) for v in values]
    try:
        return tuple(sorted(vals))
    except TypeError:
        return tuple(sorted(vals, key=str))


def infer_kind(col: pd.Series) -> Kind:
    if isinstance(col.dtype, pd.CategoricalDtype):
        if col.dtype.ordered:
            return Kind.ORDINAL
        return Kind.BINARY if len(col.dtype.categories) == 2 else Kind.CATEGORICAL
    if col.dtype == bool:
        return Kind.BINARY
    if pd.api.types.is_numeric_dtype(col):
        values = col.to_numpy(dtype=float)
        if not np.isfinite(values).all():
            raise ValueError(f"column {col.name!r}: infinite values cannot define a feature")
        if set(np.unique(values)) <= {0.0, 1.0}:
            return Kind.BINARY
        if np.all(values == np.round(values)):
            return Kind.INTEGER
        return Kind.CONTINUOUS
    n_levels = col.nunique()
    return Kind.BINARY if n_levels == 2 else Kind.CATEGORICAL


def infer_feature(name: str, col: pd.Series, kind: Kind, levels: tuple | None,
                   scaling: str) -> Feature:
    categories: tuple = ()
    if kind in (Kind.CATEGORICAL, Kind.ORDINAL) or (
            kind is Kind.BINARY and not pd.api.types.is_numeric_dtype(col) and col.dtype != bool):
        if levels is not None:
            categories = levels
        elif isinstance(col.dtype, pd.CategoricalDtype):
            categories = tuple(plain(c) for c in col.dtype.categories)
        else:
            categories = sorted_labels(col.unique())
        unseen = set(col.map(plain)) - set(categories)
        if unseen:
            raise ValueError(f"column {name!r}: values {sorted(map(str, unseen))} are not "
                             f"among the declared categories {list(categories)}")
        if kind is Kind.BINARY and len(categories) != 2:
            raise ValueError(f"column {name!r}: a binary feature needs two labels, "
                             f"found {list(categories)}")
    elif col.dtype == bool:
        categories = (False, True)
    if kind is Kind.CATEGORICAL:
        return Feature(name, kind, categories=categories)
    if categories:
        lookup = {c: i for i, c in enumerate(categories)}
        codes = np.array([lookup[plain(v)] for v in col], dtype=float)
    else:
        numeric = pd.to_numeric(col, errors="coerce")
        if numeric.isna().any():
            bad = col[numeric.isna()].iloc[0]
            raise ValueError(f"column {name!r}: value {bad!r} is not a number "
                             f"(declare the column categorical)")
        codes = numeric.to_numpy(dtype=float)
    lo, hi = float(codes.min()), float(codes.max())
    if kind is Kind.ORDINAL:
        lo, hi = 0.0, float(len(categories) - 1)
    if kind is Kind.BINARY:
        lo, hi = 0.0, 1.0
    if kind in (Kind.INTEGER, Kind.BINARY) and np.any(codes != np.round(codes)):
        raise ValueError(f"column {name!r}: {kind.value} feature has non-integer values")
    if scaling == "minmax":
        shift, scale = lo, (hi - lo)
    elif scaling == "standard":
        shift, scale = float(codes.mean()), float(codes.std())
    else:
        shift, scale = 0.0, 1.0
    scale = scale if scale > 0 else 1.0
    mad = float(np.median(np.abs(codes - np.median(codes))))
    return Feature(name, kind, lower=lo, upper=hi, categories=categories, shift=shift,
                   scale=scale, spread=float(codes.max() - codes.min()), mad=mad)
