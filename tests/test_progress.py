"""Progress bars: by default only where someone watches (stderr a terminal), on or off
by flag or CFOPT_PROGRESS; PROPLACE's bar shows the bounds of each cutting-set
iteration."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import types

import numpy as np
import pandas as pd
import pytest

import cfopt
import cfopt.methods.base
from cfopt.progress import progress_bar, progress_enabled

from .conftest import train_torch


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_flag_and_environment(monkeypatch):
    monkeypatch.delenv("CFOPT_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert progress_enabled(None) and progress_enabled(True) and not progress_enabled(False)
    monkeypatch.setenv("CFOPT_PROGRESS", "0")
    assert not progress_enabled(None) and progress_enabled(True)
    assert progress_bar(3, "x").disable
    with pytest.raises(TypeError, match="progress must be"):
        progress_enabled(1)


def test_off_by_default_when_stderr_is_not_a_terminal(monkeypatch):
    """Logs of CI and batch jobs (stderr a file or a pipe) get no bars unless asked."""
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.delenv("CFOPT_PROGRESS", raising=False)
    assert not progress_enabled(None) and progress_bar(3, "x").disable
    assert progress_enabled(True)
    for on in ("1", "true", "on"):
        monkeypatch.setenv("CFOPT_PROGRESS", on)
        assert progress_enabled(None) and not progress_bar(3, "x").disable
    monkeypatch.setenv("CFOPT_PROGRESS", "0")
    assert not progress_enabled(None) and progress_enabled(True)



def test_on_by_default_in_a_notebook(monkeypatch):
    """A Jupyter kernel's stderr is no terminal, but someone watches it."""
    class ZMQInteractiveShell:
        pass

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.delenv("CFOPT_PROGRESS", raising=False)
    monkeypatch.setitem(sys.modules, "IPython",
                        types.SimpleNamespace(get_ipython=ZMQInteractiveShell))
    assert progress_enabled(None)
    monkeypatch.setenv("CFOPT_PROGRESS", "0")
    assert not progress_enabled(None)

def test_batch_bar_on_stderr(german, german_model, capsys, monkeypatch):
    """capsys's stderr is no terminal: no bar by default, a bar when asked for (by the
    flag or CFOPT_PROGRESS=1), none with progress=False."""
    monkeypatch.delenv("CFOPT_PROGRESS", raising=False)
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    capsys.readouterr()
    explainer.explain_many(german.X.iloc[:2])
    assert "counterfactuals" not in capsys.readouterr().err
    explainer.explain_many(german.X.iloc[:2], progress=True)
    assert "counterfactuals: 100%" in capsys.readouterr().err
    monkeypatch.setenv("CFOPT_PROGRESS", "1")
    explainer.explain_many(german.X.iloc[:2])
    assert "counterfactuals: 100%" in capsys.readouterr().err
    explainer.explain_many(german.X.iloc[:2], progress=False)
    assert capsys.readouterr().err == ""


_SCRIPT = """
import numpy as np, pandas as pd, cfopt
from sklearn.linear_model import LogisticRegression
rng = np.random.default_rng(0)
X = pd.DataFrame(rng.uniform(0, 1, (80, 2)), columns=["a", "b"])
space = cfopt.FeatureSpace.from_frame(X)
model = LogisticRegression().fit(space.transform(X), (X.a + X.b > 1).astype(int))
cfopt.Explainer(model, space).explain_many(X.iloc[:3])
"""


@pytest.mark.parametrize("setting, shown", [(None, False), ("1", True), ("0", False)])
def test_a_piped_stderr_gets_no_bar_unless_asked(setting, shown):
    """A script whose stderr is a pipe (as in CI logs) writes no bar by default."""
    env = {k: v for k, v in os.environ.items() if k != "CFOPT_PROGRESS"}
    if setting is not None:
        env["CFOPT_PROGRESS"] = setting
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert ("counterfactuals: 100%" in proc.stderr) is shown


def test_proplace_bar_shows_the_bounds(monkeypatch):
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.uniform(0, 1, (200, 3)), columns=["a", "b", "c"])
    y = ((X["a"] + X["b"] - 0.5 * X["c"]) > 0.8).astype(int)
    space = cfopt.FeatureSpace.from_frame(X)
    net = train_torch(space.transform(X), y.to_numpy(), hidden=(6,), epochs=150)
    bars = []

    class Recorder:
        def __init__(self, total, desc, progress, **options):
            self.desc, self.postfixes, self.steps, self.closed = desc, [], 0, False
            bars.append(self)

        def set_postfix(self, **values):
            self.postfixes.append(values)

        def update(self, n=1):
            self.steps += n

        def close(self):
            self.closed = True

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()

    monkeypatch.setattr(cfopt.methods.base, "progress_bar", Recorder)
    method = cfopt.Proplace(net, space, X, delta=0.05, k=5)
    rejected = X[method.milp.predict(X) == 0].iloc[:2]
    results = method.explain_many(rejected, target=1)
    outer, *loops = bars
    assert outer.steps == 2 and outer.closed
    assert len(loops) == 2
    for bar, r in zip(loops, results):
        assert bar.desc == "PROPLACE cutting-set" and bar.closed
        assert bar.steps == r.certificate.iterations == len(bar.postfixes)
        last = bar.postfixes[-1]
        assert last["need"] == pytest.approx(0.005)
        assert last["robust_bound"] == pytest.approx(r.certificate.verdict.bound)
    with pytest.raises(TypeError, match="progress must be"):
        cfopt.Proplace(net, space, X, delta=0.05, k=5, progress="on")


def test_batch_bar_counts_found_failed_left(monkeypatch):
    """A batch's bar: rows done of all (resumed ones counted done from the start), then
    found, failed (error, verification_failed) and left."""
    from cfopt.progress import BatchProgress

    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    bar = BatchProgress(6, "counterfactuals", progress=True, resumed=2)
    answers = [types.SimpleNamespace(found=True, status=cfopt.Status.OPTIMAL),
               types.SimpleNamespace(found=False, status=cfopt.Status.ERROR),
               types.SimpleNamespace(found=False, status=cfopt.Status.INFEASIBLE)]
    bar.update(answers)
    assert (bar.found, bar.failed, bar.left, bar.bar.n) == (1, 1, 1, 5)
    bar.close()
    text = err.getvalue()
    assert "5/6" in text and "found=1" in text and "failed=1" in text and "left=1" in text
    assert "resumed=2" in text
