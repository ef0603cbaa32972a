"""HiGHS in a child process (:mod:`cfopt.solvers.isolated`), fast: the parent's reading of
scripted messages (incumbents, bounds of either sense, the answer, an error, the end of
the pipe, the deadline), the child's stream, wait statuses in words, and a few real
children of a tiny model: an answer, one killed at its deadline, one that raises, one
that dies, no fork to be had, Ctrl-C. ``tests/test_highs_isolation.py`` has the slow
end-to-end checks."""

from __future__ import annotations

import os
import signal
import threading
import time
from multiprocessing import Pipe
from types import SimpleNamespace

import highspy
import numpy as np
import pytest

from cfopt.solvers import isolated as iso
from cfopt.solvers.isolated import (
    ChildRun,
    ForkError,
    _collect,
    _describe,
    _Stream,
    isolation_available,
    run_on_thread,
    solve_in_child,
)

pytestmark = pytest.mark.skipif(not isolation_available(), reason="Linux only")


def collect(messages, minimize=True, close=True, wait=5.0):
    reader, writer = Pipe(duplex=False)
    for message in messages:
        writer.send(message)
    if close:
        writer.close()
    result = ChildRun()
    answered = _collect(reader, result, time.perf_counter() + wait, minimize)
    reader.close()
    return answered, result


def test_incumbents_and_the_best_bound_of_either_sense():
    x1, x2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    messages = [("bound", -np.inf), ("solution", 9.0, 1.0, x1), ("bound", 3.0),
                ("bound", 2.0), ("solution", 7.0, np.inf, x2)]
    answered, r = collect(messages)
    assert answered and r.status is None and r.crashed is None
    assert r.objective == 7.0 and np.array_equal(r.x, x2)
    assert [obj for obj, _ in r.solutions] == [9.0, 7.0]
    assert r.bound == 3.0  # minimisation: the greatest bound
    _, r = collect(messages, minimize=False)
    assert r.bound == 1.0  # maximisation: the least
    _, r = collect([("bound", 4.0)])
    assert r.bound == 4.0 and r.objective is None and r.solutions == []


def test_the_answer_ends_the_reading():
    x = np.array([2.0])
    answered, r = collect([("bound", 1.0), ("done", "kOptimal", 2.0, 1.5, 4, 0.5, x),
                           ("bound", 9.0)], close=False)
    assert answered
    assert (r.status, r.objective, r.bound, r.node_count, r.run_time) == \
        ("kOptimal", 2.0, 1.5, 4, 0.5)
    assert np.array_equal(r.x, x)
    _, r = collect([("solution", 3.0, 1.0, x), ("done", "kTimeLimit", None, -np.inf, 7, 0.5,
                                                  None)])
    assert (r.status, r.objective, r.x, r.bound) == ("kTimeLimit", None, None, None)
    assert type(collect([("done", "kOptimal", 2.0, 1, 0, 0.1, x)])[1].bound) is float


def test_an_error_then_the_end_of_the_pipe():
    trace = "Traceback (most recent call last):\n  File x\nRuntimeError: injected\n\n"
    answered, r = collect([("error", trace)])
    assert answered and r.crashed == "it raised: RuntimeError: injected"


def test_the_deadline_ends_the_reading():
    t0 = time.perf_counter()
    answered, r = collect([("bound", 1.0)], close=False, wait=0.3)
    assert not answered and r.bound == 1.0
    assert 0.3 <= time.perf_counter() - t0 < 0.3 + 2 * iso.POLL + 0.5
    assert collect([], close=False, wait=-1.0)[0] is False


def test_the_child_streams_incumbents_and_bounds_now_and_then(monkeypatch):
    sent = []
    stream = _Stream(SimpleNamespace(send=sent.append))
    out = SimpleNamespace(objective_function_value=5, mip_dual_bound=2,
                          mip_solution=[1, 0, 1])
    stream.solution(SimpleNamespace(data_out=out))
    kind, objective, bound, x = sent[0]
    assert (kind, objective, bound, x.tolist()) == ("solution", 5.0, 2.0, [1.0, 0.0, 1.0])
    assert type(objective) is float and type(bound) is float and x.dtype == float
    now = SimpleNamespace(t=1.0)
    monkeypatch.setattr(iso, "time", SimpleNamespace(monotonic=lambda: now.t))

    def bound(value):
        stream.bound(SimpleNamespace(data_out=SimpleNamespace(mip_dual_bound=value)))

    bound(2)
    bound(3)  # too soon
    now.t += iso.BOUND_EVERY
    bound(2)  # unchanged
    bound(3)
    now.t += 1.0
    bound(3.5)
    assert sent[1:] == [("bound", 2.0), ("bound", 3.0), ("bound", 3.5)]
    assert type(sent[1][1]) is float


def test_a_child_whose_parent_is_gone_exits():
    pid = os.fork()
    if pid == 0:  # the child: a send that fails ends it with code 3
        def broken(message):
            raise BrokenPipeError

        _Stream(SimpleNamespace(send=broken))._send(("bound", 1.0))
        os._exit(0)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 3


def test_wait_statuses_in_words():
    assert _describe(signal.SIGKILL) == "killed by signal 9 (SIGKILL)"
    assert _describe(signal.SIGSEGV) == "killed by signal 11 (SIGSEGV)"
    assert _describe(5 << 8) == "exited with code 5 without an answer"
    assert _describe(0) == "exited with code 0 without an answer"


def test_run_on_a_thread_of_its_own():
    seen = []
    highs = SimpleNamespace(run=lambda: seen.append(threading.current_thread().name))
    run_on_thread(highs)
    assert seen == ["highs"]

    def fail():
        raise ValueError("in HiGHS")

    with pytest.raises(ValueError, match="in HiGHS"):
        run_on_thread(SimpleNamespace(run=fail))


def test_reaping():
    pid = os.fork()
    if pid == 0:
        os._exit(4)
    assert os.waitstatus_to_exitcode(iso._reap(pid, time.perf_counter() + 5)) == 4
    assert iso._reap(pid, time.perf_counter() + 5) == 0  # reaped already
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    t0 = time.perf_counter()
    status = iso._reap(pid, time.perf_counter() + 0.2)
    assert os.WTERMSIG(status) == signal.SIGKILL and time.perf_counter() - t0 < 2
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    iso._UNREAPED.append(pid)
    deadline = time.perf_counter() + 10  # the child exits at once (later on a busy machine)
    while pid in iso._UNREAPED and time.perf_counter() < deadline:
        time.sleep(0.05)
        iso._reap_finished()
    assert pid not in iso._UNREAPED
    iso._UNREAPED.append(pid)  # reaped elsewhere
    iso._reap_finished()
    assert pid not in iso._UNREAPED


# -- real children ------------------------------------------------------------------------


def small_highs(sense=1):
    """max 5a + 4b + 3c over binaries with 2a + 3b + c <= 5 (as min of the negation)."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    for cost in (-5.0, -4.0, -3.0):
        h.addVar(0.0, 1.0)
        h.changeColCost(h.getNumCol() - 1, sense * cost)
    h.changeColsIntegrality(3, np.arange(3, dtype=np.int32),
                            np.array([highspy.HighsVarType.kInteger] * 3))
    h.addRow(-inf, 5.0, 3, np.arange(3, dtype=np.int32), np.array([2.0, 3.0, 1.0]))
    if sense == -1:
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    return h


def test_a_child_answers():
    before = threading.active_count()
    r = solve_in_child(small_highs(), time.perf_counter() + 30, True)
    assert (r.status, r.objective, r.killed, r.crashed) == ("kOptimal", -9.0, False, None)
    assert r.x.tolist() == [1.0, 1.0, 0.0] and r.bound == -9.0 and r.run_time >= 0
    assert threading.active_count() == before
    r = solve_in_child(small_highs(-1), time.perf_counter() + 30, False)
    assert (r.status, r.objective) == ("kOptimal", 9.0)


def test_a_child_past_its_deadline_is_killed():
    def hang(highs):
        time.sleep(60)

    t0 = time.perf_counter()
    r = solve_in_child(small_highs(), time.perf_counter() + 0.1, True, hang)
    assert r.killed and r.crashed is None and r.status is None
    assert time.perf_counter() - t0 < 0.1 + iso.GRACE + iso.EXIT_WAIT + 1.0


def test_a_child_that_raises_or_dies():
    def fail(highs):
        raise RuntimeError("injected")

    r = solve_in_child(small_highs(), time.perf_counter() + 30, True, fail)
    assert (r.status, r.killed) == (None, False)
    assert r.crashed == "it raised: RuntimeError: injected"

    def die(highs):
        os._exit(6)

    r = solve_in_child(small_highs(), time.perf_counter() + 30, True, die)
    assert r.crashed == "exited with code 6 without an answer" and not r.killed


def test_no_fork_to_be_had(monkeypatch):
    def refuse():
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(iso.os, "fork", refuse)
    with pytest.raises(ForkError, match="no child process: .*Resource temporarily"):
        solve_in_child(small_highs(), time.perf_counter() + 30, True)


def test_ctrl_c_kills_the_child_and_is_raised(monkeypatch):
    killed = []
    kill = iso._kill

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(iso, "_collect", interrupted)
    monkeypatch.setattr(iso, "_kill", lambda pid: killed.append(pid) or kill(pid))

    def hang(highs):
        time.sleep(60)

    with pytest.raises(KeyboardInterrupt):
        solve_in_child(small_highs(), time.perf_counter() + 30, True, hang)
    assert len(killed) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(killed[0], os.WNOHANG)


def test_isolation_is_for_linux(monkeypatch):
    monkeypatch.setattr(iso.sys, "platform", "darwin")
    assert isolation_available() is False
    monkeypatch.setattr(iso.sys, "platform", "linux")
    assert isolation_available() is True


# -- the child's life, in this process (mutmut's tracing does not follow a fork) -----------


class Exited(Exception):
    """``os._exit`` in this process: the code it was given."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


class FakeHighs:
    """A loaded model whose ``run`` streams two incumbents and three bounds."""

    def __init__(self, found=True):
        self.callbacks = {}
        self.found = found
        self.cbMipImprovingSolution = SimpleNamespace(
            subscribe=lambda f: self.callbacks.setdefault("solution", f))
        self.cbMipInterrupt = SimpleNamespace(
            subscribe=lambda f: self.callbacks.setdefault("bound", f))

    def run(self):
        def event(**out):
            return SimpleNamespace(data_out=SimpleNamespace(**out))

        self.callbacks["solution"](event(objective_function_value=9, mip_dual_bound=1,
                                         mip_solution=[1, 0]))
        self.callbacks["bound"](event(mip_dual_bound=2))
        self.callbacks["solution"](event(objective_function_value=7, mip_dual_bound=3,
                                         mip_solution=[0, 1]))

    def getInfo(self):
        return SimpleNamespace(primal_solution_status=2 if self.found else 1,
                               objective_function_value=7, mip_dual_bound=6,
                               mip_node_count=12)

    def getSolution(self):
        return SimpleNamespace(col_value=[0, 1])

    def getModelStatus(self):
        return SimpleNamespace(name="kOptimal" if self.found else "kTimeLimit")


@pytest.fixture
def in_process(monkeypatch):
    """``_child`` run here: the process-wide calls it makes are recorded instead, and
    ``os._exit`` raises :class:`Exited` (what runs after the first one never would)."""
    calls = []
    log = []
    parent = SimpleNamespace(pid=4242)

    def exit_(code):
        log.append(("exit", code))
        raise Exited(code)

    monkeypatch.setattr(iso, "os", SimpleNamespace(getppid=lambda: parent.pid, _exit=exit_))
    monkeypatch.setattr(iso, "gc", SimpleNamespace(disable=lambda: calls.append("gc")))
    monkeypatch.setattr(iso, "faulthandler",
                        SimpleNamespace(disable=lambda: calls.append("faulthandler")))
    monkeypatch.setattr(iso, "signal", SimpleNamespace(
        SIGINT=signal.SIGINT, SIG_IGN=signal.SIG_IGN, SIGKILL=signal.SIGKILL,
        signal=lambda *a: calls.append(("signal",) + a)))
    monkeypatch.setattr(iso, "_LIBC", [lambda *a: calls.append(("prctl",) + a),
                                       lambda *a: calls.append(("fflush",) + a)])
    started = time.perf_counter()

    def child(highs, run=lambda highs: highs.run(), send=None):
        """The exit code of the child's first ``os._exit`` and what it sent before."""
        log.clear()
        calls.clear()
        writer = SimpleNamespace(send=send or log.append)
        with pytest.raises(Exited):
            iso._child(highs, writer, run, 4242)
        first = next(i for i, entry in enumerate(log) if entry[0] == "exit")
        return log[first][1], log[:first]

    return SimpleNamespace(child=child, calls=calls, parent=parent, started=started)


def test_the_child_solves_streams_and_answers(in_process):
    code, sent = in_process.child(FakeHighs())
    assert code == 0
    assert in_process.calls == [
        "gc", "faulthandler", ("signal", signal.SIGINT, signal.SIG_IGN),
        ("prctl", iso._PR_SET_PDEATHSIG, signal.SIGKILL), ("fflush", None)]
    assert [m[0] for m in sent] == ["solution", "bound", "solution", "done"]
    assert sent[0][:3] == ("solution", 9.0, 1.0) and sent[0][3].tolist() == [1.0, 0.0]
    assert sent[1] == ("bound", 2.0)
    kind, status, objective, bound, nodes, run_time, x = sent[3]
    assert (kind, status, objective, bound, nodes) == ("done", "kOptimal", 7.0, 6.0, 12)
    assert type(objective) is float and type(bound) is float and type(nodes) is int
    assert x.dtype == np.float64 and x.tolist() == [0.0, 1.0]
    assert 0 <= run_time < time.perf_counter() - in_process.started + 1e-9


def test_the_child_without_a_solution_answers_none(in_process):
    code, sent = in_process.child(FakeHighs(found=False))
    assert code == 0
    assert sent[-1][:5] == ("done", "kTimeLimit", None, 6.0, 12) and sent[-1][6] is None


def test_the_child_whose_parent_died_before_prctl_exits_at_once(in_process):
    in_process.parent.pid = 1  # adopted by init: the parent is gone
    code, sent = in_process.child(FakeHighs())
    assert code == 1 and sent == []
    assert in_process.calls[3] == ("prctl", iso._PR_SET_PDEATHSIG, signal.SIGKILL)


def test_the_child_that_raises_sends_the_last_frames_and_exits_1(in_process):
    def deep(highs, depth=12):  # two functions in turn: no frame repeats the one before
        if depth == 0:
            raise RuntimeError("deep in HiGHS")
        deeper(highs, depth - 1)

    def deeper(highs, depth):
        deep(highs, depth)

    code, sent = in_process.child(FakeHighs(), run=deep)
    assert code == 1 and len(sent) == 1
    kind, trace = sent[0]
    assert kind == "error" and trace.strip().endswith("RuntimeError: deep in HiGHS")
    assert trace.count('  File "') == 6  # the traceback's first six frames
    assert in_process.calls[-1] == ("fflush", None)

    def broken(message):  # the parent is gone: the error cannot be sent either
        raise BrokenPipeError

    code, _ = in_process.child(FakeHighs(), run=deep, send=broken)
    assert code == 1


def test_a_stream_whose_parent_is_gone_exits_3(in_process):
    def broken(message):
        raise BrokenPipeError

    with pytest.raises(Exited) as exited:
        _Stream(SimpleNamespace(send=broken))._send(("bound", 1.0))
    assert exited.value.code == 3


def test_the_first_bound_goes_exactly_one_interval_after_the_start(monkeypatch):
    sent = []
    now = SimpleNamespace(t=iso.BOUND_EVERY)  # the stream's clock starts at 0
    monkeypatch.setattr(iso, "time", SimpleNamespace(monotonic=lambda: now.t))
    _Stream(SimpleNamespace(send=sent.append)).bound(
        SimpleNamespace(data_out=SimpleNamespace(mip_dual_bound=1.0)))
    assert sent == [("bound", 1.0)]


def test_a_child_reaped_elsewhere_while_killed(monkeypatch):
    killed = []

    def reaped(pid, options):
        raise ChildProcessError

    monkeypatch.setattr(iso.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    monkeypatch.setattr(iso.os, "waitpid", reaped)
    assert iso._kill(77) == 0 and killed == [(77, signal.SIGKILL)]


def test_the_reading_ends_at_its_end_exactly(monkeypatch):
    """With no time left (the clock exactly at the end) nothing more is read, though a
    message waits."""
    reader, writer = Pipe(duplex=False)
    writer.send(("bound", 1.0))
    writer.close()
    monkeypatch.setattr(iso, "time", SimpleNamespace(perf_counter=lambda: 5.0))
    result = ChildRun()
    assert _collect(reader, result, 5.0, True) is False and result.bound is None
    reader.close()


def test_reaping_waits_in_doubling_pauses_up_to_its_end(monkeypatch):
    """``_reap`` polls the child in pauses of 0.1 ms doubling to 10 ms, and kills it when
    the clock reaches ``until`` exactly."""
    clock = SimpleNamespace(t=0.0)
    pauses, killed = [], []

    def sleep(seconds):
        pauses.append(seconds)
        clock.t += seconds

    statuses = iter([(0, 0)] * 9 + [(7, 5 << 8)])
    monkeypatch.setattr(iso, "time", SimpleNamespace(perf_counter=lambda: clock.t,
                                                     sleep=sleep))
    monkeypatch.setattr(iso.os, "waitpid", lambda pid, flags: next(statuses) if flags
                        else (pid, signal.SIGKILL))
    monkeypatch.setattr(iso.os, "kill", lambda pid, sig: killed.append(pid))
    assert iso._reap(7, 10.0) == 5 << 8 and killed == []
    assert pauses == pytest.approx([1e-4, 2e-4, 4e-4, 8e-4, 1.6e-3, 3.2e-3, 6.4e-3, 0.01,
                                    0.01])
    statuses = iter([(0, 0)] * 3)
    clock.t, end = 0.0, 1e-4 + 2e-4
    assert iso._reap(8, end) == signal.SIGKILL and killed == [8]
    assert clock.t == end  # killed at the end itself, not a pause later


def test_killing_a_child_reaped_already_is_no_error():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert iso._kill(pid) == 0


class StreamingHighs(FakeHighs):
    """Streams bounds 3 then 2 (a pause apart), then sleeps ``then`` seconds and answers
    (or is killed first)."""

    def __init__(self, then):
        super().__init__()
        self.then = then

    def run(self):
        for bound in (3.0, 2.0):
            self.callbacks["bound"](SimpleNamespace(data_out=SimpleNamespace(
                mip_dual_bound=bound)))
            time.sleep(2 * iso.BOUND_EVERY)
        time.sleep(self.then)


def test_the_best_streamed_bound_of_a_killed_child_is_of_its_sense():
    deadline = time.perf_counter() + 1.0
    r = solve_in_child(StreamingHighs(then=60), deadline, True, lambda h: h.run())
    assert r.killed and r.status is None and r.bound == 3.0  # minimising: the greatest
    r = solve_in_child(StreamingHighs(then=60), time.perf_counter() + 1.0, False,
                       lambda h: h.run())
    assert r.killed and r.bound == 2.0  # maximising: the least


def test_an_answer_within_the_grace_after_the_deadline_is_heard(monkeypatch):
    monkeypatch.setattr(iso, "GRACE", 3.0)
    deadline = time.perf_counter() + 0.2
    r = solve_in_child(StreamingHighs(then=0.5), deadline, True, lambda h: h.run())
    assert not r.killed and (r.status, r.objective) == ("kOptimal", 7.0)


def test_a_child_that_closes_its_pipe_is_awaited_for_its_own_exit(monkeypatch):
    monkeypatch.setattr(iso, "EXIT_WAIT", 5.0)  # room for a busy machine

    def linger(highs):
        os.closerange(3, 4096)  # the parent sees the end of the pipe
        time.sleep(0.3)
        os._exit(6)

    r = solve_in_child(small_highs(), time.perf_counter() + 30, True, linger)
    assert r.crashed == "exited with code 6 without an answer" and not r.killed


def test_no_process_group_is_ever_signalled(monkeypatch):
    """0 and -1 are not children: ``kill`` would end this process group or every process
    of the user (a fork's child that went on as its parent has ``pid`` 0)."""
    signalled = []
    monkeypatch.setattr(iso.os, "kill", lambda pid, sig: signalled.append((pid, sig)))
    for pid in (0, -1):
        with pytest.raises(ValueError, match=f"{pid} is not the pid of a child"):
            iso._sigkill(pid)
    iso._sigkill(1)  # (os.kill is recorded here)
    assert signalled == [(1, signal.SIGKILL)]
