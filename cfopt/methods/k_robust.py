r"""Counterfactuals robust to adverse input perturbations (Virgolin & Fracaros 2023),
exact: the C-setback cost in the objective and a K-adversary cutting-scenario loop.

``robustness`` chooses what is sought:

* ``"none"``: the closest counterfactual (Eq. 1);
* ``"C"``: the counterfactual minimising intervention cost plus the cost of undoing
  its maximal C-setback (Def. 4, Eq. 6; :class:`~cfopt.constraints.SetbackCost`);
* ``"K"``: the closest counterfactual whose K-neighbourhood the model classifies
  entirely as the counterfactual's class (Def. 6), by the cutting-set loop
  (:class:`~cfopt.methods.cutting_set.CuttingSet`): the master
  (:class:`~cfopt.constraints.KScenarios`) finds the closest counterfactual valid under
  every scenario collected so far; the exact adversary
  (:class:`~cfopt.methods.adversaries.k_neighbourhood.KAdversary`) searches its
  K-neighbourhood; a counterexample becomes a scenario; the loop stops when the
  adversary's proven bound certifies the counterfactual. The master relaxes the
  K-robust problem, so a certified answer of an optimal master is optimal among
  K-robust counterfactuals (whose changed features move by at least ``min_change`` of
  their range), and an infeasible master proves that none exists;
* ``"CK"``: both, in one problem and one certificate.

The paper's own search (CoGS) samples K-neighbourhoods and certifies nothing. This
module only composes blocks and runs the loop; the algebra is in
:mod:`cfopt.constraints`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..constraints.blocks import ConstraintBlock
from ..constraints.diversity_cuts import MIN_CHANGE
from ..constraints.scenarios import KScenarios
from ..constraints.setback import SetbackCost
from ..explainer import Explainer
from ..results.counterfactual import Answer, Counterfactual
from ..results.robust import KVerdict, PerturbationRobustCounterfactual
from ..results.status import Status
from ..space.perturbations import setback_cost
from ..space.space import FeatureSpace
from .adversaries.k_neighbourhood import KAdversary, KNeighbourhoodAdversary
from .base import check_positive, check_switch, gc_paused, query_input_box
from .cutting_set import CuttingSet, Deadline, Master, MasterAnswer

ROBUSTNESS = ("none", "C", "K", "CK")


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
        query_bounds: each scenario copy's big-M constants (ReLU networks) from its own
            input box: the points that respect actionability, widened by the scenario
            (:mod:`cfopt.constraints.scenarios`; speed lever, sound either way;
            ``False``: the model's global bounds).
        ladder: each master after the first climbs a ladder of radii from the last
            master's proven bound (the scenarios only cut, so it bounds the next
            optimum), the network and every scenario copy bounded over the points
            within each radius and each rung split by the features such a point can
            change (:mod:`cfopt.query.ladder`, :mod:`cfopt.query.supports`; ReLU
            networks, with an L0 term or ``max_changes``, past the gate of
            :func:`~cfopt.query.ladder.can_climb`; speed lever, sound
            either way).
        constraints: more declared constraint blocks (rules, causal equations, trust
            regions) — they compose with both notions.
        **options: options of :class:`~cfopt.Explainer` (solver, objective, weights,
            margin, time_limit per query, ...).
    """

    def __init__(self, model: Any, space: FeatureSpace, *, robustness: str = "CK",
                 max_iterations: int = 20, min_change: float = MIN_CHANGE,
                 tolerance: float = 1e-6, query_bounds: bool = True, ladder: bool = True,
                 constraints: Sequence[ConstraintBlock] = (), **options: Any) -> None:
        if robustness not in ROBUSTNESS:
            raise ValueError(f"robustness must be one of {ROBUSTNESS}, got {robustness!r}")
        self.loop = CuttingSet(max_iterations)
        self.robustness = robustness
        self.max_iterations = max_iterations
        self.tolerance = check_positive("tolerance", tolerance)
        self.query_bounds = check_switch("query_bounds", query_bounds)
        self.ladder = check_switch("ladder", ladder)
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

    def certify(self, x: pd.DataFrame | pd.Series, z: pd.DataFrame | pd.Series | Answer,
                label: Any = None) -> KVerdict:
        """The K-adversary's verdict on a counterfactual ``z`` of ``x`` that the model
        classifies as ``label``: a raw row, or any method's answer (its counterfactual;
        ``label`` defaults to its target when that is one class)."""
        if isinstance(z, Answer):
            if z.counterfactual is None:
                raise ValueError(f"the answer has no counterfactual to certify (status "
                                 f"{z.status.value})")
            if label is None and len(z.target) == 1:
                label = z.target[0]
            z = z.counterfactual
        if label is None:
            raise ValueError("give the label the model assigns to z")
        return self.adversary.check(x, z, label)

    @gc_paused
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
        settings = ex.runner.start(x, target, options)
        adversaries: list[KNeighbourhoodAdversary] = []
        if self._scenarios is not None:
            if len(m.target) != 1:
                raise ValueError(f"K-robustness keeps one class; give a single target class, "
                                 f"got {list(m.target)}")
            box = query_input_box(m) if self.query_bounds else None
            adversaries.append(KNeighbourhoodAdversary(self.adversary, self._scenarios, m, box))
        loop = self.loop.run(ExplainerMaster(ex, self._scenarios, self.ladder), adversaries,
                             Deadline(settings, t0))
        assert loop.last is not None
        ce: Counterfactual = loop.last.answer
        check = loop.checks[0] if adversaries else None
        cost = (setback_cost(m.space, m.weights, m.factual, ce.counterfactual)
                if ce.found else None)
        return PerturbationRobustCounterfactual(
            robustness=self.robustness, status=loop.status, answer=ce,
            k_verdict=None if check is None else check.verdict, iterations=loop.iterations,
            scenarios=self._scenarios.scenarios if self._scenarios is not None else [],
            setback_cost=cost, optimal=loop.optimal, total_time=time.perf_counter() - t0,
            adversary_time=loop.adversary_seconds, message=loop.message)


class ExplainerMaster(Master):
    """The master of the K loop: the explainer's answer (solve, verify, decode) under the
    scenarios collected so far, within the query's deadline.

    Each master only adds scenarios to the last one, so the last proven bound bounds
    the next optimum from below: with ``ladder``, each solve after the first climbs
    from it (:mod:`cfopt.query.ladder`; also needs the explainer's
    ``tighten_per_query``), with the master's network and every scenario copy bounded
    over the points within each radius."""

    def __init__(self, explainer: Explainer, scenarios: KScenarios | None,
                 ladder: bool = True) -> None:
        self.explainer, self.scenarios, self.ladder = explainer, scenarios, ladder
        self.floor: float | None = None

    def solve(self, deadline: Deadline) -> MasterAnswer:
        ce = self.explainer.runner.answer(deadline.settings, deadline.started,
                                          diagnose_infeasible=False,
                                          floor=self.floor if self.ladder else None)
        if ce.bound is not None and math.isfinite(ce.bound):
            self.floor = max(ce.bound, self.floor or -math.inf)
        if ce.found:
            return MasterAnswer(ce.status, point=ce.counterfactual, bound=ce.bound,
                                label=ce.predicted_class, answer=ce)
        message = ce.message
        if ce.status is Status.INFEASIBLE:
            n = len(self.scenarios.scenarios) if self.scenarios is not None else 0
            what = ("the constraints" if n == 0 else
                    f"the constraints and the {n} K-perturbation scenarios")
            message = f"proven: no counterfactual meets {what}"
        return MasterAnswer(ce.status, message=message, answer=ce)
