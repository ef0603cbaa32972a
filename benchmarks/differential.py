"""Differential testing of cfopt's optimality and infeasibility claims, the full run.

Builds ``--instances`` random seeded instances (``tests/differential_instances.py``: 14
model families, mixed feature spaces, multiclass target sets, factuals on split
thresholds and decision boundaries, badly scaled features, rules and objective terms of
one's own), explains each with HiGHS, CBC, Gurobi and CP-SAT (those installed; CP-SAT on
tree ensembles without rules of one's own), checks every answer against the independent
references of ``tests/differential.py`` and the solvers against each other, and writes
``benchmarks/results/differential.json``: ``summary`` (counters, statuses per family and
solver, instances per case), ``failures`` (each with the line that reproduces it),
``findings`` (every disagreement seen while the harness was built, with its fix:
``benchmarks/differential_findings.py``), and ``harness_errors`` (instances the harness
itself could not build or check). ``--robust`` more instances put the robust methods
(PROPLACE with its levers on and off, MILP-R, RNCE, K, CK, C, Δ+K) under their exact
oracles (``tests/differential_robust.py``); their counters and failures are ``robust``.

    python benchmarks/differential.py [--instances 3000] [--robust 1000] [--seed 0]
        [--jobs 2] [--solvers highs,cbc,gurobi] [--out differential.json] [--note "..."]
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))  # the tests package holds the harness

from common import environment, progress, write  # noqa: E402
from differential_findings import FINDINGS  # noqa: E402
from joblib import Parallel, delayed  # noqa: E402

from tests.differential import (  # noqa: E402
    COUNTERS,
    SOLVERS,
    available_solvers,
    make_instance,
    run_instance,
    summarize,
)
from tests.differential_robust import COUNTERS as ROBUST_COUNTERS  # noqa: E402
from tests.differential_robust import (  # noqa: E402
    make_robust_instance,
    run_robust_instance,
    summarize_robust,
)

BATCH = 10  # instances per parallel task


def _run(seeds: list[int], solvers: list[str]) -> list[dict[str, Any]]:
    """Records of a batch of seeds; an instance the harness fails on becomes an error
    record (``harness_error``) instead of stopping the run."""
    import torch

    torch.set_num_threads(1)
    out = []
    for seed in seeds:
        try:
            out.append(run_instance(make_instance(seed), solvers))
        except Exception:  # the referee's own failure: reported, never hidden
            out.append({"seed": seed, "harness_error": traceback.format_exc(limit=4)})
    return out


def _run_robust(seeds: list[int], solvers: list[str]) -> list[dict[str, Any]]:
    """Records of a batch of robust seeds (harness errors recorded as in :func:`_run`)."""
    import torch

    torch.set_num_threads(1)
    out = []
    for seed in seeds:
        try:
            out.append(run_robust_instance(make_robust_instance(seed, solvers=tuple(solvers))))
        except Exception:
            out.append({"seed": seed, "robust": True,
                        "harness_error": traceback.format_exc(limit=4)})
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=3000)
    parser.add_argument("--robust", type=int, default=1000,
                        help="instances of the robust methods (seeds from --seed too)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--jobs", type=int, default=2, help="parallel processes")
    parser.add_argument("--solvers", default=",".join(SOLVERS))
    parser.add_argument("--out", default="differential.json")
    parser.add_argument("--note", default="", help="recorded in config (e.g. the commit)")
    args = parser.parse_args(argv)
    solvers = available_solvers(tuple(args.solvers.split(",")))
    seeds = list(range(args.seed, args.seed + args.instances))
    batches = [seeds[i:i + BATCH] for i in range(0, len(seeds), BATCH)]
    t0 = time.perf_counter()
    records: list[dict[str, Any]] = []
    robust_seeds = list(range(args.seed, args.seed + args.robust))
    robust_batches = [robust_seeds[i:i + BATCH] for i in range(0, len(robust_seeds), BATCH)]
    robust_solvers = [s for s in solvers if s in ("highs", "cbc", "gurobi")]
    robust: list[dict[str, Any]] = []
    with Parallel(n_jobs=args.jobs, return_as="generator") as parallel:
        tasks = parallel(delayed(_run)(b, solvers) for b in batches)
        for batch in progress(tasks, "differential", total=len(batches)):
            records.extend(batch)
        tasks = parallel(delayed(_run_robust)(b, robust_solvers) for b in robust_batches)
        for batch in progress(tasks, "robust", total=len(robust_batches)):
            robust.extend(batch)
    errors = [r for r in records + robust if "harness_error" in r]
    summary = summarize([r for r in records if "harness_error" not in r])
    failures = summary.pop("failures")
    robust_summary = summarize_robust([r for r in robust if "harness_error" not in r])
    seconds = time.perf_counter() - t0
    payload = {
        "environment": environment(),
        "config": {"instances": args.instances, "robust_instances": args.robust,
                   "first_seed": args.seed, "jobs": args.jobs, "solvers": solvers,
                   "seconds": round(seconds, 1), "note": args.note},
        "summary": summary,
        "failures": failures,
        "robust": robust_summary,
        "findings": FINDINGS,
        "harness_errors": errors,
    }
    path = write(args.out, payload)
    print(f"{summary['instances']} instances in {seconds:.0f} s; "
          + ", ".join(f"{c} {summary[c]}" for c in COUNTERS)
          + f"; robust: {robust_summary['instances']} instances, "
          + ", ".join(f"{c} {robust_summary[c]}" for c in ROBUST_COUNTERS)
          + f"; harness errors {len(errors)} -> {path}")
    return payload


if __name__ == "__main__":
    main()
