r"""The greedy incumbent of a tree-ensemble query (:func:`greedy_tree_counterfactual`).

From the factual, each step tries every single-feature move to a split side of the
ensemble (the largest value going left / the smallest going right of every threshold on
that feature's inputs, mapped back to raw codes) and every category switch, evaluated in
one batch on the float64 ensemble. If some move reaches the target with twice the
margin, the cheapest such move ends the walk; otherwise the move with the best ratio of
score gain to objective increase is taken. A descent then moves one changed feature at a
time back toward the factual (to a split side or the factual's own value) while the
target stays met, cheapest point first; a swap puts one changed feature back at the
factual's value, walks and descends again without it, and keeps the cheaper point (the
walk is myopic: a category switch of weight 1 where numeric moves cost a fifth).

**The user's rules** (issue 37). The objective the walk minimises is the MILP's
distance plus the user's objective term when it is a sum of one function per feature;
every move keeps each such inequality of the declared blocks and of the user's own
constraints that the factual meets (:func:`~cfopt.query.separable.walk_rules`), so the
walk's point is a point of the declared problem where those are its only rules. When
the rules leave no way to the target, the walk runs again without them, and its point
only guesses the radius of the optimum (:func:`cfopt.query.ladder.ascend`).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from ...formulations.validity import logit_scores, score_targets
from ...models.trees import TreeEnsemble
from ...space.encoding import CodeEncoder, encode
from ..separable import Rule, SeparableForm, walk_rules

if TYPE_CHECKING:
    from ...problem import CounterfactualModel

#: candidate moves per feature and step of the heuristic: the nearest on each side of the
#: factual and an even spread over the others (a default forest on Adult has ~20,000
#: split values on one feature, and every candidate is a pass through every tree)
MAX_MOVES = 64


def _target_score(m: CounterfactualModel, out: np.ndarray) -> np.ndarray:
    """How much each row of outputs meets the target by (>= margin: valid in the MILP)."""
    return logit_scores(out, m.adapter.decision, score_targets(m.adapter, m.target))


class _Encoder(CodeEncoder):
    """The walk's :class:`~cfopt.space.encoding.CodeEncoder` with the objective of raw
    codes, vectorised over candidate moves of one feature."""

    def __init__(self, m: CounterfactualModel) -> None:
        super().__init__(m.space, m.input_specs)
        self.weights = np.array([m.weights[f.name] for f in self.features])
        self.terms = m.objective_terms

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
                out += coef * weighted.max(axis=1, initial=0.0)  # pragma: no mutate (rows nonempty)
        return out


def _moves(m: CounterfactualModel, enc: _Encoder, name: str, x0: float,
           split_values: dict[int, np.ndarray]) -> np.ndarray:
    """Candidate codes of one feature: the split sides of its inputs (raw codes)."""
    f = m.space[name]
    if f.is_onehot:
        return np.arange(len(f.categories), dtype=float)  # pragma: no mutate (int codes alike)
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
    query, the factual's codes ``c0``, the candidate codes of each mutable feature, and
    the rules it keeps with their values at ``c`` (module docstring)."""

    def __init__(self, m: CounterfactualModel, ensemble: TreeEnsemble,
                 rules: list[Rule], term: SeparableForm | None) -> None:
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
        self.term = term
        # the inequalities the factual meets: every move keeps them
        self.rules = [r for r in rules if r.lower != r.upper and
                      r.excess(np.array([r.form.value(m, self._named(self.c0))]))[0] == 0]
        self.refresh()

    def _named(self, codes: np.ndarray) -> dict[str, float]:
        return {f.name: float(v) for f, v in zip(self.enc.features, codes)}

    def refresh(self) -> None:
        """The rules' values and the user's term at ``c``."""
        named = self._named(self.c)
        self.values = np.array([r.form.value(self.m, named) for r in self.rules])
        self.term_value = 0.0 if self.term is None else self.term.value(self.m, named)

    def delta(self) -> np.ndarray:
        """Per feature, the move from the factual: |code - code0|, categories 0/1."""
        return np.where(self.onehot, self.c != self.c0, np.abs(self.c - self.c0))

    def cost(self) -> float:
        return float(self.enc.objective(self.delta()[None, :])[0]) + self.term_value

    def _change(self, form: SeparableForm, name: str, i: int, codes: np.ndarray
                ) -> np.ndarray:
        """How ``form`` changes when feature ``name`` (index ``i``) moves to ``codes``."""
        return form.part(self.m, name, codes) - form.part(self.m, name, self.c[i:i + 1])

    def kept(self, name: str, i: int, codes: np.ndarray) -> np.ndarray:
        """The codes of feature ``name`` to which a move keeps every rule."""
        keep = np.ones(len(codes), dtype=bool)
        for rule, value in zip(self.rules, self.values):
            if name in rule.form.features:
                keep &= rule.excess(value + self._change(rule.form, name, i, codes)) == 0
        return codes[keep]

    def moves(self, closer: bool) -> tuple[list[tuple[int, float]], np.ndarray, np.ndarray,
                                           np.ndarray]:
        """Every single-feature move that keeps the rules (``closer``: of a changed
        feature, strictly toward its factual value, the factual's own included) as
        ``(feature, code)`` with the inputs, target scores and objectives of the points
        they reach."""
        enc, c, c0 = self.enc, self.c, self.c0
        delta = self.delta()
        n_changed = int((delta > 0).sum())
        batches, owners, terms = [], [], []
        for name, codes in self.candidates.items():
            i = enc.index[name]
            if closer:
                if delta[i] == 0:
                    continue
                codes = np.append(codes, c0[i])
                codes = codes[codes == c0[i] if self.onehot[i]
                              else np.abs(codes - c0[i]) < delta[i]]
            codes = self.kept(name, i, np.unique(codes[codes != c[i]]))
            if not len(codes) or (delta[i] == 0 and n_changed >= self.cap):
                continue
            batches.append(enc.inputs(self.z, name, codes))
            owners.extend((i, float(v)) for v in codes)
            if self.term is not None:
                terms.append(self._change(self.term, name, i, codes))
        if not batches:
            return [], np.empty((0, len(self.z))), np.empty(0), np.empty(0)
        Z = np.vstack(batches)
        scores = _target_score(self.m, self.ensemble.outputs(Z))
        D = np.repeat(delta[None, :], len(owners), axis=0)
        for r, (i, v) in enumerate(owners):
            D[r, i] = float(v != c0[i]) if self.onehot[i] else abs(v - c0[i])
        costs = enc.objective(D) + self.term_value
        if terms:
            costs += np.concatenate(terms)
        return owners, Z, scores, costs

    def take(self, owner: tuple[int, float], z: np.ndarray, score: float) -> None:
        self.c[owner[0]] = owner[1]
        self.z = z
        self.score = score
        self.refresh()

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
                ratio = np.full(len(gain), np.inf)  # a move that costs nothing first
                paid = extra > 0
                ratio[paid] = gain[paid] / extra[paid]
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
        other.refresh()
        return other


def greedy_tree_counterfactual(m: CounterfactualModel, max_steps: int = 30
                               ) -> pd.DataFrame | None:
    """A cheap counterfactual of the current query for a tree-ensemble model (raw row,
    verified by the real model, within bounds and actionability), or ``None``: the walk,
    the descent and the swaps of the module docstring, ``max_steps`` moves each at most,
    keeping the user's rules; one that meets every declared constraint and the user's
    own when it finds one, else the walk's point without the rules (a guess)."""
    ensemble = m.adapter.structure
    if not isinstance(ensemble, TreeEnsemble) or m.factual is None or not m.target:
        return None
    rules, term = walk_rules(m)
    guesses = []
    for kept in ([rules, []] if rules else [rules]):
        walk = _Walk(m, ensemble, kept, term)
        rows = _walked(m, walk, max_steps)
        admitted = [row for row in rows if not m.violations(row)]
        if admitted:
            return admitted[0]
        guesses += rows
    return guesses[0] if guesses else None


def _walked(m: CounterfactualModel, walk: _Walk, max_steps: int) -> list[pd.DataFrame]:
    """The points of one walk, its descent and its swaps that the real model classifies
    as a target and that meet the feature space (the descended one first)."""
    if not walk.reach(max_steps):
        return []
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
    rows = []
    for codes in (walk.c, walked):  # the real model decides (float32 splits)
        row = walk.enc.row(codes)
        if m.is_target(m.classify(row)[0]) and not m.space_violations(row):
            rows.append(row)
    return rows
