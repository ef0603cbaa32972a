"""What the model-shift robust methods share (PROPLACE, MILP, MILP-R, RNCE): option
checks, the solver settings and the query deadline, and the answer, re-checked by the
real model and every declared constraint."""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, cast

import numpy as np
import pandas as pd
from pyomo.common.gc_manager import PauseGC

from ..formulations.robustness import check_delta, robust_network
from ..problem import CounterfactualModel
from ..progress import progress_bar
from ..query.restrictions.relu import objective_value
from ..query.restrictions.trees import BOX_TOLERANCE, query_box, query_input_box  # noqa: F401
from ..query.solution import failed_checks
from ..results.robust import (
    RobustCounterfactual,
    RobustnessCertificate,
    RobustnessVerdict,
    RobustStatus,
)
from ..results.serialize import json_value
from ..solvers import SolverBackend, SolverSettings, make_solver
from ..space.space import FeatureSpace
from ..space.validate import as_frame
from .cutting_set import Deadline

#: a method's ``explain``
ExplainFunction = TypeVar("ExplainFunction", bound=Callable[..., Any])



def check_positive(name: str, value: Any) -> float:
    """``value`` as a float; ``ValueError`` naming the option unless positive, finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def check_count(name: str, value: Any) -> int:
    """``value`` as an int; ``ValueError`` naming the option unless a positive integer."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def gc_paused(explain: ExplainFunction) -> ExplainFunction:
    """A method's ``explain`` run with Python's automatic garbage collection paused
    (Pyomo's ``PauseGC``, as Pyomo's own model writers do), resumed as it was when the
    query ends, even by an error. A robust query builds and drops Pyomo components at
    every cut, and their allocations trigger collections whose full passes walk every
    object of the process, the models and the data included: on PROPLACE's 50 Adult
    queries of Table 1, three full collections took 0.6 of 6 s. Pyomo components refer
    to their parents weakly, so what a query drops is freed as it goes by reference
    counting; only cyclic garbage waits for the query's end."""

    @functools.wraps(explain)
    def paused(*args: Any, **kwargs: Any) -> Any:
        with PauseGC():
            return explain(*args, **kwargs)

    return cast(ExplainFunction, paused)  # pragma: no mutate (cast is a no-op at run time)


def check_switch(name: str, value: Any) -> bool:
    """``value`` as a bool; ``TypeError`` naming the option unless ``True`` or ``False``
    (a speed lever's switch)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def check_sigma_tolerance(sigma: Any, tolerance: Any) -> tuple[float, float]:
    """PROPLACE's master margin σ and stopping tolerance t as floats; ``ValueError``
    naming the option unless σ > t > 0 (Prop. 2: the loop converges)."""
    sigma, tolerance = check_positive("sigma", sigma), check_positive("tolerance", tolerance)
    if not tolerance < sigma:
        raise ValueError(f"tolerance must be below sigma (σ > t > 0 for convergence), got "
                         f"sigma={sigma!r}, tolerance={tolerance!r}")
    return sigma, tolerance


def target_index(m: CounterfactualModel) -> int:
    """The class index of the query's one target class (binary: 1 is the logit > 0);
    ``ValueError`` for a set of targets (Δ-robustness keeps one class)."""
    if len(m.target) != 1:
        raise ValueError(f"Δ-robustness keeps one class; give a single target class, got "
                         f"{list(m.target)}")
    return m.adapter.class_index(m.target[0])


def finish_certificate(certificate: RobustnessCertificate, verdict: RobustnessVerdict) -> None:
    """The Δ claim at level 0 from the loop's final check (robust: proven bound ≥ 0;
    refuted: a concrete shifted model's margin < 0)."""
    certificate.verdict = verdict
    certificate.bound = verdict.bound
    if verdict.bound is not None and verdict.bound >= 0:
        certificate.robust = True
    elif verdict.value is not None and verdict.value < 0:
        certificate.robust = False


def require_space_encoding(m: CounterfactualModel) -> None:
    """``ValueError`` unless the network consumes ``space.transform(X)`` directly."""
    if not m.uses_space_encoding:
        raise ValueError("robust counterfactuals need a network that consumes "
                         "space.transform(X) (not a Pipeline with its own preprocessing)")


class RobustMethod(ABC):
    """Shared parts of the model-shift methods: δ, the solver and its settings, the
    query deadline, the verified result, batches.

    Attributes:
        method: the method's name in its answers.
        result_type: the class of its answers.
    """

    method = ""
    result_type: type[RobustCounterfactual] = RobustCounterfactual

    def __init__(self, model: Any, space: FeatureSpace, *, delta: float,
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

    def lighten_heuristics(self, light: Any) -> bool:
        """The ``light_heuristics`` switch: when on, the method's solves (every master;
        a K-adversary given the method's settings too) run with only the solver's cheap
        primal heuristics (:meth:`SolverBackend.light_heuristics
        <cfopt.solvers.SolverBackend.light_heuristics>`), any of those options set in
        ``solver_options`` winning. Heuristics only propose incumbents, so what a solve
        proves is the same either way."""
        light = check_switch("light_heuristics", light)
        if light:
            self.settings = dataclasses.replace(self.settings, options={
                **self.backend.light_heuristics(), **self.settings.options})
        return light

    def master_box(self, m: CounterfactualModel, region: tuple[np.ndarray, np.ndarray] | None,
                   query_bounds: bool, hull: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
        """The box of the master's model inputs at this query, to which the master's
        layer bounds are set (interval bounds within its global ones; the caller restores
        ``m.global_layer_bounds``): with ``query_bounds``, :func:`query_input_box`
        (actionability ∩ ``region``), the first layer's bounds also within their values
        at the points ``hull`` when given (the master's inputs lie in their convex hull,
        e.g. the plausible region's); else ``region`` (e.g. the plausible region's
        box), or the whole input box without one (the global bounds kept)."""
        pred = m.predictor_constr
        if query_bounds:
            box = query_input_box(m, region)
        elif region is None:
            return tuple(np.array(side, dtype=float)  # pragma: no mutate (bounds are floats)
                         for side in zip(*pred.input_bounds))
        else:
            box, hull = region, None
        pred.set_layer_bounds(pred.adapter.structure.box_bounds(
            *box, within=m.global_layer_bounds, hull=hull))
        return box

    def deadline(self, t0: float) -> Deadline:
        """The deadline of a query started at ``t0`` (the method's ``time_limit``)."""
        return Deadline(self.settings, t0)

    def iteration_bar(self, total: int, description: str, progress: bool | None) -> Any:
        """A tqdm bar over one query's iterations (closed by the caller)."""
        return progress_bar(total, description, progress, leave=False)

    def _result(self, m: CounterfactualModel, status: RobustStatus, row: pd.DataFrame | None,
                certificate: RobustnessCertificate, t0: float, *, bound: float | None = None,
                message: str = "", details: dict[str, Any] | None = None,
                one_off: float = 0.0, optimal: bool = False, **extra: Any
                ) -> RobustCounterfactual:
        """The result (a :attr:`result_type`, with the fields ``extra`` of its own), with
        ``row`` re-checked by the real model and every declared constraint (a failure
        drops the point: VERIFICATION_FAILED). ``optimal``: the loop stopped and its
        master proved optimality (:attr:`LoopResult.optimal
        <cfopt.methods.cutting_set.LoopResult.optimal>`); claimed only with the final
        status ``CERTIFIED``."""
        verified, predicted = False, None
        if row is not None:
            predicted = m.classify(row)[0]
            problems = m.violations(row)
            verified = m.is_target(predicted) and not problems
            if not verified:
                message = (f"the point failed verification: "
                           f"{failed_checks(m, predicted, problems)}; no counterfactual "
                           f"returned")
                status, row = RobustStatus.VERIFICATION_FAILED, None
        return self.result_type(
            method=self.method, status=status, factual=m.factual, counterfactual=row,
            target=m.target, predicted_class=predicted if verified else None,
            verified=verified, objective=objective_value(m, row) if verified else None,
            bound=bound, distances=m.distances(row) if verified else {},
            certificate=certificate, total_time=time.perf_counter() - t0 + one_off,
            solver=self.backend.name, message=message, details=details or {},
            factual_class=m.factual_class, space=m.space,
            optimal=optimal and status is RobustStatus.CERTIFIED, **extra)

    def explain_many(self, X: pd.DataFrame, target: Any = None, *,
                     errors: Literal["raise", "record"] = "record",
                     progress: bool | None = None) -> list[RobustCounterfactual]:
        """:meth:`explain` for every row of ``X``. A row whose query fails (a bad value, a
        solver failure such as a size-limited licence refusing a master grown by its
        cuts) gets the status ``ERROR`` with the error as its message, and the batch
        goes on (``errors="raise"``: the error is raised, naming the row's index label);
        Ctrl-C ends the batch. ``progress``: a tqdm bar (``None``: ``CFOPT_PROGRESS`` if
        set, else only when stderr is a terminal or in a notebook)."""
        if errors not in ("raise", "record"):
            raise ValueError(f"errors must be 'raise' or 'record', got {errors!r}")
        frame = as_frame(X)
        out = []
        with progress_bar(len(frame), f"{self.method} counterfactuals", progress) as bar:
            for i in range(len(frame)):
                out.append(self._answer(frame.iloc[[i]], target, errors))
                bar.update(1)
        return out

    def _answer(self, row: pd.DataFrame, target: Any, errors: str) -> RobustCounterfactual:
        """One row of :meth:`explain_many`: its answer, or its failure as its status."""
        label = json_value(row.index[0])
        t0 = time.perf_counter()
        try:
            return self.explain(row, target)
        except Exception as exc:  # the row's own failure (the method cleans up its cuts)
            if errors == "raise":
                exc.add_note(f"in explain_many, row {label!r} of X")
                raise
            return self.result_type(
                method=self.method, status=RobustStatus.ERROR,
                factual=self.space.validate_or_keep(row).reset_index(drop=True),
                counterfactual=None, target=(),
                predicted_class=None, verified=False, objective=None, bound=None,
                distances={}, certificate=RobustnessCertificate(self.delta, None, None, 0.0,
                                                                None),
                total_time=time.perf_counter() - t0, solver=self.backend.name,
                message=f"row {label!r}: {type(exc).__name__}: {exc}", space=self.space)

    @abstractmethod
    def explain(self, x: pd.DataFrame | pd.Series | Mapping,
                target: Any = None) -> RobustCounterfactual:
        """The method's counterfactual of one raw row ``x``."""
