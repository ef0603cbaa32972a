r"""Counterfactuals by mixed-discrete particle swarm optimisation (MD-PSO).

After Shekhar et al., "Actionable counterfactual explanations for high-dimensional data
by mixed-discrete particle swarm optimisation" (Algorithm 1), with the MD-PSO of
Chowdhury et al. (Struct. Multidisc. Optim. 47, 2013). Given the factual :math:`x_0`:

1. **Information value** (paper's Eq. 16, Appendix) of every feature on the training
   rows, the target classes counting as positives: the feature is cut into ``n_bins``
   bins (a bin per level of a categorical or of a numeric feature with at most
   ``n_bins`` distinct values, else equal-frequency bins) and

   .. math:: \mathrm{IV} = \sum_i (p_i - n_i)\,\ln\frac{p_i}{n_i},\qquad
             p_i = \frac{n_p^i + \alpha}{n_p + \alpha B},\;
             n_i = \frac{n_n^i + \alpha}{n_n + \alpha B},

   :math:`B` bins, :math:`\alpha` = ``smoothing`` (0.5) pseudo-rows per bin so that an
   empty bin gives no infinite term. The paper's printed Eq. 16 multiplies by the ratio
   :math:`p_i / n_i` itself; it lacks the logarithm of the standard (weight-of-evidence)
   form used here.
2. **Active set** :math:`\mathcal A`: the ``h`` features of largest IV among those that
   can move at :math:`x_0` (not immutable, not constant, not pinned at a bound by an
   increase- or decrease-only declaration). The others keep :math:`x_0`'s values, so
   every counterfactual changes at most ``h`` features.
3. **Box**: particles live in the [0, 1]-scaled space (:math:`u = (v - l)/(u_b - l)` of
   a numeric code :math:`v` with bounds :math:`[l, u_b]`; a categorical relaxed to a
   point of :math:`[0, 1]^m`, one coordinate per level). An active numeric feature
   with scaled value :math:`z` moves in ``box="additive"`` :math:`[z - \epsilon,
   z + \epsilon]` (default) or ``box="multiplicative"`` :math:`[z(1-\epsilon),
   z(1+\epsilon)]` (the paper), capped to [0, 1]. The multiplicative box collapses at
   :math:`z = 0` — every feature at its data minimum, e.g. a count of 0 or a binary
   at 0, can then never move — which is why the additive box is the default. Binary
   and categorical active features range over all their values. Increase-only
   (decrease-only) features are further cut at :math:`z` from below (above).
4. **MD-PSO**: ``particles`` particles (50), ``iterations`` iterations (100), velocity

   .. math:: V \leftarrow c_0 V + c_1 r_1 (P_i - X) + c_2 r_2 (P_g - X)
             + c_3 r_3 \hat V,\qquad X \leftarrow X + V,

   :math:`r_k \sim U[0, 1]` per coordinate, :math:`P_i` the particle's best,
   :math:`P_g` the swarm's best, :math:`\hat V = X - \bar X` the divergence from the
   swarm mean (the diversity-preservation term), velocities capped at the box width,
   positions clipped to the box. Discrete values are evaluated at their projection:
   integral codes rounded, each categorical block to its argmax level (a valid one-hot).
   All particles are evaluated in one call of the model (numpy, vectorised).
5. **Objective** (paper's Eq. 3–7), weighted:

   .. math:: F = w_1\,l_1 + w_2\,l_2 + w_3\,l_3 / p,

   :math:`l_1 = 0` if :math:`f(x_{cf})` is a target class, else the distance of the
   target classes' probability to the interval where :math:`f` predicts them,
   :math:`\tfrac12(\max_{c \notin T} p_c - \max_{t \in T} p_t)^+` (binary:
   :math:`(\tfrac12 - p_t)^+`); :math:`l_2` the Gower distance (range-normalised
   absolute change of numeric features, mismatch of categoricals, averaged over the
   :math:`p` features); :math:`l_3` the number of changed features. The paper sums
   them unweighted, where :math:`l_3` (a count up to :math:`p`) outweighs everything
   and an invalid point is not ruled out (:math:`x_0` itself has :math:`l_2 = l_3 = 0`
   and :math:`l_1 \le \tfrac12`, so it beats every valid point). Here :math:`l_3` is
   divided by :math:`p` (weight :math:`1/p`, the scale of :math:`l_2`, as in CoGS's
   loss), :math:`w_1 = 10` pulls invalid particles towards the decision boundary, and
   best positions are compared *feasibility first* (MD-PSO's constrained-dominance
   rule, validity as the constraint): a valid point beats every invalid one, two of
   the same kind compare by :math:`F`.
6. **Selection**: k-means (k = ``n``) on the final particle positions (active
   coordinates); from each cluster the valid particle of smallest :math:`F`. The paper
   picks a random particle per cluster, which may be invalid; here a cluster without a
   valid particle contributes nothing, so a query may get fewer than ``n`` (or no)
   counterfactuals — report coverage. Duplicates are dropped; every returned row is
   predicted again by the model exactly as returned.

Every point evaluated respects the feature space by construction: bounds,
immutability, monotone directions, integrality and one-hot validity.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..results.counterfactual import Counterfactual, CounterfactualSet
from ..results.serialize import json_value
from ..results.status import Status
from ..space.feature import Kind
from ..space.space import FeatureSpace
from ..space.validate import as_frame
from ._genes import Genes, label_predictor, model_classes, target_labels

BOXES = ("additive", "multiplicative")


def information_value(values: np.ndarray, positive: np.ndarray, n_bins: int = 10,
                      smoothing: float = 0.5) -> float:
    r"""Information value of one feature (module docstring, step 1).

    Args:
        values: the feature's values on the training rows (numbers or labels).
        positive: boolean mask of the positive rows (the target classes).
        n_bins: bins of a numeric feature with more than ``n_bins`` distinct values
            (equal-frequency; tied quantiles merged); otherwise a bin per value.
        smoothing: pseudo-rows :math:`\alpha` added to each bin of each class.
    """
    values = np.asarray(values)
    positive = np.asarray(positive, dtype=bool)
    if values.shape != positive.shape:
        raise ValueError("values and positive must have the same length")
    if positive.all() or not positive.any():
        raise ValueError("information value needs rows of both the positive and the "
                         "negative class")
    if not smoothing > 0:
        raise ValueError(f"smoothing must be positive, got {smoothing!r}")
    distinct, bins = np.unique(values, return_inverse=True)
    if values.dtype.kind in "biuf" and len(distinct) > n_bins:
        edges = np.unique(np.quantile(values.astype(float), np.linspace(0, 1, n_bins + 1)))
        bins = np.searchsorted(edges[1:-1], values.astype(float), side="right")
    n = int(bins.max()) + 1
    pos = np.bincount(bins[positive], minlength=n) + smoothing
    neg = np.bincount(bins[~positive], minlength=n) + smoothing
    p, q = pos / pos.sum(), neg / neg.sum()
    return float(((p - q) * np.log(p / q)).sum())


def _probabilities(model: Any, space: FeatureSpace, classes: tuple
                   ) -> Callable[[np.ndarray], np.ndarray] | None:
    """A function from model-input rows to class probabilities (columns in ``classes``
    order), or ``None`` when the model exposes none (then :math:`l_1` uses the label)."""
    pipeline = getattr(sys.modules.get("sklearn.pipeline"), "Pipeline", None)
    if hasattr(model, "predict_proba"):
        order = [list(map(json_value, model.classes_)).index(c) for c in classes] \
            if hasattr(model, "classes_") else list(range(len(classes)))
        if pipeline is not None and isinstance(model, pipeline):
            return lambda Z: np.asarray(model.predict_proba(space.inverse_transform(Z)))[:, order]
        return lambda Z: np.asarray(model.predict_proba(Z))[:, order]
    from ..errors import UnsupportedModelError
    from ..models import parse_model
    from ..models.base import sigmoid, softmax
    from ..models.network import ReLUNetwork

    try:
        adapter = parse_model(model)
    except (UnsupportedModelError, TypeError, ValueError):
        return None
    net = adapter.structure
    if not isinstance(net, ReLUNetwork) or adapter.decision not in ("sign", "argmax"):
        return None
    order = [list(map(json_value, adapter.classes)).index(c) for c in classes]
    if adapter.decision == "sign":
        def proba(Z: np.ndarray) -> np.ndarray:
            p1 = sigmoid(net.logits(Z)[:, 0])
            return np.column_stack([1 - p1, p1])[:, order]
        return proba
    return lambda Z: softmax(net.logits(Z))[:, order]


class MDPSO:
    r"""Counterfactual sets by MD-PSO (Shekhar et al.; see the module docstring).

    Model-agnostic: uses the model's ``predict`` (validity, and the final re-check) and,
    when available, its class probabilities (``predict_proba``, or the logits of a
    network cfopt parses) for :math:`l_1`; without them :math:`l_1` is
    :math:`\tfrac12` for every invalid point.

    Args:
        model: anything with ``predict`` on model-input rows (``space.transform(X)``),
            an sklearn ``Pipeline`` fitted on raw rows, or a model cfopt parses.
        space: the :class:`~cfopt.FeatureSpace` (encoding, bounds, actionability).
        n: counterfactuals sought per query (the number of k-means clusters; paper: 5).
        h: size of the active set (default 3; the paper tunes it and does not report it).
        epsilon: the box's ε (default 0.2).
        box: ``"additive"`` (default) or ``"multiplicative"`` (the paper's).
        particles, iterations: swarm size and iterations (paper: 50, 100).
        c0, c1, c2, c3: inertia, cognitive, social and diversity coefficients (the
            paper fixes them by cross-validation without reporting them; defaults are
            the constriction values 0.7298 and 1.4962 of Clerc & Kennedy and
            :math:`c_3 = 0.5`, which on COMPAS gave more distinct counterfactuals
            than 0.1 at similar proximity).
        weights: :math:`(w_1, w_2, w_3)` of the objective (default (10, 1, 1)).
        n_bins, smoothing: of the information value (10 bins, :math:`\alpha = 0.5`).
        seed: seed of each query's random numbers (same query, same answer).

    Raises:
        ValueError: unknown ``box``, non-positive sizes or ``epsilon``, negative
            coefficients or weights; in ``fit``/``explain`` bad rows or targets.
        TypeError: a model without ``predict`` that cfopt cannot parse.
    """

    def __init__(self, model: Any, space: FeatureSpace, *, n: int = 5, h: int = 3,
                 epsilon: float = 0.2, box: str = "additive", particles: int = 50,
                 iterations: int = 100, c0: float = 0.7298, c1: float = 1.4962,
                 c2: float = 1.4962, c3: float = 0.5,
                 weights: tuple[float, float, float] = (10.0, 1.0, 1.0), n_bins: int = 10,
                 smoothing: float = 0.5, seed: int = 0) -> None:
        if box not in BOXES:
            raise ValueError(f"box must be one of {BOXES}, got {box!r}")
        for name, value in (("n", n), ("h", h), ("particles", particles),
                            ("iterations", iterations), ("n_bins", n_bins)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not (math.isfinite(epsilon) and epsilon > 0):
            raise ValueError(f"epsilon must be positive and finite, got {epsilon!r}")
        coefficients = (c0, c1, c2, c3)
        if not all(math.isfinite(c) and c >= 0 for c in coefficients):
            raise ValueError(f"c0..c3 must be finite and non-negative, got {coefficients}")
        weights = tuple(float(w) for w in weights)
        if len(weights) != 3 or not all(math.isfinite(w) and w >= 0 for w in weights):
            raise ValueError(f"weights must be three finite non-negative numbers, got {weights}")
        if not (math.isfinite(smoothing) and smoothing > 0):
            raise ValueError(f"smoothing must be positive, got {smoothing!r}")
        self.genes = Genes(space)
        self.model, self.space = model, space
        self.n, self.h, self.epsilon, self.box = n, h, float(epsilon), box
        self.particles, self.iterations = particles, iterations
        self.c = tuple(float(c) for c in coefficients)
        self.weights = weights
        self.n_bins, self.smoothing, self.seed = n_bins, float(smoothing), seed
        self._predict = label_predictor(model, space)
        self._fitted = False
        # position layout: one coordinate per numeric feature, one per categorical level
        slices = list(space.input_slices().values())
        g = self.genes
        self._dim = slices
        self._numeric = np.flatnonzero(~g.categorical)
        self._numeric_dim = np.array([slices[i].start for i in self._numeric], dtype=int)
        self._width = np.where(g.upper > g.lower, g.upper - g.lower, 1.0)
        self._binary = np.array([f.kind is Kind.BINARY for f in space], dtype=bool)

    # ------------------------------------------------------------------ fitting
    def fit(self, X: pd.DataFrame, y: Any = None) -> MDPSO:
        """Store the training rows ``X`` (raw units) and labels ``y`` (default: the
        model's predictions on ``X``) for the information values. Returns ``self``."""
        frame = self.space.validate(X, check_bounds=False)
        if frame.empty:
            raise ValueError("fit needs at least one training row")
        Z = self.space.encode(frame)
        labels = np.asarray(self._predict(Z) if y is None else y)
        if len(labels) != len(frame):
            raise ValueError(f"y has {len(labels)} labels for {len(frame)} rows")
        self.classes_ = model_classes(self.model, self._predict, Z)
        self._proba = _probabilities(self.model, self.space, self.classes_)
        self._columns = {f.name: frame[f.name].to_numpy() for f in self.space}
        self._labels = np.array([json_value(v) for v in labels], dtype=object)
        self._iv: dict[tuple, dict[str, float]] = {}
        self._fitted = True
        return self

    def information_values(self, target: tuple) -> dict[str, float]:
        """Information value of each feature, the rows labelled in ``target`` positive."""
        key = tuple(sorted(map(str, target)))
        if key not in self._iv:
            positive = np.isin(self._labels, np.array(target, dtype=object))
            self._iv[key] = {name: information_value(values, positive, self.n_bins,
                                                     self.smoothing)
                             for name, values in self._columns.items()}
        return self._iv[key]

    # ------------------------------------------------------------------ search space
    def _bounds(self, u0: np.ndarray, g0: np.ndarray, active: list[int]
                ) -> tuple[np.ndarray, np.ndarray]:
        """Per coordinate, the box of the search (inactive coordinates pinned at u0)."""
        lo, hi = u0.copy(), u0.copy()
        g = self.genes
        for i in active:
            sl = self._dim[i]
            if g.categorical[i]:
                lo[sl], hi[sl] = 0.0, 1.0
                continue
            z = u0[sl.start]
            if self._binary[i]:
                a, b = 0.0, 1.0
            elif self.box == "additive":
                a, b = z - self.epsilon, z + self.epsilon
            else:
                a, b = z * (1 - self.epsilon), z * (1 + self.epsilon)
            a, b = max(a, 0.0), min(b, 1.0)
            if g.direction[i] > 0:
                a = z
            elif g.direction[i] < 0:
                b = z
            lo[sl.start], hi[sl.start] = a, b
        return lo, hi

    def _movable(self, g0: np.ndarray) -> np.ndarray:
        g = self.genes
        pinned = ((g.direction > 0) & (g0 >= g.upper)) | ((g.direction < 0) & (g0 <= g.lower))
        return ~g.immutable & (g.upper > g.lower) & ~pinned

    def _decode(self, U: np.ndarray, u0: np.ndarray, g0: np.ndarray) -> np.ndarray:
        """Gene matrix of positions: numeric codes unscaled (exactly g0 where a
        coordinate sits at u0), integral codes rounded, categoricals by argmax."""
        g = self.genes
        G = np.tile(g0, (len(U), 1))
        idx, dim = self._numeric, self._numeric_dim
        codes = g.lower[idx] + U[:, dim] * self._width[idx]
        codes = np.where(U[:, dim] == u0[dim], g0[idx], codes)
        G[:, idx] = codes
        for i in np.flatnonzero(g.categorical):
            G[:, i] = U[:, self._dim[i]].argmax(axis=1)
        return g.clip(G, g0)

    def _scaled(self, g0: np.ndarray) -> np.ndarray:
        u0 = np.zeros(self.space.n_inputs)
        g = self.genes
        for i, sl in enumerate(self._dim):
            if g.categorical[i]:
                u0[sl.start + int(g0[i])] = 1.0
            else:
                u0[sl.start] = (g0[i] - g.lower[i]) / self._width[i]
        return u0

    # ------------------------------------------------------------------ explaining
    def explain(self, x: pd.DataFrame | pd.Series | Mapping, target: Any = None
                ) -> CounterfactualSet:
        """Up to ``n`` counterfactuals of one raw row ``x``.

        Args:
            x: one row (DataFrame, Series or dict) in raw units with category labels.
            target: a class label, a list of labels, or ``None`` (any other class).

        Returns:
            a :class:`~cfopt.CounterfactualSet` (method ``"mdpso"``) of verified members
            (status ``FEASIBLE``: a heuristic proves nothing), possibly empty;
            ``details`` holds the active set, the information values, the box and the
            number of model evaluations.
        """
        if not self._fitted:
            raise RuntimeError("call fit(X_train, y_train) before explain(x)")
        t0 = time.perf_counter()
        frame = as_frame(x)
        if len(frame) != 1:
            raise ValueError(f"explain takes one row, got {len(frame)}; loop over the rows")
        factual = self.space.validate(frame, check_bounds=False).reset_index(drop=True)
        g = self.genes
        g0 = g.of_frame(factual)[0]
        factual_class = json_value(np.asarray(self._predict(g.inputs(g0)))[0])
        labels = target_labels(target, factual_class, self.classes_)
        iv = self.information_values(labels)
        movable = self._movable(g0)
        ranked = sorted(np.flatnonzero(movable), key=lambda i: -iv[self.space.names[i]])
        active = [int(i) for i in ranked[:self.h]]
        u0 = self._scaled(g0)
        lo, hi = self._bounds(u0, g0, active)
        rng = np.random.default_rng(self.seed)
        U, score, valid, evaluations = self._swarm(lo, hi, u0, g0, labels, rng)
        members = self._select(U, score, valid, u0, g0, labels, factual, factual_class, rng)
        names = self.space.names
        stopped = "complete" if len(members) == self.n else \
            f"{len(members)} of {self.n} clusters held a valid particle"
        return CounterfactualSet(
            factual=factual, target=labels, members=members, method="mdpso",
            requested=self.n, status=Status.FEASIBLE if members else Status.NO_SOLUTION,
            stopped=stopped, total_time=time.perf_counter() - t0,
            details={"active": [names[i] for i in active],
                     "information_value": {k: round(v, 6) for k, v in iv.items()},
                     "box": self.box, "epsilon": self.epsilon,
                     "valid_particles": int(valid.sum()), "evaluations": evaluations})

    def _evaluate(self, U: np.ndarray, u0: np.ndarray, g0: np.ndarray, labels: tuple
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Decoded genes, objective F and validity of each position."""
        G = self._decode(U, u0, g0)
        Z = self.genes.inputs(G)
        valid = np.isin(np.array([json_value(v) for v in self._predict(Z)], dtype=object),
                        np.array(labels, dtype=object))
        if self._proba is None:
            l1 = np.where(valid, 0.0, 0.5)
        else:
            P = self._proba(Z)
            inside = np.isin(np.array(self.classes_, dtype=object), np.array(labels, dtype=object))
            gap = P[:, ~inside].max(axis=1) - P[:, inside].max(axis=1)
            l1 = np.where(valid, 0.0, np.maximum(0.5 * gap, 0.0))
        w1, w2, w3 = self.weights
        score = (w1 * l1 + w2 * self.genes.gower(G, g0)
                 + w3 * self.genes.l0(G, g0) / self.genes.d)
        return G, score, valid

    @staticmethod
    def _better(score: np.ndarray, valid: np.ndarray, ref_score: np.ndarray,
                ref_valid: np.ndarray) -> np.ndarray:
        """Feasibility first: valid beats invalid; same kind compare by score."""
        return (valid & ~ref_valid) | ((valid == ref_valid) & (score < ref_score))

    def _swarm(self, lo: np.ndarray, hi: np.ndarray, u0: np.ndarray, g0: np.ndarray,
               labels: tuple, rng: np.random.Generator
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Run MD-PSO; the final positions, their scores and validity, evaluations."""
        c0, c1, c2, c3 = self.c
        width = hi - lo
        U = lo + rng.random((self.particles, len(u0))) * width
        V = np.zeros_like(U)
        _, score, valid = self._evaluate(U, u0, g0, labels)
        best, best_score, best_valid = U.copy(), score.copy(), valid.copy()
        evaluations = len(U)
        for _ in range(self.iterations):
            k = self._leader(best_score, best_valid)
            r1, r2, r3 = rng.random((3, *U.shape))
            V = (c0 * V + c1 * r1 * (best - U) + c2 * r2 * (best[k] - U)
                 + c3 * r3 * (U - U.mean(axis=0)))
            V = np.clip(V, -width, width)
            U = np.clip(U + V, lo, hi)
            _, score, valid = self._evaluate(U, u0, g0, labels)
            evaluations += len(U)
            improved = self._better(score, valid, best_score, best_valid)
            best[improved], best_score[improved] = U[improved], score[improved]
            best_valid[improved] = valid[improved]
        return U, score, valid, evaluations

    @staticmethod
    def _leader(score: np.ndarray, valid: np.ndarray) -> int:
        pool = np.flatnonzero(valid) if valid.any() else np.arange(len(score))
        return int(pool[np.argmin(score[pool])])

    def _select(self, U: np.ndarray, score: np.ndarray, valid: np.ndarray, u0: np.ndarray,
                g0: np.ndarray, labels: tuple, factual: pd.DataFrame, factual_class: Any,
                rng: np.random.Generator) -> list[Counterfactual]:
        """k-means on the final positions; per cluster the valid particle of least F;
        duplicates dropped; each returned raw row predicted again."""
        from sklearn.cluster import KMeans

        moving = np.flatnonzero(U.max(axis=0) > U.min(axis=0))
        points = U[:, moving]
        k = min(self.n, len(np.unique(points, axis=0)))
        if k > 1:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                clusters = KMeans(n_clusters=k, n_init=4,
                                  random_state=int(rng.integers(2**31 - 1))).fit_predict(points)
        else:
            clusters = np.zeros(len(U), dtype=int)
        chosen = []
        for c in range(k):
            pool = np.flatnonzero((clusters == c) & valid)
            if len(pool):
                chosen.append(int(pool[np.argmin(score[pool])]))
        chosen.sort(key=lambda i: score[i])
        G = self._decode(U[chosen], u0, g0) if chosen else np.zeros((0, self.genes.d))
        _, first = np.unique(G, axis=0, return_index=True)
        keep = sorted(first, key=lambda j: score[chosen[j]])
        G, scores = G[keep], score[[chosen[j] for j in keep]]
        if not len(G):
            return []
        rows = self.genes.frame(G)
        predicted = [json_value(p) for p in self._predict(self.space.encode(rows))]
        gower, l0 = self.genes.gower(G, g0), self.genes.l0(G, g0)
        members = []
        for j, p in enumerate(predicted):
            if p not in labels:
                continue
            members.append(Counterfactual(
                factual=factual, counterfactual=rows.iloc[[j]].reset_index(drop=True),
                target=labels, factual_class=factual_class, predicted_class=p,
                status=Status.FEASIBLE, verified=True, objective=float(scores[j]),
                bound=None, distances={"gower": float(gower[j]), "l0": float(l0[j])},
                solver="mdpso"))
        return members

    def __repr__(self) -> str:
        return (f"MDPSO(n={self.n}, h={self.h}, epsilon={self.epsilon}, box={self.box!r}, "
                f"particles={self.particles}, iterations={self.iterations}, c={self.c}, "
                f"weights={self.weights})")


__all__ = ["BOXES", "MDPSO", "information_value"]
