r"""A cutoff for a cutting-set master from the last master's linear pieces (issue 21).

Every master of a cutting-set loop after the first is the last one with one more copy of
the network (a shifted model, PROPLACE Algorithm 1), and its optimum most often lies
where the last master's point :math:`x_k` lies: in the same linear piece of the model's
network and of every copy (on HELOC's first 6 Table 1 queries the optimum of each master
with two shifted copies lies 0.6-1.6 % above the last one's). So before solving it:

1. fix every free ReLU binary of the master's network and of each copy that sees the
   counterfactual's own inputs to the side its neuron takes at :math:`x_k`
   (:meth:`~cfopt.formulations.predictors.PredictorConstr.fix_pattern`), and solve that
   restriction of the master: a linear programme, up to the feature encodings' integers
   and the binaries of the copies left free;
2. when it has no point (most often with one copy: the new copy rejects :math:`x_k`
   within its piece), walk from :math:`x_k` toward the plausible region's points to the
   first point where every network gives the target a margin of :math:`2\sigma`
   (:func:`toward_target`), and solve the restriction to the pieces there;
3. any point found is a point of the master, so its objective :math:`U` is at least
   the master's optimum, and the master's solve may discard every point at or above
   :math:`U (1 + \epsilon) + 10^{-9}` (:data:`CUTOFF_SLACK`;
   :meth:`SolverBackend.solve <cfopt.solvers.SolverBackend.solve>` with ``cutoff``,
   which solves again without it when a solve under it finds no point, so that a
   cutoff never makes a claim).

The cutoff only prunes; the master's answer, bound and status are its own solve's.
Without HiGHS's sub-MIP heuristics (:meth:`SolverBackend.light_heuristics
<cfopt.solvers.SolverBackend.light_heuristics>`) its branch and bound finds its
incumbents late, and the cutoff stands in for them: on the first 10 HELOC queries of
Table 1 the loop took 12.2 s (again: 12.6 s) with it and 17.1 s without, the masters
10.4 s (11.0 s) against 15.3 s, with the same answers
(``benchmarks/robust_levers.py``, ``results/robust_levers_heuristics.json``, before the
walk of step 2). With the walk, step 1 or 2 found a point on all 10 masters with one
copy of those queries, 0-9 % above their optima, and their solves took 1.8-2.0 s in
all against 3.6-3.8 s (exploratory runs; the Table 1 HELOC row is the measurement).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..formulations.validity import score_targets
from ..solvers import SolveOutcome, SolverBackend, SolverSettings
from .restrictions.relu_points import target_scores

if TYPE_CHECKING:
    from ..formulations.predictors import NetworkCopy
    from ..problem import CounterfactualModel

#: the most unstable neurons beyond the first hidden layer (the master's network and its
#: copies) of a master solved without the cutoff: below it a master takes tens of
#: milliseconds and the restriction's solve, with Pyomo's updates, cannot pay (the Table
#: 1 masters with copies have 9-21 such neurons on Adult, 6-21 on COMPAS, 23-78 on
#: HELOC; with no gate, Adult's 50 queries took 16.0 s against 13.4 s without the
#: cutoff, one exploratory run each)
CUTOFF_NEURONS = 20

#: the steps of each segment of :func:`toward_target`
WALK_STEPS = 40

#: the relative slack of the cutoff above the restriction's objective (HiGHS discards a
#: point of objective equal to its cutoff: a HELOC master was infeasible under a cutoff
#: at its optimum exactly and optimal at 1 + 1e-9 times it)
CUTOFF_SLACK = 1e-6


def pattern_cutoff(m: CounterfactualModel, backend: SolverBackend,
                   budget: Callable[[], SolverSettings | None],
                   copies: Sequence[NetworkCopy], candidates: Iterable[np.ndarray]
                   ) -> float | None:
    """The cutoff of the module docstring for the master ``m``: the objective of
    :func:`piece_point`'s point (with :data:`CUTOFF_SLACK`); ``None`` when no
    restriction has a point (or no time is left)."""
    outcome = piece_point(m, backend, budget, copies, candidates)
    return None if outcome is None else cutoff_above(outcome.objective)


def cutoff_above(objective: float) -> float:
    """The cutoff above a known point's ``objective`` (:data:`CUTOFF_SLACK`)."""
    return objective * (1 + CUTOFF_SLACK) + 1e-9


def piece_point(m: CounterfactualModel, backend: SolverBackend,
                budget: Callable[[], SolverSettings | None],
                copies: Sequence[NetworkCopy], candidates: Iterable[np.ndarray]
                ) -> SolveOutcome | None:
    """Steps 1-2 of the module docstring for the master ``m``: ``copies`` are the
    master's network and its copies (those with a base of their own, e.g. K-scenarios',
    keep their binaries free); ``candidates`` yields model-input points in turn (e.g.
    the last master's, then :func:`toward_target`'s), whose pieces are tried until a
    restriction has a point; ``budget`` gives each restriction's solve settings
    (``None``: no time left). The first solve with a point, whose point stays loaded in
    ``m``'s variables (a point of the master); ``None`` when none has a point (or no
    time is left)."""
    for inputs in candidates:
        fixed = []
        try:
            for predictor, base in copies:
                if base is None:
                    fixed.extend(predictor.fix_pattern(inputs))
            settings = budget()
            if settings is None:
                return None
            outcome = backend.solve(m, settings)
        finally:
            for var in fixed:
                var.unfix()
        if outcome.status.has_solution and outcome.objective is not None:
            return outcome
    return None


def toward_target(m: CounterfactualModel, copies: Sequence[NetworkCopy],
                  start: np.ndarray, ends: np.ndarray, margin: float) -> np.ndarray | None:
    """A point whose pieces may hold a point of the master when the last master's do
    not (its newest copy rejects the last point within its piece): on the segments from
    the model inputs ``start`` to each row of ``ends`` (e.g. the plausible region's
    points, so the segments stay in their hull), the first of :data:`WALK_STEPS` steps
    where the master's network and every copy that sees the counterfactual's own inputs
    give the target a score of at least ``margin`` (float64 forward passes), the
    nearest to ``start`` (L1 on the model inputs); ``None`` when no segment has one."""
    steps = np.linspace(0.0, 1.0, WALK_STEPS + 1)[1:, None]
    nets = [predictor.adapter.structure for predictor, base in copies if base is None]
    decision, targets = m.adapter.decision, score_targets(m.adapter, m.target)
    best, nearest = None, np.inf
    for end in np.atleast_2d(ends):
        points = start + steps * (end - start)
        scores = np.min([target_scores(net, points, decision, targets) for net in nets],
                        axis=0)
        reached = np.flatnonzero(scores >= margin)
        if len(reached):
            point = points[reached[0]]
            distance = float(np.abs(point - start).sum())
            if distance < nearest:
                best, nearest = point, distance
    return best
