r"""Diverse counterfactual sets from nearest neighbours of another class.

The approximation algorithm of Leofante & Potyka, "Promoting Counterfactual Robustness
through Diversity" (AAAI 2024), Section 5. A single-counterfactual explainer cannot be
robust in general (their Example 1); reporting a small *diverse* set of close
counterfactuals approximates the exhaustive ε-approximate explainer, which is robust
(their Prop. 1). Given the factual :math:`x` with class :math:`l`:

1. :math:`S_1 = \{(x', d(x, x')) : x' \in E, \mathrm{Cl}(x') \ne l\}` (Eq. 7): the
   training points the model *predicts* as another class (the target), sorted by their
   distance to :math:`x`;
2. :math:`S_2 = \mathrm{distanceFilter}(S_1, \alpha)` (Eq. 9): number-based (the
   :math:`\alpha` closest) or distance-based (all within :math:`(1+\alpha)\,m`, with
   :math:`m` the distance of the closest, Eq. 8);
3. :math:`S_3 = \mathrm{diversityFilter}(S_2, \beta)` (Eq. 10), greedy in distance order
   starting from the closest: angle-based (a candidate is rejected when
   :math:`|\cos|` of the angle between its direction :math:`c - x` and that of any kept
   candidate exceeds :math:`\beta`) or distance-based (kept only if
   :math:`d(c, c_j) \ge (1+\beta)\,m` for every kept :math:`c_j`); at most ``n`` kept;
4. :math:`C = \mathrm{binarySearch}(S_3, x)` (Eq. 11, Algorithm 1): per candidate, bisect
   the segment :math:`x \to c` while it is longer than :math:`\gamma`, keeping the end
   on the target side, i.e. :math:`\lceil\log_2(d(x, c)/\gamma)\rceil` predictions; the
   result lies within :math:`\gamma` (along the segment) of a decision boundary.

Distances are measured in min-max units (:func:`cfopt.metrics.distance_weights`: a
numeric feature's change divided by its range, a category change counts 1), as the
paper does on min-max scaled data, under L1 or L2. Where the authors' code
(fraleo/robust_counterfactuals_aaai24) departs from the paper's text, this module
follows the text: their neighbour search is always Euclidean (here: the chosen
norm), and their binary search makes :math:`\lceil\log_2(D_{max}/\gamma)\rceil` steps
for every candidate, with :math:`D_{max}` the distance of the α-th neighbour (here:
each candidate's own segment, as in Algorithm 1).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..metrics import check_norm, distance_weights
from ..results.serialize import json_value
from ..space.space import FeatureSpace
from ..space.validate import as_frame
from ._genes import label_predictor

_SELECTIONS = ("number", "distance")
_DIVERSITIES = ("angle", "distance")
#: the paper's α for number-based selection on its larger data sets (50 on diabetes, no2)
DEFAULT_ALPHA = 1000


@dataclass
class DiverseNeighboursResult:
    """A diverse counterfactual set for one factual.

    Attributes:
        factual: the query (one-row DataFrame, raw units, category labels).
        factual_class: the model's prediction on the factual.
        target: the target labels (``None``: any class other than ``factual_class``).
        counterfactuals: the counterfactuals (DataFrame, raw units, original column
            names and category labels), in the order the diversity filter kept them
            (nondecreasing distance of their source candidates).
        candidates: the source candidates (after adaptation to the actionability
            constraints) before minimisation, same order.
        sources: the training-row index label of each candidate.
        distances: distance of each counterfactual to the factual (``norm``, min-max
            units).
        predicted: the model's prediction on exactly each returned raw row (the
            re-check; members whose re-check fails are dropped, see ``n_dropped``).
        norm: ``"l1"`` or ``"l2"``.
        n_candidates: sizes of :math:`S_1`, :math:`S_2`, :math:`S_3`.
        n_dropped: members dropped because their re-check failed.
        predictions: rows passed to the model's predict during the query.
        timings: seconds of each step (``candidates``, ``filter``, ``search``,
            ``verify``) and ``total``.
    """

    factual: pd.DataFrame
    factual_class: Any
    target: tuple | None
    counterfactuals: pd.DataFrame
    candidates: pd.DataFrame
    sources: list[Any]
    distances: list[float]
    predicted: list[Any]
    norm: str
    n_candidates: dict[str, int] = field(default_factory=dict)
    n_dropped: int = 0
    predictions: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.counterfactuals)

    @property
    def verified(self) -> bool:
        """Every returned counterfactual is predicted as a target class (by the re-check)."""
        if self.target is None:
            return all(json_value(p) != json_value(self.factual_class) for p in self.predicted)
        targets = {json_value(t) for t in self.target}
        return all(json_value(p) in targets for p in self.predicted)

    @property
    def found(self) -> bool:
        """At least one counterfactual, all verified."""
        return len(self) > 0 and self.verified

    def to_dict(self) -> dict[str, Any]:
        def rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
            return [{k: json_value(v) for k, v in r.items()} for r in frame.to_dict("records")]

        return {
            "factual": rows(self.factual)[0],
            "factual_class": json_value(self.factual_class),
            "target": None if self.target is None else [json_value(t) for t in self.target],
            "counterfactuals": rows(self.counterfactuals),
            "candidates": rows(self.candidates),
            "sources": [json_value(s) for s in self.sources],
            "distances": [float(d) for d in self.distances],
            "predicted": [json_value(p) for p in self.predicted],
            "verified": self.verified,
            "norm": self.norm,
            "n_candidates": dict(self.n_candidates),
            "n_dropped": self.n_dropped,
            "predictions": self.predictions,
            "timings": dict(self.timings),
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **{"indent": 2, **kwargs})

    def __repr__(self) -> str:
        return (f"DiverseNeighboursResult({len(self)} counterfactuals, norm={self.norm}, "
                f"distances={[round(d, 4) for d in self.distances]})")


class DiverseNeighbours:
    r"""Diverse counterfactual sets by the algorithm of Leofante & Potyka (AAAI 2024).

    Model-agnostic: only the model's predictions are used. ``fit`` stores the training
    rows and the model's predictions on them (the candidates of Step 1 are the rows
    *predicted* as a target class, not labelled so); ``explain(x)`` runs Steps 1–4 (see
    the module docstring) and re-checks every returned counterfactual with the model.

    Args:
        model: anything with ``predict`` on model-input rows (``space.transform(X)``),
            an sklearn ``Pipeline`` fitted on raw rows, a model cfopt parses (e.g. a
            torch ``nn.Sequential``; its adapter's ``predict`` is used), or a callable
            from model-input rows to labels.
        space: the :class:`~cfopt.FeatureSpace` (encoding, bounds, actionability).
        norm: ``"l1"`` or ``"l2"``: the distance of Steps 1–4, in min-max units.
        n: at most this many counterfactuals (the paper: 5).
        selection: Step 2, ``"number"`` (keep the ``alpha`` closest) or ``"distance"``
            (keep those within :math:`(1+\alpha)\,m`, ``alpha`` being the paper's ε).
        alpha: see ``selection``; default 1000 for number-based selection (the paper
            uses 50 on its two small data sets); required for distance-based selection.
        diversity: Step 3, ``"angle"`` or ``"distance"``.
        beta: Step 3's threshold. Angle-based: a candidate is rejected when
            :math:`|\cos\angle(c - x, c_j - x)| > \beta` for a kept :math:`c_j` — so, as
            in the authors' code, a *larger* β admits closer directions and means *less*
            diversity (β = 1 keeps every candidate). Distance-based: a candidate is kept
            when :math:`d(c, c_j) \ge (1+\beta)\,m` for every kept :math:`c_j` (larger β,
            more diversity). Default 0.5 (the paper's best setting).
        gamma: Step 4's accuracy γ: bisect while the segment is longer than γ.
        minimise: run Step 4 (``False``: return the candidates themselves, the paper's
            "no minimisation" variant).

    Actionability: a candidate that changes an immutable feature, or moves an
    increase-only (decrease-only) feature down (up), is *adapted*, not dropped: those
    features are reset to the factual's values (the nearest point satisfying the
    constraints, coordinate-wise, under L1 and L2 alike), the adapted point is predicted
    again and kept only if it is still of a target class. Dropping would leave
    no candidates at all for a continuous immutable feature (a training row rarely
    shares the factual's exact value); adapting keeps the neighbour's actionable
    direction. Since the actionable set is convex and contains the factual, every point
    of the segment searched in Step 4 satisfies the constraints too. Category coherence:
    every point the search evaluates is first made a valid row (integral codes
    rounded, a categorical's one-hot set to its largest entry, values clipped to the
    bounds), so each counterfactual is a raw row the model was evaluated on.

    Raises:
        ValueError: unknown option values, a non-positive ``n``, ``alpha``, ``gamma``,
            or ``beta`` out of range; in ``fit`` / ``explain``: rows that fail the
            space's validation (missing or extra columns, NaN, unseen categories), a
            target the model never predicts or equal to the factual's class.
        TypeError: unknown keyword, or a model without ``predict`` that is neither
            callable nor parseable by cfopt.
    """

    def __init__(self, model: Any, space: FeatureSpace, *, norm: str = "l1", n: int = 5,
                 selection: str = "number", alpha: float | None = None,
                 diversity: str = "angle", beta: float = 0.5, gamma: float = 0.1,
                 minimise: bool = True) -> None:
        if not isinstance(space, FeatureSpace):
            raise TypeError(f"space must be a FeatureSpace, got {type(space).__name__}")
        check_norm(norm)
        if selection not in _SELECTIONS:
            raise ValueError(f"selection must be one of {_SELECTIONS}, got {selection!r}")
        if diversity not in _DIVERSITIES:
            raise ValueError(f"diversity must be one of {_DIVERSITIES}, got {diversity!r}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        if alpha is None:
            if selection == "distance":
                raise ValueError("selection='distance' needs alpha: the tolerance ε of "
                                 "(1 + ε)·m (e.g. alpha=0.5)")
            alpha = DEFAULT_ALPHA
        if selection == "number" and (isinstance(alpha, bool) or alpha != int(alpha)
                                      or alpha < 1):
            raise ValueError(f"number-based selection keeps the alpha closest candidates: "
                             f"alpha must be a positive integer, got {alpha!r}")
        if not (math.isfinite(alpha) and alpha >= 0):
            raise ValueError(f"alpha must be finite and non-negative, got {alpha!r}")
        if not (math.isfinite(beta) and beta >= 0):
            raise ValueError(f"beta must be finite and non-negative, got {beta!r}")
        if diversity == "angle" and beta > 1:
            raise ValueError(f"the angle filter compares |cos| with beta: beta must lie in "
                             f"[0, 1], got {beta!r}")
        if not (math.isfinite(gamma) and gamma > 0):
            raise ValueError(f"gamma must be positive and finite, got {gamma!r}")
        self.model = model
        self.space = space
        self.norm = norm
        self.n = n
        self.selection = selection
        self.alpha = int(alpha) if selection == "number" else float(alpha)
        self.diversity = diversity
        self.beta = float(beta)
        self.gamma = float(gamma)
        self.minimise = bool(minimise)
        self._predict = label_predictor(model, space)
        self._weights = distance_weights(space, norm)
        slices = space.input_slices()
        numeric = [f for f in space if not f.is_onehot]
        self._numeric = np.array([slices[f.name].start for f in numeric], dtype=int)
        self._shift = np.array([f.shift for f in numeric])
        self._scale = np.array([f.scale for f in numeric])
        self._lower = np.array([f.lower for f in numeric])
        self._upper = np.array([f.upper for f in numeric])
        self._integral = np.array([f.is_integral for f in numeric], dtype=bool)
        self._onehot = [slices[f.name] for f in space if f.is_onehot]
        self._fitted = False

    # ------------------------------------------------------------------ fitting
    def fit(self, X: pd.DataFrame) -> DiverseNeighbours:
        """Store the training rows ``X`` (raw units, validated against the space) and the
        model's predictions on them. Returns ``self``."""
        t0 = time.perf_counter()
        frame = self.space.validate(X)
        if frame.empty:
            raise ValueError("fit needs at least one training row")
        self.index_ = frame.index
        self.Z_ = self.space.encode(frame)
        self.predictions_ = np.asarray(self._predict(self.Z_))
        if len(self.predictions_) != len(frame):
            raise ValueError(f"the model returned {len(self.predictions_)} predictions for "
                             f"{len(frame)} rows")
        self.classes_ = np.unique(self.predictions_)
        self.fit_time_ = time.perf_counter() - t0
        self._fitted = True
        return self

    # ------------------------------------------------------------------ helpers
    def _distances(self, Z: np.ndarray, z: np.ndarray) -> np.ndarray:
        diff = (Z - z) * self._weights
        if self.norm == "l1":
            return np.abs(diff).sum(axis=1)
        return np.sqrt((diff ** 2).sum(axis=1))

    def _coherent(self, Z: np.ndarray) -> np.ndarray:
        """Model inputs of valid raw rows near ``Z``: codes clipped to the bounds,
        integral codes rounded, each one-hot group set to its largest entry."""
        Z = Z.copy()
        idx, shift, scale = self._numeric, self._shift, self._scale
        codes = np.clip(Z[:, idx] * scale + shift, self._lower, self._upper)
        codes[:, self._integral] = np.round(codes[:, self._integral])
        Z[:, idx] = (codes - shift) / scale
        for sl in self._onehot:
            block = np.zeros_like(Z[:, sl])
            block[np.arange(len(Z)), Z[:, sl].argmax(axis=1)] = 1.0
            Z[:, sl] = block
        return Z

    def _adapt(self, C: np.ndarray, z: np.ndarray) -> np.ndarray:
        """Candidates with immutable features reset to the factual's values and
        direction-constrained features clipped at them."""
        C = C.copy()
        for f, sl in zip(self.space, self.space.input_slices().values()):
            if f.immutable:
                C[:, sl] = z[sl]
            elif f.direction == "increase":
                C[:, sl] = np.maximum(C[:, sl], z[sl])
            elif f.direction == "decrease":
                C[:, sl] = np.minimum(C[:, sl], z[sl])
        return C

    @property
    def _constrained(self) -> bool:
        return any(f.immutable or f.direction != "any" for f in self.space)

    def _diverse(self, C: np.ndarray, dist: np.ndarray, z: np.ndarray) -> list[int]:
        """Step 3 on candidates sorted by distance: positions of those kept. Greedy: the
        first candidate not rejected by any kept one is kept next; each kept candidate
        rejects the rest in one vectorised pass."""
        if self.diversity == "angle":
            U = (C - z) * self._weights
            U = U / np.linalg.norm(U, axis=1, keepdims=True)

            def rejects(j: int) -> np.ndarray:
                return np.abs(U @ U[j]) > self.beta
        else:
            threshold = (1.0 + self.beta) * dist[0]

            def rejects(j: int) -> np.ndarray:
                return self._distances(C, C[j]) < threshold
        kept: list[int] = []
        rejected = np.zeros(len(C), dtype=bool)
        while len(kept) < self.n:
            free = np.flatnonzero(~rejected)
            free = free[free > kept[-1]] if kept else free
            if not len(free):
                break
            kept.append(int(free[0]))
            rejected |= rejects(kept[-1])
        return kept

    def _search(self, z: np.ndarray, C: np.ndarray, dist: np.ndarray,
                in_target: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, int]:
        """Step 4 (Algorithm 1) for all candidates at once: bisect ``t`` in [lo, hi]
        (point ``z + t (c - z)``; lo on the factual side, hi on the target side) while
        ``(hi - lo) d(z, c) > gamma``. Returns the points at ``hi`` and the number of
        rows predicted."""
        steps = np.array([max(0, math.ceil(math.log2(d / self.gamma))) if d > self.gamma
                          else 0 for d in dist])
        lo, hi = np.zeros(len(C)), np.ones(len(C))
        best = C.copy()
        predicted = 0
        for k in range(int(steps.max(initial=0))):
            active = np.flatnonzero(steps > k)
            mid = 0.5 * (lo[active] + hi[active])
            P = self._coherent(z + mid[:, None] * (C[active] - z))
            hit = in_target(self._predict(P))
            predicted += len(P)
            hi[active[hit]] = mid[hit]
            best[active[hit]] = P[hit]
            lo[active[~hit]] = mid[~hit]
        return best, predicted

    # ------------------------------------------------------------------ explaining
    def explain(self, x: pd.DataFrame | pd.Series | Mapping, target: Any = None
                ) -> DiverseNeighboursResult:
        """A diverse set of at most ``n`` counterfactuals of one raw row ``x``.

        Args:
            x: one row (DataFrame, Series or dict) in raw units with category labels.
            target: a class label, a list of labels, or ``None`` (any class other than
                the model's prediction on ``x``).

        Returns:
            a :class:`DiverseNeighboursResult` (empty when no training row is predicted
            as a target class, or none survives adaptation).
        """
        if not self._fitted:
            raise RuntimeError("call fit(X_train) before explain(x)")
        t0 = time.perf_counter()
        frame = as_frame(x)
        if len(frame) != 1:
            raise ValueError(f"explain takes one row, got {len(frame)}; loop over the rows")
        factual = self.space.validate(frame, check_bounds=False)
        z = self.space.encode(factual)[0]
        factual_class = np.asarray(self._predict(z[None, :]))[0]
        predictions = 1
        labels = self._targets(target, factual_class)

        def in_target(pred: np.ndarray) -> np.ndarray:
            pred = np.asarray(pred)
            if labels is None:
                return pred != factual_class
            return np.isin(pred, labels)

        # Step 1: training rows predicted as a target class, adapted, sorted by distance
        rows = np.flatnonzero(in_target(self.predictions_))
        C = self.Z_[rows]
        if self._constrained and len(C):
            C = self._adapt(C, z)
            keep = in_target(self._predict(C))
            predictions += len(C)
            rows, C = rows[keep], C[keep]
        dist = self._distances(C, z)
        positive = dist > 0
        rows, C, dist = rows[positive], C[positive], dist[positive]
        order = np.argsort(dist, kind="stable")
        n_s1 = len(order)
        t1 = time.perf_counter()

        # Step 2: number- or distance-based selection
        if self.selection == "number":
            order = order[:self.alpha]
        elif n_s1:
            order = order[dist[order] <= (1.0 + self.alpha) * dist[order[0]]]
        rows, C, dist = rows[order], C[order], dist[order]
        n_s2 = len(order)
        # Step 3: greedy diversity filter
        kept = self._diverse(C, dist, z) if n_s2 else []
        rows, C, dist = rows[kept], C[kept], dist[kept]
        t2 = time.perf_counter()

        # Step 4: binary search towards the factual
        points = C
        if self.minimise and len(C):
            points, searched = self._search(z, C, dist, in_target)
            predictions += searched
        t3 = time.perf_counter()

        # re-check exactly the returned raw rows (decoded, then encoded as a user would)
        names = self.space.names
        if len(points):
            rows_out = self.space.inverse_transform(np.vstack([points, C]))
            counterfactuals = rows_out.iloc[:len(points)].reset_index(drop=True)
            candidates = rows_out.iloc[len(points):].reset_index(drop=True)
            final = self.space.encode(counterfactuals)
            predicted = np.asarray(self._predict(final))
            predictions += len(points)
        else:
            counterfactuals = candidates = pd.DataFrame(columns=names)
            final, predicted = np.zeros((0, len(z))), np.array([])
        ok = in_target(predicted) if len(predicted) else np.zeros(0, dtype=bool)
        n_dropped = int((~ok).sum())
        counterfactuals = counterfactuals[ok].reset_index(drop=True)
        candidates = candidates[ok].reset_index(drop=True)
        final = final[ok]
        t4 = time.perf_counter()
        return DiverseNeighboursResult(
            factual=factual.reset_index(drop=True), factual_class=factual_class,
            target=None if labels is None else tuple(labels),
            counterfactuals=counterfactuals, candidates=candidates,
            sources=[self.index_[r] for r in rows[ok]],
            distances=[float(d) for d in self._distances(final, z)],
            predicted=list(predicted[ok]),
            norm=self.norm, n_candidates={"S1": n_s1, "S2": n_s2, "S3": len(kept)},
            n_dropped=n_dropped, predictions=predictions,
            timings={"candidates": t1 - t0, "filter": t2 - t1, "search": t3 - t2,
                     "verify": t4 - t3, "total": t4 - t0})

    def _targets(self, target: Any, factual_class: Any) -> list[Any] | None:
        """The target labels (``None``: any other class), checked against the classes
        the model predicts on the training rows."""
        if target is None:
            return None
        labels = list(target) if isinstance(target, (list, tuple, set, np.ndarray)) \
            else [target]
        known = {json_value(c) for c in self.classes_}
        unknown = [t for t in labels if json_value(t) not in known]
        if unknown:
            raise ValueError(f"target {unknown} is not among the classes the model predicts "
                             f"on the training rows: {sorted(known, key=str)}")
        if any(json_value(t) == json_value(factual_class) for t in labels):
            raise ValueError(f"target {labels} contains the factual's own class "
                             f"{json_value(factual_class)!r}")
        return labels

    def __repr__(self) -> str:
        return (f"DiverseNeighbours(norm={self.norm!r}, n={self.n}, "
                f"selection={self.selection!r}, alpha={self.alpha}, "
                f"diversity={self.diversity!r}, beta={self.beta}, gamma={self.gamma}, "
                f"minimise={self.minimise})")


__all__ = ["DiverseNeighbours", "DiverseNeighboursResult"]
