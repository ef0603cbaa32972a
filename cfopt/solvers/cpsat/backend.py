"""``solver="cpsat"``: OR-Tools CP-SAT on tree ensembles (``pip install cfopt[cpsat]``).

CP-SAT does not solve cfopt's Pyomo MILP: for each query it builds OCEAN's exact CP model
over threshold levels (Parmentier & Vidal 2021; :mod:`.model`, :mod:`.levels`) from the
:class:`~cfopt.CounterfactualModel` (its model, feature space, input specs, factual,
target, margin, objective and the actionability components in force), solves it, and
decodes a raw point. The explainer verifies that point with the real model and
:mod:`cfopt.query.claims` decides the status from its recomputed objective and the CP bound
(a valid lower bound: the CP model relaxes the declared problem).

Supported: every tree ensemble cfopt reads (sklearn forests and boosting, XGBoost,
LightGBM; classifiers and regressors), behind the feature space's transform or an
sklearn preprocessing pipeline; objectives L1 / L0 / L∞ with any weights,
``max_changes``, immutable and monotone features. Declared constraint blocks and
constraints added to the Pyomo model are refused (:func:`check_supported`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyomo.environ as pyo

from ...constraints.raw import raw_components
from ...errors import SolverNotAvailableError, UnsupportedModelError
from ...formulations.tree_regions import (
    ForestIndex,
    QueryRegion,
    RegionTooLarge,
    build_index,
    search,
)
from ...models.trees import TreeEnsemble
from ...results.status import Status
from ...space.encoding import spec_grids, spec_rounding
from ..backends import register_backend
from ..base import SolveOutcome, SolverBackend, SolverSettings
from .model import Actionability, build

if TYPE_CHECKING:
    from ...problem import CounterfactualModel

INSTALL_HINT = "install it with `pip install cfopt[cpsat]` (OR-Tools)"
_STATUS = {"OPTIMAL": Status.OPTIMAL, "FEASIBLE": Status.FEASIBLE,
           "INFEASIBLE": Status.INFEASIBLE, "UNKNOWN": Status.NO_SOLUTION,
           "MODEL_INVALID": Status.ERROR}


def check_supported(m: CounterfactualModel) -> None:
    """Raise naming what ``solver="cpsat"`` cannot solve exactly in ``m`` (a model that is
    not a tree ensemble, declared constraint blocks, components added to the model or
    a term added to its objective); checked at the build and at every query."""
    if not isinstance(m.adapter.structure, TreeEnsemble):
        raise UnsupportedModelError(
            f"solver='cpsat' solves tree ensembles only; the {m.adapter.kind} model is not "
            f"one: use solver='highs'")
    blocks = sorted(m.constraints)
    if blocks:
        raise ValueError(f"solver='cpsat' does not encode declared constraint blocks "
                         f"({', '.join(blocks)}); use solver='highs'")
    added = raw_components(m)
    if added:
        raise ValueError(f"solver='cpsat' does not see what was added to the Pyomo model "
                         f"({', '.join(added)}); use solver='highs'")


class CpSatBackend(SolverBackend):
    """OR-Tools CP-SAT on the exact CP model of each tree-ensemble query (module
    docstring). Settings: ``time_limit`` (less the time to build the model),
    ``mip_gap`` (``relative_gap_limit``), ``threads`` (``num_workers``), ``seed``
    (``random_seed``), ``verbose`` (``log_search_progress``), raw ``options``: CP-SAT
    parameters by name.

    Known limit: Ctrl-C during a CP-SAT 9.15 search does not reach Python (with its own
    SIGINT handler or without, a batch went on), and a search run in a thread so that
    Python keeps the signal stopped at once but aborted the interpreter at exit: give
    ``cpsat`` queries a time limit."""

    name = "cpsat"

    def __init__(self) -> None:
        self._index: tuple[Any, ForestIndex] | None = None

    def available(self) -> bool:
        try:
            from ortools.sat.python import cp_model  # noqa: F401
        except ImportError:
            return False
        return True

    def reset(self) -> None:
        self._index = None

    def _solve(self, model: pyo.Block, settings: SolverSettings) -> SolveOutcome:
        return self.solve_query(model, settings)[0]

    def solve_query(self, m: CounterfactualModel, settings: SolverSettings,
                    radius: float = math.inf, hint: pd.DataFrame | None = None
                    ) -> tuple[SolveOutcome, pd.DataFrame | None]:
        """Solve ``m``'s current query on the leaves within ``radius`` of the factual
        (the objective of a verified point, ``hint``, which starts the search; ``inf``:
        actionability only); the full query again when the restricted one is
        infeasible. Returns the outcome and the decoded raw point (``None`` without
        one)."""
        if not self.available():
            raise SolverNotAvailableError(f"solver 'cpsat' is not available: {INSTALL_HINT}")
        check_supported(m)
        t0 = time.perf_counter()
        outcome, row = self._attempt(m, settings, t0, radius, hint)
        if outcome.status is Status.INFEASIBLE and math.isfinite(radius):
            outcome, row = self._attempt(m, settings, t0, math.inf, None)
        return dataclasses.replace(outcome, wall_time=time.perf_counter() - t0), row

    def _attempt(self, m: CounterfactualModel, settings: SolverSettings, t0: float,
                 radius: float, hint: pd.DataFrame | None
                 ) -> tuple[SolveOutcome, pd.DataFrame | None]:
        from ortools.sat.python import cp_model

        limit = settings.time_limit
        deadline = math.inf if limit is None else t0 + limit
        rules = Actionability.of(m)
        index = self._forest_index(m)
        if rules.relaxed:  # a diagnosis probe: actionability partly relaxed, no pruning
            radius, hint = math.inf, None
            region = QueryRegion(list(m.predictor_constr.input_bounds))
        else:
            from ...query.restrictions.trees import query_region

            region = query_region(m, radius)
        try:
            kept = search(m.adapter.structure, index, region, deadline)
        except RegionTooLarge:
            return _timed_out(t0), None
        q = build(m, index, kept, rules)
        if hint is not None:
            q.hint(m, index, hint)
        solver = cp_model.CpSolver()
        params = solver.parameters
        if limit is not None:
            left = deadline - time.perf_counter()
            if left <= 0:
                return _timed_out(t0), None
            params.max_time_in_seconds = left
        params.relative_gap_limit = settings.mip_gap
        params.num_workers = settings.threads or 0
        if settings.seed is not None:
            params.random_seed = settings.seed
        params.log_search_progress = settings.verbose
        for key, value in settings.options.items():
            setattr(params, key, value)
        code = solver.solve(q.cp)
        name = solver.status_name(code)
        status = _STATUS.get(name, Status.ERROR)
        has_point = status in (Status.OPTIMAL, Status.FEASIBLE)
        bound = None
        if status in (Status.OPTIMAL, Status.FEASIBLE, Status.NO_SOLUTION):
            bound = min(solver.best_objective_bound / q.cost_scale, radius)
        message = "" if status is not Status.ERROR else \
            f"CP-SAT refused its model ({q.cp.validate()}); nothing is claimed"
        outcome = SolveOutcome(
            status=status, bound=bound, solver_time=solver.wall_time,
            objective=solver.objective_value / q.cost_scale if has_point else None,
            wall_time=time.perf_counter() - t0, termination=name, message=message)
        return outcome, q.decode(solver) if has_point else None

    def _forest_index(self, m: CounterfactualModel) -> ForestIndex:
        """The split index of ``m``'s ensemble (the per-query block's own, else built
        once as it builds it)."""
        block = m.predictor_constr.block
        if block.per_query:
            return block.index
        if self._index is None or self._index[0] is not m:
            space, specs = m.space, m.input_specs
            self._index = (m, build_index(m.adapter.structure, spec_grids(space, specs),
                                          spec_rounding(space, specs), m.library_input))
        return self._index[1]


def _timed_out(t0: float) -> SolveOutcome:
    return SolveOutcome(Status.NO_SOLUTION, None, None, None, time.perf_counter() - t0,
                        "maxTimeLimit")


register_backend(CpSatBackend.name, CpSatBackend)
