"""Differential testing of cfopt's optimality and infeasibility claims: the project's
referee. Random seeded instances (``tests/differential_instances.py``) are solved with
every solver, and each answer is checked against an independent reference
(``tests/differential_reference.py``, ``tests/differential_linear.py``) and against the
other solvers' answers.

**The declared problem.** For one instance (model, feature space, factual x, target T,
objective, margin μ, MIP gap g), P(μ) is the set of raw points z that lie in the feature
space (bounds, integrality, categories), respect actionability (immutable, increase- /
decrease-only, ``max_changes``) and that the *library's own* model predicts in T, with a
score beating the others by at least μ. The score is the model's in exact arithmetic of
its parameters (float64; a float32 network's own logits differ by a rounding that
depends on its kernels' summation order, ``margin_scores``): binary, the signed score
towards the target class (``tests/differential_models.py``); multiclass, max over T
minus max outside T of the per-class scores; regression with target [lo, hi],
min(pred - lo, hi - pred). The cost is recomputed on the raw row: weighted L1 with
weight 1/spread of each numeric feature (spread: its range in the training rows; 1 if
0), a category change costing 1; L0 the number of changed features; L∞ the largest
weighted move. A ``custom`` instance (``tests/differential_custom.py``) adds rules of the
user's own to P(μ) and terms of the user's own to the cost, each recomputed on the raw
row; every solver is given them as declared blocks and as raw components of its
``explainer.milp`` (CP-SAT refuses both: ``"skipped"``). A ``narrowed`` instance
(``tests/differential_narrowing.py``) passes DiCE's per-query ``features_to_vary`` and
``permitted_range`` to ``explain``; P(μ) keeps only the points they allow.

Scores computed in different float precisions differ slightly, so an ambiguity band
ε = 1e-6·(1+|s|) separates opt_strict (min cost with prediction in T and score ≥ μ + ε)
from opt_loose (min cost with prediction in T). Checks per (instance, solver):

* ``unverified_returned``: a returned counterfactual that the library does not predict
  as a target, that breaks a declared constraint (a custom rule too), or whose reported
  objective differs from the recomputed cost (with the custom terms; rel. 1e-6); also
  OPTIMAL without a point;
* ``margin_violations``: a returned counterfactual predicted as a target whose score is
  below μ − ε (outside the declared problem: a solver's tolerances left it short);
* ``wrong_optimal``: OPTIMAL with objective > opt_strict + g·|objective| + 1e-6;
* ``false_infeasible``: ``InfeasibleError`` (or status INFEASIBLE) while a point has a
  target prediction and score ≥ μ + ε;
* ``invalid_bound``: a reported bound > opt_strict + 1e-6;
* ``solver_disagreements`` (per instance): INFEASIBLE while another solver returns a
  point with score ≥ μ + ε; a point of one solver in P(μ+ε) cheaper than another's OPTIMAL
  objective beyond the gap (two OPTIMAL objectives may differ when the cheaper point
  lies within a solver's feasibility tolerance below the margin: it is verified, the
  bound stays valid for P(μ), and the other claim is true of P(μ));
* ``crashes``: any exception but ``InfeasibleError`` (licence refusals are skips);
* ``harness_bugs``: the reference contradicted (a verified point breaking no declared
  constraint cheaper than the exact opt_loose, or than the exact opt_strict) — the
  referee itself is wrong.

Every opt_strict the checks use is the cost of a witness point the library places in
P(μ+ε), so no failure is reported without a point to show.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

import cfopt
from cfopt.query import ladder
from cfopt.query.ladder import first_floor

from .differential_custom import add_raw, build
from .differential_instances import CASES, Instance, make_instance
from .differential_linear import linear_reference
from .differential_models import FAMILIES, NETWORK_FAMILIES, TREE_FAMILIES
from .differential_reference import (
    Reference,
    admissible,
    assess,
    band,
    costs,
    custom_extra,
    exhaustive,
    moves,
    plan,
    sampled,
    tree_axes_values,
    violations,
)

__all__ = ["CASES", "CHECKS", "COUNTERS", "FAMILIES", "SOLVERS", "Claim", "Instance",
           "available_solvers", "check_claim", "disagreements", "evaluate", "make_instance",
           "reference_for", "run_instance", "solve", "summarize"]

SOLVERS = ("highs", "cbc", "gurobi", "cpsat", "highs-ladder")
#: solvers of tree ensembles only (``"skipped"`` on the other families)
TREE_SOLVERS = frozenset({"cpsat"})
#: HiGHS up the ladder of radii from one change's cost (:mod:`cfopt.query.ladder`, split
#: by the features a point within each radius changes: :mod:`cfopt.query.supports`), as
#: the robust loops' masters solve: ReLU networks with an L0 objective only
LADDER = "highs-ladder"
CHECKS = ("wrong_optimal", "false_infeasible", "unverified_returned", "margin_violations",
          "invalid_bound", "solver_disagreements")
COUNTERS = CHECKS + ("crashes", "harness_bugs")
STATUSES = ("optimal", "feasible", "verification_failed", "no_solution", "error", "infeasible",
            "crash", "skipped")
_COUNTER_OF = {"crash": "crashes", "harness_bug": "harness_bugs"}


@dataclass
class Claim:
    """What one solver answered: a cfopt status, ``"infeasible"`` (InfeasibleError),
    ``"crash"`` (another exception) or ``"skipped"`` (licence / not installed)."""

    solver: str
    status: str
    objective: float | None = None
    bound: float | None = None
    verified: bool = False
    row: pd.DataFrame | None = None
    attempts: int = 0
    margin: float | None = None
    message: str = ""
    seconds: float = 0.0


def available_solvers(solvers: tuple[str, ...] = SOLVERS) -> list[str]:
    """The solvers installed here (a missing Gurobi or CBC is left out)."""
    out = []
    for name in solvers:
        try:
            if cfopt.solvers.make_solver(name.removesuffix("-ladder")).available():
                out.append(name)
        except cfopt.SolverNotAvailableError:
            continue
    return out


@contextlib.contextmanager
def gate_off() -> Iterator[None]:
    """Within: every problem climbs the ladder, however few its unstable neurons."""
    saved = ladder.HARD_NEURONS
    ladder.HARD_NEURONS = -1
    try:
        yield
    finally:
        ladder.HARD_NEURONS = saved


@contextlib.contextmanager
def trees_per_query(on: bool) -> Iterator[None]:
    """Within: a tree ensemble of any size is built per query (its size threshold 0)."""
    from cfopt.formulations.predictors import trees

    saved = trees.PER_QUERY_TERMS
    if on:
        trees.PER_QUERY_TERMS = 0
    try:
        yield
    finally:
        trees.PER_QUERY_TERMS = saved


def solve(inst: Instance, solver: str) -> Claim:
    """Explain the instance's factual with one solver."""
    if solver in TREE_SOLVERS and inst.family not in TREE_FAMILIES:
        return Claim(solver, "skipped", message=f"{solver} solves tree ensembles only")
    if solver == LADDER and (inst.family not in NETWORK_FAMILIES or inst.objective != "l0"):
        return Claim(solver, "skipped", message="the ladder: ReLU networks, L0 objective")
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with trees_per_query(inst.per_query_trees):
                explainer = cfopt.Explainer(
                    inst.model, inst.space, solver=solver.removesuffix("-ladder"),
                    objective=inst.objective, max_changes=inst.max_changes,
                    margin=inst.margin, mip_gap=inst.mip_gap, time_limit=inst.time_limit,
                    constraints=build(inst))
                add_raw(inst, explainer.milp)
                if solver == LADDER:  # even these small networks climb (no gate)
                    settings = explainer.runner.start(inst.x, inst.target, inst.narrowing)
                    with gate_off():
                        ce = explainer.runner.answer(settings, t0,
                                                     floor=first_floor(explainer.milp))
                else:
                    ce = explainer.explain(inst.x, target=inst.target, **inst.narrowing)
    except cfopt.InfeasibleError as exc:
        return Claim(solver, "infeasible", message=str(exc)[:300],
                     seconds=time.perf_counter() - t0)
    except (cfopt.SolverLicenseError, cfopt.SolverNotAvailableError) as exc:
        return Claim(solver, "skipped", message=f"{type(exc).__name__}: {exc}"[:300])
    except Exception as exc:  # a crash is a finding: keep its type and message
        skipped = (type(exc).__name__ == "GurobiError" and "licen" in str(exc).lower()) or (
            isinstance(exc, ValueError) and str(exc).startswith(f"solver={solver!r} does not")
            and bool(inst.custom or inst.narrowing))  # CP-SAT refuses these
        return Claim(solver, "skipped" if skipped else "crash",
                     message=f"{type(exc).__name__}: {exc}"[:500],
                     seconds=time.perf_counter() - t0)
    return Claim(solver, ce.status.value, ce.objective, ce.bound, ce.verified,
                 ce.counterfactual, ce.attempts, ce.margin, ce.message[:300],
                 time.perf_counter() - t0)


def reference_for(inst: Instance, claims: list[Claim]) -> Reference:
    """The instance's reference (``plan``); the sampled one also descends from every
    solver's point."""
    kind = plan(inst)
    ref = None
    if kind == "trees":
        ref = exhaustive(inst, tree_axes_values(inst), "trees")
    elif kind == "grid":
        ref = exhaustive(inst, [admissible(inst, f) for f in inst.space], "grid")
    elif kind == "linear":
        ref = linear_reference(inst)
    if ref is None:
        starts = [c.row.iloc[0].to_dict() for c in claims if c.row is not None]
        ref = sampled(inst, starts, np.random.default_rng([inst.seed, 7]))
    return ref


def evaluate(inst: Instance, row: pd.DataFrame) -> dict[str, Any]:
    """The harness's own verdict on a returned point."""
    hit, score, strict = assess(inst, inst.space.transform(row, check_bounds=False))
    move, moved = moves(inst, row)
    s = float(score[0])
    cost = costs(inst.objective, move, moved) + custom_extra(inst, row, rules=False)
    return {"in_target": bool(hit[0]), "score": s, "strict": bool(strict[0]),
            "cost": float(cost[0]),
            "violations": violations(inst, row.iloc[0])}


def check_claim(inst: Instance, ref: Reference, claim: Claim) -> tuple[list[dict[str, str]],
                                                                         dict[str, Any]]:
    """The problems of one solver's answer (module docstring), and the harness's own
    evaluation of its point (``{}`` without one)."""
    problems: list[dict[str, str]] = []

    def flag(check: str, detail: str) -> None:
        problems.append({"check": check, "detail": detail})

    witness = f"witness {ref.witness} (cost {ref.strict:.9g}, score {ref.witness_score})"
    if claim.status == "crash":
        flag("crash", claim.message)
    if claim.status == "infeasible" and math.isfinite(ref.strict):
        flag("false_infeasible", f"reported infeasible but {witness}")
    ev = evaluate(inst, claim.row) if claim.row is not None else {}
    if ev:
        point = claim.row.iloc[0].to_dict()
        if not claim.verified or not ev["in_target"]:
            flag("unverified_returned", f"{point} is not predicted in {list(inst.labels)} "
                                        f"(score {ev['score']:.9g}, verified={claim.verified})")
        if ev["in_target"] and ev["score"] < inst.margin - band(np.array(ev["score"])):
            flag("margin_violations", f"{point} scores {ev['score']:.9g}, below the margin "
                                      f"{inst.margin:g} beyond the band ε")
        for v in ev["violations"]:
            flag("unverified_returned", f"{point} breaks a declared constraint: {v}")
        if claim.objective is None or abs(claim.objective - ev["cost"]) > 1e-6 * max(
                1.0, abs(ev["cost"])):
            flag("unverified_returned", f"reported objective {claim.objective} but {point} "
                                        f"costs {ev['cost']:.12g}")
        if ev["in_target"] and not ev["violations"] and ev["cost"] < ref.loose - 1e-6:
            flag("harness_bug", f"{point} (cost {ev['cost']:.9g}) is cheaper than the exact "
                                f"opt_loose {ref.loose:.9g}")
        if ev["strict"] and not ev["violations"] and ref.exact and \
                ev["cost"] < ref.strict - 1e-6:
            flag("harness_bug", f"{point} in P(mu+eps) (cost {ev['cost']:.9g}) is cheaper "
                                f"than the exact opt_strict {ref.strict:.9g}")
    if claim.status == "optimal":
        if claim.row is None or claim.objective is None:
            flag("unverified_returned", "OPTIMAL without a counterfactual")
        elif claim.objective > ref.strict + inst.mip_gap * abs(claim.objective) + 1e-6:
            flag("wrong_optimal", f"OPTIMAL objective {claim.objective:.9g} (attempts "
                                  f"{claim.attempts}, margin {claim.margin}) but {witness}")
    if claim.status in ("optimal", "feasible", "verification_failed", "no_solution") and \
            claim.bound is not None and math.isfinite(claim.bound) and \
            claim.bound > ref.strict + 1e-6 + 1e-9 * abs(ref.strict):
        flag("invalid_bound", f"bound {claim.bound:.9g} above {witness}")
    return problems, ev


def disagreements(inst: Instance, claims: list[Claim],
                  evals: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Contradictions between two solvers' answers (module docstring)."""
    out = []
    g = inst.mip_gap
    for a, b in itertools.combinations(claims, 2):
        for x, y in ((a, b), (b, a)):
            ev = evals.get(y.solver, {})
            if x.status == "infeasible" and ev.get("strict") and not ev["violations"]:
                out.append({"solvers": [x.solver, y.solver],
                            "kind": "infeasible vs a point in P(mu+eps)",
                            "detail": f"{y.solver} returned {y.row.iloc[0].to_dict()} "
                                      f"(score {ev['score']:.9g})"})
            if x.status == "optimal" and x.objective is not None and ev.get("strict") and \
                    not ev["violations"] and ev["cost"] < x.objective - g * abs(x.objective) - 1e-6:
                out.append({"solvers": [x.solver, y.solver],
                            "kind": "a point in P(mu+eps) cheaper than an OPTIMAL claim",
                            "detail": f"{x.solver} OPTIMAL {x.objective:.9g}; {y.solver}'s "
                                      f"{y.row.iloc[0].to_dict()} costs {ev['cost']:.9g}"})
    return out


def run_instance(inst: Instance, solvers: list[str] | tuple[str, ...] = SOLVERS
                 ) -> dict[str, Any]:
    """Solve one instance with every solver and check every answer; a JSON-able record
    (``make``: the arguments of ``make_instance`` that rebuild it)."""
    start = time.perf_counter()
    claims = [solve(inst, s) for s in solvers]
    t0 = time.perf_counter()
    ref = reference_for(inst, claims)
    ref_seconds = time.perf_counter() - t0
    evals, per_solver = {}, {}
    for claim in claims:
        problems, ev = check_claim(inst, ref, claim)
        evals[claim.solver] = ev
        per_solver[claim.solver] = {
            "status": claim.status, "objective": claim.objective, "bound": claim.bound,
            "verified": claim.verified, "attempts": claim.attempts, "margin": claim.margin,
            "seconds": round(claim.seconds, 4), "message": claim.message,
            "counterfactual": None if claim.row is None else {
                k: _plain(v) for k, v in claim.row.iloc[0].items()},
            "score": ev.get("score"), "problems": problems}
    return {**inst.describe(), "make": [inst.seed, inst.family, inst.forced_case],
            "reference": {**ref.summary(), "seconds": round(ref_seconds, 4)},
            "solvers": per_solver,
            "disagreements": disagreements(inst, claims, evals),
            "seconds": round(time.perf_counter() - start, 4)}


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counters, statuses per family and solver, instances per case, and every failure
    with what reproduces it."""
    counters: Counter = Counter({c: 0 for c in COUNTERS})
    by_family: dict[str, dict[str, Any]] = {}
    by_case = {c: {"instances": 0, "failing": 0} for c in CASES}
    statuses: dict[str, Counter] = {}
    by_solver: dict[str, Counter] = {}
    failures = []
    for rec in records:
        fam = by_family.setdefault(rec["family"], {"instances": 0, "seconds": 0.0,
                                                   "references": Counter(),
                                                   **{c: 0 for c in COUNTERS}})
        fam["instances"] += 1
        fam["seconds"] += rec["seconds"]
        ref = rec["reference"]
        fam["references"][f"{ref['kind']}{'' if ref['exact'] else ' (upper bound)'}"] += 1
        found = []
        for solver, claim in rec["solvers"].items():
            statuses.setdefault(rec["family"], Counter())[claim["status"]] += 1
            by_solver.setdefault(solver, Counter())[claim["status"]] += 1
            for p in claim["problems"]:
                found.append((_COUNTER_OF.get(p["check"], p["check"]), solver, p["detail"],
                              claim))
        for d in rec["disagreements"]:
            found.append(("solver_disagreements", "+".join(d["solvers"]),
                          f"{d['kind']}: {d['detail']}", None))
        for counter, solver, detail, claim in found:
            counters[counter] += 1
            fam[counter] += 1
            failures.append(_failure(rec, counter, solver, detail, claim))
        for case in rec["cases"]:
            by_case[case]["instances"] += 1
            by_case[case]["failing"] += int(bool(found))
    for fam in by_family.values():
        fam["references"] = dict(fam["references"])
        fam["seconds"] = round(fam["seconds"], 2)
    return {"instances": len(records), **{c: counters[c] for c in COUNTERS},
            "by_family": dict(sorted(by_family.items())), "by_case": by_case,
            "statuses": {f: _ordered(c) for f, c in sorted(statuses.items())},
            "by_solver": {s: _ordered(c) for s, c in sorted(by_solver.items())},
            "failures": failures}


def _failure(rec: dict[str, Any], check: str, solver: str, detail: str,
             claim: dict[str, Any] | None) -> dict[str, Any]:
    seed, family, case = rec["make"]
    solvers = list(rec["solvers"]) if claim is None else [solver]
    strict = rec["reference"]["strict"]
    excess = None if claim is None or claim["objective"] is None or strict is None else \
        claim["objective"] - strict
    return {"check": check, "seed": seed, "family": family, "solver": solver, "excess": excess,
            "cases": rec["cases"], "task": rec["task"], "objective": rec["objective"],
            "max_changes": rec["max_changes"], "target": rec["target"], "detail": detail,
            "claim": None if claim is None else {k: claim[k] for k in (
                "status", "objective", "bound", "attempts", "margin", "counterfactual",
                "score", "message")},
            "reference": {k: rec["reference"][k] for k in (
                "kind", "exact", "strict", "loose", "witness", "witness_score")},
            "factual": rec["factual"],
            "repro": f"from tests.differential import make_instance, run_instance; "
                     f"run_instance(make_instance({seed}, {family!r}, {case!r}), {solvers!r})"}


def _ordered(counter: Counter) -> dict[str, int]:
    """Status counts, the known statuses first (any new cfopt status is kept too)."""
    order = list(STATUSES) + sorted(set(counter) - set(STATUSES))
    return {s: counter[s] for s in order if counter[s]}


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
