"""RNCE (:mod:`cfopt.methods.rnce`) on a tiny hand-built network of two inputs and a
5 x 5 grid of data rows: the nearest actionable Δ-robust target-class row, against a
reference that checks each row on its own; immutable and monotone features; no row."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import torch

import cfopt
from cfopt.methods import RNCE
from cfopt.methods.adversaries.model_shift import RobustnessChecker
from cfopt.results.robust import RobustStatus

#: 1·relu(10a - 10b - 3) - 2·relu(a + b - 0.5) + 0.5·relu(0.5a + 2) + 0.25 (class 1 iff > 0)
BINARY = [(np.array([[10.0, -10.0], [1.0, 1.0], [0.5, 0.0]]), np.array([-3.0, -0.5, 2.0])),
          (np.array([[1.0, -2.0, 0.5]]), np.array([0.25]))]
GRID = pd.DataFrame([(i / 4, j / 4) for i, j in itertools.product(range(5), repeat=2)],
                    columns=["a", "b"])


def torch_net(params=BINARY) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for k, (w, b) in enumerate(params):
        linear = torch.nn.Linear(w.shape[1], w.shape[0]).double()
        with torch.no_grad():
            linear.weight.copy_(torch.tensor(w))
            linear.bias.copy_(torch.tensor(b))
        layers += [linear] + ([torch.nn.ReLU()] if k < len(params) - 1 else [])
    return torch.nn.Sequential(*layers)


def reference(factual: pd.DataFrame, target: int, delta: float, keep) -> int | None:
    """The grid row nearest the factual (Euclidean) of class ``target``, proven
    Δ-robust by the exact checker, for which ``keep(row)`` holds."""
    net = torch_net()
    Z = GRID.to_numpy()
    with torch.no_grad():
        logits = net(torch.tensor(Z)).numpy()[:, 0]
    checker = RobustnessChecker(net, delta)
    d = np.linalg.norm(Z - factual.to_numpy()[0], axis=1)
    rows = [r for r in np.argsort(d) if (logits[r] > 0) == bool(target) and keep(GRID.iloc[r])]
    assert len(np.unique(np.round(d[rows], 12))) == len(rows)  # no tie
    for r in rows:
        if checker.check(Z[r], target, screen=False).robust:
            return int(r)
    return None


CASES = {
    # factual class 1 (logit 5.33), target 0
    "free": ({"a": [0.91], "b": [0.13]}, 0, {}, lambda row: True),
    "a immutable": ({"a": [0.75], "b": [0.13]}, 0, {"immutable": ["a"]},
                    lambda row: row["a"] == 0.75),
    # factual class 0 (logit -1.2275), target 1
    "b decrease only": ({"a": [0.97], "b": [0.89]}, 1, {"decrease_only": ["b"]},
                        lambda row: row["b"] <= 0.89),
    "a increase only": ({"a": [0.47], "b": [0.89]}, 1, {"increase_only": ["a"]},
                        lambda row: row["a"] >= 0.47),
    "a decrease only": ({"a": [0.91], "b": [0.13]}, 0, {"decrease_only": ["a"]},
                        lambda row: row["a"] <= 0.91),
}


def space(options) -> cfopt.FeatureSpace:
    s = cfopt.FeatureSpace.from_frame(GRID)
    for how, names in options.items():
        s = getattr(s, how)(*names)
    return s


@pytest.mark.parametrize("case", list(CASES))
def test_the_nearest_actionable_robust_row(case):
    factual, target, options, keep = CASES[case]
    factual = pd.DataFrame(factual)
    method = RNCE(torch_net(), space(options), GRID, delta=0.05)
    r = method.explain(factual, target)
    expected = reference(factual, target, 0.05, keep)
    assert expected is not None
    assert r.status is RobustStatus.CERTIFIED and r.verified and r.certified
    assert r.counterfactual.equals(GRID.iloc[[expected]].reset_index(drop=True))
    c = r.certificate
    assert c.robust is True and c.bound >= 0 and c.verdict.bound == c.bound
    assert c.iterations == 1 and c.delta == 0.05 and c.threshold == 0.0
    assert set(c.times) == {"region"} and c.times["region"] >= 0
    assert r.details["screened"] >= 1 and r.details["milp_checks"] >= 0
    assert r.method == "rnce" and r.bound is None and not r.optimal


def test_the_reference_is_not_the_plain_nearest_row():
    """The robustness and actionability filters matter in these cases."""
    free = reference(pd.DataFrame(CASES["free"][0]), 0, 0.05, lambda row: True)
    loose = reference(pd.DataFrame(CASES["free"][0]), 0, 1e-9, lambda row: True)
    assert free != loose
    f, t, _, keep = CASES["a increase only"]
    assert reference(pd.DataFrame(f), t, 0.05, keep) != reference(pd.DataFrame(f), t, 0.05,
                                                                  lambda row: True)
    f, t, _, keep = CASES["a decrease only"]
    assert reference(pd.DataFrame(f), t, 0.05, keep) != reference(pd.DataFrame(f), t, 0.05,
                                                                  lambda row: True)


def test_no_robust_row_is_infeasible_with_the_count():
    method = RNCE(torch_net(), space({}), GRID, delta=3.0)
    r = method.explain(pd.DataFrame(CASES["free"][0]), 0)
    assert r.status is RobustStatus.INFEASIBLE and r.counterfactual is None
    assert r.message == "no Δ-robust actionable data row among 8 target-class rows"
    assert r.certificate.robust is None and r.certificate.iterations == 1


def test_the_options():
    method = RNCE(torch_net(), space({}), GRID, delta=0.05, objective="linf",
                  weights={"a": 2.0, "b": 1.0})
    assert method.delta == 0.05 and method.backend.name == "highs"
    assert method.milp.objective_terms == {"linf": 1.0}
    assert method.milp.weights == {"a": 2.0, "b": 1.0}
    assert method.milp.bound_tightening.method == "interval"
    assert method.checker.delta == 0.05 and method.checker.backend.name == "highs"
    np.testing.assert_array_equal(method.Z, GRID.to_numpy())
    assert list(method.classes) == [int(v) for v in (
        torch_net()(torch.tensor(GRID.to_numpy())).detach().numpy()[:, 0] > 0)]
    assert method.settings.threads == 1 and method.settings.seed == 0
    assert RNCE(torch_net(), space({}), GRID, delta=0.05, solver="cbc").checker.backend.name \
        == "cbc"


@pytest.mark.parametrize("options, factual, expected", [
    # b immutable after a increase-only: both filters hold (a >= 0.5, b == 0.5)
    ({"increase_only": ["a"], "immutable": ["b"]}, (0.5, 0.5),
     lambda a, b: (a >= 0.5) & (b == 0.5)),
    ({"immutable": ["a"]}, (0.25, 0.3), lambda a, b: a == 0.25),
    ({"decrease_only": ["a"], "increase_only": ["b"]}, (0.5, 0.75),
     lambda a, b: (a <= 0.5) & (b >= 0.75)),
    ({}, (0.5, 0.5), lambda a, b: np.ones_like(a, dtype=bool))])
def test_actionable_rows_by_hand(options, factual, expected):
    method = RNCE(torch_net(), space(options), GRID, delta=0.05)
    keep = method._actionable(pd.Series({"a": factual[0], "b": factual[1]}))
    np.testing.assert_array_equal(keep, expected(GRID["a"].to_numpy(), GRID["b"].to_numpy()))


def test_rows_beyond_the_spaces_bounds_are_kept_and_clipped():
    data = pd.concat([GRID, pd.DataFrame({"a": [1.5, -0.5], "b": [0.5, 0.25]})],
                     ignore_index=True)
    method = RNCE(torch_net(), space({}), data, delta=0.05)
    assert len(method.data) == 27 and method.data.iloc[25]["a"] == 1.5
    np.testing.assert_array_equal(method.Z[25:], [[1.0, 0.5], [0.0, 0.25]])
    np.testing.assert_array_equal(method.Z[:25], GRID.to_numpy())
