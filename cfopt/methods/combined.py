r"""Counterfactuals certified robust to model shift *and* to adverse input
perturbations, in one cutting-set loop.

A counterfactual :math:`z` of :math:`x` for the target class :math:`t` is sought that is

* **Δ-robust** (PROPLACE, Jiang, Lan, Leofante, Rago, Toni 2024, Def. 7): every network
  whose weights and biases lie within ±δ of the trained ones classifies :math:`z` as
  :math:`t` (:mod:`cfopt.formulations.robustness`: the least margin over Δ is ≥ 0);
* **K-robust** (Virgolin & Fracaros 2023, Def. 6): the trained network classifies every
  point of the K-neighbourhood of :math:`z` as :math:`t` (the changed features fixed,
  the kept ones anywhere within their perturbation annotations);

and, among those, the closest (optionally with the C-setback cost of Eq. 6 in the
objective, :class:`~cfopt.constraints.SetbackCost`), inside PROPLACE's plausible region
when data is given (:class:`~cfopt.methods.plausible_region.RobustPlausibleRegion`),
under any declared constraint. The loop (:class:`~cfopt.methods.cutting_set.CuttingSet`)
has one master and two adversaries:

1. master (:class:`CombinedMaster`): the counterfactual MILP with margin σ, one network
   copy per shifted model collected (valid with margin σ:
   :func:`~cfopt.formulations.robustness.add_shifted_copy`) and one model copy per
   K-scenario collected (:class:`~cfopt.constraints.KScenarios`);
2. the Δ-adversary (:class:`~cfopt.methods.adversaries.model_shift.ModelShiftAdversary`)
   certifies the candidate when its proven bound on the least margin over Δ is ≥ σ - t,
   else its worst shifted model becomes a network copy; the K-adversary
   (:class:`~cfopt.methods.adversaries.k_neighbourhood.KNeighbourhoodAdversary`)
   certifies it when its proven bound on the target's margin over the K-neighbourhood
   exceeds its tolerance, else its counterexample becomes a scenario;
3. the candidate is certified when both adversaries certify it, else every
   counterexample cuts the master and the loop repeats.

Every shifted model and every scenario only asks the master for what a robust
counterfactual meets anyway (a Δ-robust point with margin σ is valid with margin σ for
each model of Δ; a K-robust one for each point of its K-neighbourhood), so the master
relaxes the robust problem restricted to the counterfactuals whose perturbed numeric
features stay put or move by at least ``min_change`` of their range (the scenarios'
exact change indicators): a proven-infeasible master proves that none of *those* is
both (with margin σ; its message names ``min_change``), and a ``CERTIFIED`` answer of
an optimal master is optimal among them (``optimal``). The answer is ``certified`` when
both adversaries' proven bounds prove its point robust at level 0 (Δ bound ≥ 0, K
bound above the tolerance); a loop cut short by a limit may return such a point, with
status ``iteration_limit`` or ``time_limit`` and no claim of optimality.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..constraints.blocks import ConstraintBlock
from ..constraints.diversity_cuts import MIN_CHANGE
from ..constraints.scenarios import KScenarios
from ..constraints.setback import SetbackCost
from ..problem import CounterfactualModel
from ..query.solution import Verification, failed_checks
from ..results.robust import (
    CombinedRobustCounterfactual,
    KVerdict,
    RobustnessCertificate,
    RobustStatus,
)
from ..results.status import Status
from ..solvers import SolverBackend
from ..space.perturbations import setback_cost
from ..space.space import FeatureSpace
from .adversaries.k_neighbourhood import KAdversary, KNeighbourhoodAdversary
from .adversaries.model_shift import ModelShiftAdversary, RobustnessChecker
from .base import (
    RobustMethod,
    check_count,
    check_positive,
    check_sigma_tolerance,
    check_switch,
    finish_certificate,
    gc_paused,
    require_space_encoding,
    target_index,
)
from .cutting_set import CuttingSet, LoopResult, MasterAnswer
from .plausible_region import RobustPlausibleRegion
from .proplace_master import ProplaceMaster, decide_below_sigma


class CombinedMaster(ProplaceMaster):
    """The master of the combined loop: PROPLACE's master (shifted copies) whose MILP
    also holds the K-scenarios; a candidate reaches the adversaries only when the real
    model verifies it (the K-adversary searches around a point of the target class)."""

    def __init__(self, m: CounterfactualModel, backend: SolverBackend, sigma: float,
                 adversary: ModelShiftAdversary, scenarios: KScenarios,
                 region: bool = False, warm_start: bool = False, ladder: bool = False) -> None:
        super().__init__(m, backend, sigma, adversary, warm_start, ladder)
        self.scenarios, self.region = scenarios, region

    def infeasible(self) -> str:
        """What the infeasible master proves (module docstring): only of the
        counterfactuals whose perturbed numeric features stay put or move by at least
        ``min_change`` of their range (the scenarios' change indicators), with margin σ
        (the master's, for every model and scenario)."""
        where = " in the plausible region" if self.region else ""
        return (f"no point{where} satisfies the constraints and is valid with margin "
                f"{self.sigma:g} for the model, the {len(self.adversary.models)} shifted "
                f"model(s) and the {len(self.scenarios.scenarios)} K-perturbation "
                f"scenario(s) collected, with every perturbed numeric feature kept or moved "
                f"by at least min_change={self.scenarios.min_change:g} of its range: proven "
                f"only for those counterfactuals, none of which is both Δ-robust and "
                f"K-robust with margin {self.sigma:g}{where} (a smaller move of such a "
                f"feature is not covered)")

    def answer(self, solution: Verification, status: Status, bound: float | None
               ) -> MasterAnswer:
        if not solution.verified:
            return MasterAnswer(Status.VERIFICATION_FAILED, bound=bound, message=(
                f"the master's point failed verification: "
                f"{failed_checks(self.m, solution.predicted, solution.problems)}; no "
                f"counterfactual returned"))
        return MasterAnswer(status, point=solution.row, bound=bound,
                            label=solution.predicted)


class CombinedRobustExplainer(RobustMethod):
    """The closest counterfactual certified both Δ-robust and K-robust (module
    docstring), on :class:`~cfopt.methods.cutting_set.CuttingSet`.

    Args:
        model: a ReLU network classifier (one logit, or one logit per class) consuming
            ``space.transform(X)``.
        space: the feature space; features carry :class:`~cfopt.Perturbation`
            annotations (the K-neighbourhood; features without one stay put).
        data: raw rows spanning PROPLACE's plausible region (``None``: no region).
        delta: radius of the model shift.
        k: Δ-robust neighbours spanning the plausible region (Def. 10; with ``data``).
        labels: observed labels of ``data`` (default: the model's predictions).
        setback: add the cost of undoing the maximal C-setback to the objective.
        sigma: master margin σ (for the model, every shifted model and every scenario).
        tolerance: t, with 0 < t < σ; the Δ-adversary certifies at a proven bound
            ≥ σ - t.
        k_tolerance: the K-adversary certifies at a proven bound above it (logit units).
        min_change: smallest move of a continuous feature, relative to its range, that
            counts as a change (so the features it does not move are kept).
        query_bounds: the big-M constants of the master's network and of every copy
            from the query's own input box (speed lever, sound either way): the master's
            and each shifted copy's over the points that respect actionability (within
            the plausible region's box, the first layer's also within its values at the
            region's points), each scenario copy's over that box widened by
            its scenario (:mod:`cfopt.constraints.scenarios`); ``False``: the model's
            global bounds (the region's box with a region).
        vertex_envelope: with ``query_bounds`` and a region, every shifted copy's
            first-layer outputs bounded by their values at the region's points
            (as :class:`~cfopt.methods.proplace.Proplace`; speed lever, sound either way).
        ladder: solve each master up a ladder of radii from the greatest proven bound
            so far, bounding the master's network, every shifted copy and every
            scenario copy within each radius, split by the features a point within it
            can change (:class:`~cfopt.methods.proplace.ProplaceMaster`; with an L0 term
            or ``max_changes``, past the gate of :func:`~cfopt.query.ladder.can_climb`;
            speed lever, sound either way).
        warm_start: start every master solve after the first from the last one's point
            (:class:`~cfopt.methods.proplace.ProplaceMaster`; speed lever, sound either
            way; off by default, as :class:`~cfopt.methods.proplace.Proplace`).
        lp_screen: the Δ-adversary's LP relaxation between its interval screen and its
            exact MILP, certifying at a bound ≥ σ - t (speed lever, sound either way).
        light_heuristics: the masters and the K-adversary's MILPs run with only the
            solver's cheap primal heuristics (HiGHS's sub-MIPs off; as
            :class:`~cfopt.methods.proplace.Proplace`; speed lever, sound either way).
        max_iterations: cap on master solves per query.
        time_limit: seconds per query, shared by every solve and check (``None``: none).

    ``solver``, ``objective``, ``weights``, ``max_changes``, ``bound_tightening``,
    ``constraints``, ``mip_gap``, ``threads``, ``seed`` and ``solver_options`` are as
    :class:`~cfopt.methods.proplace.Proplace`'s.
    """

    method = "delta+k"
    result_type = CombinedRobustCounterfactual

    def __init__(self, model: Any, space: FeatureSpace, data: pd.DataFrame | None = None, *,
                 delta: float, k: int = 20, labels: Any = None, setback: bool = False,
                 sigma: float = 0.01, tolerance: float = 0.005, k_tolerance: float = 1e-6,
                 min_change: float = MIN_CHANGE, query_bounds: bool = True,
                 vertex_envelope: bool = True, ladder: bool = True, warm_start: bool = False,
                 lp_screen: bool = True,
                 light_heuristics: bool = True, max_iterations: int = 50,
                 time_limit: float | None = None,
                 solver: str | SolverBackend = "highs",  # pragma: no mutate (names ignore case)
                 objective: str | Mapping[str, float] = "l1",
                 weights: str | Mapping[str, float] = "range", max_changes: int | None = None,
                 bound_tightening: str | None = "lp", constraints: Sequence[ConstraintBlock] = (),
                 mip_gap: float = 1e-4, threads: int | None = 1, seed: int | None = 0,
                 solver_options: Mapping[str, Any] | None = None) -> None:
        t0 = time.perf_counter()
        super().__init__(model, space, delta=delta, solver=solver, time_limit=time_limit,
                         mip_gap=mip_gap, threads=threads, seed=seed,
                         solver_options=solver_options)
        self.sigma, self.tolerance = check_sigma_tolerance(sigma, tolerance)
        k_tolerance = check_positive("k_tolerance", k_tolerance)
        self.max_iterations = check_count("max_iterations", max_iterations)
        self.query_bounds = check_switch("query_bounds", query_bounds)
        self.vertex_envelope = check_switch("vertex_envelope", vertex_envelope)
        self.ladder = check_switch("ladder", ladder)
        self.warm_start = check_switch("warm_start", warm_start)
        self.lp_screen = check_switch("lp_screen", lp_screen)
        self.light_heuristics = self.lighten_heuristics(light_heuristics)
        if data is None and labels is not None:
            raise ValueError("labels are those of data; give data (the plausible region) too")
        self.region = None if data is None else RobustPlausibleRegion(
            data, self.delta, k, labels=labels, solver=self.backend.name,
            name="plausible_region")
        self.scenarios = KScenarios(min_change)
        blocks = [*constraints, *([SetbackCost()] if setback else []),
                  *([] if self.region is None else [self.region]), self.scenarios]
        self.milp = CounterfactualModel(model, space, objective=objective, weights=weights,
                                        max_changes=max_changes, margin=self.sigma,
                                        bound_tightening=bound_tightening, constraints=blocks)
        require_space_encoding(self.milp)
        self.checker: RobustnessChecker = (
            RobustnessChecker(model, self.delta, solver=self.backend.name)
            if self.region is None else self.region.checker(self.milp))
        self.k_adversary = KAdversary(model, space, self.backend, self.settings,
                                      tolerance=k_tolerance, bound_tightening=bound_tightening)
        self.build_time = time.perf_counter() - t0
        self._build_pending = True

    @gc_paused
    def explain(self, x: pd.DataFrame | pd.Series | Mapping,
                target: Any = None) -> CombinedRobustCounterfactual:
        """The closest counterfactual of one raw row ``x`` certified Δ-robust and
        K-robust (``target``: one class label, or ``None`` for the other class of a
        binary model). The first query's time includes building the MILPs."""
        t0 = time.perf_counter()
        one_off = self.build_time if self._build_pending else 0.0
        self._build_pending = False
        m = self.milp
        m.set_factual(x)
        m.set_target(target)  # the region's Δ-robust neighbours; no scenario yet
        index = target_index(m)
        need = self.sigma - self.tolerance
        times = {"master": 0.0, "adversary": 0.0}
        certificate = RobustnessCertificate(self.delta, None, None, need, None, times=times)
        details: dict[str, Any] = {}
        if self.region is not None:
            report = self.region.report
            times["region"] = report.seconds
            details = {"neighbours": report.neighbours, "region_screened": report.screened,
                       "region_milp_checks": report.milp_checks}
            if report.neighbours == 0:
                message = (f"no Δ-robust data point (δ={self.delta:g}) among the "
                           f"{report.candidates} rows predicted as the target: the plausible "
                           f"region holds no robust point")
                return self._answer(m, RobustStatus.INFEASIBLE, None, certificate, t0, None,
                                    [], message=message, details=details, one_off=one_off)
        pred = m.predictor_constr
        global_bounds = m.global_layer_bounds
        hull = self.region.hull(m) if self.region is not None and self.query_bounds else None
        box = self.master_box(m, None if self.region is None else self.region.box(m),
                              self.query_bounds, hull)
        weights = (self.region.hull_weights(m) if self.vertex_envelope and hull is not None
                   and self.region is not None else None)
        shift = ModelShiftAdversary(self.checker, m, index, need, box, self.lp_screen, hull,
                                    weights)
        perturb = KNeighbourhoodAdversary(self.k_adversary, self.scenarios, m,
                                          box if self.query_bounds else None)
        masters: list[CombinedMaster] = []

        def run(level: float, iterations: int) -> LoopResult:
            masters.append(CombinedMaster(m, self.backend, level, shift, self.scenarios,
                                          region=self.region is not None,
                                          warm_start=self.warm_start, ladder=self.ladder))
            return CuttingSet(iterations).run(masters[-1], [shift, perturb],
                                              self.deadline(t0))

        try:
            loop, level = decide_below_sigma(run(self.sigma, self.max_iterations), m, shift,
                                             self.sigma, self.tolerance, self.max_iterations,
                                             run)
        finally:  # the cuts are dropped: the answer met those of its own solve, and
            scenarios = self.scenarios.scenarios  # the certificates speak for the rest
            shift.remove_cuts()
            self.scenarios.remove_scenarios(m)
            pred.set_layer_bounds(global_bounds)
        times["master"], times["adversary"] = loop.master_seconds, loop.adversary_seconds
        certificate.iterations, certificate.models = loop.iterations, shift.models
        certificate.master_margin = level
        if level < self.sigma:
            certificate.threshold = 0.0
        shift_check, k_check = loop.checks
        if shift_check is not None:
            finish_certificate(certificate, shift_check.verdict)
        k_verdict = None if k_check is None else k_check.verdict
        status = loop.status
        if status is RobustStatus.CERTIFIED and not (
                certificate.robust is True and k_verdict is not None
                and k_verdict.robust is True):
            status = RobustStatus.NOT_ROBUST
        row = (None if loop.candidate is None or status is RobustStatus.VERIFICATION_FAILED
               else loop.candidate.point)  # unproven unless certified, as PROPLACE's
        return self._answer(m, status, row, certificate, t0, k_verdict, scenarios,
                            bound=masters[-1].bound, message=loop.message, details=details,
                            one_off=one_off,
                            optimal=loop.optimal)

    def _answer(self, m: CounterfactualModel, status: RobustStatus, row: pd.DataFrame | None,
                certificate: RobustnessCertificate, t0: float, k_verdict: KVerdict | None,
                scenarios: list[dict[str, Any]], *, bound: float | None = None,
                message: str = "",  # pragma: no mutate (both callers pass it)
                details: dict[str, Any] | None = None,
                one_off: float = 0.0,  # pragma: no mutate (both callers pass it)
                optimal: bool = False,  # pragma: no mutate (its caller without it: INFEASIBLE)
                ) -> CombinedRobustCounterfactual:
        """The verified result (:meth:`RobustMethod._result`) with the K verdict, the
        scenarios collected and the setback cost of the point."""
        cost = None if row is None else setback_cost(m.space, m.weights, m.factual, row)
        result = self._result(m, status, row, certificate, t0, bound=bound, message=message,
                              details=details, one_off=one_off, k_verdict=k_verdict,
                              scenarios=scenarios, setback_cost=cost, optimal=optimal)
        assert isinstance(result, CombinedRobustCounterfactual)
        return result
