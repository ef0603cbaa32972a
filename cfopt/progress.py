"""Progress bars (tqdm) on long loops: batches of queries, the PROPLACE cutting-set loop,
the benchmark scripts.

Every loop takes ``progress=None | True | False``; ``None`` shows the bar unless the
environment variable ``CFOPT_PROGRESS`` is ``0`` (``false``, ``no``, ``off``), the one
switch that silences every bar at once (CI, notebooks, scripts). Bars go to stderr.
"""

from __future__ import annotations

import os
from typing import Any

from tqdm import tqdm

_OFF = ("0", "false", "no", "off")


def progress_enabled(progress: bool | None) -> bool:
    """Whether a loop shows its bar: ``progress`` if given, else ``CFOPT_PROGRESS``."""
    if progress is None:
        return os.environ.get("CFOPT_PROGRESS", "1").strip().lower() not in _OFF
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None, got {progress!r}")
    return progress


def progress_bar(total: int | None, desc: str, progress: bool | None = None,
                 **options: Any) -> tqdm:
    """A tqdm bar over ``total`` steps (a disabled one when progress is off)."""
    return tqdm(total=total, desc=desc, disable=not progress_enabled(progress),
                dynamic_ncols=True, **options)
