r"""The model-shift adversary Δ (PROPLACE, Jiang, Lan, Leofante, Rago, Toni 2024).

:class:`RobustnessChecker` decides the Δ-robustness of model inputs (Def. 7): the
interval screen, then the exact linear adversary MILP of
:class:`~cfopt.formulations.robustness.AdversaryModel` (the paper's eq. (6a),
minimised), certified by the solver's proven bound; it finds the k Δ-robust nearest
neighbours of the plausible region (Def. 9-10) with a per-row verdict cache.

:class:`ModelShiftAdversary` is its step of the cutting-set loop (Algorithm 1,
:mod:`cfopt.methods.cutting_set`): at the master's point it returns the certificate
or the worst shifted model of Δ, which becomes one more network copy of the master.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo
from scipy.spatial import cKDTree

from ...formulations.robustness import (
    AdversaryModel,
    Parameters,
    add_shifted_copy,
    attack,
    attack_targets,
    check_delta,
    max_shift,
    recover_parameters,
    robust_network,
)
from ...models.network import ReLUNetwork
from ...problem import CounterfactualModel
from ...results.robust import RobustnessVerdict
from ...results.status import Status
from ...solvers import SolverBackend, SolverSettings, make_solver
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
    :mod:`cfopt.formulations.robustness`).

    Args:
        model: a ReLU network with one logit (torch, ONNX, sklearn MLP, or a parsed
            adapter); its inputs are model inputs (``space.transform``).
        delta: radius of the model shift (> 0).
        solver: ``"highs"`` (default), ``"cbc"``, ``"gurobi"`` or a backend.
        time_limit: seconds per adversary solve (``None``: none); on expiry an
            undecided check is reported unproven (``robust=None``).
        mip_gap: relative gap of the adversary solves.
    """

    def __init__(self, model: Any, delta: float, *, solver: str | SolverBackend = "highs",
                 time_limit: float | None = None, mip_gap: float = 1e-6) -> None:
        self.adapter = robust_network(model)
        self.net = self.adapter.structure
        self.delta = check_delta(delta)
        self.backend = make_solver(solver if isinstance(solver, str) else solver.name)
        self.settings = SolverSettings(time_limit=time_limit, mip_gap=mip_gap, threads=1,
                                       seed=0)
        self._verdicts: dict[tuple, np.ndarray] = {}
        self.milp_checks = 0

    # --------------------------------------------------------------- one point
    def screen(self, Z: np.ndarray, sign: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Per row of ``Z``: a sound lower bound (interval propagation) and an upper
        bound (a concrete shifted model) of the minimum signed logit over Δ."""
        lower = self.net.signed(sign).shifted_bounds(Z, self.delta)[-1][0][:, 0]
        return lower, attack(self.net, Z, self.delta, sign)

    def check(self, z: np.ndarray, sign: int = 1, threshold: float = 0.0,
              screen: bool = True, time_limit: float | None = None) -> RobustnessVerdict:
        """Whether the minimum signed logit over Δ at the model input ``z`` is ≥
        ``threshold``: the interval screen first (``screen=True``), the exact MILP when
        it is undecided (within ``time_limit`` seconds if given, else the checker's
        own limit)."""
        t0 = time.perf_counter()
        z = np.asarray(z, dtype=np.float64).reshape(-1)
        if screen or self.net.is_linear:  # the screen is exact for a linear model
            lower, upper = self.screen(z[None, :], sign)
            if lower[0] >= threshold:
                return RobustnessVerdict(robust=True, bound=float(lower[0]), value=None,
                                         solver_value=None, method="interval",
                                         threshold=threshold, seconds=time.perf_counter() - t0)
            if upper[0] < threshold or self.net.is_linear:
                params = self.attack_parameters(z, sign)
                value = _signed_logit(params, z, sign)
                return RobustnessVerdict(robust=False if value < threshold else None,
                                         bound=float(lower[0]), value=value,
                                         solver_value=None, method="attack",
                                         threshold=threshold, parameters=params,
                                         shift=max_shift(self.net, params),
                                         seconds=time.perf_counter() - t0)
        return self.exact(z, sign, threshold, t0, time_limit)

    def attack_parameters(self, z: np.ndarray, sign: int = 1) -> Parameters:
        """The concrete shifted model of the screen's upper bound at ``z``."""
        targets = [t[0] for t in attack_targets(self.net, z[None, :], self.delta, sign)]
        return recover_parameters(self.net, z, self.delta, targets, sign)

    def exact(self, z: np.ndarray, sign: int = 1, threshold: float = 0.0,
              started: float | None = None, time_limit: float | None = None
              ) -> RobustnessVerdict:
        """The exact adversary MILP at ``z`` (within ``time_limit`` seconds if given):
        the solver's proven bound decides robustness; the worst parameters are recovered
        and re-evaluated by a numpy forward pass, which alone may refute robustness."""
        t0 = time.perf_counter() if started is None else started
        z = np.asarray(z, dtype=np.float64).reshape(-1)
        model = AdversaryModel(self.net, z, self.delta, sign)
        settings = self.settings if time_limit is None else dataclasses.replace(
            self.settings, time_limit=time_limit)
        outcome = self.backend.solve(model, settings)
        self.milp_checks += 1
        params = value = solver_value = shift = None
        if outcome.status.has_solution:
            solver_value = float(pyo.value(model.worst))
            params = recover_parameters(self.net, z, self.delta, model.targets(), sign)
            value = _signed_logit(params, z, sign)
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
                                 parameters=params, shift=shift,
                                 seconds=time.perf_counter() - t0,
                                 solver_status=outcome.status.value)

    # ---------------------------------------------------------------- data sets
    def nearest_robust(self, Z: np.ndarray, rows: np.ndarray, z0: np.ndarray, k: int, *,
                       sign: int = 1, cache_key: Any = None) -> tuple[list[int], RegionReport]:
        """The first ``k`` Δ-robust rows of ``Z[rows]`` in KD-tree (Euclidean) order from
        ``z0`` (PROPLACE Def. 9-10). Rows are screened in batches, the exact MILP runs
        only on undecided rows in order; verdicts are cached per ``(cache_key, sign)``
        (a key naming the data set ``Z``)."""
        t0 = time.perf_counter()
        rows = np.asarray(rows, dtype=int)
        key = (cache_key, sign, len(Z))
        verdicts = self._verdicts.setdefault(key, np.full(len(Z), _UNSEEN, dtype=np.int8))
        found: list[int] = []
        screened = checks = 0
        if not len(rows):
            return found, RegionReport(0, 0, 0, 0, time.perf_counter() - t0)
        tree = cKDTree(Z[rows])
        seen = 0
        batch = max(4 * k, 64)
        while len(found) < k and seen < len(rows):
            n = min(len(rows), seen + batch)
            _, idx = tree.query(z0, k=n)
            order = rows[np.atleast_1d(idx)[seen:n]]
            unknown = order[verdicts[order] == _UNSEEN]
            if len(unknown):
                lower, upper = self.screen(Z[unknown], sign)
                verdicts[unknown] = np.where(lower >= 0, 1, np.where(upper < 0, 0, _UNDECIDED))
                screened += len(unknown)
            for r in order:
                if verdicts[r] == _UNDECIDED:
                    verdict = self.exact(Z[r], sign)
                    checks += 1
                    verdicts[r] = 1 if verdict.robust else 0
                if verdicts[r] == 1:
                    found.append(int(r))
                    if len(found) == k:
                        break
            seen = n
            batch *= 2
        return found, RegionReport(len(found), len(rows), screened, checks,
                                   time.perf_counter() - t0)


def _signed_logit(params: Parameters, z: np.ndarray, sign: int) -> float:
    """The target sign times the logit of the network ``params`` at the input ``z``."""
    return float(sign * ReLUNetwork.from_parameters(params).logits(z[None, :])[0, 0])


class ModelShiftAdversary(Adversary):
    """The Δ-adversary of PROPLACE's Algorithm 1 at one query: it checks the master's
    point at ``threshold`` (σ - t) and adds each worst shifted model it finds to the
    master ``m`` as a network copy (:func:`~cfopt.formulations.robustness.add_shifted_copy`,
    big-M constants from interval bounds over ``box``), until :meth:`remove_cuts`.

    Args:
        checker: the network's checker at δ.
        m: the master MILP (the counterfactual model, factual and target set).
        sign: the target's sign (+1: class 1).
        threshold: the level the proven bound must reach.
        box: bounds of the master's model inputs (e.g. the plausible region's box);
            ``None``: the copies cannot be added (a check-only adversary).
    """

    name = "the adversary"

    def __init__(self, checker: RobustnessChecker, m: CounterfactualModel, sign: int,
                 threshold: float, box: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.checker, self.m, self.sign, self.threshold = checker, m, sign, threshold
        self.box = box
        #: the shifted models added to the master, in order
        self.models: list[Parameters] = []
        self._copies: list[pyo.Block] = []

    def verdict(self, point: pd.DataFrame, deadline: Deadline) -> RobustnessVerdict:
        """The checker's verdict on a raw row, within the deadline's time left."""
        left = deadline.left()
        return self.checker.check(self.m.space.encode(point)[0], self.sign, self.threshold,
                                  time_limit=None if left is None else left.time_limit)

    def check(self, answer: MasterAnswer, deadline: Deadline) -> Check:
        verdict = self.verdict(answer.point, deadline)
        return Check(certified=bool(verdict.robust), bound=verdict.bound, verdict=verdict,
                     counterexample=verdict.parameters,
                     note="the adversary could not decide (solver limit); robustness unproven")

    def add_cut(self, check: Check) -> None:
        if self.box is None:
            raise ValueError("this model-shift adversary has no input box for the copies")
        self._copies.append(add_shifted_copy(self.m, check.counterexample, self.box,
                                             f"shifted_{len(self._copies) + 1}"))
        self.models.append(check.counterexample)

    def remove_cuts(self) -> None:
        """Delete every network copy this adversary added to the master."""
        for copy in self._copies:
            self.m.del_component(copy)
        self._copies.clear()
