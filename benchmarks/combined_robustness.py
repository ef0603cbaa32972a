"""Robustness to model shift and to input perturbations, alone and together, on the five
annotated data sets of Virgolin & Fracaros (2023) (issue 21).

Per data set (``cfopt.datasets.load_virgolin``, the paper's plausibility constraints):
the sklearn MLP, split and queries of ``perturbation_robustness.py`` (``prepare``: its
grid search over (16,) / (32, 16) and α = 1e-4 / 1e-2 with 3-fold CV on the training
part of the first fold of a stratified 5-fold split, seed 42), and the first ``--n``
test rows the MLP does not classify as the class sought. δ is chosen per data set
(``choose_delta``): the largest value of the ladder 0.045, 0.035, 0.025 (PROPLACE's
radii on min-max scaled inputs), 0.015, 0.01, 0.005, 0.0025, 0.001 at which the
interval screen proves at least half of the training rows the MLP classifies as the
target Δ-robust: as large as the ladder allows while Δ-robust points stay common, so
that PROPLACE's plausible region (k = 20 Δ-robust neighbours) exists and a Δ-robust
counterfactual near the data is a real question rather than an empty one. Methods,
all with the paper's cost (L1 in range units + L0), HiGHS, 50 iterations at most,
``--time-limit`` seconds per query, and by default no plausible region (the same
feasible set for the three, so their costs compare):

* ``delta``: the Δ-robust loop alone (σ = 0.01, t = 0.005): the combined method on the
  feature space stripped of its perturbation annotations, so the K-adversary has
  nothing to check (``--region``: :class:`cfopt.Proplace`, with PROPLACE's plausible
  region spanned by the training rows, k = 20);
* ``k``: :class:`cfopt.PerturbationRobustExplainer` with ``robustness="K"``;
* ``delta+k``: :class:`cfopt.CombinedRobustExplainer` (same δ, σ, t; ``--region``: with
  the same plausible region as ``delta``).

The plausible region is off by default because it is the convex hull of the factual
and its Δ-robust neighbours: with the paper's immutable continuous features (e.g.
Hou's DIS and B) a counterfactual must keep their values, which the hull rarely allows
beyond the factual itself, so most queries become infeasible for reasons unrelated to
robustness.

Each answer is evaluated by sampling, with the MLP's own ``predict``: 1,000 models whose
every weight and bias (``coefs_`` / ``intercepts_`` copies) is shifted uniformly within
±δ (``invalidity_shift``), 1,000 vertices of that box (every parameter at ±δ:
``invalidity_vertex``), and 1,000 uniform K-perturbations of the answer
(``sample_perturbations(..., "K")``: ``invalidity_k``) — the fraction of sampled
models / points that no longer give the target, the mean over certified answers. A
certified answer must score 0 on what its method certifies (shift and vertex for
``delta``, K for ``k``, all three for ``delta+k``); any other value is listed in
``violations``. ``mean_cost``: Virgolin & Fracaros's Eq. 9 cost (``metrics.cogs_loss``)
over certified answers; ``certified_fraction``: answers whose result says ``certified``
(both proofs at level 0: Δ bound ≥ 0, K bound > 0), ``certified_status_fraction``:
answers whose status is ``certified`` (the loop's own stop, Δ bound ≥ σ - t; a loop cut
short by a limit can leave a point proven robust at level 0 with status ``time_limit``);
``median_s``: per-query wall time of ``explain`` (building the
method apart: ``build_s``). A method that raises gets its error as the row's status and
the run goes on. Writes ``benchmarks/results/combined_robustness.json``.

    python benchmarks/combined_robustness.py [--datasets ...] [--n 10] [--time-limit 60]
                                             [--methods delta,k,delta+k] [--region]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, stats, write  # noqa: E402
from perturbation_robustness import PAPER_NAMES, prepare  # noqa: E402

import cfopt  # noqa: E402
from cfopt import metrics  # noqa: E402
from cfopt.methods import RobustnessChecker  # noqa: E402
from cfopt.space.perturbations import sample_perturbations  # noqa: E402

METHODS = ("delta", "k", "delta+k")
LADDER = (0.045, 0.035, 0.025, 0.015, 0.01, 0.005, 0.0025, 0.001)
ROBUST_SHARE = 0.5
SAMPLES = 1000
OBJECTIVE = {"l1": 1.0, "l0": 1.0}
SIGMA, TOLERANCE, K_NEIGHBOURS, MAX_ITERATIONS = 0.01, 0.005, 20, 50
#: what each method certifies: the sampled invalidities that must be 0 for its answers
CERTIFIES = {"delta": ("shift", "vertex"), "k": ("k",), "delta+k": ("shift", "vertex", "k")}


def choose_delta(model: Any, Z: np.ndarray, target_index: int) -> tuple[float, dict]:
    """The largest δ of :data:`LADDER` at which the interval screen proves at least
    :data:`ROBUST_SHARE` of the rows ``Z`` Δ-robust for ``target_index`` (else the
    smallest), and the proven share at each δ."""
    shares = {}
    for delta in LADDER:
        lower, _ = RobustnessChecker(model, delta).screen(Z, target_index)
        shares[delta] = float(np.mean(lower >= 0))
        if shares[delta] >= ROBUST_SHARE:
            return delta, shares
    return LADDER[-1], shares


def without_perturbations(space: cfopt.FeatureSpace) -> cfopt.FeatureSpace:
    """A copy of ``space`` whose features carry no perturbation annotation."""
    bare = copy.deepcopy(space)
    for f in bare:
        bare.set(f.name, perturbation=None)
    return bare


def build(method: str, model: Any, space: cfopt.FeatureSpace, train_rows: pd.DataFrame,
          delta: float, args: argparse.Namespace) -> Any:
    common = {"objective": OBJECTIVE, "max_iterations": MAX_ITERATIONS,
              "time_limit": args.time_limit}
    robust = {"delta": delta, "sigma": SIGMA, "tolerance": TOLERANCE, **common}
    if method == "k":
        return cfopt.PerturbationRobustExplainer(model, space, robustness="K", **common)
    if method == "delta" and args.region:
        return cfopt.Proplace(model, space, train_rows, k=K_NEIGHBOURS, **robust)
    if method == "delta":
        return cfopt.CombinedRobustExplainer(model, without_perturbations(space), **robust)
    region = {"data": train_rows, "k": K_NEIGHBOURS} if args.region else {}
    return cfopt.CombinedRobustExplainer(model, space, **region, **robust)


def shifted_predictions(model: Any, z: np.ndarray, delta: float, m: int,
                        rng: np.random.Generator, vertices: bool) -> np.ndarray:
    """The labels ``m`` shifted copies of the sklearn MLP give the model input ``z``:
    every weight and bias moved by a uniform draw in [-δ, δ] (``vertices``: by ±δ)."""
    shifted = copy.deepcopy(model)
    labels = []
    for _ in range(m):
        def move(a: np.ndarray) -> np.ndarray:
            step = (rng.choice((-delta, delta), a.shape) if vertices
                    else rng.uniform(-delta, delta, a.shape))
            return a + step
        shifted.coefs_ = [move(w) for w in model.coefs_]
        shifted.intercepts_ = [move(b) for b in model.intercepts_]
        labels.append(shifted.predict(z)[0])
    return np.asarray(labels)


def evaluate(model: Any, space: cfopt.FeatureSpace, x: pd.DataFrame, z: pd.DataFrame,
             target: Any, delta: float, rng: np.random.Generator) -> dict[str, float]:
    """Sampled invalidities of one answer (module docstring)."""
    zz = space.transform(z, check_bounds=False)
    perturbed = sample_perturbations(space, x, z, SAMPLES, "K", rng)
    k_labels = model.predict(space.transform(perturbed, check_bounds=False))
    return {
        "shift": float(np.mean(shifted_predictions(model, zz, delta, SAMPLES, rng, False)
                               != target)),
        "vertex": float(np.mean(shifted_predictions(model, zz, delta, SAMPLES, rng, True)
                                != target)),
        "k": float(np.mean(k_labels != target)),
    }


def query(explainer: Any, method: str, model: Any, space: cfopt.FeatureSpace,
          x: pd.DataFrame, target: Any, delta: float, rng: np.random.Generator,
          index: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        result = explainer.explain(x, target)
    except Exception as exc:  # recorded as the query's status; the run goes on
        return {"query": index, "status": f"error: {type(exc).__name__}: {exc}"[:300],
                "seconds": time.perf_counter() - t0, "found": False, "certified": False}
    entry: dict[str, Any] = {"query": index, "status": result.status.value,
                             "seconds": time.perf_counter() - t0, "found": result.found,
                             "certified": result.certified}
    if result.found:
        z = result.counterfactual
        entry.update(counterfactual=z.iloc[0].to_dict(),
                     cost=float(metrics.cogs_loss(space, x, z)[0]),
                     changed=int(sum(z.iloc[0][n] != x.iloc[0][n] for n in space.names)),
                     invalidity=evaluate(model, space, x, z, target, delta, rng))
    if not result.certified and result.message:
        entry["message"] = result.message[:300]
    return entry


def summarise(name: str, method: str, delta: float, entries: list[dict[str, Any]],
              build_s: float | None, setup: dict[str, Any]) -> dict[str, Any]:
    certified = [e for e in entries if e["certified"]]

    def mean(key: str, over: list[dict[str, Any]]) -> float | None:
        values = [e["invalidity"][key] for e in over if "invalidity" in e]
        return float(np.mean(values)) if values else None

    violations = [{"query": e["query"], "kind": kind, "invalidity": e["invalidity"][kind]}
                  for e in certified for kind in CERTIFIES[method]
                  if e["invalidity"][kind] > 0]
    statuses: dict[str, int] = {}
    for e in entries:
        statuses[e["status"]] = statuses.get(e["status"], 0) + 1
    found = [e for e in entries if e["found"]]
    return {
        "dataset": name, "paper_name": PAPER_NAMES[name], "method": method, "n": len(entries),
        "certified_fraction": len(certified) / len(entries) if entries else None,
        "certified_status_fraction": (sum(e["status"] == "certified" for e in entries)
                                      / len(entries) if entries else None),
        "median_s": stats([e["seconds"] for e in entries])["median_s"],
        "mean_cost": (float(np.mean([e["cost"] for e in certified])) if certified else None),
        "invalidity_shift": mean("shift", certified),
        "invalidity_vertex": mean("vertex", certified),
        "invalidity_k": mean("k", certified),
        "violations": violations,
        "statuses": statuses,
        "found_fraction": len(found) / len(entries) if entries else None,
        "found_invalidity": {k: mean(k, found) for k in ("shift", "vertex", "k")},
        "max_s": max((e["seconds"] for e in entries), default=None),
        "build_s": build_s, "delta": delta,
        "model_params": setup["params"], "test_accuracy": setup["accuracy"],
        "queries": entries,
    }


def run_dataset(name: str, args: argparse.Namespace) -> tuple[list[dict], dict]:
    data = cfopt.datasets.load_virgolin(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn's convergence warnings (max_iter 800)
        setup = prepare(data, "mlp", args.n)
    model, space, target = setup["model"], setup["space"], setup["target"]
    target_index = list(model.classes_).index(target)
    Z = space.transform(data.X)
    train = setup["train"]
    positives = Z[train][model.predict(Z[train]) == target]
    if args.delta is None:
        delta, shares = choose_delta(model, positives, target_index)
    else:
        delta, shares = args.delta, {}
    info = {"dataset": name, "rows": len(data.X), "inputs": int(Z.shape[1]),
            "classes": [c.item() if hasattr(c, "item") else c for c in model.classes_],
            "target": target, "hidden_layer_sizes": setup["params"]["hidden_layer_sizes"],
            "alpha": setup["params"]["alpha"], "test_accuracy": setup["accuracy"],
            "fit_s": setup["fit_s"], "delta": delta,
            "delta_rule": ("given by --delta" if args.delta is not None else
                           f"largest of {list(LADDER)} with >= {ROBUST_SHARE:.0%} of the "
                           f"{len(positives)} training rows predicted as the target proven "
                           f"Δ-robust by the interval screen"),
            "screened_robust_share": {str(k): v for k, v in shares.items()},
            "queries": setup["queries"], "loadavg_start": list(os.getloadavg())}
    print(info, flush=True)
    train_rows = data.X.iloc[train].reset_index(drop=True)
    rows = []
    for method in args.methods.split(","):
        rng = np.random.default_rng(42)
        t0 = time.perf_counter()
        try:
            explainer = build(method, model, space, train_rows, delta, args)
        except Exception as exc:
            status = f"error: {type(exc).__name__}: {exc}"[:300]
            entries = [{"query": i, "status": status, "seconds": 0.0, "found": False,
                        "certified": False} for i in setup["queries"]]
            rows.append(summarise(name, method, delta, entries, None, setup))
            print(f"{name} {method}: {status}", flush=True)
            continue
        build_s = time.perf_counter() - t0
        entries = []
        for i in setup["queries"]:
            x = data.X.iloc[[i]].reset_index(drop=True)
            entries.append(query(explainer, method, model, space, x, target, delta, rng, i))
            e = entries[-1]
            print(f"{name} {method:7s} row {i}: {e['status']} {e['seconds']:.2f}s "
                  f"{e.get('cost')} {e.get('invalidity')}", flush=True)
        rows.append(summarise(name, method, delta, entries, build_s, setup))
    info["loadavg_end"] = list(os.getloadavg())
    return rows, info


def goals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 21's goal for the combined method: certified fraction ≥ 0.9 and median
    ≤ 10 s per query on every data set."""
    out = {}
    for r in rows:
        if r["method"] != "delta+k":
            continue
        frac, median = r["certified_fraction"], r["median_s"]
        out[r["dataset"]] = {
            "certified_fraction": frac, "median_s": median,
            "certified_met": frac is not None and frac >= 0.9,
            "median_met": median is not None and median <= 10.0,
            "median_ratio_to_goal": None if median is None else median / 10.0}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default=",".join(cfopt.datasets.VIRGOLIN_DATASETS))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="seconds per query (every master solve and check)")
    parser.add_argument("--delta", type=float, default=None,
                        help="one δ for every data set (default: chosen per data set)")
    parser.add_argument("--region", action="store_true",
                        help="delta (as cfopt.Proplace) and delta+k within PROPLACE's "
                             "plausible region")
    parser.add_argument("--out", default="combined_robustness.json")
    args = parser.parse_args()
    unknown = set(args.methods.split(",")) - set(METHODS)
    if unknown:
        parser.error(f"unknown method(s) {sorted(unknown)}; known: {list(METHODS)}")
    t0 = time.perf_counter()
    rows, setups = [], []
    for name in args.datasets.split(","):
        new, info = run_dataset(name, args)
        rows.extend(new)
        setups.append(info)
        write(args.out, {
            "environment": environment(),
            "settings": {"n": args.n, "time_limit_per_query": args.time_limit,
                         "methods": args.methods.split(","), "samples": SAMPLES,
                         "objective": "l1 (range units) + l0", "solver": "highs",
                         "sigma": SIGMA, "tolerance": TOLERANCE, "k": K_NEIGHBOURS,
                         "max_iterations": MAX_ITERATIONS, "plausibility": True,
                         "region": args.region, "delta_ladder": list(LADDER),
                         "model": "sklearn MLPClassifier, grid of perturbation_robustness.py"},
            "wall_s": time.perf_counter() - t0, "setups": setups, "goals": goals(rows),
            "rows": rows})
    print(pd.DataFrame(rows)[["dataset", "method", "n", "certified_fraction", "median_s",
                              "mean_cost", "invalidity_shift", "invalidity_vertex",
                              "invalidity_k", "statuses"]].to_string())
    print(f"wall {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
