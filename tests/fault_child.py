"""A batch run in a child process, for the fault tests (tests/test_faults.py) and the
fault report (benchmarks/faults.py): the parent kills it or sends it SIGINT.

    python tests/fault_child.py MODEL.pt OUT.jsonl --rows 8 [--solver highs]
        [--n-jobs 1 | --dask] [--time-limit 5] [--mip-gap 0]

Explains the first ``--rows`` rejected rows of German credit with the torch network
saved in ``MODEL.pt`` (``torch.save``), appending answers to ``OUT.jsonl``, and prints
``{"interrupted", "counts", "resumed", "statuses"}`` as JSON when the batch returns.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cfopt  # noqa: E402


def german_batch(model_path: str, rows: int, solver: str, mip_gap: float
                 ) -> tuple[cfopt.Explainer, object]:
    """The explainer and the rows of the batch (the same in parent and child)."""
    import torch

    from tests.conftest import german_space

    torch.set_num_threads(1)
    data = cfopt.datasets.load_german()
    net = torch.load(model_path, weights_only=False)
    explainer = cfopt.Explainer(net, german_space(data), solver=solver, mip_gap=mip_gap)
    rejected = explainer.milp.predict(data.X) == 0
    return explainer, data.X[rejected].iloc[:rows]


class ProcessKiller:
    """Kills (SIGKILL) the first child process of this process whose name starts with
    ``name`` (e.g. ``"cbc"``), from a thread, while the ``with`` block runs;
    ``killed`` holds its pid."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.killed: list[int] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        import psutil

        while not self._done.is_set() and not self.killed:
            for p in psutil.Process().children(recursive=True):
                try:
                    if p.name().startswith(self.name):
                        p.kill()
                        self.killed.append(p.pid)
                        return
                except psutil.Error:
                    continue
            time.sleep(0.005)

    def __enter__(self) -> ProcessKiller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(5)


def loky_workers() -> list:
    """This process's loky worker processes (psutil), not its resource tracker."""
    import psutil

    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if "loky" in cmd and "resource_tracker" not in cmd:
            out.append(p)
    return out


def main() -> None:
    # as in a terminal: a process started in the background by a non-interactive shell
    # inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--solver", default="highs")
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--dask", action="store_true", help="on a local Dask cluster")
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument("--mip-gap", type=float, default=0.0)
    args = parser.parse_args()
    explainer, X = german_batch(args.model, args.rows, args.solver, args.mip_gap)
    options = {} if args.time_limit is None else {"time_limit": args.time_limit}
    print("started", flush=True)
    if args.dask:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            batch = explainer.explain_many(X, target=1, backend="dask", client=client,
                                           out=args.out, progress=False, **options)
    else:
        batch = explainer.explain_many(X, target=1, n_jobs=args.n_jobs, out=args.out,
                                       progress=False, **options)
    print(json.dumps({"interrupted": batch.interrupted, "counts": batch.counts(),
                      "resumed": batch.resumed,
                      "statuses": [a.status.value for a in batch]}), flush=True)


if __name__ == "__main__":
    main()
