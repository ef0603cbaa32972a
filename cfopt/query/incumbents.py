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
2. any point it finds is a point of the master, so its objective :math:`U` is at least
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
(``benchmarks/robust_levers.py``, ``results/robust_levers_heuristics.json``). The pieces
at :math:`x_k` hold a point on the masters with two copies and most often on none with
one (the new copy rejects :math:`x_k` within its piece, and the restriction is
infeasible).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from ..solvers import SolverBackend, SolverSettings

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

#: the relative slack of the cutoff above the restriction's objective (HiGHS discards a
#: point of objective equal to its cutoff: a HELOC master was infeasible under a cutoff
#: at its optimum exactly and optimal at 1 + 1e-9 times it)
CUTOFF_SLACK = 1e-6


def pattern_cutoff(m: CounterfactualModel, backend: SolverBackend,
                   budget: Callable[[], SolverSettings | None],
                   copies: Sequence[NetworkCopy], point: pd.DataFrame) -> float | None:
    """The cutoff of the module docstring for the master ``m`` from its last point
    ``point`` (a raw row): ``copies`` are the master's network and its copies (those
    with a base of their own, e.g. K-scenarios', keep their binaries free); ``budget``
    gives the restriction's solve settings (``None``: no time left). ``None`` when the
    restriction has no point (or no time)."""
    inputs = m.space.encode(point)[0]
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
    if not outcome.status.has_solution or outcome.objective is None:
        return None
    return outcome.objective * (1 + CUTOFF_SLACK) + 1e-9
