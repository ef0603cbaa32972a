r"""How model inputs are computed from raw features: one :class:`InputSpec` per input.

The feature space's own transform (min-max / standard scaling, one-hot columns) and an
sklearn preprocessing pipeline are both lists of input specs, each an exact function of
one raw feature: ``a * code + b`` (numeric codes), the indicator of one category, a
value per category (an ordinal encoding of a categorical feature:
:math:`\sum_l (a\,c_l + b)\,\text{onehot}_{f,l}` with integer codes :math:`c_l`), or a
constant. The MILP links its inputs to the feature variables through them, and tree
splits use them to know which inputs move on a grid (integral codes, indicators, integer
codes per category) and how far the library's own computation of an input may differ
from the MILP's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ..models import ModelAdapter
    from .space import FeatureSpace

#: per model input, its (lower, upper) bounds
Bounds = list[tuple[float, float]]
#: per model input, ``(offset, step)`` when it only takes ``offset + k * step``, else ``None``
Grid = tuple[float, float] | None


def unit_box(bounds: Bounds) -> tuple[np.ndarray, np.ndarray]:
    r"""Per model input of the box ``bounds``, its lower bound :math:`\ell_i` and width
    :math:`w_i` (1 for a fixed input): the block's variable is :math:`t_i = (z_i -
    \ell_i) / w_i \in [0, 1]` (:class:`~cfopt.formulations.predictors.PredictorConstr`)."""
    lo = np.array([float(lb) for lb, _ in bounds])
    width = np.array([ub - lb if ub > lb else 1.0 for lb, ub in bounds], dtype=float)
    return lo, width


def unit_bounds(bounds: Bounds) -> Bounds:
    """The bounds of the block's normalized inputs: ``[0, 1]``, ``[0, 0]`` for a fixed
    input."""
    return [(0.0, 1.0 if ub > lb else 0.0) for lb, ub in bounds]


@dataclass(frozen=True)
class InputSpec:
    """One model input: ``affine`` (``a * code + b`` of a numeric feature),
    ``indicator`` (1 iff the categorical ``feature`` takes ``level``), ``levels``
    (``a * c + b`` where ``c`` is the integer code ``codes`` gives the level the
    categorical ``feature`` takes: ``codes`` holds ``(level, c)`` for every category)
    or ``constant`` (``b``)."""

    kind: Literal["affine", "indicator", "levels", "constant"]
    feature: str | None = None
    a: float = 1.0
    b: float = 0.0
    level: Any = None
    codes: tuple[tuple[Any, int], ...] = ()

    def values(self) -> dict[Any, float]:
        """A ``levels`` input's value per category: ``a * c + b``."""
        return {level: self.a * c + self.b for level, c in self.codes}


def space_specs(space: FeatureSpace) -> list[InputSpec]:
    """The feature space's own transform as input specs."""
    specs = []
    for f in space:
        if f.is_onehot:
            specs.extend(InputSpec("indicator", f.name, level=c) for c in f.categories)
        else:
            specs.append(InputSpec("affine", f.name, 1.0 / f.scale, -f.shift / f.scale))
    return specs


def input_moves(space: FeatureSpace, specs: list[InputSpec]) -> list[tuple[bool, bool]]:
    """Per input, whether actionability lets it move up and down from the factual
    (an affine input of a mutable numeric feature; its sign of ``a`` orients them)."""
    moves = []
    for spec in specs:
        f = space[spec.feature] if spec.kind == "affine" else None
        if f is None or f.immutable:
            moves.append((False, False))
            continue
        up, down = f.direction != "decrease", f.direction != "increase"
        moves.append((up, down) if spec.a > 0 else (down, up))
    return moves


def spec_bounds(space: FeatureSpace, specs: list[InputSpec]) -> Bounds:
    out = []
    for s in specs:
        if s.kind == "affine":
            f = space[s.feature]
            lo, hi = s.a * f.lower + s.b, s.a * f.upper + s.b
            out.append((min(lo, hi), max(lo, hi)))
        elif s.kind == "indicator":
            out.append((0.0, 1.0))
        elif s.kind == "levels":
            values = s.values().values()
            out.append((min(values), max(values)))
        else:
            out.append((s.b, s.b))
    return out


def spec_grids(space: FeatureSpace, specs: list[InputSpec]) -> list[Grid]:
    """Per input, ``(offset, step)`` when it moves on a grid, else ``None``. A
    ``levels`` input ``a * c + b`` takes values on the grid of offset ``b`` and step
    ``|a| * gcd(c)`` (integer codes; step 1 when every code is 0 or ``a`` is 0)."""
    out: list[Grid] = []
    for s in specs:
        if s.kind == "indicator":
            out.append((0.0, 1.0))
        elif s.kind == "constant":
            out.append((s.b, 1.0))
        elif s.kind == "levels":
            step = abs(s.a) * math.gcd(*(c for _, c in s.codes))
            out.append((s.b, step if step > 0 else 1.0))
        elif space[s.feature].is_integral and s.a != 0:
            out.append((s.b, abs(s.a)))
        else:
            out.append(None)
    return out


def spec_rounding(space: FeatureSpace, specs: list[InputSpec]) -> list[float]:
    """Per input, a bound on the difference between the library's float64 computation
    of the input from a raw code (``(code - shift) / scale``, ``code * scale + min``)
    and the MILP's ``a * code + b``: a few ulps of the terms' magnitudes. Indicators,
    constants and unscaled ``levels`` codes (``a = 1``, ``b = 0``: small integers, exact
    in float64) have none."""
    eps = float(np.finfo(np.float64).eps)  # pragma: no mutate (finfo(None) is float64's)
    out = []
    for s in specs:
        if s.kind == "affine":
            f = space[s.feature]
            size = abs(s.a) * max(abs(f.lower), abs(f.upper)) + abs(s.b)
        elif s.kind == "levels" and (s.a, s.b) != (1.0, 0.0):
            size = abs(s.a) * max(abs(c) for _, c in s.codes) + abs(s.b)
        else:
            size = 0.0
        out.append(16 * eps * size)
    return out


def encode(space: FeatureSpace, specs: list[InputSpec], frame: pd.DataFrame) -> np.ndarray:
    """Model inputs of valid raw rows under ``specs``."""
    out = np.zeros((len(frame), len(specs)))
    positions: dict[str, np.ndarray] = {}  # a categorical's level positions, once
    for k, s in enumerate(specs):
        if s.kind == "constant":
            out[:, k] = s.b
            continue
        f = space[s.feature]
        values = frame[s.feature].to_numpy()
        if s.kind == "indicator":
            if f.name not in positions:
                positions[f.name] = f.level_positions(values)
            level = f.level_positions([s.level])[0]  # -1: a level the space lacks
            out[:, k] = (positions[f.name] == level) & (level >= 0)
        elif s.kind == "levels":
            value_of = s.values()
            codes, uniques = pd.factorize(np.asarray(values, dtype=object))
            out[:, k] = np.array([value_of[v] for v in uniques], dtype=float)[codes]
        elif f.labelled:  # a label's code is its position
            codes = f.level_positions(values)
            if (codes < 0).any():
                f.to_code(values[int(np.argmax(codes < 0))])  # raises, naming the value
            out[:, k] = s.a * codes + s.b
        else:  # a number's code is itself
            out[:, k] = s.a * np.asarray(values, dtype=float) + s.b
    return out


def library_input(adapter: ModelAdapter, space: FeatureSpace, specs: list[InputSpec],
                  j: int, value: float) -> float:
    """The real model's own value of input ``j`` at the raw code whose MILP input
    (``a * code + b``) is ``value``: its preprocessing's arithmetic (``(code - shift) /
    scale``, a pipeline's own transform), which may differ from the MILP's by an ulp —
    enough to put a grid value on the other side of a tree threshold."""
    spec = specs[j]
    if spec.kind != "affine":
        return value
    f = space[spec.feature]
    code = (value - spec.b) / spec.a
    row = {g.name: g.categories[0] if g.is_onehot else g.from_code(g.lower) for g in space}
    code = round(code) if f.is_integral else code  # pragma: no mutate (from_code rounds too)
    row[f.name] = f.from_code(code)
    frame = pd.DataFrame([row], columns=space.names)  # pragma: no mutate (row is in order)
    return float(adapter.model_inputs(space, frame)[0][j])


class CodeEncoder:
    """The model inputs of points given by their feature codes (a numeric feature's code,
    a categorical's level index), under ``specs``, vectorised over candidate codes of one
    feature: the arithmetic of :func:`encode` for the greedy walks, which move one
    feature at a time."""

    def __init__(self, space: FeatureSpace, specs: list[InputSpec]) -> None:
        self.space = space
        self.n_inputs = len(specs)
        self.features = list(space)
        self.index = {f.name: i for i, f in enumerate(self.features)}
        self.specs_of: dict[str, list[tuple[int, InputSpec]]] = {}
        for k, spec in enumerate(specs):
            if spec.feature is not None:
                self.specs_of.setdefault(spec.feature, []).append((k, spec))

    def positions(self, name: str) -> np.ndarray:
        """The indices of the model inputs of feature ``name``."""
        return np.array([k for k, _ in self.specs_of.get(name, [])], dtype=int)

    def codes(self, row: pd.DataFrame) -> np.ndarray:
        """The codes of a raw one-row frame."""
        values = row.iloc[0]
        return np.array([f.categories.index(values[f.name]) if f.is_onehot
                         else f.to_code(values[f.name]) for f in self.features], dtype=float)

    def row(self, codes: np.ndarray) -> pd.DataFrame:
        """The raw one-row frame of ``codes``."""
        # from_code of a categorical's level index is its category too; raw is in order
        raw = {f.name: f.categories[int(c)] if f.is_onehot  # pragma: no mutate (from_code: same)
               else f.from_code(c) for f, c in zip(self.features, codes)}
        return pd.DataFrame([raw], columns=self.space.names)  # pragma: no mutate (in order)

    def inputs(self, z: np.ndarray, name: str, values: np.ndarray) -> np.ndarray:
        """Copies of the input vector ``z`` with feature ``name`` set to each code."""
        values = np.asarray(values, dtype=float)  # pragma: no mutate (a * values: floats)
        Z = np.repeat(z[None, :], len(values), axis=0)
        f = self.space[name]
        for k, spec in self.specs_of.get(name, []):
            if spec.kind == "affine":
                Z[:, k] = spec.a * values + spec.b
            elif spec.kind == "indicator":
                Z[:, k] = [float(f.categories[int(v)] == spec.level) for v in values]
            elif spec.kind == "levels":
                value_of = spec.values()
                Z[:, k] = [value_of[f.categories[int(v)]] for v in values]
        return Z

    def slope(self, name: str) -> np.ndarray:
        """Per model input, how much it moves per unit of numeric feature ``name``'s
        code (``a`` of its affine inputs, 0 elsewhere)."""
        out = np.zeros(self.n_inputs)
        for k, spec in self.specs_of.get(name, []):
            if spec.kind == "affine":
                out[k] = spec.a
        return out
