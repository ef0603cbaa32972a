"""Growth curves and cfopt's overhead over the solver: ``python benchmarks/scaling.py``
→ ``results/scaling.json`` and ``figures/scaling_growth.png``, ``scaling_overhead.png``.

Three series, a few rejected inputs per point, each solve time-limited:

* ``mlp_width``: a torch MLP with two hidden layers of 10 … 500 neurons on CARLA Adult;
  configurations: bounds by interval propagation or by LP (OBBT), each with and without
  per-query tightening (``cfopt.query.restrictions.relu``);
* ``trees``: a random forest of 10 … 500 trees of depth 5 on German credit; per-query
  leaf pruning on and off (``cfopt.query.restrictions.trees``);
* ``points``: the MLP 20-20 on Adult inside a ``ConvexHull`` trust region of 1k … 50k
  points (Adult rows, resampled beyond its 48,832); per-query tightening on and off.

Every configuration runs on HiGHS and, within its size-limited licence, on Gurobi
(rows the licence refuses are recorded with the reason). Per row: ``total_s`` (cfopt's
end-to-end time per query, the one-off model build excluded: it is ``build_s``),
``solver_s`` (the solver's own reported time), ``overhead_ratio`` = median of (total −
solver) / solver, and for one HiGHS configuration per series ``mps_s``: the exact MILP
of each solve written to MPS and solved by highspy directly with the same options (the
physical limit), with ``mps_overhead_ratio`` = median of (total − mps) / mps. A
configuration whose queries all hit the time limit is not run at larger sizes, nor is
OBBT once its projected build time exceeds ``--obbt-budget``. ``fits`` holds the growth
exponent b of time per CE ∝ size^b (least squares on log-log, points whose queries were
all proven optimal).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import torch
from sklearn.ensemble import RandomForestClassifier

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import report_figures  # noqa: E402
from common import environment, inside_space, progress, write  # noqa: E402

import cfopt  # noqa: E402
from cfopt.solvers import SolveOutcome, SolverSettings  # noqa: E402
from cfopt.solvers.backends import HighsBackend  # noqa: E402

FIGURES = Path(__file__).resolve().parent / "figures"
SIZES = {"mlp_width": (10, 20, 50, 100, 200, 500), "trees": (10, 20, 50, 100, 200, 500),
         "points": (1000, 5000, 20000, 50000)}
LABELS = {"mlp_width": "neurons per hidden layer (2 layers)", "trees": "trees (depth 5)",
          "points": "trust-region points"}


class MpsProbe(HighsBackend):
    """HiGHS through cfopt as usual; after each solve the model as solved is written to
    MPS and solved by highspy directly with the same options. ``direct`` records, per
    solve: HiGHS's run time on the MPS, its objective, its status, and the probe's own
    wall time (subtracted from cfopt's total by :func:`measure`)."""

    def __init__(self) -> None:
        super().__init__()
        self.direct: list[tuple[float, float | None, str, float]] = []

    def _solve(self, model: pyo.Block, settings: SolverSettings) -> SolveOutcome:
        import highspy

        outcome = super()._solve(model, settings)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            path = str(Path(folder) / "model.mps")
            model.write(path, format="mps", io_options={"symbolic_solver_labels": False})
            h = highspy.Highs()
            h.setOptionValue("output_flag", False)
            h.readModel(path)
            options = {**self._solver_options(settings), **settings.options,
                       "mip_rel_gap": settings.mip_gap, "threads": settings.threads}
            if settings.time_limit is not None:
                options["time_limit"] = float(settings.time_limit)
            for key, value in options.items():
                if value is not None and key != "output_flag":
                    h.setOptionValue(key, value)
            h.run()
            status = h.modelStatusToString(h.getModelStatus())
            objective = h.getInfo().objective_function_value if h.getInfo().primal_solution_status \
                else None
            self.direct.append((h.getRunTime(), objective, status, time.perf_counter() - t0))
        return outcome


# ------------------------------------------------------------------ data and models
def adult(seed: int = 0) -> tuple[cfopt.FeatureSpace, pd.DataFrame, pd.DataFrame, pd.Series]:
    """Adult: the space, all in-bounds rows, the test rows and their labels' source."""
    data = cfopt.datasets.load_adult("all", download=False)
    space = cfopt.FeatureSpace.from_frame(data.X)
    test = cfopt.datasets.load_adult("test", download=False)
    return space, inside_space(space, data.X), inside_space(space, test.X), data.y


def train_mlp(space: cfopt.FeatureSpace, X: pd.DataFrame, y: pd.Series, width: int,
              rows: int = 8000, epochs: int = 5) -> torch.nn.Sequential:
    """A 2-hidden-layer ReLU MLP trained briefly (the solve's size is what matters)."""
    torch.manual_seed(0)
    Z = torch.tensor(space.transform(X.iloc[:rows]), dtype=torch.float32)
    target = torch.tensor(y.loc[X.index[:rows]].to_numpy(), dtype=torch.float32)
    net = torch.nn.Sequential(torch.nn.Linear(space.n_inputs, width), torch.nn.ReLU(),
                              torch.nn.Linear(width, width), torch.nn.ReLU(),
                              torch.nn.Linear(width, 1))
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    for _ in range(epochs):
        for idx in torch.randperm(len(Z)).split(128):
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(Z[idx])[:, 0],
                                                                        target[idx])
            loss.backward()
            opt.step()
    return net.eval()


def rejected(explainer: cfopt.Explainer, X: pd.DataFrame, n: int) -> pd.DataFrame:
    return X[explainer.milp.predict(X) == 0].iloc[:n]


def binaries(m: pyo.Block) -> int:
    return sum(1 for v in m.component_data_objects(pyo.Var, active=True)
               if v.is_binary() and not v.fixed)


# ------------------------------------------------------------------ measuring
def measure(explainer: cfopt.Explainer, X: pd.DataFrame, *, series: str, size: int,
            solver: str, config: str, per_query: bool, probe: bool) -> dict[str, Any]:
    """One row: ``len(X)`` queries on ``explainer`` (its model already built)."""
    base = explainer.backend
    backend = MpsProbe() if probe else cfopt.solvers.make_solver(solver)
    explainer.backend = backend
    explainer.tighten_per_query = per_query
    explainer.runner.exclude_build_time()  # the build is reported as build_s
    row: dict[str, Any] = {"series": series, "size": size, "size_label": LABELS[series],
                           "solver": solver, "config": config, "n": len(X),
                           "binaries": binaries(explainer.milp),
                           "build_s": explainer.milp.build_time}
    totals, solvers, ratios, statuses, mps, mps_ratios, match = [], [], [], [], [], [], []
    try:
        for i in progress(range(len(X)), f"{series} {size} {solver} {config}"):
            before = len(backend.direct) if probe else 0
            try:
                ce = explainer.explain(X.iloc[[i]], target=1)
            except cfopt.InfeasibleError:
                statuses.append("infeasible")
                continue
            direct = backend.direct[before:] if probe else []
            total = ce.total_time - sum(d[3] for d in direct)  # the probe's time excluded
            statuses.append(ce.status.value)
            totals.append(total)
            solvers.append(ce.solver_time)
            if ce.solver_time:
                ratios.append((total - ce.solver_time) / ce.solver_time)
            if probe:
                seconds = sum(d[0] for d in direct)
                mps.append(seconds)
                mps_ratios.append((total - seconds) / seconds if seconds else None)
                cf, mp = ce.details.get("solver_objective"), direct[-1][1] if direct else None
                match.append(cf is None or mp is None or
                             math.isclose(cf, mp, rel_tol=1e-4, abs_tol=1e-6))
    except cfopt.SolverLicenseError as exc:
        return {**row, "skipped": f"Gurobi licence: {str(exc)[:90]}"}
    finally:
        explainer.backend = base
    row.update({"optimal": statuses.count("optimal"), "statuses": statuses,
                "total_s": _median(totals), "solver_s": _median(solvers),
                "overhead_ratio": _median(ratios), "times_s": totals,
                "solver_times_s": solvers})
    if probe:
        row.update({"mps_s": _median(mps), "mps_overhead_ratio": _median(mps_ratios),
                    "mps_objective_match": all(match), "mps_times_s": mps})
    return row


def _median(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


@dataclasses.dataclass
class Config:
    """A configuration of a series: which explainer it needs, and how it runs."""

    solver: str
    name: str
    build: str          # key of the explainer it runs on (built once per size)
    per_query: bool
    probe: bool = False


def run_series(series: str, sizes: tuple[int, ...], configs: list[Config],
               make: Callable[[int, str], tuple[cfopt.Explainer, pd.DataFrame]],
               obbt_budget: float) -> list[dict[str, Any]]:
    """Every size × configuration of one series, stopping a configuration after a size
    whose queries all hit the time limit (and OBBT once its projected time is over
    budget)."""
    rows: list[dict[str, Any]] = []
    stopped: dict[str, str] = {}
    obbt_time: tuple[int, float] | None = None
    for size in sizes:
        built: dict[str, tuple[cfopt.Explainer, pd.DataFrame]] = {}
        for c in configs:
            key = f"{c.solver} {c.name}"
            base = {"series": series, "size": size, "size_label": LABELS[series],
                    "solver": c.solver, "config": c.name}
            if key in stopped:
                rows.append({**base, "skipped": stopped[key]})
                continue
            if c.build == "lp" and obbt_time is not None:
                projected = obbt_time[1] * (size / obbt_time[0]) ** 2
                if projected > obbt_budget:
                    stopped[key] = (f"OBBT projected at {projected:.0f} s (> {obbt_budget:.0f} s "
                                    f"budget; {obbt_time[1]:.0f} s at {obbt_time[0]})")
                    rows.append({**base, "skipped": stopped[key]})
                    continue
            if c.build not in built:
                built[c.build] = make(size, c.build)
                if c.build == "lp":
                    obbt_time = (size, built[c.build][0].milp.build_time)
            explainer, X = built[c.build]
            row = measure(explainer, X, series=series, size=size, solver=c.solver,
                          config=c.name, per_query=c.per_query, probe=c.probe)
            rows.append(row)
            print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()
                   if not k.endswith("times_s") and k != "statuses"}, flush=True)
            if row.get("skipped"):
                stopped[key] = row["skipped"]
            elif row["optimal"] == 0 and all(s in ("feasible", "no_solution")
                                             for s in row["statuses"]):
                stopped[key] = f"every query hit the time limit at size {size}"
    return rows


def mlp_series(args: argparse.Namespace) -> list[dict[str, Any]]:
    space, X, test, y = adult()
    nets: dict[int, torch.nn.Sequential] = {}

    def make(width: int, bounds: str) -> tuple[cfopt.Explainer, pd.DataFrame]:
        if width not in nets:
            nets[width] = train_mlp(space, X, y, width)
        explainer = cfopt.Explainer(nets[width], space, bound_tightening=bounds,
                                    time_limit=args.time_limit)
        return explainer, rejected(explainer, test, args.queries)

    configs = [Config("highs", "interval + per-query", "interval", True, probe=not args.no_mps),
               Config("highs", "interval", "interval", False),
               Config("highs", "OBBT + per-query", "lp", True),
               Config("highs", "OBBT", "lp", False),
               Config("gurobi", "interval + per-query", "interval", True)]
    return run_series("mlp_width", _sizes(args, "mlp_width"), configs, make, args.obbt_budget)


def tree_series(args: argparse.Namespace) -> list[dict[str, Any]]:
    data = cfopt.datasets.load_german()
    space = cfopt.FeatureSpace.from_frame(data.X)
    train, test = data.X.iloc[:700], data.X.iloc[700:]

    def make(n_trees: int, _: str) -> tuple[cfopt.Explainer, pd.DataFrame]:
        forest = RandomForestClassifier(n_estimators=n_trees, max_depth=5, random_state=0)
        forest.fit(space.transform(train), data.y.iloc[:700])
        explainer = cfopt.Explainer(forest, space, time_limit=args.time_limit)
        return explainer, rejected(explainer, test, args.queries)

    configs = [Config("highs", "leaf pruning", "forest", True, probe=not args.no_mps),
               Config("highs", "no pruning", "forest", False),
               Config("gurobi", "leaf pruning", "forest", True)]
    return run_series("trees", _sizes(args, "trees"), configs, make, args.obbt_budget)


def points_series(args: argparse.Namespace) -> list[dict[str, Any]]:
    space, X, test, y = adult()
    net = train_mlp(space, X, y, 20)

    def make(n: int, _: str) -> tuple[cfopt.Explainer, pd.DataFrame]:
        points = X.sample(n, replace=n > len(X), random_state=0)
        hull = cfopt.ConvexHull(points, labels=np.ones(n, dtype=int), max_points=n,
                                name="hull")
        explainer = cfopt.Explainer(net, space, constraints=[hull], time_limit=args.time_limit)
        return explainer, rejected(explainer, test, args.queries)

    configs = [Config("highs", "OBBT + per-query", "hull", True, probe=not args.no_mps),
               Config("highs", "OBBT", "hull", False),
               Config("gurobi", "OBBT + per-query", "hull", True)]
    return run_series("points", _sizes(args, "points"), configs, make, args.obbt_budget)


def _sizes(args: argparse.Namespace, series: str) -> tuple[int, ...]:
    return SIZES[series][:2] if args.quick else SIZES[series]


def fits(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Growth exponent per (series, solver, config) over the fully optimal points."""
    out = []
    for key in dict.fromkeys((r["series"], r["solver"], r["config"]) for r in rows):
        pts = [r for r in rows if (r["series"], r["solver"], r["config"]) == key
               and not r.get("skipped") and r["n"] and r["optimal"] == r["n"]]
        fit = {"series": key[0], "solver": key[1], "config": key[2],
               "sizes": [r["size"] for r in pts], "exponent": None, "exponent_solver": None}
        if len(pts) >= 3:
            x = np.log([r["size"] for r in pts])
            fit["exponent"] = float(np.polyfit(x, np.log([r["total_s"] for r in pts]), 1)[0])
            fit["exponent_solver"] = float(np.polyfit(x, np.log([r["solver_s"] for r in pts]),
                                                      1)[0])
        out.append(fit)
    return out


SERIES = {"mlp_width": mlp_series, "trees": tree_series, "points": points_series}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", default=",".join(SERIES))
    parser.add_argument("--queries", type=int, default=3, help="rejected inputs per point")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per solve")
    parser.add_argument("--obbt-budget", type=float, default=60.0,
                        help="skip OBBT when its projected build time exceeds this")
    parser.add_argument("--no-mps", action="store_true", help="skip the highspy-from-MPS solves")
    parser.add_argument("--quick", action="store_true", help="the two smallest sizes only")
    parser.add_argument("--output", default="scaling.json", help="file name in results/")
    parser.add_argument("--figures", type=Path, default=FIGURES, help="folder of the PNGs")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.series.split(",")) - set(SERIES))
    if unknown:
        parser.error(f"unknown series {unknown}; choose from {list(SERIES)}")
    t0 = time.perf_counter()
    load = os.getloadavg()
    rows = [r for name in args.series.split(",") for r in SERIES[name](args)]
    payload = {"benchmark": "Growth curves and overhead over the solver",
               "environment": environment(),
               "settings": {"queries": args.queries, "time_limit_s": args.time_limit,
                            "obbt_budget_s": args.obbt_budget, "mip_gap": 1e-4, "threads": 1,
                            "target": 1, "objective": "l1 (range weights)"},
               "wall_s": time.perf_counter() - t0, "loadavg_start": load,
               "loadavg_end": os.getloadavg(), "rows": rows, "fits": fits(rows)}
    print(write(args.output, payload))
    args.figures.mkdir(parents=True, exist_ok=True)
    for png in report_figures.draw("scaling", payload, args.figures):
        print(png)


if __name__ == "__main__":
    main()
