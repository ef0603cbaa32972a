r"""One counterfactual query of a tree ensemble as a CP-SAT model (OCEAN's CP model).

Parmentier & Vidal 2021 ("Optimal counterfactual explanations in tree ensembles", ICML)
encode a tree ensemble exactly over integer threshold levels; cfopt's version:

* **Features** as levels (:mod:`.levels`); a split is a literal of its feature's level
  variable (``level <= p``) or of its categories (the sum of their booleans).
* **Trees** in flow form (OCEAN §4.1, as :mod:`cfopt.formulations.tree_regions` builds
  them for the MILP): the root's flow is 1, an internal node with both children kept has
  a boolean equal to the sum of its children's, and a child implies its side of the
  node's split; a leaf's boolean is its flow. Only the leaves :func:`search
  <cfopt.formulations.tree_regions.search>` keeps are built (reachable under
  actionability and within the heuristic's radius: every point of objective at most the
  radius reaches kept leaves, the argument of :mod:`~cfopt.formulations.tree_regions`).
* **Validity**: the model's outputs are ``init + sum of the chosen leaves' values``
  (:class:`~cfopt.models.trees.TreeEnsemble`: averaged class probabilities of a forest,
  boosting's margins); the target wins by the MILP's margin :math:`\mu` (binary: the
  signed score; multiclass: a chosen target class beats every other class; regression:
  the interval shrunk by :math:`\mu`). CP-SAT needs integers: each row
  :math:`\sum c_i y_i \ge r` becomes :math:`\sum \lceil S c_i \rceil y_i \ge \lfloor S r
  \rfloor` (:math:`S` a power of two, products exact, :math:`r` exact), which every
  point of the real row satisfies: a *relaxation*.
* **Objective** :math:`a\,\text{L1} + b\,\text{L0} + c\,\text{L∞}`, each level's and
  category's cost rounded *down* at the scale :math:`C`: the CP optimum divided by
  :math:`C` is a lower bound on the declared optimum, and the decoded point's own
  objective is recomputed by the caller (:mod:`cfopt.query.claims` decides what it proves).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from ...formulations.tree_regions import ForestIndex, TreeRegion
from ...models.trees import TreeEnsemble
from ...space.feature import Feature
from ...space.space import FeatureSpace
from .levels import (
    CategoryLevels,
    NumericLevels,
    actionable,
    category_levels,
    goes_left,
    numeric_levels,
)

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

    from ...problem import CounterfactualModel

#: the validity rows' integer scale: their largest sum near 2**30. With 2**36 (leaf
#: coefficients near 1e10), CP-SAT 9.15's presolve proved a wrong optimum of a 7-tree
#: forest (0.9167 where 0.8333 is feasible; right without presolve): coefficients this
#: small keep any product of two within int64
_ROW_MAGNITUDE = 2.0 ** 30
#: the objective's integer scale: the largest objective near 2**34 (rounding each
#: feature's cost down then loses ~1e-10 of it)
_OBJECTIVE_MAGNITUDE = 2.0 ** 34


@dataclass
class Actionability:
    """The actionability in force (the MILP's components that are active: a diagnosis
    relaxes them by deactivating them)."""

    immutable: set[str]
    direction: dict[str, str]
    max_changes: int | None
    #: some declared actionability is relaxed (deactivated)
    relaxed: bool = False

    @classmethod
    def of(cls, m: CounterfactualModel) -> Actionability:
        space = m.space
        immutable = {f.name for f in space if f.immutable and m.immutable[f.name].active}
        direction = {}
        for f in space:
            if f.is_onehot or f.immutable:
                continue
            group = {"increase": m.increase_only, "decrease": m.decrease_only}.get(f.direction)
            direction[f.name] = f.direction if group is not None and group[f.name].active \
                else "any"
        cap = m.component("max_changes")
        limit = int(pyo.value(m.max_changes_limit)) if cap is not None and cap.active else None
        relaxed = any(not c.active for group in (m.immutable, m.increase_only,
                                                  m.decrease_only) for c in group.values())
        return cls(immutable, direction, limit, relaxed or (cap is not None and limit is None))


@dataclass
class QueryModel:
    """The CP model of one query and how to read a point off its solution."""

    cp: cp_model.CpModel
    space: FeatureSpace
    numeric: list[tuple[NumericLevels, Any]] = field(default_factory=list)
    categorical: list[tuple[CategoryLevels, list[Any]]] = field(default_factory=list)
    cost_scale: float = 1.0

    def decode(self, solver: cp_model.CpSolver) -> pd.DataFrame:
        """The raw row of the solution (no rounding after this: the caller verifies it)."""
        row: dict[str, Any] = {f.name: None for f in self.space}
        for levels, var in self.numeric:
            row[levels.feature.name] = levels.feature.from_code(
                levels.decode(int(solver.value(var))))
        for levels, bools in self.categorical:
            chosen = next(i for i, b in zip(levels.allowed, bools) if solver.boolean_value(b))
            row[levels.feature.name] = levels.feature.categories[chosen]
        # pragma: no mutate start (row's keys are the space's names, in order)
        return pd.DataFrame([row], columns=self.space.names)
        # pragma: no mutate end

    def hint(self, m: CounterfactualModel, index: ForestIndex, row: pd.DataFrame) -> None:
        """Hint CP-SAT with a raw point (the verified heuristic's)."""
        inputs = m.adapter.model_inputs(m.space, row)[0]
        values = row.iloc[0]
        for levels, var in self.numeric:
            level = levels.level_of(inputs, index)
            if level in levels.admissible():
                self.cp.add_hint(var, level)
        for levels, bools in self.categorical:
            own = levels.feature.categories.index(values[levels.feature.name])
            for i, b in zip(levels.allowed, bools):
                self.cp.add_hint(b, int(i == own))


def build(m: CounterfactualModel, index: ForestIndex, regions: Sequence[TreeRegion],
          rules: Actionability) -> QueryModel:
    """The CP model of ``m``'s current query on the kept leaves ``regions``."""
    from ortools.sat.python import cp_model

    cp = cp_model.CpModel()
    q = QueryModel(cp, m.space)
    q.cost_scale = 2.0 ** math.floor(math.log2(_OBJECTIVE_MAGNITUDE / max(
        m.max_objective, 1e-12)))  # pragma: no mutate (max_objective >= 1: 1 + a bound)
    literal = _features(m, index, regions, rules, q)
    ensemble: TreeEnsemble = m.adapter.structure
    leaves = _trees(cp, ensemble, regions, literal)
    _validity(m, cp, ensemble, leaves)
    return q


@dataclass
class _Costs:
    """The objective's integer terms per feature (L1 cost, change indicator, weighted
    move for L∞) and the largest weighted move."""

    l1: list[Any] = field(default_factory=list)
    changes: list[Any] = field(default_factory=list)
    moves: list[Any] = field(default_factory=list)
    top: int = 0


def _features(m: CounterfactualModel, index: ForestIndex, regions: Sequence[TreeRegion],
              rules: Actionability, q: QueryModel) -> dict[int, Any]:
    """The feature variables, their costs (objective set on ``q.cp``) and the literal of
    every used cut (cut id -> literal: the input goes left)."""
    cp, specs = q.cp, m.input_specs
    true = cp.new_bool_var("true")  # pragma: no mutate (a name: no effect on solutions)
    cp.add(true == 1)
    by_input: dict[int, list[int]] = {}
    for c in sorted({c for r in regions for _, c, _, _ in r.nodes}):
        by_input.setdefault(int(index.cut_input[c]), []).append(c)
    library = m.adapter.model_inputs(m.space, m.factual)[0]
    literal: dict[int, Any] = {}
    costs = _Costs()
    for f in m.space:
        mine = [(k, s) for k, s in enumerate(specs) if s.feature == f.name]
        if f.is_onehot:
            _categorical(m, q, f, mine, rules, index, by_input, literal, costs, true)
        else:
            _numeric(m, q, f, mine, rules, index, by_input, literal, costs, library)
    for k, cs in by_input.items():  # inputs no feature moves: the library's side
        for c in cs:
            if c not in literal:
                literal[c] = true if index.cut(c).goes_left(specs[k].b) else true.Not()
    if rules.max_changes is not None:
        cp.add(sum(costs.changes) <= rules.max_changes)
    terms, C = m.objective_terms, q.cost_scale
    objective = sum(costs.l1) + math.floor(C * terms.get("l0", 0.0)) * sum(costs.changes)
    if terms.get("linf", 0.0) > 0:
        largest = cp.new_int_var(0, costs.top,
                                 "linf")  # pragma: no mutate (a name: no effect on solutions)
        for t in costs.moves:
            cp.add(largest >= t)
        objective = objective + largest
    cp.minimize(objective)
    return literal


def _categorical(m: CounterfactualModel, q: QueryModel, f: Feature, mine: list, rules:
                 Actionability, index: ForestIndex, by_input: dict[int, list[int]],
                 literal: dict[int, Any], costs: _Costs, true: Any) -> None:
    """A categorical feature: one boolean per admissible category, its costs, and the
    literals of the splits on its inputs (indicators, ordinal codes)."""
    cp, C, terms, w = q.cp, q.cost_scale, m.objective_terms, m.weights[f.name]
    inputs = [(k, np.array([float(lv == s.level) for lv in f.categories])
               if s.kind == "indicator" else np.array([s.values()[lv] for lv in f.categories]))
              for k, s in mine if s.kind in ("indicator", "levels")]
    own = f.categories.index(m.factual.iloc[0][f.name])
    levels = category_levels(f, own, f.name in rules.immutable)
    bools = [cp.new_bool_var(f"{f.name}={f.categories[i]}") for i in levels.allowed]
    cp.add_exactly_one(bools)
    q.categorical.append((levels, bools))
    switched = sum(bools[i] for i, c in enumerate(levels.allowed) if c != own)
    costs.l1.append(math.floor(C * terms.get("l1", 0.0) * w) * switched)
    costs.changes.append(switched)
    move = math.floor(C * terms.get("linf", 0.0) * w)
    costs.moves.append(move * switched)
    costs.top = max(costs.top, move)
    for k, values in inputs:
        for c in by_input.get(k, []):
            left = [bools[i] for i, cat in enumerate(levels.allowed)
                    if goes_left(index, c, float(values[cat]))]
            literal[c] = _sum_literal(cp, left, len(bools), true)


def _numeric(m: CounterfactualModel, q: QueryModel, f: Feature, mine: list, rules:
             Actionability, index: ForestIndex, by_input: dict[int, list[int]],
             literal: dict[int, Any], costs: _Costs, library: np.ndarray) -> None:
    """A numeric feature: its level variable, its costs, and the literals of the splits
    on its affine inputs (``level <= p``: the low side of break ``p``)."""
    from ortools.sat.python.cp_model import Domain

    cp, C, terms = q.cp, q.cost_scale, m.objective_terms
    affine = [(k, s.a, s.b) for k, s in mine if s.kind == "affine" and s.a != 0]
    x0 = f.to_code(m.factual.iloc[0][f.name])
    rng = actionable(f, x0, f.name in rules.immutable, rules.direction.get(f.name, "any"))
    cuts = [c for k, _, _ in affine for c in by_input.get(k, [])]
    levels = numeric_levels(f, affine, cuts, index, x0, rng, m.weights[f.name], library)
    var = cp.new_int_var_from_domain(Domain.FromValues(levels.admissible()),
                                     f"level_{f.name}")
    q.numeric.append((levels, var))
    dist = [levels.distance(v) for v in range(levels.n_levels)]
    costs.l1.append(_element(cp, var, [math.floor(C * terms.get("l1", 0.0) * d)
                                       for d in dist]))
    moves = [math.floor(C * terms.get("linf", 0.0) * d) for d in dist]
    costs.moves.append(_element(cp, var, moves))
    costs.top = max(costs.top, max(moves))
    changed = cp.new_bool_var(f"changed_{f.name}")
    cp.add(var == levels.own).only_enforce_if(changed.Not())
    cp.add(var != levels.own).only_enforce_if(changed)
    costs.changes.append(changed)
    for p, brk in enumerate(levels.breaks):
        low = cp.new_bool_var(f"{f.name}<=#{p}")
        cp.add(var <= p).only_enforce_if(low)
        cp.add(var >= p + 1).only_enforce_if(low.Not())
        for c, _, left_is_low in brk.cuts:
            literal[c] = low if left_is_low else low.Not()


def _element(cp: cp_model.CpModel, var: Any, table: list[int]) -> Any:
    """An integer variable equal to ``table[var]`` (a constant when it is)."""
    if len(set(table)) == 1:
        return table[0]
    target = cp.new_int_var(min(table), max(table),
                            "")  # pragma: no mutate (a name: no effect on solutions)
    cp.add_element(var, table, target)
    return target


def _sum_literal(cp: cp_model.CpModel, bools: list[Any], n: int, true: Any) -> Any:
    """A literal true iff one of ``bools`` is (exactly one of the ``n`` is true)."""
    if not bools:
        return true.Not()
    if len(bools) == n:
        return true
    if len(bools) == 1:
        return bools[0]
    b = cp.new_bool_var("")  # pragma: no mutate (a name: no effect on solutions)
    cp.add(b == sum(bools))
    return b


def _trees(cp: cp_model.CpModel, ensemble: TreeEnsemble, regions: Sequence[TreeRegion],
           literal: dict[int, Any]) -> list[tuple[list[int], list[Any]]]:
    """Each tree's kept leaves and their booleans, in flow form (module docstring)."""
    out = []
    for tree, region in zip(ensemble.trees, regions):
        if not region.leaves:  # no admissible leaf: the query is infeasible
            cp.add_bool_or([])
            out.append(([], []))
            continue
        ys = [cp.new_bool_var("") for _ in region.leaves]  # pragma: no mutate (names)
        ref: dict[int, Any] = dict(zip(region.leaves, ys))
        for node, c, lkept, rkept in region.nodes:  # children precede parents
            left, right = ref.get(int(tree.left[node])), ref.get(int(tree.right[node]))
            lit = literal[c]
            if lkept:
                cp.add_implication(left, lit)
            if rkept:
                cp.add_implication(right, lit.Not())
            if lkept and rkept:
                ref[node] = cp.new_bool_var("")  # pragma: no mutate (a name)
                cp.add(ref[node] == left + right)
            else:
                ref[node] = left if lkept else right
        cp.add(ref[0] == 1)
        out.append((region.leaves, ys))
    return out


def _validity(m: CounterfactualModel, cp: cp_model.CpModel, ensemble: TreeEnsemble,
              leaves: list[tuple[list[int], list[Any]]]) -> None:
    """The target rows (module docstring), relaxed to integers."""
    adapter = m.adapter
    mu = Fraction(float(pyo.value(m.margin)))
    k = ensemble.n_outputs
    rows: list[tuple[np.ndarray, Fraction, Any]] = []  # (output weights u, r, enforced by)
    if adapter.decision == "regression":
        low, high = m.target
        if math.isfinite(low):
            rows.append((np.eye(k)[0], Fraction(low) + mu, None))
        if math.isfinite(high):
            rows.append((-np.eye(k)[0], -(Fraction(high) - mu), None))
    elif adapter.decision == "sign":
        sign = 1.0 if adapter.class_index(m.target[0]) == 1 else -1.0
        rows.append((sign * np.eye(k)[0], mu, None))
    else:
        targets = [adapter.class_index(t) for t in m.target]
        others = [j for j in range(k) if j not in targets]
        choice = [cp.new_bool_var(f"target_{c}") for c in targets] if len(targets) > 1 \
            else [None]
        if len(targets) > 1:
            cp.add_exactly_one(choice)
        for c, pick in zip(targets, choice):
            for j in others:
                rows.append((np.eye(k)[c] - np.eye(k)[j], mu, pick))
    for u, r, pick in rows:
        _at_least(cp, ensemble, leaves, u, r - sum(Fraction(float(v)) * Fraction(
            float(i)) for v, i in zip(u, ensemble.init) if v), pick)


def _at_least(cp: cp_model.CpModel, ensemble: TreeEnsemble,
              leaves: list[tuple[list[int], list[Any]]], u: np.ndarray, rhs: Fraction,
              pick: Any) -> None:
    """``sum_t u . value_t[leaf_t] >= rhs`` relaxed to integers (module docstring),
    enforced by ``pick`` when given."""
    coefs = [tree.value[kept] @ u if kept else np.zeros(0)
             for tree, (kept, _) in zip(ensemble.trees, leaves)]
    total = sum(float(np.abs(c).max(initial=0.0)) for c in coefs) + abs(float(rhs))
    scale = 2.0 ** math.floor(math.log2(_ROW_MAGNITUDE / max(total, 1e-300)))
    expr = []
    for c, (_, ys) in zip(coefs, leaves):
        ints = np.ceil(c * scale).astype(np.int64)  # exact products: a power of two
        expr.extend(int(v) * y for v, y in zip(ints, ys) if v)
    row = cp.add(sum(expr) >= math.floor(rhs * Fraction(scale)))
    if pick is not None:
        row.only_enforce_if(pick)
