r"""Provably robust and plausible counterfactuals under model shift (PROPLACE) and its
baselines.

PROPLACE (Jiang, Lan, Leofante, Rago, Toni 2024): for a ReLU network with one logit and
the model shift Δ (every weight and bias within ±δ of the trained ones), find the
closest counterfactual inside the plausible region (Def. 10,
:class:`~cfopt.formulations.robustness.RobustPlausibleRegion`) that every network of Δ
classifies as the target, by the cutting-set loop of Algorithm 1:

1. master: the closest point of the plausible region whose signed logit is ≥ σ for the
   model and every collected shifted model (one network copy each, with big-M
   constants from interval bounds over the region's bounding box), under any other
   declared constraints (actionability, max changes, rules, causal equations, trust
   regions);
2. adversary: the exact minimum signed logit over Δ at the master's point
   (:class:`RobustnessChecker`: interval screen, then the exact MILP of
   :func:`~cfopt.formulations.robustness.adversary_model`);
3. stop when the adversary's proven lower bound is ≥ σ - t (σ > t > 0, the tolerances
   of the convergence proof, Prop. 2), else add the worst model and repeat.

Every returned point is decoded to raw units, re-checked with the real model's own
prediction and against every declared constraint, and its robustness claim is the
solver's proven bound (or the interval screen), never an incumbent.

Baselines: :class:`NonRobustMILP` (the plain closest counterfactual), :class:`MILPR`
(raise the validity margin until the check certifies, Jiang et al. 2023) and
:class:`RNCE` (the nearest Δ-robust data point).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo
from scipy.spatial import cKDTree

from .bound_tightening import apply_layer_bounds
from .explainer import Explainer
from .features import FeatureSpace, as_frame
from .formulations.blocks import ConstraintBlock
from .formulations.robustness import (
    Parameters,
    RegionReport,
    RobustPlausibleRegion,
    add_shifted_copy,
    adversary_model,
    adversary_targets,
    attack,
    attack_targets,
    check_delta,
    forward,
    interval_bounds,
    layer_box_bounds,
    max_shift,
    recover_parameters,
    remove_shifted_copy,
    robust_network,
)
from .problem import CounterfactualModel
from .progress import progress_bar, progress_enabled
from .query_tightening import objective_value
from .results import _plain, _row_dict
from .solution import verified_solution
from .solvers import SolverBackend, SolverSettings, make_solver
from .status import Status

#: per-row verdict codes of the data cache (besides 1 robust, 0 not robust)
_UNSEEN, _UNDECIDED = -1, 2


class RobustStatus(str, Enum):
    """Outcome of a robust counterfactual query.

    CERTIFIED: a verified counterfactual whose Δ-robustness is proven.
    NOT_ROBUST: a verified counterfactual that is not Δ-robust (a concrete shifted
        model refutes it), or whose robustness could not be proven.
    INFEASIBLE: no Δ-robust counterfactual exists under the constraints (no robust
        data point for the region, or the master became infeasible).
    ITERATION_LIMIT: the loop's iteration cap was reached before a certificate.
    TIME_LIMIT: the time limit was reached before a certificate.
    VERIFICATION_FAILED: the solver's point fails the real model's check.
    ERROR: the solver failed.
    """

    CERTIFIED = "certified"
    NOT_ROBUST = "not_robust"
    INFEASIBLE = "infeasible"
    ITERATION_LIMIT = "iteration_limit"
    TIME_LIMIT = "time_limit"
    VERIFICATION_FAILED = "verification_failed"
    ERROR = "error"


def _params_list(params: Parameters | None) -> list | None:
    if params is None:
        return None
    return [{"weight": w.tolist(), "bias": b.tolist()} for w, b in params]


@dataclass
class RobustnessVerdict:
    """The Δ-robustness of one model input: is the minimum signed logit over Δ at least
    ``threshold``?

    Attributes:
        robust: True (proven: ``bound >= threshold``), False (refuted: a concrete model
            of Δ, checked by a numpy forward pass, has signed logit ``< threshold``) or
            None (unproven, e.g. a time limit).
        bound: proven lower bound of the minimum signed logit (the solver's dual
            bound, or the interval bound when the screen decided).
        value: signed logit of the worst concrete model found (an upper bound of the
            minimum), from a plain forward pass of ``parameters``.
        solver_value: the adversary MILP's incumbent objective (``None`` if the
            screen decided).
        method: ``"interval"`` (screen, certainly robust), ``"attack"`` (screen,
            certainly not) or ``"milp"`` (the exact adversary).
        threshold: the level tested.
        parameters: the worst concrete model found, (W, b) per layer.
        shift: ``‖Θ - Θ⁰‖_∞`` of ``parameters`` (≤ δ).
        seconds: wall time of the check.
        solver_status: the adversary's solve status (``None`` for the screen).
    """

    robust: bool | None
    bound: float | None
    value: float | None
    solver_value: float | None
    method: str
    threshold: float
    parameters: Parameters | None = None
    shift: float | None = None
    seconds: float = 0.0
    solver_status: str | None = None

    def to_dict(self, include_parameters: bool = False) -> dict[str, Any]:
        out = {"robust": self.robust, "bound": _plain(self.bound), "value": _plain(self.value),
               "solver_value": _plain(self.solver_value), "method": self.method,
               "threshold": self.threshold, "shift": self.shift, "seconds": self.seconds,
               "solver_status": self.solver_status}
        if include_parameters:
            out["parameters"] = _params_list(self.parameters)
        return out


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
        lower = interval_bounds(self.net, Z, self.delta, sign)[-1][0][:, 0]
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
                value = float(sign * forward(params, z[None, :])[0])
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
        model = adversary_model(self.net, z, self.delta, sign)
        settings = self.settings if time_limit is None else dataclasses.replace(
            self.settings, time_limit=time_limit)
        outcome = self.backend.solve(model, settings)
        self.milp_checks += 1
        params = value = solver_value = shift = None
        if outcome.status.has_solution:
            solver_value = float(pyo.value(model.worst))
            params = recover_parameters(self.net, z, self.delta, adversary_targets(model), sign)
            value = float(sign * forward(params, z[None, :])[0])
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


@dataclass
class RobustnessCertificate:
    """The robustness claim of a counterfactual.

    Attributes:
        delta: the model shift's radius.
        robust: Δ-robust (True: the proven lower bound of the minimum signed logit is
            ≥ 0), refuted (False) or unproven (None).
        bound: that proven lower bound (``None`` when no check ran).
        threshold: the level the loop stopped at (σ - t for PROPLACE, 0 otherwise).
        verdict: the final check (:class:`RobustnessVerdict`).
        iterations: master solves (PROPLACE), margin rounds (MILP-R), 1 otherwise.
        models: the shifted models collected by the cutting-set loop.
        times: seconds spent in the region, master solves, adversary checks.
    """

    delta: float
    robust: bool | None
    bound: float | None
    threshold: float
    verdict: RobustnessVerdict | None
    iterations: int = 0
    models: list = field(default_factory=list)
    times: dict[str, float] = field(default_factory=dict)

    def to_dict(self, include_parameters: bool = False) -> dict[str, Any]:
        out = {"delta": self.delta, "robust": self.robust, "bound": _plain(self.bound),
               "threshold": self.threshold, "iterations": self.iterations,
               "models_used": len(self.models), "times": dict(self.times),
               "verdict": self.verdict.to_dict(include_parameters) if self.verdict else None}
        if include_parameters:
            out["models"] = [_params_list(p) for p in self.models]
        return out


@dataclass
class RobustCounterfactual:
    """The answer of a robust counterfactual method to one query.

    Attributes:
        method: ``"proplace"``, ``"milp"``, ``"milp-r"`` or ``"rnce"``.
        status: see :class:`RobustStatus`.
        factual, counterfactual: one-row raw DataFrames (``counterfactual`` is
            ``None`` unless verified).
        target: the target class labels.
        predicted_class: the real model's prediction on ``counterfactual``.
        verified: the real model predicts the target on ``counterfactual`` exactly as
            returned, and it satisfies every declared constraint.
        objective: the objective of the returned point, from its raw values.
        bound: the last master solve's proven bound on the objective (``None`` for
            RNCE).
        distances: weighted L1, L0 and L∞ of the returned point.
        certificate: the robustness claim (:class:`RobustnessCertificate`).
        total_time: wall seconds of the query (preprocessing paid by this query
            included, e.g. robustness screening of data rows).
        solver: the solver's name.
        message: diagnostics in words.
        details: method-specific numbers (region report, margins tried).
    """

    method: str
    status: RobustStatus
    factual: pd.DataFrame
    counterfactual: pd.DataFrame | None
    target: tuple
    predicted_class: Any
    verified: bool
    objective: float | None
    bound: float | None
    distances: dict[str, float]
    certificate: RobustnessCertificate
    total_time: float
    solver: str
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        """A verified counterfactual is available."""
        return self.counterfactual is not None and self.verified

    @property
    def certified(self) -> bool:
        """A verified counterfactual with proven Δ-robustness."""
        return self.found and self.certificate.robust is True

    def to_dict(self, include_parameters: bool = False) -> dict[str, Any]:
        return {"method": self.method, "status": self.status.value,
                "verified": self.verified, "certified": self.certified,
                "factual": _row_dict(self.factual),
                "counterfactual": _row_dict(self.counterfactual),
                "target": [_plain(t) for t in self.target],
                "predicted_class": _plain(self.predicted_class),
                "objective": _plain(self.objective), "bound": _plain(self.bound),
                "distances": {k: _plain(v) for k, v in self.distances.items()},
                "certificate": self.certificate.to_dict(include_parameters),
                "total_time": self.total_time, "solver": self.solver, "message": self.message,
                "details": {k: _plain(v) for k, v in self.details.items()}}

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **{"indent": 2, **kwargs})


def _check_positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _target_sign(m: CounterfactualModel) -> int:
    return 1 if m.target[0] == m.adapter.classes[1] else -1


def _require_space_encoding(m: CounterfactualModel) -> None:
    if not m.uses_space_encoding:
        raise ValueError("robust counterfactuals need a network that consumes "
                         "space.transform(X) (not a Pipeline with its own preprocessing)")


class _RobustMethod(ABC):
    """Shared parts: the counterfactual MILP, the solver, the checker, results."""

    method = ""

    def __init__(self, model: Any, space: FeatureSpace, delta: float, *,
                 solver: str | SolverBackend, time_limit: float | None, mip_gap: float,
                 threads: int | None, seed: int | None,
                 solver_options: Mapping[str, Any] | None = None) -> None:
        self.delta = check_delta(delta)
        robust_network(model)
        if not isinstance(space, FeatureSpace):
            raise TypeError(f"space must be a cfopt.FeatureSpace, got {type(space).__name__}")
        self.space = space
        self.backend = make_solver(solver)
        self.settings = SolverSettings(time_limit=time_limit, mip_gap=mip_gap,
                                       threads=threads, seed=seed,
                                       options=dict(solver_options or {}))
        self.time_limit = time_limit

    def _settings_left(self, t0: float) -> SolverSettings | None:
        """The solve settings with the query's remaining time (``None``: none left)."""
        if self.time_limit is None:
            return self.settings
        left = self.time_limit - (time.perf_counter() - t0)
        if left <= 0:
            return None
        return dataclasses.replace(self.settings, time_limit=left)

    def _result(self, m: CounterfactualModel, status: RobustStatus, row: pd.DataFrame | None,
                certificate: RobustnessCertificate, t0: float, *, bound: float | None = None,
                message: str = "", details: dict[str, Any] | None = None,
                one_off: float = 0.0) -> RobustCounterfactual:
        """The result, with ``row`` re-checked by the real model and every declared
        constraint (a failure drops the point: VERIFICATION_FAILED)."""
        verified, predicted = False, None
        if row is not None:
            predicted = m.classify(row)[0]
            problems = m.violations(row)
            verified = m.is_target(predicted) and not problems
            if not verified:
                message = (f"the point is predicted as {predicted!r} by the real model "
                           f"(target {list(m.target)}) or breaks {problems}; no "
                           f"counterfactual returned")
                status, row = RobustStatus.VERIFICATION_FAILED, None
        return RobustCounterfactual(
            method=self.method, status=status, factual=m.factual, counterfactual=row,
            target=m.target, predicted_class=predicted if verified else None,
            verified=verified, objective=objective_value(m, row) if verified else None,
            bound=bound, distances=m.distances(row) if verified else {},
            certificate=certificate, total_time=time.perf_counter() - t0 + one_off,
            solver=self.backend.name, message=message, details=details or {})

    def explain_many(self, X: pd.DataFrame, target: Any = None, *,
                     progress: bool | None = None) -> list[RobustCounterfactual]:
        """:meth:`explain` for every row of ``X`` (``progress``: a tqdm bar; ``None``:
        ``CFOPT_PROGRESS`` if set, else only when stderr is a terminal or in a notebook)."""
        frame = as_frame(X)
        out = []
        with progress_bar(len(frame), f"{self.method} counterfactuals", progress) as bar:
            for i in range(len(frame)):
                out.append(self.explain(frame.iloc[[i]], target))
                bar.update(1)
        return out

    @abstractmethod
    def explain(self, x: pd.DataFrame | pd.Series | Mapping,
                target: Any = None) -> RobustCounterfactual:
        """The method's counterfactual of one raw row ``x``."""


class Proplace(_RobustMethod):
    """PROPLACE: the closest Δ-robust counterfactual in the plausible region, by the
    cutting-set loop of Algorithm 1 (module docstring).

    Args:
        model: a ReLU network with one logit consuming ``space.transform(X)``.
        space: the :class:`~cfopt.FeatureSpace` (immutable / increase-only features
            are kept).
        data: raw rows for the plausible region (e.g. the training data).
        delta: radius of the model shift.
        k: Δ-robust neighbours spanning the plausible region (Def. 10).
        labels: observed labels of ``data``; by default the model's predictions select
            the target-class rows.
        sigma: master margin σ (signed logit ≥ σ for every collected model).
        tolerance: t, with 0 < t < σ; the loop stops when the adversary's proven bound
            is ≥ σ - t.
        max_iterations: cap on master solves per query.
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

    def __init__(self, model: Any, space: FeatureSpace, data: pd.DataFrame, delta: float,
                 k: int = 20, *, labels: Any = None, sigma: float = 0.01,
                 tolerance: float = 0.005, max_iterations: int = 50,
                 time_limit: float | None = None, solver: str | SolverBackend = "highs",
                 objective: str | Mapping[str, float] = "l1",
                 weights: str | Mapping[str, float] = "range", max_changes: int | None = None,
                 bound_tightening: str | None = "lp", constraints: Sequence[ConstraintBlock] = (),
                 mip_gap: float = 1e-4, threads: int | None = 1, seed: int | None = 0,
                 solver_options: Mapping[str, Any] | None = None,
                 progress: bool | None = None) -> None:
        super().__init__(model, space, delta, solver=solver, time_limit=time_limit,
                         mip_gap=mip_gap, threads=threads, seed=seed,
                         solver_options=solver_options)
        progress_enabled(progress)  # a bad value raises here, not at the first query
        self.progress = progress
        self.sigma = _check_positive("sigma", sigma)
        self.tolerance = _check_positive("tolerance", tolerance)
        if not self.tolerance < self.sigma:
            raise ValueError(f"tolerance must be below sigma (σ > t > 0 for convergence), got "
                             f"sigma={sigma!r}, tolerance={tolerance!r}")
        self.max_iterations = _check_count("max_iterations", max_iterations)
        self.region = RobustPlausibleRegion(data, self.delta, k, labels=labels,
                                            solver=self.backend.name, name="plausible_region")
        self.milp = CounterfactualModel(model, space, objective=objective, weights=weights,
                                        max_changes=max_changes, margin=self.sigma,
                                        bound_tightening=bound_tightening,
                                        constraints=[*constraints, self.region])
        _require_space_encoding(self.milp)
        self.checker: RobustnessChecker = self.region.checker(self.milp)
        self.build_time = self.milp.build_time
        self._build_pending = True

    def explain(self, x: pd.DataFrame | pd.Series | Mapping,
                target: Any = None) -> RobustCounterfactual:
        """The closest certified Δ-robust counterfactual of one raw row ``x`` in the
        plausible region (``target``: a class label or ``None`` for the other class).
        The first query's time includes building the MILP."""
        t0 = time.perf_counter()
        one_off = self.build_time if self._build_pending else 0.0
        self._build_pending = False
        m = self.milp
        m.set_factual(x)
        m.set_target(target)  # updates the region: Δ-robust neighbours
        region_time = self.region.report.seconds
        sign = _target_sign(m)
        report = self.region.report
        details: dict[str, Any] = {"neighbours": report.neighbours,
                                   "region_screened": report.screened,
                                   "region_milp_checks": report.milp_checks}
        times = {"region": region_time, "master": 0.0, "adversary": 0.0}
        certificate = RobustnessCertificate(self.delta, None, None, self.sigma - self.tolerance,
                                            None, times=times)
        if report.neighbours == 0:
            return self._result(m, RobustStatus.INFEASIBLE, None, certificate, t0, message=(
                f"no Δ-robust data point (δ={self.delta:g}) among the {report.candidates} rows "
                f"predicted as the target: the plausible region holds no robust point"),
                details=details, one_off=one_off)
        pred = m.predictor_constr
        box = self.region.box(m)
        global_bounds = m.global_layer_bounds
        local = layer_box_bounds(pred.adapter.structure, *box)
        apply_layer_bounds(pred, [(np.maximum(gl, ll), np.maximum(np.minimum(gu, lu),
                                                             np.maximum(gl, ll)))
                            for (gl, gu), (ll, lu) in zip(global_bounds, local)])
        copies: list[str] = []
        status, row, bound, message = RobustStatus.ITERATION_LIMIT, None, None, ""
        bar = progress_bar(self.max_iterations, "PROPLACE cutting-set", self.progress,
                           leave=False)
        try:
            for it in range(1, self.max_iterations + 1):
                settings = self._settings_left(t0)
                if settings is None:
                    status = RobustStatus.TIME_LIMIT
                    message = "time limit reached before a certificate"
                    break
                s0 = time.perf_counter()
                outcome = self.backend.solve(m, settings)
                times["master"] += time.perf_counter() - s0
                certificate.iterations = it
                if outcome.status is Status.INFEASIBLE:
                    status, row = RobustStatus.INFEASIBLE, None
                    message = (f"no point of the plausible region satisfies the constraints "
                               f"and is valid with margin σ={self.sigma:g} for the model and "
                               f"the {len(copies)} shifted model(s) collected: no Δ-robust "
                               f"counterfactual in the region")
                    break
                if not outcome.status.has_solution:  # the last point (if any) is kept
                    status = (RobustStatus.TIME_LIMIT if outcome.status is Status.NO_SOLUTION
                              else RobustStatus.ERROR)
                    message = f"master solve ended with {outcome.termination}" + (
                        "; the last point is returned unproven" if row is not None else "")
                    break
                bound = outcome.bound
                row = verified_solution(m).row
                left = self._settings_left(t0)
                if left is None:
                    status = RobustStatus.TIME_LIMIT
                    message = "time limit reached before the adversary checked the last point"
                    break
                a0 = time.perf_counter()
                verdict = self.checker.check(m.space.encode(row)[0], sign,
                                             self.sigma - self.tolerance,
                                             time_limit=left.time_limit)
                times["adversary"] += time.perf_counter() - a0
                certificate.verdict = verdict
                bar.set_postfix(master_bound=_plain(bound), robust_bound=_plain(verdict.bound),
                                need=self.sigma - self.tolerance, refresh=False)
                bar.update(1)
                if verdict.robust:
                    status = RobustStatus.CERTIFIED
                    break
                if verdict.parameters is None:
                    timed_out = self._settings_left(t0) is None
                    status = RobustStatus.TIME_LIMIT if timed_out else RobustStatus.NOT_ROBUST
                    message = "the adversary could not decide (solver limit); robustness unproven"
                    break
                name = f"shifted_{it}"
                add_shifted_copy(m, verdict.parameters, name, box)
                copies.append(name)
                certificate.models.append(verdict.parameters)
            else:
                message = (f"{self.max_iterations} iterations without a certificate; the last "
                           f"point is returned unproven")
        finally:
            bar.close()
            for name in copies:
                remove_shifted_copy(m, name)
            apply_layer_bounds(pred, global_bounds)
        self._finish_certificate(certificate, sign)
        if status is RobustStatus.CERTIFIED and not certificate.robust:
            status = RobustStatus.NOT_ROBUST
        return self._result(m, status, row, certificate, t0, bound=bound, message=message,
                            details=details, one_off=one_off)

    def _finish_certificate(self, certificate: RobustnessCertificate, sign: int) -> None:
        """The claim at level 0 from the final check (proven bound ≥ 0)."""
        verdict = certificate.verdict
        if verdict is None:
            return
        certificate.bound = verdict.bound
        if verdict.bound is not None and verdict.bound >= 0:
            certificate.robust = True
        elif verdict.value is not None and verdict.value < 0:
            certificate.robust = False


class NonRobustMILP(_RobustMethod):
    """The plain closest counterfactual (:class:`~cfopt.Explainer`), with its Δ-robustness
    checked afterwards (the baseline "MILP" of PROPLACE Table 1).

    Args are those of :class:`~cfopt.Explainer` plus ``delta`` for the check.
    """

    method = "milp"

    def __init__(self, model: Any, space: FeatureSpace, delta: float, *,
                 solver: str | SolverBackend = "highs", margin: float = 1e-3,
                 time_limit: float | None = None, mip_gap: float = 1e-4,
                 threads: int | None = 1, seed: int | None = 0, **options: Any) -> None:
        super().__init__(model, space, delta, solver=solver, time_limit=time_limit,
                         mip_gap=mip_gap, threads=threads, seed=seed)
        self.explainer = Explainer(model, space, solver=self.backend, margin=margin,
                                   time_limit=time_limit, mip_gap=mip_gap, threads=threads,
                                   seed=seed, **options)
        self.milp = self.explainer.milp
        _require_space_encoding(self.milp)
        self.checker = RobustnessChecker(model, self.delta, solver=self.backend.name)

    def explain(self, x: pd.DataFrame | pd.Series | Mapping,
                target: Any = None) -> RobustCounterfactual:
        """The closest counterfactual of ``x``, then its exact robustness check."""
        t0 = time.perf_counter()
        ce = self.explainer.explain(x, target)
        m = self.milp
        certificate = RobustnessCertificate(self.delta, None, None, 0.0, None, iterations=1)
        if not ce.found:
            status = {Status.INFEASIBLE: RobustStatus.INFEASIBLE,
                      Status.NO_SOLUTION: RobustStatus.TIME_LIMIT}.get(ce.status,
                                                                       RobustStatus.ERROR)
            return self._result(m, status, None, certificate, t0, message=ce.message)
        a0 = time.perf_counter()
        verdict = self.checker.check(m.space.encode(ce.counterfactual)[0], _target_sign(m))
        certificate.times = {"master": ce.total_time, "adversary": time.perf_counter() - a0}
        certificate.verdict, certificate.bound, certificate.robust = (verdict, verdict.bound,
                                                                      verdict.robust)
        status = RobustStatus.CERTIFIED if verdict.robust else RobustStatus.NOT_ROBUST
        return self._result(m, status, ce.counterfactual, certificate, t0, bound=ce.bound,
                            details={"margin": ce.margin})


class MILPR(_RobustMethod):
    """MILP-R (Jiang et al. 2023): the closest counterfactual with validity margin μ,
    raising μ until the exact check certifies Δ-robustness. Each round sets
    ``μ ← max(growth · μ, μ - v)`` with ``v`` the worst shifted model's signed logit at
    the last point (the logit drop the shift caused there); once a margin is
    infeasible, μ bisects between the largest uncertified and the smallest infeasible
    margin.

    Args:
        initial_margin: the first μ (logit units).
        growth: factor (> 1) applied to μ after each uncertified round.
        max_rounds: cap on margin rounds.
        Others as :class:`Proplace` (no plausible region).
    """

    method = "milp-r"

    def __init__(self, model: Any, space: FeatureSpace, delta: float, *,
                 initial_margin: float = 0.01, growth: float = 2.0, max_rounds: int = 20,
                 time_limit: float | None = None, solver: str | SolverBackend = "highs",
                 objective: str | Mapping[str, float] = "l1",
                 weights: str | Mapping[str, float] = "range", max_changes: int | None = None,
                 bound_tightening: str | None = "lp", constraints: Sequence[ConstraintBlock] = (),
                 mip_gap: float = 1e-4, threads: int | None = 1, seed: int | None = 0,
                 solver_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(model, space, delta, solver=solver, time_limit=time_limit,
                         mip_gap=mip_gap, threads=threads, seed=seed,
                         solver_options=solver_options)
        self.initial_margin = _check_positive("initial_margin", initial_margin)
        self.growth = _check_positive("growth", growth)
        if self.growth <= 1:
            raise ValueError(f"growth must be > 1 (the margin must increase), got {growth!r}")
        self.max_rounds = _check_count("max_rounds", max_rounds)
        self.milp = CounterfactualModel(model, space, objective=objective, weights=weights,
                                        max_changes=max_changes, margin=self.initial_margin,
                                        bound_tightening=bound_tightening,
                                        constraints=constraints)
        _require_space_encoding(self.milp)
        self.checker = RobustnessChecker(model, self.delta, solver=self.backend.name)
        self.build_time = self.milp.build_time
        self._build_pending = True

    def explain(self, x: pd.DataFrame | pd.Series | Mapping,
                target: Any = None) -> RobustCounterfactual:
        """The closest counterfactual of ``x`` whose margin makes it certified Δ-robust."""
        t0 = time.perf_counter()
        one_off = self.build_time if self._build_pending else 0.0
        self._build_pending = False
        m = self.milp
        m.set_factual(x)
        m.set_target(target)
        sign = _target_sign(m)
        times = {"master": 0.0, "adversary": 0.0}
        certificate = RobustnessCertificate(self.delta, None, None, 0.0, None, times=times)
        margin = self.initial_margin
        low: float | None = None   # largest margin solved but not certified
        high: float | None = None  # smallest infeasible margin
        status, row, bound, message = RobustStatus.ITERATION_LIMIT, None, None, ""
        try:
            for rnd in range(1, self.max_rounds + 1):
                settings = self._settings_left(t0)
                if settings is None:
                    status, message = RobustStatus.TIME_LIMIT, "time limit reached"
                    break
                m.margin = margin
                s0 = time.perf_counter()
                outcome = self.backend.solve(m, settings)
                times["master"] += time.perf_counter() - s0
                certificate.iterations = rnd
                if outcome.status is Status.INFEASIBLE and low is not None:
                    high = margin
                    margin = (low + high) / 2
                    continue
                if not outcome.status.has_solution:
                    status = {Status.INFEASIBLE: RobustStatus.INFEASIBLE,
                              Status.NO_SOLUTION: RobustStatus.TIME_LIMIT}.get(
                        outcome.status, RobustStatus.ERROR)
                    row = None
                    message = (f"no counterfactual with margin {margin:g} "
                               f"({outcome.termination})")
                    break
                row, bound = verified_solution(m).row, outcome.bound
                a0 = time.perf_counter()
                verdict = self.checker.check(m.space.encode(row)[0], sign)
                times["adversary"] += time.perf_counter() - a0
                certificate.verdict = verdict
                if verdict.robust:
                    status = RobustStatus.CERTIFIED
                    break
                # the worst model lowers the logit from about μ to its value: ask for that drop
                low = margin
                drop = margin - verdict.value if verdict.value is not None else 0.0
                margin = max(self.growth * margin, drop)
                if high is not None:
                    margin = min(margin, (low + high) / 2)
            else:
                message = f"{self.max_rounds} margin rounds without a certificate"
        finally:
            m.margin = self.initial_margin
        if certificate.verdict is not None:
            v = certificate.verdict
            certificate.bound, certificate.robust = v.bound, v.robust
        return self._result(m, status, row, certificate, t0, bound=bound, message=message,
                            details={"margin": margin}, one_off=one_off)


class RNCE(_RobustMethod):
    """Robust nearest-neighbour counterfactual: the data row nearest the factual (KD-tree,
    Euclidean on the model inputs) that the model predicts as the target, that is
    Δ-robust, and that keeps the space's immutable and monotone features.

    Args:
        data: raw candidate rows; ``labels``, ``solver`` as :class:`Proplace`.
    """

    method = "rnce"

    def __init__(self, model: Any, space: FeatureSpace, data: pd.DataFrame, delta: float, *,
                 solver: str | SolverBackend = "highs", objective: str | Mapping[str, float] = "l1",
                 weights: str | Mapping[str, float] = "range") -> None:
        super().__init__(model, space, delta, solver=solver, time_limit=None, mip_gap=1e-4,
                         threads=1, seed=0)
        self.milp = CounterfactualModel(model, space, objective=objective, weights=weights,
                                        bound_tightening="interval")
        _require_space_encoding(self.milp)
        self.data = space.validate(as_frame(data), check_bounds=False).reset_index(drop=True)
        self.Z = np.clip(space.encode(self.data),
                         [b[0] for b in space.input_bounds()], [b[1] for b in space.input_bounds()])
        self.classes = self.milp.classify(self.data)
        self.checker = RobustnessChecker(model, self.delta, solver=self.backend.name)

    def _actionable(self, factual: pd.Series) -> np.ndarray:
        keep = np.ones(len(self.data), dtype=bool)
        for f in self.space:
            values = self.data[f.name].to_numpy()
            if f.immutable:
                keep &= values == factual[f.name]
            elif not f.is_onehot and f.direction != "any":
                codes = np.array([f.to_code(v) for v in values])
                delta = codes - f.to_code(factual[f.name])
                keep &= delta >= 0 if f.direction == "increase" else delta <= 0
        return keep

    def explain(self, x: pd.DataFrame | pd.Series | Mapping,
                target: Any = None) -> RobustCounterfactual:
        """The nearest actionable Δ-robust target-class data row of ``x``."""
        t0 = time.perf_counter()
        m = self.milp
        m.set_factual(x)
        m.set_target(target)
        sign = _target_sign(m)
        rows = np.flatnonzero(np.isin(self.classes, np.array(m.target, dtype=object))
                              & self._actionable(m.factual.iloc[0]))
        found, report = self.checker.nearest_robust(self.Z, rows, m.space.encode(m.factual)[0],
                                                    1, sign=sign, cache_key="rnce")
        certificate = RobustnessCertificate(self.delta, None, None, 0.0, None, iterations=1,
                                            times={"region": report.seconds})
        details = {"screened": report.screened, "milp_checks": report.milp_checks}
        if not found:
            return self._result(m, RobustStatus.INFEASIBLE, None, certificate, t0, message=(
                f"no Δ-robust actionable data row among {len(rows)} target-class rows"),
                details=details)
        row = self.data.iloc[[found[0]]].reset_index(drop=True)
        verdict = self.checker.check(m.space.encode(row)[0], sign)
        certificate.verdict, certificate.bound, certificate.robust = (verdict, verdict.bound,
                                                                      verdict.robust)
        status = RobustStatus.CERTIFIED if verdict.robust else RobustStatus.NOT_ROBUST
        return self._result(m, status, row, certificate, t0, details=details)
