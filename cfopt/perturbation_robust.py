r"""Counterfactuals robust to adverse input perturbations (Virgolin & Fracaros 2023),
exact: the C-setback cost in the objective and a K-adversary cutting-scenario loop.

``robustness`` chooses what is sought:

* ``"none"``: the closest counterfactual (Eq. 1);
* ``"C"``: the counterfactual minimising intervention cost plus the cost of undoing
  its maximal C-setback (Def. 4, Eq. 6; :class:`~cfopt.formulations.SetbackCost`);
* ``"K"``: the closest counterfactual whose K-neighbourhood the model classifies
  entirely as the counterfactual's class (Def. 6), by a scenario loop: the master
  (:class:`~cfopt.formulations.KScenarios`) finds the closest counterfactual valid under
  every scenario collected so far; the exact adversary
  (:class:`~cfopt.formulations.KAdversary`) searches its K-neighbourhood; a
  counterexample becomes a scenario; the loop stops when the adversary's proven bound
  certifies the counterfactual. The master relaxes the K-robust problem, so a
  certified answer of an optimal master is optimal among K-robust counterfactuals
  (whose changed features move by at least ``min_change`` of their range), and an
  infeasible master proves that none exists;
* ``"CK"``: both, in one problem and one certificate.

The paper's own search (CoGS) samples K-neighbourhoods and certifies nothing. The loop
only composes blocks and solves; the algebra is in
:mod:`cfopt.formulations.perturbations`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .explainer import Explainer
from .features import FeatureSpace
from .formulations.blocks import ConstraintBlock
from .formulations.diversity import MIN_CHANGE
from .formulations.perturbations import KAdversary, KScenarios, KVerdict, SetbackCost
from .perturbations import setback_cost
from .results import Counterfactual, _plain, _row_dict
from .robust import RobustStatus
from .solvers.base import time_left
from .status import Status

ROBUSTNESS = ("none", "C", "K", "CK")


@dataclass
class PerturbationRobustCounterfactual:
    """The answer to one query.

    Attributes:
        robustness: what was sought (``"none"``, ``"C"``, ``"K"``, ``"CK"``).
        status: ``CERTIFIED`` (verified, and K-robustness proven when sought),
            ``NOT_ROBUST`` (verified; the K-adversary found no proof: see
            ``k_verdict``), ``INFEASIBLE`` (proven: no counterfactual meets the
            constraints and the collected scenarios), ``ITERATION_LIMIT``,
            ``TIME_LIMIT``, ``VERIFICATION_FAILED``, ``ERROR``.
        counterfactual: the last master answer (a :class:`~cfopt.Counterfactual`).
        k_verdict: the K-adversary's last verdict on it (``None`` unless K was sought
            or :meth:`PerturbationRobustExplainer.certify` was called).
        iterations: master solves.
        scenarios: the K-perturbation scenarios the master had to satisfy.
        setback_cost: the cost of undoing the maximal C-setback of the answer (raw).
        optimal: the master proved optimality and the answer is certified: optimal
            among the counterfactuals with the robustness sought.
        total_time: wall seconds of the query; ``adversary_time`` of its K checks.
        message: what happened, in words.
    """

    robustness: str
    status: RobustStatus
    counterfactual: Counterfactual
    k_verdict: KVerdict | None
    iterations: int
    scenarios: list[dict[str, Any]]
    setback_cost: float | None
    optimal: bool
    total_time: float
    adversary_time: float = 0.0
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        return self.counterfactual.found

    @property
    def certified(self) -> bool:
        return self.found and self.status is RobustStatus.CERTIFIED

    @property
    def row(self) -> pd.DataFrame | None:
        """The counterfactual's raw row (``None`` when none was verified)."""
        return self.counterfactual.counterfactual if self.found else None

    def to_dict(self) -> dict[str, Any]:
        return {"robustness": self.robustness, "status": self.status.value,
                "certified": self.certified, "optimal": self.optimal,
                "counterfactual": _row_dict(self.row),
                "objective": _plain(self.counterfactual.objective),
                "bound": _plain(self.counterfactual.bound),
                "k_verdict": None if self.k_verdict is None else self.k_verdict.to_dict(),
                "iterations": self.iterations,
                "scenarios": [{k: _plain(v) for k, v in s.items()} for s in self.scenarios],
                "setback_cost": _plain(self.setback_cost), "total_time": self.total_time,
                "adversary_time": self.adversary_time, "message": self.message}


class PerturbationRobustExplainer:
    """Counterfactuals robust to C- and/or K-perturbations (see the module docstring).

    Args:
        model: the learned model (MLP, tree ensemble, linear — any family cfopt embeds).
        space: the feature space; features carry :class:`~cfopt.Perturbation`
            annotations (e.g. :func:`cfopt.datasets.load_virgolin`).
        robustness: ``"none"``, ``"C"``, ``"K"`` or ``"CK"``.
        max_iterations: cap on master solves per query (K).
        min_change: smallest move of a continuous feature, relative to its range, that
            counts as a change (K).
        tolerance: the K-adversary certifies when its proven bound on the target's
            margin exceeds this (logit units).
        constraints: more declared constraint blocks (rules, causal equations, trust
            regions) — they compose with both notions.
        **options: options of :class:`~cfopt.Explainer` (solver, objective, weights,
            margin, time_limit per query, ...).
    """

    def __init__(self, model: Any, space: FeatureSpace, *, robustness: str = "CK",
                 max_iterations: int = 20, min_change: float = MIN_CHANGE,
                 tolerance: float = 1e-6, constraints: Sequence[ConstraintBlock] = (),
                 **options: Any) -> None:
        if robustness not in ROBUSTNESS:
            raise ValueError(f"robustness must be one of {ROBUSTNESS}, got {robustness!r}")
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or \
                max_iterations < 1:
            raise ValueError(f"max_iterations must be a positive integer, got "
                             f"{max_iterations!r}")
        self.robustness = robustness
        self.max_iterations = max_iterations
        self.tolerance = float(tolerance)
        blocks = list(constraints)
        self._scenarios = KScenarios(min_change) if "K" in robustness else None
        if "C" in robustness:
            blocks.append(SetbackCost())
        if self._scenarios is not None:
            blocks.append(self._scenarios)
        self.explainer = Explainer(model, space, constraints=blocks, **options)
        self._model = model
        self._options = options
        self._adversary: KAdversary | None = None

    @property
    def milp(self) -> Any:
        """The master :class:`~cfopt.CounterfactualModel`."""
        return self.explainer.milp

    @property
    def adversary(self) -> KAdversary:
        """The K-adversary (built on first use)."""
        if self._adversary is None:
            ex = self.explainer
            self._adversary = KAdversary(
                self._model, ex.space, ex.backend, ex.settings, tolerance=self.tolerance,
                bound_tightening=self._options.get("bound_tightening", "lp"),
                tree_formulation=self._options.get("tree_formulation"))
        return self._adversary

    def certify(self, x: pd.DataFrame | pd.Series, z: pd.DataFrame | pd.Series,
                label: Any) -> KVerdict:
        """The K-adversary's verdict on a counterfactual ``z`` of ``x`` (from any
        method) that the model classifies as ``label``."""
        return self.adversary.check(x, z, label)

    def explain(self, x: pd.DataFrame | pd.Series | Mapping, target: Any = None,
                **options: Any) -> PerturbationRobustCounterfactual:
        """The counterfactual of one raw row with the robustness sought.

        ``options``: ``time_limit`` (seconds for the whole query: every master solve
        and K-check shares it), ``mip_gap``.
        """
        unknown = sorted(set(options) - {"time_limit", "mip_gap"})
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for explain(); accepted: "
                            f"time_limit, mip_gap")
        t0 = time.perf_counter()
        ex, m = self.explainer, self.explainer.milp
        settings = ex.start_query(x, target, options)
        if self._scenarios is not None and len(m.target) != 1:
            raise ValueError(f"K-robustness keeps one class; give a single target class, got "
                             f"{list(m.target)}")
        verdict: KVerdict | None = None
        adversary_time = 0.0
        status, message = RobustStatus.ITERATION_LIMIT, ""
        ce: Counterfactual | None = None
        iterations = 0
        for iterations in range(1, self.max_iterations + 1):
            ce = ex.answer(settings, t0, diagnose_infeasible=False)
            if not ce.found:
                status, message = _failed(ce, iterations)
                break
            if self._scenarios is None:
                status = RobustStatus.CERTIFIED
                break
            budget = time_left(settings, t0)
            if budget is None:
                status, message = RobustStatus.TIME_LIMIT, "time limit reached before the K-check"
                break
            verdict = self.adversary.check(m.factual, ce.counterfactual, ce.predicted_class,
                                           budget)
            adversary_time += verdict.time
            if verdict.robust:
                status = RobustStatus.CERTIFIED
                break
            scenario = _scenario(m.factual.iloc[0], ce.counterfactual.iloc[0], verdict)
            if scenario is None:
                status = RobustStatus.NOT_ROBUST
                message = (f"the K-adversary neither proved robustness nor found a "
                           f"counterexample (status {verdict.status.value}, bound "
                           f"{verdict.bound})")
                break
            self._scenarios.add_scenario(m, scenario)
        else:
            message = f"{self.max_iterations} iterations without a K-robustness proof"
        assert ce is not None
        cost = (setback_cost(m.space, m.weights, m.factual, ce.counterfactual)
                if ce.found else None)
        return PerturbationRobustCounterfactual(
            robustness=self.robustness, status=status, counterfactual=ce, k_verdict=verdict,
            iterations=iterations,
            scenarios=self._scenarios.scenarios if self._scenarios is not None else [],
            setback_cost=cost,
            optimal=status is RobustStatus.CERTIFIED and ce.status is Status.OPTIMAL,
            total_time=time.perf_counter() - t0, adversary_time=adversary_time,
            message=message)


def _failed(ce: Counterfactual, iterations: int) -> tuple[RobustStatus, str]:
    if ce.status is Status.INFEASIBLE:
        what = ("the constraints" if iterations == 1 else
                f"the constraints and the {iterations - 1} K-perturbation scenarios")
        return RobustStatus.INFEASIBLE, f"proven: no counterfactual meets {what}"
    if ce.status is Status.NO_SOLUTION:
        return RobustStatus.TIME_LIMIT, ce.message
    if ce.status is Status.VERIFICATION_FAILED:
        return RobustStatus.VERIFICATION_FAILED, ce.message
    return RobustStatus.ERROR, ce.message


def _scenario(factual: pd.Series, z: pd.Series, verdict: KVerdict) -> dict[str, Any] | None:
    """The kept features the adversary's point moves (``None``: no usable point)."""
    if verdict.point is None:
        return None
    point = verdict.point.iloc[0]
    moved = {n: point[n] for n in point.index if point[n] != z[n] and z[n] == factual[n]}
    return moved or None
