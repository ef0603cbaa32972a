r"""DiCE's per-query choices, ``features_to_vary`` and ``permitted_range``, as bounds on
the model already built (issue 40).

One query may narrow, for itself alone, what the declared space allows:

* ``features_to_vary=[...]``: every feature not listed keeps the factual's value;
* ``permitted_range={feature: ...}``: the counterfactual's value lies in a range:
  ``(low, high)`` in raw units for a continuous or integer feature (``None``: that side
  open), a list of labels for a categorical, ordinal or labelled binary one (for an
  ordinal, a run of consecutive levels).

They are one declared block, :class:`QueryRange` (``m.query_range``), added to the model
at the first query that uses them and kept: per numeric feature the rows
:math:`(x_f - \ell^q_f)/w_f \ge 0` and :math:`(u^q_f - x_f)/w_f \ge 0` (divided by the
feature's width :math:`w_f`, as in :mod:`cfopt.formulations.distances`), per level of a
categorical feature :math:`\text{onehot}_{f,l} \le a^q_{f,l}`, where
:math:`\ell^q, u^q, a^q` are mutable Params set by :meth:`QueryRange.update` for every
query; a query without the options sets each feature's own bounds and every level
allowed, so the rows are slack. As every declared block, it is one group of the
infeasibility diagnosis and every returned point (a heuristic one included) passes its
:meth:`~QueryRange.violations`, so the statuses keep their meaning: ``optimal`` is
proven for the query as narrowed; decoding puts the solver's point inside the query's
ranges (:meth:`~QueryRange.feature_intervals`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyomo.environ as pyo

from ..formulations.features import width
from ..space.feature import Feature
from ..space.space import FeatureSpace
from .blocks import ConstraintBlock

if TYPE_CHECKING:
    from ..problem import CounterfactualModel

#: the query options this module reads
OPTIONS = ("features_to_vary", "permitted_range")


@dataclass(frozen=True)
class QueryRequest:
    """One query's narrowing, validated against the space: the features that may vary
    (``None``: every mutable one), and per feature the permitted codes (numeric:
    ``(low, high)``) or labels (categorical)."""

    vary: frozenset[str] | None = None
    codes: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    levels: Mapping[str, frozenset[Any]] = field(default_factory=dict)

    @property
    def narrows(self) -> bool:
        """Whether the query narrows the declared space at all."""
        return self.vary is not None or bool(self.codes) or bool(self.levels)

    def code_range(self, f: Feature, x0: float) -> tuple[float, float]:
        """The codes numeric feature ``f`` may take in this query (factual code ``x0``)."""
        if self.vary is not None and f.name not in self.vary:
            return x0, x0
        return self.codes.get(f.name, (f.lower, f.upper))

    def allowed(self, f: Feature, level0: Any) -> frozenset[Any]:
        """The levels categorical feature ``f`` may take (factual level ``level0``)."""
        if self.vary is not None and f.name not in self.vary:
            return frozenset([level0])
        return self.levels.get(f.name, frozenset(f.categories))


def query_request(space: FeatureSpace, features_to_vary: Sequence[str] | None = None,
                  permitted_range: Mapping[str, Any] | None = None) -> QueryRequest:
    """The validated :class:`QueryRequest`; ``ValueError`` / ``TypeError`` naming the
    option and the feature at fault (before any solve)."""
    vary = None
    if features_to_vary is not None:
        if isinstance(features_to_vary, str) or not isinstance(
                features_to_vary, (Sequence, set, frozenset)):
            raise TypeError(f"features_to_vary must be a list of feature names, got "
                            f"{features_to_vary!r}")
        _known(space, features_to_vary, "features_to_vary")
        fixed = sorted((n for n in features_to_vary if space[n].immutable), key=str)
        if fixed:
            raise ValueError(f"features_to_vary names {fixed}, which the feature space "
                             f"declares immutable")
        vary = frozenset(features_to_vary)
    if permitted_range is None:
        return QueryRequest(vary)
    if not isinstance(permitted_range, Mapping):
        raise TypeError(f"permitted_range must be a mapping feature -> range, got "
                        f"{type(permitted_range).__name__}")
    _known(space, list(permitted_range), "permitted_range")
    codes, levels = {}, {}
    for name, given in permitted_range.items():
        f = space[name]
        if f.is_onehot:
            levels[name] = frozenset(_labels(f, given))
        elif f.labelled:
            steps = sorted(f.to_code(v) for v in _labels(f, given))
            if steps[-1] - steps[0] != len(steps) - 1:
                raise ValueError(f"permitted_range[{name!r}]: the levels of an ordinal "
                                 f"feature must be consecutive, got {list(given)}")
            codes[name] = (steps[0], steps[-1])
        else:
            codes[name] = _interval(f, given)
    return QueryRequest(vary, codes, levels)


def _known(space: FeatureSpace, names: Sequence[Any], option: str) -> None:
    unknown = [n for n in names if n not in space.names]
    if unknown:
        raise ValueError(f"{option}: unknown feature(s) {unknown}; the feature space has "
                         f"{space.names}")


def _labels(f: Feature, given: Any) -> list[Any]:
    if isinstance(given, str) or not isinstance(given, (Sequence, set, frozenset)) or \
            not len(given):
        raise ValueError(f"permitted_range[{f.name!r}]: give a non-empty list of its "
                         f"levels {list(f.categories)}, got {given!r}")
    unknown = [v for v in given if v not in f.categories]
    if unknown:
        raise ValueError(f"permitted_range[{f.name!r}]: unknown level(s) {unknown}; its "
                         f"levels are {list(f.categories)}")
    return list(given)


def _interval(f: Feature, given: Any) -> tuple[float, float]:
    if isinstance(given, str) or not isinstance(given, Sequence) or len(given) != 2:
        raise ValueError(f"permitted_range[{f.name!r}]: give (low, high) in raw units "
                         f"(None: open), got {given!r}")
    ends = []
    for end, default in zip(given, (f.lower, f.upper)):
        if end is None:
            ends.append(default)
        elif isinstance(end, bool) or not isinstance(end, Real) or not math.isfinite(end):
            raise ValueError(f"permitted_range[{f.name!r}]: ends must be finite numbers "
                             f"or None, got {given!r}")
        else:
            ends.append(float(end))
    low, high = max(ends[0], f.lower), min(ends[1], f.upper)
    if low > high:
        raise ValueError(f"permitted_range[{f.name!r}]: ({given[0]}, {given[1]}) leaves "
                         f"nothing of the feature's bounds [{f.lower:g}, {f.upper:g}]")
    return low, high


class QueryRange(ConstraintBlock):
    """The rows of the module docstring; :attr:`request` is the current query's."""

    kind = "query_range"
    per_query = True

    def __init__(self) -> None:
        super().__init__(self.kind)
        #: the narrowing of the query being answered (set before its factual)
        self.request = QueryRequest()

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        space = m.space
        numeric = [f.name for f in space if not f.is_onehot]
        block.lower = pyo.Param(numeric, mutable=True,
                                initialize=lambda _, n: space[n].lower)
        block.upper = pyo.Param(numeric, mutable=True,
                                initialize=lambda _, n: space[n].upper)
        block.low = pyo.Constraint(numeric, rule=lambda b, n: (
            m.x[n] - b.lower[n]) / width(space, n) >= 0)
        block.high = pyo.Constraint(numeric, rule=lambda b, n: (
            b.upper[n] - m.x[n]) / width(space, n) >= 0)
        levels = [(f.name, level) for f in space if f.is_onehot for level in f.categories]
        block.allowed = pyo.Param(levels, mutable=True, initialize=1.0)
        block.level = pyo.Constraint(levels, rule=lambda b, n, level: (
            m.onehot[n, level] <= b.allowed[n, level]))

    def update(self, m: CounterfactualModel, block: pyo.Block) -> None:
        factual = m.factual.iloc[0]
        for f in m.space:
            if f.is_onehot:
                allowed = self.request.allowed(f, factual[f.name])
                for level in f.categories:
                    block.allowed[f.name, level] = float(level in allowed)
            else:
                block.lower[f.name], block.upper[f.name] = self.request.code_range(
                    f, f.to_code(factual[f.name]))

    def feature_intervals(self, m: CounterfactualModel,
                          block: pyo.Block) -> dict[str, tuple[float, float]]:
        """The query's code range of every numeric feature: decoding puts the solver's
        point inside it (a value a feasibility tolerance beyond an end comes back on
        the end; a feature held at the factual comes back exactly at it)."""
        factual = m.factual.iloc[0]
        return {f.name: self.request.code_range(f, f.to_code(factual[f.name]))
                for f in m.space if not f.is_onehot}

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        problems = []
        for f in m.space:
            value = row[f.name]
            if f.is_onehot:
                if value not in self.request.allowed(f, factual[f.name]):
                    problems.append(f"{f.name!r} = {value!r} is not allowed in this query "
                                    f"({self._why(f)})")
                continue
            # exact, as the space's own bounds and immutables: decoding puts a solver's
            # point inside the ranges, so a point outside them (a feature held at the
            # factual moved by an ulp across a split) is not one of this query
            low, high = self.request.code_range(f, f.to_code(factual[f.name]))
            code = f.to_code(value)
            if code < low or code > high:
                ends = [repr(f.from_code(v)) if f.labelled else f"{v:g}" for v in (low, high)]
                problems.append(f"{f.name!r} = {value!r} is outside this query's "
                                f"[{ends[0]}, {ends[1]}] ({self._why(f)})")
        return problems

    def _why(self, f: Feature) -> str:
        vary = self.request.vary
        return "not in features_to_vary" if vary is not None and f.name not in vary \
            else "permitted_range"
