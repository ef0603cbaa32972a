"""The declared feature space: raw features, their kinds, bounds, actionability, and the
exact linear map from raw values to the learned model's input vector.

A :class:`FeatureSpace` is inferred from a pandas DataFrame and then edited per feature.
It is the single place that knows how a raw row (original column names, category
labels, raw units) becomes the model input vector, so every counterfactual is reported
in raw units with category labels:

* a numeric feature (continuous, integer, binary, ordinal) has a *code* ``v`` (its value;
  for an ordinal or a labelled binary the position of its label) and one model input
  ``(v - shift) / scale`` (min-max, standard or no scaling);
* a categorical feature with levels ``l_1..l_m`` has one binary model input per level
  (one-hot) with ``sum_k onehot_k = 1`` (CE-OCL eq. 4); changing its level counts as one
  change.

The learned model is assumed to consume ``space.transform(X)``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

import numpy as np
import pandas as pd

Direction = Literal["any", "increase", "decrease"]
Scaling = Literal["minmax", "standard", "none"]

_DIRECTIONS = ("any", "increase", "decrease")
_SCALINGS = ("minmax", "standard", "none")


class Kind(str, Enum):
    """Kind of a raw feature."""

    CONTINUOUS = "continuous"
    INTEGER = "integer"
    BINARY = "binary"
    CATEGORICAL = "categorical"
    ORDINAL = "ordinal"


def _plain(value: Any) -> Any:
    """A numpy scalar as the matching Python scalar (for JSON and clean reprs)."""
    return value.item() if isinstance(value, np.generic) else value


def _kind(value: Any, name: str) -> Kind:
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
        object.__setattr__(self, "categories", tuple(_plain(c) for c in self.categories))
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
        object.__setattr__(self, "kind", _kind(self.kind, self.name))
        object.__setattr__(self, "categories", tuple(_plain(c) for c in self.categories))
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

    def to_code(self, value: Any) -> float:
        """Numeric code of a raw value (label position for ordinals / labelled binaries)."""
        if self.is_onehot:
            raise TypeError(f"categorical feature {self.name!r} has no numeric code")
        if self.labelled:
            try:
                return float(self.categories.index(_plain(value)))
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


_EDITABLE = ("lower", "upper", "immutable", "direction", "shift", "scale", "kind",
             "spread", "mad", "perturbation")


class FeatureSpace:
    """An ordered set of :class:`Feature` and the exact raw-to-model-input map.

    Build one with :meth:`from_frame` and edit it with :meth:`set`,
    :meth:`immutable`, :meth:`increase_only`, :meth:`decrease_only`; train the model on
    :meth:`transform` of the training frame.
    """

    def __init__(self, features: Iterable[Feature]) -> None:
        self._features: dict[str, Feature] = {}
        for f in features:
            if not isinstance(f, Feature):
                raise TypeError(f"FeatureSpace takes Feature objects, got {type(f).__name__}")
            if f.name in self._features:
                raise ValueError(f"duplicate feature name {f.name!r}")
            self._features[f.name] = f
        if not self._features:
            raise ValueError("a FeatureSpace needs at least one feature")

    # ------------------------------------------------------------- inference
    @classmethod
    def from_frame(cls, frame: pd.DataFrame, *, scaling: Scaling = "minmax",
                   kinds: Mapping[str, Kind | str] | None = None,
                   categories: Mapping[str, Iterable] | None = None) -> FeatureSpace:
        """Infer a feature space from a DataFrame of raw training rows.

        Kinds are inferred per column (override with ``kinds``): bool or numeric with
        values in {0, 1} → binary; numeric with integral values → integer; other
        numeric → continuous; ordered pandas Categorical → ordinal; strings or unordered
        Categorical with two labels → labelled binary, with more → categorical. Bounds
        are the data's min and max; ``scaling`` sets shift and scale of numeric inputs
        (min-max: min and range; standard: mean and population std; none: 0 and 1).
        ``categories`` fixes the level order of categorical / ordinal columns.
        """
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"from_frame takes a pandas DataFrame, got {type(frame).__name__}")
        if scaling not in _SCALINGS:
            raise ValueError(f"scaling must be one of {_SCALINGS}, got {scaling!r}")
        if frame.empty:
            raise ValueError("cannot infer a feature space from an empty DataFrame")
        _check_unique_columns(frame)
        kinds = dict(kinds or {})
        categories = {k: tuple(v) for k, v in (categories or {}).items()}
        for key in list(kinds) + list(categories):
            if key not in frame.columns:
                raise ValueError(f"unknown column {key!r}; columns are {list(frame.columns)}")
        features = []
        for name in frame.columns:
            if not isinstance(name, str):
                raise ValueError(f"column names must be strings, got {name!r}")
            col = frame[name]
            if col.isna().any():
                raise ValueError(f"column {name!r}: NaN in row "
                                 f"{_plain(col.index[col.isna()][0])!r}")
            kind = _kind(kinds[name], name) if name in kinds else _infer_kind(col)
            features.append(_infer_feature(name, col, kind, categories.get(name), scaling))
        return cls(features)

    # ------------------------------------------------------------------ access
    @property
    def names(self) -> list[str]:
        return list(self._features)

    @property
    def features(self) -> list[Feature]:
        return list(self._features.values())

    def __getitem__(self, name: str) -> Feature:
        try:
            return self._features[name]
        except KeyError:
            raise KeyError(f"unknown feature {name!r}; features are {self.names}") from None

    def __iter__(self) -> Iterator[Feature]:
        return iter(self._features.values())

    def __len__(self) -> int:
        return len(self._features)

    def __contains__(self, name: object) -> bool:
        return name in self._features

    def __repr__(self) -> str:
        return f"FeatureSpace({len(self)} features, {self.n_inputs} model inputs)"

    def summary(self) -> pd.DataFrame:
        """One row per feature: kind, bounds, actionability, scaling."""
        rows = []
        for f in self:
            rows.append({"feature": f.name, "kind": f.kind.value, "lower": f.lower,
                         "upper": f.upper, "categories": list(f.categories) or None,
                         "immutable": f.immutable, "direction": f.direction,
                         "shift": f.shift, "scale": f.scale,
                         "perturbation": None if f.perturbation is None
                         else f.perturbation.to_dict()})
        return pd.DataFrame(rows).set_index("feature")

    # ----------------------------------------------------------------- editing
    def set(self, name: str, **changes: Any) -> FeatureSpace:
        """Edit one feature (bounds, immutable, direction, scaling, integer/continuous).

        Bounds of an ordinal may be given as labels. Returns ``self`` for chaining.
        """
        feature = self[name]
        unknown = sorted(set(changes) - set(_EDITABLE))
        if unknown:
            raise TypeError(f"unknown feature attribute(s) {unknown} for {name!r}; "
                            f"editable: {list(_EDITABLE)}")
        if "kind" in changes:
            new_kind = _kind(changes["kind"], name)
            allowed = {Kind.CONTINUOUS, Kind.INTEGER}
            if not (feature.kind in allowed and new_kind in allowed):
                raise ValueError(f"feature {name!r}: only continuous <-> integer kind changes "
                                 f"keep the encoding; rebuild the space to change "
                                 f"{feature.kind.value} to {new_kind.value}")
        if feature.kind is Kind.ORDINAL:
            for key in ("lower", "upper"):
                if key in changes and not isinstance(changes[key], (int, float)):
                    changes[key] = feature.to_code(changes[key])
        self._features[name] = dataclasses.replace(feature, **changes)
        return self

    def immutable(self, *names: str) -> FeatureSpace:
        """Declare features immutable. Returns ``self``."""
        for n in names:
            self.set(n, immutable=True)
        return self

    def vary_only(self, *names: str) -> FeatureSpace:
        """Let only the named features change (DiCE's ``features_to_vary``): every other
        feature becomes immutable. A named feature declared immutable is an error (the
        list does not silently free it). Returns ``self``."""
        unknown = [n for n in names if n not in self._features]
        if unknown:
            raise ValueError(f"features_to_vary names unknown feature(s) {unknown}; the "
                             f"space has {self.names}")
        if not names:
            raise ValueError("features_to_vary is empty: name at least one feature that may "
                             "change")
        fixed = [n for n in names if self[n].immutable]
        if fixed:
            raise ValueError(f"features_to_vary names immutable feature(s) {fixed}; free them "
                             f"first with space.set(name, immutable=False)")
        for f in self:
            if f.name not in names:
                self.set(f.name, immutable=True)
        return self

    def increase_only(self, *names: str) -> FeatureSpace:
        """Declare features that may only increase. Returns ``self``."""
        for n in names:
            self._restrict_direction(n, "increase")
        return self

    def decrease_only(self, *names: str) -> FeatureSpace:
        """Declare features that may only decrease. Returns ``self``."""
        for n in names:
            self._restrict_direction(n, "decrease")
        return self

    def _restrict_direction(self, name: str, direction: Direction) -> None:
        """Set a one-way direction, refusing to silently flip the opposite one."""
        current = self[name].direction
        if current not in ("any", direction):
            raise ValueError(f"feature {name!r} is already {current}-only; declaring it "
                             f"{direction}-only too leaves it no move: declare it immutable, "
                             f"or replace the direction with space.set({name!r}, "
                             f"direction={direction!r})")
        self.set(name, direction=direction)

    # ------------------------------------------------------------- model inputs
    @property
    def input_names(self) -> list[str]:
        """Names of the model's input columns, in order."""
        return [c for f in self for c in f.input_names]

    @property
    def n_inputs(self) -> int:
        return len(self.input_names)

    def input_slices(self) -> dict[str, slice]:
        """Position of each feature's model inputs in the input vector."""
        out, start = {}, 0
        for f in self:
            width = len(f.input_names)
            out[f.name] = slice(start, start + width)
            start += width
        return out

    def input_bounds(self) -> list[tuple[float, float]]:
        """Bounds of each model input implied by the feature bounds."""
        bounds: list[tuple[float, float]] = []
        for f in self:
            if f.is_onehot:
                bounds.extend((0.0, 1.0) for _ in f.categories)
            else:
                bounds.append(((f.lower - f.shift) / f.scale, (f.upper - f.shift) / f.scale))
        return bounds

    def input_grids(self) -> list[tuple[float, float] | None]:
        """Per model input, ``(offset, step)`` when it only takes values
        ``offset + k * step`` (integral codes, one-hot columns), else ``None``."""
        from .encoding import space_specs, spec_grids

        return spec_grids(self, space_specs(self))

    def input_rounding(self) -> list[float]:
        """Per model input, how far :meth:`encode`'s float64 computation may differ from
        the MILP's affine expression of the raw feature (absolute, input units)."""
        from .encoding import space_specs, spec_rounding

        return spec_rounding(self, space_specs(self))

    def transform(self, X: pd.DataFrame | pd.Series | Mapping, *,
                  check_bounds: bool = True) -> np.ndarray:
        """Model input matrix (n, n_inputs), float64, of validated raw rows."""
        return self.encode(self.validate(X, check_bounds=check_bounds))

    def encode(self, frame: pd.DataFrame) -> np.ndarray:
        """Model input matrix of rows that are already valid (as returned by
        :meth:`validate` or produced by cfopt); no checks."""
        out = np.zeros((len(frame), self.n_inputs))
        for f, sl in zip(self, self.input_slices().values()):
            values = frame[f.name].to_numpy()
            if f.is_onehot:
                for k, level in enumerate(f.categories):
                    out[:, sl.start + k] = [float(_plain(v) == level) for v in values]
            else:
                out[:, sl.start] = (self._codes(f, values) - f.shift) / f.scale
        return out

    def inverse_transform(self, Z: np.ndarray) -> pd.DataFrame:
        """Raw rows of model input vectors (integral codes rounded, one-hot by argmax).

        A code beyond a bound by no more than the scaling's round-off (1e-12 of the
        range) is set on the bound, so an input at its bound decodes inside the space."""
        Z = np.atleast_2d(np.asarray(Z, dtype=float))
        if Z.shape[1] != self.n_inputs:
            raise ValueError(f"expected {self.n_inputs} model inputs, got {Z.shape[1]}")
        data = {}
        for f, sl in zip(self, self.input_slices().values()):
            if f.is_onehot:
                data[f.name] = [f.categories[k] for k in Z[:, sl].argmax(axis=1)]
                continue
            codes = Z[:, sl.start] * f.scale + f.shift
            slack = 1e-12 * max(1.0, f.upper - f.lower, abs(f.lower), abs(f.upper))
            codes = np.where((codes > f.upper) & (codes <= f.upper + slack), f.upper, codes)
            codes = np.where((codes < f.lower) & (codes >= f.lower - slack), f.lower, codes)
            data[f.name] = [f.from_code(v) for v in codes]
        return pd.DataFrame(data, columns=self.names)

    @staticmethod
    def _codes(f: Feature, values: np.ndarray) -> np.ndarray:
        if f.labelled:
            lookup = {c: i for i, c in enumerate(f.categories)}
            return np.array([lookup[_plain(v)] for v in values], dtype=float)
        return np.asarray(values, dtype=float)

    # --------------------------------------------------------------- validation
    def validate(self, X: pd.DataFrame | pd.Series | Mapping, *,
                 check_bounds: bool = True) -> pd.DataFrame:
        """Check raw rows against the space; return them with columns in space order.

        Raises ``ValueError`` naming the column and value for: missing, extra or
        duplicate columns, non-numeric (text, complex, or boolean unless binary) values in
        numeric columns, NaN or ±inf, non-integral values of
        integer features, unseen categories, and (``check_bounds``) values outside the
        declared bounds.
        """
        frame = as_frame(X)
        _check_unique_columns(frame)
        missing = [n for n in self.names if n not in frame.columns]
        if missing:
            raise ValueError(f"missing column(s) {missing}; the feature space expects "
                             f"{self.names}")
        extra = [c for c in frame.columns if c not in self._features]
        if extra:
            raise ValueError(f"unexpected column(s) {extra} not in the feature space "
                             f"(drop the target column before explaining)")
        columns = {f.name: _validate_column(f, frame[f.name].to_numpy(), frame.index,
                                            check_bounds) for f in self}
        return pd.DataFrame(columns, index=frame.index, columns=self.names)

    # ------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        return {"features": [f.to_dict() for f in self]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeatureSpace:
        try:
            return cls(Feature(**f) for f in data["features"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a serialized FeatureSpace: {exc}") from exc

    def to_json(self, path: str | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        return text

    @classmethod
    def from_json(cls, text_or_path: str) -> FeatureSpace:
        """The space of :meth:`to_json` text or of a file holding it."""
        text, source = text_or_path, "the text given"
        try:
            if not text_or_path.lstrip().startswith("{"):
                source = repr(text_or_path)
                with open(text_or_path, encoding="utf-8") as fh:
                    text = fh.read()
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{source} is not FeatureSpace JSON: {exc}") from None
        return cls.from_dict(data)


def as_frame(X: pd.DataFrame | pd.Series | Mapping) -> pd.DataFrame:
    """Rows as a DataFrame: a DataFrame as is, a Series or a mapping as one row."""
    if isinstance(X, pd.DataFrame):
        return X
    if isinstance(X, pd.Series):
        return X.to_frame().T.infer_objects()
    if isinstance(X, Mapping):
        return pd.DataFrame([dict(X)])
    raise TypeError(f"expected a pandas DataFrame, Series or dict of raw feature values, "
                    f"got {type(X).__name__}")


def _validate_column(f: Feature, raw: np.ndarray, index: pd.Index,
                     check_bounds: bool) -> np.ndarray:
    """One column's values, checked, as an object array of labels or a numeric array."""
    name = f.name
    index = index.astype(object)  # row labels as Python scalars in the messages
    if f.labelled:
        known = set(f.categories)
        values = np.empty(len(raw), dtype=object)
        for k, v in enumerate(raw):
            if _is_missing(v):
                raise ValueError(f"column {name!r}: missing value (NaN) in row {index[k]!r}")
            v = _plain(v)
            if v not in known:
                raise ValueError(f"column {name!r}: unseen category {v!r} in row {index[k]!r}; "
                                 f"known categories: {list(f.categories)}")
            values[k] = v
        if check_bounds and not f.is_onehot:
            codes = np.array([f.categories.index(v) for v in values], dtype=float)
            _check_bounds(f, index, codes, values)
        return values
    if raw.dtype.kind in "iuf" or (raw.dtype.kind == "b" and f.kind is Kind.BINARY):
        values = raw.astype(float)
    else:
        values = np.array([_number(f, v, row) for v, row in zip(raw, index)], dtype=float)
    nan = np.isnan(values)
    if nan.any():
        raise ValueError(f"column {name!r}: missing value (NaN) in row {index[nan][0]!r}")
    inf = np.isinf(values)
    if inf.any():
        k = int(np.flatnonzero(inf)[0])
        raise ValueError(f"column {name!r}: infinite value {float(values[k])!r} in row "
                         f"{index[k]!r}")
    if f.is_integral:
        frac = values != np.round(values)
        if frac.any():
            k = int(np.flatnonzero(frac)[0])
            raise ValueError(f"column {name!r}: {f.kind.value} feature has non-integer "
                             f"value {_plain(raw[k])!r} in row {index[k]!r}")
    if check_bounds:
        _check_bounds(f, index, values, values)
    return values.astype(np.int64) if f.is_integral else values


def _number(f: Feature, value: Any, row: Any) -> float:
    """One raw value of a numeric feature as a float (NaN if missing); text, complex
    numbers and booleans (unless the feature is binary) are not numbers."""
    if _is_missing(value):
        return math.nan
    v = _plain(value)
    why = ""
    if isinstance(v, bool) and f.kind is not Kind.BINARY:
        why = f" (a boolean, but the feature is {f.kind.value})"
    elif isinstance(v, complex):
        why = " (complex)"
    if not why:
        try:
            return float(v)
        except (TypeError, ValueError):
            pass
    raise ValueError(f"column {f.name!r}: value {v!r} in row {row!r} is not a number{why}")


def _check_unique_columns(frame: pd.DataFrame) -> None:
    duplicated = frame.columns[frame.columns.duplicated()]
    if len(duplicated):
        raise ValueError(f"duplicate column(s) {list(dict.fromkeys(duplicated))}; each "
                         f"feature must appear once")


def _check_bounds(f: Feature, index: pd.Index, codes: np.ndarray, shown: np.ndarray) -> None:
    outside = (codes < f.lower) | (codes > f.upper)
    if outside.any():
        k = int(np.flatnonzero(outside)[0])
        lo, hi = f.from_code(f.lower), f.from_code(f.upper)
        value = _plain(shown[k])
        if f.is_integral and isinstance(value, float):
            value = int(value)
        raise ValueError(f"column {f.name!r}: value {value!r} in row {index[k]!r} "
                         f"is outside the declared bounds [{lo!r}, {hi!r}]; widen them with "
                         f"space.set({f.name!r}, lower=..., upper=...)")


def _is_missing(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _sorted_labels(values: Iterable) -> tuple:
    vals = [_plain(v) for v in values]
    try:
        return tuple(sorted(vals))
    except TypeError:
        return tuple(sorted(vals, key=str))


def _infer_kind(col: pd.Series) -> Kind:
    if isinstance(col.dtype, pd.CategoricalDtype):
        if col.dtype.ordered:
            return Kind.ORDINAL
        return Kind.BINARY if len(col.dtype.categories) == 2 else Kind.CATEGORICAL
    if col.dtype == bool:
        return Kind.BINARY
    if pd.api.types.is_numeric_dtype(col):
        values = col.to_numpy(dtype=float)
        if not np.isfinite(values).all():
            raise ValueError(f"column {col.name!r}: infinite values cannot define a feature")
        if set(np.unique(values)) <= {0.0, 1.0}:
            return Kind.BINARY
        if np.all(values == np.round(values)):
            return Kind.INTEGER
        return Kind.CONTINUOUS
    n_levels = col.nunique()
    return Kind.BINARY if n_levels == 2 else Kind.CATEGORICAL


def _infer_feature(name: str, col: pd.Series, kind: Kind, levels: tuple | None,
                   scaling: str) -> Feature:
    categories: tuple = ()
    if kind in (Kind.CATEGORICAL, Kind.ORDINAL) or (
            kind is Kind.BINARY and not pd.api.types.is_numeric_dtype(col) and col.dtype != bool):
        if levels is not None:
            categories = levels
        elif isinstance(col.dtype, pd.CategoricalDtype):
            categories = tuple(_plain(c) for c in col.dtype.categories)
        else:
            categories = _sorted_labels(col.unique())
        unseen = set(col.map(_plain)) - set(categories)
        if unseen:
            raise ValueError(f"column {name!r}: values {sorted(map(str, unseen))} are not "
                             f"among the declared categories {list(categories)}")
        if kind is Kind.BINARY and len(categories) != 2:
            raise ValueError(f"column {name!r}: a binary feature needs two labels, "
                             f"found {list(categories)}")
    elif col.dtype == bool:
        categories = (False, True)
    if kind is Kind.CATEGORICAL:
        return Feature(name, kind, categories=categories)
    if categories:
        lookup = {c: i for i, c in enumerate(categories)}
        codes = np.array([lookup[_plain(v)] for v in col], dtype=float)
    else:
        numeric = pd.to_numeric(col, errors="coerce")
        if numeric.isna().any():
            bad = col[numeric.isna()].iloc[0]
            raise ValueError(f"column {name!r}: value {bad!r} is not a number "
                             f"(declare the column categorical)")
        codes = numeric.to_numpy(dtype=float)
    lo, hi = float(codes.min()), float(codes.max())
    if kind is Kind.ORDINAL:
        lo, hi = 0.0, float(len(categories) - 1)
    if kind is Kind.BINARY:
        lo, hi = 0.0, 1.0
    if kind in (Kind.INTEGER, Kind.BINARY) and np.any(codes != np.round(codes)):
        raise ValueError(f"column {name!r}: {kind.value} feature has non-integer values")
    if scaling == "minmax":
        shift, scale = lo, (hi - lo)
    elif scaling == "standard":
        shift, scale = float(codes.mean()), float(codes.std())
    else:
        shift, scale = 0.0, 1.0
    scale = scale if scale > 0 else 1.0
    mad = float(np.median(np.abs(codes - np.median(codes))))
    return Feature(name, kind, lower=lo, upper=hi, categories=categories, shift=shift,
                   scale=scale, spread=float(codes.max() - codes.min()), mad=mad)
