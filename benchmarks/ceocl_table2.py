"""CE-OCL Table 2: one counterfactual per factual, random forest, four CARLA data sets.

Reproduces Table 2 of Maragno, Röber & Birbil, "Counterfactual explanations using
optimization with constraint learning" (CE-OCL): for 30 factuals per data set that the
random forest predicts as the unfavourable class 0 (target class 1), the mean
validity, categorical proximity, continuous proximity (raw units, negative) and sparsity
of one counterfactual, as DiCE defines them (:mod:`cfopt.metrics`), for

* ``cfopt``: the closest counterfactual (weighted L1 in min-max units) with the data
  sets' immutable features fixed (CE-OCL's row "CE-OCL");
* ``cfopt_tr``: the same inside CE-OCL's trust region (``cfopt.ConvexHull``): the convex
  hull of the ``--hull-points`` training rows nearest to the factual among those the
  forest predicts as class 1, first with ε = 0 and, when that is infeasible, enlarged
  to an L1 ball of ``--epsilon`` (min-max units) around it (CE-OCL's row "CE-OCL_tr";
  its code also enlarges the hull only on failure);
* ``dice_genetic``: DiCE's genetic method on the same model and factuals, the immutable
  features excluded from ``features_to_vary`` (CE-OCL's row "DiCE").

Data: CARLA's Adult, COMPAS and HELOC train/test files; Give Me Some Credit (only its
test file is published) split 75/25, stratified, seed 0. Feature spaces come from
``FeatureSpace.from_frame`` on the training rows (CARLA's two-level categoricals are
labelled binaries, so categorical proximity counts them); factuals are the first test
rows inside the training bounds that the forest predicts as 0. Immutable features are
those of CE-OCL's data READMEs (Adult: age, sex; COMPAS: age, race, sex; HELOC: none;
GMC: age). The forest follows the models CE-OCL published with its code (20 trees of
depth 4, trained on min-max scaled inputs); the paper itself states no settings.

Validity is re-checked with the forest's own ``predict`` on every returned raw row;
proximity and sparsity are averaged over the valid counterfactuals (``*_se``: standard
error, as the paper reports). Each row also gives the paper's value beside ours
(``paper_<metric>``; absent where the paper prints "–"). Timings: per query, cfopt
with HiGHS under ``--time-limit`` seconds per solve (a solve that hits it counts as a
timeout; its incumbent, if verified, still counts). Writes
``benchmarks/results/ceocl_table2.json``.

    python benchmarks/ceocl_table2.py [--datasets adult,compas,heloc,gmc] [--n 30]
                                      [--time-limit 60]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

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

DATASETS = ("adult", "compas", "heloc", "gmc")
IMMUTABLE = {"adult": ("age", "sex"), "compas": ("age", "race", "sex"), "heloc": (),
             "gmc": ("age",)}
METRICS = ("validity", "cat_proximity", "cont_proximity", "sparsity")
#: Table 2 of the paper: (data set, method) -> validity, cat. prox., cont. prox., sparsity
PAPER: dict[tuple[str, str], tuple[float | None, ...]] = {
    ("adult", "cfopt"): (1.00, 1.00, -4844.35, 0.93),
    ("adult", "cfopt_tr"): (1.00, 0.97, -21785.50, 0.86),
    ("adult", "dice_genetic"): (1.00, 0.74, -84278.61, 0.50),
    ("compas", "cfopt"): (1.00, 1.00, -15.23, 0.85),
    ("compas", "cfopt_tr"): (1.00, 1.00, -30.83, 0.85),
    ("compas", "dice_genetic"): (0.74, 0.94, -35.58, 0.61),
    ("heloc", "cfopt"): (1.00, None, -12.21, 0.94),
    ("heloc", "cfopt_tr"): (1.00, None, -92.71, 0.75),
    ("heloc", "dice_genetic"): (0.97, None, -203.83, 0.22),
    ("gmc", "cfopt"): (1.00, None, -1.18, 0.90),
    ("gmc", "cfopt_tr"): (1.00, None, -120.61, 0.87),
    ("gmc", "dice_genetic"): (1.00, None, -1618.33, 0.25),
}


def load(name: str) -> tuple[pd.DataFrame, pd.Series, pd.DataFrame]:
    """Training rows, training labels and test rows of one data set."""
    if name == "gmc":
        data = cfopt.datasets.load_gmc()
        train_X, test_X, train_y, _ = train_test_split(data.X, data.y, test_size=0.25,
                                                       random_state=0, stratify=data.y)
        return train_X.reset_index(drop=True), train_y.reset_index(drop=True), test_X
    loader = getattr(cfopt.datasets, f"load_{name}")
    train, test = loader("train"), loader("test")
    return train.X, train.y, test.X


def factuals(model: RandomForestClassifier, space: cfopt.FeatureSpace, test_X: pd.DataFrame,
             n: int) -> pd.DataFrame:
    """The first ``n`` test rows inside the space's bounds that the model predicts as 0."""
    test_X = inside_space(space, test_X)
    rejected = test_X[model.predict(space.transform(test_X)) == 0]
    return rejected.head(n).reset_index(drop=True)


def score(model: RandomForestClassifier, space: cfopt.FeatureSpace, x: pd.DataFrame,
          row: pd.DataFrame | None) -> dict[str, Any]:
    """Validity by the model's own ``predict``; the DiCE metrics of a valid row."""
    valid = row is not None and \
        int(model.predict(space.transform(row, check_bounds=False))[0]) == 1
    if not valid:
        return {"valid": False}
    return {"valid": True,
            "cat_proximity": cfopt.metrics.cat_proximity(space, x, row),
            "cont_proximity": cfopt.metrics.cont_proximity(space, x, row),
            "sparsity": cfopt.metrics.sparsity(space, x, row)}


def run_cfopt(model: RandomForestClassifier, space: cfopt.FeatureSpace, train_X: pd.DataFrame,
              X: pd.DataFrame, *, trust_region: bool, time_limit: float, hull_points: int,
              epsilon: float) -> tuple[list[dict[str, Any]], float]:
    """Per-query records and the explainers' build seconds. With ``trust_region``, a
    query infeasible in the ε = 0 hull is re-solved in the enlarged one."""
    t0 = time.perf_counter()
    if trust_region:
        explainers = [cfopt.Explainer(model, space, time_limit=time_limit, constraints=[
            cfopt.ConvexHull(train_X, epsilon=eps, max_points=hull_points, name="hull")])
            for eps in (0.0, epsilon)]
    else:
        explainers = [cfopt.Explainer(model, space, time_limit=time_limit)]
    build = time.perf_counter() - t0
    records = []
    for i in progress(range(len(X)), "cfopt"):
        x = X.iloc[[i]]
        record: dict[str, Any] = {"seconds": 0.0, "statuses": []}
        ce = None
        for explainer in explainers:
            t0 = time.perf_counter()
            try:
                ce = explainer.explain(x, target=1)
            except cfopt.InfeasibleError:
                ce = None
            record["seconds"] += time.perf_counter() - t0
            record["statuses"].append("infeasible" if ce is None else ce.status.value)
            if ce is not None:
                break
        record.update(score(model, space, x, None if ce is None else ce.counterfactual))
        records.append(record)
    return records, build


def run_dice_genetic(model: RandomForestClassifier, space: cfopt.FeatureSpace,
                     train_X: pd.DataFrame, train_y: pd.Series, X: pd.DataFrame,
                     immutable: tuple[str, ...]) -> list[dict[str, Any]]:
    vary = [n for n in space.names if n not in immutable] if immutable else "all"
    records = []
    for i, (row, seconds, error) in enumerate(
            dice_counterfactuals("genetic", model, space, train_X, train_y, X, vary)):
        records.append({"seconds": seconds, "error": error,
                        **score(model, space, X.iloc[[i]], row)})
    return records


def summarise(dataset: str, method: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One Table 2 row: means (and standard errors) over the valid counterfactuals."""
    valid = [r for r in records if r["valid"]]
    row: dict[str, Any] = {"dataset": dataset, "method": method, "n": len(records),
                           "n_valid": len(valid),
                           "validity": len(valid) / len(records) if records else None}
    for key in METRICS[1:]:
        values = [r[key] for r in valid if r[key] is not None]
        row[key] = float(np.mean(values)) if values else None
        row[f"{key}_se"] = float(np.std(values, ddof=1) / np.sqrt(len(values))) \
            if len(values) > 1 else None
    times = [r["seconds"] for r in records]
    timing = stats(times)
    row.update(time_s=timing["mean_s"], median_s=timing["median_s"], p90_s=timing["p90_s"])
    if method.startswith("cfopt"):
        statuses = [r["statuses"] for r in records]
        row["optimal"] = sum(s[-1] == cfopt.Status.OPTIMAL.value for s in statuses)
        row["timeouts"] = sum(v in (cfopt.Status.FEASIBLE.value, cfopt.Status.NO_SOLUTION.value)
                              for s in statuses for v in s)
        row["infeasible"] = sum(s[-1] == "infeasible" for s in statuses)
        if method == "cfopt_tr":
            row["enlarged_hull"] = sum(len(s) > 1 for s in statuses)
    else:
        row["errors"] = sorted({r["error"] for r in records if r["error"]})
    paper = PAPER.get((dataset, method))
    for key, value in zip(METRICS, paper or ()):
        if value is not None:
            row[f"paper_{key}"] = value
    row["queries"] = [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}
                      for r in records]
    return row


def show(row: dict[str, Any]) -> None:
    keys = ("dataset", "method", "n", "validity", "cat_proximity", "cont_proximity",
            "sparsity", "time_s", "median_s", "timeouts", "infeasible", "enlarged_hull",
            "errors")
    print({k: (round(row[k], 4) if isinstance(row[k], float) else row[k])
           for k in keys if k in row}, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--n", type=int, default=30, help="factuals per data set")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve")
    parser.add_argument("--trees", type=int, default=20)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--hull-points", type=int, default=500,
                        help="ConvexHull max_points: nearest predicted-class-1 rows per query")
    parser.add_argument("--epsilon", type=float, default=0.1,
                        help="L1 radius (min-max units) of the enlarged hull")
    parser.add_argument("--out", default="ceocl_table2.json")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.datasets.split(",")) - set(DATASETS))
    if unknown:
        parser.error(f"unknown data set(s) {unknown}; choose from {list(DATASETS)}")
    load_start = os.getloadavg()
    setup = {
        "model": {"class": "sklearn RandomForestClassifier", "n_estimators": args.trees,
                  "max_depth": args.depth, "random_state": 0,
                  "inputs": "FeatureSpace.transform (min-max scaled)",
                  "why": "the RF constraint tables CE-OCL published (tabearoeber/CE-OCL, "
                         "data/*/rf_*_model.csv) hold 20 trees of depth 4; the paper states "
                         "no settings"},
        "factuals": f"first {args.n} test rows inside the training bounds predicted 0",
        "target": 1, "immutable": IMMUTABLE,
        "cfopt": {"solver": "highs", "objective": "L1, min-max units (1/range weights)",
                  "time_limit_s": args.time_limit},
        "cfopt_tr": {"region": "cfopt.ConvexHull of training rows predicted 1",
                     "max_points": args.hull_points, "norm": "l1",
                     "epsilon": [0.0, args.epsilon],
                     "enlarge": "epsilon 0 first; the enlarged hull only when infeasible"},
        "dice_genetic": {"total_CFs": 1, "desired_class": 1,
                         "features_to_vary": "all but the immutable features",
                         "time_limit": "none (DiCE has no per-query limit)"},
        "gmc_split": "train_test_split(test_size=0.25, stratify=y, random_state=0)",
        "metrics": "cfopt.metrics (DiCE's definitions); proximity and sparsity averaged "
                   "over valid counterfactuals; *_se = standard error",
        "machine_note": "2 cores shared with other jobs during the run; timings are upper "
                        "bounds",
    }
    rows: list[dict[str, Any]] = []
    models: dict[str, Any] = {}
    for dataset in args.datasets.split(","):
        train_X, train_y, test_X = load(dataset)
        space = cfopt.FeatureSpace.from_frame(train_X)
        space.immutable(*IMMUTABLE[dataset])
        model = RandomForestClassifier(args.trees, max_depth=args.depth, random_state=0,
                                       n_jobs=1).fit(space.transform(train_X), train_y)
        X = factuals(model, space, test_X, args.n)
        models[dataset] = {"train_rows": len(train_X), "factuals": len(X),
                           "train_accuracy": float(model.score(space.transform(train_X),
                                                               train_y))}
        for method in ("cfopt", "cfopt_tr"):
            records, build = run_cfopt(model, space, train_X, X,
                                       trust_region=method == "cfopt_tr",
                                       time_limit=args.time_limit,
                                       hull_points=args.hull_points, epsilon=args.epsilon)
            rows.append({**summarise(dataset, method, records), "build_s": build})
            show(rows[-1])
        rows.append(summarise(dataset, "dice_genetic", run_dice_genetic(
            model, space, train_X, train_y, X, IMMUTABLE[dataset])))
        show(rows[-1])
        write(args.out, {**environment(), "cfopt_source": str(Path(cfopt.__file__).parent),
                         "loadavg_start": load_start,
                         "loadavg_end": os.getloadavg(), "setup": setup, "data": models,
                         "rows": rows})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
