"""Progress bars (tqdm) on long loops: batches of queries, the PROPLACE cutting-set loop,
the benchmark scripts.

Every loop takes ``progress=None | True | False``. ``True`` and ``False`` decide. ``None``
(the default) asks the environment variable ``CFOPT_PROGRESS``: ``1`` (``true``, ``yes``,
``on``) shows the bars, ``0`` (``false``, ``no``, ``off``) hides them; unset (or any
other value), bars show only where someone watches them: when stderr is a terminal or
in a Jupyter notebook. So a script whose stderr goes to a file or a pipe (CI, batch
jobs, ``2> log``) writes no bars unless asked for them. Bars go to stderr.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from tqdm import tqdm

_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


def _watched() -> bool:
    """Whether someone watches stderr: it is a terminal, or this is a Jupyter kernel."""
    stream = sys.stderr
    try:
        if stream is not None and stream.isatty():
            return True
    except (AttributeError, ValueError):  # a stream without isatty, or a closed one
        pass
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def progress_enabled(progress: bool | None) -> bool:
    """Whether a loop shows its bar: ``progress`` if given, else ``CFOPT_PROGRESS``
    (``1``: on, ``0``: off), else only when stderr is watched (a terminal or a
    notebook).

    Raises:
        TypeError: ``progress`` is neither ``None`` nor a bool.
    """
    if progress is None:
        setting = os.environ.get("CFOPT_PROGRESS", "").strip().lower()
        if setting in _OFF:
            return False
        return setting in _ON or _watched()
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None, got {progress!r}")
    return progress


def progress_bar(total: int | None, desc: str, progress: bool | None = None,
                 **options: Any) -> tqdm:
    """A tqdm bar over ``total`` steps (a disabled one when progress is off, see
    :func:`progress_enabled`)."""
    return tqdm(total=total, desc=desc, disable=not progress_enabled(progress),
                dynamic_ncols=True, **options)
