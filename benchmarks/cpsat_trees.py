"""Does CP-SAT beat HiGHS on default forests? (issue 17: ``solver="cpsat"`` vs HiGHS)

A default ``RandomForestClassifier()`` (100 trees of unlimited depth) on German credit,
min-max scaled inputs, foreign worker and sex immutable, age increase-only; the first
``--rows`` rejected applicants, each explained (target: class 1, weighted L1) by
``cfopt.Explainer(..., solver="highs")`` and by ``cfopt.Explainer(..., solver="cpsat")``
(OCEAN's exact CP model of each query, :mod:`cfopt.solvers.cpsat`), one thread each,
the same time limit. Both answers are verified by sklearn's own ``predict`` and their
statuses decided by :mod:`cfopt.query.claims` from the verified point's objective and the
solver's bound. Writes ``results/cpsat_trees.json``.

    CFOPT_DATA_HOME=../shared/data python benchmarks/cpsat_trees.py [--rows 10] [--limit 30]
"""

from __future__ import annotations

import argparse
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

SOLVERS = ("highs", "cpsat")


def german_space(data: Any) -> cfopt.FeatureSpace:
    space = cfopt.FeatureSpace.from_frame(data.X)
    return space.immutable("foreign_worker", "status_sex").increase_only("age")


def answer(explainer: cfopt.Explainer, model: Any, space: cfopt.FeatureSpace,
           x: pd.DataFrame) -> dict[str, Any]:
    """One query: status, verification by sklearn, objective, bound, seconds."""
    t = time.perf_counter()
    ce = explainer.explain(x, target=1)
    seconds = time.perf_counter() - t
    verified = ce.counterfactual is not None and \
        int(model.predict(space.transform(ce.counterfactual))[0]) == 1
    return {"status": ce.status.value, "verified": verified, "objective": ce.objective,
            "bound": ce.bound, "s": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10)
    parser.add_argument("--limit", type=float, default=30.0)
    parser.add_argument("--out", default="cpsat_trees.json")
    args = parser.parse_args()
    from sklearn.ensemble import RandomForestClassifier

    data = cfopt.datasets.load_german()
    space = german_space(data)
    model = RandomForestClassifier(random_state=0, n_jobs=1).fit(space.transform(data.X),
                                                                   data.y.to_numpy())
    build = {}
    explainers = {}
    for solver in SOLVERS:
        t0 = time.perf_counter()
        explainers[solver] = cfopt.Explainer(model, space, solver=solver,
                                             time_limit=args.limit, threads=1)
        build[solver] = time.perf_counter() - t0
    rejected = data.X[model.predict(space.transform(data.X)) == 0].iloc[:args.rows]
    rows = []
    for label in rejected.index:
        x = rejected.loc[[label]]
        record: dict[str, Any] = {"row": int(label)}
        for solver, explainer in explainers.items():
            record.update({f"{solver}_{k}": v
                           for k, v in answer(explainer, model, space, x).items()})
        rows.append(record)
        print(f"row {label}: " + "; ".join(
            f"{s} {record[f'{s}_status']} {record[f'{s}_objective']} in "
            f"{record[f'{s}_s']:.1f} s" for s in SOLVERS), flush=True)
    frame = pd.DataFrame(rows)
    both = frame[(frame.highs_status == "optimal") & (frame.cpsat_status == "optimal")]
    summary: dict[str, Any] = {
        "queries": len(frame), "limit_s": args.limit,
        "leaves": int(sum(e.tree_.n_leaves for e in model.estimators_)),
        "same_objective_where_both_optimal": int(np.isclose(
            both.highs_objective, both.cpsat_objective, rtol=1e-6, atol=1e-7).sum()),
        "both_optimal": len(both)}
    for s in SOLVERS:
        summary.update({f"{s}_build_s": build[s], f"{s}_median_s": float(frame[f"{s}_s"].median()),
                        f"{s}_p90_s": float(frame[f"{s}_s"].quantile(0.9)),
                        f"{s}_max_s": float(frame[f"{s}_s"].max()),
                        f"{s}_optimal": int((frame[f"{s}_status"] == "optimal").sum()),
                        f"{s}_verified": int(frame[f"{s}_verified"].sum())})
    print(summary)
    write(args.out, {"environment": environment(), "model": "RandomForestClassifier() "
                     "(random_state=0) on German credit, min-max scaled inputs",
                     "summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
