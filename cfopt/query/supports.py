r"""A solve within a radius, split by the features it may change (issue 21).

Within an objective radius :math:`r` (a rung of :mod:`.ladder`) a counterfactual
changes at most :math:`N = \min(\lfloor r / b \rfloor, \text{max\_changes})` features
for the L0 coefficient :math:`b`, each of the features :math:`F_r` whose cheapest change
fits in :math:`r` (:func:`~.restrictions.relu.radius_moves`). Changing a set :math:`C`
costs at least :math:`\kappa(C) = \sum_{f \in C} (b + a\,\ell_f) + c \max_{f \in C}
\ell_f` for the objective :math:`a\,\text{L1} + b\,\text{L0} + c\,\text{L∞}`, with
:math:`\ell_f` the least weighted move of a change of :math:`f` (a category switch or
one raw unit of an integral feature: :math:`w_f`; a continuous one: 0). So the sets a
point within :math:`r` can change are the *affordable* ones, :math:`|C| \le N` and
:math:`\kappa(C) \le r`, a family closed under subsets, and each lies in one of its
maximal members :math:`S`. The restricted problem :math:`P_r` (every point of objective
:math:`\le r`, network bounds over them) is therefore covered by the problems
:math:`P_r^S`, one per maximal affordable set, in which the features outside :math:`S`
are held at the factual (:func:`~cfopt.formulations.features.hold_at_factual`). Each
bounds the network and every copy a declared block or an adversary adds over the moves
of :math:`S` alone (the first layer exactly:
:meth:`~cfopt.models.network.ReLUNetwork.sparse_bounds`), far tighter than over those of
all of :math:`F_r`: on the K-robust masters of the garments MLP (32-16, four scenario
copies, one changed feature) HiGHS took 16-24 s on :math:`P_r` and 0.6 s on its seven
:math:`P_r^{\{f\}}`.

Every point of a :math:`P_r^S` is a point of the declared problem (tighter bounds and
held features only remove points). So the least optimum over the sets is the optimum
of :math:`P_r`, and the least of their proven bounds (:math:`+\infty` for a set proven
infeasible) bounds it from below; a set not solved to the end (time, an error) leaves
the bound unknown. The split is used when there are at most :data:`MAX_SUPPORTS` sets
and none is all of :math:`F_r`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import pyomo.environ as pyo

from ..formulations.features import hold_at_factual
from ..results.status import Status
from ..solvers import SolveOutcome, SolverBackend, SolverSettings
from .restrictions.relu import radius_moves

if TYPE_CHECKING:
    from ..problem import CounterfactualModel

#: the most sets :math:`S` a split solve makes (beyond it, :math:`P_r` is solved whole)
MAX_SUPPORTS = 64

Support = tuple[str, ...]


def supports(m: CounterfactualModel, radius: float) -> list[Support] | None:
    """The maximal affordable sets of the module docstring for the current query, or
    ``None`` when :math:`P_r` is better solved whole (no cap on the changes, one set
    holding every feature of :math:`F_r`, or more than :data:`MAX_SUPPORTS` sets)."""
    reach = radius_moves(m, radius)
    if not math.isfinite(reach.most):
        return None
    terms = m.objective_terms
    a, b, c = (terms.get(k, 0.0) for k in ("l1", "l0", "linf"))
    limit = m.raw.distance_radius(radius) * (1 + 1e-9) + 1e-12  # as radius_moves
    movable = sorted(reach.moves, key=str)

    def affordable(chosen: tuple[str, ...]) -> bool:
        moves = [reach.least[f] for f in chosen]
        return len(chosen) <= reach.most and \
            b * len(chosen) + a * sum(moves) + c * max(moves) <= limit  # chosen: not empty

    family: list[Support] = [()]
    frontier: list[Support] = [()]
    while frontier:  # grow each affordable set by the features after its last one
        grown: list[Support] = []
        for chosen in frontier:
            start = movable.index(chosen[-1]) + 1 if chosen else 0
            larger = [chosen + (f,) for f in movable[start:] if affordable(chosen + (f,))]
            grown.extend(larger)
            # pragma: no mutate start (a - only stops later: the last round grows nothing)
            if len(family) + len(grown) > 16 * MAX_SUPPORTS:
                return None
            # pragma: no mutate end
        family.extend(grown)
        frontier = grown
    maximal = [s for s in family
               if not any(affordable(s + (f,)) for f in movable if f not in s)]
    if len(maximal) > MAX_SUPPORTS or any(len(s) == len(movable) for s in maximal):
        return None
    return maximal


def solve_split(m: CounterfactualModel, backend: SolverBackend,
                budget: Callable[[], SolverSettings | None], sets: list[Support],
                restrict: Callable[[Support], AbstractContextManager[None]]
                ) -> SolveOutcome:
    """Solve :math:`P_r` as the union of the :math:`P_r^S` (module docstring): for each
    set, ``restrict(S)`` (a context manager: the bounds over the moves of ``S``) and
    the other features held at the factual; ``budget`` gives each solve's settings
    (``None``: no time left, the remaining sets unsolved). The model's variables hold
    the best point found on return."""
    best: tuple[float, SolveOutcome, list[tuple[pyo.Var, object]]] | None = None
    lower, complete, failed = math.inf, True, False
    wall, solver_time = 0.0, 0.0
    for support in sets:
        settings = budget()
        if settings is None:
            complete, lower = False, -math.inf  # pragma: no mutate (not complete: no bound)
            break
        with restrict(support), hold_at_factual(m, m.space, support):
            outcome = backend.solve(m, settings)
        wall += outcome.wall_time
        solver_time += outcome.solver_time or 0.0
        if outcome.status is Status.INFEASIBLE:
            continue
        if outcome.status is not Status.OPTIMAL:
            complete = False  # pragma: no mutate (read as a truth value)
            failed = failed or outcome.status is Status.ERROR
        lower = min(lower, -math.inf if outcome.bound is None else outcome.bound)
        if outcome.status.has_solution and outcome.objective is not None and (
                best is None or outcome.objective < best[0]):
            best = (outcome.objective, outcome, _values(m))
    if best is not None:
        objective, outcome, values = best
        for var, value in values:
            var.set_value(value, skip_validation=True)
        status = Status.OPTIMAL if complete else Status.FEASIBLE
        termination = outcome.termination
    elif complete:
        objective, status, termination = None, Status.INFEASIBLE, "infeasible"
    else:
        objective = None
        status = Status.ERROR if failed else Status.NO_SOLUTION
        termination = "error" if failed else "maxTimeLimit"
    bound = lower if math.isfinite(lower) else None
    if status is Status.INFEASIBLE:
        bound = None
    return SolveOutcome(status, objective, bound, solver_time, wall, termination,
                        message=f"split by support: {len(sets)} sets of features")


def _values(m: CounterfactualModel) -> list[tuple[pyo.Var, object]]:
    """Every variable of ``m`` and its value (to reload the best set's point)."""
    # pragma: no mutate start (descend_into=True: Pyomo's default)
    return [(v, v.value) for v in m.component_data_objects(pyo.Var, descend_into=True)]
    # pragma: no mutate end
