"""Result objects: a :class:`Counterfactual` per query, serializable to JSON."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

import pandas as pd

from .display import card, tone, value_text
from .serialize import json_value, row_changes, row_dict, row_frame
from .status import Status

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..space.space import FeatureSpace


class Answer(ABC):
    """What every answer shares (plain, set, model-shift robust, perturbation robust):
    ``changes()``, ``plot()``, ``to_json()`` and a short repr.

    A subclass has ``factual`` and ``counterfactual`` (one-row raw DataFrames, the latter
    ``None`` when nothing verified was found), ``status``, ``verified``, ``objective``,
    ``target``, ``factual_class``, ``predicted_class``, ``message`` and ``space`` (for
    the plot), and its own ``to_dict``.
    """

    factual: pd.DataFrame
    counterfactual: pd.DataFrame | None
    status: Enum
    target: tuple
    factual_class: Any
    predicted_class: Any
    verified: bool
    objective: float | None
    message: str
    space: FeatureSpace | None

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The answer as JSON-safe values."""

    def changes(self) -> pd.DataFrame:
        """Only the changed features: columns ``from`` and ``to`` (raw units, labels)."""
        return row_changes(self.factual, self.counterfactual)

    def answer_fields(self) -> dict[str, Any]:
        """The JSON-safe fields every answer's :meth:`to_dict` starts with."""
        return {
            "status": self.status.value,
            "verified": self.verified,
            "factual": row_dict(self.factual),
            "counterfactual": row_dict(self.counterfactual),
            "changes": {k: {"from": json_value(v["from"]), "to": json_value(v["to"])}
                        for k, v in self.changes().iterrows()},
            "target": [json_value(t) for t in self.target],
            "factual_class": json_value(self.factual_class),
            "predicted_class": json_value(self.predicted_class),
            "objective": json_value(self.objective),
        }

    def plot(self, *, space: FeatureSpace | None = None, features: Any = "changed",
             ax: Axes | None = None) -> Axes:
        """The change chart: features by row, factual → counterfactual within each
        feature's range, in raw units and labels (:func:`cfopt.plots.plot_changes`)."""
        from ..plots import plot_changes

        return plot_changes(self, space=space, features=features, ax=ax)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **{"indent": 2, **kwargs})

    def display_fields(self) -> dict[str, Any]:
        """The figures of the notebook card (:meth:`_repr_html_`)."""
        return {"verified": self.verified, "objective": self.objective,
                "target": ", ".join(map(str, self.target)),
                "prediction": f"{value_text(self.factual_class)} → "
                              f"{value_text(self.predicted_class)}"}

    def display_tables(self) -> list[tuple[str, pd.DataFrame]]:
        """The titled frames of the notebook card."""
        return [("changes (raw units)", self.changes())]

    def _repr_html_(self) -> str:
        """A card for notebooks: the status (green: a verified point proven optimal or
        certified; amber: a verified point without that proof; red: no point), the
        figures, the changes and the message (:mod:`cfopt.results.display`)."""
        found = self.counterfactual is not None and self.verified
        proven = self.status.value in ("optimal", "certified")
        return card(type(self).__name__, self.status.value, tone(found, proven),
                    self.display_fields(), self.display_tables(), self.message)

    def __repr__(self) -> str:
        head = (f"{type(self).__name__}(status={self.status.value}, verified={self.verified}, "
                f"objective={self.objective}, target={list(self.target)})")
        if self.counterfactual is None:
            return head
        return f"{head}\n{self.changes().to_string()}"


@dataclass(repr=False)
class Counterfactual(Answer):
    """The answer to one counterfactual query.

    Attributes:
        factual: the query as a one-row DataFrame (raw units, category labels).
        counterfactual: the counterfactual as a one-row DataFrame, or ``None`` when
            none was found or it could not be verified.
        target: the target class labels.
        factual_class: the real model's prediction on the factual.
        predicted_class: the real model's prediction on the counterfactual.
        status: see :class:`~cfopt.Status`.
        verified: the real model classifies ``counterfactual`` (exactly as returned)
            as a target class, and it satisfies every declared constraint.
        objective: the objective value of the returned point, computed from its raw
            values (the solver's own value is in ``details["solver_objective"]``).
        bound: a proven lower bound on the optimal objective of the declared problem
            (from the first solve; never above ``objective``).
        distances: L1 (weighted), L0 and L∞ (weighted) of the returned point, in raw
            units, computed from the returned values.
        build_time: seconds to build the model (0 when an existing model was reused)
            plus setting the query's parameters.
        solve_time: wall seconds of the solver calls (incl. Pyomo's hand-over).
        solver_time: the solver's own reported seconds.
        total_time: wall seconds of the whole query.
        solver: the solver's name.
        margin: the validity margin (logit units) of the last solve.
        attempts: solves made (more than 1 when verification required a larger margin).
        message: diagnostics in words.
        details: solve details: ``reason`` (why less than optimality was proven, one of
            :data:`cfopt.query.claims.REASONS`), ``raw_constraints`` and
            ``raw_objective_term`` (what was added to the model directly, checked),
            ``heuristic_objective`` (an admitted heuristic point's), ``heuristic_guess``
            (the distance of one that broke a rule) or ``heuristic`` ("none found"),
            ``ascent`` (the radii climbed: radius, status, seconds), restricted /
            fallback solve, tree leaves built, stable neurons of the restricted solve.
        space: the feature space of the query (for :meth:`plot`; not serialized).
    """

    factual: pd.DataFrame
    counterfactual: pd.DataFrame | None
    target: tuple
    factual_class: Any
    predicted_class: Any
    status: Status
    verified: bool
    objective: float | None
    bound: float | None
    distances: dict[str, float] = field(default_factory=dict)
    build_time: float = 0.0
    solve_time: float = 0.0
    solver_time: float | None = None
    total_time: float = 0.0
    solver: str = ""
    margin: float = 0.0
    attempts: int = 0
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    space: FeatureSpace | None = field(default=None, repr=False, compare=False)

    @property
    def found(self) -> bool:
        """A verified counterfactual is available."""
        return self.counterfactual is not None and self.verified

    @property
    def closest(self) -> Counterfactual:
        """This counterfactual (as a set's :attr:`CounterfactualSet.closest` member)."""
        return self

    @property
    def optimal(self) -> bool:
        """Proven optimal (within the MIP gap) and verified."""
        return self.found and self.status is Status.OPTIMAL

    @property
    def gap(self) -> float | None:
        """Relative gap between objective and proven bound."""
        if self.objective is None or self.bound is None:
            return None
        return abs(self.objective - self.bound) / max(abs(self.objective), 1e-10)

    def display_fields(self) -> dict[str, Any]:
        return {**super().display_fields(), "bound": self.bound, "gap": self.gap,
                "seconds": self.total_time, "solver": self.solver}

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.answer_fields(),
            "bound": json_value(self.bound),
            "gap": json_value(self.gap),
            "distances": {k: json_value(v) for k, v in self.distances.items()},
            "build_time": self.build_time,
            "solve_time": self.solve_time,
            "solver_time": json_value(self.solver_time),
            "total_time": self.total_time,
            "solver": self.solver,
            "margin": self.margin,
            "attempts": self.attempts,
            "message": self.message,
            "details": {k: json_value(v) for k, v in self.details.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *,
                  space: FeatureSpace | None = None) -> Counterfactual:
        """The answer :meth:`to_dict` describes (e.g. read back from JSON).

        The factual and the counterfactual become one-row DataFrames again (pandas
        infers their dtypes from the JSON values); ``changes`` and ``gap`` are derived,
        so their entries are not read. ``space`` is attached for :meth:`plot` (it is
        not serialized).

        Raises:
            ValueError: ``data`` is not a serialized counterfactual (a key is missing or
                the status is unknown).
        """
        try:
            return cls(
                factual=row_frame(data["factual"]),
                counterfactual=row_frame(data["counterfactual"]),
                target=tuple(data["target"]), factual_class=data["factual_class"],
                predicted_class=data["predicted_class"], status=Status(data["status"]),
                verified=bool(data["verified"]), objective=data["objective"],
                bound=data["bound"], distances=dict(data["distances"]),
                build_time=data["build_time"], solve_time=data["solve_time"],
                solver_time=data["solver_time"], total_time=data["total_time"],
                solver=data["solver"], margin=data["margin"], attempts=data["attempts"],
                message=data["message"], details=dict(data["details"]), space=space)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a serialized Counterfactual: {exc!r}") from exc

@dataclass(repr=False)
class CounterfactualSet(Answer):
    """A set of counterfactuals of one query (:func:`cfopt.query.diverse.explain_diverse`).

    Attributes:
        members: the verified counterfactuals, in the order found (each a
            :class:`Counterfactual` with its own status, objective and bound).
        method: ``"nogood"``, ``"distance"``, ``"epsilon"`` or ``"pool"``.
        requested: how many were asked for.
        status: the status of the query's first, unrestricted solve (the closest
            member's, or why none was found).
        cfd: the exact counterfactual distance (Leofante & Potyka Def. 1): the proven
            optimal objective of the unrestricted query, or ``None`` when the first
            solve was not proven optimal.
        epsilon: the relative slack of ``"epsilon"`` enumeration (members cost at most
            (1 + ε)·cfd), else ``None``.
        stopped: why the search ended (``"complete"`` when ``requested`` were found).
        total_time: wall seconds of the whole query.
        details: method settings (minimum distance, Hamming distance, pool options).
    """

    factual: pd.DataFrame
    target: tuple
    members: list[Counterfactual]
    method: str
    requested: int
    status: Status
    cfd: float | None = None
    epsilon: float | None = None
    stopped: str = ""
    total_time: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.members)

    def __iter__(self):
        return iter(self.members)

    def __getitem__(self, i: int) -> Counterfactual:
        return self.members[i]

    @property
    def counterfactual(self) -> pd.DataFrame | None:
        """The closest member's raw row (the answer without ``n``), ``None`` if none."""
        return self.members[0].counterfactual if self.members else None

    @property
    def verified(self) -> bool:
        """At least one member, and the real model verified every one."""
        return bool(self.members) and all(c.verified for c in self.members)

    @property
    def objective(self) -> float | None:
        """The closest member's objective."""
        return self.members[0].objective if self.members else None

    @property
    def message(self) -> str:
        return self.stopped

    @property
    def space(self) -> FeatureSpace | None:
        return self.members[0].space if self.members else None

    @property
    def found(self) -> bool:
        """At least one member, every one verified (as :attr:`verified`)."""
        return self.verified

    @property
    def optimal(self) -> bool:
        """The closest member is proven optimal (``status`` is its query's) and every
        member verified."""
        return self.verified and self.status is Status.OPTIMAL

    @property
    def closest(self) -> Counterfactual | None:
        """The closest member (the answer without ``n``), ``None`` without one."""
        return self.members[0] if self.members else None

    @property
    def bound(self) -> float | None:
        """The closest member's proven bound (a bound on every member's cost)."""
        return self.members[0].bound if self.members else None

    @property
    def solver_time(self) -> float | None:
        """The solver's own seconds over the members' solves (``None`` if unknown)."""
        times = [c.solver_time for c in self.members]
        return None if not times or None in times else float(sum(times))

    @property
    def factual_class(self) -> Any:
        return self.members[0].factual_class if self.members else None

    @property
    def predicted_class(self) -> Any:
        """The closest member's class."""
        return self.members[0].predicted_class if self.members else None

    def changes(self) -> pd.DataFrame:
        """Every member's changed features: index (member, feature), columns ``from``
        and ``to`` (raw units, labels)."""
        frames = {k: c.changes() for k, c in enumerate(self.members)}
        if not frames:
            return pd.DataFrame(columns=["from", "to"])
        return pd.concat(frames, names=["member", "feature"])

    @property
    def counterfactuals(self) -> pd.DataFrame:
        """The members' raw rows, one per counterfactual (original names, labels)."""
        if not self.members:
            return pd.DataFrame(columns=self.factual.columns)
        return pd.concat([c.counterfactual for c in self.members], ignore_index=True)

    @property
    def costs(self) -> list[float]:
        """Each member's objective value (computed from its raw values)."""
        return [float(c.objective) for c in self.members]

    @property
    def excess(self) -> list[float | None]:
        """Each member's cost above ``cfd`` (0 for a strong counterfactual, Def. 2)."""
        if self.cfd is None:
            return [None] * len(self.members)
        return [max(0.0, c - self.cfd) for c in self.costs]

    @property
    def strong(self) -> list[bool | None]:
        """Whether each member is a strong counterfactual: cost = cfd (within 1e-6)."""
        return [None if e is None else e <= 1e-6 * max(1.0, self.cfd) for e in self.excess]

    @property
    def safety(self) -> list[float | None]:
        """δ-safety of each member (Leofante & Potyka Def. 5, Prop. 2):
        δ = cfd + ε·cfd − cost ≥ 0 — the member stays an ε-approximate answer for
        every input within δ/2 of the factual. ``"epsilon"`` sets only."""
        if self.cfd is None or self.epsilon is None:
            return [None] * len(self.members)
        return [self.cfd * (1 + self.epsilon) - c for c in self.costs]

    def display_fields(self) -> dict[str, Any]:
        return {"verified": self.verified, "objective": self.objective,
                "target": ", ".join(map(str, self.target)), "method": self.method,
                "found": f"{len(self.members)} of {self.requested}", "cfd": self.cfd}

    def display_tables(self) -> list[tuple[str, pd.DataFrame]]:
        members = self.counterfactuals
        if len(members):
            members.insert(0, "cost", self.costs)
        return [("factual", self.factual), ("members (raw units)", members)]

    def plot(self, *, space: FeatureSpace | None = None, features: Any = "changed",
             ax: Axes | None = None) -> Axes:
        """The set as a grid, features by members, each cell the member's raw value
        coloured by its move (:func:`cfopt.plots.plot_set`)."""
        from ..plots import plot_set

        return plot_set(self, space=space, features=features, ax=ax)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "verified": self.verified,
            "method": self.method,
            "requested": self.requested,
            "found": len(self.members),
            "stopped": self.stopped,
            "factual": row_dict(self.factual),
            "target": [json_value(t) for t in self.target],
            "cfd": json_value(self.cfd),
            "epsilon": json_value(self.epsilon),
            "excess": [json_value(e) for e in self.excess],
            "strong": self.strong,
            "safety": [json_value(d) for d in self.safety],
            "total_time": self.total_time,
            "details": {k: json_value(v) for k, v in self.details.items()},
            "members": [c.to_dict() for c in self.members],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *,
                  space: FeatureSpace | None = None) -> CounterfactualSet:
        """The set :meth:`to_dict` describes (its members by
        :meth:`Counterfactual.from_dict`; ``excess``, ``strong`` and ``safety`` are
        derived, not read).

        Raises:
            ValueError: ``data`` is not a serialized set.
        """
        try:
            return cls(
                factual=row_frame(data["factual"]), target=tuple(data["target"]),
                members=[Counterfactual.from_dict(c, space=space) for c in data["members"]],
                method=data["method"], requested=data["requested"],
                status=Status(data["status"]), cfd=data["cfd"], epsilon=data["epsilon"],
                stopped=data["stopped"], total_time=data["total_time"],
                details=dict(data["details"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a serialized CounterfactualSet: {exc!r}") from exc

    def __repr__(self) -> str:
        head = (f"CounterfactualSet(status={self.status.value}, method={self.method!r}, "
                f"found={len(self.members)}/"
                f"{self.requested}, cfd={self.cfd}, stopped={self.stopped!r})")
        if not self.members:
            return head
        return f"{head}\n{self.counterfactuals.to_string()}"


def answer_from_dict(data: Mapping[str, Any], *,
                     space: FeatureSpace | None = None) -> Counterfactual | CounterfactualSet:
    """A :class:`CounterfactualSet` (``data`` has ``members``) or a
    :class:`Counterfactual` read back from its :meth:`to_dict`."""
    kind = CounterfactualSet if "members" in data else Counterfactual
    return kind.from_dict(data, space=space)
