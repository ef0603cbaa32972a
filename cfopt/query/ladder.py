r"""A solve from a proven lower bound up a ladder of objective radii (issue 21).

A cutting-set loop's masters only gain constraints, so the proven bound :math:`L` of
one master bounds the next one's optimum from below, and that optimum is most often a
little above :math:`L` (K-robust masters on the garments MLP: +0.4 % to +12 % per
iteration). Every point of objective :math:`\le r` changes few features by little
(:func:`~cfopt.query.restrictions.relu.radius_bounds`: a feature costs its L0
coefficient and its weighted move), so the big-M constants of the network *and of every
copy of it* that a declared block or a cutting-set adversary adds
(:meth:`~cfopt.constraints.ConstraintBlock.network_copies`) can be those over that small
set. For :math:`r = L \cdot \rho` with :math:`\rho` in :data:`RUNGS`, and before each,
with an L0 coefficient :math:`b`, just below each multiple :math:`k b` it passes
(:math:`k \le` :data:`COUNT_RUNGS` + 1; within it at most :math:`k - 1` features change,
a far smaller problem):

1. solve the problem :math:`P_r` with those bounds (split by the few features a point
   within :math:`r` can change when that pays: :mod:`.supports`). :math:`P_r` holds
   every point of the declared problem of objective :math:`\le r`, and only points of
   the declared problem (tighter bounds on the pre-activations only remove points);
2. if :math:`P_r` is infeasible, or its proven bound is :math:`\ge r`, no point of
   objective :math:`\le r` exists: :math:`r` is the new lower bound; climb to the next
   rung, or to the objective :math:`U` of the point :math:`P_r`'s solve found when that
   is lower (it is a point of the declared problem, so :math:`P_U` holds the optimum);
3. otherwise its answer is the declared problem's: a point of :math:`P_r` is a point of
   the declared problem, and its bound :math:`b` stands for every point of objective
   :math:`\le r`, those beyond :math:`r` being above it anyway, so :math:`\max(L,
   \min(b, r))` is a valid bound (an optimum :math:`\le r` is the optimum).

Past the last rung, the declared problem is solved with the bound climbed so far.

**Ascent from a guess** (:func:`ascend`, issue 37). When the query's heuristic point is
no point of the declared problem (it breaks a declared block or a constraint of the
user's own, or the real model does not verify it), its distance :math:`g` bounds
nothing, but the same steps climb from it with no lower bound yet: rungs :math:`r_k =
\underline t + 2^k g` (:data:`GROWTH`; :math:`\underline t` a lower bound of the costs
beyond the distance, so that :math:`r_k` admits the distances up to :math:`2^k g`),
each solved on the predictor's restriction to the points of objective :math:`\le r_k`
(a tree ensemble's leaves within the radius,
built per query for a large one; a network's bounds within it: exact for those points,
:mod:`.restrictions`). A rung's proven optimum :math:`\le r` is the answer; a rung
proven empty below :math:`r` (infeasible, or a bound :math:`\ge r`) makes :math:`r`
the lower bound; a point the solve finds is a point of the declared problem once
verified, and its objective :math:`U` the last rung (:math:`P_U` holds the optimum). A
rung out of time answers with its point and :math:`\max(L, \min(b, r))`; a region too
large to build by the deadline answers with the best verified point and :math:`L`,
saying so. From :math:`r \ge` the objective's upper bound over the box (or after
:data:`MAX_ASCENT` rungs) the declared problem is solved whole.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyomo.environ as pyo

from ..formulations.tree_regions import RegionTooLarge
from ..results.status import Status
from ..solvers import SolveOutcome, SolverBackend, SolverSettings
from .claims import REGION_TOO_LARGE
from .inner_radius import after, with_floor
from .restrictions import Restriction, restriction_of
from .restrictions.relu import network_copies, objective_value, unstable_neurons
from .restrictions.relu_points import factual_score
from .solution import Verification, start_of, verified_solution
from .supports import solve_split, supports

if TYPE_CHECKING:
    from ..formulations.predictors import NetworkCopy
    from ..problem import CounterfactualModel

#: the radii tried, as multiples of the lower bound, before the declared problem
RUNGS = (1.125, 1.5, 3.0)

#: the most changed features of a rung just below a multiple of the L0 coefficient
COUNT_RUNGS = 3

#: the most unstable neurons beyond the first hidden layer (over the model's network and
#: its copies) of a problem solved whole rather than up the ladder. A radius tightens
#: the first layer's bounds exactly but the deeper layers' most (their interval bounds
#: loosen with the first layer's box), so a network of one hidden layer gains little:
#: a South German credit master (16 hidden neurons, three copies) took 0.6-1.0 s whole
#: and 2.8 s up the ladder, while a garments one (32-16, five copies) took 24 s whole and
#: 0.6 s up the ladder (``benchmarks/combined_robustness.py``)
HARD_NEURONS = 8

NO_TIME = SolveOutcome(Status.NO_SOLUTION, None, None, None, 0.0, "maxTimeLimit")

#: the factor from one rung of an ascent to the next
GROWTH = 2.0

#: the most rungs of an ascent before the declared problem whole
MAX_ASCENT = 12


def too_large_to_load(leaves: int, seconds: float) -> SolveOutcome:
    """The outcome of a query whose tree region of ``leaves`` leaves was built, but whose
    ``seconds`` left are too short to load it into the solver and solve
    (:data:`~cfopt.formulations.tree_regions.BUILD_SECONDS_PER_LEAF` each, and the
    backend's overhead on the model)."""
    return SolveOutcome(Status.NO_SOLUTION, None, None, None, 0.0, REGION_TOO_LARGE,
                        f"the trees' region of {leaves} leaves could not be loaded into the "
                        f"solver and solved in the {seconds:.1f} s left")


def too_large(radius: float) -> SolveOutcome:
    """The outcome of a tree region within ``radius`` that could not be built by the
    query's deadline (:class:`~cfopt.formulations.tree_regions.RegionTooLarge`)."""
    where = "the whole actionable region" if math.isinf(radius) else f"radius {radius:.6g}"
    return SolveOutcome(Status.NO_SOLUTION, None, None, None, 0.0, REGION_TOO_LARGE,
                        f"the trees' leaves within {where} of the factual could not be "
                        f"built in the time left")


def first_floor(m: CounterfactualModel) -> float | None:
    """A proven lower bound on the optimum before any solve: a counterfactual of a
    factual that is no counterfactual itself changes at least one feature, which costs
    the L0 coefficient, and every cost beyond the distance is at least
    :attr:`~cfopt.constraints.raw.RawProblem.extra_floor`. The factual must be none for the real
    model (not a target) *and* for the MILP (the float64 network's target score below
    the margin, beyond a band of 1e-6 (1 + |score|)): at a tie the real model's float32
    logits can go either way (differential seed 95721: class 0 alone, class 3 in a
    batch, while the float64 network puts the factual in the target with margin).
    ``None`` without an L0 term, or when the factual may be a counterfactual."""
    b = m.objective_terms.get("l0", 0.0)
    if b <= 0 or not m.target or m.is_target(m.factual_class):
        return None
    score = factual_score(m)
    margin = float(pyo.value(m.margin))
    floor = b + m.raw.extra_floor
    if score is None or score >= margin - 1e-6 * (1.0 + abs(score)) or not floor > 0:
        return None
    return floor


def can_climb(m: CounterfactualModel, floor: float | None,
              copies: Sequence[NetworkCopy] = ()) -> bool:
    """Whether a solve of ``m`` should go up the ladder from ``floor``: a positive finite
    lower bound, a predictor kind with a radius restriction (ReLU networks), a cap on
    the changed features within a radius (an L0 term or ``max_changes``: the rungs are
    then split by the features that may change, :mod:`.supports`; without it each rung
    is a whole solve and the radius rarely tightens more than the query's box, HELOC
    PROPLACE masters 25 % slower up the ladder), and more than :data:`HARD_NEURONS`
    unstable neurons beyond the first hidden layer in the model's network, the copies
    of it the declared blocks add and ``copies``."""
    restriction = restriction_of(m)
    capped = m.objective_terms.get("l0", 0.0) > 0 or math.isfinite(m.change_cap)
    return (floor is not None and math.isfinite(floor) and floor > 0 and capped
            and restriction is not None and restriction.by_radius and restriction.applies(m)
            and unstable_neurons([*network_copies(m), *copies], first=1) > HARD_NEURONS)


@contextmanager
def within_radius(m: CounterfactualModel, radius: float, details: dict[str, Any],
                  support: Collection[str] | None = None,
                  copies: Sequence[NetworkCopy] = ()) -> Iterator[None]:
    """The predictor's radius restriction (module docstring, step 1) of the model's
    network, every copy the declared blocks add and ``copies`` (e.g. a cutting-set
    adversary's), over the points changing only features of ``support`` (default:
    any), while entered."""
    restriction = restriction_of(m)
    own = None if restriction is None else restriction.within_radius(m, radius, details,
                                                                     support, copies)
    with own if own is not None else nullcontext():
        yield


def solve_within(m: CounterfactualModel, backend: SolverBackend,
                 budget: Callable[[], SolverSettings | None], radius: float,
                 details: dict[str, Any], copies: Sequence[NetworkCopy] = ()
                 ) -> SolveOutcome:
    """Solve :math:`P_r` (module docstring, step 1): split by the features it may change
    when that pays (:mod:`.supports`), else whole; ``NO_SOLUTION`` when no time is
    left."""
    sets = supports(m, radius)
    if sets is not None:
        details["split"] = details.get("split", 0) + len(sets)
        return solve_split(m, backend, budget, sets,
                           lambda support: within_radius(m, radius, details, support, copies))
    settings = budget()
    if settings is None:
        return NO_TIME
    with within_radius(m, radius, details, copies=copies):
        return backend.solve(m, settings)


def _rungs(m: CounterfactualModel, floor: float) -> list[float]:
    r"""The radii :math:`L\rho`, :math:`\rho \in` :data:`RUNGS`, and before each, just
    below every multiple :math:`k b \le (` :data:`COUNT_RUNGS` :math:`+ 1) b` of the L0
    coefficient it passes: a radius below :math:`k b` admits :math:`k - 1` changed
    features, a far smaller problem (:mod:`.supports`) that often holds the optimum."""
    b = m.objective_terms.get("l0", 0.0)
    rungs: list[float] = []
    for factor in RUNGS:
        top = floor * factor
        if b > 0:
            k = math.floor(max([floor, *rungs[-1:]]) / b) + 1
            while k * b < top and k <= COUNT_RUNGS + 1:
                below = k * b * (1 - 1e-6)
                if below > max([floor, *rungs[-1:]]):
                    rungs.append(below)
                k += 1
        rungs.append(top)
    return rungs


def climb(m: CounterfactualModel, backend: SolverBackend,
          budget: Callable[[], SolverSettings | None], floor: float,
          details: dict[str, Any], copies: Sequence[NetworkCopy] = ()
          ) -> SolveOutcome:
    """Solve ``m`` up the ladder from the proven lower bound ``floor`` (module
    docstring); ``budget`` gives each solve's settings (``None``: no time left);
    ``copies``: more copies of the network to bound within each radius (a cutting-set
    adversary's cuts)."""
    known, spent, found = floor, None, math.inf  # found: a point's objective
    for rung in _rungs(m, floor):
        radius = min(rung, found * (1 + 1e-6))
        alone = solve_within(m, backend, budget, radius, details, copies)
        details.setdefault("ladder", []).append((radius, alone.status.value, alone.wall_time))
        outcome = after(spent, alone)
        above = outcome.status is Status.INFEASIBLE or (
            outcome.bound is not None and outcome.bound >= radius)
        if not above:
            return with_floor(outcome, known, radius)
        known, spent = radius, outcome
        if outcome.objective is not None:  # a point of P_r, so of the declared problem
            found = min(found, outcome.objective)
    settings = budget()
    if settings is None:
        # pragma: no mutate start (no bound, no INFEASIBLE or ERROR: radius unread)
        return with_floor(after(spent, NO_TIME), known, math.inf)
        # pragma: no mutate end
    alone = backend.solve(m, settings)
    # pragma: no mutate start (the rungs set details["ladder"]: RUNGS is not empty)
    details.setdefault("ladder", []).append((math.inf, alone.status.value, alone.wall_time))
    # pragma: no mutate end
    return with_floor(after(spent, alone), known, math.inf)


def ascend(m: CounterfactualModel, backend: SolverBackend,
           budget: Callable[[], SolverSettings | None], restriction: Restriction,
           candidate: pd.DataFrame, guess: float, details: dict[str, Any], deadline: float,
           incumbent: list[Verification],
           stopped: Callable[[], SolveOutcome] = lambda: NO_TIME) -> SolveOutcome:
    """Solve ``m`` up the ladder of radii from the distance ``guess`` of the heuristic
    point ``candidate``, which the declared problem does not admit (module docstring,
    *ascent*); ``budget`` gives each solve's settings (``None``: no time left),
    ``deadline`` bounds the building of tree regions; a verified point of a rung better
    than ``incumbent[0]`` (if any) takes its place, and starts the later rungs;
    ``stopped`` says why ``budget`` gave no settings (default: the time is up)."""
    floor, spent = -math.inf, None
    distance, found = guess, math.inf
    for _ in range(MAX_ASCENT):
        radius = min(m.raw.extra_floor + distance, found * (1 + 1e-6) + 1e-9)
        if not (distance > 0 and math.isfinite(radius) and radius < m.max_objective):
            break
        try:
            restricted = restriction.restrict(m, candidate, radius, details, deadline,
                                              verified=False)
        except RegionTooLarge:
            # pragma: no mutate start (no bound, no INFEASIBLE or ERROR: radius unread)
            return _known(after(spent, too_large(radius)), floor, math.inf)
            # pragma: no mutate end
        if restricted is None:
            break
        if restricted.rebuilt:
            backend.reset()
        settings = budget()
        if settings is None:
            # pragma: no mutate start (no bound, no INFEASIBLE or ERROR: radius unread)
            return _known(after(spent, stopped()), floor, math.inf)
            # pragma: no mutate end
        start = start_of(m, incumbent[0].row) if incumbent else None
        with restricted.context:
            alone = backend.solve(m, settings, start)
        details.setdefault("ascent", []).append((radius, alone.status.value, alone.wall_time))
        outcome = after(spent, alone)
        found = _verified(m, outcome, incumbent)
        beyond = outcome.objective is not None and outcome.objective > radius * (
            1 + 1e-6) + 1e-9
        if outcome.status is Status.OPTIMAL and not beyond:
            return _known(outcome, floor, radius)
        empty = outcome.status is Status.INFEASIBLE or beyond or (
            outcome.bound is not None and outcome.bound >= radius)
        if not empty:  # the rung's solve stopped without a proof (time)
            return _known(outcome, floor, radius)
        floor, spent = radius, outcome
        distance *= GROWTH
    settings = budget()
    if settings is None:
        # pragma: no mutate start (no bound, no INFEASIBLE or ERROR: radius unread)
        return _known(after(spent, stopped()), floor, math.inf)
        # pragma: no mutate end
    try:
        whole = restriction.whole(m, details, deadline)
    except RegionTooLarge:
        # pragma: no mutate start (no bound, no INFEASIBLE or ERROR: radius unread)
        return _known(after(spent, too_large(math.inf)), floor, math.inf)
        # pragma: no mutate end
    if whole:
        backend.reset()
        settings = budget()
        if settings is None:
            # pragma: no mutate start (no bound, no INFEASIBLE or ERROR: radius unread)
            return _known(after(spent, stopped()), floor, math.inf)
            # pragma: no mutate end
    start = start_of(m, incumbent[0].row) if incumbent else None
    alone = backend.solve(m, settings, start)
    details.setdefault("ascent", []).append((math.inf, alone.status.value, alone.wall_time))
    return _known(after(spent, alone), floor, math.inf)


def _verified(m: CounterfactualModel, outcome: SolveOutcome,
              incumbent: list[Verification]) -> float:
    """The objective of the best verified point known after ``outcome`` (``inf``: none):
    the solve's point, decoded and verified, replaces ``incumbent[0]`` when cheaper."""
    if outcome.status.has_solution:
        point = verified_solution(m, m.declared_margin)
        if point.verified:
            value = objective_value(m, point.row)
            if not incumbent or value < objective_value(m, incumbent[0].row):
                incumbent[:] = [point]
    return objective_value(m, incumbent[0].row) if incumbent else math.inf


def _known(outcome: SolveOutcome, floor: float, radius: float) -> SolveOutcome:
    """``outcome`` of a solve restricted to the points of objective ``<= radius`` with
    the bound valid for the declared problem: ``max(floor, min(bound, radius))``
    (``floor``: a radius below which no point exists; ``-inf``: none)."""
    if outcome.status in (Status.INFEASIBLE, Status.ERROR) and math.isinf(radius):
        return outcome
    own = -math.inf if outcome.bound is None else min(outcome.bound, radius)
    if outcome.status is Status.INFEASIBLE:  # no point within the radius: floor it
        own = radius
    bound = max(floor, own)
    return dataclasses.replace(outcome, bound=None if math.isinf(bound) else bound)
