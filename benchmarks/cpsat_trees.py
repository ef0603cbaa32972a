"""Would a CP-SAT backend beat HiGHS on default forests? (issue 17, measurement only)

A default ``RandomForestClassifier()`` (100 trees of unlimited depth) on German credit
(every numeric feature an integer), rejected applicants, each explained by cfopt on
HiGHS and by an exact CP-SAT model (OR-Tools) of the same query:

* integer variables for the integer features (immutables fixed, age increase-only), one
  boolean per category with exactly one true per categorical feature;
* one boolean per distinct split, channelled to its feature (``x_j <= c`` with ``c`` the
  largest integer code that goes left: the split side of every integer value computed as
  sklearn computes it, in float32 on the min-max scaled input), shared by all trees —
  the integer "levels" of OCEAN's CP model (Parmentier & Vidal 2021);
* per tree, exactly one leaf, and each leaf implies the sides of the splits on its path;
* the forest's vote: the sum over trees of the chosen leaf's (p_target − p_other) ≥ 1
  after scaling by 1e9 (strict majority; a tie excluded as in cfopt);
* objective: cfopt's weighted L1 (1 / range per integer feature, 1 per changed
  categorical) scaled by the least common multiple of the ranges, so exact in integers.

Both get one thread and the same time limit. Every CP-SAT point is checked by sklearn's
``predict``; its objective is recomputed by cfopt. Writes ``results/cpsat_trees.json``.

    CFOPT_DATA_HOME=../shared/data python benchmarks/cpsat_trees.py [--rows 10] [--limit 60]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

from common import environment, write  # noqa: E402

import cfopt  # noqa: E402
from cfopt.query.restrictions.relu import objective_value  # noqa: E402


def german_space(data: Any) -> cfopt.FeatureSpace:
    space = cfopt.FeatureSpace.from_frame(data.X)
    return space.immutable("foreign_worker", "status_sex").increase_only("age")


def cpsat_query(model: Any, space: cfopt.FeatureSpace, x: pd.DataFrame, limit: float
                ) -> dict[str, Any]:
    """The closest counterfactual of ``x`` (target: class 1) by CP-SAT."""
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    cp = cp_model.CpModel()
    names = space.input_names
    column = {n: j for j, n in enumerate(names)}
    row = x.iloc[0]
    ints = [f for f in space if not f.is_onehot]
    if any(not f.is_integral for f in ints):
        raise ValueError("this measurement covers integer numeric features only")
    scale = math.lcm(*[int(f.upper - f.lower) for f in ints if f.upper > f.lower])
    var: dict[int, Any] = {}       # input column -> CP variable (int value or bool)
    cost = []
    for f in ints:
        x0 = int(row[f.name])
        lo, hi = (int(c) for c in f.actionable_range(x0))
        v = cp.NewIntVar(lo, hi, f.name)
        d = cp.NewIntVar(0, hi - lo if hi > lo else 0, f"d_{f.name}")
        cp.AddAbsEquality(d, v - x0)
        if f.upper > f.lower:
            cost.append(scale // int(f.upper - f.lower) * d)
        var[column[f.name]] = (f, v)
    for f in space:
        if not f.is_onehot:
            continue
        bools = []
        for level in f.categories:
            j = column[f"{f.name}={level}"]
            b = cp.NewBoolVar(f"{f.name}={level}")
            var[j] = (f, b)
            bools.append((level, b))
        cp.AddExactlyOne(b for _, b in bools)
        for level, b in bools:
            if level == row[f.name]:
                if f.immutable:
                    cp.Add(b == 1)
                cost.append(scale * (1 - b))  # one change when the category changes
    sides: dict[tuple[int, float], Any] = {}

    def goes_left(j: int, theta: float) -> Any:
        """A literal true when input ``j`` goes left at ``theta`` (float32, sklearn)."""
        key = (j, theta)
        if key in sides:
            return sides[key]
        f, v = var[j]
        if f.is_onehot:  # a 0/1 input: left at 0 only when 0 <= theta < 1
            literal = (cp.NewConstant(1) if 1.0 <= theta else
                       v.Not() if 0.0 <= theta else cp.NewConstant(0))
        else:  # sklearn compares the float32 input, widened, with the float64 threshold
            codes = np.arange(int(f.lower), int(f.upper) + 1)
            scaled = ((codes - f.lower) / (f.upper - f.lower)).astype(np.float32)
            left = codes[scaled.astype(np.float64) <= theta]
            b = cp.NewBoolVar(f"le_{j}_{theta}")
            if len(left) == 0:
                cp.Add(b == 0)
            else:
                cut = int(left.max())
                cp.Add(v <= cut).OnlyEnforceIf(b)
                cp.Add(v >= cut + 1).OnlyEnforceIf(b.Not())
            literal = b
        sides[key] = literal
        return literal

    vote = []
    for est in model.estimators_:
        tree = est.tree_
        value = tree.value[:, 0, :]
        proba = value / value.sum(axis=1, keepdims=True)
        leaves = []

        def walk(node: int, path: list[Any]) -> None:
            if tree.children_left[node] == -1:
                leaf = cp.NewBoolVar("")
                for literal in path:
                    cp.AddImplication(leaf, literal)
                leaves.append(leaf)
                score = int(round((proba[node, 1] - proba[node, 0]) * 1e9))
                vote.append(score * leaf)
                return
            left = goes_left(int(tree.feature[node]), float(tree.threshold[node]))
            walk(tree.children_left[node], path + [left])
            walk(tree.children_right[node], path + [left.Not()])

        walk(0, [])
        cp.AddExactlyOne(leaves)
    cp.Add(sum(vote) >= 1)
    cp.Minimize(sum(cost))
    build = time.perf_counter() - t0
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = limit
    solver.parameters.num_workers = 1
    t1 = time.perf_counter()
    status = solver.Solve(cp)
    solve = time.perf_counter() - t1
    out: dict[str, Any] = {"status": solver.StatusName(status), "build_s": build,
                           "solve_s": solve, "leaves": sum(e.tree_.n_leaves
                                                            for e in model.estimators_),
                           "splits": len(sides)}
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        point = {}
        for f in space:
            if f.is_onehot:
                point[f.name] = next(level for level in f.categories
                                     if solver.Value(var[column[f"{f.name}={level}"]][1]))
            else:
                point[f.name] = int(solver.Value(var[column[f.name]][1]))
        ce = pd.DataFrame([point], columns=space.names).astype(x.dtypes.to_dict())
        out["predicted"] = int(model.predict(space.transform(ce))[0])
        out["objective_scaled"] = solver.ObjectiveValue() / scale
        out["bound"] = solver.BestObjectiveBound() / scale
        out["row"] = ce
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10)
    parser.add_argument("--limit", type=float, default=60.0)
    parser.add_argument("--out", default="cpsat_trees.json")
    args = parser.parse_args()
    from sklearn.ensemble import RandomForestClassifier

    data = cfopt.datasets.load_german()
    space = german_space(data)
    model = RandomForestClassifier(random_state=0, n_jobs=1).fit(space.transform(data.X),
                                                                   data.y.to_numpy())
    t0 = time.perf_counter()
    explainer = cfopt.Explainer(model, space, time_limit=args.limit, threads=1)
    build = time.perf_counter() - t0
    rejected = data.X[model.predict(space.transform(data.X)) == 0].iloc[:args.rows]
    rows = []
    for label in rejected.index:
        x = rejected.loc[[label]]
        t = time.perf_counter()
        ce = explainer.explain(x, target=1)
        highs_s = time.perf_counter() - t
        cp = cpsat_query(model, space, x, args.limit)
        cp_objective = None
        if "row" in cp:
            cp_objective = objective_value(explainer.milp, cp.pop("row"))
        record = {"row": int(label), "highs_status": ce.status.value, "highs_verified": ce.verified,
                  "highs_objective": ce.objective, "highs_bound": ce.bound, "highs_s": highs_s,
                  "cpsat_status": cp["status"], "cpsat_verified": cp.get("predicted") == 1,
                  "cpsat_objective": cp_objective, "cpsat_bound": cp.get("bound"),
                  "cpsat_build_s": cp["build_s"], "cpsat_solve_s": cp["solve_s"],
                  "cpsat_s": cp["build_s"] + cp["solve_s"], "splits": cp["splits"],
                  "leaves": cp["leaves"]}
        rows.append(record)
        print(f"row {label}: HiGHS {ce.status.value} {ce.objective} in {highs_s:.1f} s; "
              f"CP-SAT {cp['status']} {cp_objective} in {record['cpsat_s']:.1f} s", flush=True)
    frame = pd.DataFrame(rows)
    both = frame[frame.highs_verified & frame.cpsat_verified]
    summary = {
        "queries": len(frame), "limit_s": args.limit, "explainer_build_s": build,
        "leaves": int(frame.leaves.iloc[0]) if len(frame) else None,
        "highs_median_s": float(frame.highs_s.median()),
        "cpsat_median_s": float(frame.cpsat_s.median()),
        "highs_optimal": int((frame.highs_status == "optimal").sum()),
        "cpsat_optimal": int((frame.cpsat_status == "OPTIMAL").sum()),
        "highs_verified": int(frame.highs_verified.sum()),
        "cpsat_verified": int(frame.cpsat_verified.sum()),
        "same_objective": int(np.isclose(both.highs_objective, both.cpsat_objective,
                                         rtol=1e-6, atol=1e-9).sum()),
    }
    print(summary)
    write(args.out, {"environment": environment(), "model": "RandomForestClassifier() "
                     "(random_state=0) on German credit, min-max scaled inputs",
                     "summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
