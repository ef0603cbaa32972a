"""Batches: serial, joblib processes and a Dask cluster give the same answers; Ctrl-C
keeps the finished ones; bad options raise."""

from __future__ import annotations

import json
import os
import signal
import time

import pyomo.environ as pyo
import pytest

import cfopt
import cfopt.batch.runner
from cfopt.batch.runner import BatchResult

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BUDGET = cfopt.LinearConstraint({"credit_amount": 1}, "<=", 3000, relative=True,
                                name="budget")


@pytest.fixture(scope="module")
def batch(german, german_model):
    """An explainer with a declared constraint, six rejected rows, their serial answers."""
    net, space = german_model
    explainer = cfopt.Explainer(net, space, mip_gap=0.0, constraints=[BUDGET])
    pred = explainer.milp.predict(german.X)
    rows = [i for i in range(len(german.X)) if pred[i] == 0][:6]
    X = german.X.iloc[rows]
    serial = explainer.explain_many(X, target=1, progress=False)
    return explainer, X, serial


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  protocol="tcp", host="127.0.0.1",
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        client.wait_for_workers(2)
        yield client


def assert_same(answers, serial) -> None:
    assert len(answers) == len(serial)
    for a, s in zip(answers, serial):
        assert a.status is s.status is cfopt.Status.OPTIMAL and a.verified
        assert a.objective == pytest.approx(s.objective, rel=1e-6, abs=1e-9)
        assert a.changes().equals(s.changes())
        assert a.factual.equals(s.factual)


def test_serial_batch_result(batch):
    explainer, X, serial = batch
    assert isinstance(serial, BatchResult) and not serial.interrupted
    assert (serial.backend, serial.workers, serial.solver_threads) == ("serial", 1, 1)
    assert serial.counts() == {"optimal": len(X)} and len(serial.finished) == len(X)
    assert serial[0].build_time >= explainer.milp.build_time > 0  # built once, re-solved
    frame = serial.to_frame()
    assert list(frame["status"]) == ["optimal"] * len(X)
    assert json.loads(serial.to_json())["counts"] == {"optimal": len(X)}
    for ce in serial:  # the declared constraint holds
        assert ce.counterfactual["credit_amount"][0] <= ce.factual["credit_amount"][0] + 3000


def test_processes_equal_serial(batch):
    explainer, X, serial = batch
    answers = explainer.explain_many(X, target=1, n_jobs=2, progress=False)
    assert (answers.backend, answers.workers, answers.solver_threads) == ("loky", 2, 1)
    assert_same(answers, serial)
    assert not answers.interrupted


def test_dask_equals_serial(batch, dask_client):
    explainer, X, serial = batch
    answers = explainer.explain_many(X, target=1, backend="dask", client=dask_client,
                                     progress=False)
    assert (answers.backend, answers.workers) == ("dask", 2)
    assert_same(answers, serial)
    # the current client is found without client=
    again = explainer.explain_many(X.iloc[:2], target=1, backend="dask", progress=False)
    assert_same(again, serial[:2])


def test_ctrl_c_keeps_finished_results_serial(batch, monkeypatch):
    """A SIGINT during the third query: two answers kept, the rest interrupted, and the
    explainer still answers afterwards."""
    explainer, X, serial = batch
    explain = explainer.explain
    calls = []

    def interrupted_explain(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            signal.raise_signal(signal.SIGINT)
        return explain(*args, **kwargs)

    monkeypatch.setattr(explainer, "explain", interrupted_explain)
    with pytest.warns(RuntimeWarning, match="2 of 6 queries finished"):
        answers = explainer.explain_many(X, target=1, progress=False)
    monkeypatch.undo()
    assert answers.interrupted and len(answers) == len(X)
    assert [a.status for a in answers] == [cfopt.Status.OPTIMAL] * 2 + \
        [cfopt.Status.INTERRUPTED] * 4
    assert_same(answers.finished, serial[:2])
    assert answers[3].counterfactual is None and answers[3].factual.equals(serial[3].factual)
    assert answers.counts() == {"optimal": 2, "interrupted": 4}
    assert explainer.explain(X.iloc[[2]], target=1).objective == \
        pytest.approx(serial[2].objective, rel=1e-6)


def test_ctrl_c_keeps_finished_results_parallel(batch, dask_client, monkeypatch):
    """Ctrl-C while the parent collects the workers' answers (at the second answer)."""
    explainer, X, serial = batch
    class InterruptingProgress(cfopt.batch.runner.BatchProgress):
        def update(self, answers):
            super().update(answers)
            if self.found >= 2:
                raise KeyboardInterrupt

    monkeypatch.setattr(cfopt.batch.runner, "BatchProgress", InterruptingProgress)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        answers = explainer.explain_many(X, target=1, backend="dask", client=dask_client,
                                         progress=False)
    # the cancelled chunks may still run in this process's worker threads: let them end
    deadline = time.monotonic() + 60
    while any(dask_client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert answers.interrupted and len(answers) == len(X)
    done = [i for i, a in enumerate(answers) if a.status is not cfopt.Status.INTERRUPTED]
    assert len(done) == 2
    assert_same([answers[i] for i in done], [serial[i] for i in done])


def test_bad_batch_options(batch):
    explainer, X, _ = batch
    with pytest.raises(ValueError, match="unknown backend"):
        explainer.explain_many(X, backend="threads")
    with pytest.raises(ValueError, match="n_jobs"):
        explainer.explain_many(X, n_jobs=0)
    with pytest.raises(ValueError, match="solver_threads"):
        explainer.explain_many(X, n_jobs=2, solver_threads=0)
    with pytest.raises(TypeError, match="unknown option"):
        explainer.explain_many(X, n_jobs=2, timelimit=3)
    with pytest.raises(ValueError, match="client is for backend='dask'"):
        explainer.explain_many(X, n_jobs=2, client=object())
    with pytest.raises(TypeError, match="progress"):
        explainer.explain_many(X, progress="yes")
    solved = []  # every target error is raised before any row is solved
    real = explainer.explain
    explainer.explain = lambda *a, **k: solved.append(1) or real(*a, **k)
    try:
        for target, said in ((">50K", r"unknown target class '>50K'.*\[0, 1\]"),
                             ([], "target set is empty"), ([0, 1], "one target class")):
            with pytest.raises(ValueError, match=said):
                explainer.explain_many(X, target=target, progress=False)
    finally:
        del explainer.explain
    assert not solved


def test_answers_by_position_and_by_label(batch):
    _, X, serial = batch
    assert serial[-1] is serial.results[-1] and serial[1:3] == serial.results[1:3]
    label = X.index[2]
    assert serial.by_label(label) is serial[2]
    assert serial.by_label(label).factual.iloc[0].equals(X.loc[label])
    with pytest.raises(TypeError, match="by position.*by_label\\('row 7'\\)"):
        serial["row 7"]
    with pytest.raises(TypeError, match="by_label"):
        serial[True]
    with pytest.raises(KeyError, match="no rows labelled -5"):
        serial.by_label(-5)


def test_dask_without_a_client(batch, monkeypatch):
    distributed = pytest.importorskip("distributed")
    explainer, X, _ = batch

    def no_client():
        raise ValueError("No clients found")

    monkeypatch.setattr(distributed, "get_client", no_client)
    with pytest.raises(ValueError, match="needs a running dask.distributed Client"):
        explainer.explain_many(X, backend="dask")


def test_raw_pyomo_constraint_is_not_sent_to_workers(german, german_model):
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    m = explainer.milp
    m.keep_amount = pyo.Constraint(expr=m.x["credit_amount"] >= 0.9 * m.x0["credit_amount"])
    with pytest.raises(ValueError, match="keep_amount"):
        explainer.explain_many(german.X.iloc[:2], n_jobs=2)


def test_oversubscription_warns(batch):
    explainer, X, serial = batch
    with pytest.warns(RuntimeWarning, match="exceed the"):
        answers = explainer.explain_many(X.iloc[:2], target=1, n_jobs=2,
                                         solver_threads=os.cpu_count(), progress=False)
    assert_same(answers, serial[:2])
