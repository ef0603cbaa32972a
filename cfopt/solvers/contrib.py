"""Pyomo's new persistent solver interfaces (``pyomo.contrib.solver``): the base of the
HiGHS and Gurobi backends."""

from __future__ import annotations

import math
import time
from typing import Any

import pyomo.environ as pyo

from ..errors import SolverError, SolverNotAvailableError
from ..results.status import Status
from .base import SolveOutcome, SolverBackend, SolverSettings, sigint_watch

INSTALL_HINTS = {
    "highs": "install it with `pip install highspy`",
    "gurobi": ("install it with `pip install gurobipy` (or `pip install cfopt[gurobi]`); "
               "the pip licence is size-limited"),
    "cpsat": "install it with `pip install cfopt[cpsat]` (OR-Tools)",
    "cbc": ("install it with `apt-get install coinor-cbc` (Debian/Ubuntu), "
            "`brew install cbc` (macOS) or `conda install -c conda-forge coin-or-cbc`, "
            "so that the `cbc` executable is on PATH"),
}

_INF = float("inf")


def finite(x: Any) -> float | None:
    """A finite number, or ``None`` (also for what a solver's log left undefined)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


class ContribBackend(SolverBackend):
    """Pyomo's new persistent solver interfaces (``pyomo.contrib.solver``).

    The model is loaded once; later solves send only what changed (mutable parameter
    values, fixed variables, added or removed constraints). Sending the changes happens
    before the solver's clock starts: its time is measured on every solve of the loaded
    model and deducted from the next solve's time limit, so that the limit bounds the
    whole call (a default random forest's pruned leaves took ~1.5 s to send).
    """

    persistent = True
    _pyomo_name: str

    def __init__(self) -> None:
        self._solver: Any = None
        #: seconds of the last solve of the loaded model spent outside the solver
        self._overhead = 0.0

    def _instance(self) -> Any:
        if self._solver is None:
            from pyomo.contrib.solver.common.factory import SolverFactory

            self._solver = SolverFactory(self._pyomo_name)
        return self._solver

    def available(self) -> bool:
        try:
            return bool(self._instance().available())
        except Exception:  # an import or licence failure means "not available"
            return False

    def reset(self) -> None:
        self._solver = None
        self._overhead = 0.0

    def overhead(self, model: pyo.Block) -> float:
        loaded = self._solver is not None and getattr(self._solver, "_model", None) is model
        return self._overhead if loaded else 0.0

    def _time_limit(self, settings: SolverSettings, loaded: bool) -> float:
        """The solver's own limit: the call's limit less the measured overhead of sending
        the changes (at least a tenth of the limit)."""
        if settings.time_limit is None:
            return _INF
        overhead = self._overhead if loaded else 0.0
        return max(settings.time_limit - overhead, 0.1 * settings.time_limit)

    def _solver_options(self, settings: SolverSettings) -> dict[str, Any]:
        return {}

    def _solver_time(self, results: Any) -> float | None:
        timer = results.timing_info.timer
        try:
            return timer.get_total_time("optimize")
        except Exception:  # no such timer entry
            return None

    def _translate_error(self, exc: Exception) -> Exception | None:
        return None


    def _solve(self, model: pyo.Block, settings: SolverSettings) -> SolveOutcome:
        """Pyomo's solve of ``model`` (its persistent interface sends what changed)."""
        from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

        if not self.available():
            raise SolverNotAvailableError(f"solver {self.name!r} is not available: "
                                          f"{INSTALL_HINTS[self.name]}")
        solver = self._instance()
        options = dict(self._solver_options(settings))
        options.update(settings.options)
        loaded = getattr(solver, "_model", None) is model
        t0 = time.perf_counter()
        try:
            with sigint_watch() as interrupted:
                results = solver.solve(
                    model, load_solutions=False, raise_exception_on_nonoptimal_result=False,
                    tee=settings.verbose, threads=settings.threads, rel_gap=settings.mip_gap,
                    time_limit=self._time_limit(settings, loaded), solver_options=options)
        except Exception as exc:
            self.reset()
            translated = self._translate_error(exc)
            if translated is not None:
                raise translated from exc
            raise SolverError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
        wall = time.perf_counter() - t0
        tc = results.termination_condition
        if interrupted() or tc == TerminationCondition.interrupted:
            self.reset()
            raise KeyboardInterrupt(f"{self.name}: the solve was interrupted (Ctrl-C)")
        has_solution = results.solution_status in (SolutionStatus.optimal,
                                                   SolutionStatus.feasible)
        if tc == TerminationCondition.convergenceCriteriaSatisfied and has_solution:
            status = Status.OPTIMAL
        elif tc in (TerminationCondition.provenInfeasible,
                    TerminationCondition.locallyInfeasible,
                    TerminationCondition.infeasibleOrUnbounded):
            status = Status.INFEASIBLE
        elif tc in (TerminationCondition.maxTimeLimit, TerminationCondition.iterationLimit,
                    TerminationCondition.interrupted, TerminationCondition.objectiveLimit,
                    TerminationCondition.minStepLength):
            status = Status.FEASIBLE if has_solution else Status.NO_SOLUTION
        else:
            status = Status.ERROR
        if has_solution and status is not Status.INFEASIBLE:
            results.solution_loader.load_vars()
        objective = finite(results.incumbent_objective) if has_solution else None
        solver_time = self._solver_time(results)
        if loaded and solver_time is not None:
            self._overhead = max(0.0, wall - solver_time)
        return SolveOutcome(status=status, objective=objective,
                            bound=finite(results.objective_bound),
                            solver_time=solver_time, wall_time=wall,
                            termination=tc.name)
