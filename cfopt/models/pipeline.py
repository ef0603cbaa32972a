r"""scikit-learn ``Pipeline`` / ``ColumnTransformer`` preprocessing as exact input specs.

Supported steps: ``StandardScaler``, ``MinMaxScaler``, ``MaxAbsScaler``,
``OneHotEncoder`` (any ``drop``, ``handle_unknown``; no infrequent categories),
``OrdinalEncoder`` (no infrequent categories; a category unknown to it needs
``handle_unknown="use_encoded_value"`` with an integer ``unknown_value``),
``SimpleImputer`` (the identity: cfopt rejects missing values before any solve, so
neither it nor ``encoded_missing_value`` ever acts), ``"passthrough"`` and ``"drop"``
(fitted ``ColumnTransformer`` s hold passthrough as the identity
``FunctionTransformer``, ``func=None``: accepted, any other function refused), composed
inside ``ColumnTransformer`` and nested ``Pipeline`` s, ahead of any supported final
estimator. Each transformed column is an exact function of one raw column: ``a * x +
b``, a category indicator, or ``a * c_l + b`` with :math:`c_l` the ``OrdinalEncoder``'s
code of category :math:`l` (its index in ``categories_``): the ``levels`` spec
:math:`\sum_l (a c_l + b)\,\text{onehot}_{f,l}` for a categorical feature, and for an
ordinal or labelled binary feature, whose code :math:`k` is the label's position, the
affine ``a * (c_0 + k d) + b`` when its labels' codes are :math:`c_0 + k d` (refused
otherwise). The user hands over the pipeline trained on the raw DataFrame; verification
calls the pipeline's own ``predict`` on the raw counterfactual.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import sparse

from ..errors import UnsupportedModelError
from ..space.encoding import InputSpec
from .base import ModelAdapter

if TYPE_CHECKING:
    from ..space.feature import Feature
    from ..space.space import FeatureSpace


@dataclass(frozen=True)
class _Column:
    """A transformed column: ``a * raw + b`` of ``source``, or its indicator of
    ``level`` (``indicator``), or ``a * c + b`` with ``c`` the index of the raw category
    in ``categories`` (an ``OrdinalEncoder``'s; ``unknown``: the code of other
    categories, ``None`` when they are an error), or the constant ``b`` (``source``
    None)."""

    source: str | None
    a: float = 1.0
    b: float = 0.0
    level: Any = None
    indicator: bool = False
    categories: tuple | None = None
    unknown: float | None = None


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _affine(cols: list[_Column], a: np.ndarray, b: np.ndarray, step: str) -> list[_Column]:
    out = []
    for c, ak, bk in zip(cols, a, b):
        if c.indicator:
            raise UnsupportedModelError(f"step {step!r} scales one-hot columns; put scalers "
                                        f"before the OneHotEncoder")
        out.append(replace(c, a=c.a * ak, b=c.b * ak + bk))
    return out


def _check_raw(c: _Column, label: str) -> None:
    if c.indicator or c.categories is not None or c.a != 1.0 or c.b != 0.0:
        raise UnsupportedModelError(f"step {label!r} must receive raw columns")


def _check_frequent(step: Any, label: str) -> None:
    if any(v is not None and len(v) for v in getattr(step, "infrequent_categories_", ())):
        raise UnsupportedModelError(f"step {label!r}: infrequent-category grouping "
                                    f"(min_frequency / max_categories) is not supported; "
                                    f"fit the encoder without it")


def _ordinal(step: Any, cols: list[_Column], label: str) -> list[_Column]:
    """An ``OrdinalEncoder``: column ``i`` becomes the index of the raw category in
    ``categories_[i]`` (``unknown_value`` for others under
    ``handle_unknown="use_encoded_value"``)."""
    _check_frequent(step, label)
    unknown = None
    if step.handle_unknown == "use_encoded_value":
        unknown = float(step.unknown_value)
    out = []
    for c, cats in zip(cols, step.categories_):
        _check_raw(c, label)
        out.append(_Column(c.source, categories=tuple(_plain(v) for v in cats),
                           unknown=unknown))
    return out


def _apply(step: Any, cols: list[_Column], where: str,
           encoded: dict[str, tuple[set, bool]]) -> list[_Column]:
    """Columns after ``step``; ``encoded`` collects, per one-hot encoded source column,
    (the encoder's categories, whether it ignores unknown ones)."""
    name = type(step).__name__
    label = f"{where}{name}"
    if isinstance(step, str):
        if step == "passthrough":
            return cols
        if step == "drop":  # pragma: no mutate (unreachable: a Pipeline takes no 'drop' step)
            return []  # (kept for safety; a ColumnTransformer's are skipped before)
        raise UnsupportedModelError(f"pipeline step {where}{step!r} is not supported")
    if step is None:
        return cols
    if name == "Pipeline":
        for sub_name, sub in step.steps:
            cols = _apply(sub, cols, f"{where}{sub_name}/", encoded)
        return cols
    if name == "FunctionTransformer":
        if step.func is None:  # the identity (a fitted ColumnTransformer's passthrough):
            return cols  # its other parameters only name or validate the columns
        func = getattr(step.func, "__name__", repr(step.func))
        raise UnsupportedModelError(f"step {label!r} applies the function {func!r}, which "
                                    f"cfopt cannot encode exactly; only the identity "
                                    f"FunctionTransformer (func=None, 'passthrough') is "
                                    f"supported")
    if name == "StandardScaler":
        mean = step.mean_ if step.with_mean else np.zeros(len(cols))
        scale = step.scale_ if step.with_std else np.ones(len(cols))
        return _affine(cols, 1.0 / np.asarray(scale), -np.asarray(mean) / np.asarray(scale),
                       label)
    if name == "MinMaxScaler":
        if getattr(step, "clip", False):  # pragma: no mutate (has it since sklearn 0.24)
            raise UnsupportedModelError(f"step {label!r}: MinMaxScaler(clip=True) is not "
                                        f"linear")
        return _affine(cols, np.asarray(step.scale_), np.asarray(step.min_), label)
    if name == "MaxAbsScaler":
        return _affine(cols, 1.0 / np.asarray(step.scale_), np.zeros(len(cols)), label)
    if name == "SimpleImputer":
        return cols
    if name == "OrdinalEncoder":
        return _ordinal(step, cols, label)
    if name == "OneHotEncoder":
        _check_frequent(step, label)
        drop = getattr(step, "drop_idx_", None)  # pragma: no mutate (a fitted one has it)
        out = []
        for i, (c, cats) in enumerate(zip(cols, step.categories_)):
            _check_raw(c, label)
            encoded[c.source] = ({_plain(v) for v in cats}, step.handle_unknown != "error")
            for j, level in enumerate(cats):
                if drop is not None and drop[i] is not None and j == drop[i]:
                    continue
                out.append(_Column(c.source, level=_plain(level), indicator=True))
        return out
    if name == "ColumnTransformer":
        by_name = {c.source: c for c in cols}
        names = list(by_name)
        out = []
        for t_name, transformer, columns in step.transformers_:
            if transformer == "drop":
                continue
            selected = _select(columns, names, f"{where}{t_name}")
            out.extend(_apply(transformer, [by_name[n] for n in selected],
                              f"{where}{t_name}/", encoded))
        return out
    raise UnsupportedModelError(f"pipeline step {label!r} is not supported; cfopt encodes "
                                f"StandardScaler, MinMaxScaler, MaxAbsScaler, OneHotEncoder, "
                                f"OrdinalEncoder, SimpleImputer, ColumnTransformer, "
                                f"passthrough (the identity FunctionTransformer) and drop")


def _select(columns: Any, names: list[str], where: str) -> list[str]:
    if isinstance(columns, str):
        columns = [columns]
    if isinstance(columns, slice):
        return names[columns]
    selected = []
    # sklearn's column lists hold one type, which numpy keeps with or without dtype=object
    values = np.asarray(columns, dtype=object)  # pragma: no mutate (one type: kept anyway)
    for c in np.atleast_1d(values):
        if isinstance(c, (bool, np.bool_)):
            raise UnsupportedModelError(f"{where}: boolean column masks are not supported")
        selected.append(names[int(c)] if isinstance(c, (int, np.integer)) else str(c))
    return selected


def _ordinal_spec(f: Feature, c: _Column) -> InputSpec:
    r"""The spec of an ``OrdinalEncoder`` column ``c`` (``a * code + b``) of feature
    ``f``: ``levels`` for a categorical feature; for an ordinal or labelled binary one,
    ``affine`` in its code ``k`` (the label's position) when the encoder's codes are
    :math:`c_0 + k\,d`; anything else is refused."""
    if not f.labelled:
        raise UnsupportedModelError(
            f"the OrdinalEncoder encodes column {f.name!r}, which the feature space declares "
            f"{f.kind.value} (numbers, no categories); declare it categorical "
            f"(FeatureSpace.from_frame(..., kinds={{{f.name!r}: 'categorical'}}))")
    index = {level: k for k, level in enumerate(c.categories)}
    codes = []
    for level in f.categories:
        if level in index:
            codes.append(index[level])
        elif c.unknown is None:
            raise ValueError(f"category {level!r} of feature {f.name!r} is unknown to the "
                             f"pipeline's OrdinalEncoder (handle_unknown='error')")
        elif math.isnan(c.unknown):
            raise UnsupportedModelError(
                f"the OrdinalEncoder maps category {level!r} of feature {f.name!r}, unknown "
                f"to it, to NaN (unknown_value=nan), which no model input can take; give "
                f"it an integer unknown_value or fit it on every category")
        else:
            codes.append(int(c.unknown))
    if f.is_onehot:
        return InputSpec("levels", f.name, c.a, c.b, codes=tuple(zip(f.categories, codes)))
    d = _step(codes)
    if d is not None:
        return InputSpec("affine", f.name, c.a * d, c.a * codes[0] + c.b)
    raise UnsupportedModelError(
        f"the OrdinalEncoder codes the {f.kind.value} feature {f.name!r} in the order "
        f"{list(c.categories)}, not as a linear function of its label order "
        f"{list(f.categories)}; declare it categorical "
        f"(FeatureSpace.from_frame(..., kinds={{{f.name!r}: 'categorical'}})) or give it "
        f"the encoder's order (categories={{{f.name!r}: {list(c.categories)!r}}})")


def _step(values: Sequence[float]) -> float | None:
    r"""``d`` when ``values`` are :math:`v_0 + k\,d` for k = 0, 1, ...; else ``None``."""
    d = values[1] - values[0]
    return d if all(v == values[0] + k * d for k, v in enumerate(values)) else None


def _raw_spec(f: Feature, c: _Column) -> InputSpec:
    r"""The spec of a column ``c`` (``a * x + b`` of the raw value ``x``) of a numeric or
    ordinal feature ``f``, affine in its code: an ordinal's code :math:`k` is the
    position of its label, so its labels must be the numbers :math:`l_0 + k\,d` (the
    input is then :math:`a d\,k + a l_0 + b`); anything else is refused."""
    if not f.labelled:
        return InputSpec("affine", f.name, c.a, c.b)
    labels = f.categories
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in labels):
        d = _step(labels)
        if d is not None:
            return InputSpec("affine", f.name, c.a * d, c.a * labels[0] + c.b)
    raise UnsupportedModelError(
        f"column {f.name!r} reaches the estimator as its raw labels {list(labels)}, which "
        f"are no evenly spaced numbers, while cfopt encodes the ordinal feature by its "
        f"labels' positions; encode it with an OrdinalEncoder or declare it categorical")


def _reaches_zero(spec: InputSpec, space: FeatureSpace) -> bool:
    """Whether the input ``spec`` computes can be exactly 0 within ``space``."""
    if spec.kind == "constant":
        return spec.b == 0
    if spec.kind == "levels":
        return any(spec.a * c + spec.b == 0 for _, c in spec.codes)
    f = space[spec.feature]
    if spec.a == 0:
        return spec.b == 0
    zero = -spec.b / spec.a
    if f.labelled:
        return zero in range(len(f.categories))
    return f.lower <= zero <= f.upper and (not f.is_integral or float(zero).is_integer())


def _sparse_output(step: Any) -> bool:
    """Whether a fitted preprocessing step outputs a sparse matrix."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    if isinstance(step, Pipeline):
        return _sparse_output(step.steps[-1][1])
    if isinstance(step, ColumnTransformer):
        return bool(step.sparse_output_)
    if isinstance(step, OneHotEncoder):
        return bool(step.sparse_output)
    return False


class PipelineAdapter(ModelAdapter):
    """A fitted sklearn ``Pipeline``: preprocessing steps then a supported estimator."""

    def __init__(self, pipeline: Any, final: ModelAdapter | None = None) -> None:
        """``final``: the final estimator already parsed (default: :func:`parse_model`
        of it), e.g. an :class:`~cfopt.models.isolation.IsolationForestAdapter`."""
        from .registry import parse_model

        if not hasattr(pipeline, "feature_names_in_"):
            raise UnsupportedModelError("the Pipeline was not fitted on a pandas DataFrame; "
                                        "fit it on the raw DataFrame so its columns are named")
        *pre, (_, last) = pipeline.steps
        self.model = pipeline
        self.raw_columns = [str(c) for c in pipeline.feature_names_in_]
        cols = [_Column(c) for c in self.raw_columns]
        self._encoded: dict[str, tuple[set, bool]] = {}
        for step_name, step in pre:
            cols = _apply(step, cols, f"{step_name}/", self._encoded)
        self.final = final if final is not None else parse_model(last)
        if len(cols) != self.final.n_inputs:
            raise UnsupportedModelError(f"the preprocessing yields {len(cols)} columns but the "
                                        f"final estimator takes {self.final.n_inputs}")
        #: inputs where the estimator reads an exact 0 of its sparse input as missing
        self._zero_is_missing = self.final.read_zero_as_missing(
            [c.indicator for c in cols]) if pre and _sparse_output(pre[-1][1]) else []
        self.columns = cols
        self.structure = self.final.structure
        self.classes = self.final.classes
        self.decision = self.final.decision

    @property
    def kind(self) -> str:
        return f"Pipeline({self.final.kind})"

    def input_specs(self, space: FeatureSpace) -> list[InputSpec]:
        """The preprocessing as input specs over the feature space's features."""
        missing = [c for c in self.raw_columns if c not in space]
        extra = [n for n in space.names if n not in self.raw_columns]
        if missing or extra:
            raise ValueError(f"the pipeline was fitted on columns {self.raw_columns}; the "
                             f"feature space has {space.names} (missing {missing}, extra "
                             f"{extra})")
        specs = []
        for c in self.columns:
            f = space[c.source]
            if c.categories is not None:
                specs.append(_ordinal_spec(f, c))
            elif not c.indicator:
                if f.is_onehot or (f.labelled and f.kind.value != "ordinal"):
                    raise UnsupportedModelError(f"column {f.name!r} holds labels but reaches "
                                                f"the estimator without a OneHotEncoder or "
                                                f"OrdinalEncoder")
                specs.append(_raw_spec(f, c))
            elif f.is_onehot:
                specs.append(InputSpec("indicator", f.name, level=c.level)
                             if c.level in f.categories else InputSpec("constant"))  # 0
            elif f.labelled and len(f.categories) == 2 and c.level in f.categories:
                code_one = f.categories.index(c.level) == 1
                specs.append(InputSpec("affine", f.name, 1.0 if code_one else -1.0,
                                       0.0 if code_one else 1.0))
            else:
                raise UnsupportedModelError(
                    f"the OneHotEncoder expands column {f.name!r}, which the feature space "
                    f"declares {f.kind.value}; declare it categorical "
                    f"(FeatureSpace.from_frame(..., kinds={{{f.name!r}: 'categorical'}}))")
        for j in self._zero_is_missing:
            if _reaches_zero(specs[j], space):
                raise UnsupportedModelError(
                    f"the pipeline hands {self.final.kind} a sparse matrix, where an exact 0 "
                    f"of input {self.columns[j].source!r} is read as missing and goes "
                    f"another way than its value, and the feature space reaches that 0; "
                    f"give the estimator dense input (ColumnTransformer(..., "
                    f"sparse_threshold=0) or OneHotEncoder(sparse_output=False))")
        for name, (known, ignores) in self._encoded.items():
            unknown = [lv for lv in space[name].categories if lv not in known]
            if unknown and not ignores:
                raise ValueError(f"categories {unknown} of feature {name!r} are unknown to "
                                 f"the pipeline's OneHotEncoder (handle_unknown='error')")
        return specs

    def model_inputs(self, space: FeatureSpace, rows: pd.DataFrame) -> np.ndarray:
        """The final estimator's inputs of raw rows, by the pipeline's own preprocessing."""
        out = self.model[:-1].transform(rows[self.raw_columns])
        out = out.toarray() if sparse.issparse(out) else out
        return np.asarray(out, dtype=np.float64)

    def predict_rows(self, space: FeatureSpace, rows: pd.DataFrame) -> np.ndarray:
        """The pipeline's own prediction on raw rows."""
        return np.asarray(self.model.predict(rows[self.raw_columns]))

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return self.final.predict(Z)

    def output(self, Z: np.ndarray) -> np.ndarray:
        return self.final.output(Z)

    def output_from_logits(self, logits: np.ndarray) -> np.ndarray:
        return self.final.output_from_logits(logits)
