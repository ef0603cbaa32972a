r"""Plausibility by an isolation forest's outlier score, exactly (OCEAN's constraint).

An sklearn ``IsolationForest`` (F. T. Liu, K. M. Ting, Z.-H. Zhou, "Isolation forest",
ICDM 2008) scores a point by the mean, over
its :math:`T` isolation trees, of the path length :math:`h_t(z) = d_t(z) + c(n_t(z))`:
the depth of the leaf :math:`z` reaches plus the average path length
:math:`c(n) = 2H(n-1) - 2(n-1)/n` (:math:`H(i) \approx \ln i + \gamma`; :math:`c(1) = 0`,
:math:`c(2) = 1`) of the :math:`n` training samples left in it:

.. math:: \text{score\_samples}(z) = -2^{-E[h(z)]/c(\psi)}, \qquad
          E[h(z)] = \frac1T \sum_t h_t(z),

with :math:`\psi` = ``max_samples_`` (:mod:`cfopt.models.isolation`). The score is
increasing in :math:`E[h]`, so for a threshold :math:`s_{\min} < 0`

.. math:: \text{score\_samples}(z) \ge s_{\min} \iff
          \sum_{t,l} \frac{h_{t,l}}{T}\, y_{t,l} \ge -c(\psi) \log_2(-s_{\min}),

a *linear* constraint on the leaf indicators :math:`y_{t,l}` of the forest's trees.
:class:`IsolationForestScore` embeds the forest with cfopt's tree formulation
(:mod:`cfopt.formulations.predictors.trees`: a binary per distinct split point, leaves tied to
them, sklearn's ``float32(x) <= threshold`` rule reproduced) and bounds its output,
:math:`E[h]`, from below. A split point of the forest identical to one of the model's
(same input, same sides: every split of a one-hot column, splits of an integer feature
between the same two codes) shares the model's split binary (an equality). OCEAN
(A. Parmentier, T. Vidal, "Optimal counterfactual explanations in tree ensembles", ICML
2021) uses the same constraint for plausibility. The forest's splits on the factual's
own values are treated as the model's (:meth:`IsolationForestScore.update`), and
decoding keeps the point on the split sides the solver chose for the forest
(:meth:`IsolationForestScore.feature_intervals`), so the real forest reaches the
leaves the MILP counted.

The default threshold is the forest's own ``offset_``: the counterfactual must be an
inlier by ``forest.predict`` (inlier iff ``score_samples - offset_ >= 0``). Every
returned counterfactual is checked with the forest's real ``score_samples`` on its
decoded raw row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from ..formulations.features import encode_inputs
from ..formulations.predictors import PredictorConstr, add_predictor
from ..formulations.tree_cuts import switch_key
from ..models.isolation import IsolationForestAdapter
from ..models.pipeline import PipelineAdapter
from ..space.encoding import (
    InputSpec,
    encode,
    input_moves,
    library_input,
    spec_bounds,
    spec_grids,
    spec_rounding,
)
from ..space.space import FeatureSpace
from .blocks import ConstraintBlock

if TYPE_CHECKING:
    from ..problem import CounterfactualModel


@dataclass(frozen=True)
class _Inputs:
    """How the forest's inputs come from raw rows: specs for the MILP, the forest's
    own input values (``values``; ``library``: of one input, from the MILP's value of
    it), and the real score of raw rows (``score``)."""

    specs: list[InputSpec]
    values: Callable[[pd.DataFrame], np.ndarray]
    library: Callable[[int, float], float]
    score: Callable[[pd.DataFrame], np.ndarray]


class IsolationForestScore(ConstraintBlock):
    """The counterfactual's isolation-forest score is at least a threshold (module
    docstring): ``forest.score_samples(z) >= threshold``.

    Args:
        forest: a fitted ``IsolationForest``, fitted on one of

            * the model's own inputs (a NumPy array: ``space.transform(X)`` when the
              model consumes it, a Pipeline model's transformed columns);
            * a DataFrame of numeric features of the space, by name (raw values, e.g.
              ``X[["age", "duration"]]``);
            * or an sklearn ``Pipeline`` ending in an ``IsolationForest``, fitted on the
              raw DataFrame of the space (its preprocessing as cfopt encodes a model's).
        threshold: the least ``score_samples`` allowed (< 0; the forest's ``offset_``
            by default: an inlier by ``forest.predict``).
        contamination: instead of ``threshold``, the fraction of ``data`` allowed to
            fall below it: the threshold is the ``100 * contamination`` percentile of
            ``forest.score_samples(data)`` (as sklearn sets ``offset_``).
        data: the rows ``forest.score_samples`` takes, for ``contamination``.
        formulation: the tree formulation of the forest, ``"leaf"`` or ``"threshold"``
            (:mod:`cfopt.formulations.predictors.trees`; default: ``"leaf"``).
        name: the block's name.
    """

    kind = "isolation_forest"

    def __init__(self, forest: Any, threshold: float | None = None, *,
                 contamination: float | None = None, data: Any = None,
                 formulation: str | None = None, name: str | None = None) -> None:
        super().__init__(name)
        steps = getattr(forest, "steps", None)
        self.pipeline = forest if steps is not None else None
        self.forest = steps[-1][1] if steps is not None else forest
        parsed = IsolationForestAdapter(self.forest)
        self.adapter = parsed if steps is None else PipelineAdapter(forest, final=parsed)
        if threshold is not None and contamination is not None:
            raise ValueError("give threshold or contamination, not both")
        if contamination is not None:
            if isinstance(contamination, bool) or not isinstance(contamination, (int, float)) \
                    or not 0 < contamination < 1:
                raise ValueError(f"contamination must lie in (0, 1), got {contamination!r}")
            if data is None:
                raise ValueError("contamination needs data: the rows to take the "
                                 "percentile of forest.score_samples over")
            threshold = float(np.percentile(forest.score_samples(data), 100 * contamination))
        elif data is not None:
            raise ValueError("data is used with contamination only")
        if threshold is None:
            threshold = float(self.forest.offset_)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating)) \
                or not math.isfinite(threshold):
            raise ValueError(f"threshold must be a finite number, got {threshold!r}")
        self.threshold = float(threshold)
        #: the least mean path length E[h] with score_samples >= threshold
        self.min_path_length = parsed.path_length_bound(self.threshold)
        self.formulation = formulation

    def validate(self, space: FeatureSpace) -> None:
        if self.pipeline is not None:
            self.adapter.input_specs(space)  # names the columns that do not match
            return
        names = getattr(self.forest, "feature_names_in_", None)
        if names is None:
            return  # the model's inputs: checked when built
        for name in names:
            if name not in space.names:
                raise ValueError(f"isolation forest: column {name!r} is not a feature of "
                                 f"the space {space.names}")
            f = space[name]
            if f.is_onehot or f.labelled:
                raise ValueError(f"isolation forest: column {name!r} is the {f.kind.value} "
                                 f"feature {name!r}, not numeric; fit the forest on the "
                                 f"model's inputs or in a Pipeline that encodes it")

    def _inputs(self, m: CounterfactualModel) -> _Inputs:
        space, forest = m.space, self.forest
        if self.pipeline is not None:
            pipe, adapter = self.pipeline, self.adapter
            specs = adapter.input_specs(space)
            return _Inputs(specs, lambda rows: adapter.model_inputs(
                               space,  # pragma: no mutate (a Pipeline ignores the space)
                               rows),
                           lambda j, v: library_input(adapter, space, specs, j, v),
                           lambda rows: pipe.score_samples(rows[adapter.raw_columns]))
        names = getattr(forest, "feature_names_in_", None)
        if names is not None:
            cols = [str(c) for c in names]
            return _Inputs([InputSpec("affine", c, 1.0, 0.0) for c in cols],
                           # pragma: no mutate start (dtype: the values' sides are alike)
                           lambda rows: rows[cols].to_numpy(dtype=np.float64),
                           # pragma: no mutate end
                           lambda j, v: v, lambda rows: forest.score_samples(rows[cols]))
        n, k = self.adapter.n_inputs, len(m.input_specs)
        if n != k:
            raise ValueError(f"isolation forest: fitted on {n} features, but the "
                             f"{m.adapter.kind} model takes {k} inputs; fit it on the "
                             f"model's inputs, on a DataFrame of numeric features of the "
                             f"space, or as a Pipeline on the raw DataFrame")
        return _Inputs(m.input_specs, lambda rows: m.adapter.model_inputs(space, rows),
                       m.library_input, lambda rows: forest.score_samples(
                           m.adapter.model_inputs(space, rows)))

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        try:
            inputs = self._inputs(m)
        except ValueError:
            m.del_component(block)  # no half-built block stays in the model
            raise
        specs = inputs.specs
        block.forest_inputs = inputs
        block.constr = add_predictor(
            block, self.adapter,
            encode_inputs(m, m.space, specs),  # pragma: no mutate (the space: unused)
            name="forest",
            input_bounds=spec_bounds(m.space, specs), input_grids=spec_grids(m.space, specs),
            input_rounding=spec_rounding(m.space, specs), library_input=inputs.library,
            formulation=self.formulation)
        # pragma: no mutate start (mutable: the bound is never changed after build)
        block.min_path_length = pyo.Param(mutable=True, initialize=self.min_path_length)
        # pragma: no mutate end
        block.path_length = pyo.Expression(expr=block.forest.outputs[0])
        block.score_bound = pyo.Constraint(expr=block.path_length >= block.min_path_length)
        _share_cuts(m, block, specs)
        #: per query: crossing a forest split that holds the factual counts as a change
        block.factual_split_changes = pyo.ConstraintList()

    def update(self, m: CounterfactualModel, block: pyo.Block) -> None:
        """Splits of the forest within rounding of the factual's inputs: the side the
        forest does not take counts as a change (as the model's own, see
        :meth:`~cfopt.formulations.PredictorConstr.set_factual_inputs`)."""
        inputs: _Inputs = block.forest_inputs
        specs = inputs.specs
        movable = input_moves(m.space, specs)
        own = _milp_inputs(m, specs)
        library = inputs.values(m.factual)[0]
        links = block.constr.set_factual_inputs(library, own, movable)
        block.factual_split_changes.clear()
        if m.has_change_indicators:
            for j, left, left_of in links:
                block.factual_split_changes.add(
                    m.changed[specs[j].feature] >= (1 - left_of if left else left_of))

    def feature_intervals(self, m: CounterfactualModel,
                          block: pyo.Block) -> dict[str, tuple[float, float]]:
        from ..query.solution import region_intervals

        specs = block.forest_inputs.specs
        own = _milp_inputs(m, specs)
        return region_intervals(m, specs, block.constr.input_region(own), own)

    def score(self, m: CounterfactualModel, rows: pd.DataFrame) -> np.ndarray:
        """The forest's own ``score_samples`` of raw rows of ``m``'s space (the
        constraint must be declared in ``m``)."""
        inputs: _Inputs = m.component(self.name).forest_inputs
        # pragma: no mutate start (dtype: score_samples is float64 already)
        return np.asarray(inputs.score(rows), dtype=np.float64)
        # pragma: no mutate end

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        # pragma: no mutate start (columns: every score takes its columns by name)
        value = float(self.score(m, pd.DataFrame([row], columns=m.space.names))[0])
        # pragma: no mutate end
        if value >= self.threshold:
            return []
        return [f"isolation forest {self.name!r}: score_samples {value:.6g} is below the "
                f"threshold {self.threshold:.6g} (an outlier)"]


def _milp_inputs(m: CounterfactualModel, specs: list[InputSpec]) -> np.ndarray:
    """The MILP's forest inputs of the factual (``a * code + b`` per spec)."""
    return encode(m.space, specs, m.factual)[0]


def _share_cuts(m: CounterfactualModel, block: pyo.Block, specs: list[InputSpec]) -> None:
    """``left_of`` of the forest = ``left_of`` of the model for each identical split
    point: same input spec, same MILP and sure sides (module docstring)."""
    model: PredictorConstr = m.predictor_constr
    own = model.cuts()
    if not own:  # the model is not a tree ensemble (or has no cut yet)
        return
    model_specs = m.input_specs

    def key(spec: InputSpec, cut: Any) -> tuple:  # the sides and the switching point
        return (spec, cut.left, cut.right, cut.sure_left, cut.sure_right, switch_key(cut))

    theirs = {key(model_specs[cut.input], cut): k for k, cut in own.items()}
    pairs = [(k, theirs[key(specs[cut.input], cut)]) for k, cut in block.forest.cuts.items()
             if key(specs[cut.input], cut) in theirs]
    block.shared_cuts = pyo.Constraint(range(len(pairs)), rule=lambda b, i: (
        b.forest.left_of[pairs[i][0]] == model.block.left_of[pairs[i][1]]))
