"""Faults injected into batches for real, and what survives them.

Each case runs a batch of German credit queries (a torch network) and injects one
fault: a loky or Dask worker process killed (SIGKILL), the CBC process killed
mid-solve, SIGINT sent to a process running a batch (serial and ``n_jobs=2``; HiGHS,
CBC, Gurobi), a row already in the target class, the process running a batch killed
and the batch resumed from its ``out`` file. Writes ``benchmarks/results/faults.json``:
a list ``cases`` with ``case``, ``backend``, ``rows``, ``finished`` (rows answered in
the result), ``lost_rows`` (rows answered before the fault and missing afterwards, or
rows left with no status), ``ok`` and details.

    CFOPT_DATA_HOME=../shared/data python benchmarks/faults.py [--out faults.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT.parent / "tests"))

import psutil  # noqa: E402
from common import environment, write  # noqa: E402

import cfopt  # noqa: E402
from tests.fault_child import ProcessKiller, german_batch, loky_workers  # noqa: E402

CHILD = str(ROOT.parent / "tests" / "fault_child.py")
FINAL = {"optimal", "feasible"}


def answered(path: Path) -> list[str]:
    """Labels of the complete answer lines of a batch file."""
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data[:data.rfind(b"\n") + 1].decode().splitlines()[1:]
    return [json.loads(line)["label"] for line in lines]


def wait_until(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def row(case: str, backend: str, rows: int, batch: Any, before: list[str], ok: bool,
        **details: Any) -> dict[str, Any]:
    """A case's record. ``before``: labels answered when the fault struck."""
    from cfopt.batch.journal import row_key

    if batch is None:  # the batch raised: everything it had is lost
        return {"case": case, "backend": backend, "rows": rows, "finished": 0,
                "lost_rows": len(before), "ok": False, **details}
    kept = {row_key(label) for label, a in zip(batch.index, batch)
            if a.status.value not in ("interrupted", "error")}
    lost = len(set(before) - kept) + (rows - len(batch))
    finished = sum(a.status.value != "interrupted" for a in batch)
    return {"case": case, "backend": backend, "rows": rows, "finished": finished,
            "lost_rows": lost, "ok": bool(ok and lost == 0), "counts": batch.counts(),
            **details}


def kill_loky_worker(model: str, tmp: Path) -> dict[str, Any]:
    explainer, X = german_batch(model, 24, "highs", 0.0)
    out = tmp / "loky_kill.jsonl"
    before: list[str] = []

    def killer() -> None:
        wait_until(lambda: len(answered(out)) >= 6, 300)
        before.extend(answered(out))
        workers = loky_workers()
        if workers:
            workers[0].kill()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        batch = explainer.explain_many(X, target=1, n_jobs=2, out=out, progress=False)
    thread.join(10)
    ok = all(a.found for a in batch) and bool(before)
    return row("one loky worker killed (SIGKILL) mid-batch, n_jobs=2", "loky", len(X),
               batch, before, ok, seconds=time.perf_counter() - t0,
               warnings=[str(w.message) for w in seen if "worker" in str(w.message)])


def kill_dask_worker(model: str, tmp: Path) -> dict[str, Any]:
    from distributed import Client, LocalCluster

    explainer, X = german_batch(model, 24, "highs", 0.0)
    out = tmp / "dask_kill.jsonl"
    before: list[str] = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        pids = list(client.run(os.getpid).values())

        def killer() -> None:
            wait_until(lambda: len(answered(out)) >= 6, 300)
            before.extend(answered(out))
            os.kill(pids[0], signal.SIGKILL)

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        t0 = time.perf_counter()
        batch = explainer.explain_many(X, target=1, backend="dask", client=client,
                                       out=out, progress=False)
        thread.join(10)
    ok = all(a.found for a in batch) and bool(before)
    return row("one Dask worker process killed (SIGKILL) mid-batch", "dask", len(X), batch,
               before, ok, seconds=time.perf_counter() - t0)


def kill_cbc(model: str, tmp: Path) -> dict[str, Any]:
    explainer, X = german_batch(model, 6, "cbc", 0.0)
    with ProcessKiller("cbc") as killer:
        batch = explainer.explain_many(X, target=1, progress=False)
    killed = killer.killed
    crashed = [a for a in batch if "cbc crashed" in a.message]
    others = [a for a in batch if all(a is not c for c in crashed)]
    ok = bool(killed) and len(crashed) == 1 and all(a.found for a in others)
    return row("the CBC process killed mid-solve, serial", "serial/cbc", len(X), batch, [],
               ok, crashed_row=crashed[0].status.value if crashed else None,
               crashed_message=crashed[0].message if crashed else None)


def sigint(model: str, tmp: Path, solver: str, n_jobs: int, time_limit: float,
           dask: bool = False) -> dict:
    out = tmp / f"sigint_{solver}_{n_jobs}_{dask}.jsonl"
    env = {**os.environ, "CFOPT_PROGRESS": "0"}
    proc = subprocess.Popen([sys.executable, CHILD, model, str(out), "--rows", "8",
                             "--solver", solver, "--n-jobs", str(n_jobs),
                             "--time-limit", str(time_limit), *(["--dask"] if dask else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    mode = "dask" if dask else "serial" if n_jobs == 1 else "loky"
    backend = f"{mode}/{solver}"
    case = f"Ctrl-C (SIGINT) during a {mode if n_jobs == 1 else 'n_jobs=2'} {solver} batch"
    try:
        wait_until(lambda: len(answered(out)) >= 1 or proc.poll() is not None, 300)
        time.sleep(0.3)
        before = answered(out)
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
        stop = time.perf_counter() - t0
    finally:
        proc.kill()
    try:
        result = json.loads(stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"case": case, "backend": backend, "rows": 8, "finished": 0,
                "lost_rows": len(before), "ok": False, "stderr": stderr[-500:]}
    statuses = result["statuses"]
    finished = [s for s in statuses if s != "interrupted"]
    kept = answered(out)
    lost = len(set(before) - set(kept))
    ok = (result["interrupted"] and set(finished) <= FINAL and len(kept) == len(finished)
          and stop < 30)
    return {"case": case, "backend": backend, "rows": len(statuses), "finished": len(finished),
            "lost_rows": lost, "ok": bool(ok and lost == 0), "interrupted": result["interrupted"],
            "stop_s": stop, "counts": result["counts"]}


def already_target(model: str, tmp: Path, n_jobs: int) -> dict[str, Any]:
    explainer, X = german_batch(model, 5, "highs", 0.0)
    data = cfopt.datasets.load_german()
    accepted = data.X[explainer.milp.predict(data.X) == 1].iloc[:1]
    import pandas as pd

    rows = pd.concat([X.iloc[:2], accepted, X.iloc[2:]])
    batch = explainer.explain_many(rows, target=1, n_jobs=n_jobs, progress=False)
    statuses = [a.status.value for a in batch]
    ok = statuses[2] == "already_target" and f"row {int(accepted.index[0])}:" in batch[2].message \
        and all(a.found for i, a in enumerate(batch) if i != 2)
    return row(f"a row already in the target class, errors='record', "
               f"{'serial' if n_jobs == 1 else 'n_jobs=2'}",
               "serial" if n_jobs == 1 else "loky", len(rows), batch, [], ok,
               message=batch[2].message)


def kill_parent_resume(model: str, tmp: Path, n_jobs: int) -> dict[str, Any]:
    out = tmp / f"resume_{n_jobs}.jsonl"
    env = {**os.environ, "CFOPT_PROGRESS": "0"}
    proc = subprocess.Popen([sys.executable, CHILD, model, str(out), "--rows", "12",
                             "--n-jobs", str(n_jobs)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        wait_until(lambda: len(answered(out)) >= 4 or proc.poll() is not None, 300)
        for p in psutil.Process(proc.pid).children(recursive=True):
            p.kill()  # its workers die with it, as on a lost machine
        proc.kill()
        proc.wait(30)
    finally:
        proc.kill()
    before = answered(out)
    explainer, X = german_batch(model, 12, "highs", 0.0)
    t0 = time.perf_counter()
    batch = explainer.explain_many(X, target=1, n_jobs=n_jobs, out=out, progress=False)
    ok = batch.resumed == len(before) and all(a.found for a in batch) and \
        len(answered(out)) == len(X)
    return row(f"the parent process killed (SIGKILL) after {len(before)} answers, "
               f"then resumed, {'serial' if n_jobs == 1 else 'n_jobs=2'}",
               "serial" if n_jobs == 1 else "loky", len(X), batch, before, ok,
               resumed=batch.resumed, resume_s=time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="faults.json")
    args = parser.parse_args()
    import torch

    from tests.conftest import german_space, train_torch

    torch.set_num_threads(1)
    data = cfopt.datasets.load_german()
    space = german_space(data)
    tmp = Path(tempfile.mkdtemp(prefix="cfopt_faults_"))
    models = {}
    for name, hidden in (("net", (10, 10)), ("slow", (32, 32))):
        net = train_torch(space.transform(data.X), data.y.to_numpy(), hidden=hidden)
        models[name] = str(tmp / f"{name}.pt")
        torch.save(net, models[name])
    cases: list[tuple[str, Any]] = [
        ("loky kill", lambda: kill_loky_worker(models["net"], tmp)),
        ("dask kill", lambda: kill_dask_worker(models["net"], tmp)),
        ("cbc kill", lambda: kill_cbc(models["net"], tmp)),
        ("sigint highs serial", lambda: sigint(models["slow"], tmp, "highs", 1, 5)),
        ("sigint highs parallel", lambda: sigint(models["slow"], tmp, "highs", 2, 5)),
        ("sigint cbc serial", lambda: sigint(models["slow"], tmp, "cbc", 1, 5)),
        ("sigint cbc parallel", lambda: sigint(models["slow"], tmp, "cbc", 2, 5)),
        ("sigint gurobi serial", lambda: sigint(models["slow"], tmp, "gurobi", 1, 5)),
        ("sigint highs dask", lambda: sigint(models["slow"], tmp, "highs", 1, 5, dask=True)),
        ("already target serial", lambda: already_target(models["net"], tmp, 1)),
        ("already target parallel", lambda: already_target(models["net"], tmp, 2)),
        ("resume serial", lambda: kill_parent_resume(models["net"], tmp, 1)),
        ("resume parallel", lambda: kill_parent_resume(models["net"], tmp, 2)),
    ]
    results = []
    for name, run in cases:
        t0 = time.perf_counter()
        try:
            record = run()
        except Exception:
            record = {"case": name, "backend": "?", "rows": 0, "finished": 0,
                      "lost_rows": None, "ok": False, "error": traceback.format_exc(limit=3)}
        record["wall_s"] = time.perf_counter() - t0
        print(f"{record['case']}: ok={record['ok']} finished={record['finished']}/"
              f"{record['rows']} lost={record['lost_rows']} ({record['wall_s']:.1f} s)",
              flush=True)
        results.append(record)
    shutil.rmtree(tmp, ignore_errors=True)
    write(args.out, {"environment": environment(), "cases": results,
                     "summary": {"cases": len(results),
                                 "ok": sum(bool(r["ok"]) for r in results),
                                 "lost_rows": sum(r["lost_rows"] or 0 for r in results)}})


if __name__ == "__main__":
    main()
