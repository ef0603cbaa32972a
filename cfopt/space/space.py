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
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from .encoding import space_specs, spec_grids, spec_rounding
from .feature import SCALINGS, Direction, Feature, Kind, Scaling, parse_kind, plain
from .infer import infer_feature, infer_kind
from .validate import as_frame, check_unique_columns, validate_column

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
        if scaling not in SCALINGS:
            raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
        if frame.empty:
            raise ValueError("cannot infer a feature space from an empty DataFrame")
        check_unique_columns(frame)
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
                                 f"{plain(col.index[col.isna()][0])!r}")
            kind = parse_kind(kinds[name], name) if name in kinds else infer_kind(col)
            features.append(infer_feature(name, col, kind, categories.get(name), scaling))
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
        self._check_known(name)
        feature = self[name]
        unknown = sorted(set(changes) - set(_EDITABLE))
        if unknown:
            raise TypeError(f"unknown feature attribute(s) {unknown} for {name!r}; "
                            f"editable: {list(_EDITABLE)}")
        if "kind" in changes:
            new_kind = parse_kind(changes["kind"], name)
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
        self._check_known(*names)
        for n in names:
            self.set(n, immutable=True)
        return self

    def vary_only(self, *names: str) -> FeatureSpace:
        """Let only the named features change (DiCE's ``features_to_vary``): every other
        feature becomes immutable. A named feature declared immutable is an error (the
        list does not silently free it). Returns ``self``."""
        self._check_known(*names, option="features_to_vary")
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
        self._check_known(*names)
        for n in names:
            self._restrict_direction(n, "increase")
        return self

    def decrease_only(self, *names: str) -> FeatureSpace:
        """Declare features that may only decrease. Returns ``self``."""
        self._check_known(*names)
        for n in names:
            self._restrict_direction(n, "decrease")
        return self

    def _check_known(self, *names: str, option: str | None = None) -> None:
        """``ValueError`` naming every one of ``names`` the space does not have, before
        any of them is edited (nothing partial)."""
        unknown = [n for n in names if n not in self._features]
        if unknown:
            said = f"{option} names unknown" if option else "unknown"
            raise ValueError(f"{said} feature(s) {unknown}; the space has {self.names}")

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
        return spec_grids(self, space_specs(self))

    def input_rounding(self) -> list[float]:
        """Per model input, how far :meth:`encode`'s float64 computation may differ from
        the MILP's affine expression of the raw feature (absolute, input units)."""
        return spec_rounding(self, space_specs(self))

    def transform(self, X: pd.DataFrame | pd.Series | Mapping, *,
                  check_bounds: bool = True) -> np.ndarray:
        """Model input matrix (n, n_inputs), float64, of validated raw rows."""
        return self.encode(self.validate(X, check_bounds=check_bounds))

    def encode(self, frame: pd.DataFrame) -> np.ndarray:
        """Model input matrix of rows that are already valid (as returned by
        :meth:`validate` or produced by cfopt); no checks."""
        out = np.zeros((len(frame), self.n_inputs))
        plain_numbers = [(f, sl.start) for f, sl in zip(self, self.input_slices().values())
                         if not f.is_onehot and not f.labelled]
        if plain_numbers:  # one conversion for every numeric column
            columns = [sl for _, sl in plain_numbers]
            # pragma: no mutate start (dtype: numbers, and the true division below is float64)
            shift = np.array([f.shift for f, _ in plain_numbers], dtype=float)
            scale = np.array([f.scale for f, _ in plain_numbers], dtype=float)
            values = frame[[f.name for f, _ in plain_numbers]].to_numpy(dtype=float)
            # pragma: no mutate end
            out[:, columns] = (values - shift) / scale
        for f, sl in zip(self, self.input_slices().values()):
            if not f.is_onehot and not f.labelled:
                continue
            values = frame[f.name].to_numpy()
            if f.is_onehot:
                at = f.level_positions(values)
                hit = np.flatnonzero(at >= 0)
                out[hit, sl.start + at[hit]] = 1.0
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
        return pd.DataFrame(data, columns=self.names)  # pragma: no mutate (data is in order)

    @staticmethod
    def _codes(f: Feature, values: np.ndarray) -> np.ndarray:
        if f.labelled:
            lookup = {c: i for i, c in enumerate(f.categories)}
            # pragma: no mutate start (dtype: integer codes, divided as float64 by encode;
            # the last line: encode calls this for labelled features only)
            return np.array([lookup[plain(v)] for v in values], dtype=float)
        return np.asarray(values, dtype=float)
        # pragma: no mutate end

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
        check_unique_columns(frame)
        missing = [n for n in self.names if n not in frame.columns]
        if missing:
            raise ValueError(f"missing column(s) {missing}; the feature space expects "
                             f"{self.names}")
        extra = [c for c in frame.columns if c not in self._features]
        if extra:
            raise ValueError(f"unexpected column(s) {extra} not in the feature space "
                             f"(drop the target column before explaining)")
        rows = frame.index.astype(object)  # row labels as Python scalars in the messages
        columns = {f.name: validate_column(f, frame[f.name].to_numpy(), rows, check_bounds)
                   for f in self}
        return pd.DataFrame(columns, index=frame.index, columns=self.names)

    def validate_or_keep(self, X: pd.DataFrame) -> pd.DataFrame:
        """``X`` :meth:`validate`-d, or as given when it is not valid: the factual a
        failed row's answer reports."""
        try:
            return self.validate(X)
        except ValueError:  # a bad row keeps its raw values
            return X

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
            # pragma: no mutate start (encoding: json.dumps writes ASCII, the same bytes in any)
            with open(path, "w", encoding="utf-8") as fh:
                # pragma: no mutate end
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
