"""Backends: HiGHS and Gurobi through Pyomo's persistent interfaces, CBC and any other
solver through Pyomo's classic ``SolverFactory``.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from ..errors import SolverError, SolverLicenseError, SolverNotAvailableError
from ..results.status import Status
from .base import SolveOutcome, SolverBackend, SolverSettings, sigint_watch
from .pool import GUROBI_POOL_DEFAULTS, HighsIncumbents, gurobi_pool_options, read_gurobi_pool

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
#: the thread count of HiGHS's scheduler in this process (set by the last solve)
_HIGHS_THREADS: list[int | None] = []


def _finite(x: Any) -> float | None:
    """A finite number, or ``None`` (also for what a solver's log left undefined)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


class _ContribBackend(SolverBackend):
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
        objective = _finite(results.incumbent_objective) if has_solution else None
        solver_time = self._solver_time(results)
        if loaded and solver_time is not None:
            self._overhead = max(0.0, wall - solver_time)
        return SolveOutcome(status=status, objective=objective,
                            bound=_finite(results.objective_bound),
                            solver_time=solver_time, wall_time=wall,
                            termination=tc.name)


class HighsBackend(_ContribBackend):
    """HiGHS (open source, ``pip install highspy``), persistent.

    HiGHS runs with its own defaults but a MIP feasibility tolerance of 1e-7 (HiGHS's
    1e-6 let a network on raw units, logits of magnitude 1e4, prove 0.39668 optimal
    where 0.39658 is feasible, and with presolve on an XGBoost query prove 2 where 1
    is; differential seeds 4791, 5259). Its presolve is on: with it off, a logistic
    model with an integer feature of range 1e6 was proven infeasible at 1e-7 (seed
    2352). An earlier formulation met wrong optima with presolve on (2 of 250 Adult
    queries); none of 250 does now (``benchmarks/README.md``).
    """

    name = "highs"
    _pyomo_name = "highs"
    has_pool = True
    pool_kind = "HiGHS's improving incumbents of one solve (often fewer than asked)"

    def _solve(self, model: pyo.Block, settings: SolverSettings) -> SolveOutcome:
        # HiGHS starts one thread scheduler per process and refuses a solve with another
        # thread count ("global scheduler has already been initialized"): restart it
        if _HIGHS_THREADS and _HIGHS_THREADS[0] != settings.threads:
            import highspy

            highspy.Highs.resetGlobalScheduler(True)
        _HIGHS_THREADS[:] = [settings.threads]
        return super()._solve(model, settings)

    def _solve_from(self, model: pyo.Block, settings: SolverSettings, start: ComponentMap
                    ) -> SolveOutcome:
        """The start goes in at HiGHS's first call for a user solution (sparse and
        repaired: HiGHS completes it). Not by ``Highs::setSolution`` before the run:
        HiGHS then maps the start into its presolved space, reports the objective of the
        point it finds there and returns the start's own values (a forest on German:
        0.16083 reported, 0.16304 loaded)."""
        if not self.available():
            raise SolverNotAvailableError(f"solver {self.name!r} is not available: "
                                          f"{INSTALL_HINTS[self.name]}")
        solver = self._instance()
        if solver._model is not model:  # loading counts in the time limit
            t0 = time.perf_counter()
            solver.set_instance(model)
            solver._solver_model.setOptionValue("output_flag", False)  # as HighsIncumbents
            if settings.time_limit is not None:
                settings = dataclasses.replace(settings, time_limit=max(
                    settings.time_limit - (time.perf_counter() - t0),
                    0.1 * settings.time_limit))
        columns = solver._pyomo_var_to_solver_var_map
        given = [(columns[id(var)], value) for var, value in start.items()
                 if id(var) in columns]
        index = np.array([j for j, _ in given], dtype=np.int32)
        values = np.array([v for _, v in given], dtype=np.float64)
        sent: list[bool] = []

        def offer(event: Any) -> None:
            if given and not sent:
                sent.append(True)
                event.data_in.setSolution(index, values)
                event.data_in.repairSolution()

        highs = solver._solver_model
        highs.cbMipUserSolution.subscribe(offer)
        try:
            return self._solve(model, settings)
        finally:
            highs.cbMipUserSolution.unsubscribe(offer)

    def _solver_options(self, settings: SolverSettings) -> dict[str, Any]:
        opts: dict[str, Any] = {"output_flag": settings.verbose,
                                "mip_feasibility_tolerance": 1e-7}
        if settings.seed is not None:
            opts["random_seed"] = settings.seed
        return opts

    def solve_pool(self, model: pyo.Block, settings: SolverSettings, size: int, *,
                   mode: int = 2, gap: float | None = None) -> tuple[SolveOutcome, list]:
        """The last ``size`` improving incumbents of one solve (``mode``, ``gap``: not
        applicable to HiGHS)."""
        if not self.available():
            raise SolverNotAvailableError(f"solver {self.name!r} is not available: "
                                          f"{INSTALL_HINTS[self.name]}")
        solver = self._instance()
        if solver._model is not model:
            solver.set_instance(model)
        with HighsIncumbents(solver) as incumbents:
            outcome = self._solve(model, settings)
        return outcome, incumbents.members(size) if outcome.status.has_solution else []


class GurobiBackend(_ContribBackend):
    """Gurobi (``pip install gurobipy``), persistent.

    The pip licence is size-limited (2000 variables / constraints); a larger model
    raises :class:`SolverLicenseError` instead of Gurobi's error 10010.

    Gurobi runs with an integrality tolerance of 1e-7 (the other backends' value) instead
    of its 1e-5: a binary 1e-5 away from 0 lets a ReLU through 1e-5 of its range, which a
    network on raw units amplifies to 0.4 in its output, beyond any margin (Gurobi
    returned the factual as "optimal", seed 7390), and an optimality tolerance of 1e-9
    (its least) instead of 1e-6: on an integer code column of range 1e5, which integrality
    keeps unscaled, 1e-6 on a reduced cost is 0.1 on the objective (seed 21235).
    """

    name = "gurobi"
    _pyomo_name = "gurobi_persistent"
    has_pool = True

    def solve_pool(self, model: pyo.Block, settings: SolverSettings, size: int, *,
                   mode: int = 2, gap: float | None = None) -> tuple[SolveOutcome, list]:
        """Gurobi's solution pool (``PoolSearchMode`` ``mode``, ``PoolGap`` ``gap``)."""
        pool = gurobi_pool_options(size, mode, gap)
        outcome = self._solve(model, dataclasses.replace(
            settings, options={**pool, **settings.options}))
        solver = self._instance()
        try:
            return outcome, read_gurobi_pool(solver) if outcome.status.has_solution else []
        finally:
            if solver._solver_model is not None:
                for key, value in GUROBI_POOL_DEFAULTS.items():
                    solver._solver_model.setParam(key, value)

    def _solver_options(self, settings: SolverSettings) -> dict[str, Any]:
        opts: dict[str, Any] = {"OutputFlag": int(settings.verbose), "IntFeasTol": 1e-7,
                                "OptimalityTol": 1e-9}
        if settings.seed is not None:
            opts["Seed"] = settings.seed
        return opts

    def _solver_time(self, results: Any) -> float | None:
        return getattr(results.timing_info, "gurobi_time", None)

    def _translate_error(self, exc: Exception) -> Exception | None:
        if getattr(exc, "errno", None) == 10010 or "size-limited" in str(exc):
            return SolverLicenseError(
                f"Gurobi refused the model: its licence is size-limited ({exc}). Use "
                f"solver='highs', reduce the model, or install a full Gurobi licence")
        if getattr(exc, "errno", None) in (10009, 10032):
            return SolverLicenseError(f"Gurobi licence problem: {exc}")
        return None


#: options cfopt sets by default on classic solvers (the user's ``solver_options`` win).
#: CBC 2.10 proved wrong optima with its defaults, each found by the differential harness
#: (``benchmarks/differential_findings.py``) and gone with the option turned off:
#: its preprocessing fixed 12 binaries of a restricted tree query wrongly (0.0528
#: "optimal" where HiGHS, Gurobi and CBC without it prove 0.0414; cf. coin-or/Cbc#283,
#: #724); its objective ``increment`` pruned nodes that could improve the incumbent by
#: less than its estimate of the objective's granularity (8.216e-5 where 8.106e-5 is
#: feasible); its cuts cut the optimum off a network query (1.0 where 0.374 is
#: feasible) and a multiclass linear one; at its integrality tolerance (1e-7) it proved a
#: query of a network with big-M constants of 4e5 infeasible (1e-7 x 4e5 is 40x the
#: validity margin): 1e-8
_LEGACY_DEFAULTS = {"cbc": {"preprocess": "off", "increment": 0, "cuts": "off",
                            "integerTolerance": 1e-8}}
#: option names of classic Pyomo solvers: (time limit, relative gap, threads, seed)
_LEGACY_OPTIONS = {
    "cbc": ("sec", "ratioGap", "threads", "randomCbcSeed"),
    "glpk": ("tmlim", "mipgap", None, None),
    "cplex": ("timelimit", "mip_tolerances_mipgap", "threads", "randomseed"),
    "scip": ("limits/time", "limits/gap", "parallel/maxnthreads", "randomization/randomseedshift"),
}


class LegacyBackend(SolverBackend):
    """Any solver of Pyomo's classic ``SolverFactory`` (CBC, GLPK, SCIP, CPLEX ...).

    The model is written to a file and re-sent on every solve.
    """

    persistent = False

    def __init__(self, name: str) -> None:
        self.name = name
        self._opt = pyo.SolverFactory(name)

    def available(self) -> bool:
        try:
            return bool(self._opt.available(exception_flag=False))
        except Exception:  # the plugin may fail to locate its executable
            return False

    def _options(self, settings: SolverSettings) -> dict[str, Any]:
        names = _LEGACY_OPTIONS.get(self.name)
        opts: dict[str, Any] = {}
        if names is None:
            if settings.time_limit is not None:
                raise ValueError(f"cfopt does not know the time-limit option of solver "
                                 f"{self.name!r}; pass it through options={{...}} instead")
            return dict(settings.options)
        t, gap, threads, seed = names
        opts.update(_LEGACY_DEFAULTS.get(self.name, {}))
        if settings.time_limit is not None:
            opts[t] = settings.time_limit
        opts[gap] = settings.mip_gap
        if threads and settings.threads is not None:
            opts[threads] = settings.threads
        if seed and settings.seed is not None:
            opts[seed] = settings.seed
        opts.update(settings.options)
        return opts

    def _solve(self, model: pyo.Block, settings: SolverSettings) -> SolveOutcome:
        from pyomo.opt import SolverStatus
        from pyomo.opt import TerminationCondition as TC

        if not self.available():
            hint = INSTALL_HINTS.get(self.name, "install it and put it on PATH")
            raise SolverNotAvailableError(f"solver {self.name!r} is not available: {hint}")
        from pyomo.common.errors import ApplicationError
        from pyomo.common.log import LoggingIntercept

        options = self._options(settings)
        t0 = time.perf_counter()
        log = io.StringIO()
        try:
            with LoggingIntercept(log, "pyomo.opt", logging.ERROR), \
                    sigint_watch() as interrupted:
                results = self._opt.solve(model, load_solutions=False, tee=settings.verbose,
                                          options=options)
        except ApplicationError as exc:
            # the solver process died (e.g. CBC 2.10 with preprocessing off segfaults while
            # writing the solution of some infeasible problems): no claim, an ERROR status
            return SolveOutcome(
                status=Status.ERROR, objective=None, bound=None, solver_time=None,
                wall_time=time.perf_counter() - t0, termination="crashed",
                message=f"{self.name} crashed ({' '.join(log.getvalue().split())[:200] or exc});"
                        f" nothing is claimed: try another solver or other solver_options")
        except Exception as exc:
            raise SolverError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
        wall = time.perf_counter() - t0
        tc = results.solver.termination_condition
        if interrupted() or tc == TC.userInterrupt:  # the solver caught Ctrl-C
            raise KeyboardInterrupt(f"{self.name}: the solve was interrupted (Ctrl-C)")
        # "Stopped on time (no integer solution - continuous used)": the values are the
        # LP relaxation's, not a solution
        has_solution = len(results.solution) > 0 and tc not in (
            TC.infeasible, TC.invalidProblem, TC.solverFailure, TC.internalSolverError,
            TC.intermediateNonInteger)
        if tc == TC.optimal and has_solution:
            status = Status.OPTIMAL
        elif tc in (TC.infeasible, TC.infeasibleOrUnbounded):
            status = Status.INFEASIBLE
        elif tc in (TC.maxTimeLimit, TC.maxIterations, TC.maxEvaluations,
                    TC.intermediateNonInteger, TC.feasible, TC.other) and \
                results.solver.status in (SolverStatus.ok, SolverStatus.aborted,
                                          SolverStatus.warning):
            status = Status.FEASIBLE if has_solution else Status.NO_SOLUTION
        else:
            status = Status.ERROR
        objective = None
        message = ""
        active_objective = next(model.component_data_objects(pyo.Objective, active=True))
        if has_solution and status.has_solution:
            missing = _load_complete(model, results, active_objective)
            if missing:
                # e.g. CBC: "Postprocessed model is infeasible - possible tolerance issue",
                # then "Optimal" with no variable values
                message = (f"{self.name} reported {tc} but returned no value for "
                           f"{len(missing)} variable(s) of the objective (e.g. {missing[0]}); "
                           f"the solve is not trusted (a tolerance issue in the solver)")
                status = Status.ERROR
            else:
                objective = pyo.value(active_objective)
        sense_min = active_objective.sense == pyo.minimize
        bound = results.problem.lower_bound if sense_min else results.problem.upper_bound
        bound = _finite(bound)
        if status is Status.OPTIMAL and objective is not None:
            # the solver claims optimality within the relative gap (or its absolute gap,
            # 1e-10 for CBC): that is the bound it proved. The bound classic interfaces
            # parse from logs is not: Pyomo sets CBC's to the objective itself when the
            # log gives no gap (a false bound when CBC stopped on the relative gap)
            slack = max(settings.mip_gap * abs(objective), 1e-10)
            bound = objective - slack if sense_min else objective + slack
        solver_time = getattr(results.solver, "wallclock_time", None) or \
            getattr(results.solver, "time", None)
        if status is Status.ERROR:
            bound = None
        return SolveOutcome(status=status, objective=objective, bound=bound,
                            solver_time=_finite(solver_time), wall_time=wall,
                            termination=str(tc), message=message)


def _load_complete(model: pyo.Block, results: Any, objective: Any) -> list[str]:
    """Load the results' values into ``model`` after clearing every free variable (so no
    value of an earlier solve survives); returns the objective's variables left without
    a value (empty when the solution is complete)."""
    from pyomo.core.expr.visitor import identify_variables

    for var in model.component_data_objects(pyo.Var, descend_into=True):
        if not var.fixed:
            var.set_value(None, skip_validation=True)
    model.solutions.load_from(results)
    return [v.name for v in identify_variables(objective.expr, include_fixed=False)
            if v.value is None]


#: backends that live in their own subpackage, by name (they register themselves on
#: import, so this module need not import what they build on: ``cfopt.solvers.cpsat``)
REGISTERED_BACKENDS: dict[str, Callable[[], SolverBackend]] = {}


def register_backend(name: str, factory: Callable[[], SolverBackend]) -> None:
    """Let ``make_solver(name)`` build a backend with ``factory``."""
    REGISTERED_BACKENDS[name] = factory


def make_solver(solver: str | SolverBackend) -> SolverBackend:
    """A backend by name: ``"highs"`` (default), ``"gurobi"``, ``"cbc"``, ``"cpsat"``
    (tree ensembles: :mod:`cfopt.solvers.cpsat`) or any classic Pyomo solver name.
    Raises ``ValueError`` for an unknown name and :class:`SolverNotAvailableError`
    (with install instructions) for a missing solver.
    """
    if isinstance(solver, SolverBackend):
        return solver
    if not isinstance(solver, str):
        raise TypeError(f"solver must be a name or a SolverBackend, got {type(solver).__name__}")
    name = solver.strip().lower()
    backend: SolverBackend
    if name in ("highs", "appsi_highs"):
        backend = HighsBackend()
    elif name in ("gurobi", "gurobi_persistent", "gurobi_direct"):
        backend = GurobiBackend()
    elif name in REGISTERED_BACKENDS:
        backend = REGISTERED_BACKENDS[name]()
    else:
        from pyomo.common.log import LoggingIntercept
        from pyomo.opt.base.solvers import UnknownSolver

        with LoggingIntercept(level=logging.ERROR):  # Pyomo logs a traceback for a bad name
            legacy = LegacyBackend(name)
        if isinstance(legacy._opt, UnknownSolver):
            raise ValueError(f"unknown solver {solver!r}: use 'highs', 'gurobi', 'cbc', 'cpsat' "
                             f"or the name of a solver known to Pyomo's SolverFactory")
        backend = legacy
    if not backend.available():
        hint = INSTALL_HINTS.get(backend.name, "install it and put it on PATH")
        raise SolverNotAvailableError(f"solver {backend.name!r} is not available: {hint}")
    return backend
