"""Leaf vs threshold (Mišić) tree formulations, with and without per-query pruning.

German credit, rejected applicants, HiGHS: median / max seconds per query and whether
all four variants reach the same optimum (they must, up to one split gap).
``python benchmarks/bench_tree_formulations.py [--models rf100d6,gb100d4,rf50dNone]
[--n 8] [--time-limit 60]`` → ``benchmarks/results/tree_formulations.json``.
"""

from __future__ import annotations

import argparse
import time

from common import environment, progress, stats, write
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

import cfopt

MODELS = {
    "rf100d6": lambda: RandomForestClassifier(100, max_depth=6, random_state=0),
    "gb100d4": lambda: GradientBoostingClassifier(n_estimators=100, max_depth=4,
                                                  random_state=0),
    "rf50dNone": lambda: RandomForestClassifier(50, random_state=0),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="rf100d6,gb100d4")
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args(argv)
    data = cfopt.datasets.load_german()
    space = cfopt.FeatureSpace.from_frame(data.X).immutable("foreign_worker")
    Z = space.transform(data.X)
    rows = []
    for name in args.models.split(","):
        model = MODELS[name]().fit(Z, data.y)
        X = data.X[model.predict(Z) == 0].iloc[:args.n]
        block = cfopt.Explainer(model, space, tree_formulation="threshold").milp.predictor_constr
        sizes = {"leaves": len(block.block.LEAVES), "thresholds": len(block.block.THRESHOLDS)}
        first = len(rows)
        for formulation in ("leaf", "threshold"):
            for pruning in (True, False):
                explainer = cfopt.Explainer(model, space, tree_formulation=formulation,
                                            tighten_per_query=pruning,
                                            time_limit=args.time_limit)
                times, objectives, proven = [], [], []
                for i in progress(range(len(X)), f"{name} {formulation}"):
                    t0 = time.perf_counter()
                    ce = explainer.explain(X.iloc[[i]], target=1)
                    times.append(time.perf_counter() - t0)
                    objectives.append(ce.objective if ce.found else None)
                    proven.append(ce.status is cfopt.Status.OPTIMAL)
                row = {"model": name, "formulation": formulation, "pruning": pruning,
                       "n": len(X), "optimal": sum(proven), **sizes, **stats(times),
                       "max_s": max(times), "objectives": objectives, "proven": proven}
                rows.append(row)
                print({k: v for k, v in row.items() if k not in ("objectives", "proven")},
                      flush=True)
        reference = rows[first]  # leaf formulation with pruning
        for r in rows[first:]:
            both = [i for i in range(len(X)) if r["proven"][i] and reference["proven"][i]]
            r["max_excess_over_leaf"] = max((r["objectives"][i] - reference["objectives"][i]
                                             for i in both), default=None)
    write("tree_formulations.json", {"benchmark": __doc__.split("\n\n")[0],
                                     "environment": environment(), "rows": rows})


if __name__ == "__main__":
    main()
