"""RNCE, the robust nearest-neighbour baseline of PROPLACE Table 1 (Jiang, Lan,
Leofante, Rago, Toni 2024): the nearest Δ-robust data row, found by the model-shift
checker's screened, cached search (no loop: the answer is a data row)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..problem import CounterfactualModel
from ..results.robust import RobustCounterfactual, RobustnessCertificate, RobustStatus
from ..solvers import SolverBackend
from ..space.space import FeatureSpace
from ..space.validate import as_frame
from .adversaries.model_shift import RobustnessChecker
from .base import RobustMethod, gc_paused, require_space_encoding, target_index


class RNCE(RobustMethod):
    """Robust nearest-neighbour counterfactual: the data row nearest the factual (KD-tree,
    Euclidean on the model inputs) that the model predicts as the target, that is
    Δ-robust, and that keeps the space's immutable and monotone features.

    Args:
        data: raw candidate rows; ``labels``, ``solver`` as :class:`Proplace`.
    """

    method = "rnce"

    def __init__(self, model: Any, space: FeatureSpace, data: pd.DataFrame, *, delta: float,
                 solver: str | SolverBackend = "highs",  # pragma: no mutate (names ignore case)
                 objective: str | Mapping[str, float] = "l1",
                 weights: str | Mapping[str, float] = "range") -> None:
        super().__init__(model, space, delta=delta, solver=solver, time_limit=None, mip_gap=1e-4,
                         threads=1, seed=0)
        self.milp = CounterfactualModel(
            model, space, objective=objective, weights=weights,
            bound_tightening="interval")  # pragma: no mutate (None means interval)
        require_space_encoding(self.milp)
        self.data = space.validate(as_frame(data), check_bounds=False).reset_index(drop=True)
        self.Z = np.clip(space.encode(self.data),
                         [b[0] for b in space.input_bounds()], [b[1] for b in space.input_bounds()])
        self.classes = self.milp.classify(self.data)
        self.checker = RobustnessChecker(model, self.delta, solver=self.backend.name)

    def _actionable(self, factual: pd.Series) -> np.ndarray:
        keep = np.ones(len(self.data), dtype=bool)
        for f in self.space:
            values = self.data[f.name].to_numpy()
            if f.immutable:
                keep &= values == factual[f.name]
            elif not f.is_onehot and f.direction != "any":
                codes = np.array([f.to_code(v) for v in values])
                delta = codes - f.to_code(factual[f.name])
                keep &= delta >= 0 if f.direction == "increase" else delta <= 0
        return keep

    @gc_paused
    def explain(self, x: pd.DataFrame | pd.Series | Mapping,
                target: Any = None) -> RobustCounterfactual:
        """The nearest actionable Δ-robust target-class data row of ``x``."""
        t0 = time.perf_counter()
        m = self.milp
        m.set_factual(x)
        m.set_target(target)
        target = target_index(m)
        rows = np.flatnonzero(np.isin(self.classes, np.array(m.target, dtype=object))
                              & self._actionable(m.factual.iloc[0]))
        found, report = self.checker.nearest_robust(self.Z, rows, m.space.encode(m.factual)[0],
                                                    1, target=target, cache_key="rnce")
        certificate = RobustnessCertificate(self.delta, None, None, 0.0, None, iterations=1,
                                            times={"region": report.seconds})
        details = {"screened": report.screened, "milp_checks": report.milp_checks}
        if not found:
            return self._result(m, RobustStatus.INFEASIBLE, None, certificate, t0, message=(
                f"no Δ-robust actionable data row among {len(rows)} target-class rows"),
                details=details)
        row = self.data.iloc[[found[0]]].reset_index(drop=True)
        verdict = self.checker.check(m.space.encode(row)[0], target)
        certificate.verdict, certificate.bound, certificate.robust = (verdict, verdict.bound,
                                                                      verdict.robust)
        status = RobustStatus.CERTIFIED if verdict.robust else RobustStatus.NOT_ROBUST
        return self._result(m, status, row, certificate, t0, details=details)
