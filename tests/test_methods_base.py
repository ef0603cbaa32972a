"""What the model-shift robust methods share (:mod:`cfopt.methods.base`), on a tiny
hand-built network of two inputs: the option checks, the query's input box by hand,
the certificate's claim at level 0, a scripted method's settings, master box, verified
result and batches."""

from __future__ import annotations

import gc
import math
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.tree import DecisionTreeClassifier

import cfopt
from cfopt.methods.base import (
    BOX_TOLERANCE,
    RobustMethod,
    check_count,
    check_positive,
    check_sigma_tolerance,
    check_switch,
    finish_certificate,
    gc_paused,
    query_input_box,
    require_space_encoding,
    target_index,
)
from cfopt.methods.cutting_set import Deadline
from cfopt.models import ReLUNetwork
from cfopt.query.restrictions.relu import objective_value
from cfopt.results.robust import (
    RobustCounterfactual,
    RobustnessCertificate,
    RobustnessVerdict,
    RobustStatus,
)
from cfopt.solvers import SolverSettings

#: one hidden layer, one logit (class 1 iff > 0): 1·relu(10a - 10b - 3)
#: - 2·relu(a + b - 0.5) + 0.5·relu(0.5a + 2) + 0.25
BINARY = [(np.array([[10.0, -10.0], [1.0, 1.0], [0.5, 0.0]]), np.array([-3.0, -0.5, 2.0])),
          (np.array([[1.0, -2.0, 0.5]]), np.array([0.25]))]
FRAME = pd.DataFrame({"a": [0.0, 0.5, 1.0], "b": [0.0, 0.25, 1.0]})
#: class 1 (logit 5.475)
FACTUAL = pd.DataFrame({"a": [0.9], "b": [0.1]})


def torch_net(params=BINARY) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for k, (w, b) in enumerate(params):
        linear = torch.nn.Linear(w.shape[1], w.shape[0]).double()
        with torch.no_grad():
            linear.weight.copy_(torch.tensor(w))
            linear.bias.copy_(torch.tensor(b))
        layers += [linear] + ([torch.nn.ReLU()] if k < len(params) - 1 else [])
    return torch.nn.Sequential(*layers)


def row(a: float, b: float) -> pd.DataFrame:
    return pd.DataFrame({"a": [a], "b": [b]})


class Scripted(RobustMethod):
    """A method whose ``explain`` answers from a script: an exception is raised, a row
    is returned certified through :meth:`_result`."""

    method = "scripted"

    def __init__(self, space: cfopt.FeatureSpace, script: dict | None = None,
                 **options) -> None:
        options = {"delta": 0.1, "solver": "highs", "time_limit": 7.5, "mip_gap": 1e-3,
                   "threads": 1, "seed": 3, **options}
        super().__init__(torch_net(), space, **options)
        self.milp = cfopt.CounterfactualModel(torch_net(), space)
        self.script = script or {}
        self.targets: list = []

    def explain(self, x, target=None):
        self.targets.append(target)
        key = float(x["a"].iloc[0])
        if isinstance(self.script.get(key), Exception):
            raise self.script[key]
        m = self.milp
        m.set_factual(x)
        m.set_target(0)
        cert = RobustnessCertificate(self.delta, True, 0.5, 0.0, None)
        return self._result(m, RobustStatus.CERTIFIED, row(key, 1.0), cert, time.perf_counter())


# ------------------------------------------------------------------ the checks
@pytest.mark.parametrize("value", [1, 0.25, 1e-300, np.float64(2.5)])
def test_check_positive_takes_positive_finite_numbers(value):
    out = check_positive("sigma", value)
    assert type(out) is float and out == float(value)


@pytest.mark.parametrize("value", [True, False, 0, 0.0, -0.5, -1, math.inf, -math.inf,
                                   math.nan, "1", None])
def test_check_positive_names_the_option(value):
    with pytest.raises(ValueError) as err:
        check_positive("sigma", value)
    assert str(err.value) == f"sigma must be a positive number, got {value!r}"


@pytest.mark.parametrize("value", [1, 2, 50, np.int64(3), np.int32(1)])
def test_check_count_takes_positive_integers(value):
    out = check_count("max_iterations", value)
    assert type(out) is int and out == int(value)


@pytest.mark.parametrize("value", [True, False, 0, -1, np.int64(0), 1.0, 2.5, "2", None])
def test_check_count_names_the_option(value):
    with pytest.raises(ValueError) as err:
        check_count("max_iterations", value)
    assert str(err.value) == f"max_iterations must be a positive integer, got {value!r}"


@pytest.mark.parametrize("value", [True, False])
def test_check_switch_takes_booleans(value):
    assert check_switch("light_heuristics", value) is value


@pytest.mark.parametrize("value", [0, 1, None, "yes", np.bool_(True)])
def test_check_switch_names_the_option(value):
    with pytest.raises(TypeError) as err:
        check_switch("light_heuristics", value)
    assert str(err.value) == f"light_heuristics must be True or False, got {value!r}"


def test_sigma_and_tolerance_need_sigma_above_the_tolerance():
    assert check_sigma_tolerance(1, 0.5) == (1.0, 0.5)
    assert all(type(v) is float for v in check_sigma_tolerance(1, np.float64(0.5)))
    assert check_sigma_tolerance(0.2, 0.19999) == (0.2, 0.19999)
    for sigma, tolerance in [(0.5, 0.5), (0.5, 0.6)]:
        with pytest.raises(ValueError) as err:
            check_sigma_tolerance(sigma, tolerance)
        assert str(err.value) == (f"tolerance must be below sigma (σ > t > 0 for convergence),"
                                  f" got sigma={sigma!r}, tolerance={tolerance!r}")
    with pytest.raises(ValueError, match="^sigma must be a positive number, got 0$"):
        check_sigma_tolerance(0, 0.5)
    with pytest.raises(ValueError, match="^tolerance must be a positive number, got -0.1$"):
        check_sigma_tolerance(0.5, -0.1)


def test_gc_paused_pauses_the_collector_and_restores_it_even_on_error():
    seen = []

    @gc_paused
    def explain(x, *, target=None):
        """The docstring."""
        seen.append(gc.isenabled())
        if x == "boom":
            raise KeyError(x)
        return (x, target)

    assert explain.__name__ == "explain" and explain.__doc__ == "The docstring."
    was = gc.isenabled()
    gc.enable()
    try:
        assert explain(1, target=2) == (1, 2)
        assert seen == [False] and gc.isenabled()
        with pytest.raises(KeyError):
            explain("boom")
        assert seen == [False, False] and gc.isenabled()
        gc.disable()
        assert explain(3) == (3, None) and not gc.isenabled()
    finally:
        if was:
            gc.enable()


def test_target_index_is_the_one_target_class_index():
    adapter = SimpleNamespace(class_index=lambda label: {"no": 0, "yes": 1}[label])
    assert target_index(SimpleNamespace(target=("yes",), adapter=adapter)) == 1
    assert target_index(SimpleNamespace(target=("no",), adapter=adapter)) == 0
    for target in [(), ("no", "yes")]:
        with pytest.raises(ValueError) as err:
            target_index(SimpleNamespace(target=target, adapter=adapter))
        assert str(err.value) == ("Δ-robustness keeps one class; give a single target class, "
                                  f"got {list(target)}")


def test_require_space_encoding():
    require_space_encoding(SimpleNamespace(uses_space_encoding=True))
    with pytest.raises(ValueError, match=r"^robust counterfactuals need a network that "
                       r"consumes space\.transform\(X\) \(not a Pipeline"):
        require_space_encoding(SimpleNamespace(uses_space_encoding=False))


# ------------------------------------------------------------------ the input box
def test_query_input_box_by_hand_with_negative_sides():
    """Raw inputs (no scaling): a immutable at -1 (widened by 1e-6·2 each side), b
    increase-only from -0.5 (its lower side widened by 1e-6·1.5, its upper side the
    model's bound 2)."""
    frame = pd.DataFrame({"a": [-2.0, 0.0, 2.0], "b": [-1.0, 0.5, 2.0]})
    space = cfopt.FeatureSpace.from_frame(frame, scaling="none").immutable("a") \
        .increase_only("b")
    m = cfopt.CounterfactualModel(torch_net(), space)
    m.set_factual(row(-1.0, -0.5))
    m.set_target(0)
    lo, hi = query_input_box(m)
    np.testing.assert_allclose(lo, [-1 - 2e-6, -0.5 - 1.5e-6], rtol=0, atol=1e-15)
    np.testing.assert_allclose(hi, [-1 + 2e-6, 2.0], rtol=0, atol=1e-15)
    assert BOX_TOLERANCE == 1e-6
    # a radius: b (weight 1/3, its range 3) moves at most 0.5 / (1/3) = 1.5 up
    lo, hi = query_input_box(m, radius=0.5)
    np.testing.assert_allclose(lo, [-1 - 2e-6, -0.5 - 1.5e-6], rtol=0, atol=1e-15)
    np.testing.assert_allclose(hi, [-1 + 2e-6, 1.0 + 2e-6], rtol=0, atol=1e-15)
    # a region cuts each side it is inside of
    lo, hi = query_input_box(m, (np.array([-3.0, -0.25]), np.array([-1.0, 1.5])))
    np.testing.assert_allclose(lo, [-1 - 2e-6, -0.25], rtol=0, atol=1e-15)
    np.testing.assert_allclose(hi, [-1.0, 1.5], rtol=0, atol=1e-15)
    # b decrease-only from 1.5: the model's lower bound -1, the factual's side above
    space = cfopt.FeatureSpace.from_frame(frame, scaling="none").decrease_only("b")
    m = cfopt.CounterfactualModel(torch_net(), space)
    m.set_factual(row(1.0, 1.5))
    m.set_target()
    lo, hi = query_input_box(m)
    np.testing.assert_allclose(lo, [-2.0, -1.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(hi, [2.0, 1.5 + 2.5e-6], rtol=0, atol=1e-15)


# ------------------------------------------------------------------ the certificate
def verdict(bound, value) -> RobustnessVerdict:
    return RobustnessVerdict(None, bound, value, None, "milp", 0.0)


@pytest.mark.parametrize("bound, value, robust", [
    (0.0, -1.0, True), (0.3, 0.3, True), (-1e-9, -0.1, False), (None, -0.1, False),
    (-0.2, 0.0, None), (-0.2, 0.5, None), (None, None, None), (-0.2, None, None)])
def test_finish_certificate_claims_at_level_zero(bound, value, robust):
    cert = RobustnessCertificate(0.1, None, 9.0, 0.3, None)
    v = verdict(bound, value)
    finish_certificate(cert, v)
    assert cert.verdict is v and cert.bound == bound and cert.robust is robust
    assert cert.threshold == 0.3


# ------------------------------------------------------------------ the method
def test_a_method_keeps_its_options_and_checks_model_and_space():
    space = cfopt.FeatureSpace.from_frame(FRAME)
    method = Scripted(space, solver_options={"presolve": "off"}, threads=2)
    assert method.delta == 0.1 and method.space is space and method.time_limit == 7.5
    assert method.backend.name == "highs"
    assert method.settings == SolverSettings(time_limit=7.5, mip_gap=1e-3, threads=2, seed=3,
                                             options={"presolve": "off"})
    assert Scripted(space).settings.options == {}
    options = {"presolve": "off"}
    method = Scripted(space, solver_options=options)
    method.settings.options["x"] = 1
    assert options == {"presolve": "off"}
    with pytest.raises(ValueError, match="^delta must be a positive number"):
        Scripted(space, delta=0)
    with pytest.raises(TypeError, match="^space must be a cfopt.FeatureSpace, got DataFrame$"):
        Scripted(FRAME)
    tree = DecisionTreeClassifier().fit(FRAME, [0, 1, 1])
    with pytest.raises((TypeError, ValueError)):
        RobustMethod.__init__(Scripted.__new__(Scripted), tree, space, delta=0.1,
                              solver="highs", time_limit=None, mip_gap=0.0, threads=None,
                              seed=None)


def test_light_heuristics_adds_the_backends_options_under_the_users():
    space = cfopt.FeatureSpace.from_frame(FRAME)
    method = Scripted(space, solver_options={"presolve": "off"})
    light = method.backend.light_heuristics()
    assert light  # HiGHS has some
    key = next(iter(light))
    assert method.lighten_heuristics(False) is False
    assert method.settings.options == {"presolve": "off"}
    assert method.lighten_heuristics(True) is True
    assert method.settings.options == {**light, "presolve": "off"}
    assert method.settings.time_limit == 7.5 and method.settings.seed == 3
    method = Scripted(space, solver_options={key: "mine"})
    method.lighten_heuristics(True)
    assert method.settings.options == {**light, key: "mine"}
    with pytest.raises(TypeError, match="^light_heuristics must be True or False, got 1$"):
        method.lighten_heuristics(1)


def test_the_deadline_counts_from_the_query_start():
    method = Scripted(cfopt.FeatureSpace.from_frame(FRAME))
    deadline = method.deadline(12.5)
    assert isinstance(deadline, Deadline)
    assert deadline.settings is method.settings and deadline.started == 12.5


def test_the_iteration_bar():
    method = Scripted(cfopt.FeatureSpace.from_frame(FRAME))
    with method.iteration_bar(4, "iterations", False) as bar:
        assert bar.total == 4 and bar.disable
    with method.iteration_bar(3, "iterations", True) as bar:
        assert bar.total == 3 and bar.desc == "iterations" and not bar.disable
        assert bar.leave is False


def test_master_box_sets_the_layer_bounds_of_the_box_and_hull():
    space = cfopt.FeatureSpace.from_frame(FRAME)
    method = Scripted(space)
    m = cfopt.CounterfactualModel(torch_net(), space)
    m.set_factual(FACTUAL)
    m.set_target(0)
    pred = m.predictor_constr
    net = ReLUNetwork.from_parameters(BINARY)
    hull = np.array([[0.2, 0.2], [0.6, 0.6], [0.3, 0.6]])
    region = (hull.min(axis=0), hull.max(axis=0))

    def bounds_are(expected):
        for (lb, ub), (elb, eub) in zip(pred.layer_bounds(), expected):
            np.testing.assert_allclose(lb, elb, rtol=0, atol=1e-12)
            np.testing.assert_allclose(ub, eub, rtol=0, atol=1e-12)

    # no query bounds, no region: the whole input box, the bounds untouched
    before = [tuple(np.array(s) for s in b) for b in pred.layer_bounds()]
    box = method.master_box(m, None, False)
    np.testing.assert_array_equal(box[0], [0.0, 0.0])
    np.testing.assert_array_equal(box[1], [1.0, 1.0])
    assert all(isinstance(side, np.ndarray) and side.dtype == float for side in box)
    bounds_are(before)
    # a region without query bounds: the region's box, the hull ignored
    box = method.master_box(m, region, False, hull)
    assert box is region
    bounds_are(net.box_bounds(*region))
    assert net.box_bounds(*region)[0][1][0] > 0
    # query bounds: the query's box (here the region), the hull's bounds within it
    box = method.master_box(m, region, True, hull)
    np.testing.assert_allclose(box[0], region[0], rtol=0, atol=0)
    np.testing.assert_allclose(box[1], region[1], rtol=0, atol=0)
    bounds_are(net.box_bounds(*region, hull=hull))
    assert pred.layer_bounds()[0][1][0] <= 0
    # query bounds without a region: the query's own box (a is immutable)
    space = cfopt.FeatureSpace.from_frame(FRAME).immutable("a")
    m = cfopt.CounterfactualModel(torch_net(), space)
    m.set_factual(FACTUAL)
    m.set_target(0)
    box = Scripted(space).master_box(m, None, True)
    np.testing.assert_allclose(box[0], [0.9 - 1.9e-6, 0.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(box[1], [0.9 + 1.9e-6, 1.0], rtol=0, atol=1e-12)
    for (lb, ub), (elb, eub) in zip(m.predictor_constr.layer_bounds(), net.box_bounds(*box)):
        np.testing.assert_allclose(lb, elb, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ub, eub, rtol=0, atol=1e-12)


# ------------------------------------------------------------------ the result
def query(space: cfopt.FeatureSpace) -> tuple[Scripted, cfopt.CounterfactualModel]:
    method = Scripted(space)
    m = method.milp
    m.set_factual(FACTUAL)
    m.set_target(0)
    return method, m


def certificate() -> RobustnessCertificate:
    return RobustnessCertificate(0.1, True, 0.2, 0.0, None)


def test_a_verified_result():
    """(0.9, 1.0): logit -2·1.4 + 0.5·2.45 + 0.25 = -1.325, class 0, a kept."""
    method, m = query(cfopt.FeatureSpace.from_frame(FRAME).immutable("a"))
    cert = certificate()
    point = row(0.9, 1.0)
    t0 = time.perf_counter()
    r = method._result(m, RobustStatus.CERTIFIED, point, cert, t0, bound=0.85,
                       message="fine", details={"k": 1}, one_off=100.0, optimal=True)
    assert type(r) is RobustCounterfactual
    assert r.method == "scripted" and r.status is RobustStatus.CERTIFIED
    assert r.counterfactual is point and r.verified and r.predicted_class == 0
    assert r.target == (0,) and r.factual_class == 1 and r.space is m.space
    assert r.factual.equals(m.factual)
    assert r.objective == pytest.approx(0.9) == objective_value(m, point)
    assert r.distances == m.distances(point) and r.distances
    assert r.bound == 0.85 and r.message == "fine" and r.details == {"k": 1}
    assert r.certificate is cert and r.solver == "highs" and r.optimal
    assert 100.0 <= r.total_time < 110.0
    r = method._result(m, RobustStatus.CERTIFIED, point, cert, time.perf_counter())
    assert r.bound is None and r.message == "" and r.details == {} and not r.optimal
    assert 0 <= r.total_time < 0.5
    r = method._result(m, RobustStatus.TIME_LIMIT, point, cert, time.perf_counter(),
                       optimal=True)
    assert r.status is RobustStatus.TIME_LIMIT and r.verified and not r.optimal


@pytest.mark.parametrize("point, says", [
    ((0.9, 0.1), "the real model predicts 1, which misses the target"),
    ((1.0, 1.0), "it breaks the declared constraint(s)")])
def test_a_point_failing_verification_is_dropped(point, says):
    """(0.9, 0.1) is the factual's class 1; (1.0, 1.0) is class 0 but moves the
    immutable a."""
    method, m = query(cfopt.FeatureSpace.from_frame(FRAME).immutable("a"))
    r = method._result(m, RobustStatus.CERTIFIED, row(*point), certificate(),
                       time.perf_counter(), bound=0.3, optimal=True)
    assert r.status is RobustStatus.VERIFICATION_FAILED and r.counterfactual is None
    assert not r.verified and r.predicted_class is None and r.objective is None
    assert r.distances == {} and not r.optimal and r.bound == 0.3
    assert r.message.startswith("the point failed verification: ")
    assert says in r.message and r.message.endswith("; no counterfactual returned")


def test_no_point_keeps_the_status_and_message():
    method, m = query(cfopt.FeatureSpace.from_frame(FRAME))
    r = method._result(m, RobustStatus.INFEASIBLE, None, certificate(), time.perf_counter(),
                       message="none", optimal=True)
    assert r.status is RobustStatus.INFEASIBLE and r.message == "none"
    assert r.counterfactual is None and not r.verified and r.predicted_class is None
    assert r.objective is None and r.distances == {} and not r.optimal


def test_extra_fields_go_to_the_result_type():
    from dataclasses import dataclass

    @dataclass
    class Extra(RobustCounterfactual):
        extra: int = 0

    method, m = query(cfopt.FeatureSpace.from_frame(FRAME))
    method.result_type = Extra
    r = method._result(m, RobustStatus.CERTIFIED, row(1.0, 1.0), certificate(),
                       time.perf_counter(), extra=7)
    assert type(r) is Extra and r.extra == 7 and r.verified


# ------------------------------------------------------------------ batches
def test_explain_many_records_each_rows_failure_and_goes_on():
    space = cfopt.FeatureSpace.from_frame(FRAME)
    method = Scripted(space, script={0.5: ValueError("bad row")})
    X = pd.DataFrame({"a": [0.9, 0.5, 0.8], "b": [0.1, 0.2, 0.3]}, index=["p", "q", "r"])
    out = method.explain_many(X, progress=False)
    assert [r.status for r in out] == [RobustStatus.CERTIFIED, RobustStatus.ERROR,
                                       RobustStatus.CERTIFIED]
    assert out[0].counterfactual.equals(row(0.9, 1.0))
    assert out[2].counterfactual.equals(row(0.8, 1.0))
    e = out[1]
    assert type(e) is RobustCounterfactual and e.method == "scripted"
    assert e.message == "row 'q': ValueError: bad row"
    assert e.factual.equals(row(0.5, 0.2)) and e.counterfactual is None and e.target == ()
    assert e.predicted_class is None and e.verified is False and e.objective is None
    assert e.bound is None and e.distances == {} and e.solver == "highs"
    assert e.space is space and 0 <= e.total_time < 10
    c = e.certificate
    assert (c.delta, c.robust, c.bound, c.threshold, c.verdict) == (0.1, None, None, 0.0, None)
    # an integer label is shown as a plain int
    X.index = np.array([4, 5, 6])
    assert method.explain_many(X, progress=False)[1].message == "row 5: ValueError: bad row"
    assert method.explain_many(X.iloc[:0], progress=False) == []


def test_explain_many_raises_naming_the_row():
    method = Scripted(cfopt.FeatureSpace.from_frame(FRAME), script={0.5: KeyError("k")})
    X = pd.DataFrame({"a": [0.9, 0.5], "b": [0.1, 0.2]}, index=["p", "q"])
    with pytest.raises(KeyError) as err:
        method.explain_many(X, errors="raise", progress=False)
    assert err.value.__notes__ == ["in explain_many, row 'q' of X"]
    with pytest.raises(ValueError, match="^errors must be 'raise' or 'record', got 'skip'$"):
        method.explain_many(X, errors="skip")


def test_explain_many_passes_the_target_and_counts_the_rows_on_its_bar(monkeypatch):
    import cfopt.methods.base as base

    bars = []

    class Bar:
        n = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def update(self, k):
            self.n += k

    def spy(total, desc, progress=None, **options):
        bar = Bar()
        bars.append((total, desc, progress, options, bar))
        return bar

    monkeypatch.setattr(base, "progress_bar", spy)
    method = Scripted(cfopt.FeatureSpace.from_frame(FRAME), script={0.5: ValueError("x")})
    X = pd.DataFrame({"a": [0.9, 0.5, 0.8], "b": [0.1, 0.2, 0.3]})
    method.explain_many(X, target="the target", progress=True)
    assert method.targets == ["the target"] * 3
    ((total, desc, progress, options, bar),) = bars
    assert (total, desc, progress, options) == (3, "scripted counterfactuals", True, {})
    assert bar.n == 3
    method.explain_many(X.iloc[:2], progress=False)
    assert bars[1][:3] == (2, "scripted counterfactuals", False) and bars[1][4].n == 2
    assert method.targets[3:] == [None, None]


def test_master_box_keeps_the_layer_bounds_within_the_global_ones():
    """Global bounds tighter than the box's (as LP tightening gives): the master's
    bounds are their intersection with the box's."""
    space = cfopt.FeatureSpace.from_frame(FRAME)
    m = cfopt.CounterfactualModel(torch_net(), space)
    m.set_factual(FACTUAL)
    m.set_target(0)
    net = ReLUNetwork.from_parameters(BINARY)
    tight = [(lb.copy(), ub.copy()) for lb, ub in m.global_layer_bounds]
    tight[0][1][0] = 0.5  # neuron 0: 10a - 10b - 3 <= 0.5 (its box's bound is 1)
    m._global_bounds = tight
    region = (np.array([0.2, 0.2]), np.array([0.6, 0.6]))
    assert net.box_bounds(*region)[0][1][0] == pytest.approx(1.0)
    Scripted(space).master_box(m, region, False)
    expected = net.box_bounds(*region, within=tight)
    assert expected[0][1][0] == 0.5
    for (lb, ub), (elb, eub) in zip(m.predictor_constr.layer_bounds(), expected):
        np.testing.assert_allclose(lb, elb, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ub, eub, rtol=0, atol=1e-12)
