"""A raw feature of the declared space: its kind, bounds, actionability, scaling and
perturbation annotation (:class:`Feature`, :class:`Kind`, :class:`Perturbation`).

A numeric feature (continuous, integer, binary, ordinal) has a *code* ``v`` (its value; for
an ordinal or a labelled binary the position of its label) and one model input
``(v - shift) / scale``; a categorical feature has one binary model input per level
(one-hot). The space that orders them is :class:`cfopt.space.space.FeatureSpace`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

import numpy as np

Direction = Literal["any", "increase", "decrease"]
Scaling = Literal["minmax", "standard", "none"]

_DIRECTIONS = ("any", "increase", "decrease")
SCALINGS = ("minmax", "standard", "none")


class Kind(str, Enum):
    """Kind of a raw feature."""

    CONTINUOUS = "continuous"
    INTEGER = "integer"
    BINARY = "binary"
    CATEGORICAL = "categorical"
    ORDINAL = "ordinal"


def plain(value: Any) -> Any:
    """A numpy scalar as the matching Python scalar (for JSON and clean reprs)."""
    return value.item() if isinstance(value, np.generic) else value


def parse_kind(value: Any, name: str) -> Kind:
    """``Kind(value)``, with an error naming the feature and the known kinds."""
    try:
        return Kind(value)
    except ValueError:
        raise ValueError(f"feature {name!r}: unknown kind {value!r}; use one of "
                         f"{[k.value for k in Kind]}") from None


_PERTURBATION_KINDS = ("absolute", "relative", "categories")


@dataclass(frozen=True)
class Perturbation:
    """How far the world may push a feature after a user acts (Virgolin & Fracaros
    2023, §2.2: the vector of maximal perturbations :math:`p^- \\le 0 \\le p^+`).

    * ``"absolute"``: a value :math:`v` may become any value in
      :math:`[v - \\text{decrease}, v + \\text{increase}]` (feature units);
    * ``"relative"``: the same with the bounds as fractions of the current value,
      :math:`[v - \\text{decrease}\\,|v|, v + \\text{increase}\\,|v|]` — relative to the
      value *being perturbed* (the counterfactual's, not the factual's);
    * ``"categories"``: a categorical (or labelled) value may be replaced by any of
      ``categories``.

    Perturbed values stay within the feature's bounds, and integral codes stay
    integral. ``increase`` and ``decrease`` are magnitudes (≥ 0); the paper's
    :math:`p^-` is ``-decrease``.
    """

    kind: str
    increase: float = 0.0
    decrease: float = 0.0
    categories: tuple = ()

    def __post_init__(self) -> None:
        if self.kind not in _PERTURBATION_KINDS:
            raise ValueError(f"perturbation kind must be one of {_PERTURBATION_KINDS}, got "
                             f"{self.kind!r}")
        object.__setattr__(self, "categories", tuple(plain(c) for c in self.categories))
        if self.kind == "categories":
            if not self.categories or self.increase or self.decrease:
                raise ValueError("a 'categories' perturbation lists the categories a value may "
                                 "switch to and has no increase/decrease")
            return
        if self.categories:
            raise ValueError(f"an {self.kind!r} perturbation takes increase/decrease, not "
                             f"categories")
        for side in ("increase", "decrease"):
            v = getattr(self, side)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not (math.isfinite(v) and v >= 0):
                raise ValueError(f"perturbation {side} must be a finite magnitude >= 0, got "
                                 f"{v!r}")
            object.__setattr__(self, side, float(v))

    @classmethod
    def absolute(cls, increase: float = 0.0, decrease: float = 0.0) -> Perturbation:
        return cls("absolute", increase, decrease)

    @classmethod
    def relative(cls, increase: float = 0.0, decrease: float = 0.0) -> Perturbation:
        return cls("relative", increase, decrease)

    @classmethod
    def to_categories(cls, *categories: Any) -> Perturbation:
        return cls("categories", categories=tuple(categories))

    @property
    def is_numeric(self) -> bool:
        return self.kind != "categories"

    def up(self, value: float) -> float:
        """Largest upward move from ``value`` (before clipping to the bounds)."""
        return self.increase * (abs(value) if self.kind == "relative" else 1.0)

    def down(self, value: float) -> float:
        """Largest downward move from ``value`` (before clipping to the bounds)."""
        return self.decrease * (abs(value) if self.kind == "relative" else 1.0)

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "categories":
            return {"kind": self.kind, "categories": list(self.categories)}
        return {"kind": self.kind, "increase": self.increase, "decrease": self.decrease}


@dataclass(frozen=True)
class Feature:
    """One raw feature.

    Attributes:
        name: column name in the raw data.
        kind: see :class:`Kind`.
        lower, upper: bounds of the feature's code (raw value for numeric kinds; level
            position for ordinals; 0/1 for binaries). ``None`` for categoricals.
        categories: level labels: the one-hot levels of a categorical, the ordered levels
            of an ordinal, or the two labels (for code 0 and 1) of a labelled binary.
        immutable: the counterfactual must keep the factual value.
        direction: ``"increase"`` / ``"decrease"``: the feature may only move that way.
        shift, scale: model input = (code - shift) / scale (numeric kinds only).
        spread: range of the feature in the data (default L1 weight is 1 / spread).
        mad: median absolute deviation in the data (for MAD-weighted L1).
        perturbation: how far the world may push the feature after the user acts
            (:class:`Perturbation`; ``None``: never perturbed).
    """

    name: str
    kind: Kind
    lower: float | None = None
    upper: float | None = None
    categories: tuple = ()
    immutable: bool = False
    direction: Direction = "any"
    shift: float = 0.0
    scale: float = 1.0
    spread: float | None = None
    mad: float | None = None
    perturbation: Perturbation | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", parse_kind(self.kind, self.name))
        object.__setattr__(self, "categories", tuple(plain(c) for c in self.categories))
        name, kind = self.name, self.kind
        self._check_perturbation()
        if self.direction not in _DIRECTIONS:
            raise ValueError(f"feature {name!r}: direction must be one of {_DIRECTIONS}, "
                             f"got {self.direction!r}")
        if len(set(self.categories)) != len(self.categories):
            raise ValueError(f"feature {name!r}: duplicate categories {self.categories}")
        if kind is Kind.CATEGORICAL:
            if not self.categories:
                raise ValueError(f"categorical feature {name!r} needs its categories")
            if self.direction != "any":
                raise ValueError(f"categorical feature {name!r} has no order, so it cannot "
                                 f"be {self.direction}-only; declare it ordinal instead")
            if self.lower is not None or self.upper is not None:
                raise ValueError(f"categorical feature {name!r} has no numeric bounds")
            return
        if kind is Kind.ORDINAL and len(self.categories) < 2:
            raise ValueError(f"ordinal feature {name!r} needs at least two ordered levels")
        if kind is Kind.BINARY and self.categories and len(self.categories) != 2:
            raise ValueError(f"binary feature {name!r}: give exactly two labels "
                             f"(for 0 and 1), got {self.categories}")
        if kind in (Kind.CONTINUOUS, Kind.INTEGER) and self.categories:
            raise ValueError(f"{kind.value} feature {name!r} takes no categories")
        lower, upper = self.lower, self.upper
        if kind is Kind.BINARY:
            lower = 0.0 if lower is None else lower
            upper = 1.0 if upper is None else upper
        elif kind is Kind.ORDINAL:
            lower = 0.0 if lower is None else lower
            upper = float(len(self.categories) - 1) if upper is None else upper
        if lower is None or upper is None:
            raise ValueError(f"feature {name!r} needs finite lower and upper bounds "
                             f"(big-M formulations are built from them)")
        lower, upper = float(lower), float(upper)
        if not (math.isfinite(lower) and math.isfinite(upper)):
            raise ValueError(f"feature {name!r}: bounds must be finite, got [{lower}, {upper}]")
        if lower > upper:
            raise ValueError(f"feature {name!r}: lower bound {lower} is above upper bound {upper}")
        if kind in (Kind.INTEGER, Kind.BINARY, Kind.ORDINAL):
            if lower != math.floor(lower) or upper != math.floor(upper):
                raise ValueError(f"{kind.value} feature {name!r}: bounds must be integers, "
                                 f"got [{lower}, {upper}]")
        if kind is Kind.BINARY and (lower < 0 or upper > 1):
            raise ValueError(f"binary feature {name!r}: bounds must lie in [0, 1]")
        if kind is Kind.ORDINAL and (lower < 0 or upper > len(self.categories) - 1):
            raise ValueError(f"ordinal feature {name!r}: bounds are level positions in "
                             f"[0, {len(self.categories) - 1}]")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"feature {name!r}: scale must be positive and finite, "
                             f"got {self.scale}")
        if not math.isfinite(self.shift):
            raise ValueError(f"feature {name!r}: shift must be finite, got {self.shift}")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    def _check_perturbation(self) -> None:
        p = self.perturbation
        if p is None:
            return
        if isinstance(p, Mapping):
            try:
                p = Perturbation(**p)
            except TypeError as exc:
                raise ValueError(f"feature {self.name!r}: not a perturbation: {exc}") from None
            object.__setattr__(self, "perturbation", p)
        if not isinstance(p, Perturbation):
            raise TypeError(f"feature {self.name!r}: perturbation must be a cfopt.Perturbation, "
                            f"got {type(p).__name__}")
        if p.kind == "categories":
            if not self.categories and self.kind is not Kind.BINARY:
                raise ValueError(f"feature {self.name!r}: a 'categories' perturbation needs a "
                                 f"categorical, ordinal or binary feature, not {self.kind.value}")
            known = self.categories or (0, 1)
            unknown = [c for c in p.categories if c not in known]
            if unknown:
                raise ValueError(f"feature {self.name!r}: perturbation categories {unknown} are "
                                 f"not among its categories {list(known)}")
        elif self.kind is Kind.CATEGORICAL:
            raise ValueError(f"categorical feature {self.name!r} has no numeric perturbation; "
                             f"give the categories it may switch to")

    # ----------------------------------------------------------------- encoding
    @property
    def is_onehot(self) -> bool:
        """True for a categorical feature (one binary model input per level)."""
        return self.kind is Kind.CATEGORICAL

    @property
    def is_integral(self) -> bool:
        """True when the feature's code takes integer values only."""
        return self.kind in (Kind.INTEGER, Kind.BINARY, Kind.ORDINAL)

    @property
    def labelled(self) -> bool:
        """True when codes map to labels (ordinal, labelled binary, categorical)."""
        return bool(self.categories)

    @property
    def input_names(self) -> list[str]:
        """Names of the model inputs this feature produces."""
        if self.is_onehot:
            return [f"{self.name}={c}" for c in self.categories]
        return [self.name]

    def actionable_range(self, x0: float, lower: float | None = None,
                         upper: float | None = None) -> tuple[float, float]:
        """The codes this numeric feature may take from the factual's code ``x0``: within
        ``[lower, upper]`` (default: its bounds), only ``x0`` when immutable, from ``x0``
        up when increase-only, down to ``x0`` when decrease-only."""
        lo = self.lower if lower is None else lower
        hi = self.upper if upper is None else upper
        if self.immutable:
            return x0, x0
        if self.direction == "increase":
            return x0, hi
        if self.direction == "decrease":
            return lo, x0
        return lo, hi

    def level_positions(self, values: Any) -> np.ndarray:
        """Each raw value's position among :attr:`categories` (``-1`` for none), by
        Python equality: each distinct value looked up once (``pandas.factorize``)."""
        import pandas as pd

        codes, uniques = pd.factorize(np.asarray(values, dtype=object))
        lookup = {level: k for k, level in enumerate(self.categories)}
        at = np.array([lookup.get(plain(u), -1) for u in uniques] + [-1], dtype=int)
        return at[codes]  # a missing value's code -1 reads the last entry, -1

    def to_code(self, value: Any) -> float:
        """Numeric code of a raw value (label position for ordinals / labelled binaries)."""
        if self.is_onehot:
            raise TypeError(f"categorical feature {self.name!r} has no numeric code")
        if self.labelled:
            try:
                return float(self.categories.index(plain(value)))
            except ValueError:
                raise ValueError(f"column {self.name!r}: unseen category {value!r}; known "
                                 f"categories: {list(self.categories)}") from None
        return float(value)

    def from_code(self, code: float) -> Any:
        """Raw value of a code (inverse of :meth:`to_code`)."""
        if self.labelled:
            return self.categories[int(round(code))]
        if self.is_integral:
            return int(round(code))
        return float(code)

    @property
    def weight_spread(self) -> float:
        """Range used for default L1 weights: the data range, else the bounds' width."""
        if self.is_onehot:
            return 1.0
        spread = self.spread if self.spread is not None else self.upper - self.lower
        return spread if spread > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["kind"] = self.kind.value
        d["categories"] = list(self.categories)
        d["perturbation"] = None if self.perturbation is None else self.perturbation.to_dict()
        return d
