"""Core benchmark: one counterfactual per rejected Adult applicant.

CARLA Adult, min-max scaled; a torch MLP with two hidden ReLU layers of 20 trained on
adult_train; the first N test points (adult_test) the model predicts 0. Methods:

* ``cfopt-reuse``: one Explainer, re-solved per query (mutable parameters);
* ``cfopt-rebuild``: a new Explainer per query (build + bound tightening + solve);
* ``dice-random``: DiCE's random method (total_CFs=1) on the same model and points;

each cfopt row with global LP bound tightening ("lp") or interval bounds only
("interval"), with or without per-query tightening around a greedy counterfactual,
on HiGHS, CBC and Gurobi (when installed and within its licence).

Every CE is re-checked with the torch model; ``validity`` is the fraction of queries
with a valid CE; ``mean_l1`` the mean L1 distance in min-max units (a binary or
categorical change costs 1) over valid CEs. Writes ``benchmarks/results/core.json``.

    python benchmarks/bench_core.py [--n 50] [--solvers highs,cbc,gurobi] [--no-dice]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, progress, stats, write  # noqa: E402

import cfopt  # noqa: E402


def train_mlp(Z: np.ndarray, y: np.ndarray, seed: int = 0, epochs: int = 5) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(Z.shape[1], 20), torch.nn.ReLU(),
                              torch.nn.Linear(20, 20), torch.nn.ReLU(), torch.nn.Linear(20, 1))
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    Zt = torch.tensor(Z, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(Zt), generator=gen)
        for k in range(0, len(Zt), 32):
            idx = perm[k:k + 32]
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                net(Zt[idx]).squeeze(1), yt[idx])
            loss.backward()
            opt.step()
    return net.eval()


def evaluation_space(space: cfopt.FeatureSpace) -> cfopt.FeatureSpace:
    """The same encoding with integer features relaxed, to score any method's points
    (DiCE may return non-integral values for integer features)."""
    data = space.to_dict()
    for f in data["features"]:
        if f["kind"] == "integer":
            f["kind"] = "continuous"
    return cfopt.FeatureSpace.from_dict(data)


class Scorer:
    def __init__(self, net: torch.nn.Module, space: cfopt.FeatureSpace) -> None:
        self.net = net
        self.space = evaluation_space(space)

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        Z = self.space.transform(rows, check_bounds=False)
        with torch.no_grad():
            return (self.net(torch.tensor(Z, dtype=torch.float32)).squeeze(1) > 0).numpy()

    def l1(self, x: pd.DataFrame, ce: pd.DataFrame) -> float:
        a = self.space.transform(x, check_bounds=False)[0]
        b = self.space.transform(ce, check_bounds=False)[0]
        return float(np.abs(a - b).sum())


def run_cfopt(net, space, X: pd.DataFrame, scorer: Scorer, *, solver: str, tightening: str,
              reuse: bool, per_query: bool) -> dict[str, Any]:
    times, solver_times, l1s, build_times = [], [], [], []
    valid = optimal = 0
    explainer = None
    if reuse:
        t0 = time.perf_counter()
        explainer = cfopt.Explainer(net, space, solver=solver, bound_tightening=tightening,
                                    tighten_per_query=per_query)
        build_times.append(time.perf_counter() - t0)
    fallbacks = 0
    for i in progress(range(len(X)), f"cfopt {solver}"):
        x = X.iloc[[i]]
        t0 = time.perf_counter()
        if not reuse:
            explainer = cfopt.Explainer(net, space, solver=solver, bound_tightening=tightening,
                                        tighten_per_query=per_query)
            build_times.append(time.perf_counter() - t0)
        ce = explainer.explain(x, target=1)
        times.append(time.perf_counter() - t0)
        if ce.solver_time is not None:
            solver_times.append(ce.solver_time)
        ok = ce.found and bool(scorer.predict(ce.counterfactual)[0])
        valid += ok
        optimal += ce.status is cfopt.Status.OPTIMAL
        fallbacks += ce.details.get("fallback", False)
        if ok:
            l1s.append(scorer.l1(x, ce.counterfactual))
    s = stats(times)
    report = explainer.milp.bound_tightening
    return {
        "method": "cfopt-reuse" if reuse else "cfopt-rebuild", "solver": solver,
        "bound_tightening": tightening, "per_query_tightening": per_query, "n": len(X),
        "validity": valid / len(X),
        "optimal": optimal / len(X), **s,
        "mean_l1": float(np.mean(l1s)) if l1s else None,
        "build_s": float(np.median(build_times)),
        "solver_s": float(np.median(solver_times)) if solver_times else None,
        "overhead_ratio": (float(np.median([(t - st) / st for t, st in
                                            zip(times, solver_times)]))
                           if len(solver_times) == len(times) and reuse else None),
        "stable_neurons": f"{report.stable_after}/{report.neurons}",
        "mean_bigm_width": report.mean_width_after,
        "fallbacks": fallbacks,
    }


class _DiceModel:
    """sklearn-style wrapper DiCE calls with raw DataFrames."""

    def __init__(self, scorer: Scorer) -> None:
        self.scorer = scorer

    def predict_proba(self, frame: pd.DataFrame) -> np.ndarray:
        Z = self.scorer.space.transform(frame[self.scorer.space.names], check_bounds=False)
        with torch.no_grad():
            p = torch.sigmoid(self.scorer.net(torch.tensor(Z, dtype=torch.float32))).squeeze(1)
        p = p.numpy().astype(float)
        return np.column_stack([1 - p, p])

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        return (self.predict_proba(frame)[:, 1] > 0.5).astype(int)


def run_dice(train: cfopt.datasets.Dataset, X: pd.DataFrame, scorer: Scorer,
             space: cfopt.FeatureSpace) -> dict[str, Any]:
    import dice_ml

    continuous = [f.name for f in space if f.kind in (cfopt.Kind.CONTINUOUS, cfopt.Kind.INTEGER)]
    data = dice_ml.Data(dataframe=train.frame, continuous_features=continuous,
                        outcome_name=train.y.name)
    model = dice_ml.Model(model=_DiceModel(scorer), backend="sklearn")
    dice = dice_ml.Dice(data, model, method="random")
    times, l1s = [], []
    valid = 0
    for i in progress(range(len(X)), "DiCE"):
        x = X.iloc[[i]]
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = dice.generate_counterfactuals(x, total_CFs=1, desired_class="opposite",
                                                    random_seed=i, verbose=False)
            cf = out.cf_examples_list[0].final_cfs_df
        except Exception:  # DiCE raises when it finds nothing
            cf = None
        times.append(time.perf_counter() - t0)
        if cf is None or len(cf) == 0:
            continue
        row = cf[space.names].iloc[[0]].reset_index(drop=True)
        for f in space:
            if not f.labelled and f.kind is not cfopt.Kind.CATEGORICAL:
                row[f.name] = pd.to_numeric(row[f.name])
        if bool(scorer.predict(row)[0]):
            valid += 1
            l1s.append(scorer.l1(x, row))
    return {"method": "dice-random", "solver": None, "bound_tightening": None,
            "per_query_tightening": None, "n": len(X),
            "validity": valid / len(X), "optimal": None, **stats(times),
            "mean_l1": float(np.mean(l1s)) if l1s else None, "build_s": None,
            "solver_s": None, "overhead_ratio": None}


def adult_queries(n: int) -> tuple[Any, Any, cfopt.FeatureSpace, torch.nn.Sequential,
                                   Scorer, pd.DataFrame]:
    """The benchmark's setup: CARLA Adult train / test, the space, the trained network,
    its scorer and the first ``n`` test points inside the space that it rejects."""
    train = cfopt.datasets.load_adult("train")
    test = cfopt.datasets.load_adult("test")
    space = cfopt.FeatureSpace.from_frame(train.X)
    net = train_mlp(space.transform(train.X), train.y.to_numpy())
    scorer = Scorer(net, space)
    test_X = test.X[_inside(space, test.X)]
    return (train, test, space, net, scorer,
            test_X[~scorer.predict(test_X)].head(n).reset_index(drop=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--solvers", default="highs,cbc,gurobi")
    parser.add_argument("--no-dice", action="store_true")
    parser.add_argument("--out", default="core.json")
    args = parser.parse_args(argv)

    train, test, space, net, scorer, rejected = adult_queries(args.n)
    accuracy = float((scorer.predict(test.X) == test.y.to_numpy()).mean())
    print(f"Adult: {len(train.X)} train rows, test accuracy {accuracy:.3f}, "
          f"{len(rejected)} rejected test points")

    rows = []
    for solver in [s for s in args.solvers.split(",") if s]:
        try:
            cfopt.solvers.make_solver(solver)
        except cfopt.SolverNotAvailableError as exc:
            print(f"skip {solver}: {exc}")
            continue
        configs = [(t, True, q) for t in ("lp", "interval") for q in (True, False)]
        if solver == "highs":
            configs += [("lp", False, True), ("interval", False, True)]
        for tightening, reuse, per_query in configs:
            try:
                row = run_cfopt(net, space, rejected, scorer, solver=solver,
                                tightening=tightening, reuse=reuse, per_query=per_query)
            except cfopt.SolverLicenseError as exc:
                print(f"skip {solver}: {exc}")
                break
            rows.append(row)
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    if not args.no_dice:
        row = run_dice(train, rejected, scorer, space)
        rows.append(row)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    path = write(args.out, {
        **environment(),
        "setup": {"data": "CARLA adult_train / adult_test", "scaling": "minmax",
                  "model": f"torch MLP {space.n_inputs}-20-20-1, Adam lr 0.01, batch 32, 5 epochs",
                  "test_accuracy": accuracy, "queries": len(rejected), "target": 1,
                  "objective": "L1 weighted by 1/range (min-max units)",
                  "mip_gap": 1e-4, "threads": 1},
        "rows": rows,
    })
    print(f"wrote {path}")


def _inside(space: cfopt.FeatureSpace, X: pd.DataFrame) -> np.ndarray:
    ok = np.ones(len(X), dtype=bool)
    for f in space:
        if not f.is_onehot and not f.labelled:
            ok &= (X[f.name] >= f.lower).to_numpy() & (X[f.name] <= f.upper).to_numpy()
    return ok


if __name__ == "__main__":
    main()
