"""Do time limits hold on tree ensembles of default size? (issue 19, item 4)

A default ``RandomForestClassifier()`` (100 trees of unlimited depth) on German credit,
explained for rejected applicants under limits of 0.5, 2 and 10 s (HiGHS): per query,
the wall time, its overrun beyond the limit, the status and whether a verified point
came back (the greedy heuristic's when the solver has none in time). The explainer's
build (and the first query, which loads the model into the solver) is reported apart:
the limit bounds a query, the build is paid once.

    python benchmarks/time_limits.py [--rows 8] [--out time_limits.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, write  # noqa: E402

import cfopt  # noqa: E402

LIMITS = (0.5, 2.0, 10.0)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--out", default="time_limits.json")
    args = parser.parse_args(argv)
    data = cfopt.datasets.load_german()
    space = cfopt.FeatureSpace.from_frame(data.X)
    Z = space.transform(data.X)
    model = RandomForestClassifier(random_state=0).fit(Z, data.y)
    leaves = int(sum(est.tree_.n_leaves for est in model.estimators_))
    t0 = time.perf_counter()
    explainer = cfopt.Explainer(model, space)
    build = time.perf_counter() - t0
    rejected = np.flatnonzero(model.predict(Z) == 0)[:args.rows + 1]
    first = explainer.explain(data.X.iloc[[rejected[0]]], target=1, time_limit=LIMITS[-1])
    rows = []
    for limit in LIMITS:
        for i in rejected[1:]:
            ce = explainer.explain(data.X.iloc[[i]], target=1, time_limit=limit)
            rows.append({"limit_s": limit, "row": int(i), "total_s": round(ce.total_time, 3),
                         "overrun_s": round(ce.total_time - limit, 3),
                         "status": ce.status.value, "verified": ce.verified,
                         "objective": ce.objective, "bound": ce.bound,
                         "heuristic_objective": ce.details.get("heuristic_objective")})
    summary = {str(limit): {
        "queries": sum(r["limit_s"] == limit for r in rows),
        "max_overrun_s": max(r["overrun_s"] for r in rows if r["limit_s"] == limit),
        "verified": sum(r["verified"] for r in rows if r["limit_s"] == limit),
        "statuses": sorted({r["status"] for r in rows if r["limit_s"] == limit})}
        for limit in LIMITS}
    payload = {"environment": environment(),
               "model": {"kind": "RandomForestClassifier()", "trees": 100, "leaves": leaves},
               "build_s": round(build, 3),
               "first_query": {"total_s": round(first.total_time, 3),
                               "status": first.status.value},
               "summary": summary, "rows": rows}
    path = write(args.out, payload)
    for limit, s in summary.items():
        print(f"limit {limit} s: max overrun {s['max_overrun_s']:+.2f} s, "
              f"{s['verified']}/{s['queries']} verified, {s['statuses']}")
    print(f"build {build:.1f} s -> {path}")
    return payload


if __name__ == "__main__":
    main()
