"""PROPLACE's plausible region (Jiang, Lan, Leofante, Rago, Toni 2024, Def. 9-10).

A declared constraint block (compose it with any :class:`~cfopt.CounterfactualModel`),
kept beside the methods because its neighbours are chosen by the model-shift
adversary's checker (:mod:`cfopt.methods.adversaries.model_shift`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from ..constraints.trust_regions import ConvexHull
from ..formulations.robustness import check_delta, robust_network
from .adversaries.model_shift import RegionReport, RobustnessChecker
from .base import target_index

if TYPE_CHECKING:
    from ..problem import CounterfactualModel


class RobustPlausibleRegion(ConvexHull):
    """PROPLACE's plausible region (Def. 10): the convex hull (λ ≥ 0, Σλ = 1,
    z(x') = Σ λ_l z_l) of the factual and its ``k`` Δ-robust nearest neighbours among
    the data rows the model predicts as the target.

    Neighbours are visited in KD-tree (Euclidean, model-input encoding) order and
    checked by the interval screen, the exact MILP only when the screen is undecided
    (:class:`~cfopt.methods.adversaries.model_shift.RobustnessChecker`); verdicts are
    cached per (model, δ, target) so a batch of queries checks each data row at most
    once.

    Args:
        data: raw rows (the feature space's columns), e.g. the training data.
        delta: radius of the model shift (every weight and bias ±δ).
        k: number of Δ-robust neighbours.
        labels: observed labels of ``data``; by default the model's predictions.
        solver: solver of the exact checks (name or backend).
        epsilon, norm: an optional slack ball around the hull (as :class:`ConvexHull`).
    """

    kind = "plausible_region"

    def __init__(self, data: pd.DataFrame, delta: float, k: int = 20, *, labels: Any = None,
                 solver: Any = "highs",  # pragma: no mutate (make_solver ignores case)
                 epsilon: float = 0.0, norm: str = "l1",
                 name: str | None = None) -> None:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a positive integer (number of Δ-robust neighbours), "
                             f"got {k!r}")
        super().__init__(data, labels=labels, epsilon=epsilon, norm=norm, max_points=int(k),
                         include_factual=True, name=name)
        self.delta = check_delta(delta)
        self.k = int(k)
        self.solver = solver
        self._checkers: dict[str, RobustnessChecker] = {}
        self.report: RegionReport | None = None

    def checker(self, m: CounterfactualModel) -> RobustnessChecker:
        """The robustness checker (and verdict cache) of ``m``'s network at this δ."""
        key = robust_network(m.adapter).structure.key()
        if key not in self._checkers:
            self._checkers[key] = RobustnessChecker(m.adapter, self.delta, solver=self.solver)
        return self._checkers[key]

    def update(self, m: CounterfactualModel, block: pyo.Block) -> None:
        rows = self._candidates(m)
        z0 = m.space.encode(m.factual)[0]
        found, report = self.checker(m).nearest_robust(
            self._Z, rows, z0, self.k, target=target_index(m), cache_key=(id(self), self.name))
        self.report = report
        self.set_points(m, block, np.vstack([z0[None, :], self._Z[found]]))

    def hull(self, m: CounterfactualModel) -> np.ndarray | None:
        """The current reference points (model inputs, one per row), whose convex hull
        holds every point of the region; ``None`` with a slack ball (ε > 0), which the
        hull does not hold."""
        return None if self.epsilon else self._reference_sets(m)[0]

    def hull_weights(self, m: CounterfactualModel) -> list[pyo.Var] | None:
        """The variables λ of the region's points in :meth:`hull`'s order (every point of
        the region is their combination); ``None`` with a slack ball (ε > 0)."""
        if self.epsilon:
            return None
        block = m.component(self.name)
        return [block.weight[i] for i in block.POINTS]

    def box(self, m: CounterfactualModel) -> tuple[np.ndarray, np.ndarray]:
        """The bounding box of the current reference points (model inputs), widened by
        the slack radius: every point of the region lies in it."""
        points = self._reference_sets(m)[0]
        return points.min(axis=0) - self.epsilon, points.max(axis=0) + self.epsilon


