"""Tree-ensemble benchmark: one counterfactual per rejected applicant.

German credit (bundled; 70/30 split) and CARLA Adult (adult_train / adult_test), min-max
feature space; random forests (10/50/100/200 trees, depth 4/6/8/unlimited), gradient
boosting (50/100/200 trees, depth 3/4), XGBoost and LightGBM (100 trees); the first
N test points each model rejects; target class 1; weighted L1 (min-max units).
cfopt on HiGHS (and Gurobi where its licence allows) beside DiCE's random and genetic
methods on the same models and points. Every CE is re-checked with the library's own
``predict``. Writes ``benchmarks/results/trees.json`` (``--out`` to change).

    python benchmarks/bench_trees.py [--n 10] [--datasets german,adult] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    dice_counterfactuals,
    environment,
    inside_space,
    progress,
    stats,
    write,
)

import cfopt  # noqa: E402

#: refuse to build models with more leaves than this (MILP size; Pyomo build time/memory)
MAX_LEAVES = 200_000


def load(name: str) -> tuple[pd.DataFrame, pd.Series, pd.DataFrame, pd.Series]:
    if name == "german":
        data = cfopt.datasets.load_german()
        X = data.X.copy()
        for c in ("telephone", "foreign_worker"):
            X[c] = X[c].astype(str)
        cut = int(0.7 * len(X))
        return X.iloc[:cut], data.y.iloc[:cut], X.iloc[cut:], data.y.iloc[cut:]
    train, test = cfopt.datasets.load_adult("train"), cfopt.datasets.load_adult("test")
    return train.X, train.y, test.X, test.y


def models(quick: bool) -> list[tuple[str, int, int | None, Any]]:
    out: list[tuple[str, int, int | None, Any]] = []
    rf_sizes = (10, 50, 100) if quick else (10, 50, 100, 200)
    rf_depths = (4, 6) if quick else (4, 6, 8, None)
    for n in rf_sizes:
        for d in rf_depths:
            out.append(("random_forest", n, d, lambda n=n, d=d: RandomForestClassifier(
                n, max_depth=d, random_state=0, n_jobs=1)))
    for n in ((50,) if quick else (50, 100, 200)):
        for d in ((3,) if quick else (3, 4)):
            out.append(("gradient_boosting", n, d, lambda n=n, d=d: GradientBoostingClassifier(
                n_estimators=n, max_depth=d, random_state=0)))
    try:
        import xgboost

        out.append(("xgboost", 100, 4, lambda: xgboost.XGBClassifier(
            n_estimators=100, max_depth=4, random_state=0, n_jobs=1)))
    except ImportError:
        pass
    try:
        import lightgbm

        out.append(("lightgbm", 100, None, lambda: lightgbm.LGBMClassifier(
            n_estimators=100, num_leaves=16, random_state=0, n_jobs=1, verbose=-1)))
    except ImportError:
        pass
    return out


def size(model: Any) -> dict[str, int]:
    """Leaves (binaries of the leaf-indicator formulation) and distinct (input,
    threshold) pairs (binaries of Mišić's per-threshold formulation)."""
    structure = cfopt.models.parse_model(model).structure
    thresholds = {(int(t.feature[n]), float(t.threshold[n])) for t in structure.trees
                  for n in np.flatnonzero(t.feature >= 0)}
    return {"leaves": int(sum(len(t.leaves) for t in structure.trees)),
            "distinct_thresholds": len(thresholds)}


def l1(space: cfopt.FeatureSpace, x: pd.DataFrame, ce: pd.DataFrame) -> float:
    """L1 in min-max units; a category change counts 1 (not 2 one-hot columns)."""
    diff = np.abs(space.transform(x, check_bounds=False) - space.transform(ce, check_bounds=False))
    moved_categories = sum(1.0 for f in space
                           if f.is_onehot and x[f.name].iloc[0] != ce[f.name].iloc[0])
    return float(diff.sum() - moved_categories)


def changed(x: pd.DataFrame, ce: pd.DataFrame) -> int:
    return int(sum(x[c].iloc[0] != ce[c].iloc[0] for c in x.columns))


def run_cfopt(model, space, X, solver, time_limit, pruning=True) -> dict[str, Any]:
    times, l1s, nch = [], [], []
    valid = optimal = 0
    t0 = time.perf_counter()
    explainer = cfopt.Explainer(model, space, solver=solver, time_limit=time_limit,
                                tighten_per_query=pruning)
    build = time.perf_counter() - t0
    for i in progress(range(len(X)), f"cfopt {solver}"):
        x = X.iloc[[i]]
        t0 = time.perf_counter()
        ce = explainer.explain(x, target=1)
        times.append(time.perf_counter() - t0)
        ok = ce.found and model.predict(space.transform(ce.counterfactual))[0] == 1
        valid += ok
        optimal += ce.status is cfopt.Status.OPTIMAL
        if ok:
            l1s.append(l1(space, x, ce.counterfactual))
            nch.append(changed(x, ce.counterfactual))
    return {"method": "cfopt", "solver": solver, "pruning": pruning, "n": len(X),
            "validity": float(valid / len(X)), "optimal": optimal / len(X), **stats(times),
            "mean_l1": float(np.mean(l1s)) if l1s else None,
            "mean_changed": float(np.mean(nch)) if nch else None, "build_s": build,
            "times_s": [round(t, 4) for t in times]}


def run_dice(method: str, model, space, train_X, train_y, X) -> dict[str, Any]:
    times, l1s, nch = [], [], []
    valid = 0
    errors: list[str] = []
    for i, (row, seconds, error) in enumerate(
            dice_counterfactuals(method, model, space, train_X, train_y, X)):
        times.append(seconds)
        if error is not None:
            errors.append(error)
        if row is None:
            continue
        x = X.iloc[[i]]
        if model.predict(space.transform(row, check_bounds=False))[0] == 1:
            valid += 1
            l1s.append(l1(space, x, row))
            nch.append(changed(x.reset_index(drop=True), row))
    return {"method": f"dice-{method}", "solver": None, "n": len(X), "validity": valid / len(X),
            "optimal": None, **stats(times), "mean_l1": float(np.mean(l1s)) if l1s else None,
            "mean_changed": float(np.mean(nch)) if nch else None, "build_s": None,
            "times_s": [round(t, 4) for t in times], "errors": sorted(set(errors))}


def show(row: dict[str, Any]) -> None:
    print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
           if k != "times_s"}, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--datasets", default="german,adult")
    parser.add_argument("--solvers", default="highs,gurobi")
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--quick", action="store_true", help="a smaller model grid")
    parser.add_argument("--dice", default="random,genetic")
    parser.add_argument("--out", default="trees.json")
    args = parser.parse_args(argv)
    rows = []
    for dataset in args.datasets.split(","):
        train_X, train_y, test_X, _ = load(dataset)
        space = cfopt.FeatureSpace.from_frame(train_X)
        Z = space.transform(train_X)
        test_X = inside_space(space, test_X)
        for family, n_trees, depth, make in models(args.quick):
            model = make().fit(Z, train_y)
            rejected = test_X[model.predict(space.transform(test_X)) == 0].head(args.n)
            rejected = rejected.reset_index(drop=True)
            base = {"dataset": dataset, "model": family, "n_trees": n_trees,
                    "max_depth": depth, **size(model)}
            if base["leaves"] > MAX_LEAVES:
                rows.append({**base, "skipped": f"more than {MAX_LEAVES} leaves"})
                show(rows[-1])
                continue
            runs = [(solver, True) for solver in args.solvers.split(",")]
            if (family, n_trees, depth) == ("random_forest", 100, 6):
                runs.append(("highs", False))  # the effect of per-query pruning
            for solver, pruning in runs:
                try:
                    row = run_cfopt(model, space, rejected, solver, args.time_limit, pruning)
                except (cfopt.SolverLicenseError, cfopt.SolverNotAvailableError) as exc:
                    row = {"method": "cfopt", "solver": solver, "skipped": str(exc)[:200]}
                rows.append({**base, **row})
                show(rows[-1])
            if args.dice:
                for method in args.dice.split(","):
                    rows.append({**base, **run_dice(method, model, space, train_X, train_y,
                                                    rejected)})
                    show(rows[-1])
            write(args.out, {**environment(), "setup": {
                "target": 1, "objective": "L1, min-max units (category change = 1)",
                "time_limit_s": args.time_limit, "queries_per_model": args.n,
                "quick_grid": args.quick}, "rows": rows})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
