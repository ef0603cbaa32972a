"""Where PROPLACE's time goes: its master MILPs, solved alone on HiGHS and on Gurobi
(issue 21).

Runs :class:`cfopt.Proplace` on the first ``--n`` queries of a ``proplace_table1.py``
data set (its ``prepare``: the data, the network, δ, k; the retrained models are not
used, so they get one epoch), writes every master MILP exactly as HiGHS held it
(``Highs.writeModel`` after the solve: Pyomo's LP and MPS writers round coefficients),
then re-solves each file alone, one thread, on HiGHS with cfopt's settings (MIP
feasibility tolerance 1e-8, restarts off, relative gap 1e-4), again with the light
heuristics PROPLACE's masters run with (``highs_light``:
:meth:`~cfopt.solvers.HighsBackend.light_heuristics`, its sub-MIPs off) and, when its licence
allows, on Gurobi with cfopt's (integrality tolerance 1e-7, optimality tolerance 1e-9,
gap 1e-4). Per number of shifted copies in the master: solves, mean seconds and
branch-and-bound nodes per solver, and the largest difference of their optima. Also
the query loop's own split (``Proplace``'s certificate times: region, master,
adversary; the rest of each query's time is outside both). Writes
``benchmarks/results/proplace_masters.json``; timing only, nothing is asserted.

    python benchmarks/proplace_masters.py [--dataset heloc] [--n 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, write  # noqa: E402
from proplace_table1 import prepare  # noqa: E402

from cfopt.methods import Proplace  # noqa: E402
from cfopt.methods.proplace_master import ProplaceMaster  # noqa: E402
from cfopt.solvers import GurobiBackend, HighsBackend, SolverSettings  # noqa: E402

SETTINGS = SolverSettings(threads=1, mip_gap=1e-4, seed=0)


def record_masters(d: dict[str, Any], n: int, folder: Path) -> tuple[list, list]:
    """Run PROPLACE on ``n`` queries; every master HiGHS solved as an MPS file in
    ``folder``, with its number of shifted copies."""
    written: list[tuple[Path, int]] = []
    copies: list[int] = []
    solve_master, solve_here = ProplaceMaster.solve, HighsBackend._solve_here

    def master(self: ProplaceMaster, deadline: Any) -> Any:
        copies.append(len(self.adversary.models))
        try:
            return solve_master(self, deadline)
        finally:
            copies.pop()

    def here(self: HighsBackend, model: Any, settings: Any, updated: bool = False) -> Any:
        outcome = solve_here(self, model, settings, updated)
        if copies:
            path = folder / f"master_{len(written):04d}.mps"
            self._instance()._solver_model.writeModel(str(path))
            written.append((path, copies[-1]))
        return outcome

    ProplaceMaster.solve, HighsBackend._solve_here = master, here
    try:
        train_rows = d["X"].iloc[d["train"]].reset_index(drop=True)
        method = Proplace(d["net"], d["space"], train_rows, delta=d["delta"], k=d["k"],
                          time_limit=120.0)
        results = method.explain_many(d["queries"].iloc[:n], target=1)
    finally:
        ProplaceMaster.solve, HighsBackend._solve_here = solve_master, solve_here
    return written, results


def solve_highs(path: Path, light: bool = False) -> tuple[float, float, int]:
    import highspy

    highs = highspy.Highs()
    backend = HighsBackend()
    options = {**backend._solver_options(SETTINGS), "threads": 1,
               "mip_rel_gap": SETTINGS.mip_gap, **(backend.light_heuristics() if light else {})}
    for key, value in options.items():
        highs.setOptionValue(key, value)
    highs.readModel(str(path))
    t0 = time.perf_counter()
    highs.run()
    seconds = time.perf_counter() - t0
    info = highs.getInfo()
    return seconds, float(info.objective_function_value), int(info.mip_node_count)


def solve_gurobi(path: Path) -> tuple[float, float, int] | None:
    try:
        import gurobipy as gp
    except ImportError:
        return None
    try:
        env = gp.Env(params={"OutputFlag": 0, "Threads": 1})
        model = gp.read(str(path), env)
        for key, value in {**GurobiBackend()._solver_options(SETTINGS),
                           "MIPGap": SETTINGS.mip_gap}.items():
            model.setParam(key, value)
        t0 = time.perf_counter()
        model.optimize()
        seconds = time.perf_counter() - t0
        return seconds, float(model.ObjVal), int(model.NodeCount)
    except gp.GurobiError:  # the size-limited pip licence
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="heloc")
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--out", default="proplace_masters.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    d = prepare(args.dataset, args.n, retrain_epochs=1)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        written, results = record_masters(d, args.n, Path(tmp))
        loop_s = time.perf_counter() - t0
        by_copies: dict[int, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for path, copies in written:
            cell = by_copies[copies]
            for solver, solve in (("highs", solve_highs),
                                  ("highs_light", lambda p: solve_highs(p, light=True)),
                                  ("gurobi", solve_gurobi)):
                outcome = solve(path)
                if outcome is not None:
                    cell[f"{solver}_s"].append(outcome[0])
                    cell[f"{solver}_objective"].append(outcome[1])
                    cell[f"{solver}_nodes"].append(outcome[2])
    rows = []
    for copies in sorted(by_copies):
        cell = by_copies[copies]
        row: dict[str, Any] = {"copies": copies, "masters": len(cell["highs_s"])}
        for solver in ("highs", "highs_light", "gurobi"):
            if len(cell[f"{solver}_s"]) == row["masters"]:
                row[f"{solver}_mean_s"] = float(np.mean(cell[f"{solver}_s"]))
                row[f"{solver}_total_s"] = float(np.sum(cell[f"{solver}_s"]))
                row[f"{solver}_mean_nodes"] = float(np.mean(cell[f"{solver}_nodes"]))
        if "gurobi_mean_s" in row:
            row["max_objective_difference"] = float(np.max(np.abs(
                np.subtract(cell["highs_objective"], cell["gurobi_objective"]))))
        row["max_light_objective_difference"] = float(np.max(np.abs(
            np.subtract(cell["highs_objective"], cell["highs_light_objective"]))))
        rows.append(row)
        print(row, flush=True)
    times = {k: float(sum(r.certificate.times[k] for r in results))
             for k in ("region", "master", "adversary")}
    loop = {"queries": len(results), "loop_s": loop_s, **{f"{k}_s": v for k, v in times.items()},
            "outside_s": float(sum(r.total_time for r in results)) - sum(times.values()),
            "certified": sum(r.certified for r in results),
            "iterations": sum(r.certificate.iterations for r in results)}
    print(loop, flush=True)
    write(args.out, {"environment": environment(), "dataset": args.dataset,
                     "delta": d["delta"], "k": d["k"], "loop": loop, "rows": rows})


if __name__ == "__main__":
    main()
