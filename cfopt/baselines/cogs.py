r"""CoGS: counterfactual search by a genetic algorithm (Virgolin & Fracaros 2023, §5.3.5).

A candidate :math:`z` is a vector of genes, one per raw feature (a numeric code or a
category; :mod:`cfopt.baselines._genes`), minimising the loss of the paper's Eq. 9

.. math:: L(z) = \tfrac12\,\gamma(z, x) + \tfrac12\,\frac{\|z - x\|_0}{d}
                 + \mathbb 1[f(z) \notin T],

:math:`\gamma` Gower's distance (range-normalised absolute change of numeric features,
mismatch of categoricals, averaged over the :math:`d` features) — so :math:`L < 1`
exactly for valid candidates. Optional robustness terms (§5.4.1):

* ``robust="C"``: :math:`\gamma` also counts undoing the maximal C-setback (Def. 4,
  :mod:`cfopt.space.perturbations`): each changed numeric feature adds
  :math:`\min(p_i(z_i), |z_i - x_i|)/R_i`, :math:`p_i` the annotated perturbation
  against the intervention at :math:`z_i`; a changed categorical its annotation lets
  switch away adds 1 (the cost of :math:`\delta(z - W_{max}, x)`);
* ``robust="K"``: adds :math:`1 - \text{K-robustness score}` (Eq. 8): the fraction of
  ``m`` (64) uniform samples of the K-neighbourhood (Def. 5: kept features moved within
  their annotated perturbation, changed features at :math:`z`) that the model still
  classifies as a target class;
* ``robust="CK"``: both.

The samples follow :func:`cfopt.space.perturbations.sample_k_neighbourhood` and the setback
:func:`cfopt.space.perturbations.setback_cost`, vectorised over the population.

The algorithm (defaults are the paper's Table 3):

1. **Initialisation** of ``population`` (1000) candidates: each gene is copied from
   :math:`x` with probability :math:`2/d`, else drawn uniformly from its plausible
   interval (numeric codes; integral codes rounded) or its categories.
2. Each **generation** (at most ``generations``, 100): offspring by **uniform
   crossover** of random parent pairs (each gene from either parent with probability
   ½), then **mutation** of each mutable gene with probability :math:`1/d_{mut}`
   (:math:`d_{mut}` the number of mutable features): a categorical switches to another
   category uniformly; a numeric code moves by :math:`r\,(max_i - min_i)`,
   :math:`r \sim U[-s/2, s/2]` with :math:`s` = ``mutation_scale`` (0.25), and is clipped
   into its plausible interval. **Selection**: ``population`` binary tournaments
   (size 2) on parents ∪ offspring, with **elitism** (the best candidate always
   survives).
3. **Early stop on convergence**: when the elite's loss has not improved for
   ``patience`` (30) generations (the paper does not state its criterion; on six
   COMPAS points with an MLP, 30 gave the same losses as running all 100
   generations, 10 up to 3 % worse).

**Plausibility by construction**: every gene stays within its feature's bounds;
immutable genes equal :math:`x`'s; increase-only (decrease-only) genes never fall below
(rise above) :math:`x`'s — initialisation and mutation draw and clip within those
intervals, and crossover only mixes plausible parents gene by gene.

The result is the elite, re-predicted by the model on exactly the returned raw row.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..results.counterfactual import Counterfactual
from ..results.serialize import json_value
from ..results.status import Status
from ..space.perturbations import can_switch_away
from ..space.space import FeatureSpace
from ..space.validate import as_frame
from ._genes import Genes, label_predictor, model_classes, target_labels

ROBUSTNESS = (None, "C", "K", "CK")


class CoGS:
    r"""Counterfactual search by CoGS (see the module docstring).

    Model-agnostic: only the model's ``predict`` is used.

    Args:
        model: anything with ``predict`` on model-input rows (``space.transform(X)``),
            an sklearn ``Pipeline`` fitted on raw rows, or a model cfopt parses.
        space: the :class:`~cfopt.FeatureSpace`: bounds (the intervals genes are drawn
            from), ranges (Gower's :math:`R_i`), immutable / increase-only /
            decrease-only features (the plausibility constraints), and for ``robust``
            the perturbation annotations.
        population, generations: (1000, 100).
        tournament: tournament size (2).
        mutation_scale: :math:`s` of the numeric mutation (0.25).
        patience: generations without improvement of the elite before stopping (30).
        robust: ``None``, ``"C"``, ``"K"`` or ``"CK"``.
        m: K-neighbourhood samples per candidate (64).
        seed: seed of each query's random numbers (same query, same answer).

    Raises:
        ValueError: unknown ``robust``, non-positive sizes, ``mutation_scale`` not
            positive, ``robust`` with a space that has no perturbation annotation.
        TypeError: a model without ``predict`` that cfopt cannot parse.
    """

    def __init__(self, model: Any, space: FeatureSpace, *, population: int = 1000,
                 generations: int = 100, tournament: int = 2, mutation_scale: float = 0.25,
                 patience: int = 30, robust: str | None = None, m: int = 64,
                 seed: int = 0) -> None:
        if robust not in ROBUSTNESS:
            raise ValueError(f"robust must be one of {ROBUSTNESS}, got {robust!r}")
        for name, value in (("population", population), ("generations", generations),
                            ("tournament", tournament), ("patience", patience), ("m", m)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if population < 2:
            raise ValueError(f"population must be at least 2, got {population}")
        if not (math.isfinite(mutation_scale) and mutation_scale > 0):
            raise ValueError(f"mutation_scale must be positive, got {mutation_scale!r}")
        self.genes = Genes(space)
        if robust and all(f.perturbation is None for f in space):
            raise ValueError(f"robust={robust!r} needs perturbation annotations in the feature "
                             f"space (e.g. cfopt.datasets.load_virgolin(...).space)")
        self.model, self.space = model, space
        self.population, self.generations, self.tournament = population, generations, tournament
        self.mutation_scale, self.patience = float(mutation_scale), patience
        self.robust, self.m, self.seed = robust, m, seed
        self._predict = label_predictor(model, space)
        self.classes_ = model_classes(model, self._predict)
        self._perturbation = [f.perturbation for f in space]

    # ------------------------------------------------------------------ plausibility
    def _interval(self, g0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per gene, the plausible interval around the factual's genes ``g0``."""
        g = self.genes
        lo, hi = g.lower.copy(), g.upper.copy()
        lo[g.direction > 0] = g0[g.direction > 0]
        hi[g.direction < 0] = g0[g.direction < 0]
        lo[g.immutable], hi[g.immutable] = g0[g.immutable], g0[g.immutable]
        return lo, hi

    def _uniform(self, lo: np.ndarray, hi: np.ndarray, shape: tuple[int, int],
                 rng: np.random.Generator) -> np.ndarray:
        """Genes uniform in [lo, hi] (categoricals: uniform level, integral codes
        uniform among the integers)."""
        g = self.genes
        integral = g.integral
        lo_i, hi_i = np.ceil(lo - 1e-9), np.floor(hi + 1e-9)
        G = np.where(integral, lo_i + np.floor(rng.random(shape) * (hi_i - lo_i + 1)),
                     lo + rng.random(shape) * (hi - lo))
        return np.minimum(G, np.where(integral, hi_i, hi))

    # ------------------------------------------------------------------ loss
    def _loss(self, G: np.ndarray, g0: np.ndarray, labels: tuple,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Loss (Eq. 9 with the robustness terms) and validity of each candidate."""
        g = self.genes
        valid = self._valid(G, labels)
        gower = g.gower(G, g0)
        if self.robust and "C" in self.robust:
            gower = gower + self.setback(G, g0).mean(axis=1)
        loss = 0.5 * gower + 0.5 * g.l0(G, g0) / g.d + (~valid)
        if self.robust and "K" in self.robust:
            loss = loss + 1.0 - self.k_scores(G, g0, labels, rng)
        return loss, valid

    def _valid(self, G: np.ndarray, labels: tuple) -> np.ndarray:
        predicted = [json_value(p) for p in self._predict(self.genes.inputs(G))]
        return np.isin(np.array(predicted, dtype=object), np.array(labels, dtype=object))

    def setback(self, G: np.ndarray, g0: np.ndarray) -> np.ndarray:
        r"""Per candidate and feature, the Gower units of undoing the maximal C-setback:
        :math:`\min(p_i(z_i), |z_i - x_i|) / R_i` for a changed numeric feature
        (:math:`p_i = p^-_i` when :math:`z_i > x_i`, else :math:`p^+_i`), 1 for a changed
        categorical whose annotation lets it switch away, else 0."""
        g = self.genes
        out = np.zeros(G.shape)
        for i, (f, p) in enumerate(zip(self.space, self._perturbation)):
            if p is None:
                continue
            z, changed = G[:, i], G[:, i] != g0[i]
            if not p.is_numeric:
                away = np.array([can_switch_away(f, f.categories[int(k)] if f.labelled
                                                 else f.from_code(k)) for k in z])
                out[:, i] = changed & away
                continue
            room = np.where(z > g0[i], p.down(z), p.up(z))
            out[:, i] = np.where(changed, np.minimum(room, np.abs(z - g0[i])), 0.0) / g.spread[i]
        return out

    def k_neighbours(self, G: np.ndarray, g0: np.ndarray, rng: np.random.Generator
                     ) -> np.ndarray:
        """``m`` uniform K-neighbours of each candidate, shape (len(G), m, d): kept
        annotated features drawn within their perturbation (numeric: the interval
        clipped to the bounds, integral codes among the integers; categorical: an
        annotated category), changed features at the candidate's value."""
        g = self.genes
        n = len(G)
        S = np.repeat(G[:, None, :], self.m, axis=1)
        for i, (f, p) in enumerate(zip(self.space, self._perturbation)):
            if p is None:
                continue
            kept = G[:, i] == g0[i]
            if not kept.any():
                continue
            if not p.is_numeric:
                levels = np.array([f.to_code(c) if not f.is_onehot else f.categories.index(c)
                                   for c in p.categories], dtype=float)
                draw = levels[rng.integers(0, len(levels), (n, self.m))]
            else:
                v = G[:, i]
                lo = np.maximum(g.lower[i], v - p.down(v))
                hi = np.minimum(g.upper[i], v + p.up(v))
                if g.integral[i]:
                    lo, hi = np.ceil(lo - 1e-9), np.floor(hi + 1e-9)
                    draw = lo[:, None] + np.floor(rng.random((n, self.m))
                                                  * (hi - lo + 1)[:, None])
                else:
                    draw = lo[:, None] + rng.random((n, self.m)) * (hi - lo)[:, None]
            S[:, :, i] = np.where(kept[:, None], draw, S[:, :, i])
        return S

    def k_scores(self, G: np.ndarray, g0: np.ndarray, labels: tuple,
                 rng: np.random.Generator) -> np.ndarray:
        """K-robustness score (Eq. 8) of each candidate: the fraction of its ``m``
        K-neighbours predicted as a target class."""
        S = self.k_neighbours(G, g0, rng)
        valid = self._valid(S.reshape(-1, self.genes.d), labels)
        return valid.reshape(len(G), self.m).mean(axis=1)

    # ------------------------------------------------------------------ search
    def explain(self, x: pd.DataFrame | pd.Series | Mapping, target: Any = None
                ) -> Counterfactual:
        """The best counterfactual CoGS finds for one raw row ``x``.

        Args:
            x: one row (DataFrame, Series or dict) in raw units with category labels.
            target: a class label, a list of labels, or ``None`` (any other class).

        Returns:
            a :class:`~cfopt.Counterfactual`, status ``FEASIBLE`` with the verified
            elite (a heuristic proves nothing; ``objective`` is its loss, ``distances``
            its Gower distance and L0), or ``NO_SOLUTION`` without a point.
            ``details``: generations run, model evaluations, the K-score / setback of
            the elite when ``robust``.
        """
        t0 = time.perf_counter()
        frame = as_frame(x)
        if len(frame) != 1:
            raise ValueError(f"explain takes one row, got {len(frame)}; loop over the rows")
        factual = self.space.validate(frame, check_bounds=False).reset_index(drop=True)
        g = self.genes
        g0 = g.of_frame(factual)[0]
        factual_class = json_value(np.asarray(self._predict(g.inputs(g0)))[0])
        labels = target_labels(target, factual_class, self.classes_)
        rng = np.random.default_rng(self.seed)
        lo, hi = self._interval(g0)
        mutable = hi > lo
        N, d = self.population, g.d

        P = self._uniform(lo, hi, (N, d), rng)
        copy = rng.random((N, d)) < 2.0 / d
        P[copy] = np.broadcast_to(g0, (N, d))[copy]
        loss, valid = self._loss(P, g0, labels, rng)
        evaluations, generation, stale = N, 0, 0
        best = float(loss.min())
        while generation < self.generations and stale < self.patience:
            generation += 1
            children = self._vary(P, g0, lo, hi, mutable, rng)
            child_loss, child_valid = self._loss(children, g0, labels, rng)
            evaluations += N
            pool = np.vstack([P, children])
            pool_loss = np.concatenate([loss, child_loss])
            pool_valid = np.concatenate([valid, child_valid])
            chosen = self._select(pool_loss, rng)
            P, loss, valid = pool[chosen], pool_loss[chosen], pool_valid[chosen]
            stale = stale + 1 if loss.min() >= best else 0
            best = min(best, float(loss.min()))
        elite = int(np.argmin(loss))
        return self._answer(P[elite], float(loss[elite]), bool(valid[elite]), g0, labels,
                            factual, factual_class, rng,
                            {"generations": generation, "evaluations": evaluations}, t0)

    def _vary(self, P: np.ndarray, g0: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              mutable: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Uniform crossover of random parent pairs, then per-gene mutation."""
        g = self.genes
        N, d = P.shape
        mates = P[rng.permutation(N)]
        children = np.where(rng.random((N, d)) < 0.5, P, mates)
        n_mutable = int(mutable.sum())
        if not n_mutable:
            return children
        hit = (rng.random((N, d)) < 1.0 / n_mutable) & mutable
        categorical = hit & g.categorical
        if categorical.any():
            rows, cols = np.nonzero(categorical)
            shift = 1 + np.floor(rng.random(len(rows)) * (g.n_levels[cols] - 1))
            children[rows, cols] = (children[rows, cols] + shift) % g.n_levels[cols]
        numeric = hit & ~g.categorical
        if numeric.any():
            r = rng.uniform(-self.mutation_scale / 2, self.mutation_scale / 2, (N, d))
            moved = children + r * (g.upper - g.lower)
            children = np.where(numeric, moved, children)
            children[:, g.integral & ~g.categorical] = np.rint(
                children[:, g.integral & ~g.categorical])
            children = np.clip(children, lo, hi)
        return children

    def _select(self, loss: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``population`` tournaments on the pool, the pool's best kept (elitism)."""
        entrants = rng.integers(0, len(loss), (self.population, self.tournament))
        winners = entrants[np.arange(self.population), loss[entrants].argmin(axis=1)]
        winners[0] = int(np.argmin(loss))
        return winners

    def _answer(self, genes: np.ndarray, loss: float, valid: bool, g0: np.ndarray,
                labels: tuple, factual: pd.DataFrame, factual_class: Any,
                rng: np.random.Generator, details: dict[str, Any], t0: float
                ) -> Counterfactual:
        g = self.genes
        row = g.frame(genes[None, :])
        predicted = json_value(np.asarray(self._predict(self.space.encode(row)))[0])
        verified = valid and predicted in labels
        G = genes[None, :]
        if self.robust and "C" in self.robust:
            details["setback"] = float(self.setback(G, g0).sum())
        if self.robust and "K" in self.robust:
            details["k_score"] = float(self.k_scores(G, g0, labels, rng)[0])
        return Counterfactual(
            factual=factual, counterfactual=row if verified else None, target=labels,
            factual_class=factual_class, predicted_class=predicted,
            status=Status.FEASIBLE if verified else Status.NO_SOLUTION, verified=verified,
            objective=loss if verified else None, bound=None,
            distances={"gower": float(g.gower(G, g0)[0]), "l0": float(g.l0(G, g0)[0])}
            if verified else {},
            total_time=time.perf_counter() - t0, solver="cogs",
            message="" if verified else "no candidate of the final population is valid",
            details=details)

    def __repr__(self) -> str:
        return (f"CoGS(population={self.population}, generations={self.generations}, "
                f"tournament={self.tournament}, mutation_scale={self.mutation_scale}, "
                f"patience={self.patience}, robust={self.robust!r}, m={self.m})")


__all__ = ["CoGS", "ROBUSTNESS"]
