"""Progress bars: on by default, off by flag or CFOPT_PROGRESS=0; PROPLACE's bar shows
the bounds of each cutting-set iteration."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import cfopt
import cfopt.robust
from cfopt.progress import progress_bar, progress_enabled

from .conftest import train_torch


def test_flag_and_environment(monkeypatch):
    monkeypatch.delenv("CFOPT_PROGRESS", raising=False)
    assert progress_enabled(None) and progress_enabled(True) and not progress_enabled(False)
    monkeypatch.setenv("CFOPT_PROGRESS", "0")
    assert not progress_enabled(None) and progress_enabled(True)
    assert progress_bar(3, "x").disable
    with pytest.raises(TypeError, match="progress must be"):
        progress_enabled(1)


def test_batch_bar_on_stderr(german, german_model, capsys, monkeypatch):
    monkeypatch.delenv("CFOPT_PROGRESS", raising=False)
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    explainer.explain_many(german.X.iloc[:2])
    assert "counterfactuals: 100%" in capsys.readouterr().err
    explainer.explain_many(german.X.iloc[:2], progress=False)
    assert capsys.readouterr().err == ""


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

    monkeypatch.setattr(cfopt.robust, "progress_bar", Recorder)
    method = cfopt.Proplace(net, space, X, 0.05, k=5)
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
        cfopt.Proplace(net, space, X, 0.05, k=5, progress="on")
