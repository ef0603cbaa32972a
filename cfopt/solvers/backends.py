"""Backends: Gurobi through Pyomo's persistent interface (HiGHS: :mod:`cfopt.solvers.highs`),
CBC and any other solver through Pyomo's classic ``SolverFactory``.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import time
from collections.abc import Callable
from typing import Any

import pyomo.environ as pyo

from ..errors import SolverError, SolverLicenseError, SolverNotAvailableError
from ..results.status import Status
from .base import SolveOutcome, SolverBackend, SolverSettings, sigint_watch
from .contrib import INSTALL_HINTS, ContribBackend, finite
from .highs import HighsBackend
from .pool import GUROBI_POOL_DEFAULTS, gurobi_pool_options, read_gurobi_pool

__all__ = ["GurobiBackend", "HighsBackend", "LegacyBackend", "make_solver", "register_backend"]


class GurobiBackend(ContribBackend):
    """Gurobi (``pip install gurobipy``), persistent.

    The pip licence is size-limited (2000 variables / constraints); a larger model
    raises :class:`SolverLicenseError` instead of Gurobi's error 10010.

    Gurobi runs with an integrality tolerance of 1e-7 (the other backends' value) instead
    of its 1e-5: a binary 1e-5 away from 0 lets a ReLU through 1e-5 of its range, which a
    network on raw units amplifies to 0.4 in its output, beyond any margin (Gurobi
    returned the factual as "optimal", seed 7390), and an optimality tolerance of 1e-9
    (its least) instead of 1e-6: on an integer code column of range 1e5, which integrality
    keeps unscaled, 1e-6 on a reduced cost is 0.1 on the objective (seed 21235); and a
    feasibility tolerance of 1e-8 (HiGHS's MIP feasibility tolerance here) instead of
    1e-6: on an MLP regressor over an input of magnitude 5e5, 1e-6 per row left the
    output 7e-5 off, and Gurobi proved 0.0137922 optimal where 0.0137890 meets the
    margin (seed 200408).
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
                                "OptimalityTol": 1e-9, "FeasibilityTol": 1e-8}
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
#: validity margin): 1e-8; at its primal tolerance (1e-7) its LP presolve gave a network
#: query with an integer feature of range 9e5 a root LP bound of 0.0352 where the LP
#: relaxation's is 0, and proved 0.0352 optimal where 0.0165 is feasible (seed 72074):
#: 1e-9 (presolve off fixed it too, but made CBC prove wrong optima on three linear
#: models, seeds 75107, 75149, 75321)
_LEGACY_DEFAULTS = {"cbc": {"preprocess": "off", "increment": 0, "cuts": "off",
                            "integerTolerance": 1e-8, "primalTolerance": 1e-9}}
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
        bound = finite(bound)
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
                            solver_time=finite(solver_time), wall_time=wall,
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
