"""The answers of the robust methods: statuses, the adversaries' verdicts, certificates.

Every answer is an :class:`~cfopt.results.counterfactual.Answer`: ``counterfactual`` (a
raw DataFrame row), ``changes()``, ``plot()``, ``to_dict()`` / ``to_json()``, ``status``,
``verified`` and a ``certificate``; reprs are short (no network weights).

* :class:`RobustStatus`, the outcome of a query on the cutting-set engine
  (:mod:`cfopt.methods.cutting_set`);
* :class:`RobustnessVerdict` (model shift Δ, PROPLACE) and :class:`KVerdict`
  (K-perturbations, Virgolin & Fracaros), what one adversary check proved;
* :class:`RobustnessCertificate` and :class:`RobustCounterfactual`, the answer of the
  model-shift methods (PROPLACE, MILP, MILP-R, RNCE);
* :class:`PerturbationRobustCounterfactual`, the answer of the C/K-robust method;
* :class:`CombinedRobustCounterfactual`, the answer of the method certified both
  Δ-robust and K-robust.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..models.network import Parameters
from .counterfactual import Answer, Counterfactual
from .serialize import json_value
from .status import Status

if TYPE_CHECKING:
    from ..space.space import FeatureSpace


class RobustStatus(str, Enum):
    """Outcome of a robust counterfactual query.

    The status says how the query ended; what is proven about the returned point is
    the answer's ``certified`` (its robustness, each notion at its own level: the Δ
    bound ≥ 0, the K bound above the tolerance) and ``optimal``.

    * ``CERTIFIED``: the loop's own stop: every adversary certified the last point at its
      threshold (PROPLACE and the combined method: the Δ bound ≥ σ - t, stricter
      than the answer's level 0; ≥ 0 when the loop decided below σ); the point is
      also optimal among the counterfactuals robust at the master's margin
      (``certificate.master_margin``: σ, σ - t or t/100) when the master proved it
      optimal (``optimal``).
    * ``NOT_ROBUST``: a verified counterfactual that is not robust (a concrete counterexample
      refutes it), or whose robustness could not be proven.
    * ``INFEASIBLE``: no robust counterfactual exists under the constraints at the level the
      message names (proven: the master became infeasible, or no robust data point
      spans the region). PROPLACE and the combined method: no point whose least
      margin over Δ is ≥ the master's margin (``certificate.master_margin``): the
      masters at σ and at σ - t were infeasible, and the loop decided again at t/100
      (σ - t when t/100 is not below it); a point robust by less is not excluded.
      MILP-R: none with its first margin.
    * ``ITERATION_LIMIT``: the loop's iteration cap was reached before its stop; the last
      point is returned, proven robust only if the answer says ``certified`` (its
      checks may prove it at level 0, below the loop's threshold) and never claimed
      optimal.
    * ``TIME_LIMIT``: the time limit was reached before the loop's stop; as for
      ``ITERATION_LIMIT``.
    * ``VERIFICATION_FAILED``: the solver's point fails the real model's check.
    * ``ERROR``: the solver failed.
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
    """The Δ-robustness of one model input: is the least margin of the target over Δ
    at least ``threshold``? (The signed logit of a binary network; the target's logit
    minus another class's, least over the other classes, of one with a logit per
    class.)

    Attributes:
        robust: True (proven: ``bound >= threshold``), False (refuted: a concrete model
            of Δ, checked by a numpy forward pass, has margin ``< threshold``) or None
            (unproven, e.g. a time limit).
        bound: proven lower bound of the least margin (the solvers' dual bounds, the
            LP relaxation's optimum, or the interval bound when the screen decided).
        value: margin of the worst concrete model found (an upper bound of the
            minimum), from a plain forward pass of ``parameters``.
        solver_value: the adversary MILP's incumbent objective (``None`` if the
            screen decided).
        method: ``"interval"`` (screen, certainly robust), ``"attack"`` (screen,
            certainly not), ``"lp"`` (the adversary's LP relaxation, certainly robust)
            or ``"milp"`` (the exact adversary).
        threshold: the level tested.
        parameters: the worst concrete model found, (W, b) per layer.
        shift: ``‖Θ - Θ⁰‖_∞`` of ``parameters`` (≤ δ).
        seconds: wall time of the check.
        solver_status: the adversary's solve status (``None`` for the screen).
        competitor: the class whose margin ``value`` (and ``parameters``) concern, for a
            network with a logit per class (``None`` for a binary one).
    """

    robust: bool | None
    bound: float | None
    value: float | None
    solver_value: float | None
    method: str
    threshold: float
    parameters: Parameters | None = field(default=None, repr=False)
    shift: float | None = None
    seconds: float = 0.0
    solver_status: str | None = None
    competitor: int | None = None

    def to_dict(self, include_parameters: bool = False) -> dict[str, Any]:
        out = {"robust": self.robust, "bound": json_value(self.bound),
               "value": json_value(self.value), "solver_value": json_value(self.solver_value),
               "method": self.method,
               "threshold": self.threshold, "shift": self.shift, "seconds": self.seconds,
               "solver_status": self.solver_status, "competitor": self.competitor}
        if include_parameters:
            out["parameters"] = _params_list(self.parameters)
        return out


@dataclass
class KVerdict:
    """What the K-adversary proved about one counterfactual.

    Attributes:
        robust: True (proven: the bound is above the tolerance), False (a verified
            counterexample in the K-neighbourhood), None (undecided: time limit, or the
            minimiser is not misclassified by the real model).
        bound: the proven lower bound of the target's margin over the K-neighbourhood
            (minimum over the other classes; ``None`` if the solver gave none).
        value: the margin at the minimiser found (an upper bound of the minimum).
        point: the minimiser (a raw row), the counterexample when ``robust`` is False.
        predicted: the real model's label of ``point``.
        status: the solver status of the weakest solve.
        time: wall time of the check (s).
    """

    robust: bool | None
    bound: float | None
    value: float | None
    point: pd.DataFrame | None
    predicted: Any
    status: Status
    time: float

    def to_dict(self) -> dict[str, Any]:
        return {"robust": self.robust, "bound": self.bound, "value": self.value,
                "point": None if self.point is None else self.point.iloc[0].to_dict(),
                "predicted": self.predicted, "status": self.status.value, "time": self.time}


@dataclass
class RobustnessCertificate:
    """The robustness claim of a counterfactual.

    Attributes:
        delta: the model shift's radius.
        robust: Δ-robust (True: the proven lower bound of the least margin is ≥ 0),
            refuted (False) or unproven (None).
        bound: that proven lower bound (``None`` when no check ran).
        threshold: the level the loop stopped at (σ - t for PROPLACE, 0 otherwise;
            0 too when PROPLACE decided below σ, see ``master_margin``).
        verdict: the final check (:class:`RobustnessVerdict`).
        iterations: master solves (PROPLACE), margin rounds (MILP-R), 1 otherwise.
        models: the shifted models collected by the cutting-set loop.
        times: seconds spent in the region, master solves, adversary checks.
        master_margin: the margin s the master asked of the model and of every shifted
            model (PROPLACE and the combined method; ``None`` for the others): the
            answer's ``optimal`` is among the points whose least margin over Δ is ≥ s
            (the master relaxes that set), and an ``infeasible`` status proves that none
            exists. It is σ; or σ - t when the master at σ was proven infeasible and the
            loop decided again at the certification level; or t/100 when the master at
            σ - t was infeasible too
            (:func:`~cfopt.methods.proplace_master.decide_below_sigma`).
    """

    delta: float
    robust: bool | None
    bound: float | None
    threshold: float
    verdict: RobustnessVerdict | None
    iterations: int = 0
    models: list = field(default_factory=list, repr=False)
    times: dict[str, float] = field(default_factory=dict)
    master_margin: float | None = None

    def to_dict(self, include_parameters: bool = False) -> dict[str, Any]:
        out = {"delta": self.delta, "robust": self.robust, "bound": json_value(self.bound),
               "threshold": self.threshold, "master_margin": self.master_margin,
               "iterations": self.iterations,
               "models_used": len(self.models), "times": dict(self.times),
               "verdict": self.verdict.to_dict(include_parameters) if self.verdict else None}
        if include_parameters:
            out["models"] = [_params_list(p) for p in self.models]
        return out


@dataclass(repr=False)
class RobustCounterfactual(Answer):
    """The answer of a model-shift robust method to one query.

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
        optimal: proven optimal among the counterfactuals whose least margin over Δ is
            at least the master's margin (``certificate.master_margin``: σ, or a lower
            level when no point is robust at σ): the loop stopped with ``CERTIFIED``
            and its last master solve proved its point optimal (the master relaxes that
            robust problem). A Δ-robust point of a smaller margin may cost less. ``False`` for
            every other status, whatever :attr:`certified` says, and for the methods
            without a master loop.
        total_time: wall seconds of the query (preprocessing paid by this query
            included, e.g. robustness screening of data rows).
        solver: the solver's name.
        message: diagnostics in words.
        details: method-specific numbers (region report, margins tried).
        factual_class: the real model's prediction on ``factual``.
        space: the feature space, for :meth:`plot`.
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
    factual_class: Any = None
    space: FeatureSpace | None = field(default=None, repr=False, compare=False)
    optimal: bool = False

    @property
    def found(self) -> bool:
        """A verified counterfactual is available."""
        return self.counterfactual is not None and self.verified

    @property
    def certified(self) -> bool:
        """A verified counterfactual with proven Δ-robustness (the certificate's bound
        ≥ 0), whatever the status: a loop cut short by a limit may return a point its
        last check proved robust at level 0 but not at the loop's threshold σ - t
        (status ``iteration_limit`` / ``time_limit``, :attr:`optimal` false)."""
        return self.found and self.certificate.robust is True

    def display_fields(self) -> dict[str, Any]:
        return {**super().display_fields(), "method": self.method,
                "certified": self.certified, "optimal": self.optimal, "bound": self.bound,
                "seconds": self.total_time}

    def to_dict(self, include_parameters: bool = False) -> dict[str, Any]:
        return {**self.answer_fields(), "method": self.method, "certified": self.certified,
                "optimal": self.optimal, "bound": json_value(self.bound),
                "distances": {k: json_value(v) for k, v in self.distances.items()},
                "certificate": self.certificate.to_dict(include_parameters),
                "total_time": self.total_time, "solver": self.solver, "message": self.message,
                "details": {k: json_value(v) for k, v in self.details.items()}}


@dataclass(repr=False)
class CombinedRobustCounterfactual(RobustCounterfactual):
    """The answer of :class:`~cfopt.methods.combined.CombinedRobustExplainer` to one
    query: a :class:`RobustCounterfactual` whose ``certificate`` is the Δ (model shift)
    claim, with the K-adversary's.

    Attributes (besides :class:`RobustCounterfactual`'s):
        k_verdict: the K-adversary's last verdict on the answer's point (``None`` when no
            K-check ran).
        scenarios: the K-perturbation scenarios the master had to satisfy.
        setback_cost: the cost of undoing the maximal C-setback of the answer (raw).
    """

    k_verdict: KVerdict | None = None
    scenarios: list[dict[str, Any]] = field(default_factory=list)
    setback_cost: float | None = None

    @property
    def certified(self) -> bool:
        """A verified counterfactual with proven Δ-robustness *and* K-robustness (the Δ
        bound ≥ 0, the K bound above the tolerance), whatever the status (see
        :attr:`RobustCounterfactual.certified`)."""
        return (super().certified and self.k_verdict is not None
                and self.k_verdict.robust is True)

    def to_dict(self, include_parameters: bool = False) -> dict[str, Any]:
        return {**super().to_dict(include_parameters),
                "k_verdict": None if self.k_verdict is None else self.k_verdict.to_dict(),
                "scenarios": [{k: json_value(v) for k, v in s.items()} for s in self.scenarios],
                "setback_cost": json_value(self.setback_cost)}


@dataclass(repr=False)
class PerturbationRobustCounterfactual(Answer):
    """The answer of :class:`~cfopt.methods.k_robust.PerturbationRobustExplainer` to one
    query.

    Attributes:
        robustness: what was sought (``"none"``, ``"C"``, ``"K"``, ``"CK"``).
        status: ``CERTIFIED`` (verified, and K-robustness proven when sought),
            ``NOT_ROBUST`` (verified; the K-adversary found no proof: see
            ``k_verdict``), ``INFEASIBLE`` (proven: no counterfactual meets the
            constraints and the collected scenarios), ``ITERATION_LIMIT``,
            ``TIME_LIMIT``, ``VERIFICATION_FAILED``, ``ERROR``.
        answer: the last master answer (a :class:`~cfopt.Counterfactual`; its raw row is
            :attr:`counterfactual`).
        k_verdict: the K-adversary's last verdict on it (``None`` unless K was sought),
            also :attr:`certificate`.
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
    answer: Counterfactual
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
        return self.answer.found

    @property
    def certified(self) -> bool:
        """A verified counterfactual with the loop's certificate (status ``CERTIFIED``:
        the K-adversary's proven bound above the tolerance, when K is sought). The
        K-adversary certifies at the answer's own level, so a point the loop did not
        certify is not proven K-robust."""
        return self.found and self.status is RobustStatus.CERTIFIED

    @property
    def factual(self) -> pd.DataFrame:
        return self.answer.factual

    @property
    def counterfactual(self) -> pd.DataFrame | None:
        """The counterfactual's raw row (``None`` when none was verified)."""
        return self.answer.counterfactual if self.found else None

    @property
    def target(self) -> tuple:
        return self.answer.target

    @property
    def factual_class(self) -> Any:
        return self.answer.factual_class

    @property
    def predicted_class(self) -> Any:
        return self.answer.predicted_class

    @property
    def verified(self) -> bool:
        return self.answer.verified

    @property
    def objective(self) -> float | None:
        return self.answer.objective

    @property
    def bound(self) -> float | None:
        return self.answer.bound

    @property
    def space(self) -> FeatureSpace | None:
        return self.answer.space

    @property
    def certificate(self) -> KVerdict | None:
        """The K-adversary's verdict (``None`` unless K-robustness was sought)."""
        return self.k_verdict

    def display_fields(self) -> dict[str, Any]:
        return {**super().display_fields(), "robustness": self.robustness,
                "certified": self.certified, "optimal": self.optimal, "bound": self.bound,
                "iterations": self.iterations, "seconds": self.total_time}

    def to_dict(self) -> dict[str, Any]:
        return {**self.answer_fields(), "robustness": self.robustness,
                "certified": self.certified, "optimal": self.optimal,
                "bound": json_value(self.bound),
                "k_verdict": None if self.k_verdict is None else self.k_verdict.to_dict(),
                "iterations": self.iterations,
                "scenarios": [{k: json_value(v) for k, v in s.items()} for s in self.scenarios],
                "setback_cost": json_value(self.setback_cost), "total_time": self.total_time,
                "adversary_time": self.adversary_time, "message": self.message}
