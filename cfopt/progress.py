"""Progress bars (tqdm) on long loops: batches of queries, the PROPLACE cutting-set loop,
the benchmark scripts.

Every loop takes ``progress=None | True | False``. ``True`` and ``False`` decide. ``None``
(the default) asks the environment variable ``CFOPT_PROGRESS``: ``1`` (``true``, ``yes``,
``on``) shows the bars, ``0`` (``false``, ``no``, ``off``) hides them; unset (or any
other value), bars show only where someone watches them: when stderr is a terminal or
in a Jupyter notebook. So a script whose stderr goes to a file or a pipe (CI, batch
jobs, ``2> log``) writes no bars unless asked for them. Bars go to stderr.

A batch's bar (:class:`BatchProgress`) says how many rows are done, found, failed and
left, the rate and an ETA.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
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


class BatchProgress:
    """The bar of a batch of queries: rows done of all rows, their rate and an ETA
    (tqdm's own), then ``found`` (verified counterfactuals), ``failed`` (status
    ``error`` or ``verification_failed``), ``left`` (rows not yet answered) and, when a
    batch resumes from its ``out`` file, ``resumed`` (rows read back, counted done from
    the start; the rate and the ETA count only this run's rows).

    Args:
        total: rows of the batch.
        desc: the bar's label.
        progress: see :func:`progress_enabled`.
        resumed: rows already answered when the batch starts.
    """

    #: statuses counted as failed rows
    FAILED = ("error", "verification_failed")

    def __init__(self, total: int, desc: str, progress: bool | None = None,
                 resumed: int = 0) -> None:
        self.bar = progress_bar(total, desc, progress, initial=resumed, unit="row")
        self.found = 0
        self.failed = 0
        self.left = total - resumed
        self.resumed = resumed
        self._postfix()

    def update(self, answers: Iterable[Any]) -> None:
        """Count finished answers (objects with ``status`` and ``found``)."""
        n = 0
        for answer in answers:
            n += 1
            self.found += bool(answer.found)
            self.failed += answer.status.value in self.FAILED
        self.left -= n
        self._postfix()
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()

    def _postfix(self) -> None:
        counts = {"found": self.found, "failed": self.failed, "left": self.left}
        if self.resumed:
            counts["resumed"] = self.resumed
        self.bar.set_postfix(counts, refresh=False)
