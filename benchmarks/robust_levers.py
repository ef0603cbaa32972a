"""The speed levers of the robust cutting-set loops, each switched off in turn (issue 21).

Eleven levers, each an option of the robust explainers and sound either way
(``cfopt.methods``; ``warm_start`` is off by default since this benchmark, the others
on):

* ``query_bounds``: the big-M constants of the master's network and of every shifted
  or scenario copy from the query's own input box (actionability ∩ the plausible
  region's box; each K-scenario copy's widened by its scenario), and within a
  plausible region the first layer's of the master's network and of every shifted
  copy also within its values at the region's points (exact over their hull),
  instead of the model's global bounds (the region's box with a region);
* ``warm_start``: every master solve after the first starts from the last point;
* ``lp_screen``: the Δ-adversary's LP relaxation between its interval screen and its
  exact MILP, certifying when its bound reaches σ - t;
* ``ladder``: each master climbs a ladder of radii from the greatest proven bound of
  the query's masters so far (the first, with an L0 term, from one change's cost), its
  network and every copy bounded within each radius and each rung split by the features
  a point within it can change (``cfopt.query.ladder``, ``cfopt.query.supports``;
  masters with more than ``HARD_NEURONS`` unstable neurons);
* ``light_heuristics`` (:class:`cfopt.Proplace` and
  :class:`cfopt.CombinedRobustExplainer`): the masters (and the combined method's
  K-adversary) run without the solver's costly primal heuristics (HiGHS's RENS, RINS,
  feasibility jump and root reduced-cost sub-MIPs);
* ``cutoff`` (:class:`cfopt.Proplace` only): each master with shifted copies (past
  ``CUTOFF_NEURONS`` unstable neurons) is solved under the objective of a point of it,
  its networks held to their linear pieces at the last master's point
  (``cfopt.query.incumbents``);
* ``relax_model`` (:class:`cfopt.Proplace` only): each master with shifted copies
  leaves the model's own network and validity out (a relaxation of the Δ-robust
  problem; the adversary's check over Δ covers the model);
* ``first_cut`` (:class:`cfopt.Proplace` only): before the first master, the interval
  screen's concrete shifted model at the walk's first point from the factual toward
  the region where the model gives margin σ is added as a copy;
* ``active_set`` (:class:`cfopt.Proplace` only): each master holds the newest shifted
  copy and those a master's point missed, solved again with the missed ones;
* ``piece_points`` (:class:`cfopt.Proplace` only): the query's first master past the
  cutoff's gate answers with the point of its linear pieces (an LP), proven by one
  solve of the master whole if the adversary certifies it;
* ``vertex_envelope`` (:class:`cfopt.Proplace`, and
  :class:`cfopt.CombinedRobustExplainer` within a region): every shifted copy's
  first-layer outputs bounded by their values at the region's points, weighted as the
  master's point combines them (Jensen's inequality).

Settings: ``all_on``, each lever off alone (``<lever>_off``) and ``all_on_again`` (the
same as the first, run last: the noise of the timings), on the same queries:

* ``proplace``: :class:`cfopt.Proplace` on Adult and COMPAS as ``proplace_table1.py``
  (its ``prepare``: the data, the ReLU MLP, δ, k = 20, σ = 0.01, t = 0.005, the first
  ``--proplace-n`` held-out rows the model predicts 0; 120 s per query; the retrained
  models are not used here, so they get one epoch);
* ``delta+k``: :class:`cfopt.CombinedRobustExplainer` on garments (Pro) as
  ``combined_robustness.py`` (its MLP, δ rule, cost, σ, t, 50 iterations, no region;
  the first ``--garments-n`` queries; ``--time-limit`` s per query), and on the other
  ``--virgolin`` data sets (the first ``--virgolin-n`` queries; default Inc = adult and
  Hou = boston: fast, and with immutable and monotone features, which garments lacks,
  so that ``query_bounds`` has a box to tighten);
* ``delta+k-region``: the same within PROPLACE's plausible region (the training rows,
  k = 20; ``combined_robustness.py --region``), where garments' queries end well
  within the limit (without it most stop at the limit, so their times say little);
* ``k``: :class:`cfopt.PerturbationRobustExplainer` (``robustness="K"``) on the same
  queries (its levers: ``query_bounds`` and ``ladder``), on the ``--k-datasets`` only
  (default adult, boston: on garments, which has no immutable or monotone feature, the
  K loop's box is the whole feature box and ``query_bounds`` has nothing to tighten).

Per setting: ``total_s`` (every query, building the explainer included), ``median_s``
per query, ``certified`` (answers whose ``certified`` is true), ``certified_status``
(status ``certified``), ``mean_objective`` over the answers certified in *every*
setting of the workload (so the means compare), ``master_s`` / ``adversary_s`` (sums
over queries), ``iterations`` (sum), the Δ-checker's ``lp_checks`` / ``milp_checks``,
statuses, and the load average before and after. Writes
``benchmarks/results/robust_levers.json``; timing only, nothing is asserted.

    python benchmarks/robust_levers.py [--parts proplace,delta+k,delta+k-region,k]
                                       [--proplace-n 10]
                                       [--virgolin garments,adult,boston] [--garments-n 5]
                                       [--virgolin-n 10] [--k-datasets adult,boston]
                                       [--time-limit 60] [--settings all_on,...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from combined_robustness import (  # noqa: E402
    K_NEIGHBOURS,
    MAX_ITERATIONS,
    OBJECTIVE,
    SIGMA,
    TOLERANCE,
    choose_delta,
)
from common import environment, stats, write  # noqa: E402
from perturbation_robustness import prepare as prepare_virgolin  # noqa: E402
from proplace_table1 import prepare as prepare_proplace  # noqa: E402

import cfopt  # noqa: E402

LEVERS = ("query_bounds", "warm_start", "lp_screen", "ladder", "light_heuristics", "cutoff",
          "relax_model", "first_cut", "active_set", "piece_points", "vertex_envelope")
PARTS = ("proplace", "delta+k", "delta+k-region", "k")
#: the levers each workload's explainer has
HAS = {"proplace": LEVERS, "delta+k": LEVERS[:5],
       "delta+k-region": (*LEVERS[:5], "vertex_envelope"), "k": ("query_bounds", "ladder")}


def settings(part: str) -> dict[str, dict[str, bool]]:
    """``all_on``, each lever of ``part`` off alone, and ``all_on`` again last (the
    run-to-run noise and any drift of the machine's load)."""
    out = {"all_on": {lever: True for lever in HAS[part]}}
    for lever in HAS[part]:
        out[f"{lever}_off"] = {**out["all_on"], lever: False}
    out["all_on_again"] = out["all_on"]
    return out


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def record(result: Any, seconds: float) -> dict[str, Any]:
    """One query's numbers (any robust answer)."""
    entry: dict[str, Any] = {"status": result.status.value, "seconds": seconds,
                             "certified": bool(result.certified),
                             "objective": result.objective if result.found else None}
    certificate = getattr(result, "certificate", None)
    if isinstance(certificate, cfopt.RobustnessCertificate):
        entry.update(iterations=certificate.iterations,
                     master_s=certificate.times.get("master", 0.0),
                     adversary_s=certificate.times.get("adversary", 0.0))
    else:  # PerturbationRobustCounterfactual
        entry.update(iterations=result.iterations, adversary_s=result.adversary_time,
                     master_s=result.total_time - result.adversary_time)
    return entry


def summarise(entries: list[dict[str, Any]], total: float, checker: Any,
              load: tuple[list[float], list[float]]) -> dict[str, Any]:
    statuses: dict[str, int] = {}
    for e in entries:
        statuses[e["status"]] = statuses.get(e["status"], 0) + 1
    return {"n": len(entries), "total_s": total,
            "median_s": stats([e["seconds"] for e in entries])["median_s"],
            "certified": sum(e["certified"] for e in entries),
            "certified_status": statuses.get("certified", 0),
            "master_s": float(sum(e["master_s"] for e in entries)),
            "adversary_s": float(sum(e["adversary_s"] for e in entries)),
            "iterations": int(sum(e["iterations"] for e in entries)),
            "lp_checks": None if checker is None else checker.lp_checks,
            "milp_checks": None if checker is None else checker.milp_checks,
            "statuses": statuses, "load_before": load[0], "load_after": load[1],
            "queries": entries}


def run_setting(make: Any, queries: list[tuple[Any, Any]]) -> dict[str, Any]:
    """Build the explainer (``make()``) and answer every query, timed."""
    load_before = [round(v, 2) for v in os.getloadavg()]
    t0 = time.perf_counter()
    explainer = make()
    entries = []
    for x, target in queries:
        q0 = time.perf_counter()
        entries.append(record(explainer.explain(x, target), time.perf_counter() - q0))
    total = time.perf_counter() - t0
    checker = getattr(explainer, "checker", None)
    return summarise(entries, total, checker,
                     (load_before, [round(v, 2) for v in os.getloadavg()]))


def common_means(rows: dict[str, dict[str, Any]]) -> None:
    """``mean_objective`` of each setting over the queries certified in every setting."""
    n = min(r["n"] for r in rows.values())
    both = [k for k in range(n) if all(r["queries"][k]["certified"] for r in rows.values())]
    for r in rows.values():
        values = [r["queries"][k]["objective"] for k in both]
        r["mean_objective"] = float(np.mean(values)) if values else None
        r["compared_queries"] = len(both)


def proplace_part(name: str, n: int, only: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    d = prepare_proplace(name, n, retrain_epochs=1)
    train_rows = d["X"].iloc[d["train"]].reset_index(drop=True)
    queries = [(d["queries"].iloc[[i]], 1) for i in range(len(d["queries"]))]
    rows = {}
    for setting, levers in settings("proplace").items():
        if only and setting not in only.split(","):
            continue
        rows[setting] = run_setting(lambda levers=levers: cfopt.Proplace(
            d["net"], d["space"], train_rows, delta=d["delta"], k=d["k"], time_limit=120.0,
            **levers), queries)
        print(name, setting, {k: v for k, v in rows[setting].items() if k != "queries"},
              flush=True)
    common_means(rows)
    info = {"dataset": name, "delta": d["delta"], "k": d["k"], "n": len(queries),
            "inputs": d["space"].n_inputs, "test_accuracy": d["accuracy"]}
    return rows, info


def virgolin_parts(name: str, parts: list[str], n: int, time_limit: float, only: str = ""
                   ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    data = cfopt.datasets.load_virgolin(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn's convergence warnings
        setup = prepare_virgolin(data, "mlp", n)
    model, space, target = setup["model"], setup["space"], setup["target"]
    Z = space.transform(data.X)
    train = setup["train"]
    positives = Z[train][model.predict(Z[train]) == target]
    delta, _ = choose_delta(model, positives, list(model.classes_).index(target))
    queries = [(data.X.iloc[[i]].reset_index(drop=True), target) for i in setup["queries"]]
    train_rows = data.X.iloc[train].reset_index(drop=True)
    common = {"objective": OBJECTIVE, "max_iterations": MAX_ITERATIONS,
              "time_limit": time_limit}
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        rows = {}
        for setting, levers in settings(part).items():
            if only and setting not in only.split(","):
                continue
            if part.startswith("delta+k"):
                region = ({"data": train_rows, "k": K_NEIGHBOURS} if part.endswith("region")
                          else {})

                def make(levers: dict[str, bool] = levers, region: dict = region) -> Any:
                    return cfopt.CombinedRobustExplainer(
                        model, space, delta=delta, sigma=SIGMA, tolerance=TOLERANCE,
                        **region, **common, **levers)
            else:
                def make(levers: dict[str, bool] = levers) -> Any:
                    return cfopt.PerturbationRobustExplainer(
                        model, space, robustness="K", **common, **levers)
            rows[setting] = run_setting(make, queries)
            print(name, part, setting,
                  {k: v for k, v in rows[setting].items() if k != "queries"}, flush=True)
        common_means(rows)
        out[part] = rows
    info = {"dataset": name, "delta": delta, "queries": setup["queries"],
            "hidden_layer_sizes": setup["params"]["hidden_layer_sizes"],
            "test_accuracy": setup["accuracy"]}
    return out, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--proplace-n", type=int, default=10)
    parser.add_argument("--proplace-datasets", default="adult,compas")
    parser.add_argument("--settings", default="", help="only these settings of every "
                        "part (comma separated, e.g. all_on,light_heuristics_off)")
    parser.add_argument("--virgolin", default="garments,adult,boston")
    parser.add_argument("--garments-n", type=int, default=5)
    parser.add_argument("--virgolin-n", type=int, default=10,
                        help="queries per Virgolin data set other than garments")
    parser.add_argument("--k-datasets", default="adult,boston",
                        help="the Virgolin data sets of the k part")
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="seconds per Virgolin query (every master solve and check)")
    parser.add_argument("--out", default="robust_levers.json")
    args = parser.parse_args()
    parts = args.parts.split(",")
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown part(s) {sorted(unknown)}; known: {list(PARTS)}")
    torch.set_num_threads(1)
    payload: dict[str, Any] = {"environment": environment(), "uptime_start": uptime(),
                               "settings": {"levers": list(LEVERS), "parts": parts,
                                            "proplace_n": args.proplace_n,
                                            "only_settings": args.settings or "all",
                                            "virgolin": args.virgolin.split(","),
                                            "virgolin_n": args.virgolin_n,
                                            "garments_n": args.garments_n,
                                            "k_datasets": args.k_datasets.split(","),
                                            "time_limit_virgolin": args.time_limit,
                                            "time_limit_proplace": 120.0, "solver": "highs"},
                               "setups": [], "results": {}}
    t0 = time.perf_counter()
    if "proplace" in parts:
        for name in args.proplace_datasets.split(","):
            rows, info = proplace_part(name, args.proplace_n, args.settings)
            payload["setups"].append(info)
            payload["results"][f"proplace/{name}"] = rows
            write(args.out, {**payload, "wall_s": time.perf_counter() - t0})
    loops = [p for p in parts if p != "proplace"]
    for name in args.virgolin.split(",") if loops else []:
        n = args.garments_n if name == "garments" else args.virgolin_n
        here = [p for p in loops if p != "k" or name in args.k_datasets.split(",")]
        rows, info = virgolin_parts(name, here, n, args.time_limit, args.settings)
        payload["setups"].append(info)
        for part, by_setting in rows.items():
            payload["results"][f"{part}/{name}"] = by_setting
        write(args.out, {**payload, "wall_s": time.perf_counter() - t0})
    payload.update(uptime_end=uptime(), wall_s=time.perf_counter() - t0)
    write(args.out, payload)
    for key, by_setting in payload["results"].items():
        for setting, r in by_setting.items():
            print(f"{key:22s} {setting:18s} total {r['total_s']:8.1f} s  median "
                  f"{r['median_s']:6.2f} s  certified {r['certified']}/{r['n']}  iterations "
                  f"{r['iterations']}  master {r['master_s']:.1f} s  adversary "
                  f"{r['adversary_s']:.1f} s  lp/milp {r['lp_checks']}/{r['milp_checks']}  "
                  f"mean {r.get('mean_objective')}")


if __name__ == "__main__":
    main()
