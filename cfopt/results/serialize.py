"""JSON-safe values of the results' fields, and the changes between two raw rows."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd


def json_value(value: Any) -> Any:
    """A numpy scalar as the matching Python scalar, a non-finite float as ``None``."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def row_dict(frame: pd.DataFrame | None) -> dict[str, Any] | None:
    """The first row of ``frame`` as a JSON-safe dict (``None`` stays ``None``)."""
    if frame is None:
        return None
    return {k: json_value(v) for k, v in frame.iloc[0].items()}


def row_frame(row: Mapping[str, Any] | None) -> pd.DataFrame | None:
    """The one-row DataFrame of a :func:`row_dict` (``None`` stays ``None``)."""
    if row is None:
        return None
    return pd.DataFrame([dict(row)])


def row_changes(factual: pd.DataFrame, counterfactual: pd.DataFrame | None) -> pd.DataFrame:
    """The features whose raw value differs between two one-row frames: columns ``from``
    and ``to`` (an empty frame when there is no counterfactual)."""
    if counterfactual is None:
        return pd.DataFrame(columns=["from", "to"])
    before, after = factual.iloc[0], counterfactual.iloc[0]
    rows = {name: {"from": before[name], "to": after[name]}
            for name in factual.columns if before[name] != after[name]}
    return pd.DataFrame.from_dict(rows, orient="index", columns=["from", "to"])
