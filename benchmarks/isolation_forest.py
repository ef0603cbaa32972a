"""Isolation-forest plausibility (issue 17): counterfactuals with and without
``cfopt.IsolationForestScore``.

German credit (bundled; 70/30 split, as ``bench_trees.py``), min-max feature space with
foreign worker and personal status/sex immutable and age increase-only; a random forest
(50 trees, depth 6) on the encoded training rows; an ``IsolationForest`` (sklearn
defaults: 100 trees, ``max_samples="auto"`` = 256; ``contamination=0.1``, so 90 % of the
training rows are inliers) on the same inputs. The first ``--n`` test rows the model
rejects are explained towards class 1 (HiGHS, ``time_limit`` per query), without the
block and with it (CE must be an inlier by ``IsolationForest.predict``; the block's tree
formulation by ``--formulations``). Per configuration: statuses, mean weighted L1 (the
objective, min-max units; over the rows every configuration answered, and over those
every configuration proved optimal), fraction of CEs that are
inliers by ``IsolationForest.predict``, mean LOF (``LocalOutlierFactor(novelty=True)``
fitted on the encoded training rows; ~1 inlier, larger is more outlying), median and
90th-percentile query time. Writes ``benchmarks/results/isolation_forest.json``.

    python benchmarks/isolation_forest.py [--n 20] [--time-limit 20] [--formulations leaf]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import IsolationForest, RandomForestClassifier
from sklearn.neighbors import LocalOutlierFactor

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, progress, stats, write  # noqa: E402

import cfopt  # noqa: E402


def load() -> tuple[pd.DataFrame, pd.Series, pd.DataFrame, cfopt.FeatureSpace]:
    data = cfopt.datasets.load_german()
    X = data.X.copy()
    for c in ("telephone", "foreign_worker"):
        X[c] = X[c].astype(str)
    cut = int(0.7 * len(X))
    space = cfopt.FeatureSpace.from_frame(X)
    space.immutable("foreign_worker", "status_sex").increase_only("age")
    return X.iloc[:cut], data.y.iloc[:cut], X.iloc[cut:], space


def run(explainer: cfopt.Explainer, rows: pd.DataFrame, label: str) -> list[dict[str, Any]]:
    out = []
    for i in progress(range(len(rows)), label):
        t0 = time.perf_counter()
        ce = explainer.explain(rows.iloc[[i]], target=1)
        out.append({"row": int(rows.index[i]), "status": ce.status.value,
                    "verified": bool(ce.verified), "objective": ce.objective,
                    "bound": ce.bound, "time_s": time.perf_counter() - t0,
                    "counterfactual": ce.counterfactual})
    return out


def summary(name: str, found: list[dict[str, Any]], paired: list[int], proven: list[int],
            space: cfopt.FeatureSpace, forest: IsolationForest,
            lof: LocalOutlierFactor) -> dict[str, Any]:
    ces = [r["counterfactual"] for r in found if r["counterfactual"] is not None]
    Z = space.transform(pd.concat(ces)) if ces else np.zeros((0, space.n_inputs))
    statuses = pd.Series([r["status"] for r in found]).value_counts().to_dict()
    return {
        "config": name, "n": len(found), "statuses": statuses,
        "verified_fraction": float(np.mean([r["verified"] for r in found])),
        "mean_l1": float(np.mean([found[i]["objective"] for i in paired])) if paired else None,
        "mean_l1_proven": float(np.mean([found[i]["objective"] for i in proven]))
        if proven else None,
        "inlier_fraction": float(np.mean(forest.predict(Z) == 1)) if len(Z) else None,
        "mean_if_score": float(forest.score_samples(Z).mean()) if len(Z) else None,
        "mean_lof": float(-lof.score_samples(Z).mean()) if len(Z) else None,
        **stats([r["time_s"] for r in found]),
    }


def _row(found: dict[str, Any], forest: IsolationForest, lof: LocalOutlierFactor,
         space: cfopt.FeatureSpace) -> dict[str, Any]:
    """One query's record: status, objective, bound, time, and its CE's real isolation
    score, inlier flag and LOF."""
    out = {k: v for k, v in found.items() if k != "counterfactual"}
    if found["counterfactual"] is not None:
        z = space.transform(found["counterfactual"])
        out.update(if_score=float(forest.score_samples(z)[0]),
                   inlier=bool(forest.predict(z)[0] == 1), lof=float(-lof.score_samples(z)[0]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="rejected test rows")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per query")
    parser.add_argument("--formulations", default="leaf",
                        help="the block's tree formulations, comma-separated (leaf,threshold)")
    parser.add_argument("--out", default="isolation_forest.json")
    args = parser.parse_args()

    X_train, y_train, X_test, space = load()
    Z_train = space.transform(X_train)
    model = RandomForestClassifier(n_estimators=50, max_depth=6, random_state=0)
    model.fit(Z_train, y_train)
    forest = IsolationForest(contamination=0.1, random_state=0).fit(Z_train)
    lof = LocalOutlierFactor(novelty=True).fit(Z_train)
    Z_test = space.transform(X_test)
    rows = X_test.iloc[np.flatnonzero(model.predict(Z_test) == 0)[:args.n]]

    configs: dict[str, list[cfopt.ConstraintBlock]] = {"none": []}
    for formulation in args.formulations.split(","):
        configs[f"isolation_forest_{formulation}"] = [
            cfopt.IsolationForestScore(forest, formulation=formulation)]
    results, builds = {}, {}
    for name, constraints in configs.items():
        t0 = time.perf_counter()
        explainer = cfopt.Explainer(model, space, constraints=constraints,
                                    time_limit=args.time_limit)
        builds[name] = time.perf_counter() - t0
        results[name] = run(explainer, rows, name)
    answered = [i for i in range(len(rows))
                if all(results[c][i]["objective"] is not None for c in configs)]
    proven = [i for i in answered if all(results[c][i]["status"] == "optimal" for c in configs)]
    Z_rows = space.transform(rows)
    payload = {
        **environment(),
        "description": __doc__.split("\n\n")[1].replace("\n", " "),
        "data": "german", "n_rows": len(rows), "time_limit_s": args.time_limit,
        "model": "RandomForestClassifier(n_estimators=50, max_depth=6)",
        "isolation_forest": {"n_estimators": len(forest.estimators_),
                             "max_samples": int(forest.max_samples_),
                             "contamination": 0.1, "threshold (offset_)": float(forest.offset_),
                             "train_inlier_fraction": float(np.mean(
                                 forest.predict(Z_train) == 1))},
        "factuals": {"inlier_fraction": float(np.mean(forest.predict(Z_rows) == 1)),
                     "mean_lof": float(-lof.score_samples(Z_rows).mean())},
        "paired_rows": len(answered), "proven_rows": len(proven),
        "rows": [{**summary(name, results[name], answered, proven, space, forest, lof),
                  "build_s": builds[name]} for name in configs],
        "per_row": {name: [_row(r, forest, lof, space) for r in found]
                    for name, found in results.items()},
    }
    path = write(args.out, payload)
    for row in payload["rows"]:
        print(f"{row['config']:28s} l1={row['mean_l1']:.4f} ({row['mean_l1_proven']:.4f} proven)"
              f" inliers={row['inlier_fraction']:.2f}"
              f" lof={row['mean_lof']:.3f} median={row['median_s']:.2f}s {row['statuses']}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
