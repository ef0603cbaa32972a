"""PROPLACE's method (:mod:`cfopt.methods.proplace`) on a tiny hand-built network of
two inputs and a 5 x 5 grid of data rows: its options, the answer's certificate and
details checked against the exact checker on its own, the one-off build time, the
query's clean-up, and the same answer with the speed levers off."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
import torch

import cfopt
from cfopt.methods import Proplace
from cfopt.methods.adversaries.model_shift import RobustnessChecker
from cfopt.results.robust import RobustStatus

#: 1·relu(10a - 10b - 3) - 2·relu(a + b - 0.5) + 0.5·relu(0.5a + 2) + 0.25 (class 1 iff > 0)
BINARY = [(np.array([[10.0, -10.0], [1.0, 1.0], [0.5, 0.0]]), np.array([-3.0, -0.5, 2.0])),
          (np.array([[1.0, -2.0, 0.5]]), np.array([0.25]))]
GRID = pd.DataFrame([(i / 4, j / 4) for i, j in itertools.product(range(5), repeat=2)],
                    columns=["a", "b"])
#: class 0 (logit -1.2275)
FACTUAL = pd.DataFrame({"a": [0.97], "b": [0.89]})
LEVERS = ("query_bounds", "vertex_envelope", "ladder", "light_heuristics", "cutoff",
          "relax_model", "first_cut", "active_set", "piece_points", "lp_screen")


def torch_net(params=BINARY) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for k, (w, b) in enumerate(params):
        linear = torch.nn.Linear(w.shape[1], w.shape[0]).double()
        with torch.no_grad():
            linear.weight.copy_(torch.tensor(w))
            linear.bias.copy_(torch.tensor(b))
        layers += [linear] + ([torch.nn.ReLU()] if k < len(params) - 1 else [])
    return torch.nn.Sequential(*layers)


def method(**options) -> Proplace:
    options = {"delta": 0.05, "k": 3, "sigma": 0.1, "tolerance": 0.05, **options}
    return Proplace(torch_net(), cfopt.FeatureSpace.from_frame(GRID), GRID, **options)


def names(p: Proplace) -> set[str]:
    return {c.name for c in p.milp.component_objects(descend_into=True)}


@pytest.fixture(scope="module")
def answered():
    p = method()
    p.names_before = names(p)
    first = p.explain(FACTUAL, target=1)
    second = p.explain(FACTUAL, target=1)
    return p, first, second


def test_the_options_are_checked_and_kept():
    p = method(max_iterations=7, solver_options={"presolve": "off"})
    assert (p.sigma, p.tolerance, p.max_iterations) == (0.1, 0.05, 7)
    assert p.progress is None and p.method == "proplace"
    defaults = {"query_bounds": True, "vertex_envelope": True, "ladder": True,
                "warm_start": False, "light_heuristics": True, "cutoff": True,
                "relax_model": True, "first_cut": True, "active_set": True,
                "piece_points": True, "lp_screen": True}
    assert {name: getattr(p, name) for name in defaults} == defaults
    assert p.settings.options == {**p.backend.light_heuristics(), "presolve": "off"}
    region = p.region
    assert (region.delta, region.k, region.solver, region.name) == (0.05, 3, "highs",
                                                                    "plausible_region")
    assert pyo.value(p.milp.margin) == 0.1
    assert p.checker is region.checker(p.milp) and p.checker.delta == 0.05
    assert p.build_time == p.milp.build_time > 0
    flipped = method(**{name: not value for name, value in defaults.items()})
    assert {name: getattr(flipped, name) for name in defaults} == \
        {name: not value for name, value in defaults.items()}
    assert flipped.settings.options == {}
    assert Proplace(torch_net(), cfopt.FeatureSpace.from_frame(GRID), GRID,
                    delta=0.05).region.k == 20


@pytest.mark.parametrize("name", [*LEVERS, "warm_start"])
def test_a_lever_must_be_a_bool(name):
    with pytest.raises(TypeError, match=f"^{name} must be True or False, got 1$"):
        method(**{name: 1})


def test_bad_numbers_and_progress_are_refused_at_construction():
    with pytest.raises(ValueError, match="^tolerance must be below sigma"):
        method(sigma=0.05, tolerance=0.05)
    with pytest.raises(ValueError, match="^max_iterations must be a positive integer"):
        method(max_iterations=0)
    with pytest.raises((TypeError, ValueError), match="progress"):
        method(progress="yes")
    with pytest.raises(ValueError, match="^k must be a positive integer"):
        method(k=0)


def test_the_answer_is_certified_robust_by_the_checker_alone(answered):
    p, r, _ = answered
    assert r.status is RobustStatus.CERTIFIED and r.certified and r.verified
    assert r.predicted_class == 1 and r.optimal
    z = p.space.encode(r.counterfactual)[0]
    verdict = RobustnessChecker(torch_net(), 0.05).check(z, 1, screen=False)
    assert verdict.robust and verdict.bound >= 0
    c = r.certificate
    assert c.delta == 0.05 and c.robust is True and c.bound >= 0.05 - 1e-9
    assert c.threshold == pytest.approx(0.05) and c.master_margin == 0.1
    assert c.iterations >= 1 and len(c.models) >= 0
    assert set(c.times) == {"region", "master", "adversary"}
    assert c.times["master"] > 0 and c.times["region"] >= 0
    assert c.verdict is not None and c.verdict.bound == c.bound
    d = r.details
    assert d["neighbours"] == 3 and d["region_screened"] >= 3
    assert d["region_milp_checks"] >= 0 and isinstance(d["first_cut"], bool)
    assert d["master_resolves"] >= 0
    assert r.bound is not None and r.bound <= r.objective + 1e-6


def test_the_build_time_is_paid_by_the_first_query_only(answered):
    p, first, second = answered
    assert first.total_time >= p.build_time
    assert second.total_time < first.total_time + 1
    assert second.objective == pytest.approx(first.objective, abs=1e-7)
    assert p._build_pending is False


def test_a_query_leaves_the_model_as_it_was(answered):
    p, r, _ = answered
    m = p.milp
    for (lb, ub), (glb, gub) in zip(m.predictor_constr.layer_bounds(), m.global_layer_bounds):
        np.testing.assert_array_equal(lb, glb)
        np.testing.assert_array_equal(ub, gub)
    assert names(p) == p.names_before
    assert r.certificate.models  # the loop had cuts, all removed
    assert all(c.active for c in m.component_objects(pyo.Constraint, descend_into=True))


def test_the_levers_off_give_the_same_answer(answered):
    _, on, _ = answered
    off = method(**{name: False for name in LEVERS}).explain(FACTUAL, target=1)
    assert off.status is RobustStatus.CERTIFIED and off.certified
    assert off.objective == pytest.approx(on.objective, abs=1e-6)
    assert off.details["first_cut"] is False


def test_no_robust_neighbour_is_infeasible_with_the_reason():
    p = method(delta=2.0)
    r = p.explain(FACTUAL, target=1)
    assert r.status is RobustStatus.INFEASIBLE and r.counterfactual is None
    assert r.message == ("no Δ-robust data point (δ=2) among the 17 rows predicted as the "
                         "target: the plausible region holds no robust point")
    assert r.details["neighbours"] == 0 and r.certificate.threshold == pytest.approx(0.05)
    assert r.total_time >= p.build_time


def test_the_bar_counts_each_check(monkeypatch):
    p = method()
    bars = []

    class Bar:
        def __init__(self):
            self.n, self.postfix, self.closed = 0, [], False

        def update(self, k):
            self.n += k

        def set_postfix(self, **kw):
            self.postfix.append(kw)

        def close(self):
            self.closed = True

    def bar(total, description, progress):
        bars.append((total, description, progress, Bar()))
        return bars[-1][3]

    monkeypatch.setattr(p, "iteration_bar", bar)
    r = p.explain(FACTUAL, target=1)
    ((total, description, progress, b),) = bars
    assert (total, description, progress) == (50, "PROPLACE cutting-set", None)
    assert b.closed and b.n == len(b.postfix) >= 1
    assert b.postfix[-1]["need"] == pytest.approx(0.05)
    assert b.postfix[-1]["robust_bound"] == pytest.approx(r.certificate.bound)
    assert b.postfix[-1]["refresh"] is False


def test_the_defaults():
    p = Proplace(torch_net(), cfopt.FeatureSpace.from_frame(GRID), GRID, delta=0.05)
    assert (p.sigma, p.tolerance, p.max_iterations) == (0.01, 0.005, 50)
    assert p.settings.threads == 1 and p.settings.seed == 0 and p.settings.mip_gap == 1e-4
    assert p.settings.time_limit is None and p.time_limit is None
    assert p.backend.name == "highs" and p.progress is None
    assert p.milp.bound_tightening.method == "lp" and p.milp.objective_terms == {"l1": 1.0}
    assert p.region.labels is None and p.region.k == 20


def test_the_options_reach_the_settings_the_region_and_the_model():
    labels = np.ones(len(GRID), dtype=int)
    p = method(time_limit=30.0, threads=2, seed=7, mip_gap=0.01, progress=False,
               labels=labels, solver="cbc", objective="linf", weights={"a": 2.0, "b": 1.0},
               max_changes=1, bound_tightening="interval")
    assert p.settings.time_limit == 30.0 and p.time_limit == 30.0
    assert (p.settings.threads, p.settings.seed, p.settings.mip_gap) == (2, 7, 0.01)
    assert p.progress is False
    assert p.region.labels is not None and list(p.region.labels) == list(labels)
    assert p.region.solver == "cbc" and p.backend.name == "cbc"
    m = p.milp
    assert m.objective_terms == {"linf": 1.0} and m.weights == {"a": 2.0, "b": 1.0}
    assert m.change_cap == 1 and m.bound_tightening.method == "interval"
