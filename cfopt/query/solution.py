"""From the solver's solution to a raw counterfactual that the real model verifies.

A solver returns values that meet each constraint up to its tolerances: an integer code
may be 0.9999995, a tree input may sit a tolerance beyond the split side its leaves
chose, a feature the solver left alone may differ from the factual by 1e-9. Decoding
repairs these at their root and never moves the goalposts:

1. **The predictor's region.** A tree ensemble's solution chooses a side of every split
   (:meth:`~cfopt.formulations.PredictorConstr.input_region`); each numeric feature is
   moved into the code interval where the library takes exactly those sides, so the
   library reaches the leaves the MILP chose. Integral codes are rounded inside it.
2. **Snapping.** A continuous feature within ``SNAP`` x its range of the factual is set
   back to the factual's value (a solver's round-off is not a change), but only in the
   first candidate: if that point does not verify, the point without snapping is tried.
   A difference within float round-off of the code is no move in either candidate.
3. **Verification.** A candidate is returned only if the real model's own prediction
   on it (exactly as returned, no rounding afterwards) is a target and it satisfies
   every declared constraint (:meth:`CounterfactualModel.violations`), the Pyomo
   constraints added to the model directly included (:mod:`cfopt.constraints.raw`).
   A query's point must also meet the declared validity margin μ on the model's scores
   in float64 (:func:`verify_row`): a solver's feasibility tolerance, accumulated
   through a network's layers, can leave it short (Gurobi once returned credit_amount
   886 at a logit of 0.000939 for μ = 0.001, where 885 is the optimum); the query then
   re-solves with μ raised by twice the shortfall (:mod:`cfopt.query.runner`), whose
   point is claimed optimal only against the first solve's bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from ..formulations.features import code_variable
from ..formulations.validity import MARGIN_TOLERANCE

if TYPE_CHECKING:
    from ..problem import CounterfactualModel

#: a continuous move this small (relative to the feature's range) is solver round-off
SNAP = 1e-6
#: a move this small (relative to the feature's magnitude) is float round-off of the
#: MILP's representation of a code, never a move: every candidate keeps the factual's
_ROUNDING = 64 * float(np.finfo(np.float64).eps)


@dataclass
class Verification:
    """A decoded point and what the real model says of it: its label, the declared
    constraints it breaks, and, when the margin was checked, its target score
    (:meth:`~cfopt.CounterfactualModel.target_score`) and the margin it falls short of
    (``None``: it meets the margin, or the margin was not checked)."""

    row: pd.DataFrame
    predicted: Any
    problems: list[str] = field(default_factory=list)
    verified: bool = False
    score: float | None = None
    short_of: float | None = None


def feature_intervals(m: CounterfactualModel) -> dict[str, tuple[float, float]]:
    """Per numeric feature, the code interval of the predictor's region for the
    solution (its bounds when the predictor has no region), intersected with the
    regions of declared blocks that embed discrete choices of their own
    (:meth:`~cfopt.ConstraintBlock.feature_intervals`, e.g. an isolation forest)."""
    out = {f.name: (f.lower, f.upper) for f in m.space if not f.is_onehot}
    own = m.factual_inputs
    region = m.predictor_constr.input_region(own)
    parts = [] if region is None else [region_intervals(m, m.input_specs, region, own)]
    parts += [c.feature_intervals(m, m.component(name)) for name, c in m.constraints.items()]
    for part in parts:
        for name, (lo, hi) in part.items():
            low, high = out[name]
            out[name] = (max(low, lo), min(high, hi))
    return out


def region_intervals(m: CounterfactualModel, specs: list, region: list[tuple[float, float]],
                     own: np.ndarray) -> dict[str, tuple[float, float]]:
    """Per numeric feature, the code interval a region of model inputs allows, the
    inputs computed from the features by ``specs`` (``own``: the factual's inputs)."""
    out: dict[str, tuple[float, float]] = {}
    for j, (spec, (lo, hi)) in enumerate(zip(specs, region)):
        if spec.kind != "affine" or spec.a == 0:
            continue
        # an end on the factual's own input is the factual's code exactly (mapping the
        # input back, (z - b) / a, could miss it by an ulp and move an immutable feature)
        x0 = pyo.value(m.x0[spec.feature])
        ends = sorted(x0 if end == own[j] else (end - spec.b) / spec.a for end in (lo, hi))
        low, high = out.get(spec.feature, (-math.inf, math.inf))
        out[spec.feature] = (max(low, ends[0]), min(high, ends[1]))
    return out


def candidates(m: CounterfactualModel) -> list[pd.DataFrame]:
    """The decoded solution as raw rows: snapped first, then without snapping (one row
    when snapping changes nothing)."""
    if m.factual is None:
        raise RuntimeError("no factual set")
    intervals = feature_intervals(m)
    snapped: dict[str, Any] = {}
    plain: dict[str, Any] = {}
    for f in m.space:
        if f.is_onehot:
            values = [m.onehot[f.name, level].value for level in f.categories]
            if any(v is None for v in values):
                raise RuntimeError("the model holds no solution to decode")
            snapped[f.name] = plain[f.name] = f.categories[max(range(len(values)),
                                                                key=values.__getitem__)]
            continue
        v = pyo.value(m.x[f.name], exception=False)  # pragma: no mutate (None: also falsy)
        if v is None:
            raise RuntimeError("the model holds no solution to decode")
        lo, hi = intervals[f.name]
        if f.is_integral:
            lo = math.ceil(lo - 1e-9 * max(1.0, abs(lo)))
            hi = math.floor(hi + 1e-9 * max(1.0, abs(hi)))
        if lo <= hi:
            v = min(max(v, lo), hi)
        v = min(max(v, f.lower), f.upper)
        x0 = pyo.value(m.x0[f.name])
        if abs(v - x0) <= _ROUNDING * max(abs(f.lower), abs(f.upper), f.upper - f.lower):
            v = x0  # the representation's round-off (x = lower + width * x_unit)
        plain[f.name] = f.from_code(v)
        near = abs(v - x0) <= SNAP * (f.upper - f.lower) and lo <= x0 <= hi
        snapped[f.name] = f.from_code(x0 if near and not f.is_integral else v)
    rows = [pd.DataFrame([snapped], columns=m.space.names)]  # pragma: no mutate (same order)
    if plain != snapped:
        rows.append(pd.DataFrame([plain], columns=m.space.names))  # pragma: no mutate (same order)
    return rows


def failed_checks(m: CounterfactualModel, predicted: Any, problems: list[str],
                  score: float | None = None, short_of: float | None = None) -> str:
    """Which check of verification a point failed, in words: the real model's class
    (against the query's target), the validity margin (the point's target ``score``
    below the margin ``short_of``), the declared constraints (each one it breaks)."""
    said = []
    if not m.is_target(predicted):
        said.append(f"the real model predicts {predicted!r}, which misses the target "
                    f"({m.describe_target()})")
    if short_of is not None:
        said.append(f"its target score {score:.9g} (the model's scores in float64) is "
                    f"below the margin {short_of:g} beyond the tolerance "
                    f"{MARGIN_TOLERANCE:g}·(1 + |score|)")
    if problems:
        said.append(f"it breaks the declared constraint(s) {problems}")
    return " and ".join(said) or "it passed every check"


def verify_row(m: CounterfactualModel, row: pd.DataFrame, *, witness: bool = False,
               margin: float | None = None) -> Verification:
    """What the real model and the declared constraints say of a raw row (``witness``:
    the model holds the solver's values of this point, at which the user's own
    variables are checked: :mod:`cfopt.constraints.raw`); with ``margin`` (the declared
    validity margin μ), also whether the point meets it
    (:data:`~cfopt.formulations.validity.MARGIN_TOLERANCE`): a solver's tolerances can
    leave the target's score a little short of μ, outside the declared problem."""
    predicted = m.classify(row)[0]
    problems = m.violations(row, witness=witness)
    hit = m.is_target(predicted)
    score = short_of = None
    if hit and margin is not None:
        score = m.target_score(row)
        if score is not None and score < margin - MARGIN_TOLERANCE * (1.0 + abs(score)):
            short_of = margin
    return Verification(row, predicted, problems,
                        verified=hit and not problems and short_of is None, score=score,
                        short_of=short_of)


def verified_solution(m: CounterfactualModel, margin: float | None = None) -> Verification:
    """The first candidate (:func:`candidates`) of the solver's solution that the real
    model classifies as a target (with ``margin`` when given: :func:`verify_row`) and
    that meets every declared constraint (the user's own variables at the solver's
    values); else the first candidate with what is wrong with it (``verified`` False)."""
    checked = []
    for row in candidates(m):
        result = verify_row(m, row, witness=True, margin=margin)
        if result.verified:
            return result
        checked.append(result)
    return checked[0]


def start_of(m: CounterfactualModel, row: pd.DataFrame) -> ComponentMap:
    """The feature variables of the MILP at the raw row ``row`` (codes and one-hots) and
    the predictor's free binaries at the choices the model makes there
    (:meth:`~cfopt.formulations.predictors.PredictorConstr.start_choices`): a partial
    MIP start, the solver completing the rest (:meth:`SolverBackend.solve
    <cfopt.solvers.SolverBackend.solve>`)."""
    values = row.iloc[0]
    start = ComponentMap()
    for f in m.space:
        if f.is_onehot:
            for level in f.categories:
                start[m.onehot[f.name, level]] = float(values[f.name] == level)
            continue
        var, offset, width = code_variable(m, m.space, f.name)
        start[var] = (f.to_code(values[f.name]) - offset) / width
    start.update(m.predictor_constr.start_choices(m.adapter.model_inputs(m.space, row)[0]))
    return start
