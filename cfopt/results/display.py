"""HTML views for notebooks: the markup behind every ``_repr_html_`` of cfopt.

Jupyter shows an object by its ``_repr_html_``. Each view is a small card: a title with
the status (green when a verified point was proven optimal or certified, amber when a
verified point comes without that proof, red when there is no point), a table of the
answer's figures, the tables it is about (the changes, the members of a set, the rows
of a batch) and the message in words. Every value is escaped; frames are cut to
:data:`MAX_ROWS` rows with the count of the hidden ones stated.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import pyomo.environ as pyo

#: rows of a frame shown in a card; the others are counted, not shown
MAX_ROWS = 20

_STYLE = ("<style>.cfopt-card{font-family:sans-serif;font-size:13px;margin:4px 0}"
          ".cfopt-card table{border-collapse:collapse;margin:4px 0}"
          ".cfopt-card td,.cfopt-card th{padding:2px 8px;text-align:left;"
          "border-bottom:1px solid #ddd}"
          ".cfopt-badge{padding:1px 6px;border-radius:3px;color:#fff;font-weight:bold}"
          ".cfopt-proven{background:#2e7d32}.cfopt-unproven{background:#b26a00}"
          ".cfopt-none{background:#b71c1c}.cfopt-message{color:#444;white-space:pre-wrap}"
          "</style>")

#: badge class by how much the answer holds: a proven point, a point, no point
TONES = ("proven", "unproven", "none")


def tone(found: bool, proven: bool) -> str:
    """The badge class of an answer: ``proven`` (a verified point with its proof),
    ``unproven`` (a verified point, less proven) or ``none`` (no point)."""
    if not found:
        return "none"
    return "proven" if proven else "unproven"


def value_text(value: Any) -> str:
    """A figure as shown: floats to 6 significant digits, ``None`` as a dash."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def fields_table(fields: Mapping[str, Any]) -> str:
    """A two-column table, name and value, every cell escaped."""
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(value_text(v))}"
                   f"</td></tr>" for k, v in fields.items())
    return f"<table>{rows}</table>"


def frame_table(frame: pd.DataFrame, max_rows: int = MAX_ROWS) -> str:
    """A frame's first ``max_rows`` rows as an escaped HTML table, with the number of
    rows left out."""
    shown = frame.head(max_rows)
    markup = shown.to_html(border=0, escape=True, na_rep="–", float_format=value_text)
    hidden = len(frame) - len(shown)
    if hidden > 0:
        markup += f"<div>… {hidden} more row{'s' if hidden > 1 else ''}</div>"
    return markup


def card(title: str, status: str | None, badge: str | None, fields: Mapping[str, Any],
         tables: Sequence[tuple[str, pd.DataFrame]] = (), message: str = "") -> str:
    """The whole card: title and status badge (none when ``status`` is ``None``), the
    figures, each titled table (an empty one is skipped) and the message."""
    head = f"<b>{html.escape(title)}</b>"
    if status is not None:
        if badge not in TONES:
            raise ValueError(f"badge must be one of {TONES}, got {badge!r}")
        head += f' <span class="cfopt-badge cfopt-{badge}">{html.escape(status)}</span>'
    parts = [_STYLE, '<div class="cfopt-card">', head, fields_table(fields)]
    for caption, frame in tables:
        if len(frame):
            parts += [f"<div><i>{html.escape(caption)}</i></div>", frame_table(frame)]
    if message:
        parts.append(f'<div class="cfopt-message">{html.escape(message)}</div>')
    parts.append("</div>")
    return "".join(parts)


def model_size(model: pyo.Block) -> dict[str, int]:
    """A Pyomo model's size as a solver sees it: variables, integer ones (binaries
    included) and active constraints."""
    variables = list(model.component_data_objects(pyo.Var, descend_into=True))
    return {"variables": len(variables),
            "integer variables": sum(v.is_integer() or v.is_binary() for v in variables),
            "constraints": sum(1 for _ in model.component_data_objects(
                pyo.Constraint, active=True, descend_into=True))}
