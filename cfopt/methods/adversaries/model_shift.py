r"""The model-shift adversary Δ (PROPLACE, Jiang, Lan, Leofante, Rago, Toni 2024).

:class:`RobustnessChecker` decides the Δ-robustness of model inputs (Def. 7): per
margin the target keeps (the signed logit of a binary network; :math:`y_t - y_j` for
every other class :math:`j` of one with a logit per class), the interval screen, then
(``lp_screen``) the LP relaxation of the adversary, then the exact linear adversary
MILP of :class:`~cfopt.formulations.robustness.AdversaryModel` (the paper's eq. (6a),
minimised), certified by the solver's proven bound; robust when every margin is. The
LP relaxation's feasible set contains the MILP's (the big-M ReLU rows with
:math:`q \in [0, 1]`), so its optimum is a lower bound of the least margin, between
the interval bound and the exact one: it certifies when it reaches the threshold and
otherwise leaves the case to the MILP (it never refutes). Each margin's MILP and its
relaxation are built once, each with a persistent solver of its own, and moved to each
point by their bounds (:meth:`~cfopt.formulations.robustness.AdversaryModel.set_point`):
no Pyomo rebuild per check. It finds the k Δ-robust nearest
neighbours of the plausible region (Def. 9-10) with a per-row verdict cache.

:class:`ModelShiftAdversary` is its step of the cutting-set loop (Algorithm 1,
:mod:`cfopt.methods.cutting_set`): at the master's point it returns the certificate
or the worst shifted model of Δ, which becomes one more network copy of the master.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo
from scipy.spatial import cKDTree

from ...formulations.bound_tightening import relax_integrality
from ...formulations.predictors import NetworkCopy, PredictorConstr
from ...formulations.robustness import (
    AdversaryModel,
    Margin,
    Parameters,
    add_shifted_copy,
    attack,
    attack_targets,
    check_delta,
    max_shift,
    recover_parameters,
    robust_network,
    target_margins,
)
from ...models.network import ReLUNetwork
from ...problem import CounterfactualModel
from ...results.robust import RobustnessVerdict
from ...results.status import Status
from ...solvers import SolverBackend, SolverSettings, make_solver
from ...solvers.base import time_left
from ..cutting_set import Adversary, Check, Deadline, MasterAnswer

#: per-row verdict codes of the data cache (besides 1 robust, 0 not robust)
_UNSEEN, _UNDECIDED = -1, 2


@dataclass
class RegionReport:
    """The Δ-robust neighbours of one query: found, candidates, checks made."""

    neighbours: int
    candidates: int
    screened: int
    milp_checks: int
    seconds: float


class RobustnessChecker:
    """Exact Δ-robustness checks of one network at one δ, with a per-row verdict cache
    for data sets (PROPLACE Def. 7 with the linear adversary of
    :mod:`cfopt.formulations.robustness`; a network with one logit per class keeps
    every margin :math:`y_t - y_j`, each checked on its own).

    Args:
        model: a ReLU network classifier with one logit or one logit per class (torch,
            ONNX, sklearn MLP, or a parsed adapter); its inputs are model inputs
            (``space.transform``).
        delta: radius of the model shift (> 0).
        solver: ``"highs"`` (default), ``"cbc"``, ``"gurobi"`` or a backend.
        time_limit: seconds per check (``None``: none); on expiry an undecided check is
            reported unproven (``robust=None``).
        mip_gap: relative gap of the adversary solves.
    """

    def __init__(self, model: Any, delta: float, *,
                 solver: str | SolverBackend = "highs",  # pragma: no mutate (names ignore case)
                 time_limit: float | None = None, mip_gap: float = 1e-6) -> None:
        self.adapter = robust_network(model)
        self.net = self.adapter.structure
        self.delta = check_delta(delta)
        self.backend = make_solver(solver if isinstance(solver, str) else solver.name)
        # pragma: no mutate start (threads=1, seed=0: SolverSettings' own defaults, spelled out)
        self.settings = SolverSettings(time_limit=time_limit, mip_gap=mip_gap, threads=1,
                                       seed=0)
        # pragma: no mutate end
        self._verdicts: dict[tuple, np.ndarray] = {}
        self._trees: dict[tuple, tuple[np.ndarray, cKDTree]] = {}
        self._adversaries: dict[tuple[Margin, bool], tuple[AdversaryModel, SolverBackend]] = {}
        self.milp_checks = 0
        #: LP relaxations solved by :meth:`check` (``lp_screen``)
        self.lp_checks = 0

    def margins(self, target: int) -> list[Margin]:
        """The margins the class index ``target`` keeps (binary: 1 is the logit > 0)."""
        return target_margins(self.net, target)

    # --------------------------------------------------------------- one point
    def screen(self, Z: np.ndarray, target: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Per row of ``Z``: a sound lower bound (interval propagation) and an upper
        bound (a concrete shifted model) of the least margin of the class index
        ``target`` over Δ (the minimum over its margins)."""
        bounds = [self._screen(Z, margin) for margin in self.margins(target)]
        return (np.min([lo for lo, _ in bounds], axis=0),
                np.min([up for _, up in bounds], axis=0))

    def _screen(self, Z: np.ndarray, margin: Margin) -> tuple[np.ndarray, np.ndarray]:
        lower = self.net.contrast(margin.coefficients).shifted_bounds(
            Z, self.delta, margin.scale)[-1][0][:, 0]
        return lower, attack(self.net, Z, self.delta, margin)

    def check(self, z: np.ndarray, target: int = 1, threshold: float = 0.0,
              screen: bool = True, time_limit: float | None = None,
              lp_screen: bool = False) -> RobustnessVerdict:
        """Whether every margin of the class index ``target`` at the model input ``z``
        stays ≥ ``threshold`` over Δ: per margin, the interval screen first
        (``screen=True``), then the LP relaxation (``lp_screen=True``, certifies only),
        the exact MILP when they leave it undecided (all within ``time_limit`` seconds
        if given, else the checker's own limit)."""
        t0 = time.perf_counter()
        z = np.asarray(z, dtype=np.float64)  # pragma: no mutate (read as floats downstream)
        z = z.reshape(-1)  # pragma: no mutate (numpy reads any negative size as -1)
        return _combine([self._check(z, margin, threshold, screen, t0, time_limit, lp_screen)
                         for margin in self.margins(target)], t0)

    def _check(self, z: np.ndarray, margin: Margin, threshold: float, screen: bool,
               t0: float, time_limit: float | None,
               lp_screen: bool = False  # pragma: no mutate (its one caller passes it)
               ) -> RobustnessVerdict:
        """One margin's verdict (:meth:`check`)."""
        if screen or self.net.is_linear:  # the screen is exact for a linear model
            lower, upper = self._screen(z[None, :], margin)
            if lower[0] >= threshold:
                return RobustnessVerdict(robust=True, bound=float(lower[0]), value=None,
                                         solver_value=None, method="interval",
                                         threshold=threshold, competitor=margin.competitor)
            if upper[0] < threshold or self.net.is_linear:
                params = self.attack_parameters(z, margin)
                value = _margin_value(params, z, margin)
                return RobustnessVerdict(robust=False if value < threshold else None,
                                         bound=float(lower[0]), value=value,
                                         solver_value=None, method="attack",
                                         threshold=threshold, parameters=params,
                                         shift=max_shift(self.net, params),
                                         competitor=margin.competitor)
        if lp_screen:
            relaxed = self._relaxed(z, margin, threshold, t0, time_limit)
            if relaxed is not None:
                return relaxed
        return self._exact(z, margin, threshold, t0, time_limit)

    def _relaxed(self, z: np.ndarray, margin: Margin, threshold: float, t0: float,
                 time_limit: float | None) -> RobustnessVerdict | None:
        """The margin's verdict when the LP relaxation of its adversary (module
        docstring) proves a bound ≥ ``threshold`` within the time left since ``t0``;
        ``None`` otherwise (the exact MILP decides)."""
        settings = self._budget(t0, time_limit)
        if settings is None:
            return None
        model, backend = self._adversary(margin, z, relaxed=True)
        outcome = backend.solve(model, settings)
        self.lp_checks += 1
        if outcome.status is not Status.OPTIMAL or outcome.bound is None or \
                outcome.bound < threshold:
            return None
        return RobustnessVerdict(robust=True, bound=float(outcome.bound), value=None,
                                 solver_value=None, method="lp", threshold=threshold,
                                 competitor=margin.competitor,
                                 solver_status=outcome.status.value)

    def attack_parameters(self, z: np.ndarray, margin: Margin) -> Parameters:
        """The concrete shifted model of the screen's upper bound of ``margin`` at
        ``z``."""
        targets = [t[0] for t in attack_targets(self.net, z[None, :], self.delta, margin)]
        return recover_parameters(self.net, z, self.delta, targets, margin)

    def exact(self, z: np.ndarray, target: int = 1, threshold: float = 0.0,
              time_limit: float | None = None) -> RobustnessVerdict:
        """The exact adversary MILP of every margin of the class index ``target`` at
        ``z`` (within ``time_limit`` seconds if given): the solvers' proven bounds
        decide robustness; the worst parameters are recovered and re-evaluated by a
        numpy forward pass, which alone may refute robustness."""
        t0 = time.perf_counter()
        z = np.asarray(z, dtype=np.float64)  # pragma: no mutate (read as floats downstream)
        z = z.reshape(-1)  # pragma: no mutate (numpy reads any negative size as -1)
        return _combine([self._exact(z, margin, threshold, t0, time_limit)
                         for margin in self.margins(target)], t0)

    def _exact(self, z: np.ndarray, margin: Margin, threshold: float, t0: float,
               time_limit: float | None) -> RobustnessVerdict:
        """One margin's exact verdict (:meth:`exact`), within the time left since
        ``t0``."""
        settings = self._budget(t0, time_limit)
        if settings is None:
            return RobustnessVerdict(robust=None, bound=None, value=None, solver_value=None,
                                     method="milp", threshold=threshold,
                                     competitor=margin.competitor,
                                     solver_status=Status.NO_SOLUTION.value)
        model, backend = self._adversary(margin, z)
        outcome = backend.solve(model, settings)
        self.milp_checks += 1
        params = value = solver_value = shift = None
        if outcome.status.has_solution:
            solver_value = float(pyo.value(model.worst))
            params = recover_parameters(self.net, z, self.delta, model.targets(), margin)
            value = _margin_value(params, z, margin)
            shift = max_shift(self.net, params)
        bound = outcome.bound if outcome.status is not Status.INFEASIBLE else None
        if bound is not None and bound >= threshold:
            robust: bool | None = True
        elif value is not None and value < threshold and shift <= self.delta * (1 + 1e-9):
            robust = False
        else:
            robust = None
        return RobustnessVerdict(robust=robust, bound=bound, value=value,
                                 solver_value=solver_value, method="milp", threshold=threshold,
                                 parameters=params, shift=shift, competitor=margin.competitor,
                                 solver_status=outcome.status.value)

    def _budget(self, t0: float, time_limit: float | None) -> SolverSettings | None:
        """The solver settings with the time left of a check started at ``t0``
        (``time_limit`` if given, else the checker's own); ``None`` when none is left."""
        return time_left(self.settings if time_limit is None else dataclasses.replace(
            self.settings, time_limit=time_limit), t0)

    def _adversary(self, margin: Margin, z: np.ndarray, relaxed: bool = False
                   ) -> tuple[AdversaryModel, SolverBackend]:
        """The margin's adversary MILP (``relaxed``: its LP relaxation) at ``z`` and its
        own persistent solver: built at the first check, then moved to each point
        (:meth:`AdversaryModel.set_point`)."""
        key = (margin, relaxed)
        if key not in self._adversaries:
            model = AdversaryModel(self.net, z, self.delta, margin)
            if relaxed:
                relax_integrality(model)
            self._adversaries[key] = (model, make_solver(self.backend.name))
            return self._adversaries[key]
        model, backend = self._adversaries[key]
        model.set_point(z)
        return model, backend

    # ---------------------------------------------------------------- data sets
    def _tree(self, key: tuple, Z: np.ndarray, rows: np.ndarray) -> cKDTree:
        """The KD-tree of ``Z[rows]``, built once per data set, target and rows (each
        query of a target searches the same rows: rebuilding it took a third of Adult's
        region updates)."""
        kept = self._trees.get(key)
        if kept is None or not np.array_equal(kept[0], rows):
            kept = self._trees[key] = (rows.copy(), cKDTree(Z[rows]))
        return kept[1]

    def nearest_robust(self, Z: np.ndarray, rows: np.ndarray, z0: np.ndarray, k: int, *,
                       target: int = 1, cache_key: Any = None
                       ) -> tuple[list[int], RegionReport]:
        """The first ``k`` Δ-robust rows of ``Z[rows]`` for the class index ``target``, in
        KD-tree (Euclidean) order from ``z0`` (PROPLACE Def. 9-10). Rows are screened in
        batches, the exact MILP runs only on undecided rows in order; verdicts are cached
        per ``(cache_key, target)`` (a key naming the data set ``Z``)."""
        t0 = time.perf_counter()
        rows = np.asarray(rows, dtype=int)
        key = (cache_key, target, len(Z))
        fresh = np.full(len(Z), _UNSEEN, dtype=np.int8)  # pragma: no mutate (-1 to 2 fit any dtype)
        verdicts = self._verdicts.setdefault(key, fresh)
        found: list[int] = []
        screened = checks = 0
        if not len(rows):
            return found, RegionReport(0, 0, 0, 0, time.perf_counter() - t0)
        tree = self._tree(key, Z, rows)
        seen = 0
        visited = np.zeros(len(Z), dtype=bool)
        batch = max(4 * k, 64)  # pragma: no mutate (a batch's size: speed only)
        while len(found) < k and seen < len(rows):
            n = min(len(rows), seen + batch)
            _, idx = tree.query(z0, k=n)
            # the rows not visited yet among the n nearest (not idx[seen:n]: rows at equal
            # distances may come in another order from one query to the next)
            order = rows[np.atleast_1d(idx)]
            order = order[~visited[order]]
            visited[order] = True
            unknown = order[verdicts[order] == _UNSEEN]
            if len(unknown):
                lower, upper = self.screen(Z[unknown], target)
                verdicts[unknown] = np.where(lower >= 0, 1, np.where(upper < 0, 0, _UNDECIDED))
                screened += len(unknown)
            for r in order:
                if verdicts[r] == _UNDECIDED:
                    verdict = self.exact(Z[r], target)
                    checks += 1
                    verdicts[r] = 1 if verdict.robust else 0
                if verdicts[r] == 1:
                    found.append(int(r))
                    if len(found) == k:
                        break
            seen = n
            batch *= 2  # pragma: no mutate (a batch's size: speed only)
        return found, RegionReport(len(found), len(rows), screened, checks,
                                   time.perf_counter() - t0)


def _margin_value(params: Parameters, z: np.ndarray, margin: Margin) -> float:
    """The margin of the network ``params`` at the input ``z``."""
    return float(margin.of(ReLUNetwork.from_parameters(params).logits(z[None, :]))[0])


def _combine(verdicts: list[RobustnessVerdict], t0: float) -> RobustnessVerdict:
    """One verdict on every margin of a target: robust when each margin is, refuted when
    one is (its concrete model the worst found), else unproven; the bound is the least
    proven bound (``None`` unless every margin has one)."""
    refuting = [v for v in verdicts if v.robust is False]
    # pragma: no mutate start (the key below ranks the verdicts without a value last anyway)
    valued = [v for v in verdicts if v.value is not None]
    # pragma: no mutate end
    worst = min(refuting or valued or verdicts,
                key=lambda v: math.inf if v.value is None else v.value)
    bounds = [v.bound for v in verdicts]
    statuses = [v.solver_status for v in verdicts if v.solver_status is not None]
    if refuting:
        robust: bool | None = False
    else:
        robust = True if all(v.robust for v in verdicts) else None
    method = worst.method if refuting or "milp" not in {v.method for v in verdicts} \
        else "milp"
    return dataclasses.replace(
        worst, robust=robust, bound=None if None in bounds else min(bounds), method=method,
        seconds=time.perf_counter() - t0,
        solver_status=next((s for s in statuses if s != Status.OPTIMAL.value),
                           statuses[0] if statuses else None))


class ModelShiftAdversary(Adversary):
    """The Δ-adversary of PROPLACE's Algorithm 1 at one query: it checks the master's
    point at ``threshold`` (σ - t) and adds each worst shifted model it finds to the
    master ``m`` as a network copy (:func:`~cfopt.formulations.robustness.add_shifted_copy`,
    big-M constants from interval bounds over ``box``, and ``hull``), until
    :meth:`remove_cuts`.

    Args:
        checker: the network's checker at δ.
        m: the master MILP (the counterfactual model, factual and target set).
        target: the target's class index (binary: 1 is the logit > 0).
        threshold: the level the proven bound must reach.
        box: bounds of the master's model inputs (e.g. the plausible region's box);
            ``None``: the copies cannot be added (a check-only adversary).
        hull: points whose convex hull holds the master's model inputs (e.g. the
            plausible region's), which bound each copy's first layer too
            (:meth:`~cfopt.models.network.ReLUNetwork.box_bounds`); ``None``: the box
            alone.
        hull_weights: with ``hull``, the master's variables λ of which its model inputs
            are the combination of ``hull``'s rows: each copy then gets its first
            layer's vertex envelope
            (:meth:`~cfopt.formulations.predictors.PredictorConstr.vertex_envelope`;
            implied by the master, so sound either way); ``None``: none.
        lp_screen: screen each check with the LP relaxation between the interval screen
            and the exact MILP (:meth:`RobustnessChecker.check`; speed lever, sound
            either way).
    """

    name = "the adversary"

    def __init__(self, checker: RobustnessChecker, m: CounterfactualModel, target: int,
                 threshold: float, box: tuple[np.ndarray, np.ndarray] | None = None,
                 lp_screen: bool = False, hull: np.ndarray | None = None,
                 hull_weights: Sequence[pyo.Var] | None = None) -> None:
        self.checker, self.m, self.target, self.threshold = checker, m, target, threshold
        self.box, self.lp_screen, self.hull = box, lp_screen, hull
        self.hull_weights = hull_weights
        #: the shifted models added to the master, in order
        self.models: list[Parameters] = []
        self._copies: list[tuple[pyo.Block, PredictorConstr]] = []

    def verdict(self, point: pd.DataFrame, deadline: Deadline) -> RobustnessVerdict:
        """The checker's verdict on a raw row, within the deadline's time left."""
        left = deadline.left()
        return self.checker.check(self.m.space.encode(point)[0], self.target, self.threshold,
                                  time_limit=None if left is None else left.time_limit,
                                  lp_screen=self.lp_screen)

    def cut_at(self, z: np.ndarray) -> bool:
        """Add a shifted model that classifies the model inputs ``z`` (e.g. a guess of
        the first master's point) below the threshold as a cut, if the interval
        screen's concrete model (:meth:`RobustnessChecker.attack_parameters`, of the
        least margin; no MILP) does; ``True`` when a cut was added. Any model of Δ is
        a valid cut: every Δ-robust point satisfies it."""
        z = np.asarray(z, dtype=np.float64)  # pragma: no mutate (read as floats downstream)
        z = z.reshape(-1)  # pragma: no mutate (numpy reads any negative size as -1)
        value, params = min(((_margin_value(p, z, margin), p) for margin in
                             self.checker.margins(self.target)
                             for p in [self.checker.attack_parameters(z, margin)]),
                            key=lambda pair: pair[0])
        if value >= self.threshold:
            return False
        # pragma: no mutate start (add_cut reads the counterexample only)
        self.add_cut(Check(certified=False, bound=None, verdict=None, counterexample=params))
        # pragma: no mutate end
        return True

    def check(self, answer: MasterAnswer, deadline: Deadline) -> Check:
        verdict = self.verdict(answer.point, deadline)
        return Check(certified=bool(verdict.robust), bound=verdict.bound, verdict=verdict,
                     counterexample=verdict.parameters,
                     note="the adversary could not decide (solver limit); robustness unproven")

    def add_cut(self, check: Check) -> None:
        if self.box is None:
            raise ValueError("this model-shift adversary has no input box for the copies")
        self._copies.append(add_shifted_copy(self.m, check.counterexample, self.box,
                                             f"shifted_{len(self._copies) + 1}", self.hull,
                                             self.hull_weights))
        self.models.append(check.counterexample)

    def network_copies(self, m: CounterfactualModel) -> list[NetworkCopy]:
        """Each shifted copy the master holds (:meth:`hold`): its own network on the
        master's inputs."""
        return [(pred, None) for copy, pred in self._copies if copy.active]

    def hold(self, indices: Collection[int]) -> None:
        """The master holds the copies of ``models[i]`` for ``i`` in ``indices`` and
        leaves every other copy out (deactivated, kept for later)."""
        for i, (copy, _) in enumerate(self._copies):
            if i in indices:
                copy.activate()
            else:
                copy.deactivate()

    def missed(self, z: np.ndarray, level: float) -> list[int]:
        """The indices of the models whose copies the master leaves out and that give
        the model inputs ``z`` a least margin below ``level`` (float64 forward passes)."""
        z = np.asarray(z, dtype=np.float64)  # pragma: no mutate (read as floats downstream)
        z = z.reshape(-1)  # pragma: no mutate (numpy reads any negative size as -1)
        margins = self.checker.margins(self.target)
        return [i for i, (copy, _) in enumerate(self._copies) if not copy.active and
                min(_margin_value(self.models[i], z, margin) for margin in margins) < level]

    def remove_cuts(self) -> None:
        """Delete every network copy this adversary added to the master."""
        for copy, _ in self._copies:
            self.m.del_component(copy)
        self._copies.clear()
