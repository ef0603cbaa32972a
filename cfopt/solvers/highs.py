"""HiGHS, its model loaded and kept up to date by Pyomo's persistent interface and run
directly (here, or, for a solve with a time limit on a large model, in a child process
that is ended at the limit: :mod:`cfopt.solvers.isolated`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from ..errors import SolverError, SolverNotAvailableError
from ..results.status import Status
from .base import SolveOutcome, SolverSettings, sigint_watch, time_left
from .contrib import INSTALL_HINTS, ContribBackend, finite
from .highs_persistent import persistent_highs
from .highs_start import COMPLETION_SECONDS, starting_from
from .isolated import (
    ChildRun,
    ForkError,
    isolation_available,
    run_on_thread,
    solve_in_child,
)
from .pool import HighsIncumbents

#: the thread count of HiGHS's scheduler in this process (set by the last solve)
_HIGHS_THREADS: list[int | None] = []

#: HiGHS's final model status -> (Pyomo's name of the termination, cfopt's status with a
#: solution, without one); any other status is an error
_TERMINATIONS = {
    "kOptimal": ("convergenceCriteriaSatisfied", Status.OPTIMAL, Status.ERROR),
    "kInfeasible": ("provenInfeasible", Status.INFEASIBLE, Status.INFEASIBLE),
    "kUnboundedOrInfeasible": ("infeasibleOrUnbounded", Status.INFEASIBLE, Status.INFEASIBLE),
    "kTimeLimit": ("maxTimeLimit", Status.FEASIBLE, Status.NO_SOLUTION),
    "kIterationLimit": ("iterationLimit", Status.FEASIBLE, Status.NO_SOLUTION),
    "kSolutionLimit": ("iterationLimit", Status.FEASIBLE, Status.NO_SOLUTION),
    "kObjectiveBound": ("objectiveLimit", Status.FEASIBLE, Status.NO_SOLUTION),
    "kObjectiveTarget": ("objectiveLimit", Status.FEASIBLE, Status.NO_SOLUTION),
}


class HighsBackend(ContribBackend):
    """HiGHS (open source, ``pip install highspy``), persistent.

    HiGHS runs with its own defaults but a MIP feasibility tolerance of 1e-8. HiGHS's
    1e-6 let a network on raw units, logits of magnitude 1e4, prove 0.39668 optimal
    where 0.39658 is feasible, and with presolve on an XGBoost query prove 2 where 1 is
    (differential seeds 4791, 5259). 1e-7 let its presolve prove 0.25 optimal on a
    3-class LightGBM query whose factual lies 8.3e-8 (in the feature's range units)
    below a split: within that tolerance the factual is on both sides of the split,
    presolve settled it on the wrong one and lost the optimum, 0.175, that keeps the
    feature (seed 75232; right at 3e-8 or below, or with presolve off; no presolve rule
    off fixes it without breaking another seed). 1e-9 is too tight: HiGHS proved the
    PROPLACE master of two HELOC queries infeasible (Table 1 queries 38 and 44, with one
    and two shifted copies) that it, and Gurobi, solve at 1e-7 and 1e-8. Its presolve is
    on: with it off, a logistic model with an integer feature of range 1e6 was proven
    infeasible at 1e-7 (seed 2352). An earlier formulation met wrong optima with
    presolve on (2 of 250 Adult queries); none of 250 does now
    (``benchmarks/README.md``). Its restarts are off: on a small sklearn MLP
    (coefficients 1e4 on an input in [0, 1]) the root LP bound was the optimum,
    0.099106, and after the restart, which re-presolves with the columns fixed by
    reduced cost, HiGHS proved 0.099974 (differential seed 21184; right with restarts or
    presolve off). Its sub-MIP heuristics (RINS, RENS, root reduced cost) are off: at
    that tolerance HiGHS 1.16.0 can loop without end, past any limit, in a sub-MIP's
    presolve (``HPresolve::strengthenInequalities``, whose inner loop never looks at
    the clock): a German MLP pipeline query from its heuristic start (root reduced cost;
    ``tests/test_highs_hang.py``), a German network's whole problem (RENS within RINS).
    A solve with a time limit of a model of at least ``ISOLATE_MIN_COLUMNS`` columns runs
    in a forked child that is killed at the limit (plus 0.25 s), keeping the incumbents
    and bound it streamed (:mod:`cfopt.solvers.isolated`): HiGHS's root separation and
    sub-MIPs do not look at its clock (a default ExtraTrees forest on Adult: 35 s past a
    15 s limit; a default MLPClassifier on Adult: 14 min past a 60 s limit in a sub-MIP's
    presolve, ``strengthenInequalities``). The time to load the model counts in the limit.

    Args:
        isolate: ``True``: every solve with a time limit runs in a child; ``False``: none
            does; ``None`` (default): those of models of ``ISOLATE_MIN_COLUMNS`` columns
            or more. Only on Linux (elsewhere every solve runs in this process).
    """

    name = "highs"
    _pyomo_name = "highs"
    has_pool = True
    pool_kind = "HiGHS's improving incumbents of one solve (often fewer than asked)"
    #: the least columns of a model whose solves with a time limit run in a child (the
    #: fork costs a few milliseconds, ``benchmarks/README.md``, 10-15 % of a default
    #: MLPClassifier's queries on raw Adult; in process, HiGHS 1.16 ran past the limit
    #: without end in a RINS sub-MIP's presolve on that model's 726 columns)
    ISOLATE_MIN_COLUMNS = 500

    def __init__(self, isolate: bool | None = None) -> None:
        super().__init__()
        if isolate is not None and not isinstance(isolate, bool):
            raise TypeError(f"isolate must be True, False or None, got {isolate!r}")
        self.isolate = isolate
        #: the improving incumbents a child streamed in the last solve, ``(objective, x)``
        self._streamed: list[tuple[float, np.ndarray]] = []

    def _instance(self) -> Any:
        if self._solver is None:
            self._solver = persistent_highs()
        return self._solver

    def solve(self, model: pyo.Block, settings: SolverSettings | None = None,
              start: ComponentMap | None = None, cutoff: float | None = None
              ) -> SolveOutcome:
        """:meth:`SolverBackend.solve <cfopt.solvers.SolverBackend.solve>`, with an
        infeasibility confirmed by a second solve with presolve off in the time left
        (when there is some; its point, if it finds one, is the answer). HiGHS 1.16's
        presolve proved infeasible a logistic query with an integer feature of range
        1e6, one change allowed, whose optimum 0.51302 the solve without presolve, CBC
        and Gurobi find (differential seed 162554; right with any one of presolve rules
        12, 13 or 17 off, but rule 12 off then proved a worse point optimal)."""
        settings = settings or SolverSettings()
        t0 = time.perf_counter()
        outcome = super().solve(model, settings, start, cutoff)
        left = time_left(settings, t0)
        if outcome.status is not Status.INFEASIBLE or left is None or \
                settings.options.get("presolve") == "off":
            return outcome
        again = super().solve(model, dataclasses.replace(
            left, options={**settings.options, "presolve": "off"}), start)
        return dataclasses.replace(again, wall_time=time.perf_counter() - t0)

    def _solve(self, model: pyo.Block, settings: SolverSettings, updated: bool = False
               ) -> SolveOutcome:
        """In a child (a time limit, Linux, ``isolate`` not ``False``) or here
        (``updated``: HiGHS holds ``model`` as it is; Pyomo's ``update`` of a per-query
        forest's region took 0.2-1 s when nothing had changed)."""
        self._streamed = []
        if settings.time_limit is not None and self.isolate is not False and \
                isolation_available():
            return self._solve_isolated(model, settings, settings.time_limit, updated)
        return self._solve_here(model, settings, updated)

    def _solve_here(self, model: pyo.Block, settings: SolverSettings,
                    updated: bool = False) -> SolveOutcome:
        """The solve in this process, on the HiGHS model Pyomo keeps loaded (``updated``:
        it is up to date): the changes sent by Pyomo's ``update``, then HiGHS's ``run``
        called here and its answer read as a child's (:meth:`_outcome`). Pyomo's
        ``solve`` around the same run costs about 2.5 ms more per call (a copy of its
        configuration, the solver's output captured through a pipe, a results object,
        every variable marked stale): 0.5 s of the 222 HiGHS solves of Adult's 50 Table 1
        queries, where HiGHS itself ran 2.0 s."""
        t0 = time.perf_counter()
        solver, loaded = self._ready(model, settings, updated)
        highs = solver._solver_model
        run_time = self._run_here(highs)
        info = highs.getInfo()
        found = info.primal_solution_status == 2  # 2: feasible
        x = np.array(highs.getSolution().col_value, dtype=float) if found else None
        scored = solver._objective is not None  # without one, no objective or bound
        outcome = self._outcome(ChildRun(
            status=highs.getModelStatus().name,
            objective=float(info.objective_function_value) if found and scored else None,
            bound=finite(info.mip_dual_bound) if scored else None, x=x,
            node_count=int(info.mip_node_count), run_time=run_time),
            time.perf_counter() - t0)
        if outcome.status.has_solution:
            self._load(x)
        if loaded:
            self._overhead = max(0.0, outcome.wall_time - run_time)
        return outcome

    def ranges(self, model: pyo.Block, variables: list[pyo.Var], settings: SolverSettings
               ) -> list[tuple[float | None, float | None]]:
        """:meth:`SolverBackend.ranges <cfopt.solvers.SolverBackend.ranges>` on the loaded
        HiGHS model: each side one run with the variable's column alone in the costs,
        from the last run's basis (a Pyomo objective per side cost 4 ms of updates and
        solve machinery, about ten times the LP); the model's own costs restored. A
        variable in no constraint ranges over its own bounds."""
        solver, _ = self._ready(model, settings)
        highs = solver._solver_model
        columns = solver._pyomo_var_to_solver_var_map
        lp = highs.getLp()
        n = highs.getNumCol()
        costs, sense, offset = np.array(lp.col_cost_, dtype=float), lp.sense_, lp.offset_
        everything = np.arange(n, dtype=np.int32)
        optimal = type(highs.getModelStatus()).kOptimal
        found: list[tuple[float | None, float | None]] = []
        try:
            highs.changeColsCost(n, everything, np.zeros(n))
            highs.changeObjectiveSense(type(sense).kMinimize)
            highs.changeObjectiveOffset(0.0)
            for var in variables:
                j = columns.get(id(var))
                if j is None:
                    found.append((var.lb, var.ub))
                    continue
                sides: list[float | None] = []
                for sign in (1.0, -1.0):  # min x_j, then max x_j as -min(-x_j)
                    highs.changeColCost(j, sign)
                    self._run_here(highs)
                    sides.append(sign * float(highs.getInfo().objective_function_value)
                                 if highs.getModelStatus() == optimal else None)
                highs.changeColCost(j, 0.0)
                found.append((sides[0], sides[1]))
        finally:
            highs.changeColsCost(n, everything, costs)
            highs.changeObjectiveSense(sense)
            highs.changeObjectiveOffset(offset)
        return found

    def _ready(self, model: pyo.Block, settings: SolverSettings, updated: bool = False
               ) -> tuple[Any, bool]:
        """The Pyomo solver holding ``model`` up to date (loaded now if it was not;
        ``updated``: it is), HiGHS's options set for a run under ``settings``; whether
        it was loaded before."""
        # HiGHS starts one thread scheduler per process and refuses a solve with another
        # thread count ("global scheduler has already been initialized"): restart it
        if _HIGHS_THREADS and _HIGHS_THREADS[0] != settings.threads:
            import highspy

            highspy.Highs.resetGlobalScheduler(True)
        _HIGHS_THREADS[:] = [settings.threads]
        solver, settings, loaded = self._up_to_date(model, settings, updated)
        options = {**self._solver_options(settings), "log_to_console": settings.verbose,
                   "time_limit": self._time_limit(settings, loaded),
                   "mip_rel_gap": settings.mip_gap, **settings.options}
        if settings.threads is not None:
            options["threads"] = settings.threads
        highs = solver._solver_model
        for key, value in options.items():
            highs.setOptionValue(key, value)
        return solver, loaded

    def _up_to_date(self, model: pyo.Block, settings: SolverSettings, updated: bool = False
                    ) -> tuple[Any, SolverSettings, bool]:
        """The Pyomo solver holding ``model`` up to date (loaded now if it was not, the
        loading counted in the time limit; ``updated``: it already is), the settings
        with the time left, and whether the model was loaded before. An error, or Ctrl-C,
        while Pyomo sends the changes forgets the loaded model (Pyomo's record of what
        HiGHS holds may be half done)."""
        loaded = self._solver is not None and self._solver._model is model
        try:
            solver, settings = self._loaded(model, settings)
            if loaded and not updated:
                solver.update()
        except KeyboardInterrupt:
            self.reset()
            raise
        except Exception as exc:
            self.reset()
            raise SolverError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
        return solver, settings, loaded

    def _run_here(self, highs: Any) -> float:
        """HiGHS's ``run`` in this process; its seconds. Ctrl-C cancels it and is raised
        again; an error of HiGHS forgets the loaded model."""
        highs.HandleKeyboardInterrupt = True  # highspy cancels the run on Ctrl-C
        try:
            with sigint_watch() as interrupted:
                started = time.perf_counter()
                highs.run()
                run_time = time.perf_counter() - started
        except Exception as exc:
            self.reset()
            raise SolverError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
        if interrupted():
            self.reset()
            raise KeyboardInterrupt(f"{self.name}: the solve was interrupted (Ctrl-C)")
        return run_time

    def _solve_isolated(self, model: pyo.Block, settings: SolverSettings, limit: float,
                        updated: bool = False) -> SolveOutcome:
        """Load (or update, unless ``updated``) the model here, then solve it in a child
        killed at the time ``limit``, which counts from this call (the loading
        included); a small model (``isolate`` ``None``) is solved here instead."""
        t0 = time.perf_counter()
        solver, _, _ = self._up_to_date(model, settings, updated)
        highs = solver._solver_model
        if self.isolate is None and highs.getNumCol() < self.ISOLATE_MIN_COLUMNS:
            return self._solve_here(model, settings, updated=True)
        deadline = t0 + limit
        left = deadline - time.perf_counter()
        if left <= 0:
            return SolveOutcome(Status.NO_SOLUTION, None, None, None,
                                time.perf_counter() - t0, "maxTimeLimit",
                                message="loading the model took the time limit")
        options = {**self._solver_options(settings), "time_limit": left,
                   "mip_rel_gap": settings.mip_gap, **settings.options}
        if settings.threads is not None:
            options["threads"] = settings.threads
        for key, value in options.items():
            highs.setOptionValue(key, value)
        sense = next(model.component_data_objects(pyo.Objective, active=True)).sense
        try:
            run = solve_in_child(highs, deadline, sense == pyo.minimize, self._run)
        except ForkError:  # no process to be had (memory, process limit): solve here
            return self._solve_here(model, dataclasses.replace(
                settings, time_limit=max(deadline - time.perf_counter(), 0.1 * limit)))
        self._streamed = run.solutions
        outcome = self._outcome(run, time.perf_counter() - t0)
        if outcome.status.has_solution:
            self._load(run.x)
        if run.run_time is not None:
            self._overhead = max(0.0, outcome.wall_time - run.run_time)
        return outcome

    def _run(self, highs: Any) -> None:
        """Run HiGHS in the child (on a thread of its own)."""
        run_on_thread(highs)

    def _outcome(self, run: ChildRun, wall: float) -> SolveOutcome:
        """The outcome of a child's solve: HiGHS's own answer, or, from a child killed at
        the limit or dead, its last streamed incumbent (``FEASIBLE``) with the best
        streamed bound (none from a dead child: nothing it said is trusted but a point,
        which the caller verifies)."""
        found = run.x is not None
        if run.status is not None:
            name, with_point, without = _TERMINATIONS.get(
                run.status, (run.status, Status.ERROR, Status.ERROR))
            status = with_point if found else without
            bound = run.bound
            if run.node_count == -1:  # an LP: its optimum is its bound
                bound = run.objective if status is Status.OPTIMAL else None
            return SolveOutcome(status, run.objective if found else None, finite(bound),
                                run.run_time, wall, name)
        if run.killed:
            return SolveOutcome(
                Status.FEASIBLE if found else Status.NO_SOLUTION, run.objective, run.bound,
                None, wall, "maxTimeLimit",
                message="HiGHS went on past its time limit: its process was ended at the "
                        "limit, its best incumbent and bound kept")
        kept = "its last incumbent is kept, no bound" if found else "nothing is claimed"
        return SolveOutcome(Status.FEASIBLE if found else Status.ERROR, run.objective, None,
                            None, wall, "crashed",
                            message=f"HiGHS's process died ({run.crashed}); {kept}")

    def _load(self, x: np.ndarray) -> None:
        """Put the column values ``x`` into the loaded model's variables (those the
        constraints or the objective use, as Pyomo's own loader)."""
        solver = self._solver
        columns = solver._pyomo_var_to_solver_var_map
        for vid, (cons, sos, obj) in solver._referenced_variables.items():
            if cons or sos or obj is not None:
                solver._vars[vid][0].set_value(float(x[columns[vid]]), skip_validation=True)

    def _loaded(self, model: pyo.Block, settings: SolverSettings) -> tuple[Any, SolverSettings]:
        """The Pyomo solver holding ``model`` (loaded now if it was not: the loading
        counts in the time limit, at least a tenth of which is left)."""
        if not self.available():
            raise SolverNotAvailableError(f"solver {self.name!r} is not available: "
                                          f"{INSTALL_HINTS[self.name]}")
        solver = self._instance()
        if solver._model is not model:
            t0 = time.perf_counter()
            solver.set_instance(model)
            solver._solver_model.setOptionValue("output_flag", False)  # as HighsIncumbents
            if settings.time_limit is not None:
                settings = dataclasses.replace(settings, time_limit=max(
                    settings.time_limit - (time.perf_counter() - t0),
                    0.1 * settings.time_limit))
        return solver, settings

    def _solve_from(self, model: pyo.Block, settings: SolverSettings, start: ComponentMap
                    ) -> SolveOutcome:
        """The start goes in at HiGHS's first call for a user solution: whole when it
        gives every integer column (:func:`~.highs_start.starting_from`), else sparse and
        repaired (HiGHS completes it). Not by ``Highs::setSolution`` before the run:
        HiGHS then maps the start into its presolved space, reports the objective of the
        point it finds there and returns the start's own values (a forest on German:
        0.16083 reported, 0.16304 loaded). In a child solve, the child makes the call."""
        solver, settings, _ = self._up_to_date(model, settings)
        columns = solver._pyomo_var_to_solver_var_map
        given = [(columns[id(var)], value) for var, value in start.items()
                 if id(var) in columns]
        index = np.array([j for j, _ in given], dtype=np.int32)
        values = np.array([v for _, v in given], dtype=np.float64)
        t0 = time.perf_counter()
        limit = settings.time_limit
        seconds = COMPLETION_SECONDS if limit is None else min(COMPLETION_SECONDS, 0.1 * limit)
        with starting_from(solver._solver_model, index, values, seconds):
            if limit is not None:  # the completion counts in the limit
                settings = dataclasses.replace(settings, time_limit=max(
                    limit - (time.perf_counter() - t0), 0.9 * limit))
            return self._solve(model, settings, updated=True)

    def limit_counts_loading(self, columns: int) -> bool:
        """A solve in a child (:meth:`_solve_isolated`) counts the loading in its limit:
        with ``isolate`` on Linux, for models of ``ISOLATE_MIN_COLUMNS`` columns or more
        unless ``isolate`` is ``True``."""
        return self.isolate is not False and isolation_available() and (
            self.isolate is True or columns >= self.ISOLATE_MIN_COLUMNS)

    def light_heuristics(self) -> dict[str, Any]:
        """Feasibility jump off (the sub-MIPs, RENS, RINS and the root reduced-cost one,
        are off for every solve: class docstring). HiGHS
        spent most of a hard PROPLACE master's time in them (a HELOC master with two
        shifted copies: 1.53 of 2.07 s in 26 sub-MIPs). Re-solved alone, the masters of
        the first 10 Table 1 queries took 23.7 s with them and 12.7 s without on HELOC,
        3.3 and 1.4 s on COMPAS, 2.2 and 1.6 s on Adult, to the same optima
        (``benchmarks/proplace_masters.py``)."""
        return {"mip_heuristic_run_feasibility_jump": False}

    def tree_options(self) -> dict[str, Any]:
        """Probing off in presolve (``presolve_rule_off`` bit 15, HiGHS's
        ``kPresolveRuleProbing``). On a per-query region of a 50-tree forest on raw
        Adult (723 leaves, 8,258 rows) probing took 14.6 of the solve's 16.8 s and its
        presolve 0.5 s without it (2.4 s in all, the same optimum); a region of 245 leaves
        took 0.4 s with it: probing grows far faster than the region. Default random
        forest on raw Adult, interleaved, one run each (exploratory, ``/tmp`` scripts):
        plain queries 1.16 / 1.00 s median over 10 rows; with a rule that moves the
        optimum far (capital-gain may not rise), 228 s / 166 s in all over 6 rows, 2 / 4
        proven optimal within 60 s."""
        return {"presolve_rule_off": 1 << 15}

    def cutoff_options(self, cutoff: float) -> dict[str, Any]:
        """HiGHS's ``objective_bound``: its branch and bound discards every point at or
        above it; with none below, HiGHS reports the model infeasible (a Table 1 HELOC
        master: infeasible at its optimum exactly, optimal at 1 + 1e-9 times it), which
        :meth:`SolverBackend.solve <cfopt.solvers.SolverBackend.solve>` answers with a
        solve without it."""
        return {"objective_bound": float(cutoff)}

    def _solver_options(self, settings: SolverSettings) -> dict[str, Any]:
        # objective_bound: reset at every solve (an option stays set on the persistent
        # HiGHS between solves); a cutoff sets it through ``settings.options``
        opts: dict[str, Any] = {"output_flag": settings.verbose,
                                "mip_feasibility_tolerance": 1e-8,
                                "mip_allow_restart": False, "objective_bound": math.inf,
                                "presolve": "choose",  # a confirmation sets it off
                                "mip_heuristic_run_root_reduced_cost": False,
                                "mip_heuristic_run_rins": False, "mip_heuristic_run_rens": False}
        if settings.seed is not None:
            opts["random_seed"] = settings.seed
        return opts

    # pragma: no mutate start (mode and gap: not applicable to HiGHS, whatever they are)
    def solve_pool(self, model: pyo.Block, settings: SolverSettings, size: int, *,
                   mode: int = 2, gap: float | None = None) -> tuple[SolveOutcome, list]:
        # pragma: no mutate end
        """The last ``size`` improving incumbents of one solve (``mode``, ``gap``: not
        applicable to HiGHS; a child's are those it streamed)."""
        solver, settings = self._loaded(model, settings)
        with HighsIncumbents(solver) as incumbents:
            outcome = self._solve(model, settings)
        for objective, x in self._streamed:
            incumbents.add(objective, x)
        return outcome, incumbents.members(size) if outcome.status.has_solution else []
