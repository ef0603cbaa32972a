r"""Two model-shift baselines of PROPLACE Table 1 (Jiang, Lan, Leofante, Rago, Toni
2024): the plain closest counterfactual checked afterwards (:class:`NonRobustMILP`), and
MILP-R (Jiang et al. 2023, :class:`MILPR`), which raises the validity margin until the
exact Δ-check certifies, on :class:`~cfopt.methods.cutting_set.CuttingSet`: the master
is the closest counterfactual with margin μ, the adversary the model-shift check, and
its counterexample's cut a larger margin.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..constraints.blocks import ConstraintBlock
from ..explainer import Explainer
from ..problem import CounterfactualModel
from ..query.solution import verified_solution
from ..results.robust import (
    RobustCounterfactual,
    RobustnessCertificate,
    RobustnessVerdict,
    RobustStatus,
)
from ..results.status import Status
from ..solvers import SolverBackend
from ..space.space import FeatureSpace
from .adversaries.model_shift import ModelShiftAdversary, RobustnessChecker
from .base import (
    RobustMethod,
    check_count,
    check_positive,
    gc_paused,
    require_space_encoding,
    target_index,
)
from .cutting_set import Check, CuttingSet, Deadline, Master, MasterAnswer, failure_status


class MarginMaster(Master):
    """MILP-R's master: the closest counterfactual of ``m`` with validity margin μ.
    Each cut sets ``μ ← max(growth · μ, μ - v)`` (:meth:`raise_margin`); an infeasible
    margin after an uncertified one is not a proof: μ bisects between the largest
    uncertified and the smallest infeasible margin, and the master is solved again."""

    def __init__(self, m: CounterfactualModel, backend: SolverBackend, margin: float,
                 growth: float) -> None:
        self.m, self.backend, self.margin, self.growth = m, backend, margin, growth
        self.low: float | None = None   # largest margin solved but not certified
        self.high: float | None = None  # smallest infeasible margin
        #: the proven bound of the last solve that gave a point
        self.bound: float | None = None

    def solve(self, deadline: Deadline) -> MasterAnswer:
        settings = deadline.left()
        if settings is None:
            return MasterAnswer(Status.NO_SOLUTION, solved=False, message="time limit reached")
        self.m.margin = self.margin
        outcome = self.backend.solve(self.m, settings)
        if outcome.status is Status.INFEASIBLE and self.low is not None:
            self.high = self.margin
            self.margin = (self.low + self.high) / 2
            return MasterAnswer(Status.INFEASIBLE, retry=True)
        if not outcome.status.has_solution:
            return MasterAnswer(outcome.status, message=(
                f"no counterfactual with margin {self.margin:g} ({outcome.termination})"))
        self.bound = outcome.bound
        return MasterAnswer(outcome.status, point=verified_solution(self.m).row,
                            bound=outcome.bound)

    def raise_margin(self, verdict: RobustnessVerdict) -> None:
        """The worst model lowers the logit from about μ to its value ``v``: ask for that
        drop."""
        self.low = self.margin
        drop = self.margin - verdict.value if verdict.value is not None else 0.0
        self.margin = max(self.growth * self.margin, drop)
        if self.high is not None:
            self.margin = min(self.margin, (self.low + self.high) / 2)


class MarginAdversary(ModelShiftAdversary):
    """The model-shift check at level 0 whose every uncertified verdict raises the
    master's margin (MILP-R's cut)."""

    def __init__(self, checker: RobustnessChecker, m: CounterfactualModel, target: int,
                 master: MarginMaster) -> None:
        super().__init__(checker, m, target, 0.0)
        self.master = master

    def check(self, answer: MasterAnswer, deadline: Deadline) -> Check:
        verdict = self.verdict(answer.point, deadline)
        return Check(certified=bool(verdict.robust), bound=verdict.bound, verdict=verdict,
                     counterexample=verdict)

    def add_cut(self, check: Check) -> None:
        self.master.raise_margin(check.counterexample)


class NonRobustMILP(RobustMethod):
    """The plain closest counterfactual (:class:`~cfopt.Explainer`), with its Δ-robustness
    checked afterwards (the baseline "MILP" of PROPLACE Table 1).

    Args are those of :class:`~cfopt.Explainer` plus ``delta`` for the check.
    """

    method = "milp"

    def __init__(self, model: Any, space: FeatureSpace, *, delta: float,
                 solver: str | SolverBackend = "highs",  # pragma: no mutate (names ignore case)
                 margin: float = 1e-3,
                 time_limit: float | None = None, mip_gap: float = 1e-4,
                 threads: int | None = 1, seed: int | None = 0, **options: Any) -> None:
        super().__init__(model, space, delta=delta, solver=solver, time_limit=time_limit,
                         mip_gap=mip_gap, threads=threads, seed=seed)
        self.explainer = Explainer(model, space, solver=self.backend, margin=margin,
                                   time_limit=time_limit, mip_gap=mip_gap, threads=threads,
                                   seed=seed, **options)
        self.milp = self.explainer.milp
        require_space_encoding(self.milp)
        self.checker = RobustnessChecker(model, self.delta, solver=self.backend.name)

    @gc_paused
    def explain(self, x: pd.DataFrame | pd.Series | Mapping,
                target: Any = None) -> RobustCounterfactual:
        """The closest counterfactual of ``x``, then its exact robustness check."""
        t0 = time.perf_counter()
        ce = self.explainer.explain(x, target)
        m = self.milp
        certificate = RobustnessCertificate(self.delta, None, None, 0.0, None, iterations=1)
        if not ce.found:
            return self._result(m, failure_status(ce.status), None, certificate, t0,
                                message=ce.message)
        a0 = time.perf_counter()
        verdict = self.checker.check(m.space.encode(ce.counterfactual)[0], target_index(m))
        certificate.times = {"master": ce.total_time, "adversary": time.perf_counter() - a0}
        certificate.verdict, certificate.bound, certificate.robust = (verdict, verdict.bound,
                                                                      verdict.robust)
        status = RobustStatus.CERTIFIED if verdict.robust else RobustStatus.NOT_ROBUST
        return self._result(m, status, ce.counterfactual, certificate, t0, bound=ce.bound,
                            details={"margin": ce.margin})


class MILPR(RobustMethod):
    """MILP-R (Jiang et al. 2023): the closest counterfactual with validity margin μ,
    raising μ until the exact check certifies Δ-robustness. Each round sets
    ``μ ← max(growth · μ, μ - v)`` with ``v`` the worst shifted model's margin at
    the last point (the logit drop the shift caused there); once a margin is
    infeasible, μ bisects between the largest uncertified and the smallest infeasible
    margin. The other arguments are as :class:`Proplace`'s (no plausible region).

    Args:
        initial_margin: the first μ (logit units).
        growth: factor (> 1) applied to μ after each uncertified round.
        max_rounds: cap on margin rounds.
    """

    method = "milp-r"

    def __init__(self, model: Any, space: FeatureSpace, *, delta: float,
                 initial_margin: float = 0.01, growth: float = 2.0, max_rounds: int = 20,
                 time_limit: float | None = None,
                 solver: str | SolverBackend = "highs",  # pragma: no mutate (names ignore case)
                 objective: str | Mapping[str, float] = "l1",
                 weights: str | Mapping[str, float] = "range", max_changes: int | None = None,
                 bound_tightening: str | None = "lp", constraints: Sequence[ConstraintBlock] = (),
                 mip_gap: float = 1e-4, threads: int | None = 1, seed: int | None = 0,
                 solver_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(model, space, delta=delta, solver=solver, time_limit=time_limit,
                         mip_gap=mip_gap, threads=threads, seed=seed,
                         solver_options=solver_options)
        self.initial_margin = check_positive("initial_margin", initial_margin)
        self.growth = check_positive("growth", growth)
        if self.growth <= 1:
            raise ValueError(f"growth must be > 1 (the margin must increase), got {growth!r}")
        self.max_rounds = check_count("max_rounds", max_rounds)
        self.milp = CounterfactualModel(model, space, objective=objective, weights=weights,
                                        max_changes=max_changes, margin=self.initial_margin,
                                        bound_tightening=bound_tightening,
                                        constraints=constraints)
        require_space_encoding(self.milp)
        self.checker = RobustnessChecker(model, self.delta, solver=self.backend.name)
        self.build_time = self.milp.build_time
        self._build_pending = True
        self.loop = CuttingSet(self.max_rounds)

    @gc_paused
    def explain(self, x: pd.DataFrame | pd.Series | Mapping,
                target: Any = None) -> RobustCounterfactual:
        """The closest counterfactual of ``x`` whose margin makes it certified Δ-robust."""
        t0 = time.perf_counter()
        one_off = self.build_time if self._build_pending else 0.0
        self._build_pending = False
        m = self.milp
        m.set_factual(x)
        m.set_target(target)
        master = MarginMaster(m, self.backend, self.initial_margin, self.growth)
        adversary = MarginAdversary(self.checker, m, target_index(m), master)
        try:
            loop = self.loop.run(master, [adversary], self.deadline(t0))
        finally:
            m.margin = self.initial_margin
        certificate = RobustnessCertificate(
            self.delta, None, None, 0.0, None, iterations=loop.iterations,
            times={"master": loop.master_seconds, "adversary": loop.adversary_seconds})
        (check,) = loop.checks
        if check is not None:
            v = certificate.verdict = check.verdict
            certificate.bound, certificate.robust = v.bound, v.robust
        row = None if loop.master_failed or loop.candidate is None else loop.candidate.point
        return self._result(m, loop.status, row, certificate, t0, bound=master.bound,
                            message=loop.message, details={"margin": master.margin},
                            one_off=one_off)
