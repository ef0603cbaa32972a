"""Default models on raw UCI Adult (issue 17): one counterfactual per rejected row.

Raw ``uci/adult.data`` (rows with '?' dropped) in a Pipeline: OneHotEncoder for the
string columns, StandardScaler for the numbers, then each family with its default
hyper-parameters (``random_state=0``, one thread): LogisticRegression, MLPClassifier,
RandomForestClassifier, ExtraTreesClassifier, GradientBoostingClassifier,
HistGradientBoostingClassifier, XGBClassifier, LGBMClassifier. Race, sex and
native-country immutable, age increase-only; the first N rows each model rejects;
target 1 (>50K); ``time_limit=30``; weighted L1 (1 / range). Each family runs in its own
process (the model fitted by the parent, loaded from a file), so ``peak_rss_mb`` is the
peak of loading it, building the explainer and answering. Every returned point is
re-checked with the pipeline's own ``predict``. DiCE columns are ``null`` when dice-ml
is not installed. Writes ``benchmarks/results/default_models.json`` after each family,
replacing that family's row (``--families`` reruns some).

    python benchmarks/bench_default_models.py [--n 20] [--families rf,et] [--solver highs]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, environment, write  # noqa: E402

import cfopt  # noqa: E402

TIME_LIMIT = 30.0
COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
           "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
           "hours-per-week", "native-country", "income"]


def families() -> dict[str, Any]:
    from lightgbm import LGBMClassifier
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        GradientBoostingClassifier,
        HistGradientBoostingClassifier,
        RandomForestClassifier,
    )
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from xgboost import XGBClassifier

    return {
        "LogisticRegression": lambda: LogisticRegression(),
        "MLPClassifier": lambda: MLPClassifier(random_state=0),
        "RandomForestClassifier": lambda: RandomForestClassifier(random_state=0, n_jobs=1),
        "ExtraTreesClassifier": lambda: ExtraTreesClassifier(random_state=0, n_jobs=1),
        "GradientBoostingClassifier": lambda: GradientBoostingClassifier(random_state=0),
        "HistGradientBoostingClassifier": lambda: HistGradientBoostingClassifier(
            random_state=0),
        "XGBClassifier": lambda: XGBClassifier(random_state=0, n_jobs=1),
        "LGBMClassifier": lambda: LGBMClassifier(random_state=0, n_jobs=1, verbose=-1),
    }


def adult() -> tuple[pd.DataFrame, np.ndarray]:
    path = cfopt.datasets.data_home() / "uci" / "adult.data"
    frame = pd.read_csv(path, header=None, names=COLUMNS, skipinitialspace=True,
                        na_values="?").dropna().reset_index(drop=True)
    return frame.drop(columns="income"), (frame["income"] == ">50K").astype(int).to_numpy()


def pipeline(X: pd.DataFrame, estimator: Any, sparse: bool = True) -> Any:
    """The preprocessing and ``estimator``; ``sparse``: the one-hot columns as a sparse
    matrix (HistGradientBoosting takes dense input only)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    strings = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    numbers = [c for c in X.columns if c not in strings]
    onehot = OneHotEncoder(handle_unknown="ignore", sparse_output=sparse)
    pre = ColumnTransformer([("strings", onehot, strings),
                             ("numbers", StandardScaler(), numbers)])
    return Pipeline([("pre", pre), ("model", estimator)])


def space_of(X: pd.DataFrame) -> cfopt.FeatureSpace:
    space = cfopt.FeatureSpace.from_frame(X)
    space.immutable("race", "sex", "native-country").increase_only("age")
    return space


def run_family(model_file: str, n: int, solver: str) -> dict[str, Any]:
    """In a worker process: build the explainer of the fitted pipeline and answer."""
    pipe = joblib.load(model_file)
    X, _ = adult()
    space = space_of(X)
    t0 = time.perf_counter()
    explainer = cfopt.Explainer(pipe, space, solver=solver, time_limit=TIME_LIMIT)
    build = time.perf_counter() - t0
    rows = np.flatnonzero(pipe.predict(X) == 0)[:n]
    times, l1, statuses = [], [], []
    verified = optimal = 0
    for i in rows:
        t = time.perf_counter()
        try:
            ce = explainer.explain(X.iloc[[i]], target=1)
        except cfopt.InfeasibleError:
            statuses.append("infeasible")
            times.append(time.perf_counter() - t)
            continue
        times.append(time.perf_counter() - t)
        statuses.append(ce.status.value)
        if ce.counterfactual is not None and pipe.predict(ce.counterfactual)[0] == 1:
            verified += 1
            l1.append(ce.distances["l1"])
        optimal += ce.status is cfopt.Status.OPTIMAL
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"build_s": build, "peak_rss_mb": peak, "n": len(rows),
            "verified_fraction": verified / len(rows), "optimal_fraction": optimal / len(rows),
            "median_s": float(np.median(times)), "p90_s": float(np.percentile(times, 90)),
            "max_overrun_s": max(0.0, max(times) - TIME_LIMIT),
            "mean_l1": float(np.mean(l1)) if l1 else None, "statuses": statuses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--families", default="all")
    parser.add_argument("--solver", default="highs")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL_FILE", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = run_family(args.worker[0], args.n, args.solver)
        Path(args.worker[1]).write_text(json.dumps(result), encoding="utf-8")
        return
    makers = families()
    chosen = list(makers) if args.families == "all" else args.families.split(",")
    X, y = adult()
    try:
        import dice_ml  # noqa: F401
        dice_note = None
    except ImportError:
        dice_note = "dice-ml is not installed: DiCE columns are null"
    path = RESULTS / "default_models.json"
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"] if path.exists() else []
    with tempfile.TemporaryDirectory() as tmp:
        for family in chosen:
            t0 = time.perf_counter()
            sparse = family != "HistGradientBoostingClassifier"
            pipe = pipeline(X, makers[family](), sparse=sparse).fit(X, y)
            fit = time.perf_counter() - t0
            model_file, out = f"{tmp}/{family}.joblib", f"{tmp}/{family}.json"
            joblib.dump(pipe, model_file)
            subprocess.run([sys.executable, __file__, "--n", str(args.n), "--solver",
                            args.solver, "--worker", model_file, out], check=True)
            result = json.loads(Path(out).read_text(encoding="utf-8"))
            row = {"family": family, "solver": args.solver, **result, "fit_s": fit,
                   "sparse_onehot": sparse, "dice_validity": None, "dice_median_s": None,
                   "dice_mean_l1": None}
            print(json.dumps({k: v for k, v in row.items() if k != "statuses"}), flush=True)
            rows = [r for r in rows if (r["family"], r["solver"]) != (family, args.solver)]
            rows.append(row)
            write("default_models.json", {  # after each family: a crash loses no row
                "benchmark": __doc__.split("\n\n")[0], "environment": environment(),
                "time_limit": TIME_LIMIT, "notes": [note for note in (dice_note,) if note],
                "rows": rows})


if __name__ == "__main__":
    main()
