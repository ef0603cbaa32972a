"""The master of PROPLACE's cutting-set loop (Algorithm 1 of Jiang, Lan, Leofante, Rago,
Toni 2024; :mod:`cfopt.methods.proplace`): the counterfactual MILP in the plausible region
with one network copy per shifted model collected, and the speed levers that solve it
(the ladder, the cutoff, the relaxed model, the active set, the pieces' points)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

from ..formulations.predictors import NetworkCopy
from ..formulations.validity import hold_model
from ..problem import CounterfactualModel
from ..query.incumbents import (
    CUTOFF_NEURONS,
    cutoff_above,
    pattern_cutoff,
    piece_point,
    toward_target,
)
from ..query.ladder import can_climb, climb, first_floor
from ..query.restrictions.relu import network_copies, unstable_neurons
from ..query.solution import Verification, start_of, verified_solution
from ..results.robust import RobustStatus
from ..results.status import Status
from ..solvers import SolverBackend
from .adversaries.model_shift import ModelShiftAdversary
from .cutting_set import UNCERTIFIED, Deadline, LoopResult, Master, MasterAnswer

#: how far below σ a model left out of a master may put its point (:meth:`ProplaceMaster.solve`)
HELD_OUT_TOLERANCE = 1e-6


class ProplaceMaster(Master):
    """The master of Algorithm 1: the counterfactual MILP ``m`` (plausible region,
    margin σ) with the shifted copies ``adversary`` has added.

    ``ladder``: every solve climbs a ladder of radii from the greatest proven bound so
    far (the first from :func:`~cfopt.query.ladder.first_floor`), with the master's
    network and every shifted copy bounded over the points within each radius and the
    solve split by the features such a point can change (:mod:`cfopt.query.ladder`,
    :mod:`cfopt.query.supports`); the copies only cut, so that bound holds for every
    later master. ``warm_start`` (without the ladder, or before a floor is known):
    every solve after the first starts from the last solve's point
    (its feature values, :func:`~cfopt.query.solution.start_of`: a partial MIP start
    the backend completes, :meth:`SolverBackend.solve
    <cfopt.solvers.SolverBackend.solve>`). The cut added since violates that point as a
    rule (the adversary's model classifies it below σ - t, the new copy asks σ), so the
    start is infeasible then: HiGHS fixes the given values, fails to complete them and
    drops the start; a backend without MIP starts ignores it. Sound either way: a start
    never changes what the solve proves. ``cutoff`` (without the ladder): every solve
    with shifted copies after the first, or with ``guess`` also the first, discards the
    points above the objective of the linear pieces at the last point (at ``guess``
    before the first solve) (:func:`~cfopt.query.incumbents.pattern_cutoff`; sound
    either way: a solve under it that finds nothing is solved again without it).
    ``relax_model`` (without the ladder): a solve with shifted copies leaves the
    model's own network and validity out of the MILP
    (:func:`~cfopt.formulations.validity.hold_model`; the caller puts them back after
    the query). The master stays a relaxation of the problem with margin σ, Δ holding
    the model itself, so its proven bound keeps its meaning; its point, valid or not
    for the model, goes to the adversary, whose exact check over Δ covers the model,
    so a point the loop certifies is valid. The copies, each shifted toward the
    target's worst case, are what bind: the model's network is one more big-M
    encoding of nearly the same constraint. ``active_set`` (without the ladder): a
    solve holds only the newest shifted copy and those kept (:meth:`solve`); the
    others stay out of the MILP (deactivated). ``piece_points`` (without the ladder,
    past the cutoff's gate): the query's first such master answers with the point of
    its restriction to the linear pieces when it has one (``proven`` False), and
    :meth:`prove` solves the master whole if the adversary certifies that point."""

    def __init__(self, m: CounterfactualModel, backend: SolverBackend, sigma: float,
                 adversary: ModelShiftAdversary, warm_start: bool = False,
                 ladder: bool = False, cutoff: bool = False, relax_model: bool = False,
                 active_set: bool = False, piece_points: bool = False) -> None:
        self.m, self.backend, self.sigma, self.adversary = m, backend, sigma, adversary
        self.warm_start, self.ladder, self.cutoff = warm_start, ladder, cutoff
        self.relax_model, self.active_set = relax_model, active_set
        self.piece_points = piece_points
        #: a solve of this query answered with the point of its pieces (only one does)
        self._pieces_answered = False
        #: the MILP objective of the last point of the pieces (:meth:`solve`)
        self._piece_objective: float | None = None
        #: the cutoff of the next solve: the certified point's (:meth:`prove`)
        self._proof_cutoff: float | None = None
        #: indices of the adversary's models whose copies every later solve holds
        self.kept: set[int] = set()
        #: solves repeated because their point missed a model left out
        self.resolves = 0
        #: the proven bound of the last solve that gave a point
        self.bound: float | None = None
        #: the greatest proven bound so far: every master relaxes the Δ-robust problem, and
        #: a later master holding every copy (the ladder's) has at least its cuts
        self.floor: float | None = None
        self.found = False
        self._last: pd.DataFrame | None = None
        #: model inputs standing for the last point before the first solve (e.g. the
        #: first cut's guess), for the cutoff's pieces
        self.guess: np.ndarray | None = None

    def solve(self, deadline: Deadline) -> MasterAnswer:
        """One master of Algorithm 1; with ``piece_points``, the query's first master
        past the gate answers with the point of its restriction to the linear pieces
        when it has one (:meth:`_piece_answer`).
        With ``active_set``, a solve holds only the newest shifted copy and the kept
        ones. Any subset of the collected models gives a relaxation of the Δ-robust
        problem, so its proven bound holds. When its optimal point gives every model
        left out a margin of at least σ (:data:`HELD_OUT_TOLERANCE` below it at most;
        float64 forward passes), the point is feasible for the master with every model
        and, optimal for a relaxation of it, optimal there too: the loop's points are
        those of Algorithm 1. Otherwise the models it misses are kept and the solve
        repeated (each model at most once)."""
        if self.piece_points and not self._pieces_answered:
            answer = self._piece_answer(deadline)
            if answer is not None:
                self._pieces_answered = True
                return answer
        return self._solve_active(deadline)

    def _solve_active(self, deadline: Deadline) -> MasterAnswer:
        """:meth:`_solve_held`, repeated with the models left out that its optimal point
        misses (``active_set``; :meth:`solve`)."""
        while True:
            answer = self._solve_held(deadline)
            if not self.active_set or answer.point is None or \
                    answer.status is not Status.OPTIMAL or not self._keep_missed(answer.point):
                return answer

    def prove(self, candidate: MasterAnswer, deadline: Deadline) -> MasterAnswer:
        """The master solved whole (:meth:`solve` without the pieces) once the adversary
        has certified ``candidate``, a point of the pieces, whose objective cuts the
        solve off (it is a point of the master). The candidate, with the solve's
        proven bound, when that bound is within the solve's relative gap of the
        candidate's objective: a lower bound on every Δ-robust point's objective (the
        master relaxes the Δ-robust problem), so the certified candidate is optimal
        within the gap. The solve's own answer when it found a better point (the loop
        checks it); the candidate, unproven, when the solve ended without proving."""
        assert self._piece_objective is not None
        objective = self._piece_objective
        self._proof_cutoff = cutoff_above(objective)
        try:
            answer = self._solve_active(deadline)
        finally:
            self._proof_cutoff = None
        if answer.status is Status.OPTIMAL and answer.bound is not None:
            gap = deadline.settings.mip_gap
            if objective - answer.bound <= gap * abs(objective) + 1e-9:
                return MasterAnswer(Status.OPTIMAL, point=candidate.point,
                                    bound=answer.bound, label=candidate.label)
            return answer
        why = f" ({answer.message})" if answer.message else ""
        return MasterAnswer(Status.FEASIBLE, point=candidate.point, label=candidate.label,
                            message=f"the master's proof of the certified point ended "
                                    f"with {answer.status.value}{why}; the point is not "
                                    f"claimed optimal")

    def _keep_missed(self, point: pd.DataFrame) -> bool:
        """Keep the models left out of the last solve whose margin at ``point`` is below
        σ (:data:`HELD_OUT_TOLERANCE`); whether any was (the solve is then repeated)."""
        missed = self.adversary.missed(self.m.space.encode(point)[0],
                                       self.sigma - HELD_OUT_TOLERANCE)
        if missed:
            self.kept.update(missed)
            self.resolves += 1
        return bool(missed)

    def _hold(self, floor: float | None) -> tuple[list[NetworkCopy], bool, bool]:
        """Hold the copies of the next solve (:meth:`solve`) and leave the model out
        when ``relax_model`` allows: ``(copies held, climbing the ladder, model
        relaxed)``."""
        collected = range(len(self.adversary.models))
        self.adversary.hold(collected)
        copies = self.adversary.network_copies(self.m)
        climbing = self.ladder and can_climb(self.m, floor, copies)
        if self.active_set and not climbing:
            self.adversary.hold({*self.kept, len(collected) - 1})
            copies = self.adversary.network_copies(self.m)
        relaxed = self.relax_model and bool(copies) and not climbing
        hold_model(self.m, not relaxed)
        return copies, climbing, relaxed

    def _held(self, networks: list[NetworkCopy], relaxed: bool) -> list[NetworkCopy]:
        """The ``networks`` in the MILP: without the model's own when it is left out
        (``relaxed``), whose binaries the pieces then need not fix."""
        return [c for c in networks if not (relaxed and c[0] is self.m.predictor_constr)]

    def _pieces_apply(self, copies: list[NetworkCopy], networks: list[NetworkCopy]
                      ) -> bool:
        """Whether a master holding the shifted ``copies`` (``networks``: with its own
        network) has a point to take the linear pieces at and is past their gate
        (more than :data:`~cfopt.query.incumbents.CUTOFF_NEURONS` unstable neurons
        beyond the first layer)."""
        return bool(copies) and (self._last is not None or self.guess is not None) and \
            unstable_neurons(networks, first=1) > CUTOFF_NEURONS

    def _piece_answer(self, deadline: Deadline) -> MasterAnswer | None:
        """``piece_points``: the master restricted to the linear pieces of every network
        it holds at the last point (or toward the region's points,
        :func:`~cfopt.query.incumbents.piece_point`), a linear programme: its point is
        a point of the master, unproven (``proven`` False). ``None`` (the master is
        solved whole): the gate is not passed, the ladder climbs, no restriction has a
        point, or its point misses a model left out (which is kept)."""
        floor = self.floor if self.floor is not None else first_floor(self.m)
        copies, climbing, relaxed = self._hold(floor)
        networks = [*network_copies(self.m), *copies]
        if climbing or not self._pieces_apply(copies, networks):
            return None
        outcome = piece_point(self.m, self.backend, deadline.left,
                              self._held(networks, relaxed), self.pieces(networks))
        if outcome is None or outcome.objective is None:
            return None
        solution = verified_solution(self.m)
        if self.active_set and self._keep_missed(solution.row):
            return None
        self._last, self._piece_objective, self.found = solution.row, outcome.objective, True
        return MasterAnswer(Status.FEASIBLE, point=solution.row, proven=False)

    def _solve_held(self, deadline: Deadline) -> MasterAnswer:
        """One solve of the master with the copies :meth:`solve` holds."""
        settings = deadline.left()
        if settings is None:
            return MasterAnswer(Status.NO_SOLUTION, solved=False,
                                message="time limit reached before a certificate")
        floor = self.floor if self.floor is not None else first_floor(self.m)
        copies, climbing, relaxed = self._hold(floor)
        if climbing:
            assert floor is not None
            outcome = climb(self.m, self.backend, deadline.left, floor, {}, copies)
        else:
            start = (start_of(self.m, self._last) if self.warm_start and
                     self._last is not None else None)
            cutoff = self._proof_cutoff
            networks = [*network_copies(self.m), *copies]
            if cutoff is None and self.cutoff and self._pieces_apply(copies, networks):
                cutoff = pattern_cutoff(self.m, self.backend, deadline.left,
                                        self._held(networks, relaxed), self.pieces(networks))
                settings = deadline.left()
                if settings is None:
                    return MasterAnswer(Status.NO_SOLUTION, solved=False,
                                        message="time limit reached before a certificate")
            outcome = self.backend.solve(self.m, settings, start, cutoff=cutoff)
        if outcome.bound is not None and math.isfinite(outcome.bound):
            self.floor = max(outcome.bound, -math.inf if self.floor is None else self.floor)
        if outcome.status is Status.INFEASIBLE:
            return MasterAnswer(Status.INFEASIBLE, message=self.infeasible())
        if not outcome.status.has_solution:  # the last point (if any) is kept
            return MasterAnswer(outcome.status, message=(
                f"master solve ended with {outcome.termination}" + (
                    f"; {UNCERTIFIED}" if self.found else "")))
        self.bound, self.found = outcome.bound, True
        solution = verified_solution(self.m)
        self._last = solution.row
        return self.answer(solution, outcome.status, outcome.bound)

    def pieces(self, networks: list[NetworkCopy]) -> Iterator[np.ndarray]:
        """The points whose linear pieces :func:`~cfopt.query.incumbents.pattern_cutoff`
        tries: the last master's point, then (with the plausible region's points) the
        first point toward them where every network gives the target a margin of 2σ
        (:func:`~cfopt.query.incumbents.toward_target`), computed only when needed."""
        start = self.guess if self._last is None else self.m.space.encode(self._last)[0]
        yield start
        if self.adversary.hull is not None:
            point = toward_target(self.m, networks, start, self.adversary.hull,
                                  2 * self.sigma)
            if point is not None:
                yield point

    def infeasible(self) -> str:
        """What a proven-infeasible master proves, in words."""
        return (f"no point of the plausible region satisfies the constraints and is valid "
                f"with margin {self.sigma:g} for the model and the "
                f"{len(self.adversary.models)} shifted model(s) collected: no counterfactual "
                f"in the region is Δ-robust with margin {self.sigma:g} (proven at that "
                f"margin only; one robust at a smaller margin is not excluded)")

    def answer(self, solution: Verification, status: Status, bound: float | None
               ) -> MasterAnswer:
        """The master's answer for a decoded solution (PROPLACE: the point, verified or
        not; the result re-checks it)."""
        return MasterAnswer(status, point=solution.row, bound=bound)


#: the last level of :func:`decide_below_sigma`, as a fraction of the tolerance t: far
#: above the solvers' feasibility tolerances (1e-6), so a master's point is never one a
#: collected model already cut off, and far below the band [0, σ - t) it closes
LAST_LEVEL = 1e-2


def margin_levels(sigma: float, tolerance: float) -> tuple[float, ...]:
    """The master margins :func:`decide_below_sigma` descends to after σ: σ - t, then
    :data:`LAST_LEVEL` · t (when below σ - t)."""
    last = LAST_LEVEL * tolerance
    return (sigma - tolerance, last) if last < sigma - tolerance else (sigma - tolerance,)


def decide_below_sigma(first: LoopResult, m: CounterfactualModel,
                       adversary: ModelShiftAdversary, sigma: float, tolerance: float,
                       max_iterations: int, run: Callable[[float, int], LoopResult]
                       ) -> tuple[LoopResult, float]:
    r"""The answer of a PROPLACE loop whose master at margin σ was proven infeasible,
    decided again at the lower levels of :func:`margin_levels`; returns the loop's result
    and the master margin its claims are about (``certificate.master_margin``).

    Let :math:`R(s)` be the points of the region (under every declared constraint)
    whose least margin over Δ is ≥ s. The master at σ relaxes :math:`R(\sigma)`, and the
    loop stops at a point whose proven bound is ≥ σ - t, a point of :math:`R(\sigma -
    t)`. An infeasible σ-master proves only :math:`R(\sigma) = \emptyset`, while the
    same query with other speed levers (another sequence of cuts) may stop at a point
    of :math:`R(\sigma - t) \setminus R(\sigma)`: the status would depend on the levers.
    So the loop runs again (``run(level, iterations)``, the cuts kept: every model of Δ
    is a valid cut at any margin) with the master margin s = σ - t for the model and
    every copy (``m.margin``, a mutable parameter each copy's validity refers to) and the
    adversary certifying at 0: Algorithm 1 with σ' = s, t' = s, whose cuts keep the
    gap s between a cut point and the next master's, so Prop. 2's finite convergence
    holds. Its master is infeasible only if :math:`R(s) = \emptyset`, which no loop at
    a higher level can contradict; but a loop at s may still stop at a point of
    :math:`R(0) \setminus R(s)`, so an infeasible master at σ - t descends once more, to
    s = :data:`LAST_LEVEL` · t. There the band left, :math:`[0, s)`, is a hundredth of
    t: within it (a point Δ-robust by less than s) the status may still depend on the
    levers, as for any loop that stops on a tolerance. The claims are about
    :math:`R(s)` of the level reached: ``optimal`` among those points, ``infeasible``
    that none exists. Each run gets the iterations left of ``max_iterations``; with none
    left the answer is ``ITERATION_LIMIT``."""
    loop, level, above = first, sigma, [f"σ={sigma:g}"]
    for lower in margin_levels(sigma, tolerance):
        if loop.status is not RobustStatus.INFEASIBLE or not loop.master_failed:
            break
        done = loop.iterations
        left = max_iterations - done
        if left < 1:
            return dataclasses.replace(loop, status=RobustStatus.ITERATION_LIMIT, message=(
                f"{loop.message}; the iteration cap came before deciding at margin "
                f"{lower:g} whether a point robust at that margin exists")), level
        saved = adversary.threshold
        m.margin, adversary.threshold = lower, 0.0
        try:
            second = run(lower, left)
        finally:
            m.margin, adversary.threshold = sigma, saved
        second.iterations += done
        second.master_seconds += loop.master_seconds
        second.adversary_seconds += loop.adversary_seconds
        levels = " nor ".join(above)
        second.message = (f"no point is Δ-robust with margin {levels} (master infeasible); "
                          f"decided at margin {lower:g}"
                          + (f": {second.message}" if second.message else ""))
        loop, level = second, lower
        above.append(f"{lower:g}")
    return loop, level
