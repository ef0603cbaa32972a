"""The counterfactual MILP: one Pyomo ``ConcreteModel`` composed of the blocks in
:mod:`cfopt.formulations`, built once per (model, feature space, options) and re-solved
for every query by changing mutable parameters.

Components (documented names, for users who add their own constraints):

=====================  ==============================================================
``x[f]``               numeric feature ``f`` of the counterfactual, raw units (code)
``x0[f]``              the factual's value of ``f`` (mutable Param)
``onehot[f, l]``       1 iff categorical ``f`` takes level ``l``
``onehot0[f, l]``      the factual's one-hot (mutable Param)
``category_changed``   1 iff categorical ``f`` changes (Expression)
``onehot_sum[f]``      one level per categorical feature
``predictor``          the learned model: ``predictor.model_inputs[i]`` (expressions),
                       ``predictor.outputs[j]``; its variables ``predictor.inputs[i]`` are
                       the model inputs normalized to their box, in [0, 1]
``predictor_link[i]``  model input ``i`` = encoding of the feature variables
``validity``           the target constraint(s); ``margin``, ``target_sign`` /
                       ``target_mask`` are mutable Params
``immutable[f]``       ``x[f] == x0[f]`` (categorical: ``category_changed[f] == 0``)
``increase_only[f]``   ``x[f] >= x0[f]``;  ``decrease_only[f]``: ``x[f] <= x0[f]``
``dev[f]``             ``>= |x[f] - x0[f]|`` (L1 / L∞ objectives)
``changed[f]``         binary change indicator (L0 objective or ``max_changes``)
``max_changes``        ``sum changed <= max_changes_limit`` (mutable Param)
``linf``               weighted L∞ distance (L∞ objective)
``objective``          the distance minimised (plus the cost terms of declared
                       blocks, e.g. :class:`~cfopt.constraints.SetbackCost`)
``objective_cutoff``   ``objective <= cutoff`` (mutable Param; the objective's bound)
``factual_split_...``  ``factual_split_changes``: per query, a tree split within
                       rounding of the factual's input is crossed only by a change
``<name>``             one sub-block per declared constraint (``constraints=[...]``:
                       rules, causal equations, trust regions; see
                       :mod:`cfopt.formulations`)
=====================  ==============================================================

A constraint added to the model (``m.my_rule = pyo.Constraint(expr=...)``) takes part
in every later solve, and in the diagnosis when the problem becomes infeasible, as does
each declared constraint block.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from .constraints.blocks import ConstraintBlock
from .constraints.composition import Composition
from .errors import ModelChangedError
from .formulations.actionability import (
    actionability_violations,
    add_actionability,
    add_max_changes,
)
from .formulations.bound_tightening import BoundTighteningReport, tighten_relu_bounds
from .formulations.distances import (
    feature_weights,
    objective_expression,
    parse_objective,
    row_distances,
)
from .formulations.features import add_feature_variables, encode_inputs
from .formulations.predictors import PredictorConstr, add_predictor
from .formulations.validity import (
    add_validity,
    check_margin,
    set_target,
    set_target_interval,
    target_indices,
    target_interval,
    target_score,
)
from .models import ModelAdapter, parse_model
from .space.encoding import (
    encode,
    input_moves,
    library_input,
    space_specs,
    spec_bounds,
    spec_grids,
    spec_rounding,
)
from .space.space import FeatureSpace
from .space.validate import as_frame

#: constraint groups a diagnosis may relax (validity and feature structure never are)
ACTIONABILITY_GROUPS = ("immutable", "increase_only", "decrease_only", "max_changes")


class CounterfactualModel(Composition):
    """The counterfactual MILP for one learned model and one feature space.

    Args:
        model: the fitted model (see :func:`cfopt.formulations.add_predictor`).
        space: the :class:`~cfopt.FeatureSpace` whose ``transform`` the model consumes.
        objective: ``"l1"`` (default), ``"l0"``, ``"linf"`` or a mapping of them to
            non-negative coefficients (e.g. ``{"l1": 1, "l0": 0.1}``).
        weights: ``"range"`` (1 / data range, default), ``"mad"`` or a mapping
            feature → weight, for the L1 and L∞ terms.
        max_changes: hard cap on the number of changed features (None: no cap).
        margin: validity margin in logit units (> 0); the counterfactual's target
            logit exceeds the others (or 0) by at least this much.
        bound_tightening: ``"lp"`` (OBBT on the LP relaxation, default),
            ``"interval"`` (interval bounds only) or ``None`` (same as interval).
        constraints: declared constraint blocks
            (:class:`~cfopt.constraints.blocks.ConstraintBlock`), each added as the
            sub-block ``m.<name>`` and checked on every returned counterfactual.
        tree_formulation: tree ensembles only: ``"leaf"`` (default) or ``"threshold"``
            (:mod:`cfopt.formulations.predictors.trees`).
    """

    def __init__(self, model: Any, space: FeatureSpace, *,
                 objective: str | Mapping[str, float] = "l1",
                 weights: str | Mapping[str, float] = "range",
                 max_changes: int | None = None, margin: float = 1e-3,
                 bound_tightening: str | None = "lp",
                 constraints: Sequence[ConstraintBlock] = (),
                 tree_formulation: str | None = None) -> None:
        super().__init__(name="counterfactual")
        t0 = time.perf_counter()
        if not isinstance(space, FeatureSpace):
            raise TypeError(f"space must be a cfopt.FeatureSpace, got {type(space).__name__}")
        space = copy.deepcopy(space)  # the model is built on the space as it is now
        adapter = parse_model(model)
        self._fingerprint = adapter.fingerprint()
        specs = adapter.input_specs(space)
        if adapter.n_inputs != len(specs):
            raise ValueError(f"the {adapter.kind} model takes {adapter.n_inputs} inputs but "
                             f"the feature space encodes {space.n_inputs} "
                             f"({', '.join(space.input_names)})")
        check_margin(margin)
        #: the validity margin μ of the declared problem (a query's re-solves raise
        #: ``m.margin``, never this; its points are verified against this one)
        self.declared_margin = float(margin)
        terms = parse_objective(objective)
        weight_map = feature_weights(space, weights)
        self._space = space
        self._adapter = adapter
        self._weights, self._terms = weight_map, terms
        self._specs = specs
        self._tree_formulation = tree_formulation
        self._factual: pd.DataFrame | None = None
        self._factual_inputs: np.ndarray | None = None
        self._factual_class: Any = None
        self._target: tuple = ()

        add_feature_variables(self, space)
        self._predictor = add_predictor(
            self, adapter, encode_inputs(self, space, specs), name="predictor",
            input_bounds=spec_bounds(space, specs), input_grids=spec_grids(space, specs),
            input_rounding=spec_rounding(space, specs), library_input=self.library_input,
            formulation=tree_formulation, per_query=None)
        self.bound_tightening: BoundTighteningReport = tighten_relu_bounds(
            self, self._predictor, method=bound_tightening or "interval")
        add_actionability(self, space)
        #: built with a cap on changed features (``max_changes``)
        self.capped = max_changes is not None
        if self.capped:
            add_max_changes(self, space, _check_max_changes(max_changes, space))
        add_validity(self, self._predictor.outputs, self._predictor.output_bounds(), adapter,
                     margin)
        self.add_objective(objective_expression(self, space, terms, weight_map,
                                                indicators=self.capped))
        #: per query: crossing a tree split that holds the factual counts as a change
        self.factual_split_changes = pyo.ConstraintList()
        self._global_bounds = self._predictor.layer_bounds()
        self.close_formulation()
        for c in constraints:
            self.add_constraint(c)
        self.build_time = time.perf_counter() - t0

    # ------------------------------------------------------------------ access
    @property
    def space(self) -> FeatureSpace:
        return self._space

    @property
    def adapter(self) -> ModelAdapter:
        """The parsed learned model (its real model verifies counterfactuals)."""
        return self._adapter

    @property
    def predictor_constr(self) -> PredictorConstr:
        return self._predictor

    @property
    def factual(self) -> pd.DataFrame | None:
        return self._factual

    @property
    def factual_inputs(self) -> np.ndarray | None:
        """The MILP's model inputs of the factual (``a * code + b`` per input spec)."""
        return self._factual_inputs

    @property
    def factual_class(self) -> Any:
        return self._factual_class

    @property
    def target(self) -> tuple:
        return self._target

    @property
    def weights(self) -> dict[str, float]:
        return dict(self._weights)

    @property
    def objective_terms(self) -> dict[str, float]:
        """Coefficients of the objective's norms (``l1``, ``l0``, ``linf``)."""
        return dict(self._terms)

    @property
    def global_layer_bounds(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Pre-activation bounds of each network layer valid over the whole feature box."""
        return self._global_bounds

    @property
    def input_specs(self) -> list:
        """How each model input is computed from the raw features."""
        return list(self._specs)

    @property
    def tree_formulation(self) -> str | None:
        """The tree formulation the predictor was built with (``None``: default)."""
        return self._tree_formulation

    @property
    def uses_space_encoding(self) -> bool:
        """The model consumes ``space.transform`` (not its own preprocessing)."""
        return self._specs == space_specs(self._space)

    @property
    def has_change_indicators(self) -> bool:
        """The model has binary change indicators ``changed[f]`` (L0 or ``max_changes``)."""
        return self.capped or "l0" in self._terms

    def library_input(self, j: int, value: float) -> float:
        """The real model's own value of input ``j`` at the raw code whose MILP input is
        ``value`` (:func:`cfopt.space.encoding.library_input`)."""
        return library_input(self._adapter, self._space, self._specs, j, value)

    # ----------------------------------------------------------------- queries
    def check_model_unchanged(self) -> None:
        """Raise :class:`~cfopt.errors.ModelChangedError` if the user's model object changed
        (edited in place or refitted) since this MILP was built from it."""
        if self._fingerprint is not None and self._adapter.fingerprint() != self._fingerprint:
            raise ModelChangedError(
                f"the {self._adapter.kind} model changed (its parameters were edited or it "
                f"was refitted) after this counterfactual model was built from it; answers "
                f"would be about the old model: build a new Explainer for the changed model")

    def set_factual(self, x: pd.DataFrame | pd.Series | Mapping) -> pd.DataFrame:
        """Set the factual (one raw row); returns it validated. Raises
        :class:`~cfopt.errors.ModelChangedError` if the model changed since the build."""
        self.check_model_unchanged()
        row = self._space.validate(as_frame(x))
        if len(row) != 1:
            raise ValueError(f"explain one row at a time (got {len(row)} rows); use "
                             f"explain_many for several")
        values = row.iloc[0]
        for f in self._space:
            if f.is_onehot:
                for level in f.categories:
                    self.onehot0[f.name, level] = 1.0 if values[f.name] == level else 0.0
            else:
                self.x0[f.name] = f.to_code(values[f.name])
        self._factual = row.reset_index(drop=True)
        self._factual_class = self.classify(self._factual)[0]
        self._factual_inputs = encode(self._space, self._specs, self._factual)[0]
        self.link_factual_splits()
        self.bound_objective()  # a term reading the factual has this factual's range
        return self._factual

    def link_factual_splits(self) -> None:
        """Tree splits within rounding of the factual's input: the side the library does
        not take is reachable only by changing that feature, which the change indicators
        (L0, ``max_changes``) must count (:meth:`PredictorConstr.set_factual_inputs`)."""
        links = self._predictor.set_factual_inputs(
            self._adapter.model_inputs(self._space, self._factual)[0], self._factual_inputs,
            input_moves(self._space, self._specs))
        self.factual_split_changes.clear()
        if not self.has_change_indicators:
            return
        for j, left, left_of in links:
            changed = self.changed[self._specs[j].feature]
            self.factual_split_changes.add(changed >= (1 - left_of if left else left_of))

    def set_target(self, target: Any = None) -> tuple:
        """Set the target class(es): a label, a list of labels, or ``None`` /
        ``"opposite"`` (any class other than the factual's: the other one of a binary
        model; ``"opposite"`` is a label when the model has a class of that name); for a
        regressor, the interval ``(low, high)`` the prediction must reach (``None`` for
        an open side). Returns the target. Raises :class:`~cfopt.errors.AlreadyTargetError`
        when the factual already meets it."""
        if self._factual is None:
            raise RuntimeError("set the factual (set_factual) before the target")
        if self._adapter.is_regressor:
            low, high = target_interval(target, self._factual_class)
            set_target_interval(self, self._predictor.output_bounds(), low, high)
            self._target = (low, high)
        else:
            indices = target_indices(self._adapter, target, self._factual_class)
            set_target(self, self._adapter, indices)
            self._target = tuple(self._adapter.classes[i] for i in indices)
        for name, c in self._constraints.items():
            c.update(self, self.component(name))
        self.refresh_raw()  # the user's term at this factual; checked before any solve
        return self._target

    def describe_target(self) -> str:
        """The current target in words (``be classified as [...]`` / ``reach a
        prediction in [low, high]``)."""
        if self._adapter.is_regressor:
            low, high = self._target
            return f"reach a prediction in [{low:g}, {high:g}]"
        return f"be classified as {list(self._target)}"

    def is_target(self, prediction: Any) -> bool:
        """Whether a real-model prediction meets the current target."""
        if self._adapter.is_regressor:
            low, high = self._target
            return bool(low <= prediction <= high)
        return prediction in self._target

    def target_score(self, row: pd.DataFrame) -> float | None:
        """How far a valid raw row meets the current target
        (:func:`~cfopt.formulations.validity.target_score`), on the model's scores in
        float64 arithmetic of its parameters (what the MILP encodes and the validity
        margin μ is declared on); ``None`` for a tree ensemble (its structure's
        ``margin_scores``: the leaves carry the margin)."""
        scores = self._adapter.structure.margin_scores(
            encode(self._space, self.input_specs, row))
        if scores is None:
            return None
        return target_score(self._adapter, self._target, np.atleast_2d(scores)[0])

    @property
    def change_cap(self) -> float:
        """The current cap on changed features (``inf`` when the model has none)."""
        return float(pyo.value(self.max_changes_limit)) if self.capped else math.inf

    def set_max_changes(self, limit: int | None) -> None:
        """Change the cap on changed features (the model must have been built with one)."""
        if not self.capped:
            raise ValueError("this model was built without max_changes; pass max_changes=... "
                             "when building it to enable the cap")
        self.max_changes_limit = (len(self._space) if limit is None
                                  else _check_max_changes(limit, self._space))

    # ------------------------------------------------------------- solutions
    def decode(self) -> pd.DataFrame:
        """The current solution as a raw one-row DataFrame, repaired into the
        predictor's region and snapped (:mod:`cfopt.query.solution`; the explainer verifies
        candidates with :func:`cfopt.query.solution.verified_solution`)."""
        from .query.solution import candidates

        return candidates(self)[0]

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        """The real model's class labels for raw rows (validated; as Python scalars)."""
        return self.classify(self._space.validate(rows, check_bounds=False))

    def classify(self, rows: pd.DataFrame) -> np.ndarray:
        """:meth:`predict` for rows that are already valid (decoded or validated)."""
        labels = self._adapter.predict_rows(self._space, rows)
        return np.array([v.item() if isinstance(v, np.generic) else v for v in labels],
                        dtype=object)

    def violations(self, row: pd.DataFrame, *, witness: bool = False) -> list[str]:
        """Declared constraints (bounds, actionability, max changes, declared blocks, and
        the Pyomo constraints added to the model directly: :mod:`cfopt.constraints.raw`)
        that a raw counterfactual row violates with respect to the current factual.
        ``witness``: the model holds the solver's values of this point (the user's own
        variables are checked at them; without, a constraint using one is reported)."""
        before, after = self._factual.iloc[0], row.iloc[0]
        problems = self.space_violations(row)
        for name, c in self._constraints.items():
            if c.needs_witness and not witness:
                problems.append(f"{name!r} is checked only on a solver's point")
            else:
                problems.extend(c.violations(self, before, after))
        return problems + self.raw.problems(self, row, witness)

    def space_violations(self, row: pd.DataFrame) -> list[str]:
        """What a raw row breaks of the feature space (bounds, kinds, categories) and of
        actionability (immutable, monotone features, ``max_changes``)."""
        try:
            self._space.validate(row)
            problems = []
        except ValueError as exc:
            problems = [str(exc)]
        return problems + actionability_violations(self._space, self._factual.iloc[0],
                                                   row.iloc[0], self.change_cap)

    def distances(self, row: pd.DataFrame) -> dict[str, float]:
        """Weighted L1, L0 and weighted L∞ distances of a raw row from the factual."""
        return row_distances(self._space, self._weights, self._factual.iloc[0], row.iloc[0])


def build(model: Any, space: FeatureSpace, x: pd.DataFrame | pd.Series | Mapping | None = None,
          target: Any = None, **options: Any) -> CounterfactualModel:
    """Build the counterfactual MILP (a Pyomo ``ConcreteModel``), optionally with the
    factual ``x`` and the ``target`` already set. ``options`` are those of
    :class:`CounterfactualModel`."""
    m = CounterfactualModel(model, space, **options)
    if x is not None:
        m.set_factual(x)
        m.set_target(target)
    elif target is not None:
        raise ValueError("give the factual x together with the target")
    return m


def _check_max_changes(limit: Any, space: FeatureSpace) -> int:
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise ValueError(f"max_changes must be a positive integer, got {limit!r}")
    return int(min(limit, len(space)))

