r"""Tightening of the ReLU big-M constants (optimization-based bound tightening, OBBT).

The big-M encoding of neuron :math:`j` needs bounds :math:`l_j \le \hat z_j \le u_j` on
its pre-activation. Interval propagation over the input box gives valid but loose
bounds. OBBT solves, layer by layer, the LP relaxation of the network over the
feature space (bounds, one-hot sums, integrality relaxed)

.. math:: l_j' = \min \hat z_j, \qquad u_j' = \max \hat z_j

and replaces :math:`[l_j, u_j]` by :math:`[l_j', u_j']` (slightly widened by a
tolerance) before tightening the next layer. Neurons whose bounds no longer straddle
0 are *stable*: their binary is fixed (active: :math:`z = \hat z`; inactive: :math:`z =
0`). The bounds hold over the whole feature box, so one tightening serves every query.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyomo.environ as pyo

from ..solvers import SolverSettings, make_solver
from .predictors import PredictorConstr

METHODS = ("lp", "interval")


@dataclass(frozen=True)
class BoundTighteningReport:
    """Effect of bound tightening on the network's big-M constants."""

    method: str
    neurons: int
    stable_before: int
    stable_after: int
    mean_width_before: float
    mean_width_after: float
    lp_solves: int
    seconds: float

    def to_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


def _bounds(predictor: PredictorConstr) -> list[tuple[float, float]]:
    """The hidden neurons' pre-activation bounds, in the network's units."""
    return [(float(lb), float(ub)) for lbs, ubs in predictor.layer_bounds()[:-1]
            for lb, ub in zip(lbs, ubs)]


def _stable(bounds: list[tuple[float, float]]) -> int:
    return sum(1 for lb, ub in bounds if lb >= 0 or ub <= 0)


def _width(bounds: list[tuple[float, float]]) -> float:
    return float(np.mean([ub - lb for lb, ub in bounds])) if bounds else 0.0


def relax_integrality(block: pyo.Block) -> list[tuple[pyo.Var, Any, Any, Any]]:
    """The LP relaxation of ``block`` in place: every integer variable (fixed ones too,
    which may be freed later) becomes continuous within its bounds (a binary: [0, 1]);
    returns ``(variable, domain, lb, ub)`` of each, to restore them."""
    saved = []
    # pragma: no mutate start (descend_into=True: Pyomo's default)
    variables = block.component_data_objects(pyo.Var, descend_into=True)
    # pragma: no mutate end
    for v in variables:
        if v.is_integer():
            saved.append((v, v.domain, v.lb, v.ub))
            lb, ub = v.lb, v.ub
            v.domain = pyo.Reals
            v.setlb(lb)
            v.setub(ub)
    return saved


@contextmanager
def _integrality_relaxed(block: pyo.Block) -> Iterator[None]:
    saved = relax_integrality(block)
    try:
        yield
    finally:
        for v, domain, lb, ub in saved:
            v.domain = domain
            v.setlb(lb)
            v.setub(ub)


def tighten_relu_bounds(model: pyo.Block, predictor: PredictorConstr, method: str = "lp",
                        solver: str = "highs"  # pragma: no mutate (make_solver ignores case)
                        ) -> BoundTighteningReport:
    """Tighten the big-M bounds of ``predictor`` (a block of ``model``) in place.

    ``model`` must hold only the structure valid for every query (feature variables,
    one-hot sums, the predictor and its input links): the bounds are computed over it.
    ``method="interval"`` keeps the interval bounds and only fixes stable neurons.
    """
    if method not in METHODS:
        raise ValueError(f"bound_tightening must be one of {METHODS} or None, got {method!r}")
    t0 = time.perf_counter()
    layers = predictor.dense_layers()
    before = _bounds(predictor)
    solves = 0
    if method == "lp" and layers:
        backend = make_solver(solver)
        settings = SolverSettings(mip_gap=0.0, threads=1)  # pragma: no mutate (LPs: speed only)
        with _integrality_relaxed(model):
            for k, layer in enumerate(layers):
                neurons = list(layer.zhat)
                ranges = backend.ranges(model, [layer.zhat[j] for j in neurons], settings)
                solves += 2 * len(neurons)
                for j, (lo, hi) in zip(neurons, ranges):
                    lb, ub = layer.zhat[j].bounds
                    if lo is not None:
                        lb = max(lb, lo - 1e-6 * max(1.0, abs(lo)))
                    if hi is not None:
                        ub = min(ub, hi + 1e-6 * max(1.0, abs(hi)))
                    predictor.set_neuron_bounds(k, j, lb, max(ub, lb))
    else:
        for k, layer in enumerate(layers):
            for j in list(layer.zhat):
                predictor.set_neuron_bounds(k, j, *layer.zhat[j].bounds)
    last = layers[-1] if layers else None
    if last is not None:
        for j in range(predictor.adapter.n_logits):
            predictor.outputs[j].setlb(last.zhat[j].lb)
            predictor.outputs[j].setub(last.zhat[j].ub)
    after = _bounds(predictor)
    return BoundTighteningReport(method=method, neurons=len(before),
                                 stable_before=_stable(before), stable_after=_stable(after),
                                 mean_width_before=_width(before),
                                 mean_width_after=_width(after), lp_solves=solves,
                                 seconds=time.perf_counter() - t0)
