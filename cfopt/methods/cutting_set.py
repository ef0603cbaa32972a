r"""The one cutting-set loop of cfopt's robust methods.

Every robust method alternates a *master* problem (the closest counterfactual that
meets every counterexample collected so far) with one or more *adversaries* (exact
searches for a counterexample at the master's point):

1. master: solve; a proven-infeasible master proves that no robust counterfactual
   exists (the master relaxes the robust problem);
2. each adversary checks the candidate in turn, within the query's remaining time:
   it certifies it (with its proven bound) or returns a counterexample;
3. if every adversary certified, stop: the candidate is certified, and optimal among
   robust counterfactuals when the master proved optimality; else every counterexample
   found becomes a cut of the master, and repeat. A master may answer with a point of
   a restriction of itself (e.g. of the linear pieces at the last point: cheap, and
   feasible for the master, but not its proven optimum); certified, such a point ends
   the loop only once a solve of the master itself proves it optimal within its gap
   (:meth:`Master.prove`), else the master's better point is checked in turn.

An adversary certifies at its own threshold (PROPLACE's Δ-adversary: a proven bound
≥ σ - t), which may be stricter than the level at which a method's answer states
robustness (Δ: bound ≥ 0). A loop cut short by a limit returns its last candidate
with the checks made on it: the answer may then prove the point robust at its own
level, but the loop did not stop, so nothing is claimed of its optimality
(:attr:`LoopResult.optimal` is only true with ``CERTIFIED``).

This is Algorithm 1 of PROPLACE (Jiang, Lan, Leofante, Rago, Toni 2024: the
adversary returns the worst shifted model of Δ, the cut is one more network copy),
the scenario loop of K-robustness (Virgolin & Fracaros 2023 define K-robustness;
the exact K-adversary and its scenario cuts are cfopt's), and MILP-R (Jiang et al.
2023: the cut raises the validity margin). The engine owns the iteration cap, the
deadline (one per query, shared by the master solves and the checks) and the status
mapping; methods supply a :class:`Master` and a list of :class:`Adversary`.

Statuses (:class:`~cfopt.results.robust.RobustStatus`):

* ``CERTIFIED``: every adversary certified the last candidate;
* ``NOT_ROBUST``: an adversary neither certified the candidate nor found a
  counterexample, with time left;
* ``TIME_LIMIT``: the deadline passed (before a master solve, before a check, or
  during an undecided check), or the master ran out of time (the last candidate, if
  any, is returned without the loop's certificate);
* ``INFEASIBLE``: the master is proven infeasible;
* ``ITERATION_LIMIT``: the cap on master solves was reached (the last candidate is
  returned without the loop's certificate);
* ``VERIFICATION_FAILED`` / ``ERROR``: the master's answer failed the real model's
  check / the solver failed.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..results.robust import RobustStatus
from ..results.status import Status
from ..solvers import SolverSettings
from ..solvers.base import time_left

if TYPE_CHECKING:
    from ..formulations.predictors import NetworkCopy
    from ..problem import CounterfactualModel

#: what a loop cut short says of its last candidate
UNCERTIFIED = ("the last point is returned without the loop's certificate (the answer's "
               "certificate says what its checks proved) and is not claimed optimal")

_MASTER_FAILURE = {Status.INFEASIBLE: RobustStatus.INFEASIBLE,
                   Status.NO_SOLUTION: RobustStatus.TIME_LIMIT,
                   Status.VERIFICATION_FAILED: RobustStatus.VERIFICATION_FAILED}


def failure_status(status: Status) -> RobustStatus:
    """How a master solve that gave no point ends a robust query (infeasible: proven
    infeasible; no solution: time limit; verification failed; otherwise: error)."""
    return _MASTER_FAILURE.get(status, RobustStatus.ERROR)


class Deadline:
    """One query's time budget, shared by every master solve and adversary check.

    Args:
        settings: the query's solver settings; ``settings.time_limit`` (seconds, or
            ``None`` for no limit) counts from ``started``.
        started: ``time.perf_counter()`` when the query started (default: now).
    """

    def __init__(self, settings: SolverSettings, started: float | None = None) -> None:
        self.settings = settings
        self.started = time.perf_counter() if started is None else started

    def left(self) -> SolverSettings | None:
        """The settings with the time left as their limit; ``None`` when it is up."""
        return time_left(self.settings, self.started)

    @property
    def expired(self) -> bool:
        return self.left() is None


@dataclass
class MasterAnswer:
    """One master solve.

    Attributes:
        status: the solve's status.
        point: the candidate (a raw row); ``None`` when the solve gave none.
        bound: the solve's proven bound on the objective.
        label: the real model's class of ``point`` when the master knows it.
        message: why there is no point, in words.
        solved: a solve ran (``False``: the deadline had passed before it).
        retry: no point and no conclusion: the master changed itself (MILP-R halves
            its margin after an infeasible round) and must be solved again.
        answer: the method's own record of the solve (e.g. a
            :class:`~cfopt.Counterfactual`).
        proven: ``point`` is the master's own optimum (or best point within its
            limits); ``False``: a point of a restriction of the master (e.g. of the
            linear pieces at the last point), feasible for it but with no proven bound,
            which the loop certifies only to ask :meth:`Master.prove` for the
            master's proof.
    """

    status: Status
    point: pd.DataFrame | None = None
    bound: float | None = None
    label: Any = None
    message: str = ""
    solved: bool = True
    retry: bool = False
    answer: Any = None
    proven: bool = True


@dataclass
class Check:
    """An adversary's answer on one candidate.

    Attributes:
        certified: the candidate is proven robust against this adversary.
        bound: the adversary's proven bound (robust when it clears the adversary's
            threshold).
        verdict: the adversary's own report (e.g. a
            :class:`~cfopt.results.robust.RobustnessVerdict`).
        counterexample: what :meth:`Adversary.add_cut` adds to the master; ``None``
            when the check neither certified nor found one.
        note: why the check is undecided, in words.
    """

    certified: bool
    bound: float | None
    verdict: Any
    counterexample: Any = None
    note: str = ""


class Master(ABC):
    """The master problem of one query."""

    @abstractmethod
    def solve(self, deadline: Deadline) -> MasterAnswer:
        """Solve within the deadline's time left (no solve once it has passed:
        ``MasterAnswer(Status.NO_SOLUTION, solved=False)``)."""

    def prove(self, candidate: MasterAnswer, deadline: Deadline) -> MasterAnswer:
        """Solve the master itself once every adversary has certified ``candidate``, a
        point of a restriction (``candidate.proven`` False). Returns an answer whose
        ``point`` *is* ``candidate.point`` (the same object) when the master's proven
        bound shows the candidate optimal within its gap (status ``OPTIMAL``, that
        bound) or when the solve gave no better point (any other status: the candidate
        stays certified, unproven); else the master's own answer, which the loop checks
        as any other. By default the master's next :meth:`solve`, checked as any other
        answer (a master whose answers are all proven is never asked)."""
        return self.solve(deadline)


class Adversary(ABC):
    """An exact search for a counterexample at the master's candidate.

    Attributes:
        name: how messages name it (e.g. ``"the K-adversary"``).
    """

    name = "the adversary"

    @abstractmethod
    def check(self, answer: MasterAnswer, deadline: Deadline) -> Check:
        """Certify ``answer.point`` or find a counterexample, within the deadline's time
        left."""

    @abstractmethod
    def add_cut(self, check: Check) -> None:
        """Add ``check.counterexample`` to the master: every later candidate must meet
        it."""

    def network_copies(self, m: CounterfactualModel) -> list[NetworkCopy]:
        """The copies of the model's network the cuts added to the master ``m`` (as
        :meth:`ConstraintBlock.network_copies <cfopt.constraints.ConstraintBlock.
        network_copies>`: a master solve up a ladder of radii bounds them,
        :mod:`cfopt.query.ladder`); none by default (cuts held by a declared block are
        the block's, e.g. K-scenarios)."""
        return []


@dataclass
class LoopResult:
    """What one run of the loop ended with.

    Attributes:
        status: see the module docstring.
        message: what happened, in words (empty when certified).
        iterations: master solves.
        candidate: the last master answer with a point (``None`` once the master is
            proven infeasible); certified by the loop only when ``status`` is
            ``CERTIFIED`` (else ``checks`` hold what was proven about it).
        last: the last master answer (with or without a point).
        checks: each adversary's check of ``candidate``, in the adversaries' order
            (``None``: it did not check that point, e.g. an earlier check ended the
            loop).
        master_failed: the loop stopped on a master solve that gave no point.
        master_seconds, adversary_seconds: time spent in solves and in checks.
    """

    status: RobustStatus = RobustStatus.ITERATION_LIMIT
    message: str = ""
    iterations: int = 0
    candidate: MasterAnswer | None = None
    last: MasterAnswer | None = None
    checks: list[Check | None] = field(default_factory=list)
    master_failed: bool = False
    master_seconds: float = 0.0
    adversary_seconds: float = 0.0

    @property
    def optimal(self) -> bool:
        """Certified, and the master proved its candidate optimal."""
        return (self.status is RobustStatus.CERTIFIED and self.candidate is not None
                and self.candidate.status is Status.OPTIMAL)


#: called after every check with the candidate, the adversary and its check
Observer = Callable[[MasterAnswer, Adversary, Check], None]


class CuttingSet:
    """The loop of the module docstring.

    Args:
        max_iterations: cap on master solves per query (≥ 1).
        observer: called after every check (e.g. to drive a progress bar).
    """

    def __init__(self, max_iterations: int, observer: Observer | None = None) -> None:
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or \
                max_iterations < 1:
            raise ValueError(f"max_iterations must be a positive integer, got "
                             f"{max_iterations!r}")
        self.max_iterations = max_iterations
        self.observer = observer

    def run(self, master: Master, adversaries: Sequence[Adversary],
            deadline: Deadline) -> LoopResult:
        """Alternate master solves and adversary checks until every adversary certifies
        the candidate or a limit ends the loop. A certified candidate that is only a
        point of a restriction of the master (``proven`` False) ends the loop only once
        :meth:`Master.prove` keeps it; the proof counts as a master solve, and a
        better point it finds is checked as any other."""
        out = LoopResult(checks=[None] * len(adversaries))
        certified: MasterAnswer | None = None  # a restriction's point, its proof due
        for it in range(1, self.max_iterations + 1):
            s0 = time.perf_counter()
            answer = master.solve(deadline) if certified is None else \
                master.prove(certified, deadline)
            out.master_seconds += time.perf_counter() - s0
            out.last = answer
            if answer.solved:
                out.iterations = it
            if certified is not None and answer.point is certified.point:
                out.candidate, out.status = answer, RobustStatus.CERTIFIED
                out.message = "" if answer.status is Status.OPTIMAL else answer.message
                return out
            certified = None
            if answer.retry:
                continue
            if answer.point is None:
                out.status = failure_status(answer.status)
                out.message, out.master_failed = answer.message, answer.solved
                if out.status is RobustStatus.INFEASIBLE:
                    out.candidate = None
                return out
            out.candidate = answer
            if self._check(answer, adversaries, deadline, out):
                if out.status is not RobustStatus.CERTIFIED or answer.proven:
                    return out
                certified = answer
        if certified is not None:  # certified, but the cap came before the master's proof
            out.status = RobustStatus.CERTIFIED
            out.message = (f"{self.max_iterations} iterations reached before the master "
                           f"proved the certified point optimal; it is not claimed optimal")
            return out
        out.message = f"{self.max_iterations} iterations without the loop's stop; {UNCERTIFIED}"
        return out

    def _check(self, answer: MasterAnswer, adversaries: Sequence[Adversary],
               deadline: Deadline, out: LoopResult) -> bool:
        """Every adversary checks the candidate in turn; their counterexamples become
        cuts. True when the loop ends here (certified, or a check ended it)."""
        cuts: list[tuple[Adversary, Check]] = []
        out.checks = [None] * len(adversaries)  # checks of this candidate only
        for k, adversary in enumerate(adversaries):
            if deadline.expired:
                out.status = RobustStatus.TIME_LIMIT
                out.message = (f"time limit reached before {adversary.name} checked the "
                               f"last point")
                return True
            a0 = time.perf_counter()
            check = adversary.check(answer, deadline)
            out.adversary_seconds += time.perf_counter() - a0
            out.checks[k] = check
            if self.observer is not None:
                self.observer(answer, adversary, check)
            if check.certified:
                continue
            if check.counterexample is None:
                out.status = (RobustStatus.TIME_LIMIT if deadline.expired
                              else RobustStatus.NOT_ROBUST)
                out.message = check.note
                return True
            cuts.append((adversary, check))
        if not cuts:
            out.status, out.message = RobustStatus.CERTIFIED, ""
            return True
        for adversary, check in cuts:
            adversary.add_cut(check)
        return False
