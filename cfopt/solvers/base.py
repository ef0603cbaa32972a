"""Solver-agnostic solve: settings in, a :class:`SolveOutcome` out.

A backend wraps one Pyomo solver interface. It maps cfopt's settings (time limit,
relative MIP gap, threads, seed) to the solver's option names, loads the incumbent
into the model's variables when there is one, and reports the status with the
solver's proven bound, so a claim of optimality is always backed by the solver.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from ..results.status import Status
from .options import check_options


@dataclass(frozen=True)
class SolverSettings:
    """Options every backend understands.

    Attributes:
        time_limit: seconds (> 0) or ``None`` for no limit.
        mip_gap: relative MIP gap at which the solver may stop and report optimal.
        threads: solver threads (``None``: solver default).
        seed: solver random seed (``None``: solver default).
        options: raw solver-specific options, passed through by name.
        verbose: print the solver log.
    """

    time_limit: float | None = None
    mip_gap: float = 1e-4
    threads: int | None = 1
    seed: int | None = 0
    options: dict[str, Any] = field(default_factory=dict)
    verbose: bool = False

    def __post_init__(self) -> None:
        if self.time_limit is not None:
            if isinstance(self.time_limit, bool) or not isinstance(self.time_limit, (int, float)):
                raise TypeError(f"time_limit must be a number of seconds, got {self.time_limit!r}")
            if not (self.time_limit > 0 and math.isfinite(self.time_limit)):
                raise ValueError(f"time_limit must be a positive number of seconds, "
                                 f"got {self.time_limit!r}")
        if not (isinstance(self.mip_gap, (int, float)) and 0 <= self.mip_gap < 1):
            raise ValueError(f"mip_gap must be a relative gap in [0, 1), got {self.mip_gap!r}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ValueError(f"threads must be a positive integer or None, got {self.threads!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None, got {self.seed!r}")
        if not isinstance(self.options, dict):
            raise TypeError(f"options must be a dict of solver options, got {self.options!r}")


@dataclass(frozen=True)
class SolveOutcome:
    """What a solve produced.

    ``objective`` is the incumbent's objective (``None`` without one); ``bound`` the
    solver's proven bound on the optimum (``None`` if it gave none); ``solver_time``
    the solver's own reported time; ``wall_time`` the wall time of the whole call.
    """

    status: Status
    objective: float | None
    bound: float | None
    solver_time: float | None
    wall_time: float
    termination: str
    message: str = ""

    @property
    def gap(self) -> float | None:
        """Relative gap |objective - bound| / max(|objective|, 1e-10)."""
        if self.objective is None or self.bound is None:
            return None
        return abs(self.objective - self.bound) / max(abs(self.objective), 1e-10)


class SolverBackend(ABC):
    """One solver. Persistent backends keep the model loaded between solves."""

    #: short name (``"highs"``, ``"gurobi"``, ``"cbc"``, or a Pyomo solver name)
    name: str
    #: True when re-solving after a parameter change does not re-send the model
    persistent: bool = False
    #: True when :meth:`solve_pool` harvests the solver's own solution pool
    has_pool: bool = False
    #: what :meth:`solve_pool` harvests, in words (for a set that comes back short)
    pool_kind: str = "the solver's solution pool"

    @abstractmethod
    def available(self) -> bool:
        """Whether the solver can run here."""

    @abstractmethod
    def _solve(self, model: pyo.Block, settings: SolverSettings) -> SolveOutcome:
        """Solve ``model`` and load the incumbent into its variables if there is one."""

    def solve(self, model: pyo.Block, settings: SolverSettings | None = None,
              start: ComponentMap | None = None, cutoff: float | None = None
              ) -> SolveOutcome:
        """Solve ``model`` (its single active objective) under ``settings``; raw options
        the solver would ignore raise ``ValueError`` first (:mod:`cfopt.solvers.options`).
        ``start``: values of some of the model's variables at a feasible point, a MIP
        start the solver completes and begins from (:meth:`_solve_from`). ``cutoff``
        (minimisation): an objective value above the optimum, e.g. a known feasible
        point's plus a margin; the solver may discard every point at or above it
        (:meth:`cutoff_options`). A solve with a cutoff that ends without a point below
        it proves nothing about the model (HiGHS then reports it infeasible, or, when
        its presolve alone settles a small model, a point above the cutoff), so it is
        solved again without the cutoff in the time left: the outcome always holds for
        the model as given."""
        settings = settings or SolverSettings()
        check_options(self.name, settings.options)
        options = {} if cutoff is None else self.cutoff_options(cutoff)
        if options and next(model.component_data_objects(pyo.Objective, active=True)
                            ).sense != pyo.minimize:
            raise ValueError("a cutoff is an upper limit of a minimisation; this model "
                             "maximises")
        if not options:
            return self._solve_once(model, settings, start)
        t0 = time.perf_counter()
        bounded = self._solve_once(model, dataclasses.replace(
            settings, options={**settings.options, **options}), start)
        if bounded.status.has_solution and bounded.objective is not None and \
                bounded.objective < cutoff:
            return bounded
        left = time_left(settings, t0)
        if left is None:
            return dataclasses.replace(bounded, status=Status.NO_SOLUTION, bound=None,
                                       message="time limit reached after a solve under a "
                                               "cutoff found no point")
        again = self._solve_once(model, left, start)
        return dataclasses.replace(again, wall_time=time.perf_counter() - t0)

    def _solve_once(self, model: pyo.Block, settings: SolverSettings,
                    start: ComponentMap | None) -> SolveOutcome:
        return self._solve(model, settings) if start is None else \
            self._solve_from(model, settings, start)

    def ranges(self, model: pyo.Block, variables: list[pyo.Var], settings: SolverSettings
               ) -> list[tuple[float | None, float | None]]:
        """The least and the greatest value of each of ``variables`` over ``model``'s
        constraints and bounds, its own objective set aside: one solve per side, whose
        optimum it is (``None`` for a side not solved to optimality). The caller relaxes
        integrality for the bounds of optimization-based bound tightening. By default
        each side is a solve of a temporary objective, the model's own deactivated
        meanwhile."""
        own = list(model.component_data_objects(pyo.Objective, active=True))
        for objective in own:
            objective.deactivate()
        found: list[tuple[float | None, float | None]] = []
        try:
            for var in variables:
                sides: list[float | None] = []
                for sense in (pyo.minimize, pyo.maximize):
                    model._range_objective = pyo.Objective(expr=var, sense=sense)
                    try:
                        outcome = self.solve(model, settings)
                    finally:
                        model.del_component(model._range_objective)
                    sides.append(outcome.objective if outcome.status is Status.OPTIMAL
                                 else None)
                found.append((sides[0], sides[1]))
        finally:
            for objective in own:
                objective.activate()
        return found

    def cutoff_options(self, cutoff: float) -> dict[str, Any]:
        """The raw options that make the solver discard every point of objective at or
        above ``cutoff`` (minimisation); none by default (the cutoff is not used)."""
        return {}

    def _solve_from(self, model: pyo.Block, settings: SolverSettings, start: ComponentMap
                    ) -> SolveOutcome:
        """:meth:`_solve` beginning from the partial point ``start``; by default the
        start is not passed on (a backend that takes MIP starts overrides this)."""
        return self._solve(model, settings)

    # pragma: no mutate start (the defaults of a method that raises whatever they are)
    def solve_pool(self, model: pyo.Block, settings: SolverSettings, size: int, *,
                   mode: int = 2, gap: float | None = None) -> tuple[SolveOutcome, list]:
        # pragma: no mutate end
        """Solve once and harvest up to ``size`` solutions of the solver's own pool, best
        first, as ``(objective, {var: value})`` (see :mod:`cfopt.solvers.pool`)."""
        from ..errors import SolverError

        raise SolverError(f"solver {self.name!r} has no solution pool cfopt can read; use "
                          f"an iterative diversity method (no-good or distance cuts)")

    def light_heuristics(self) -> dict[str, Any]:
        """Raw options that turn off the solver's costly primal heuristics (sub-MIPs and
        the like) and keep its cheap ones: for the many small MILPs of a cutting-set
        loop, whose work is the proof of the optimum rather than finding it. Heuristics
        only propose incumbents, so these options never change what a solve proves.
        None by default (the solver's own defaults stand)."""
        return {}

    def tree_options(self) -> dict[str, Any]:
        """Raw options for the MILPs of tree ensembles (many binaries linked by chains of
        split orderings), where the solver's defaults spend their time poorly. Options
        of how the solver searches only: they never change what a solve proves. None by
        default."""
        return {}

    def overhead(self, model: pyo.Block) -> float:
        """Seconds a solve of ``model`` is expected to spend outside the solver's own
        clock (sending changes to a loaded model); 0 when unknown."""
        return 0.0

    def limit_counts_loading(self, columns: int) -> bool:
        """Whether a time-limited solve of a model of about ``columns`` columns counts the
        loading of the model into the solver in its limit (a caller then reserves no time
        for it); ``False`` (default): the limit is the solver's own clock."""
        return False

    def reset(self) -> None:
        """Forget any loaded model (persistent backends); the next solve reloads it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def time_left(settings: SolverSettings, t0: float) -> SolverSettings | None:
    """``settings`` with the time left of its limit counted from ``t0`` (unchanged
    without a limit); ``None`` when the time is up."""
    if settings.time_limit is None:
        return settings
    left = settings.time_limit - (time.perf_counter() - t0)
    return dataclasses.replace(settings, time_limit=left) if left > 0 else None


@contextlib.contextmanager
def sigint_watch() -> Iterator[Callable[[], bool]]:
    """Within: whether Ctrl-C (SIGINT) arrived. Solvers that catch it themselves end
    their solve early and return normally (highspy catches the ``KeyboardInterrupt``
    and cancels; Gurobi reports ``INTERRUPTED``): the backend then raises
    ``KeyboardInterrupt`` again, so that a batch stops instead of recording the row
    as a failure and going on. The handler calls the one it replaces and records the
    signal when that one raises ``KeyboardInterrupt`` (Python's default does; a handler
    of the user's that goes on is respected). Off the main thread (where Python
    delivers no signal) it watches nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    seen: list[int] = []
    previous = signal.getsignal(signal.SIGINT)

    def record(signum: int, frame: Any) -> None:
        if previous == signal.SIG_IGN:
            return
        if not callable(previous):  # SIG_DFL: end the process's work, as Python would
            seen.append(signum)
            raise KeyboardInterrupt
        try:
            previous(signum, frame)  # a handler of the user's may choose to go on
        except KeyboardInterrupt:
            seen.append(signum)
            raise

    signal.signal(signal.SIGINT, record)
    try:
        yield lambda: bool(seen)
    finally:
        signal.signal(signal.SIGINT, previous)
