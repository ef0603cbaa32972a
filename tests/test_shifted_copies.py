"""The shifted network copies of PROPLACE's masters: without the neurons dead over
their input box, and with the first layer's vertex envelope when their inputs are a
convex combination of known points (the plausible region): each exact for the master's
points, each only smaller or tighter."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest

import cfopt
from cfopt.formulations.bound_tightening import relax_integrality
from cfopt.formulations.robustness import add_shifted_copy
from cfopt.methods import Proplace
from cfopt.models.network import ReLUNetwork
from cfopt.solvers import SolverSettings

from .test_proplace import (  # noqa: F401
    _first_query_in_region,
    assert_the_switch_never_changes_the_answer,
    toy,
)


def _shifted(method: Proplace) -> list[tuple[np.ndarray, np.ndarray]]:
    structure = method.milp.predictor_constr.adapter.structure
    return [(w + 0.05, b - 0.05) for w, b in structure.parameters]


def test_dead_neurons_are_left_out_with_the_same_logits_in_the_box() -> None:
    """``without_dead_neurons``: the hidden neurons whose upper bound over the box is
    ≤ 0 are gone, each layer keeps at least one, and every point of the box gets the
    same logits."""
    rng = np.random.default_rng(3)
    params = [(rng.normal(size=(12, 5)), rng.normal(size=12) - 1.0),
              (rng.normal(size=(10, 12)), rng.normal(size=10) - 1.5),
              (rng.normal(size=(2, 10)), rng.normal(size=2))]
    net = ReLUNetwork.from_parameters(params)
    lower, upper = np.full(5, 0.2), np.full(5, 0.4)
    bounds = net.box_bounds(lower, upper)
    live, kept = net.without_dead_neurons(bounds)
    for k, layer in enumerate(live.layers[:-1]):
        assert layer.weight.shape[0] == max(1, int((bounds[k][1] > 0).sum()))
    for (lb, ub), (klb, kub) in zip(live.box_bounds(lower, upper), kept):
        np.testing.assert_allclose(lb, klb, atol=1e-12)
        np.testing.assert_allclose(ub, kub, atol=1e-12)
    assert sum(layer.weight.shape[0] for layer in live.layers[:-1]) < 22
    points = rng.uniform(lower, upper, size=(2000, 5))
    np.testing.assert_allclose(live.logits(points), net.logits(points), atol=1e-12)
    dead = [(w, np.full_like(b, -100.0)) if k == 0 else (w, b)
            for k, (w, b) in enumerate(params)]
    all_dead = ReLUNetwork.from_parameters(dead)
    one, _ = all_dead.without_dead_neurons(all_dead.box_bounds(lower, upper))
    assert one.layers[0].weight.shape[0] == 1
    np.testing.assert_allclose(one.logits(points), all_dead.logits(points), atol=1e-12)
    with pytest.raises(ValueError, match="bounds for 2 layers"):
        net.without_dead_neurons(bounds[:2])


def test_a_shifted_copy_holds_only_the_neurons_live_over_the_hull(toy) -> None:  # noqa: F811
    """A shifted copy's network keeps only the neurons live over the region's box and
    hull, and gives the shifted model's own logits at every point of the hull."""
    method, hull, box = _first_query_in_region(toy)
    params = _shifted(method)
    full = ReLUNetwork.from_parameters(params)
    bounds = full.box_bounds(*box, hull=hull)
    live = [max(1, int((ub > 0).sum())) for _, ub in bounds[:-1]]
    _, pred = add_shifted_copy(method.milp, params, box, "pruned", hull)
    structure = pred.adapter.structure
    assert [layer.weight.shape[0] for layer in structure.layers[:-1]] == live
    assert sum(live) < sum(w.shape[0] for w, _ in params[:-1])
    points = np.random.default_rng(0).dirichlet(np.ones(len(hull)), 500) @ hull
    np.testing.assert_allclose(structure.logits(points), full.logits(points), atol=1e-12)


def test_every_point_of_the_hull_satisfies_the_envelope_rows(toy) -> None:  # noqa: F811
    """One row per first-layer neuron whose bounds straddle 0, and at every convex
    combination of the region's points, with the first layer's exact outputs, each row
    holds (Jensen's inequality), with equality at the points themselves."""
    method, hull, box = _first_query_in_region(toy)
    m = method.milp
    weights = method.region.hull_weights(m)
    params = _shifted(method)
    copy, pred = add_shifted_copy(m, params, box, "enveloped", hull, weights)
    rows = copy.vertex_envelope
    lb, ub = pred.layer_bounds()[0]
    assert list(rows) == [j for j in range(len(lb)) if lb[j] < 0 < ub[j]] and len(rows) >= 2
    first, scale = pred.dense_layers()[0], pred.neuron_scales()[0]
    w, b = pred.adapter.structure.parameters[0]  # the copy's live neurons
    rng = np.random.default_rng(0)
    combinations = [*np.eye(len(hull)), *rng.dirichlet(np.full(len(hull), 0.3), 300)]
    tight = 0
    for lam in combinations:
        for var, value in zip(weights, lam):
            var.set_value(float(value))
        outputs = np.maximum((lam @ hull) @ w.T + b, 0.0) / scale
        for j in rows:
            first.z[j].set_value(float(outputs[j]))
            slack = pyo.value(rows[j].upper) - pyo.value(rows[j].body)
            assert slack >= -1e-9, (lam, j)
            tight += slack < 1e-9
    assert tight >= len(hull) * len(rows)  # at least every point itself, every row


def test_the_envelope_tightens_the_relaxation_to_its_values_at_the_points(toy  # noqa: F811
                                                                          ) -> None:
    """Over the master's LP relaxation (the plausible region, integrality relaxed), the
    greatest sum of a shifted copy's first-layer outputs is, with the envelope, the
    greatest sum at one of the region's points (a linear function of λ), and above it
    with the big-M rows alone (each neuron's relaxation only knows its interval); the
    MILP's optimum stays the same (the rows are implied)."""
    method, hull, box = _first_query_in_region(toy)
    m, backend = method.milp, method.backend
    params = _shifted(method)
    w, b = params[0]  # a dead neuron adds 0 at every point
    at_points = np.maximum(hull @ w.T + b, 0.0).sum(axis=1).max()
    settings = SolverSettings(mip_gap=0.0)
    found = {}
    for name, weights in (("plain", None), ("enveloped", method.region.hull_weights(m))):
        copy, pred = add_shifted_copy(m, params, box, name, hull, weights)
        first, scale = pred.dense_layers()[0], pred.neuron_scales()[0]
        copy.total = pyo.Var()
        copy.total_is = pyo.Constraint(expr=copy.total == sum(
            float(s) * first.z[j] for j, s in zip(first.z, scale)))
        optimum = backend.solve(m, settings).objective
        saved = relax_integrality(m)
        try:
            (_, greatest), = backend.ranges(m, [copy.total], settings)
        finally:
            for v, domain, lb, ub in saved:
                v.domain = domain
                v.setlb(lb)
                v.setub(ub)
        found[name] = (greatest, optimum)
        m.del_component(copy)
    assert found["enveloped"][0] == pytest.approx(at_points, rel=1e-7)
    assert found["plain"][0] > at_points + 0.05
    assert found["enveloped"][1] == pytest.approx(found["plain"][1], abs=1e-7)


@pytest.fixture
def envelope_rows(monkeypatch) -> list[int]:
    """The number of envelope rows of each shifted copy the adversaries add (in order;
    clear it between runs)."""
    from cfopt.methods.adversaries import model_shift

    added: list[int] = []

    def recording(m, params, box, name, hull=None, hull_weights=None):
        copy, pred = add_shifted_copy(m, params, box, name, hull, hull_weights)
        rows = copy.component("vertex_envelope")
        added.append(0 if rows is None else len(rows))
        return copy, pred

    monkeypatch.setattr(model_shift, "add_shifted_copy", recording)
    return added


def test_vertex_envelope_adds_the_rows_to_every_copy_and_keeps_the_answer(
        toy, envelope_rows) -> None:  # noqa: F811
    """``vertex_envelope``: each shifted copy the adversary adds gets its envelope rows
    (none when off, or without ``query_bounds``), and the answer is the same."""
    X, space, net, queries = toy
    answers = {}
    for on, bounds in ((True, True), (False, True), (True, False)):
        envelope_rows.clear()
        answers[on, bounds] = Proplace(
            net, space, X, delta=0.05, k=10, vertex_envelope=on,
            query_bounds=bounds).explain(queries.iloc[[0]], target=1)
        assert len(envelope_rows) == len(answers[on, bounds].certificate.models) > 0
        assert (min(envelope_rows) > 0) if on and bounds else (max(envelope_rows) == 0)
    objectives = [a.objective for a in answers.values()]
    assert all(a.certified for a in answers.values())
    assert max(objectives) - min(objectives) < 1e-6
    with pytest.raises(TypeError, match="vertex_envelope"):
        Proplace(net, space, X, delta=0.05, vertex_envelope="off")


def test_the_combined_method_envelopes_its_shifted_copies_within_a_region(
        toy, envelope_rows) -> None:  # noqa: F811
    """``CombinedRobustExplainer(vertex_envelope=...)`` within a plausible region: each
    shifted copy gets its envelope rows when on and none when off, with the same
    answer; a non-boolean is refused naming the switch."""
    X, space, net, queries = toy
    answers = {}
    for on in (True, False):
        envelope_rows.clear()
        answers[on] = cfopt.CombinedRobustExplainer(
            net, space, X, delta=0.05, k=10, vertex_envelope=on).explain(
            queries.iloc[[0]], target=1)
        assert envelope_rows and ((min(envelope_rows) > 0) if on else
                                  (max(envelope_rows) == 0))
    assert answers[True].certified and answers[False].certified
    assert answers[True].objective == pytest.approx(answers[False].objective, abs=1e-6)
    with pytest.raises(TypeError, match="vertex_envelope"):
        cfopt.CombinedRobustExplainer(net, space, X, delta=0.05, vertex_envelope=1)


def test_vertex_envelope_never_changes_the_answer() -> None:
    """A speed lever only: on random instances (certified and proven infeasible ones)
    the status and the optimum are the same with it on and off."""
    assert_the_switch_never_changes_the_answer("vertex_envelope")
