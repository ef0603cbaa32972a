"""Batches of counterfactual queries: serially, in parallel processes, or on a Dask cluster.

:meth:`Explainer.explain_many <cfopt.Explainer.explain_many>` runs here. Serially the
explainer's own model is re-solved per row. In parallel (``n_jobs != 1`` or a
``backend``), the rows are cut into chunks that joblib sends to its workers: processes
on this machine (``backend="loky"``, the default) or the workers of a Dask distributed
cluster (``backend="dask"``, through joblib's Dask backend). Each worker builds the
model once from :attr:`Explainer.build_arguments` and the declared constraints, keeps it
for the following chunks, and re-solves it per row, so the answers equal the serial ones.

Cores: every worker runs one solver with ``solver_threads`` threads (default 1), so
``n_jobs × solver_threads`` should not exceed the cores (a warning says so when it
does on this machine); BLAS/OpenMP threads inside process workers are capped at 1. On
Dask, each worker thread runs one query at a time: start the workers with
``nthreads × solver_threads ≤ cores`` of their machine (e.g. ``LocalCluster(
n_workers=cores, threads_per_worker=1)``).

Threads: Pyomo's solver interfaces redirect the process's output streams while they
solve, so two solves must not run in threads of one process. Workers of one process
(Dask workers with several threads, or ``LocalCluster(processes=False)``) therefore
take turns (a per-process lock): use worker processes with one thread each to run
queries side by side.

Faults. Ctrl-C (``KeyboardInterrupt``, on every backend and solver: a solver that
catches it, as HiGHS and Gurobi do, reports it and cfopt raises it again) stops the
batch and returns a :class:`BatchResult` with the finished answers and the others
marked ``Status.INTERRUPTED``, with a warning. A row's own failure (a bad value, a
crashed solver process, a time limit) is that row's status. A dead worker process is
replaced and its unanswered rows are sent again (:func:`_parallel`). With ``out=``
every answer is appended to a JSON Lines file as it arrives and a re-run resumes
from it (:mod:`cfopt.batch.journal`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import cloudpickle
import pandas as pd

from ..constraints.raw import raw_components
from ..errors import AlreadyTargetError, InfeasibleError
from ..formulations.validity import check_target
from ..progress import BatchProgress
from ..query.diverse import check_set_request
from ..query.runner import QUERY_OPTIONS
from ..results.counterfactual import Counterfactual, CounterfactualSet
from ..results.serialize import json_value
from ..results.status import Status
from ..space.validate import as_frame
from .journal import BatchJournal, batch_header
from .result import BatchAnswer, BatchResult

if TYPE_CHECKING:
    from ..explainer import Explainer

BACKENDS = ("loky", "dask")
#: rows per chunk at most (a finer chunk reports progress and interrupts sooner)
_MAX_CHUNK = 16
#: worker deaths after which a parallel batch gives up on the rows still unanswered
MAX_WORKER_DEATHS = 3

#: in a worker process: the last payload's digest and the explainer built from it
_WORKER_EXPLAINER: list[tuple[str, Explainer]] = []
#: one query at a time per process (Pyomo's solver output capture is process-wide)
_PROCESS_LOCK = threading.Lock()


def explain_batch(explainer: Explainer, X: pd.DataFrame, target: Any = None, *,
                  n: int | None = None, diversity: str | None = None,
                  errors: Literal["raise", "record"] = "record", n_jobs: int | None = None,
                  backend: str | None = None, solver_threads: int | None = None,
                  client: Any = None, progress: bool | None = None,
                  out: str | os.PathLike | None = None, **options: Any) -> BatchResult:
    """Explain every row of ``X`` (see :meth:`cfopt.Explainer.explain_many`)."""
    if errors not in ("raise", "record"):
        raise ValueError(f"errors must be 'raise' or 'record', got {errors!r}")
    if n is not None or diversity is not None:  # a diverse set per row, checked here
        if explainer.runner.cpsat:
            raise ValueError("diverse sets (n=, diversity=) are not supported with "
                             "solver='cpsat'; use solver='highs'")
        n, diversity = 5 if n is None else n, diversity or "nogood"
        check_set_request(n, diversity, options)
        options = {**options, "n": n, "diversity": diversity}
    else:
        unknown = sorted(set(options) - set(QUERY_OPTIONS))
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for explain_many(); accepted: "
                            f"{list(QUERY_OPTIONS)} (and n, diversity with their set "
                            f"options)")
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use None (serial, or 'loky' when "
                         f"n_jobs > 1), 'loky' (processes) or 'dask' (a Dask cluster)")
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or
                               n_jobs == 0 or n_jobs < -1):
        raise ValueError(f"n_jobs must be a positive integer, -1 (every core / every Dask "
                         f"worker thread) or None, got {n_jobs!r}")
    if solver_threads is not None and (isinstance(solver_threads, bool) or
                                       not isinstance(solver_threads, int) or solver_threads < 1):
        raise ValueError(f"solver_threads must be a positive integer or None, "
                         f"got {solver_threads!r}")
    if client is not None and backend != "dask":
        raise ValueError("client is for backend='dask' only")
    if out is not None and not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"out must be a file path (str or os.PathLike), got {out!r}")
    explainer.runner.narrowing({k: v for k, v in options.items() if k in QUERY_OPTIONS})
    frame = as_frame(X)
    explainer.space.validate(frame.iloc[:0])  # the columns; a bad value is its row's status
    check_target(explainer.milp.adapter, target)  # a row already in it is its row's status
    t0 = time.perf_counter()
    results: list[BatchAnswer | None] = [None] * len(frame)
    journal = None
    if out is not None:
        journal = BatchJournal(out, batch_header(explainer, target, options))
        for i, answer in journal.resumed(explainer, frame).items():
            results[i] = answer
    resumed = sum(r is not None for r in results)
    serial = backend is None and n_jobs in (None, 1)
    name = "serial" if serial else backend or "loky"
    bar = BatchProgress(len(frame), "counterfactuals" if serial else
                        f"counterfactuals ({name})", progress, resumed=resumed)

    def record(answers: dict[int, BatchAnswer]) -> None:
        for i, answer in answers.items():
            results[i] = answer
        if journal is not None:
            journal.append(frame, answers)
        bar.update(answers.values())

    try:
        if serial:
            interrupted = _serial(explainer, frame, results, target, errors, solver_threads,
                                  options, record)
            workers, threads = 1, solver_threads or explainer.settings.threads
        else:
            interrupted, workers = _parallel(
                explainer, frame, results, target, errors, -1 if n_jobs is None else n_jobs,
                name, solver_threads or 1, client, options, record)
            threads = solver_threads or 1
    finally:
        bar.close()
    batch = BatchResult(_fill(explainer, frame, results, options), interrupted, name,
                        workers, threads, index=frame.index, resumed=resumed,
                        out=str(out) if out is not None else None)
    batch.total_time = time.perf_counter() - t0
    if batch.interrupted:
        warnings.warn(f"explain_many interrupted: {len(batch.finished)} of {len(batch)} "
                      f"queries finished; the others have status 'interrupted'"
                      + (f" (run it again with out={str(out)!r} to go on)" if out else ""),
                      RuntimeWarning, stacklevel=3)
    return batch


def _serial(explainer: Explainer, frame: pd.DataFrame, results: list[BatchAnswer | None],
            target: Any, errors: str, solver_threads: int | None,
            options: Mapping[str, Any], record: Callable[[dict], None]) -> bool:
    """Answer the rows without an answer in this process; True when interrupted."""
    settings = explainer.settings
    if solver_threads is not None:
        explainer.settings = dataclasses.replace(settings, threads=solver_threads)
    try:
        for i in [i for i, r in enumerate(results) if r is None]:
            record({i: _answer(explainer, frame.iloc[[i]], target, errors, options)})
    except KeyboardInterrupt:
        explainer.backend.reset()  # a solve cut short may leave the solver mid-update
        return True
    finally:
        explainer.settings = settings
    return False


def _parallel(explainer: Explainer, frame: pd.DataFrame, results: list[BatchAnswer | None],
              target: Any, errors: str, n_jobs: int, backend: str, solver_threads: int,
              client: Any, options: Mapping[str, Any], record: Callable[[dict], None]
              ) -> tuple[bool, int]:
    """Answer the rows without an answer on joblib workers: ``(interrupted, workers)``.

    A worker that dies (killed, out of memory, a crash in native code) takes down the
    joblib call; the answers already received are kept and the unanswered rows are
    sent again, one row per task, so that a row which kills its worker takes only
    itself down next time. After :data:`MAX_WORKER_DEATHS` deaths the rows still
    unanswered get the status ``ERROR`` saying so (resuming from ``out`` retries them).
    """
    from joblib import Parallel, delayed

    payload = _payload(explainer, solver_threads)
    digest = hashlib.sha256(payload).hexdigest()
    if backend == "dask":
        client = _dask_client(client)
        capacity = sum(client.nthreads().values())
    else:
        capacity = os.cpu_count() or 1
    workers = max(1, capacity if n_jobs == -1 else n_jobs)  # a cluster may have none yet
    if backend == "loky" and workers * solver_threads > capacity:
        warnings.warn(f"{workers} workers x {solver_threads} solver threads exceed the "
                      f"{capacity} cores: the solves will slow each other down",
                      RuntimeWarning, stacklevel=4)
    todo = [i for i, r in enumerate(results) if r is None]
    size = max(1, min(_MAX_CHUNK, math.ceil(len(todo) / (4 * workers))))
    chunks = [todo[k:k + size] for k in range(0, len(todo), size)]
    deaths = 0
    while chunks:
        try:
            with _joblib_config(backend, client, payload):
                answers = Parallel(n_jobs=n_jobs, batch_size=1,
                                   return_as="generator_unordered")(
                    delayed(_work)(digest, payload, frame.iloc[rows], rows, target, errors,
                                   dict(options)) for rows in chunks)
                try:
                    for part in answers:
                        record(dict(part))
                finally:
                    with warnings.catch_warnings():  # joblib's note on the cancelled chunks
                        warnings.filterwarnings("ignore", "[0-9]+ tasks which were still",
                                                UserWarning)
                        answers.close()  # an interrupt cancels the chunks not yet finished
            return False, workers
        except KeyboardInterrupt:
            return True, workers
        except _worker_lost_errors() as exc:
            deaths += 1
            left = [i for i, r in enumerate(results) if r is None]
            if deaths < MAX_WORKER_DEATHS:
                warnings.warn(f"a {backend} worker died ({type(exc).__name__}); the "
                              f"{len(left)} unanswered rows are sent again",
                              RuntimeWarning, stacklevel=4)
                chunks = [[i] for i in left]
                continue
            record({i: _empty(explainer, frame.iloc[[i]], Status.ERROR,
                              f"row {json_value(frame.index[i])!r}: not answered: {backend} "
                              f"workers died {deaths} times while it was queued or solving "
                              f"({type(exc).__name__}: {exc})", (), None, options)
                    for i in left})
            return False, workers
    return False, workers


def _answer(explainer: Explainer, row: pd.DataFrame, target: Any, errors: str,
            options: Mapping[str, Any]) -> BatchAnswer:
    """One query. A row already in the target gets the status ``ALREADY_TARGET``. Any
    other failure of the row (infeasible, a bad value, a solver failure) raises with
    ``errors="raise"``, naming the row's index label; with ``errors="record"`` it
    becomes the row's status (``INFEASIBLE`` with the diagnosis, else ``ERROR``) and
    message."""
    label = json_value(row.index[0])  # as the user wrote it, not np.int64(7)
    try:
        return explainer.explain(row, target, **options)
    except AlreadyTargetError as exc:
        return _empty(explainer, row, Status.ALREADY_TARGET, f"row {label!r}: {exc}",
                      explainer.milp.target, explainer.milp.factual_class, options)
    except Exception as exc:  # the row's own failure: its status, or raised by label
        if errors == "raise":
            exc.add_note(f"in explain_many, row {label!r} of X")
            raise
        status = Status.INFEASIBLE if isinstance(exc, InfeasibleError) else Status.ERROR
        return _empty(explainer, row, status, f"row {label!r}: {type(exc).__name__}: {exc}",
                      (), None, options)


def _empty(explainer: Explainer, row: pd.DataFrame, status: Status, message: str,
           target: tuple, factual_class: Any, options: Mapping[str, Any]) -> BatchAnswer:
    """An answer without a counterfactual: a set without members when the batch asks
    for sets (``n`` in ``options``)."""
    factual = explainer.space.validate_or_keep(row).reset_index(drop=True)
    if "n" in options:
        return CounterfactualSet(factual=factual, target=target, members=[],
                                 method=options["diversity"], requested=options["n"],
                                 status=status, stopped=message)
    return Counterfactual(
        factual=factual, counterfactual=None, target=target, factual_class=factual_class,
        predicted_class=None, status=status, verified=False,
        objective=None, bound=None, solver=explainer.backend.name, margin=explainer.margin,
        message=message)


def _joblib_config(backend: str, client: Any, payload: bytes) -> Any:
    """joblib's backend for one round of a parallel batch."""
    from joblib import parallel_config

    if backend == "dask":
        return parallel_config("dask", client=client, scatter=[payload])
    return parallel_config("loky", inner_max_num_threads=1)


def _worker_lost_errors() -> tuple[type[BaseException], ...]:
    """The exceptions by which joblib reports a worker process that died (on Dask
    also the cancelled tasks whose scattered arguments were lost with it)."""
    from concurrent.futures.process import BrokenProcessPool

    from joblib.externals.loky.process_executor import TerminatedWorkerError

    errors: list[type[BaseException]] = [BrokenProcessPool, TerminatedWorkerError]
    try:  # a task that killed its workers; a task whose scattered input died with one
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        errors += [KilledWorker, FutureCancelledError]
    except ImportError:
        pass
    return tuple(errors)


def _fill(explainer: Explainer, frame: pd.DataFrame, results: list[BatchAnswer | None],
          options: Mapping[str, Any]) -> list[BatchAnswer]:
    """The answers, with an ``INTERRUPTED`` placeholder for every missing one."""
    return [r if r is not None else _empty(
        explainer, frame.iloc[[i]], Status.INTERRUPTED,
        "the batch was interrupted before this query finished", (), None, options)
        for i, r in enumerate(results)]


def _payload(explainer: Explainer, solver_threads: int) -> bytes:
    """What a worker needs to build the same explainer, pickled once (cloudpickle)."""
    m = explainer.milp
    raw = raw_components(m)
    if raw:
        raise ValueError(f"{', '.join(raw)} were added to explainer.milp directly; "
                         f"parallel workers rebuild the model from the explainer's arguments "
                         f"and declared constraint blocks only. Declare them as blocks "
                         f"(constraints=[cfopt.CustomConstraint(rule, cost=...)] or a "
                         f"cfopt.ConstraintBlock) or use n_jobs=1")
    solver = copy.copy(explainer.backend)
    solver.reset()  # a copy without the loaded model (persistent solvers do not pickle)
    spec = {"explainer_type": type(explainer), "arguments": explainer.build_arguments,
            "constraints": list(m.constraints.values()), "solver": solver,
            "settings": dataclasses.replace(explainer.settings, threads=solver_threads),
            "attributes": {"verify_retries": explainer.verify_retries,
                           "tighten_per_query": explainer.tighten_per_query}}
    return cloudpickle.dumps(spec)


def _worker_explainer(digest: str, payload: bytes) -> Explainer:
    """This worker process's explainer for ``payload``, built on first use."""
    import pickle

    if _WORKER_EXPLAINER and _WORKER_EXPLAINER[0][0] == digest:
        return _WORKER_EXPLAINER[0][1]
    spec = pickle.loads(payload)
    explainer = spec["explainer_type"](**spec["arguments"], solver=spec["solver"],
                                       constraints=spec["constraints"])
    explainer.settings = spec["settings"]
    for name, value in spec["attributes"].items():
        setattr(explainer, name, value)
    _WORKER_EXPLAINER[:] = [(digest, explainer)]
    return explainer


def _work(digest: str, payload: bytes, rows: pd.DataFrame, indices: list[int], target: Any,
          errors: str, options: dict[str, Any]) -> list[tuple[int, BatchAnswer]]:
    """A chunk of queries on a worker: ``(row index, answer)`` pairs."""
    with _PROCESS_LOCK:
        explainer = _worker_explainer(digest, payload)
        return [(i, _answer(explainer, rows.iloc[[k]], target, errors, options))
                for k, i in enumerate(indices)]


def _dask_client(client: Any) -> Any:
    """The given Dask client, else the current one."""
    try:
        from distributed import get_client
    except ImportError as exc:
        raise ImportError("backend='dask' needs dask.distributed: pip install "
                          "'cfopt[dask]' (or dask distributed)") from exc
    if client is not None:
        return client
    try:
        return get_client()
    except ValueError as exc:
        raise ValueError("backend='dask' needs a running dask.distributed Client: start one "
                         "(Client(LocalCluster(...)) or Client('tcp://scheduler:8786')) or "
                         "pass client=...") from exc
