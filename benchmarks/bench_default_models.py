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
re-checked with the pipeline's own ``predict``. Beside cfopt, DiCE's random method
(dice-ml, ``total_CFs=1``, the immutables held by ``features_to_vary``, age by
``permitted_range``) on the same pipeline and rows, in its own process, the two
interleaved row by row; its points are checked the same way and measured by the same
weighted L1 (``l1_ratio``: DiCE's over cfopt's, on rows both answered). Writes
``benchmarks/results/default_models.json`` after each family, replacing that family's
row (``--families`` reruns some).

    python benchmarks/bench_default_models.py [--n 20] [--families rf,et] [--solver highs]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, DiceSearch, environment, write  # noqa: E402

import cfopt  # noqa: E402
from cfopt.formulations.distances import feature_weights, row_distances  # noqa: E402

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


def age_ranges(X: pd.DataFrame, rows: np.ndarray) -> list[dict[str, list[Any]]]:
    """DiCE's ``permitted_range`` per row: age increase-only, as cfopt's space declares."""
    top = int(X["age"].max())
    return [{"age": [int(X["age"].iloc[i]), top]} for i in rows]


def serve(tool: str, model_file: str, n: int, solver: str, conn: Any) -> None:
    """In a worker process: load the fitted pipeline, set ``tool`` (``"cfopt"`` or
    ``"dice"``) up, then answer one rejected row per message (its position among the first
    ``n``) until ``None``; the last reply is the setup time and the process's peak RSS."""
    pipe = joblib.load(model_file)
    X, y = adult()
    space = space_of(X)
    rows = np.flatnonzero(pipe.predict(X) == 0)[:n]
    t0 = time.perf_counter()
    if tool == "cfopt":
        explainer = cfopt.Explainer(pipe, space, solver=solver, time_limit=TIME_LIMIT)
    else:
        search = DiceSearch("random", pipe, space, X, pd.Series(y, index=X.index),
                            raw_input=True)
        vary = [f.name for f in space if not f.immutable]
        ranges = age_ranges(X, rows)
    setup = time.perf_counter() - t0
    conn.send(len(rows))
    while (k := conn.recv()) is not None:
        x = X.iloc[[rows[k]]]
        t = time.perf_counter()
        if tool == "cfopt":
            try:
                ce = explainer.explain(x, target=1)
                status, point = ce.status.value, ce.counterfactual
            except cfopt.InfeasibleError:
                status, point = "infeasible", None
            seconds = time.perf_counter() - t
        else:
            point, seconds, error = search.counterfactuals(x, int(k),
                                                           features_to_vary=vary,
                                                           permitted_range=ranges[k])
            status = "found" if point is not None else (error or "none")
        conn.send(answer(pipe, space, x, point, seconds, status))
    conn.send({"setup_s": setup,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def answer(pipe: Any, space: cfopt.FeatureSpace, x: pd.DataFrame, point: pd.DataFrame | None,
           seconds: float, status: str) -> dict[str, Any]:
    """One query's record: ``valid`` re-checked with the pipeline's own ``predict`` and
    the space (immutables kept, age not lowered); ``l1`` the weighted L1 (1 / range, a
    category change counts 1) every tool is measured by."""
    valid, l1 = False, None
    if point is not None:
        point = point[space.names].reset_index(drop=True)
        before, after = x.iloc[0], point.iloc[0]
        kept = all(before[f.name] == after[f.name] for f in space if f.immutable)
        valid = bool(pipe.predict(point)[0] == 1 and kept and after["age"] >= before["age"])
        l1 = row_distances(space, feature_weights(space), before, after)["l1"]
    return {"seconds": seconds, "status": status, "valid": valid, "l1": l1 if valid else None}


def run_family(model_file: str, n: int, solver: str) -> dict[str, Any]:
    """cfopt and DiCE's random method, each in its own process, interleaved row by row."""
    context = multiprocessing.get_context("spawn")
    tools: dict[str, Any] = {}
    for tool in ("cfopt", "dice"):
        parent, child = context.Pipe()
        process = context.Process(target=serve, args=(tool, model_file, n, solver, child))
        process.start()
        tools[tool] = (process, parent)
    count = min(conn.recv() for _, conn in tools.values())
    answers: dict[str, list[dict[str, Any]]] = {tool: [] for tool in tools}
    for k in range(count):
        for tool, (_, conn) in tools.items():
            conn.send(k)
            answers[tool].append(conn.recv())
    setups = {}
    for tool, (process, conn) in tools.items():
        conn.send(None)
        setups[tool] = conn.recv()
        process.join()
    cf, dice = answers["cfopt"], answers["dice"]
    times = [a["seconds"] for a in cf]
    dice_times = [a["seconds"] for a in dice]
    return {"build_s": setups["cfopt"]["setup_s"],
            "peak_rss_mb": setups["cfopt"]["peak_rss_mb"], "n": count,
            "verified_fraction": sum(a["valid"] for a in cf) / count,
            "optimal_fraction": sum(a["status"] == "optimal" for a in cf) / count,
            "median_s": float(np.median(times)), "p90_s": float(np.percentile(times, 90)),
            "max_overrun_s": max(0.0, max(times) - TIME_LIMIT),
            "mean_l1": mean([a["l1"] for a in cf]), "statuses": [a["status"] for a in cf],
            "times_s": [round(t, 4) for t in times],
            "dice_times_s": [round(t, 4) for t in dice_times],
            "dice_validity": sum(a["valid"] for a in dice) / count,
            "dice_median_s": float(np.median(dice_times)),
            "dice_p90_s": float(np.percentile(dice_times, 90)),
            "dice_mean_l1": mean([a["l1"] for a in dice]),
            "dice_setup_s": setups["dice"]["setup_s"],
            "dice_statuses": [a["status"] for a in dice],
            "l1_ratio": ratio([a["l1"] for a in cf], [a["l1"] for a in dice]),
            "l1": [a["l1"] for a in cf], "dice_l1": [a["l1"] for a in dice]}


def mean(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return float(np.mean(found)) if found else None


def ratio(ours: list[float | None], theirs: list[float | None]) -> float | None:
    """DiCE's mean L1 over cfopt's, on the rows both answered validly (a ratio of means:
    a mean of ratios would be ruled by the rows where cfopt's move is tiny)."""
    pairs = [(a, b) for a, b in zip(ours, theirs) if a is not None and b is not None]
    total = sum(a for a, _ in pairs)
    return float(sum(b for _, b in pairs) / total) if pairs and total > 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--families", default="all")
    parser.add_argument("--solver", default="highs")
    args = parser.parse_args()
    makers = families()
    chosen = list(makers) if args.families == "all" else args.families.split(",")
    X, y = adult()
    path = RESULTS / "default_models.json"
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"] if path.exists() else []
    with tempfile.TemporaryDirectory() as tmp:
        for family in chosen:
            t0 = time.perf_counter()
            sparse = family != "HistGradientBoostingClassifier"
            pipe = pipeline(X, makers[family](), sparse=sparse).fit(X, y)
            fit = time.perf_counter() - t0
            model_file = f"{tmp}/{family}.joblib"
            joblib.dump(pipe, model_file)
            row = {"family": family, "solver": args.solver,
                   **run_family(model_file, args.n, args.solver), "fit_s": fit,
                   "sparse_onehot": sparse, "environment": environment()}
            print(json.dumps({k: v for k, v in row.items()
                              if k not in ("statuses", "dice_statuses", "environment", "l1",
                                           "dice_l1", "times_s", "dice_times_s")}),
                  flush=True)
            rows = [r for r in rows if (r["family"], r["solver"]) != (family, args.solver)]
            rows.append(row)
            write("default_models.json", {  # after each family: a crash loses no row
                "benchmark": __doc__.split("\n\n")[0], "environment": environment(),
                "time_limit": TIME_LIMIT, "rows": rows})


if __name__ == "__main__":
    main()
