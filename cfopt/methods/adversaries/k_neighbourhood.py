r"""The K-adversary (Virgolin & Fracaros 2023, Def. 5-6; the exact search is cfopt's).

Over the K-neighbourhood box of a counterfactual :math:`z` of :math:`x` (changed
features fixed, kept ones within their perturbation annotations, categorical and
labelled ones over their allowed categories only) minimise the target's margin — the
signed logit :math:`s\,y` of a binary model, :math:`y_t - y_j` for every other class
:math:`j` of a multiclass one. A proven lower bound above the tolerance certifies that no
K-perturbation flips the class (Def. 6); otherwise its minimiser is the counterexample
(checked by the real model).

:class:`KAdversary` is the search; :class:`KNeighbourhoodAdversary` its step of the
cutting-set loop (:mod:`cfopt.methods.cutting_set`), whose cut is one more scenario of
the master (:class:`~cfopt.constraints.KScenarios`).
"""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo
from pyomo.contrib.fbbt.fbbt import compute_bounds_on_expr

from ...constraints.scenarios import KScenarios
from ...formulations.features import code_variable, encode_inputs
from ...formulations.validity import deactivate_validity
from ...problem import CounterfactualModel
from ...results.robust import KVerdict
from ...results.status import Status
from ...solvers import SolverBackend, SolverSettings
from ...solvers.base import time_left
from ...space.perturbations import numeric_range, switch_categories
from ...space.space import FeatureSpace
from ..cutting_set import Adversary, Check, Deadline, MasterAnswer


class KAdversary:
    """Exact search of a counterfactual's K-neighbourhood (module docstring): a
    persistent MILP whose box is set per check.

    Args:
        model: the learned model (any family cfopt embeds).
        space: the feature space with perturbation annotations; actionability is
            ignored (the world may move an immutable feature).
        backend, settings: the solver and its settings.
        tolerance: certify when the proven bound of the margin exceeds it (logit units;
            above the solvers' feasibility tolerances).
        bound_tightening, tree_formulation: as for
            :class:`~cfopt.CounterfactualModel`.
    """

    def __init__(self, model: Any, space: FeatureSpace, backend: SolverBackend,
                 settings: SolverSettings, *, tolerance: float = 1e-6,
                 bound_tightening: str | None = "lp", tree_formulation: str | None = None
                 ) -> None:
        free = copy.deepcopy(space)
        for f in free:
            free.set(f.name, immutable=False, direction="any")
        self.m = m = CounterfactualModel(model, free, bound_tightening=bound_tightening,
                                         tree_formulation=tree_formulation)
        if m.adapter.is_regressor:
            raise ValueError("K-robustness is defined for classifiers (a class to keep); got a "
                             "regressor")
        self.backend, self.settings, self.tolerance = backend, settings, float(tolerance)
        m.objective.deactivate()
        m.objective_cutoff.deactivate()
        deactivate_validity(m, m.adapter)
        outputs = m.predictor_constr.outputs
        # pragma: no mutate start (each check sets every coefficient before it solves)
        m.adversary_coef = pyo.Param(range(len(outputs)), mutable=True, initialize=0.0)
        # pragma: no mutate end
        m.adversary_objective = pyo.Objective(
            expr=pyo.quicksum(m.adversary_coef[j] * outputs[j] for j in range(len(outputs))),
            sense=pyo.minimize,  # pragma: no mutate (Pyomo's default sense)
        )
        m.adopt("adversary_coef", "adversary_objective", "adversary_levels")
        # pragma: no mutate start (encode_inputs reads the specs only)
        self._inputs = encode_inputs(m, m.space, m.input_specs)
        # pragma: no mutate end

    def _set_box(self, x: pd.Series, z: pd.Series) -> None:
        """Bound the feature variables to the K-neighbourhood box of ``z`` (module
        docstring), and the encoding to the model inputs that box admits
        (:meth:`~cfopt.formulations.predictors.PredictorConstr.set_input_box`)."""
        m, space = self.m, self.m.space
        levels: list[tuple[pyo.Var, list[float]]] = []
        for f in space:
            keep = x[f.name] == z[f.name] and f.perturbation is not None
            if f.is_onehot:
                allowed = switch_categories(f, z[f.name]) if keep else (z[f.name],)
                for lv in f.categories:
                    var = m.onehot[f.name, lv]
                    if lv in allowed and len(allowed) > 1:
                        var.unfix()
                    else:
                        var.fix(float(lv == z[f.name]))
                continue
            var, offset, scale = code_variable(m, space, f.name)
            code = f.to_code(z[f.name])

            def value(c: float, offset: float = offset, scale: float = scale) -> float:
                return (c - offset) / scale

            var.unfix()
            # pragma: no mutate start (every path below bounds or fixes the variable again, and
            # the solve clears and loads the values of the free ones)
            var.setlb(value(f.lower))
            var.setub(value(f.upper))
            var.set_value(value(code), skip_validation=True)
            # pragma: no mutate end
            if keep and not f.perturbation.is_numeric:
                codes = {f.to_code(c) for c in switch_categories(f, z[f.name])}
                lo, hi = min(codes), max(codes)
                if len(codes) <= hi - lo:  # integral codes, some level between not allowed
                    levels.append((var, sorted(value(c) for c in codes)))
            elif keep:
                lo, hi = numeric_range(f, code)
            else:
                lo = hi = code  # pragma: no mutate (only lo == hi is read: fixed at code)
            if lo == hi:
                var.fix(value(code))
            else:
                var.setlb(value(lo))
                var.setub(value(hi))
        self._set_levels(levels)
        # pragma: no mutate start (fbbt bounds a constant by itself: the test only skips it)
        box = [compute_bounds_on_expr(e) if not isinstance(e, (int, float)) else (e, e)
               for e in self._inputs]
        # pragma: no mutate end
        m.predictor_constr.set_input_box(np.array([float(b[0]) for b in box]),
                                         np.array([float(b[1]) for b in box]))

    def _set_levels(self, levels: list[tuple[pyo.Var, list[float]]]) -> None:
        """Each variable of ``levels`` restricted to its values (the codes a kept
        labelled feature may switch to, when a level between them is not one: its box
        alone would admit it), by the block ``m.adversary_levels`` rebuilt at each
        check."""
        m = self.m
        if m.component("adversary_levels") is not None:
            m.del_component(m.adversary_levels)
        m.adversary_levels = block = pyo.Block()
        block.pick = pyo.Var([(k, i) for k, (_, values) in enumerate(levels)
                              for i in range(len(values))], domain=pyo.Binary)
        block.rows = pyo.ConstraintList()
        for k, (var, values) in enumerate(levels):
            block.rows.add(pyo.quicksum(block.pick[k, i] for i in range(len(values))) == 1)
            block.rows.add(var == pyo.quicksum(v * block.pick[k, i]
                                               for i, v in enumerate(values)))

    def _pairs(self, target: Any, z: np.ndarray | None = None) -> list[dict[int, float]]:
        """Objective coefficients of the margins to minimise; with the model inputs
        ``z`` of the counterfactual, the strongest other class there first (its margin
        is the likeliest to fall below 0, which ends a check without the others')."""
        adapter = self.m.adapter
        t = adapter.class_index(target)
        if adapter.decision == "sign":
            return [{0: 1.0 if t == 1 else -1.0}]
        others = [j for j in range(adapter.n_logits) if j != t]
        if z is not None:
            scores = adapter.output(np.atleast_2d(z))
            scores = np.asarray(scores, dtype=float)[0]  # pragma: no mutate (only sorted)
            others.sort(key=lambda j: -scores[j])
        return [{t: 1.0, j: -1.0} for j in others]

    def check(self, x: pd.DataFrame | pd.Series, z: pd.DataFrame | pd.Series,
              target: Any, settings: SolverSettings | None = None) -> KVerdict:
        """Search the K-neighbourhood of ``z`` (a counterfactual of ``x`` classified as
        ``target``) for a point the model classifies otherwise (``settings``: this
        check's solver settings, default the adversary's; a time limit covers the
        whole check)."""
        t0 = time.perf_counter()
        settings = settings or self.settings
        m = self.m
        xs = m.space.validate(x).iloc[0]
        zrow = m.space.validate(z)
        self._set_box(xs, zrow.iloc[0])
        m.set_factual(zrow)
        bounds, worst = [], None
        status = Status.OPTIMAL
        pairs = self._pairs(target, m.adapter.model_inputs(m.space, zrow)[0])
        for coefs in pairs:
            for j in m.adversary_coef:
                m.adversary_coef[j] = coefs.get(j, 0.0)
            budget = time_left(settings, t0)
            if budget is None:
                status = Status.NO_SOLUTION
                bounds.append(None)
                break
            outcome = self.backend.solve(m, budget)
            if outcome.status is not Status.OPTIMAL:
                status = outcome.status
            bounds.append(outcome.bound)
            if outcome.status.has_solution and (worst is None or outcome.objective < worst[0]):
                point = m.decode()
                worst = (outcome.objective, point, m.classify(point)[0])
            if outcome.status.has_solution and outcome.objective <= 0 and \
                    worst[2] != target:
                break
        bound = None if any(b is None for b in bounds) else float(min(bounds))
        value, point, predicted = worst if worst is not None else (None, None, None)
        if bound is not None and bound > self.tolerance and len(bounds) == len(pairs):
            robust: bool | None = True
        elif point is not None and predicted != target:
            robust = False
        else:
            robust = None
        return KVerdict(robust=robust, bound=bound, value=value, point=point,
                        predicted=predicted, status=status, time=time.perf_counter() - t0)


class KNeighbourhoodAdversary(Adversary):
    """The K-adversary at one query of the master ``m``: it searches the candidate's
    K-neighbourhood (``search``) and adds each counterexample to the master as a
    scenario of ``scenarios`` (the kept features it moves); ``box``: bounds of the
    master's model inputs at this query, from which each scenario copy's bounds are
    computed (:meth:`~cfopt.constraints.KScenarios.add_scenario`; ``None``: the global
    bounds)."""

    name = "the K-adversary"

    def __init__(self, search: KAdversary, scenarios: KScenarios, m: CounterfactualModel,
                 box: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.search, self.scenarios, self.m, self.box = search, scenarios, m, box

    def check(self, answer: MasterAnswer, deadline: Deadline) -> Check:
        verdict = self.search.check(self.m.factual, answer.point, answer.label,
                                    deadline.left())
        return Check(certified=bool(verdict.robust), bound=verdict.bound, verdict=verdict,
                     counterexample=scenario(self.m.factual.iloc[0], answer.point.iloc[0],
                                             verdict),
                     note=(f"the K-adversary neither proved robustness nor found a "
                           f"counterexample (status {verdict.status.value}, bound "
                           f"{verdict.bound})"))

    def add_cut(self, check: Check) -> None:
        self.scenarios.add_scenario(self.m, check.counterexample, self.box)


def scenario(factual: pd.Series, z: pd.Series, verdict: KVerdict) -> dict[str, Any] | None:
    """The kept features the adversary's point moves (``None``: no usable point)."""
    if verdict.point is None:
        return None
    point = verdict.point.iloc[0]
    moved = {n: point[n] for n in point.index if point[n] != z[n] and z[n] == factual[n]}
    return moved or None
