"""Diverse sets of counterfactuals from one query, on any solver.

Four methods (``Explainer.explain(x, n=..., diversity=...)``):

* ``"nogood"`` (default): each next counterfactual is the optimum subject to changing a
  different *set of features* than every earlier one (Hamming distance ≥ ``hamming``
  between change patterns; :meth:`DiversityCuts.add_nogood`); after the first member,
  a numeric feature counts as changed only when it moves by at least ``min_change`` ×
  its range (default 10 %, at least one unit), and smaller moves are excluded, so
  members differ in what a person would do, not by one month of duration or one euro
  of credit.
* ``"distance"``: each next counterfactual is the optimum at weighted L1 distance ≥
  ``min_distance`` from every earlier one (:meth:`DiversityCuts.add_distance`; default
  radius: the exact counterfactual distance cfd(x), so members are at least as far
  apart as the closest one is from x — the distance-based filter of Leofante & Potyka
  §4 with β = 0).
* ``"epsilon"``: ε-approximate enumeration (Leofante & Potyka Def. 2–3, Prop. 1): the
  cheapest counterfactual of each distinct set of changed features whose cost is at
  most (1 + ε)·cfd(x), in nondecreasing cost, up to ``n`` (the objective cut-off
  ``m.cutoff`` plus no-good cuts; each solve is optimal, so the order is by cost and
  the enumeration stops exactly when no further set fits; exact on discrete features,
  continuous moves below ``min_change`` × range excluded as for ``"nogood"``).
* ``"pool"``: one solve whose solver-side solution pool is harvested
  (:meth:`SolverBackend.solve_pool`: Gurobi's pool, HiGHS's improving incumbents);
  each member decoded, de-duplicated and verified. A backend without a pool falls
  back to ``"nogood"`` (recorded in ``details["fallback"]``).

Every member is verified by the real model and against every declared constraint,
including the diversity cuts themselves (re-checked on the decoded raw rows). The
first member of the iterative methods is the single optimal counterfactual, so
``cfd`` is certified by the solver's bound when its status is ``OPTIMAL``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..constraints.diversity_cuts import MIN_CHANGE, DiversityCuts, changed_features
from ..query.claims import proven_optimal
from ..query.restrictions.relu import objective_value
from ..query.solution import verified_solution
from ..results.counterfactual import Counterfactual, CounterfactualSet
from ..results.status import Status
from ..solvers import SolverSettings
from ..solvers.base import time_left
from ..solvers.pool import load_member
from .runner import QUERY_OPTIONS

if TYPE_CHECKING:
    from .runner import QueryRunner

METHODS = ("nogood", "distance", "epsilon", "pool")
_SET = ("min_distance", "epsilon", "hamming", "min_change", "pool_mode", "pool_gap")
#: extra pool members asked for, to make up for members that decode to the same raw
#: point (they differ in auxiliary variables only) or fail verification (CE-OCL's code
#: asks Gurobi for n + 100 and de-duplicates)
POOL_EXTRA = 100
#: default smallest counted move of the no-good method, relative to the range: a tenth
NOGOOD_MIN_CHANGE = 0.1


def explain_diverse(runner: QueryRunner, x: pd.DataFrame | pd.Series | Mapping,
                    target: Any = None, *, n: int = 5, method: str = "nogood",
                    **options: Any) -> CounterfactualSet:
    """Up to ``n`` diverse verified counterfactuals of ``x`` (see the module), by the
    explainer's query engine ``runner``.

    Options: ``min_distance`` (``"distance"``; default cfd(x)), ``epsilon``
    (``"epsilon"``; relative, default 0.1), ``hamming`` (``"nogood"``; default 1),
    ``min_change`` (``"nogood"``: default 0.1 of the range, integral features too;
    ``"epsilon"``: default 0.01, continuous features only, as Leofante & Potyka),
    ``pool_mode`` / ``pool_gap`` (``"pool"``: Gurobi's PoolSearchMode, default 2 —
    the n best —, and PoolGap, default none), and the query options ``mip_gap``,
    ``max_changes`` (per solve) and ``time_limit`` (for the whole set: its solves share
    it; a set cut short by it has ``stopped="time_limit"`` and keeps the members found).

    Raises:
        InfeasibleError: no counterfactual at all (the first solve is diagnosed).
        ValueError / TypeError: bad ``n``, method or option.
    """
    settings_of = check_set_request(n, method, options)
    t0 = time.perf_counter()
    settings = runner.start(x, target, {k: v for k, v in options.items() if k in QUERY_OPTIONS})
    m = runner.milp
    if method == "pool":
        if runner.backend.has_pool:
            return _harvest_pool(runner, settings, n, t0, **settings_of)
        settings_of = {"fallback": f"solver {runner.backend.name!r} has no solution pool; "
                                   f"no-good cuts used instead", "hamming": 1,
                       "min_change": NOGOOD_MIN_CHANGE}
        method = "nogood"
    cuts = DiversityCuts(name=_free_name(m, "diversity"),
                         min_change=settings_of.get("min_change", MIN_CHANGE),
                         integers_too=method == "nogood")
    first = runner.answer(settings, t0)  # the unrestricted optimum: cfd(x)
    m.add_constraint(cuts)
    try:
        members = [first] if first.found else []
        cfd = first.objective if first.status is Status.OPTIMAL and first.found else None
        stopped = "complete" if first.found else first.status.value
        if method == "epsilon" and first.found:
            if cfd is None:
                stopped = "cfd not proven optimal: no certified reference for the ε-enumeration"
            else:
                m.cutoff = cfd * (1 + settings_of["epsilon"]) * (1 + 1e-9) + 1e-12
        radius = None  # pragma: no mutate (read by the distance method only, which sets it)
        if method == "distance" and first.found:
            radius = settings_of.get("min_distance") or first.objective
            settings_of["min_distance"] = radius
        while members and len(members) < n and stopped == "complete":
            budget = time_left(settings, t0)
            if budget is None:
                stopped = "time_limit"
                break
            last = members[-1].counterfactual.iloc[0]
            if method == "distance":
                cuts.add_distance(m, last, radius)
            else:
                cuts.add_nogood(m, changed_features(m.space, m.factual.iloc[0], last),
                                settings_of.get("hamming", 1))
            ce = runner.answer(budget, time.perf_counter(), diagnose_infeasible=False)
            if ce.status is Status.INFEASIBLE:
                stopped = "exhausted" if method != "epsilon" else "no further set within (1+ε)·cfd"
            elif not ce.found:  # a member's solve ran out of the set's time: "time_limit"
                stopped = "time_limit" if ce.status is Status.NO_SOLUTION else ce.status.value
            else:
                members.append(ce)
        if len(members) == n:
            stopped = "complete"
    finally:
        m.cutoff = m.max_objective
        m.remove_constraint(cuts.name)
    return CounterfactualSet(
        factual=m.factual, target=m.target, members=members, method=method, requested=n,
        status=first.status, cfd=cfd,
        epsilon=settings_of.get("epsilon"), stopped=stopped,  # set by "epsilon" only
        total_time=time.perf_counter() - t0, details=settings_of)


def _harvest_pool(runner: QueryRunner, settings: SolverSettings, n: int, t0: float, *,
                  pool_mode: int, pool_gap: float | None) -> CounterfactualSet:
    """One solve, its pool decoded, de-duplicated (identical raw rows) and verified."""
    m = runner.milp
    outcome, pool = runner.backend.solve_pool(m, settings, n + POOL_EXTRA, mode=pool_mode,
                                                 gap=pool_gap)
    if outcome.status is Status.INFEASIBLE:
        runner.answer(settings, t0)  # re-solves and raises with the diagnosis
    members: list[Counterfactual] = []
    seen: list[pd.DataFrame] = []
    rejected = 0
    for k, (objective, values) in enumerate(pool):
        load_member(values)
        point = verified_solution(m, m.declared_margin)
        row = point.row
        if any(row.equals(other) for other in seen):
            continue
        seen.append(row)
        if not point.verified:
            rejected += 1
            continue
        value = objective_value(m, row)
        bound = None if outcome.bound is None else min(outcome.bound, value)
        best = proven_optimal(value, bound, settings.mip_gap)
        members.append(Counterfactual(
            factual=m.factual, counterfactual=row, target=m.target,
            factual_class=m.factual_class, predicted_class=point.predicted,
            status=Status.OPTIMAL if best else Status.FEASIBLE, verified=True,
            objective=value, bound=bound,
            distances=m.distances(row), solve_time=outcome.wall_time if k == 0 else 0.0,
            solver_time=outcome.solver_time if k == 0 else None, solver=runner.backend.name,
            margin=runner.margin, attempts=1,
            message="" if best else f"pool member {k + 1} (feasible, not the optimum)",
            details={"solver_objective": objective}, space=m.space))
        if len(members) == n:
            break
    first_optimal = bool(members) and members[0].status is Status.OPTIMAL
    if len(members) == n:
        stopped = "complete"
    elif not outcome.status.has_solution:
        stopped = outcome.status.value
    else:
        stopped = (f"pool exhausted: {len(pool)} harvested from "
                   f"{runner.backend.pool_kind}, {len(members)} distinct and verified; "
                   f"diversity='nogood' finds more")
    return CounterfactualSet(
        factual=m.factual, target=m.target, members=members, method="pool", requested=n,
        status=members[0].status if members else outcome.status,
        cfd=members[0].objective if first_optimal else None, stopped=stopped,
        total_time=time.perf_counter() - t0,
        details={"pool_mode": pool_mode, "pool_gap": pool_gap, "harvested": len(pool),
                 "rejected_by_verification": rejected, "solver_status": outcome.status.value})


def check_set_request(n: Any, method: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """``n``, the diversity ``method`` and the ``options`` of a set query checked before
    any solve (the culprit named); the set options that apply to ``method``.

    Raises:
        ValueError / TypeError: bad ``n``, method or option.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if method not in METHODS:
        raise ValueError(f"unknown diversity method {method!r}; use one of {list(METHODS)}")
    unknown = sorted(set(options) - set(QUERY_OPTIONS) - set(_SET))
    if unknown:
        raise TypeError(f"unknown option(s) {unknown} for a diverse explain(); accepted: "
                        f"{list(QUERY_OPTIONS + _SET)}")
    return _set_options(method, options)


def _set_options(method: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The set options that apply to ``method``, checked; others given are an error."""
    applies = {"nogood": ("hamming", "min_change"), "distance": ("min_distance",),
               "epsilon": ("epsilon", "min_change"), "pool": ("pool_mode", "pool_gap")}[method]
    wrong = sorted(k for k in options if k in _SET and k not in applies)
    if wrong:
        raise TypeError(f"option(s) {wrong} do not apply to diversity={method!r} "
                        f"(it takes {list(applies)})")
    out: dict[str, Any] = {}
    if method in ("nogood", "epsilon"):  # checked by DiversityCuts
        out["min_change"] = options.get("min_change", NOGOOD_MIN_CHANGE if method == "nogood"
                                        else MIN_CHANGE)
    if method == "nogood":
        h = options.get("hamming", 1)
        if isinstance(h, bool) or not isinstance(h, int) or h < 1:
            raise ValueError(f"hamming must be a positive integer, got {h!r}")
        out["hamming"] = h
    elif method == "distance":
        r = options.get("min_distance")
        if r is not None and (isinstance(r, bool) or not isinstance(r, (int, float))
                              or not (r > 0 and math.isfinite(r))):
            raise ValueError(f"min_distance must be a positive number, got {r!r}")
        out["min_distance"] = r
    elif method == "epsilon":
        e = options.get("epsilon", 0.1)
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not (e >= 0 and
                                                                           math.isfinite(e)):
            raise ValueError(f"epsilon must be a non-negative number, got {e!r}")
        out["epsilon"] = float(e)
    else:
        mode = options.get("pool_mode", 2)
        if mode not in (1, 2):
            raise ValueError(f"pool_mode must be 1 (more solutions, any quality) or 2 (the n "
                             f"best), got {mode!r}")
        gap = options.get("pool_gap")
        if gap is not None and (isinstance(gap, bool) or not isinstance(gap, (int, float))
                                or gap < 0):
            raise ValueError(f"pool_gap must be a non-negative number, got {gap!r}")
        out.update(pool_mode=mode, pool_gap=gap)
    return out


def _free_name(m: Any, base: str) -> str:
    name, k = base, 1
    while m.component(name) is not None:
        k += 1
        name = f"{base}_{k}"
    return name

