r"""PROPLACE: provably robust and plausible counterfactuals under model shift (Jiang,
Lan, Leofante, Rago, Toni 2024).

For a ReLU network classifier (one logit, or one logit per class) and the model shift
Δ (every weight and bias within ±δ of the trained ones), find the closest
counterfactual inside the plausible region (Def. 10,
:class:`~cfopt.methods.plausible_region.RobustPlausibleRegion`) that every network of
Δ classifies as the target, by the cutting-set loop of Algorithm 1 on
:class:`~cfopt.methods.cutting_set.CuttingSet`:

1. master (:class:`ProplaceMaster`): the closest point of the plausible region that
   the model and every collected shifted model classify as the target with margin σ
   (signed logit ≥ σ; with a logit per class, the target's ≥ every other's + σ; one
   network copy each, with big-M constants from interval bounds over the region's
   bounding box), under any other declared constraints (actionability, max changes,
   rules, causal equations, trust regions);
2. adversary (:class:`~cfopt.methods.adversaries.model_shift.ModelShiftAdversary`):
   the exact least margin over Δ at the master's point, per other class for a network
   with a logit per class (interval screen, then the exact MILP;
   :mod:`cfopt.formulations.robustness`);
3. stop when the adversary's proven lower bound is ≥ σ - t (σ > t > 0, the tolerances
   of the convergence proof, Prop. 2), else add the worst model and repeat.

Every returned point is decoded to raw units, re-checked with the real model's own
prediction and against every declared constraint, and its robustness claim is the
solver's proven bound (or the interval screen), never an incumbent.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..constraints.blocks import ConstraintBlock
from ..formulations.validity import hold_model
from ..problem import CounterfactualModel
from ..progress import progress_enabled
from ..query.incumbents import toward_target
from ..results.robust import (
    RobustCounterfactual,
    RobustnessCertificate,
    RobustStatus,
)
from ..results.serialize import json_value
from ..solvers import SolverBackend
from ..space.space import FeatureSpace
from .adversaries.model_shift import ModelShiftAdversary, RobustnessChecker
from .base import (
    RobustMethod,
    check_count,
    check_sigma_tolerance,
    check_switch,
    finish_certificate,
    gc_paused,
    require_space_encoding,
    target_index,
)
from .cutting_set import Adversary, Check, CuttingSet, LoopResult, MasterAnswer
from .plausible_region import RobustPlausibleRegion
from .proplace_master import ProplaceMaster, decide_below_sigma


class Proplace(RobustMethod):
    """PROPLACE: the closest Δ-robust counterfactual in the plausible region, by the
    cutting-set loop of Algorithm 1 (module docstring) on :class:`CuttingSet`.

    Args:
        model: a ReLU network with one logit, or one logit per class, consuming
            ``space.transform(X)``.
        space: the :class:`~cfopt.FeatureSpace` (immutable / increase-only features
            are kept).
        data: raw rows for the plausible region (e.g. the training data).
        delta: radius of the model shift.
        k: Δ-robust neighbours spanning the plausible region (Def. 10).
        labels: observed labels of ``data``; by default the model's predictions select
            the target-class rows.
        sigma: master margin σ (the target's margin ≥ σ for every collected model).
        tolerance: t, with 0 < t < σ; the loop stops when the adversary's proven bound
            is ≥ σ - t.
        max_iterations: cap on master solves per query.
        query_bounds: the big-M constants of the master's network and of every shifted
            copy from the interval bounds over the query's own input box: the points
            that respect actionability within the region's box, the first layer's also
            within its values at the region's points (exact over the hull; speed lever,
            sound either way; ``False``: the region's box alone).
        vertex_envelope: with ``query_bounds``, every shifted copy's first-layer
            outputs bounded by their values at the region's points, weighted as the
            master's point combines them
            (:meth:`~cfopt.formulations.predictors.PredictorConstr.vertex_envelope`:
            Jensen's inequality, implied by the master; speed lever, sound either way).
            The masters' relaxations are far tighter (HELOC's 50 Table 1 queries: the
            masters 10.8 s off against 7.9 / 8.3 s on, ``benchmarks/robust_levers.py``).
        ladder: solve each master up a ladder of radii from the greatest proven bound
            of the query's masters so far, bounding the master's network and every
            shifted copy within each radius (:class:`ProplaceMaster`; with an L0 term
            or ``max_changes`` only, past the gate of
            :func:`~cfopt.query.ladder.can_climb`: PROPLACE's L1 objective solves each
            master whole; speed lever, sound either way).
        warm_start: start every master solve after the first from the last one's point
            (:class:`ProplaceMaster`; speed lever, sound either way; off by default: the
            last point violates the newest cut, so the start is infeasible and HiGHS
            drops it, ``benchmarks/robust_levers.py``).
        light_heuristics: run the masters with only the solver's cheap primal
            heuristics (:meth:`SolverBackend.light_heuristics
            <cfopt.solvers.SolverBackend.light_heuristics>`: HiGHS's sub-MIPs off; any
            of its options set in ``solver_options`` wins); ``False``: the solver's
            defaults. A master's work is the proof of its optimum: on the Table 1
            masters HiGHS's sub-MIPs took most of the time (speed lever, sound either
            way: heuristics only propose incumbents).
        cutoff: before each master with shifted copies, solve it restricted to the
            linear pieces of every network at the last master's point (the first
            master, with the first cut, at the first cut's point; or, when they
            hold none, at the first point toward the region's points where every
            network gives a margin of 2σ); the objective of a point found there cuts
            off the master's solve
            (:func:`~cfopt.query.incumbents.pattern_cutoff`; speed lever, sound either
            way: without the ladder only).
        relax_model: every master with shifted copies leaves the model's own network
            and validity out (:class:`ProplaceMaster`): a relaxation of the Δ-robust
            problem, Δ holding the model, whose points the adversary checks over all
            of Δ (speed lever, sound either way; without the ladder only).
        first_cut: before the first master, walk from the factual toward the plausible
            region's points to the first point where the model gives the target
            margin σ (:func:`~cfopt.query.incumbents.toward_target`, a guess of the
            first master's point) and add the interval screen's concrete shifted
            model there as the first copy when it classifies the guess below σ - t
            (:meth:`ModelShiftAdversary.cut_at`; with ``query_bounds``; speed lever,
            sound either way: any model of Δ is a valid cut). With
            ``relax_model`` the first master then holds that copy instead of the model,
            and the loop usually saves the master the guess stands for.
        active_set: each master holds only the newest shifted copy and those a
            master's point missed (:meth:`ProplaceMaster.solve`): a relaxation of the
            master with every copy, solved again with the models its point misses, so
            the loop's points are Algorithm 1's (speed lever, sound either way; without
            the ladder only). Each copy binds near the point it was found at; the older
            ones rarely bind later, while every copy is a big-M encoding of the network
            (COMPAS, the first 50 Table 1 queries: 10.8 s with every copy, 6.8 s).
        piece_points: the first master of a query past the cutoff's gate (more than
            :data:`~cfopt.query.incumbents.CUTOFF_NEURONS` unstable neurons beyond the
            first layer: the first cut's copy at the first cut's guess) answers with
            the point of its restriction to the linear pieces of its networks (those
            of ``cutoff``: an LP) when that has one. The adversary's cut at that point
            goes to the next master as usual; if the adversary certifies it instead,
            one solve of the master whole, cut off at the point's objective, proves it
            optimal within the gap or gives a better point, which the loop checks
            (:meth:`ProplaceMaster.prove`, :class:`~cfopt.methods.cutting_set.
            CuttingSet`). The usual HELOC query then solves one MILP instead of two
            (speed lever, sound either way: the pieces' point is a point of the
            master, and only a solve of the master itself proves a bound). Only the
            first: later points of the pieces collect cuts that make the later
            masters harder (HELOC query 15: 9.1 s against 4.1 s).
        lp_screen: the adversary's LP relaxation between its interval screen and its
            exact MILP: it certifies when its bound reaches σ - t
            (:class:`~cfopt.methods.adversaries.model_shift.RobustnessChecker`; speed
            lever, sound either way).
        time_limit: seconds per query (``None``: none).
        solver: ``"highs"`` (default), ``"cbc"``, ``"gurobi"`` or a backend.
        objective, weights, max_changes, bound_tightening, constraints: see
            :class:`~cfopt.CounterfactualModel` (other trust regions, rules, causal
            equations compose with the plausible region).
        mip_gap, threads, seed, solver_options: master solve settings (raw solver
            options passed through by name).
        progress: a tqdm bar over each query's cutting-set iterations showing the
            master's bound and the adversary's proven bound against σ - t (``None``:
            ``CFOPT_PROGRESS`` if set, else only when stderr is a terminal or in a
            notebook).
    """

    method = "proplace"

    def __init__(self, model: Any, space: FeatureSpace, data: pd.DataFrame, *,
                 delta: float, k: int = 20, labels: Any = None, sigma: float = 0.01,
                 tolerance: float = 0.005, max_iterations: int = 50, query_bounds: bool = True,
                 vertex_envelope: bool = True, ladder: bool = True, warm_start: bool = False,
                 light_heuristics: bool = True, cutoff: bool = True,
                 relax_model: bool = True, first_cut: bool = True, active_set: bool = True,
                 piece_points: bool = True, lp_screen: bool = True,
                 time_limit: float | None = None,
                 solver: str | SolverBackend = "highs",  # pragma: no mutate (names ignore case)
                 objective: str | Mapping[str, float] = "l1",
                 weights: str | Mapping[str, float] = "range", max_changes: int | None = None,
                 bound_tightening: str | None = "lp", constraints: Sequence[ConstraintBlock] = (),
                 mip_gap: float = 1e-4, threads: int | None = 1, seed: int | None = 0,
                 solver_options: Mapping[str, Any] | None = None,
                 progress: bool | None = None) -> None:
        super().__init__(model, space, delta=delta, solver=solver, time_limit=time_limit,
                         mip_gap=mip_gap, threads=threads, seed=seed,
                         solver_options=solver_options)
        progress_enabled(progress)  # a bad value raises here, not at the first query
        self.progress = progress
        self.sigma, self.tolerance = check_sigma_tolerance(sigma, tolerance)
        self.max_iterations = check_count("max_iterations", max_iterations)
        self.query_bounds = check_switch("query_bounds", query_bounds)
        self.vertex_envelope = check_switch("vertex_envelope", vertex_envelope)
        self.ladder = check_switch("ladder", ladder)
        self.warm_start = check_switch("warm_start", warm_start)
        self.lp_screen = check_switch("lp_screen", lp_screen)
        self.light_heuristics = self.lighten_heuristics(light_heuristics)
        self.cutoff = check_switch("cutoff", cutoff)
        self.relax_model = check_switch("relax_model", relax_model)
        self.first_cut = check_switch("first_cut", first_cut)
        self.active_set = check_switch("active_set", active_set)
        self.piece_points = check_switch("piece_points", piece_points)
        self.region = RobustPlausibleRegion(data, self.delta, k, labels=labels,
                                            solver=self.backend.name, name="plausible_region")
        self.milp = CounterfactualModel(model, space, objective=objective, weights=weights,
                                        max_changes=max_changes, margin=self.sigma,
                                        bound_tightening=bound_tightening,
                                        constraints=[*constraints, self.region])
        require_space_encoding(self.milp)
        self.checker: RobustnessChecker = self.region.checker(self.milp)
        self.build_time = self.milp.build_time
        self._build_pending = True

    @gc_paused
    def explain(self, x: pd.DataFrame | pd.Series | Mapping,
                target: Any = None) -> RobustCounterfactual:
        """The closest certified Δ-robust counterfactual of one raw row ``x`` in the
        plausible region (``target``: a class label, or ``None`` for the other class of
        a binary model). The first query's time includes building the MILP."""
        t0 = time.perf_counter()
        one_off = self.build_time if self._build_pending else 0.0
        self._build_pending = False
        m = self.milp
        m.set_factual(x)
        m.set_target(target)  # updates the region: Δ-robust neighbours
        report = self.region.report
        details: dict[str, Any] = {"neighbours": report.neighbours,
                                   "region_screened": report.screened,
                                   "region_milp_checks": report.milp_checks}
        times = {"region": report.seconds, "master": 0.0, "adversary": 0.0}
        need = self.sigma - self.tolerance
        certificate = RobustnessCertificate(self.delta, None, None, need, None, times=times)
        if report.neighbours == 0:
            return self._result(m, RobustStatus.INFEASIBLE, None, certificate, t0, message=(
                f"no Δ-robust data point (δ={self.delta:g}) among the {report.candidates} rows "
                f"predicted as the target: the plausible region holds no robust point"),
                details=details, one_off=one_off)
        pred = m.predictor_constr
        global_bounds = m.global_layer_bounds
        hull = self.region.hull(m) if self.query_bounds else None
        box = self.master_box(m, self.region.box(m), self.query_bounds, hull)
        weights = (self.region.hull_weights(m) if self.vertex_envelope and hull is not None
                   else None)
        adversary = ModelShiftAdversary(self.checker, m, target_index(m), need, box,
                                        self.lp_screen, hull, weights)
        bar = self.iteration_bar(self.max_iterations, "PROPLACE cutting-set", self.progress)
        masters: list[ProplaceMaster] = []

        def observe(answer: MasterAnswer, _: Adversary, check: Check) -> None:
            bar.set_postfix(master_bound=json_value(answer.bound),
                            robust_bound=json_value(check.bound),
                            need=adversary.threshold, refresh=False)
            bar.update(1)

        def run(level: float, iterations: int, guess: Any = None) -> LoopResult:
            master = ProplaceMaster(m, self.backend, level, adversary, self.warm_start,
                                    self.ladder, self.cutoff, self.relax_model,
                                    self.active_set, self.piece_points)
            master.guess = guess
            masters.append(master)
            return CuttingSet(iterations, observe).run(master, [adversary], self.deadline(t0))

        seeded, details["first_cut"], guess = 0.0, False, None
        try:
            if self.first_cut and hull is not None and m.factual_inputs is not None:
                t1 = time.perf_counter()
                guess = toward_target(m, [(pred, None)], m.factual_inputs, hull, self.sigma)
                details["first_cut"] = guess is not None and adversary.cut_at(guess)
                seeded = time.perf_counter() - t1
            loop, level = decide_below_sigma(
                run(self.sigma, self.max_iterations, guess if details["first_cut"] else None),
                m, adversary, self.sigma, self.tolerance, self.max_iterations, run)
        finally:
            bar.close()
            adversary.remove_cuts()
            hold_model(m, True)
            pred.set_layer_bounds(global_bounds)
        details["master_resolves"] = sum(master.resolves for master in masters)
        times["master"] = loop.master_seconds
        times["adversary"] = loop.adversary_seconds + seeded
        certificate.iterations, certificate.models = loop.iterations, adversary.models
        certificate.master_margin = level
        if level < self.sigma:
            certificate.threshold = 0.0
        (check,) = loop.checks
        if check is not None:
            finish_certificate(certificate, check.verdict)
        status = loop.status
        if status is RobustStatus.CERTIFIED and not certificate.robust:
            status = RobustStatus.NOT_ROBUST
        row = loop.candidate.point if loop.candidate is not None else None
        return self._result(m, status, row, certificate, t0, bound=masters[-1].bound,
                            message=loop.message, details=details, one_off=one_off,
                            optimal=loop.optimal)
