r"""Trust regions: keep the counterfactual close to the data (CE-OCL eq. 3).

All regions live in the model-input encoding of the feature space (``space.transform``:
scaled numeric codes and one-hot columns), with :math:`z(x)` the encoding of the
counterfactual's feature variables and :math:`\bar z_i` reference points.

* :class:`ConvexHull` — the ε-convex hull :math:`z(x) + s = \sum_i \lambda_i \bar z_i`,
  :math:`\sum_i \lambda_i = 1`, :math:`\lambda \ge 0`, :math:`\|s\|_p \le \varepsilon`
  with :math:`p = 1` (:math:`s = s^+ - s^-`, :math:`\sum (s^+ + s^-) \le \varepsilon`) or
  :math:`p = \infty` (:math:`|s_j| \le \varepsilon`). The reference points are the data
  rows the model predicts as a target class (default; CE-OCL's code uses observed
  labels: ``labels=``), reduced per query to the ``max_points`` nearest to the factual
  (weighted L1 in the encoding) so the hull stays tractable on large data; the points
  are mutable Params, so a new query only changes their values.
* :class:`NearestNeighbourHull` — the hull of the factual and its ``k`` nearest
  target-class neighbours (PROPLACE's plausible region, without robustness).
* :class:`ClusterHulls` — the union of the hulls of k-means clusters of the target
  class (a disjunction: one binary :math:`b_c` per cluster, :math:`\sum_c b_c = 1`,
  :math:`\lambda_{c,i} \ge 0`, :math:`\sum_i \lambda_{c,i} = b_c`,
  :math:`z(x) + s = \sum_{c,i} \lambda_{c,i} \bar z_{c,i}`), each cluster represented by
  at most ``points_per_cluster`` of its members nearest its centre.

A returned counterfactual is checked against its region by a linear program on the
decoded raw point (``scipy.optimize.linprog``).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo
from scipy.optimize import linprog

from ..formulations.features import encode_inputs
from ..space.encoding import space_specs
from ..space.space import FeatureSpace
from ..space.validate import as_frame
from .blocks import ConstraintBlock

if TYPE_CHECKING:
    from ..problem import CounterfactualModel

NORMS = ("l1", "linf")


class _Region(ConstraintBlock):
    """Shared parts: reference data, target selection, slack norm, LP check."""

    # pragma: no mutate start (the defaults: every subclass passes epsilon and norm)
    def __init__(self, data: pd.DataFrame, *, labels: Any = None, epsilon: float = 0.0,
                 norm: str = "l1", name: str | None = None) -> None:
        # pragma: no mutate end
        super().__init__(name)
        self.data = as_frame(data).reset_index(drop=True)
        if not len(self.data):
            raise ValueError("the trust region needs at least one data row")
        if labels is not None:
            labels = np.asarray(labels, dtype=object)
            if len(labels) != len(self.data):
                raise ValueError(f"labels has {len(labels)} entries for {len(self.data)} rows")
        self.labels = labels
        if not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) or epsilon < 0:
            raise ValueError(f"epsilon must be a non-negative number, got {epsilon!r}")
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        self.epsilon, self.norm = float(epsilon), norm
        # pragma: no mutate start (set by validate, which runs before any use)
        self._Z: np.ndarray | None = None
        self._valid: pd.DataFrame | None = None
        self._classes: np.ndarray | None = None
        # pragma: no mutate end

    def validate(self, space: FeatureSpace) -> None:
        self._classes = None  # per model: a region object may be reused with another
        missing = [n for n in space.names if n not in self.data.columns]
        if missing:
            raise ValueError(f"trust region {self.name!r}: the data lack the feature "
                             f"column(s) {missing}")
        # pragma: no mutate start (check_bounds: None is as false as False)
        self._valid = space.validate(self.data[space.names], check_bounds=False)
        # pragma: no mutate end
        self._Z = space.encode(self._valid)
        lo = np.array([b[0] for b in space.input_bounds()])
        hi = np.array([b[1] for b in space.input_bounds()])
        self._Z = np.clip(self._Z, lo, hi)

    def _candidates(self, m: CounterfactualModel) -> np.ndarray:
        """Indices of data rows in the target (by prediction, or by label)."""
        if self.labels is not None:
            classes = self.labels
        else:
            if self._classes is None:  # the rows :meth:`validate` checked for m's space
                self._classes = m.classify(self._valid)
            classes = self._classes
        if m.adapter.is_regressor:
            hits = np.array([m.is_target(v) for v in classes])
        else:
            # pragma: no mutate start (dtype: a model's classes are of one type; isin
            # compares by value either way)
            hits = np.isin(classes, np.array(m.target, dtype=object))
            # pragma: no mutate end
        rows = np.flatnonzero(hits)
        if not len(rows):
            raise ValueError(f"trust region {self.name!r}: no data row is "
                             f"{'labelled' if self.labels is not None else 'predicted'} as "
                             f"the target {list(m.target)}")
        return rows

    def _distance(self, m: CounterfactualModel, rows: np.ndarray) -> np.ndarray:
        """The objective's weighted L1 distance of data rows to the factual (a category
        change, two one-hot columns, costs the feature's weight once)."""
        z0 = m.space.encode(m.factual)[0]
        per_input = np.concatenate([
            np.full(len(f.input_names), m.weights[f.name] / 2) if f.is_onehot
            else [m.weights[f.name] * f.scale] for f in m.space])
        return (np.abs(self._Z[rows] - z0) * per_input).sum(axis=1)

    def _encoding(self, m: CounterfactualModel) -> list:
        return encode_inputs(m, m.space, space_specs(m.space))  # pragma: no mutate (unused)

    def _add_slack(self, block: pyo.Block, n: int) -> None:
        """``s = s_pos - s_neg`` with ``||s||_1 <= epsilon`` or ``||s||_inf <= epsilon``
        (so ``0 <= s_pos, s_neg <= epsilon``, declared as their bounds)."""
        # pragma: no mutate start (mutable: epsilon is never changed after build)
        block.epsilon = pyo.Param(mutable=True, initialize=self.epsilon)
        # pragma: no mutate end
        block.INPUTS = pyo.RangeSet(0, n - 1)
        # each part is at most ε, as the norm's row implies (a bound a group's big-M reads)
        block.s_pos = pyo.Var(block.INPUTS, bounds=(0, self.epsilon))
        block.s_neg = pyo.Var(block.INPUTS, bounds=(0, self.epsilon))
        if self.norm == "l1":
            block.slack_norm = pyo.Constraint(expr=pyo.quicksum(
                block.s_pos[j] + block.s_neg[j] for j in block.INPUTS) <= block.epsilon)
        else:
            block.slack_norm = pyo.Constraint(block.INPUTS, rule=lambda b, j:
                                              b.s_pos[j] + b.s_neg[j] <= b.epsilon)

    @abstractmethod
    def _reference_sets(self, m: CounterfactualModel) -> list[np.ndarray]:
        """The current query's point sets; the region is the union of their ε-hulls."""

    def _solution_weights(self, m: CounterfactualModel) -> list[np.ndarray | None] | None:
        """Per reference set, the weights λ of the MILP's last solution (``None`` where
        there are none), a certificate :func:`in_region` checks before its LP; ``None``:
        no certificates."""
        return None

    def violations(self, m: CounterfactualModel, factual: pd.Series,
                   row: pd.Series) -> list[str]:
        # pragma: no mutate start (columns: encode takes the space's columns by name)
        z = m.space.encode(pd.DataFrame([row], columns=m.space.names))[0]
        # pragma: no mutate end
        sets = self._reference_sets(m)
        weights = self._solution_weights(m) or [None] * len(sets)
        if any(in_region(z, points, self.epsilon, self.norm, weights=lam)
               for points, lam in zip(sets, weights)):
            return []
        return [f"trust region {self.name!r}: the counterfactual lies outside the "
                f"{'ε-' if self.epsilon else ''}hull of its reference points"]


def in_region(z: np.ndarray, points: np.ndarray, epsilon: float, norm: str,
              tol: float = 1e-7, weights: np.ndarray | None = None) -> bool:
    """Whether ``z`` is within ``epsilon`` (``norm``) of the convex hull of ``points``,
    by a linear program (variables λ, s⁺, s⁻). ``weights``: a candidate λ (e.g. the
    MILP's), clipped at 0 and scaled to sum 1; when ``z`` lies within ``epsilon + tol``
    of its point ``Σ λ_i points_i`` in exact arithmetic, that point is a feasible point
    of the LP at least as good, and no LP is solved."""
    if weights is not None:
        lam = np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)
        if lam.shape == (len(points),) and np.isfinite(lam).all() and lam.sum() > 0:
            gap = np.abs(z - (lam / lam.sum()) @ points)
            if (gap.sum() if norm == "l1" else gap.max()) <= epsilon + tol:
                return True
    k, n = points.shape
    # z + s+ - s- = P^T λ  ->  P^T λ - s+ + s- = z
    A_eq = np.hstack([points.T, -np.eye(n), np.eye(n)])
    A_eq = np.vstack([A_eq, np.concatenate([np.ones(k), np.zeros(2 * n)])])
    b_eq = np.concatenate([z, [1.0]])
    c = np.concatenate([np.zeros(k), np.ones(2 * n)])
    if norm == "l1":
        # pragma: no mutate start (linprog's defaults: bounds (0, None), "highs", any case)
        res = linprog(c, A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs")
        # pragma: no mutate end
        return bool(res.status == 0 and res.fun <= epsilon + tol)
    # linf: minimise t with s+ + s- <= t
    c = np.concatenate([np.zeros(k + 2 * n), [1.0]])
    A_eq = np.hstack([A_eq, np.zeros((n + 1, 1))])
    A_ub = np.hstack([np.zeros((n, k)), np.eye(n), np.eye(n), -np.ones((n, 1))])
    # pragma: no mutate start (linprog's defaults: bounds (0, None), "highs", any case)
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(n), A_eq=A_eq, b_eq=b_eq, bounds=(0, None),
                  method="highs")
    # pragma: no mutate end
    return bool(res.status == 0 and res.fun <= epsilon + tol)


class ConvexHull(_Region):
    """The ε-convex hull of target-class data (CE-OCL eq. 3).

    Args:
        data: raw rows (the feature space's columns), e.g. the training data.
        labels: observed labels of ``data``; by default the model's predictions select
            the target-class rows.
        epsilon: radius of the slack ball (0: the hull itself).
        norm: ``"l1"`` or ``"linf"`` (both linear).
        max_points: per query, the hull uses at most this many target-class rows, the
            nearest to the factual.
        include_factual: add the factual itself as a reference point.
    """

    kind = "convex_hull"

    def __init__(self, data: pd.DataFrame, *, labels: Any = None, epsilon: float = 0.0,
                 norm: str = "l1", max_points: int = 500, include_factual: bool = False,
                 name: str | None = None) -> None:
        super().__init__(data, labels=labels, epsilon=epsilon, norm=norm, name=name)
        if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 1:
            raise ValueError(f"max_points must be a positive integer, got {max_points!r}")
        self.max_points = max_points
        self.include_factual = bool(include_factual)
        #: per block (by id), the block and the points :meth:`set_points` wrote into it
        self._points: dict[int, tuple[pyo.Block, np.ndarray]] = {}

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        n = m.space.n_inputs
        k = min(self.max_points, len(self.data)) + int(self.include_factual)
        block.POINTS = pyo.RangeSet(0, k - 1)
        self._add_slack(block, n)
        # pragma: no mutate start (the upper bound 1: implied by convexity and weight >= 0)
        block.weight = pyo.Var(block.POINTS, bounds=(0, 1))
        # pragma: no mutate end
        block.convexity = pyo.Constraint(expr=pyo.quicksum(block.weight.values()) == 1)
        self.set_points(m, block, np.zeros((k, n)))

    def update(self, m: CounterfactualModel, block: pyo.Block) -> None:
        rows = self._candidates(m)
        k = len(block.POINTS) - int(self.include_factual)
        if len(rows) > k:
            rows = rows[np.argsort(self._distance(m, rows), kind="stable")[:k]]
        points = self._Z[rows]
        if self.include_factual:
            points = np.vstack([m.space.encode(m.factual), points])
        self.set_points(m, block, points)

    def set_points(self, m: CounterfactualModel, block: pyo.Block, points: np.ndarray
                   ) -> None:
        """The hull's points at this query (model inputs, one per row), padded to the
        block's by repeating the last, written into the rows ``block.hull`` as numbers
        (rebuilt, 23 rows on HELOC, where coefficients that are parameters would be sent
        to the solver again at every solve) and kept (:meth:`points`)."""
        points = np.vstack([points, np.repeat(points[-1:], len(block.POINTS) - len(points),
                                              axis=0)])
        self._points[id(block)] = (block, points)
        z = self._encoding(m)
        block.del_component("hull")
        block.hull = pyo.Constraint(block.INPUTS, rule=lambda b, j: z[j] + b.s_pos[j]
                                    - b.s_neg[j] == pyo.quicksum(
                                        float(points[i, j]) * b.weight[i] for i in b.POINTS))

    def points(self, m: CounterfactualModel) -> np.ndarray:
        """The hull's points in ``m`` at its current query (model inputs, one per row, in
        the order of the weights ``block.weight``; zeros before the first query)."""
        return self._points[id(m.component(self.name))][1].copy()

    def _reference_sets(self, m: CounterfactualModel) -> list[np.ndarray]:
        return [self.points(m)]

    def _solution_weights(self, m: CounterfactualModel) -> list[np.ndarray | None]:
        values = [w.value for w in m.component(self.name).weight.values()]
        # pragma: no mutate start (dtype: values of variables, and in_region takes float64)
        return [None if any(v is None for v in values) else np.array(values, dtype=float)]
        # pragma: no mutate end


class NearestNeighbourHull(ConvexHull):
    """The hull of the factual and its ``k`` nearest target-class neighbours (PROPLACE's
    plausible region without the robustness filter)."""

    kind = "knn_hull"

    def __init__(self, data: pd.DataFrame, k: int = 10, *, labels: Any = None,
                 epsilon: float = 0.0, norm: str = "l1", name: str | None = None) -> None:
        super().__init__(data, labels=labels, epsilon=epsilon, norm=norm, max_points=k,
                         include_factual=True, name=name)


class ClusterHulls(_Region):
    """The union of the ε-hulls of k-means clusters of the target-class data.

    Clusters are computed once per target class (k-means on the encoding, seeded);
    each is represented by at most ``points_per_cluster`` members nearest its centre.
    """

    kind = "cluster_hulls"

    def __init__(self, data: pd.DataFrame, n_clusters: int = 5, *, labels: Any = None,
                 epsilon: float = 0.0, norm: str = "l1", points_per_cluster: int = 50,
                 seed: int = 0, name: str | None = None) -> None:
        super().__init__(data, labels=labels, epsilon=epsilon, norm=norm, name=name)
        for arg, v in (("n_clusters", n_clusters), ("points_per_cluster", points_per_cluster)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{arg} must be a positive integer, got {v!r}")
        self.n_clusters, self.points_per_cluster, self.seed = n_clusters, points_per_cluster, seed

    def validate(self, space: FeatureSpace) -> None:
        super().validate(space)
        self._cache: dict[tuple, np.ndarray] = {}  # clusters per target, per model

    def build(self, m: CounterfactualModel, block: pyo.Block) -> None:
        n = m.space.n_inputs
        block.CLUSTERS = pyo.RangeSet(0, self.n_clusters - 1)
        block.MEMBERS = pyo.RangeSet(0, self.points_per_cluster - 1)
        self._add_slack(block, n)
        # pragma: no mutate start (initial values: update writes every one before a solve)
        block.point = pyo.Param(block.CLUSTERS, block.MEMBERS, block.INPUTS, mutable=True,
                                initialize=0.0)
        block.exists = pyo.Param(block.CLUSTERS, mutable=True, initialize=1.0)
        # pragma: no mutate end
        block.chosen = pyo.Var(block.CLUSTERS, domain=pyo.Binary)
        # pragma: no mutate start (the upper bound 1: implied by convexity, chosen <= 1)
        block.weight = pyo.Var(block.CLUSTERS, block.MEMBERS, bounds=(0, 1))
        # pragma: no mutate end
        block.one_cluster = pyo.Constraint(expr=pyo.quicksum(block.chosen.values()) == 1)
        block.usable = pyo.Constraint(block.CLUSTERS, rule=lambda b, c:
                                      b.chosen[c] <= b.exists[c])
        block.convexity = pyo.Constraint(block.CLUSTERS, rule=lambda b, c: pyo.quicksum(
            b.weight[c, i] for i in b.MEMBERS) == b.chosen[c])
        z = self._encoding(m)
        block.hull = pyo.Constraint(block.INPUTS, rule=lambda b, j: z[j] + b.s_pos[j]
                                    - b.s_neg[j] == pyo.quicksum(
                                        b.point[c, i, j] * b.weight[c, i]
                                        for c in b.CLUSTERS for i in b.MEMBERS))

    def _clusters(self, m: CounterfactualModel) -> np.ndarray:
        """(clusters, members, inputs) reference points of the current target (NaN rows
        for clusters that do not exist)."""
        from sklearn.cluster import KMeans

        key = tuple(m.target)
        if key not in self._cache:
            rows = self._candidates(m)
            Z = self._Z[rows]
            k = min(self.n_clusters, len(np.unique(Z, axis=0)))
            labels = KMeans(k, n_init=10, random_state=self.seed).fit(Z)
            out = np.full((self.n_clusters, self.points_per_cluster, Z.shape[1]), np.nan)
            for c in range(k):
                members = Z[labels.labels_ == c]
                order = np.argsort(np.abs(members - labels.cluster_centers_[c]).sum(axis=1),
                                   kind="stable")[:self.points_per_cluster]
                chosen = members[order]
                out[c, :len(chosen)] = chosen
                out[c, len(chosen):] = chosen[-1]
            self._cache[key] = out
        return self._cache[key]

    def update(self, m: CounterfactualModel, block: pyo.Block) -> None:
        points = self._clusters(m)
        for c in range(self.n_clusters):
            exists = not np.isnan(points[c, 0, 0])
            block.exists[c] = 1.0 if exists else 0.0
            for i in range(self.points_per_cluster):
                for j in range(points.shape[2]):
                    block.point[c, i, j] = float(points[c, i, j]) if exists else 0.0

    def _reference_sets(self, m: CounterfactualModel) -> list[np.ndarray]:
        points = self._clusters(m)
        return [points[c] for c in range(self.n_clusters) if not np.isnan(points[c, 0, 0])]
