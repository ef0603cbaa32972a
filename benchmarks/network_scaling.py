"""Exact ReLU counterfactuals at scale (issue 39): cfopt on HiGHS against pyscipopt-ml on
SCIP and gurobi-machinelearning on Gurobi, the same network, side by side.

The problem, for every tool: UCI Adult's six numeric features (age, fnlwgt,
education-num, capital-gain, capital-loss, hours-per-week), min-max scaled (the bounds
of the training and test rows) and continuous, every feature mutable; minimise the
weighted L1 distance (1 / range per raw feature, i.e. L1 in scaled units) subject to the
network's logit ≥ 1e-3; relative gap 1e-4, one thread, a ``--time-limit`` per query. The
network is one sklearn ``MLPClassifier`` (ReLU, ``random_state=0``) per architecture,
trained on the scaled training rows; the queries are the first ``--rows`` test rows it
rejects. cfopt gets the classifier itself. gurobi-ml does not accept an
``MLPClassifier``, so both peers get an ``MLPRegressor`` shim holding the classifier's
own ``coefs_`` and ``intercepts_`` arrays with an identity output: its output is the
classifier's logit. Every point is re-checked by a float64 forward pass of those arrays
(``verified``: logit ≥ 1e-3 less 1e-6 relative).

The tools run interleaved, query by query (cfopt, SCIP, Gurobi on row 1, then row 2,
...), in one process; cfopt builds its MILP once per network (``build_s``), the peers
build theirs per query (inside their ``seconds``; ``solve_s`` is the solve alone).
A tool's refusal (Gurobi's size-limited licence) is recorded as such.

``german-64x64`` is the same query on German credit with all 20 features: the
11 categoricals one-hot (a change costs 1, cfopt's ``weights="range"``), the 2 binaries
and the 7 integers (min-max scaled) on their integer grids, a stratified 70/30 split
(``random_state=0``); the peers get the same declared space written out
(``PeerInputs``: bounds, an integer variable per grid, one column of each one-hot
group at 1, the same cost per input).

Rows of ``results/network_scaling.json``: per (network, tool) ``n``, ``optimal_fraction``,
``verified_fraction``, ``median_s``, ``mean_objective``, ``max_gap`` (relative, of the
proven bound), ``ratio`` (cfopt's median over the tool's) and every query's record.

    python benchmarks/network_scaling.py [--networks 16x16,32x32,64x64,german-64x64] [--rows 20]
        [--time-limit 60] [--tools cfopt,scip,gurobi] [--out network_scaling.json]
    python benchmarks/network_scaling.py --table network_scaling.json   # the README's table
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, environment, write  # noqa: E402

import cfopt  # noqa: E402
from cfopt.formulations.distances import feature_weights  # noqa: E402

FEATURES = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
MARGIN = 1e-3
GAP = 1e-4
NETWORKS = ("16x16", "32x32", "64x64", "128x128", "256x256", "64x64x64", "german-64x64")


@dataclass(frozen=True)
class Problem:
    """A data set as every tool sees it: the declared space, the rows the network is
    trained on (raw) and the rows the queries come from (raw)."""

    space: cfopt.FeatureSpace
    X: pd.DataFrame
    y: np.ndarray
    X_test: pd.DataFrame


def adult_numeric() -> Problem:
    train, test = cfopt.datasets.load_adult("train"), cfopt.datasets.load_adult("test")
    X, X_test = train.X[FEATURES].astype(float), test.X[FEATURES].astype(float)
    space = cfopt.FeatureSpace.from_frame(pd.concat([X, X_test]),  # bounds: every row
                                          kinds=dict.fromkeys(FEATURES, "continuous"))
    return Problem(space, X, train.y.to_numpy(), X_test)


def german() -> Problem:
    """German credit, all 20 features: 11 categoricals one-hot, 2 binaries and 7
    integers (min-max scaled) on their integer grids; a stratified 70/30 split."""
    from sklearn.model_selection import train_test_split

    data = cfopt.datasets.load_german()
    X, X_test, y, _ = train_test_split(data.X, data.y.to_numpy(), test_size=0.3,
                                       random_state=0, stratify=data.y.to_numpy())
    return Problem(cfopt.FeatureSpace.from_frame(data.X), X, y, X_test)


PROBLEMS = {"adult": adult_numeric, "german": german}


def parse(network: str) -> tuple[str, tuple[int, ...]]:
    """``"64x64"`` → Adult's numeric features; ``"german-64x64"`` → German credit."""
    data, _, widths = network.rpartition("-")
    return data or "adult", tuple(int(h) for h in widths.split("x"))


@dataclass(frozen=True)
class PeerInputs:
    """The declared space written out for the peers, one entry per model input:
    bounds, an integer grid ``offset + k * step`` where the space has one, one-hot
    groups (exactly one column at 1), and the weighted-L1 cost per unit of the input
    (cfopt's ``weights="range"``: ``w_f * scale_f``; a category change costs ``w_f``,
    half of it on each of the two columns that move)."""

    bounds: list[tuple[float, float]]
    grids: list[tuple[float, float] | None]
    groups: list[list[int]]
    cost: list[float]

    @classmethod
    def of(cls, space: cfopt.FeatureSpace) -> PeerInputs:
        weights = feature_weights(space)
        cost, groups = [], []
        for f, cols in zip(space, space.input_slices().values()):
            columns = list(range(cols.start, cols.stop))
            if f.is_onehot:
                groups.append(columns)
                cost += [weights[f.name] / 2] * len(columns)
            else:
                cost.append(weights[f.name] * f.scale)
        return cls(space.input_bounds(), space.input_grids(), groups, cost)


def fit(hidden: tuple[int, ...], Z: np.ndarray, y: np.ndarray) -> Any:
    from sklearn.neural_network import MLPClassifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MLPClassifier(hidden_layer_sizes=hidden, random_state=0, max_iter=200).fit(Z, y)


def logit_shim(mlp: Any) -> Any:
    """An ``MLPRegressor`` holding the classifier's own weight arrays, identity output."""
    from sklearn.neural_network import MLPRegressor

    reg = MLPRegressor(hidden_layer_sizes=mlp.hidden_layer_sizes, activation=mlp.activation)
    for name in ("coefs_", "intercepts_", "n_layers_", "n_features_in_"):
        setattr(reg, name, getattr(mlp, name))
    reg.n_outputs_, reg.out_activation_ = 1, "identity"
    return reg


def logit(mlp: Any, z: np.ndarray) -> float:
    h = np.asarray(z, dtype=float)
    for i, (W, b) in enumerate(zip(mlp.coefs_, mlp.intercepts_)):
        h = h @ W + b
        if i < len(mlp.coefs_) - 1:
            h = np.maximum(h, 0.0)
    return float(h[0])


def run_cfopt(explainer: cfopt.Explainer, x: pd.DataFrame) -> dict[str, Any]:
    t0 = time.perf_counter()
    ce = explainer.explain(x, target=1)
    seconds = time.perf_counter() - t0
    z = None if ce.counterfactual is None else explainer.space.transform(ce.counterfactual)[0]
    return {"status": ce.status.value, "seconds": seconds, "solve_s": ce.solve_time,
            "objective": ce.objective, "bound": ce.bound, "z": z}


def run_gurobi(reg: Any, inputs: PeerInputs, z0: np.ndarray,
               time_limit: float) -> dict[str, Any]:
    import gurobipy as gp
    from gurobi_ml.sklearn import add_mlp_regressor_constr

    t0 = time.perf_counter()
    try:
        with gp.Env(params={"OutputFlag": 0}) as env, gp.Model(env=env) as m:
            m.Params.Threads, m.Params.MIPGap, m.Params.TimeLimit = 1, GAP, time_limit
            n = len(z0)
            lb, ub = zip(*inputs.bounds)
            x = m.addMVar((1, n), lb=np.array([lb]), ub=np.array([ub]))
            d = m.addMVar(n, lb=0.0)
            y = m.addMVar((1, 1), lb=-gp.GRB.INFINITY)
            add_mlp_regressor_constr(m, reg, x, y)
            for j, grid in enumerate(inputs.grids):
                if grid is not None:
                    k = m.addVar(lb=-gp.GRB.INFINITY, vtype=gp.GRB.INTEGER)
                    m.addConstr(x[0, j] == grid[0] + grid[1] * k)
            for group in inputs.groups:
                m.addConstr(gp.quicksum(x[0, j] for j in group) == 1)
            m.addConstr(d >= x[0, :] - z0)
            m.addConstr(d >= z0 - x[0, :])
            m.addConstr(y[0, 0] >= MARGIN)
            m.setObjective(np.array(inputs.cost) @ d, gp.GRB.MINIMIZE)
            s0 = time.perf_counter()
            m.optimize()
            solve = time.perf_counter() - s0
            status = {gp.GRB.OPTIMAL: "optimal", gp.GRB.INFEASIBLE: "infeasible",
                      gp.GRB.TIME_LIMIT: "time_limit"}.get(m.Status, f"gurobi_{m.Status}")
            found = m.SolCount > 0
            return {"status": status, "seconds": time.perf_counter() - t0, "solve_s": solve,
                    "objective": m.ObjVal if found else None,
                    "bound": m.ObjBound if status in ("optimal", "time_limit") else None,
                    "z": x.X[0].copy() if found else None}
    except gp.GurobiError as exc:
        return {"status": "refused" if "size-limited" in str(exc).lower() or
                exc.errno == 10010 else "error", "seconds": time.perf_counter() - t0,
                "message": str(exc)[:200], "objective": None, "bound": None, "z": None}


def run_scip(reg: Any, inputs: PeerInputs, z0: np.ndarray,
             time_limit: float) -> dict[str, Any]:
    from pyscipopt import Model, quicksum
    from pyscipopt_ml.sklearn.mlp import add_mlp_regressor_constr

    t0 = time.perf_counter()
    m = Model()
    m.hideOutput()
    m.setParam("limits/time", time_limit)
    m.setParam("limits/gap", GAP)
    m.setParam("parallel/maxnthreads", 1)
    n = len(z0)
    x = m.addMatrixVar((1, n), vtype="C", lb=0.0, ub=1.0)
    y = m.addMatrixVar((1, 1), vtype="C", lb=None, ub=None)
    d = [m.addVar(lb=0.0) for _ in range(n)]
    add_mlp_regressor_constr(m, reg, x, y)
    for j, ((low, high), grid) in enumerate(zip(inputs.bounds, inputs.grids)):
        m.chgVarLb(x[0, j], low)
        m.chgVarUb(x[0, j], high)
        if grid is not None:
            k = m.addVar(lb=None, vtype="I")
            m.addCons(x[0, j] == grid[0] + grid[1] * k)
    for group in inputs.groups:
        m.addCons(quicksum(x[0, j] for j in group) == 1)
    for j in range(n):
        m.addCons(d[j] >= x[0, j] - float(z0[j]))
        m.addCons(d[j] >= float(z0[j]) - x[0, j])
    m.addCons(y[0, 0] >= MARGIN)
    m.setObjective(quicksum(c * dj for c, dj in zip(inputs.cost, d)), "minimize")
    s0 = time.perf_counter()
    m.optimize()
    solve = time.perf_counter() - s0
    status = {"optimal": "optimal", "infeasible": "infeasible",
              "timelimit": "time_limit"}.get(m.getStatus(), m.getStatus())
    found = m.getNSols() > 0
    z = np.array([m.getVal(x[0, j]) for j in range(n)]) if found else None
    return {"status": status, "seconds": time.perf_counter() - t0, "solve_s": solve,
            "objective": m.getObjVal() if found else None, "bound": m.getDualbound(), "z": z}


def summarize(network: str, tool: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    gaps = [abs(r["objective"] - r["bound"]) / max(abs(r["objective"]), 1e-9)
            for r in runs if r.get("objective") is not None and r.get("bound") is not None]
    objectives = [r["objective"] for r in runs if r.get("objective") is not None]
    return {"network": network, "tool": tool,
            "solver": {"cfopt": "highs", "scip": "scip", "gurobi": "gurobi"}[tool],
            "n": len(runs),
            "optimal_fraction": float(np.mean([r["status"] == "optimal" for r in runs])),
            "verified_fraction": float(np.mean([bool(r.get("verified")) for r in runs])),
            "refused": sum(r["status"] == "refused" for r in runs),
            "median_s": statistics.median(r["seconds"] for r in runs),
            "mean_objective": float(np.mean(objectives)) if objectives else None,
            "max_gap": max(gaps) if gaps else None}


def table(payload: dict[str, Any]) -> str:
    """The Markdown table of a result file: per network, each tool's median seconds,
    proven-optimal count and (for a peer) cfopt's median over its median."""
    tools = payload["config"]["tools"]
    names = {"cfopt": "cfopt (HiGHS)", "scip": "SCIP (pyscipopt-ml)",
             "gurobi": "Gurobi (gurobi-ml)"}
    lines = ["| network | " + " | ".join(names[t] for t in tools) + " |",
             "|---|" + "---|" * len(tools)]
    by = {(r["network"], r["tool"]): r for r in payload["rows"]}
    for network in dict.fromkeys(r["network"] for r in payload["rows"]):
        cells = []
        for t in tools:
            r = by.get((network, t))
            if r is None:
                cells.append("–")
                continue
            if r["refused"] == r["n"]:
                cells.append("refused (size-limited licence)")
                continue
            cell = (f"{r['median_s']:.3g} s, {round(r['optimal_fraction'] * r['n'])}/{r['n']} "
                    f"optimal")
            if t != "cfopt" and r["ratio"] is not None:
                cell += f", ratio {r['ratio']:.2g}"
            cells.append(cell)
        label = network.replace("german-", "German ").replace("x", ", ")
        lines.append(f"| ({label}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", default=",".join(NETWORKS))
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--tools", default="cfopt,scip,gurobi")
    parser.add_argument("--out", default="network_scaling.json")
    parser.add_argument("--table", metavar="JSON", help="print the Markdown table of a "
                        "result file (in benchmarks/results) and exit")
    args = parser.parse_args(argv)
    if args.table:
        payload = json.loads((RESULTS / args.table).read_text(encoding="utf-8"))
        print(table(payload))
        return payload
    tools = args.tools.split(",")
    rows, records, queries = [], [], {}
    problems: dict[str, Problem] = {}
    for network in args.networks.split(","):
        data, hidden = parse(network)
        problem = problems.setdefault(data, PROBLEMS[data]())
        space = problem.space
        inputs = PeerInputs.of(space)
        mlp = fit(hidden, space.transform(problem.X), problem.y)
        reg = logit_shim(copy.copy(mlp))
        rejected = problem.X_test[mlp.predict(space.transform(problem.X_test)) == 0]
        rejected = rejected.iloc[:args.rows]
        t0 = time.perf_counter()
        explainer = cfopt.Explainer(mlp, space, margin=MARGIN, mip_gap=GAP,
                                    time_limit=args.time_limit, threads=1)
        build = time.perf_counter() - t0
        runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
        for i in range(len(rejected)):
            x = rejected.iloc[[i]]
            z0 = space.transform(x)[0]
            for tool in tools:
                r = run_cfopt(explainer, x) if tool == "cfopt" else \
                    run_scip(reg, inputs, z0, args.time_limit) if tool == "scip" else \
                    run_gurobi(reg, inputs, z0, args.time_limit)
                z = r.pop("z")
                r["verified"] = z is not None and logit(mlp, z) >= MARGIN * (1 - 1e-6) - 1e-9
                r.update(network=network, tool=tool, row=int(rejected.index[i]))
                runs[tool].append(r)
                records.append(r)
                print(f"{network} row {i} {tool}: {r['status']} {r['seconds']:.2f} s "
                      f"objective {r['objective']}", flush=True)
        summary = [summarize(network, t, runs[t]) for t in tools]
        base = next((s["median_s"] for s in summary if s["tool"] == "cfopt"), None)
        for s in summary:
            s["ratio"] = None if base is None or not s["median_s"] else base / s["median_s"]
            s["cfopt_build_s"] = build
        rows += summary
        queries[network] = len(rejected)
        payload = {"environment": environment(),
                   "config": {"networks": args.networks, "rows": args.rows,
                              "time_limit": args.time_limit, "tools": tools,
                              "features": FEATURES, "margin": MARGIN, "mip_gap": GAP},
                   "rows": rows, "queries": records}
        write(args.out, payload)
    return payload


if __name__ == "__main__":
    main()
