r"""Per-query leaf pruning for tree ensembles, around a heuristic counterfactual.

A tree ensemble block of moderate size (:mod:`cfopt.formulations.predictors.trees`) is built once
for the whole feature box; a large one (a default random forest) is built per query, on
the leaves within the heuristic's radius only (:func:`build_query_region`, with the
lower bound and the exactness argument of :mod:`cfopt.formulations.tree_regions`). One
query only reaches a small part of either:

1. **Incumbent** (:func:`greedy_tree_counterfactual`): from the factual, each step
   tries every single-feature move to a split side of the ensemble (the largest value
   going left / the smallest going right of every threshold on that feature's inputs,
   mapped back to raw codes) and every category switch, evaluated in one batch on the
   float64 ensemble. If some move reaches the target with twice the margin, the
   cheapest such move ends the walk; otherwise the move with the best ratio of score
   gain to objective increase is taken. A descent then moves one changed feature at a
   time back toward the factual (to a split side or the factual's own value) while the
   target stays met, cheapest point first; a swap puts one changed feature back at the
   factual's value, walks and descends again without it, and keeps the cheaper point
   (the walk is myopic: a category switch of weight 1 where numeric moves cost a
   fifth). Its objective value is :math:`r`.
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
heuristic point misses the MILP's margin or a user constraint), the caller solves the
original problem. Without a
heuristic point, :math:`r = \infty` and only actionability prunes (exact always).
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from ...formulations.predictors.trees import TreePredictorConstr
from ...formulations.tree_regions import CategoryTerm, NumericTerm, QueryRegion
from ...models.trees import TreeEnsemble
from ...space.encoding import encode
from .registry import Restricted, Restriction, register_restriction

if TYPE_CHECKING:
    from ...problem import CounterfactualModel

Box = list[tuple[float, float]]
#: candidate moves per feature and step of the heuristic: the nearest on each side of the
#: factual and an even spread over the others (a default forest on Adult has ~20,000
#: split values on one feature, and every candidate is a pass through every tree)
MAX_MOVES = 64


def _target_score(m: CounterfactualModel, out: np.ndarray) -> np.ndarray:
    """How much each row of outputs meets the target by (>= margin: valid in the MILP)."""
    adapter = m.adapter
    if adapter.is_regressor:
        low, high = m.target
        return np.minimum(out[:, 0] - low, high - out[:, 0])
    targets = [adapter.class_index(t) for t in m.target]
    if adapter.decision == "sign":
        return out[:, 0] if targets[0] == 1 else -out[:, 0]
    others = [j for j in range(out.shape[1]) if j not in targets]
    return out[:, targets].max(axis=1) - out[:, others].max(axis=1)


class _Encoder:
    """Model inputs and objective of raw feature codes (categoricals: level index),
    vectorised over candidate moves of one feature."""

    def __init__(self, m: CounterfactualModel) -> None:
        self.m = m
        self.space = m.space
        self.features = list(m.space)
        self.index = {f.name: i for i, f in enumerate(self.features)}
        self.specs_of: dict[str, list[tuple[int, object]]] = {}
        for k, spec in enumerate(m.input_specs):
            if spec.feature is not None:
                self.specs_of.setdefault(spec.feature, []).append((k, spec))
        self.weights = np.array([m.weights[f.name] for f in self.features])
        self.terms = m.objective_terms

    def codes(self, row: pd.DataFrame) -> np.ndarray:
        values = row.iloc[0]
        return np.array([f.categories.index(values[f.name]) if f.is_onehot
                         else f.to_code(values[f.name]) for f in self.features], dtype=float)

    def row(self, codes: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame([{f.name: f.categories[int(c)] if f.is_onehot else f.from_code(c)
                              for f, c in zip(self.features, codes)}],
                            columns=self.space.names)

    def inputs(self, z: np.ndarray, name: str, values: np.ndarray) -> np.ndarray:
        """Copies of the input vector ``z`` with feature ``name`` set to each code."""
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

    def objective(self, delta: np.ndarray) -> np.ndarray:
        """Objective of rows of per-feature weighted moves |code - code0| (category
        changes as 0/1) — the MILP's objective (:func:`objective_expression`)."""
        weighted = delta * self.weights
        out = np.zeros(len(delta))
        for term, coef in self.terms.items():
            if term == "l1":
                out += coef * weighted.sum(axis=1)
            elif term == "l0":
                out += coef * (delta > 0).sum(axis=1)
            else:
                out += coef * weighted.max(axis=1, initial=0.0)
        return out


def _moves(m: CounterfactualModel, enc: _Encoder, name: str, x0: float,
           split_values: dict[int, np.ndarray]) -> np.ndarray:
    """Candidate codes of one feature: the split sides of its inputs (raw codes)."""
    f = m.space[name]
    if f.is_onehot:
        return np.arange(len(f.categories), dtype=float)
    values = []
    for k, spec in enc.specs_of.get(name, []):
        if spec.kind == "affine" and spec.a != 0 and k in split_values:
            values.append((split_values[k] - spec.b) / spec.a)
    if not values:
        return np.empty(0)
    codes = np.concatenate(values)
    if f.is_integral:
        codes = np.unique(np.concatenate([np.floor(codes + 1e-9), np.ceil(codes - 1e-9)]))
    codes = codes[(codes >= f.lower) & (codes <= f.upper)]
    if f.direction == "increase":
        codes = codes[codes >= x0]
    elif f.direction == "decrease":
        codes = codes[codes <= x0]
    codes = np.unique(codes)
    if len(codes) <= MAX_MOVES:
        return codes
    near = MAX_MOVES // 4
    spread = np.linspace(0, len(codes) - 1, MAX_MOVES // 2).astype(int)
    return np.unique(np.concatenate([codes[codes < x0][-near:], codes[codes > x0][:near],
                                     codes[spread]]))


class _Walk:
    """The state of the heuristic: the current codes ``c`` and model inputs ``z`` of a
    query, the factual's codes ``c0``, and the candidate codes of each mutable feature."""

    def __init__(self, m: CounterfactualModel, ensemble: TreeEnsemble) -> None:
        self.m, self.ensemble = m, ensemble
        self.enc = enc = _Encoder(m)
        split_values = m.predictor_constr.split_values()
        self.c0 = enc.codes(m.factual)
        self.c = self.c0.copy()
        self.z = encode(m.space, m.input_specs, m.factual)[0]
        self.goal = 2.0 * float(pyo.value(m.margin))
        self.cap = m.change_cap
        self.score = float(_target_score(m, ensemble.outputs(self.z[None, :]))[0])
        self.onehot = np.array([f.is_onehot for f in enc.features])
        self.candidates = {f.name: _moves(m, enc, f.name, self.c0[enc.index[f.name]],
                                          split_values) for f in m.space if not f.immutable}

    def delta(self) -> np.ndarray:
        """Per feature, the move from the factual: |code - code0|, categories 0/1."""
        return np.where(self.onehot, self.c != self.c0, np.abs(self.c - self.c0))

    def cost(self) -> float:
        return float(self.enc.objective(self.delta()[None, :])[0])

    def moves(self, closer: bool) -> tuple[list[tuple[int, float]], np.ndarray, np.ndarray,
                                           np.ndarray]:
        """Every single-feature move (``closer``: of a changed feature, strictly toward
        its factual value, the factual's own included) as ``(feature, code)`` with the
        inputs, target scores and objectives of the points they reach."""
        enc, c, c0 = self.enc, self.c, self.c0
        delta = self.delta()
        n_changed = int((delta > 0).sum())
        batches, owners = [], []
        for name, codes in self.candidates.items():
            i = enc.index[name]
            if closer:
                if delta[i] == 0:
                    continue
                codes = np.append(codes, c0[i])
                codes = codes[codes == c0[i] if self.onehot[i]
                              else np.abs(codes - c0[i]) < delta[i]]
            codes = np.unique(codes[codes != c[i]])
            if not len(codes) or (delta[i] == 0 and n_changed >= self.cap):
                continue
            batches.append(enc.inputs(self.z, name, codes))
            owners.extend((i, float(v)) for v in codes)
        if not batches:
            return [], np.empty((0, len(self.z))), np.empty(0), np.empty(0)
        Z = np.vstack(batches)
        scores = _target_score(self.m, self.ensemble.outputs(Z))
        D = np.repeat(delta[None, :], len(owners), axis=0)
        for r, (i, v) in enumerate(owners):
            D[r, i] = float(v != c0[i]) if self.onehot[i] else abs(v - c0[i])
        return owners, Z, scores, enc.objective(D)

    def take(self, owner: tuple[int, float], z: np.ndarray, score: float) -> None:
        self.c[owner[0]] = owner[1]
        self.z = z
        self.score = score

    def reach(self, max_steps: int) -> bool:
        """Walk until the target is met with the goal margin (module docstring);
        whether it was."""
        for _ in range(max_steps):
            if self.score >= self.goal:
                return True
            owners, Z, scores, costs = self.moves(closer=False)
            if not owners:
                return False
            valid = scores >= self.goal
            if valid.any():
                best = int(np.flatnonzero(valid)[np.argmin(costs[valid])])
            else:
                gain = scores - self.score
                extra = costs - self.cost()
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.where(extra > 0, gain / np.where(extra > 0, extra, 1.0),
                                     np.inf)
                ratio = np.where(gain > 1e-12, ratio, -np.inf)
                best = int(np.argmax(ratio))
                if ratio[best] == -np.inf:  # no move improves the score
                    return False
            self.take(owners[best], Z[best], float(scores[best]))
        return self.score >= self.goal

    def descend(self, max_steps: int) -> None:
        """The cheapest valid move back toward the factual, while there is one."""
        for _ in range(max_steps):
            owners, Z, scores, costs = self.moves(closer=True)
            valid = (scores >= self.goal) & (costs < self.cost())
            if not valid.any():
                return
            best = int(np.flatnonzero(valid)[np.argmin(costs[valid])])
            self.take(owners[best], Z[best], float(scores[best]))

    def without(self, i: int) -> _Walk:
        """A copy with feature ``i`` back at the factual's value and never moved."""
        other = copy.copy(self)
        name = self.enc.features[i].name
        other.candidates = {k: v for k, v in self.candidates.items() if k != name}
        other.c = self.c.copy()
        other.c[i] = self.c0[i]
        other.z = self.enc.inputs(self.z, name, self.c0[i:i + 1])[0]
        other.score = float(_target_score(self.m, self.ensemble.outputs(other.z[None, :]))[0])
        return other


def greedy_tree_counterfactual(m: CounterfactualModel, max_steps: int = 30
                               ) -> pd.DataFrame | None:
    """A cheap counterfactual of the current query for a tree-ensemble model (raw row,
    verified by the real model, within bounds and actionability), or ``None``: the walk,
    the descent and the swaps of the module docstring, ``max_steps`` moves each at
    most."""
    ensemble = m.adapter.structure
    if not isinstance(ensemble, TreeEnsemble) or m.factual is None or not m.target:
        return None
    walk = _Walk(m, ensemble)
    if not walk.reach(max_steps):
        return None
    walked = walk.c.copy()
    walk.descend(max_steps)
    for i in np.argsort(-walk.delta() * walk.enc.weights):
        if walk.c[i] == walk.c0[i]:
            continue
        other = walk.without(int(i))  # the swap: reach the target without feature i
        if other.reach(max_steps):
            other.descend(max_steps)
            if other.cost() < walk.cost():
                walk = other
    for codes in (walk.c, walked):  # the real model decides (float32 splits)
        row = walk.enc.row(codes)
        if m.is_target(m.classify(row)[0]) and not m.violations(row):
            return row
    return None


def query_box(m: CounterfactualModel, radius: float = math.inf) -> Box:
    """Model-input intervals containing every counterfactual of objective ≤ ``radius``
    that respects the actionability constraints (module docstring, step 2)."""
    terms = m.objective_terms
    reach = math.inf
    for term in ("l1", "linf"):
        if term in terms and terms[term] > 0:
            reach = min(reach, radius / terms[term])
    space, factual = m.space, m.factual.iloc[0]
    feature_box: dict[str, tuple[float, float] | None] = {}
    for f in space:
        w = m.weights[f.name]
        if f.is_onehot:  # None: free to switch
            stays = f.immutable or (w > 0 and w > reach)
            feature_box[f.name] = (0.0, 0.0) if stays else None
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
                allowed[:] = False
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
                       coef.get("l0", 0.0), coef.get("linf", 0.0), radius)


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


register_restriction(TreePredictorConstr, TreeRestriction())
