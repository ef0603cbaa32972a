"""A HiGHS solve in a child process that the parent ends at the time limit (issue 17).

HiGHS 1.16 does not look at its clock everywhere: on a default ExtraTrees forest on UCI
Adult, one root separation round (``HighsImplications::separateImpliedBounds``, probing
over the clique table) ran 35 s past a 15 s limit, and a root sub-MIP 30 s past a 120 s
one. No callback is called in those phases (``kCallbackMipInterrupt`` and
``kCallbackSimplexInterrupt`` neither), so nothing in the process can stop them; highspy
does release the GIL in ``run()``, but a watchdog thread has nothing to call.

So the solve runs in a child made by ``os.fork()`` once the model is loaded into highspy:
the child starts with the loaded model (copy-on-write, nothing sent). The child streams
every improving incumbent (``kCallbackMipImprovingSolution``) and the dual bound
(``kCallbackMipInterrupt``, at most every ``BOUND_EVERY`` seconds) to the parent over a
pipe, then HiGHS's final answer. The parent waits until the deadline plus ``GRACE``,
then kills the child (``SIGKILL``) and keeps what was streamed: the last incumbent (each
is better than the one before) and the best dual bound, each valid when HiGHS reported it
(the same numbers HiGHS reports at its end, from ``HighsMipSolverData::limitsToBounds``).

In the child, HiGHS runs on a thread of its own: HiGHS keeps its task scheduler in the
forking thread's thread-local storage, and the parent's worker threads do not exist in a
forked child; a new thread starts a scheduler of its own. The child ignores Ctrl-C (the
parent handles it: :func:`solve_in_child` kills the child and raises again) and dies with
its parent (``PR_SET_PDEATHSIG``). A child that dies or raises leaves the parent a
:class:`ChildRun` saying so (``crashed``), with whatever it had streamed.
"""

from __future__ import annotations

import ctypes
import faulthandler
import gc
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

#: seconds after the deadline before the child is killed (HiGHS that honours its limit
#: ends before it, with its own final answer)
GRACE = 0.25
#: least seconds between two dual bounds streamed from the child
BOUND_EVERY = 0.05
#: longest wait on the pipe (a SIGINT that another thread of the process received is
#: raised in the main thread only when its wait ends)
POLL = 0.1
#: seconds a child that died or was killed gets to be reaped before it is killed (again)
EXIT_WAIT = 1.0
_PR_SET_PDEATHSIG = 1
#: libc's ``prctl`` and ``fflush``, looked up in the parent (``dlopen`` and ``dlsym`` take
#: a lock that another thread of the parent may hold at the fork)
_LIBC: list[Any] = []
#: children that answered, not yet reaped
_UNREAPED: list[int] = []


class ForkError(OSError):
    """``os.fork()`` failed (no memory for the child, the process limit)."""


def isolation_available() -> bool:
    """Whether a solve can run in a forked child here (Linux: ``fork`` of a process with
    threads is safe there for what the child does; macOS and Windows are not)."""
    return sys.platform.startswith("linux")


@dataclass
class ChildRun:
    """What a child solve gave the parent.

    Attributes:
        status: the name of HiGHS's final ``HighsModelStatus`` (``None``: the child never
            answered: killed at the deadline, or crashed).
        objective: the objective of ``x``.
        bound: HiGHS's final dual bound, or the best one streamed (``None``: none).
        x: the column values of the final solution, or of the last streamed incumbent.
        node_count: HiGHS's ``mip_node_count`` (-1 for an LP; ``None`` without an answer).
        run_time: the seconds of the child's ``run`` (``None`` without an answer).
        solutions: every improving incumbent streamed, ``(objective, x)``, in order.
        killed: the child was killed at the deadline (plus ``GRACE``).
        crashed: how the child ended without an answer (a signal, an exit code, or the
            error it raised), or ``None``.
    """

    status: str | None = None
    objective: float | None = None
    bound: float | None = None
    x: np.ndarray | None = None
    node_count: int | None = None
    run_time: float | None = None
    solutions: list[tuple[float, np.ndarray]] = field(default_factory=list)
    killed: bool = False
    crashed: str | None = None


def run_on_thread(highs: Any) -> None:
    """``highs.run()`` on a new thread (in the child: a HiGHS scheduler of its own)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            highs.run()
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)

    thread = threading.Thread(target=run, name="highs")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


class _Stream:
    """The child's callbacks: each improving incumbent, and the dual bound now and then,
    sent to the parent. A failed send (the parent is gone) ends the child."""

    def __init__(self, writer: Connection) -> None:
        self._writer = writer
        self._bound: float | None = None  # pragma: no mutate (None, "": unequal to any float)
        self._sent_at = 0.0

    def _send(self, message: tuple) -> None:
        """Send ``message`` to the parent (or end the child when it cannot)."""
        try:
            self._writer.send(message)
        except BaseException:  # the parent is gone or the pipe broke: nothing to do
            os._exit(3)

    def solution(self, event: Any) -> None:
        """``kCallbackMipImprovingSolution``: the incumbent, its objective and the bound."""
        out = event.data_out
        self._send(("solution", float(out.objective_function_value),
                    float(out.mip_dual_bound), np.array(out.mip_solution, dtype=float)))

    def bound(self, event: Any) -> None:
        """``kCallbackMipInterrupt``: the dual bound, when it changed (at most every
        ``BOUND_EVERY`` seconds)."""
        bound = float(event.data_out.mip_dual_bound)
        now = time.monotonic()
        if bound != self._bound and now - self._sent_at >= BOUND_EVERY:
            self._bound, self._sent_at = bound, now
            self._send(("bound", bound))


def _child(highs: Any, writer: Connection, run: Callable[[Any], None], parent: int) -> None:
    """The child's whole life: solve, answer, exit (never returns)."""
    code = 1
    try:
        gc.disable()  # a collection would copy the parent's pages for nothing
        faulthandler.disable()  # a crash is the parent's to report, not a dump to stderr
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
        _LIBC[0](_PR_SET_PDEATHSIG, signal.SIGKILL)  # prctl
        if os.getppid() != parent:  # the parent died before prctl
            os._exit(code)
        stream = _Stream(writer)
        highs.cbMipImprovingSolution.subscribe(stream.solution)
        highs.cbMipInterrupt.subscribe(stream.bound)
        started = time.perf_counter()
        run(highs)
        run_time = time.perf_counter() - started  # (getRunTime() adds up all runs)
        info = highs.getInfo()
        found = info.primal_solution_status == 2  # 2: feasible
        x = np.array(highs.getSolution().col_value, dtype=float) if found else None
        writer.send(("done", highs.getModelStatus().name,
                     float(info.objective_function_value) if found else None,
                     float(info.mip_dual_bound), int(info.mip_node_count),
                     run_time, x))
        code = 0
    except BaseException:
        try:
            writer.send(("error", traceback.format_exc(limit=6)))
        except BaseException:  # the parent is gone
            pass
    finally:
        _LIBC[1](None)  # fflush: HiGHS's log (``verbose``)
        os._exit(code)


def solve_in_child(highs: Any, deadline: float, minimize: bool,
                   run: Callable[[Any], None] = run_on_thread) -> ChildRun:
    """Solve the model loaded in ``highs`` (its options set) in a forked child by
    ``run(highs)`` until ``deadline`` (``time.perf_counter()``) plus ``GRACE``; the
    child is killed then. ``minimize``: the objective's sense (which streamed bound is
    the best). A ``KeyboardInterrupt`` (or any other exception) while waiting kills the
    child and is raised again; :class:`ForkError` when no child can be made."""
    if not _LIBC:
        libc = ctypes.CDLL(None)
        _LIBC.extend([libc.prctl, libc.fflush])
    _LIBC[1](None)  # C output pending here is not the child's to print again
    reader, writer = Pipe(duplex=False)  # pragma: no mutate (a two-way pipe serves as well)
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:
        reader.close()
        writer.close()
        raise ForkError(f"no child process: {exc}") from exc
    if pid == 0:  # the child
        reader.close()
        _child(highs, writer, run, parent)
    writer.close()
    result = ChildRun()
    try:
        answered = _collect(reader, result, deadline + GRACE, minimize)
        if result.status is not None:  # answered: its exit (milliseconds) is not awaited
            _UNREAPED.append(pid)
            return result
        if not answered and result.crashed is None:
            _sigkill(pid)
            result.killed = True
        ended = _reap(pid, time.perf_counter() + EXIT_WAIT)
    except BaseException:
        _kill(pid)
        raise
    finally:
        reader.close()
        _reap_finished()
    if not result.killed:
        result.crashed = result.crashed or _describe(ended)
    return result


def _collect(reader: Connection, result: ChildRun, end: float, minimize: bool) -> bool:
    """Read the child's messages into ``result`` until its answer (``True``), its end
    without one (``True``: ``result.crashed`` may say why) or ``end`` (``False``)."""
    better = max if minimize else min
    while True:
        left = end - time.perf_counter()
        if left <= 0:
            return False
        if not reader.poll(min(left, POLL)):  # short waits: Ctrl-C is seen within POLL
            continue
        try:
            message = reader.recv()
        except (EOFError, OSError):  # the child is gone
            return True
        kind = message[0]
        if kind == "solution":
            _, objective, bound, x = message
            result.solutions.append((objective, x))
            result.objective, result.x = objective, x
            message = ("bound", bound)
        if message[0] == "bound":
            if np.isfinite(message[1]):
                result.bound = message[1] if result.bound is None else \
                    better(result.bound, message[1])
        elif kind == "done":
            _, status, objective, bound, nodes, run_time, x = message
            result.status, result.node_count, result.run_time = status, nodes, run_time
            result.bound = float(bound) if np.isfinite(bound) else None
            result.objective, result.x = objective, x  # (None, None): no solution
            return True
        elif kind == "error":
            result.crashed = f"it raised: {message[1].strip().splitlines()[-1]}"


def _reap(pid: int, until: float) -> int:
    """The wait status of child ``pid``, killed if it has not exited by ``until`` (0 when
    someone else reaped it)."""
    pause = 1e-4
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if done:
            return status
        if time.perf_counter() >= until:
            return _kill(pid)
        time.sleep(pause)
        pause = min(2 * pause, 0.01)


def _kill(pid: int) -> int:
    """Kill child ``pid`` and reap it; its wait status (0 when it was reaped already)."""
    try:
        _sigkill(pid)
        return os.waitpid(pid, 0)[1]
    except (ProcessLookupError, ChildProcessError):  # reaped already
        return 0


def _sigkill(pid: int) -> None:
    """``SIGKILL`` to child ``pid``; never to a process group (0: this one; -1: every
    process of the user), whatever reached here."""
    if pid <= 0:
        raise ValueError(f"{pid} is not the pid of a child")
    os.kill(pid, signal.SIGKILL)


def _reap_finished() -> None:
    """Reap the children that answered and have exited since."""
    for pid in list(_UNREAPED):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _UNREAPED.remove(pid)


def _describe(status: int) -> str:
    """A child's wait status in words."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return f"killed by signal {number} ({signal.Signals(number).name})"
    return f"exited with code {os.waitstatus_to_exitcode(status)} without an answer"
