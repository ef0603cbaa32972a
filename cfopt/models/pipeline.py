"""scikit-learn ``Pipeline`` / ``ColumnTransformer`` preprocessing as exact input specs.

Supported steps: ``StandardScaler``, ``MinMaxScaler``, ``MaxAbsScaler``,
``OneHotEncoder`` (any ``drop``, ``handle_unknown``; no infrequent categories),
``SimpleImputer`` (the identity: cfopt rejects missing values before any solve),
``"passthrough"`` and ``"drop"``, composed inside ``ColumnTransformer`` and nested
``Pipeline`` s, ahead of any supported final estimator. Each transformed column is an
exact function of one raw column (``a * x + b`` or a category indicator), so the
user hands over the pipeline trained on the raw DataFrame; verification calls the
pipeline's own ``predict`` on the raw counterfactual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import sparse

from ..encoding import InputSpec
from ..errors import UnsupportedModelError
from .base import ModelAdapter

if TYPE_CHECKING:
    from ..features import FeatureSpace


@dataclass(frozen=True)
class _Column:
    """A transformed column: ``a * raw + b`` of ``source``, or its indicator of
    ``level`` (``level`` set), or the constant ``b`` (``source`` None)."""

    source: str | None
    a: float = 1.0
    b: float = 0.0
    level: Any = None
    indicator: bool = False


def _affine(cols: list[_Column], a: np.ndarray, b: np.ndarray, step: str) -> list[_Column]:
    out = []
    for c, ak, bk in zip(cols, a, b):
        if c.indicator:
            raise UnsupportedModelError(f"step {step!r} scales one-hot columns; put scalers "
                                        f"before the OneHotEncoder")
        out.append(_Column(c.source, c.a * ak, c.b * ak + bk))
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
        if step == "drop":
            return []
        raise UnsupportedModelError(f"pipeline step {where}{step!r} is not supported")
    if step is None:
        return cols
    if name == "Pipeline":
        for sub_name, sub in step.steps:
            cols = _apply(sub, cols, f"{where}{sub_name}/", encoded)
        return cols
    if name == "StandardScaler":
        mean = step.mean_ if step.with_mean else np.zeros(len(cols))
        scale = step.scale_ if step.with_std else np.ones(len(cols))
        return _affine(cols, 1.0 / np.asarray(scale), -np.asarray(mean) / np.asarray(scale),
                       label)
    if name == "MinMaxScaler":
        if getattr(step, "clip", False):
            raise UnsupportedModelError(f"step {label!r}: MinMaxScaler(clip=True) is not "
                                        f"linear")
        return _affine(cols, np.asarray(step.scale_), np.asarray(step.min_), label)
    if name == "MaxAbsScaler":
        return _affine(cols, 1.0 / np.asarray(step.scale_), np.zeros(len(cols)), label)
    if name == "SimpleImputer":
        return cols
    if name == "OneHotEncoder":
        if any(v is not None and len(v) for v in getattr(step, "infrequent_categories_",
                                                           []) or []):
            raise UnsupportedModelError(f"step {label!r}: infrequent-category grouping is "
                                        f"not supported")
        drop = getattr(step, "drop_idx_", None)
        out = []
        for i, (c, cats) in enumerate(zip(cols, step.categories_)):
            if c.indicator or c.a != 1.0 or c.b != 0.0:
                raise UnsupportedModelError(f"step {label!r} must receive raw columns")
            encoded[c.source] = ({v.item() if isinstance(v, np.generic) else v for v in cats},
                                 step.handle_unknown != "error")
            for j, level in enumerate(cats):
                if drop is not None and drop[i] is not None and j == drop[i]:
                    continue
                level = level.item() if isinstance(level, np.generic) else level
                out.append(_Column(c.source, level=level, indicator=True))
        return out
    if name == "ColumnTransformer":
        if getattr(step, "sparse_output_", False):
            pass  # sparse or dense, the columns are the same
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
                                f"SimpleImputer, ColumnTransformer, passthrough and drop")


def _select(columns: Any, names: list[str], where: str) -> list[str]:
    if isinstance(columns, str):
        columns = [columns]
    if isinstance(columns, slice):
        return names[columns]
    selected = []
    for c in np.atleast_1d(np.asarray(columns, dtype=object)):
        if isinstance(c, (bool, np.bool_)):
            raise UnsupportedModelError(f"{where}: boolean column masks are not supported")
        selected.append(names[int(c)] if isinstance(c, (int, np.integer)) else str(c))
    return selected


class PipelineAdapter(ModelAdapter):
    """A fitted sklearn ``Pipeline``: preprocessing steps then a supported estimator."""

    def __init__(self, pipeline: Any) -> None:
        from .registry import parse_model

        if not hasattr(pipeline, "feature_names_in_"):
            raise UnsupportedModelError("the Pipeline was not fitted on a pandas DataFrame; "
                                        "fit it on the raw DataFrame so its columns are named")
        *pre, (_, final) = pipeline.steps
        self.model = pipeline
        self.raw_columns = [str(c) for c in pipeline.feature_names_in_]
        cols = [_Column(c) for c in self.raw_columns]
        self._encoded: dict[str, tuple[set, bool]] = {}
        for step_name, step in pre:
            cols = _apply(step, cols, f"{step_name}/", self._encoded)
        self.final = parse_model(final)
        if len(cols) != self.final.n_inputs:
            raise UnsupportedModelError(f"the preprocessing yields {len(cols)} columns but the "
                                        f"final estimator takes {self.final.n_inputs}")
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
            if not c.indicator:
                if f.is_onehot or (f.labelled and f.kind.value != "ordinal"):
                    raise UnsupportedModelError(f"column {f.name!r} holds labels but reaches "
                                                f"the estimator without a OneHotEncoder")
                specs.append(InputSpec("affine", f.name, c.a, c.b))
            elif f.is_onehot:
                specs.append(InputSpec("indicator", f.name, level=c.level)
                             if c.level in f.categories else InputSpec("constant", b=0.0))
            elif f.labelled and len(f.categories) == 2 and c.level in f.categories:
                code_one = f.categories.index(c.level) == 1
                specs.append(InputSpec("affine", f.name, 1.0 if code_one else -1.0,
                                       0.0 if code_one else 1.0))
            else:
                raise UnsupportedModelError(
                    f"the OneHotEncoder expands column {f.name!r}, which the feature space "
                    f"declares {f.kind.value}; declare it categorical "
                    f"(FeatureSpace.from_frame(..., kinds={{{f.name!r}: 'categorical'}}))")
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
