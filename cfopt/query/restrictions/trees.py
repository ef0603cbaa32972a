r"""Per-query leaf pruning for tree ensembles, around a heuristic counterfactual.

A tree ensemble block of moderate size (:mod:`cfopt.formulations.predictors.trees`) is built once
for the whole feature box; a large one (a default random forest) is built per query, on
the leaves within the heuristic's radius only (:func:`build_query_region`, with the
lower bound and the exactness argument of :mod:`cfopt.formulations.tree_regions`). One
query only reaches a small part of either:

1. **Incumbent** (:func:`~.tree_walk.greedy_tree_counterfactual`): a greedy walk on the
   float64 ensemble from the factual over the split sides (:mod:`.tree_walk`). Its
   objective value is :math:`r`.
2. **Query box** (:func:`query_box`): any counterfactual with objective
   :math:`\le r` (objective :math:`a\,\text{L1} + b\,\text{L0} + c\,\text{L∞}`) moves
   numeric feature :math:`f` by at most :math:`\min(r/a, r/c) / w_f` raw units, and
   switches categorical :math:`f` only if :math:`w_f \le \min(r/a, r/c)`; immutable
   features stay, increase-/decrease-only features move one way. Mapped through the
   input specs, this is a box on the model inputs.
3. **Pruning** (:class:`pruned_leaves`): a leaf whose path interval misses the query
   box on some input cannot be reached by such a counterfactual; its binary is bounded
   to 0 for this solve (and freed afterwards).

The restricted problem has the same optimum as the original whenever the original
optimum is :math:`\le r`; when it is infeasible or its optimum exceeds :math:`r` (the
heuristic point misses the MILP's margin), the caller solves the original problem.
A heuristic point the declared problem does not admit (it breaks a declared or a raw
constraint) only guesses the radius: the caller climbs from it
(:func:`cfopt.query.ladder.ascend`). Without a heuristic point, :math:`r = \infty` and
only actionability prunes (exact always).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from ...formulations.predictors.trees import TreePredictorConstr
from ...formulations.tree_regions import CategoryTerm, NumericTerm, QueryRegion
from .registry import Restricted, Restriction, register_restriction
from .tree_walk import greedy_tree_counterfactual

if TYPE_CHECKING:
    from ...problem import CounterfactualModel

Box = list[tuple[float, float]]


def query_box(m: CounterfactualModel, radius: float = math.inf) -> Box:
    """Model-input intervals containing every counterfactual of objective ≤ ``radius``
    that respects the actionability constraints (module docstring, step 2)."""
    terms = m.objective_terms
    radius = m.raw.distance_radius(radius)
    reach = math.inf
    for term in ("l1", "linf"):
        if term in terms and terms[term] > 0:  # pragma: no mutate (terms are positive)
            reach = min(reach, radius / terms[term])
    space, factual = m.space, m.factual.iloc[0]
    feature_box: dict[str, tuple[float, float] | None] = {}
    for f in space:
        w = m.weights[f.name]
        if f.is_onehot:  # None: free to switch
            stays = f.immutable or (w > 0 and w > reach)
            feature_box[f.name] = (0.0, 0.0) if stays else None  # pragma: no mutate (None or not)
            continue
        x0 = f.to_code(factual[f.name])
        step = reach / w if w > 0 else math.inf
        feature_box[f.name] = f.actionable_range(x0, max(f.lower, x0 - step),
                                                 min(f.upper, x0 + step))
    box = []
    own = m.factual_inputs
    for k, (spec, (glo, ghi)) in enumerate(zip(m.input_specs,
                                               m.predictor_constr.input_bounds)):
        if spec.kind == "affine":
            lo, hi = feature_box[spec.feature]
            a, b = spec.a * lo + spec.b, spec.a * hi + spec.b
            box.append((max(glo, min(a, b)), min(ghi, max(a, b))))
        elif spec.kind in ("indicator", "levels") and feature_box[spec.feature] is not None:
            box.append((own[k], own[k]))  # the category stays: the factual's own input
        else:
            box.append((glo, ghi))
    return box


#: relative widening of :func:`query_input_box`'s sides
BOX_TOLERANCE = 1e-6


def query_input_box(m: CounterfactualModel, region: tuple[np.ndarray, np.ndarray] | None
                    = None, radius: float = math.inf) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of the master's model inputs at the current query: the box of the points
    that respect the actionability constraints
    (:func:`~cfopt.query.restrictions.trees.query_box` with no radius: immutable
    features at the factual, monotone ones on their side), each side widened by
    :data:`BOX_TOLERANCE` x (1 + |side|) (the solvers meet ``x = x̂`` within their
    feasibility tolerance), intersected with ``region`` (e.g. the plausible region's
    bounding box; default: the model's whole input box, to which the variables are
    bounded exactly). Every point the master can take lies in it; without
    actionability constraints it is ``region`` itself. ``radius``: only the points of
    objective at most ``radius`` (:func:`~cfopt.query.restrictions.trees.query_box`)."""
    lo, hi = (np.array(side, dtype=float)  # pragma: no mutate (widened to floats below)
              for side in zip(*query_box(m, radius)))
    base = region if region is not None else tuple(
        np.array(side, dtype=float)  # pragma: no mutate (input bounds are floats)
        for side in zip(*m.predictor_constr.input_bounds))
    return (np.maximum(lo - BOX_TOLERANCE * (1 + np.abs(lo)), base[0]),
            np.minimum(hi + BOX_TOLERANCE * (1 + np.abs(hi)), base[1]))

class pruned_leaves:
    """Context manager setting to 0 the upper bound of the leaves of ``block`` whose
    path misses ``box`` (a tolerance of 1e-9 x width keeps boundary leaves) and fixing
    by bounds the cut binaries the box decides (the whole box below a cut's right side:
    left, 1; above its left side: right, 0); restores the previous bounds on exit.
    (Bound changes, not ``fix``: persistent solvers re-send every constraint holding a
    variable that becomes fixed.)"""

    def __init__(self, block: pyo.Block, box: Box) -> None:
        self.block = block
        self.box = box
        self.changed: list[tuple[pyo.Var, tuple]] = []

    def _set(self, var: pyo.Var, lb: float, ub: float) -> None:
        self.changed.append((var, var.bounds))
        var.setlb(lb)
        var.setub(ub)

    def __enter__(self) -> int:
        tol = [1e-9 * max(1.0, hi - lo) for lo, hi in self.box]
        for key, path in self.block.leaf_boxes.items():
            for j, (lo, hi) in path.items():
                qlo, qhi = self.box[j]
                if lo > qhi + tol[j] or hi < qlo - tol[j]:
                    var = self.block.leaf[key]
                    self._set(var, var.lb, 0)
                    break
        pruned = len(self.changed)
        for (j, q), cut in self.block.cuts.items():
            qlo, qhi = self.box[j]
            var = self.block.left_of[j, q]
            if qhi < cut.right and var.lb != var.ub:
                self._set(var, 1, 1)
            elif qlo > cut.left and var.lb != var.ub:
                self._set(var, 0, 0)
        return pruned

    def __exit__(self, *exc: object) -> None:
        for var, (lb, ub) in reversed(self.changed):
            var.setlb(lb)
            var.setub(ub)
        self.changed.clear()


@contextlib.contextmanager
def pruned_within(m: CounterfactualModel, radius: float, details: dict[str, Any]
                  ) -> Iterator[None]:
    """Within: the tree leaves unreachable within ``radius`` (and actionability) fixed to
    0, their number in ``details["pruned_leaves"]``."""
    with pruned_leaves(m.predictor_constr.block, query_box(m, radius)) as n:
        details["pruned_leaves"] = n
        yield


def per_query(m: CounterfactualModel) -> bool:
    """Whether ``m``'s trees are built per query (:mod:`cfopt.formulations.tree_regions`)."""
    return m.predictor_constr.per_query


def query_region(m: CounterfactualModel, radius: float = math.inf) -> QueryRegion:
    """What the current query admits, as :func:`search
    <cfopt.formulations.tree_regions.search>` reads it: per feature its inputs, its
    admissible codes (bounds and actionability), factual and weight; the objective's
    coefficients and ``radius``."""
    factual = m.factual.iloc[0]
    terms: list[NumericTerm | CategoryTerm] = []
    specs = m.input_specs
    for f in m.space:
        mine = [(k, spec) for k, spec in enumerate(specs) if spec.feature == f.name]
        if f.is_onehot:
            inputs = []
            for k, spec in mine:
                if spec.kind == "indicator":
                    values = [float(level == spec.level) for level in f.categories]
                else:
                    value_of = spec.values()
                    values = [value_of[level] for level in f.categories]
                inputs.append((k, np.array(values)))
            own = f.categories.index(factual[f.name])
            allowed = np.ones(len(f.categories), dtype=bool)
            if f.immutable:
                allowed[:] = False  # pragma: no mutate (None is False in a bool array)
                allowed[own] = True
            if inputs:
                terms.append(CategoryTerm(inputs, allowed, own, m.weights[f.name]))
            continue
        inputs = [(k, spec.a, spec.b) for k, spec in mine if spec.kind == "affine" and spec.a]
        x0 = f.to_code(factual[f.name])
        lo, hi = f.actionable_range(x0)
        if inputs:
            terms.append(NumericTerm(inputs, lo, hi, x0, m.weights[f.name]))
    coef = m.objective_terms
    return QueryRegion(list(m.predictor_constr.input_bounds), terms, coef.get("l1", 0.0),
                       coef.get("l0", 0.0), coef.get("linf", 0.0),
                       m.raw.distance_radius(radius))


def build_query_region(m: CounterfactualModel, radius: float = math.inf,
                       deadline: float = math.inf) -> int:
    """Build ``m``'s trees for the current query: the leaves within ``radius`` of the
    factual (exact for every point of objective at most ``radius``; ``inf``: the whole
    declared problem); returns their number. Raises
    :class:`~cfopt.formulations.tree_regions.RegionTooLarge` past ``deadline``."""
    kept = m.predictor_constr.build_region(query_region(m, radius), deadline)
    m.link_factual_splits()
    return kept


def build_box_region(m: CounterfactualModel) -> int:
    """Build ``m``'s trees on the whole input box, actionability left out (what a
    diagnosis of an infeasible query relaxes); returns the number of leaves."""
    kept = m.predictor_constr.build_region(QueryRegion(list(m.predictor_constr.input_bounds)))
    m.link_factual_splits()
    return kept


class TreeRestriction(Restriction):
    """A tree ensemble's leaves within the radius of a greedy counterfactual: those
    beyond it fixed to 0 (an ensemble built whole), or only those built (per query;
    around a verified heuristic point the explainer builds them from the inside out,
    :mod:`cfopt.query.inner_radius`)."""

    def heuristic(self, m: CounterfactualModel) -> pd.DataFrame | None:
        return greedy_tree_counterfactual(m)

    def restrict(self, m: CounterfactualModel, candidate: pd.DataFrame | None, radius: float,
                 details: dict[str, Any], deadline: float, verified: bool) -> Restricted | None:
        if per_query(m):
            if verified and math.isfinite(radius):  # built from the inside out
                return Restricted(contextlib.nullcontext())
            details["region_leaves"] = build_query_region(m, radius, deadline)
            return Restricted(contextlib.nullcontext(), rebuilt=True)
        return Restricted(pruned_within(m, radius, details))

    def whole(self, m: CounterfactualModel, details: dict[str, Any], deadline: float) -> bool:
        if not per_query(m):
            return False
        details["region_leaves"] = build_query_region(m, math.inf, deadline)
        return True


register_restriction(TreePredictorConstr, TreeRestriction())
