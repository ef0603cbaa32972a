"""The K-scenario master (:mod:`cfopt.constraints.scenarios`): its arguments, a
scenario's copy of the model on the kept features' scenario values (numeric and
categorical), the copy's input box, the raw re-check, and the clearing per query."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier

import cfopt
from cfopt import Perturbation
from cfopt.constraints.diversity_cuts import MIN_CHANGE
from cfopt.constraints.scenarios import KScenarios
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace

SPACE = FeatureSpace([
    Feature("a", "continuous", lower=0.0, upper=10.0, scale=10.0,
            perturbation=Perturbation.absolute(1.0, 1.0)),
    Feature("b", "continuous", lower=0.0, upper=10.0, scale=10.0),
    Feature("k", "integer", lower=0, upper=5, scale=5.0,
            perturbation=Perturbation.absolute(1.0, 1.0)),
    Feature("c", "categorical", categories=("p", "q", "r"),
            perturbation=Perturbation.to_categories("p", "r")),
    Feature("s", "continuous", lower=0.0, upper=1.0, immutable=True,
            perturbation=Perturbation.absolute(0.1, 0.1)),
])
FRAME = pd.DataFrame({"a": [0.0, 2, 4, 6, 8, 10], "b": [0.0, 2, 4, 6, 8, 10],
                      "k": [0, 1, 2, 3, 4, 5], "c": ["p", "q", "r", "p", "q", "r"],
                      "s": [0.5] * 6})
Y = [0, 0, 0, 1, 1, 1]
MODEL = LogisticRegression(C=100).fit(SPACE.transform(FRAME), Y)
NETWORK = MLPClassifier((3,), max_iter=2000, random_state=0).fit(SPACE.transform(FRAME), Y)
FACTUAL = pd.DataFrame([{"a": 2.0, "b": 2.0, "k": 1, "c": "q", "s": 0.5}])


def query(model=MODEL, block=None, **options):
    block = block or KScenarios()
    m = cfopt.Explainer(model, SPACE, mip_gap=0.0, constraints=[block], **options).milp
    m.set_factual(FACTUAL)
    m.set_target(1)
    return m, block


def row(**changes):
    return pd.Series({**FACTUAL.iloc[0].to_dict(), **changes})


def test_the_arguments():
    block = KScenarios()
    assert block.name == "k_scenarios" and KScenarios.kind == "k_scenarios"
    assert block.min_change == MIN_CHANGE and block.scenarios == []
    assert KScenarios(1, name="ks").min_change == 1.0
    assert KScenarios(1e-5).min_change == 1e-5
    for bad in (0, 2, True, "0.1", 1e-6):
        with pytest.raises(ValueError, match=r"min_change must be a fraction of the range in "
                                             r"\[1e-5, 1\], got"):
            KScenarios(bad)


def test_exact_change_indicators_of_the_perturbed_mutable_features():
    m, _ = query()
    assert list(m.k_scenarios.MUTABLE) == ["a", "k"]


def test_bad_scenarios_are_refused():
    m, block = query()
    with pytest.raises(ValueError, match=r"scenario names unknown feature\(s\) \['y', 'z'\]"):
        block.add_scenario(m, {"a": 3.0, "z": 1, "y": 2})
    with pytest.raises(ValueError, match=r"scenario: 'x' is not a category of 'c'"):
        block.add_scenario(m, {"c": "x"})
    assert block.scenarios == [] and m.k_scenarios.component("scenario_1") is None


def test_a_scenarios_copy_sees_the_kept_features_at_the_scenario():
    m, block = query()
    sc = block.add_scenario(m, {"a": 3.0, "b": 1.0, "c": "r"})
    assert sc is m.k_scenarios.scenario_1
    assert block.scenarios == [{"a": 3.0, "b": 1.0, "c": "r"}]
    block.scenarios[0]["a"] = 9.0  # a copy
    assert block.scenarios[0]["a"] == 3.0
    b = m.k_scenarios
    # kept (no move): the scenario's values; b has no indicator, so it is always shifted
    m.x_unit["a"].set_value(0.2)
    m.x_unit["b"].set_value(0.2)
    m.x_steps["k"].set_value(1)
    b.up["a"].set_value(0)
    b.down["a"].set_value(0)
    assert pyo.value(sc.x["a"]) == pytest.approx(3.0)
    assert pyo.value(sc.x["b"]) == pytest.approx(1.0)
    assert pyo.value(sc.x["k"]) == pytest.approx(pyo.value(m.x["k"]))
    # a moved: the counterfactual's own value
    m.x_unit["a"].set_value(0.7)
    b.up["a"].set_value(1)
    assert pyo.value(sc.x["a"]) == pytest.approx(7.0)
    b.up["a"].set_value(0)
    b.down["a"].set_value(1)
    assert pyo.value(sc.x["a"]) == pytest.approx(7.0)
    # the category: the scenario's when kept, the counterfactual's when changed
    for level in "pqr":
        m.onehot["c", level].set_value(float(level == "q"))
    values = {lv: pyo.value(sc.onehot["c", lv]) for lv in "pqr"}
    assert values == {"p": 0.0, "q": 0.0, "r": 1.0}
    for level in "pqr":
        m.onehot["c", level].set_value(float(level == "p"))
    values = {lv: pyo.value(sc.onehot["c", lv]) for lv in "pqr"}
    assert values == {"p": 1.0, "q": 0.0, "r": 0.0}
    # the copy of the model is asked for the target too
    assert sc.component("predictor") is not None and sc.component("validity") is not None
    second = block.add_scenario(m, {"k": 2})
    assert second is b.scenario_2 and len(block.scenarios) == 2
    assert block.network_copies(m) == []  # a logistic model: no network copy
    block.update(m, b)  # a new query
    assert block.scenarios == [] and b.component("scenario_1") is None
    assert b.component("scenario_2") is None
    assert block.add_scenario(m, {"a": 1.0}) is b.scenario_1


def test_apply_and_violations_of_a_raw_row():
    m, block = query()
    f = FACTUAL.iloc[0]
    moved = row(a=6.0, c="r")
    out = block.apply(f, moved, {"a": 3.0, "b": 1.0, "c": "p"})
    assert out.to_dict() == {**moved.to_dict(), "b": 1.0}
    assert moved["b"] == 2.0  # not changed in place
    assert block.violations(m, f, moved) == []
    assert block.violations(m, f, row(a=2.05)) == [
        "k_scenarios: a moves by 0.05, less than the 0.1 that counts as a change"]
    block.add_scenario(m, {"a": 0.0, "c": "p"})
    far = row(a=9.0, b=9.0, k=5, c="r")
    assert block.violations(m, f, far) == []
    near = row(b=7.0, c="p")  # class 1; with a pushed from 2 to 0: class 0
    assert m.classify(pd.DataFrame([near]))[0] == 1
    assert block.violations(m, f, near) == [
        "k_scenarios: K-perturbation scenario 1 ({'a': 0.0, 'c': 'p'}) is classified as "
        "0, not [1]"]
    block.add_scenario(m, {"b": 9.0})
    assert len(block.violations(m, f, near)) == 1  # the second scenario holds


def test_a_networks_copy_is_bounded_over_its_own_box():
    m, block = query(NETWORK)
    assert m.global_layer_bounds and m.uses_space_encoding
    scenario = {"a": 3.0, "c": "r"}
    inputs = block.scenario_inputs(m, scenario)
    assert np.allclose(inputs, SPACE.transform(pd.DataFrame([row(a=3.0, c="r")]))[0])
    n = SPACE.n_inputs
    box = (np.full(n, 0.4), np.full(n, 0.45))
    lo, hi = block.scenario_box(m, scenario, box)
    expected_lo, expected_hi = box[0].copy(), box[1].copy()
    for k, name in enumerate(SPACE.input_names):
        if name.split("=")[0] in scenario:
            expected_lo[k] = min(0.4, inputs[k])
            expected_hi[k] = max(0.45, inputs[k])
    assert np.allclose(lo, expected_lo) and np.allclose(hi, expected_hi)
    assert box[0][0] == 0.4  # the master's box is not changed
    sc = block.add_scenario(m, scenario, box)
    copies = block.network_copies(m)
    assert len(copies) == 1 and copies[0][0].block is sc.predictor
    assert np.allclose(copies[0][1], inputs)
    own = m.adapter.structure.box_bounds(lo, hi, within=m.global_layer_bounds)
    assert same_bounds(copies[0][0].layer_bounds(), own)
    free = block.add_scenario(m, scenario)  # without a box: the global bounds
    copies = block.network_copies(m)
    assert len(copies) == 2 and copies[1][0].block is free.predictor
    assert same_bounds(copies[1][0].layer_bounds(), m.global_layer_bounds)
    assert not same_bounds(own, m.global_layer_bounds)
    assert block.network_copies(m) is not block._copies


def same_bounds(first, second):
    return len(first) == len(second) and all(
        np.allclose(a, b) and np.allclose(c, d) for (a, c), (b, d) in zip(first, second))


def test_a_solved_copy_sees_its_scenario_and_meets_the_margin():
    from cfopt.solvers import SolverSettings, make_solver
    from cfopt.space.encoding import encode

    block = KScenarios()
    m = cfopt.CounterfactualModel(MODEL, SPACE, constraints=[block], margin=0.5)
    m.set_factual(FACTUAL)
    m.set_target(1)
    sc = block.add_scenario(m, {"b": 0.0})  # b has no indicator: always shifted by -2
    outcome = make_solver("highs").solve(m, SolverSettings(mip_gap=0.0))
    assert outcome.status is cfopt.Status.OPTIMAL
    row = {f.name: (f.categories[int(np.argmax([pyo.value(m.onehot[f.name, lv])
                                                for lv in f.categories]))]
                    if f.is_onehot else pyo.value(m.x[f.name])) for f in SPACE}
    seen = pd.DataFrame([{**row, "b": row["b"] - 2.0}])
    logit = MODEL.decision_function(encode(SPACE, m.input_specs, seen))[0]
    assert pyo.value(sc.predictor.outputs[0]) == pytest.approx(logit, abs=1e-6)
    assert pyo.value(sc.predictor.outputs[0]) >= 0.5 - 1e-6


def test_a_scenario_box_given_in_integers():
    m, block = query(NETWORK)
    n = SPACE.n_inputs
    scenario = {"a": 3.0}
    point = block.scenario_inputs(m, scenario)  # a's input 0.3
    lo, _ = block.scenario_box(m, scenario, (np.ones(n, dtype=int), np.ones(n, dtype=int)))
    assert lo[0] == pytest.approx(point[0]) and lo[1] == 1.0
    _, hi = block.scenario_box(m, scenario, (np.zeros(n, dtype=int), np.zeros(n, dtype=int)))
    assert hi[0] == pytest.approx(point[0]) and hi[1] == 0.0
