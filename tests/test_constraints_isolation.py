"""The isolation-forest plausibility block (:mod:`cfopt.constraints.isolation`) on tiny
forests: its arguments and threshold, the three ways a forest sees the raw rows, the
bound on the mean path length, the factual's split links, and the real check."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from pyomo.core.expr.visitor import identify_variables
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import IsolationForest, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import cfopt
from cfopt import IsolationForestScore

RNG = np.random.default_rng(0)
U = RNG.uniform(0, 10, 120)
X = pd.DataFrame({"u": U, "v": np.clip(U + RNG.normal(0, 0.5, 120), 0, 10),
                  "c": RNG.choice(["p", "q", "r"], 120)})
SPACE = cfopt.FeatureSpace.from_frame(X)
Y = (X.u + X.v > 10).astype(int)
MODEL = LogisticRegression().fit(SPACE.transform(X), Y)
NUMERIC = X[["u", "v"]]
FOREST = IsolationForest(n_estimators=6, max_samples=32, random_state=0).fit(NUMERIC)
FACTUAL = pd.DataFrame({"u": [1.0], "v": [3.0], "c": ["p"]})


def explainer(block, model=MODEL, **options):
    return cfopt.Explainer(model, SPACE, constraints=[block], **options)


def test_the_threshold_and_the_bound_on_the_path_length():
    block = IsolationForestScore(FOREST)
    assert block.threshold == FOREST.offset_ == -0.5
    assert block.pipeline is None and block.forest is FOREST and block.formulation is None
    assert IsolationForestScore.kind == "isolation_forest"
    c_psi = 2 * (np.log(31) + np.euler_gamma) - 2 * 31 / 32
    assert block.min_path_length == pytest.approx(c_psi)
    assert IsolationForestScore(FOREST, -0.25).min_path_length == pytest.approx(2 * c_psi)
    assert IsolationForestScore(FOREST, np.float64(-2.0)).min_path_length == 0.0
    assert IsolationForestScore(FOREST, -1).threshold == -1.0
    quantile = IsolationForestScore(FOREST, contamination=0.2, data=NUMERIC)
    assert quantile.threshold == pytest.approx(
        np.percentile(FOREST.score_samples(NUMERIC), 20))
    assert IsolationForestScore(FOREST, formulation="threshold").formulation == "threshold"


@pytest.mark.parametrize("args, kwargs, message", [
    ((-0.5,), dict(contamination=0.1, data=NUMERIC), "^give threshold or contamination, not "
                                                     "both$"),
    ((), dict(contamination=0.1), "^contamination needs data: the rows to take the percentile of "
                                  "forest.score_samples over$"),
    ((), dict(contamination=0, data=NUMERIC), r"contamination must lie in \(0, 1\), got 0"),
    ((), dict(contamination=1, data=NUMERIC), r"contamination must lie in \(0, 1\), got 1"),
    ((), dict(contamination=True, data=NUMERIC), r"contamination must lie in \(0, 1\), got "
                                                 r"True"),
    ((), dict(contamination="0.1", data=NUMERIC), r"contamination must lie in \(0, 1\)"),
    ((), dict(data=NUMERIC), "^data is used with contamination only$"),
    ((float("inf"),), {}, "threshold must be a finite number, got inf"),
    ((True,), {}, "threshold must be a finite number, got True"),
    (("-0.5",), {}, "threshold must be a finite number, got '-0.5'"),
])
def test_bad_arguments(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        IsolationForestScore(FOREST, *args, **kwargs)


def test_a_forest_on_columns_that_are_not_numeric_features_is_refused():
    named = IsolationForest(n_estimators=2, random_state=0).fit(
        NUMERIC.rename(columns={"v": "w"}))
    with pytest.raises(ValueError, match=r"isolation forest: column 'w' is not a feature of "
                                         r"the space \['u', 'v', 'c'\]"):
        explainer(IsolationForestScore(named))
    space = cfopt.FeatureSpace.from_frame(X.assign(o=pd.Categorical(
        RNG.choice(["lo", "hi"], 120), categories=["lo", "hi"], ordered=True)))
    labelled = IsolationForestScore(IsolationForest(n_estimators=2, random_state=0).fit(
        pd.DataFrame({"u": U, "o": RNG.integers(0, 2, 120)})))
    with pytest.raises(ValueError, match=r"column 'o' is the \w+ feature 'o', not numeric"):
        labelled.validate(space)
    onehot = IsolationForestScore(IsolationForest(n_estimators=2, random_state=0).fit(
        pd.DataFrame({"c": RNG.integers(0, 2, 120)})))
    with pytest.raises(ValueError, match=r"column 'c' is the categorical feature 'c'"):
        onehot.validate(SPACE)
    IsolationForestScore(FOREST).validate(SPACE)  # numeric columns by name: fine


def test_a_forest_on_the_wrong_number_of_model_inputs_leaves_nothing_behind():
    wrong = IsolationForest(n_estimators=2, random_state=0).fit(NUMERIC.to_numpy())
    m = cfopt.Explainer(MODEL, SPACE).milp
    with pytest.raises(ValueError, match="isolation forest: fitted on 2 features, but the "
                                         "LogisticRegression model takes 5 inputs"):
        m.add_constraint(IsolationForestScore(wrong, name="iso"))
    assert m.component("iso") is None and m.constraints == {}


def test_a_pipeline_with_wrong_columns_is_refused():
    pipe = Pipeline([("scale", StandardScaler()), ("iso", IsolationForest(
        n_estimators=2, random_state=0))]).fit(NUMERIC.rename(columns={"v": "w"}))
    with pytest.raises(ValueError, match="'w'"):
        explainer(IsolationForestScore(pipe))


def check_answer(block, score):
    plain = cfopt.Explainer(MODEL, SPACE).explain(FACTUAL, target=1)
    ex = explainer(block)
    m = ex.milp
    ce = ex.explain(FACTUAL, target=1)
    assert ce.verified and ce.status is cfopt.Status.OPTIMAL
    assert score(plain.counterfactual) < block.threshold  # the plain answer: an outlier
    assert score(ce.counterfactual) >= block.threshold
    assert ce.objective > plain.objective
    assert block.score(m, ce.counterfactual) == pytest.approx(score(ce.counterfactual))
    row = plain.counterfactual.iloc[0]
    value = score(plain.counterfactual)[0]
    assert block.violations(m, FACTUAL.iloc[0], row) == [
        f"isolation forest 'iso': score_samples {value:.6g} is below the threshold "
        f"{block.threshold:.6g} (an outlier)"]
    assert block.violations(m, FACTUAL.iloc[0], ce.counterfactual.iloc[0]) == []
    b = m.iso
    assert pyo.value(b.min_path_length) == pytest.approx(block.min_path_length)
    assert b.score_bound.upper is None
    assert pyo.value(b.score_bound.lower) == pytest.approx(block.min_path_length)
    assert b.path_length.expr is b.forest.outputs[0]
    intervals = block.feature_intervals(m, b)
    assert intervals and all(lo <= ce.counterfactual[f].iloc[0] <= hi
                             for f, (lo, hi) in intervals.items())
    return m


def test_a_forest_on_numeric_columns_by_name():
    check_answer(IsolationForestScore(FOREST, name="iso"),
                 lambda rows: FOREST.score_samples(rows[["u", "v"]]))


def test_a_forest_on_the_models_inputs():
    forest = IsolationForest(n_estimators=6, max_samples=32, random_state=0).fit(
        SPACE.transform(X))
    check_answer(IsolationForestScore(forest, name="iso"),
                 lambda rows: forest.score_samples(SPACE.transform(rows)))


def test_a_pipeline_on_the_raw_frame():
    pipe = Pipeline([("encode", ColumnTransformer([("num", StandardScaler(), ["u", "v"]),
                                                   ("cat", OneHotEncoder(), ["c"])])),
                     ("iso", IsolationForest(n_estimators=6, max_samples=32,
                                             random_state=0))]).fit(X)
    block = IsolationForestScore(pipe, name="iso", formulation="threshold")
    assert block.pipeline is pipe and block.forest is pipe.steps[-1][1]
    m = check_answer(block, lambda rows: pipe.score_samples(rows[["u", "v", "c"]]))
    leaves = m.iso.forest.component("leaf")  # the threshold formulation: no leaf binaries
    assert leaves is None or not any(v.is_binary() for v in leaves.values())


def test_the_factuals_splits_count_as_changes_and_shared_cuts():
    tree = FOREST.estimators_[0].tree_
    node = int(np.flatnonzero(tree.feature >= 0)[0])
    feature = ["u", "v"][tree.feature[node]]
    factual = FACTUAL.copy()
    factual[feature] = float(np.float32(tree.threshold[node]))  # on the forest's split
    links = []
    for objective in ("l0", "l1"):
        m = explainer(IsolationForestScore(FOREST, name="iso"), objective=objective).milp
        m.set_factual(factual)
        m.set_target(1)
        links.append(list(m.iso.factual_split_changes.values()))
    with_l0, with_l1 = links
    assert with_l0 and with_l1 == []
    for row in with_l0:
        names = {v.name for v in identify_variables(row.body)}
        assert f"changed[{feature}]" in names
    # a forest of the model's own splits shares the model's split binaries
    Z = SPACE.transform(X)
    model = RandomForestClassifier(n_estimators=3, max_depth=2, random_state=0).fit(Z, Y)
    forest = IsolationForest(n_estimators=3, max_samples=32, random_state=0).fit(Z)
    m = explainer(IsolationForestScore(forest, name="iso"), model=model).milp
    assert len(m.iso.shared_cuts) > 0
    for row in m.iso.shared_cuts.values():
        ours, theirs = identify_variables(row.body)
        assert ours.parent_block() is m.iso.forest and theirs.parent_block() is m.predictor
        a, b = m.iso.forest.cuts[ours.index()], m.predictor.cuts[theirs.index()]
        assert (a.input, a.left, a.right, a.sure_left, a.sure_right) == (
            b.input, b.left, b.right, b.sure_left, b.sure_right)
    assert m.component("iso").component("shared_cuts") is not None
    plain = explainer(IsolationForestScore(FOREST, name="iso")).milp
    assert plain.iso.component("shared_cuts") is None  # a logistic model has no cuts


def test_the_forest_is_the_last_step_of_a_longer_pipeline():
    iso = IsolationForest(n_estimators=2, max_samples=16, random_state=0)
    pipe = Pipeline([("pick", ColumnTransformer([("num", StandardScaler(), ["u", "v"])])),
                     ("scale", StandardScaler()), ("iso", iso)]).fit(X)
    block = IsolationForestScore(pipe)
    assert block.pipeline is pipe and block.forest is iso
    assert block.threshold == iso.offset_


def test_a_score_equal_to_the_threshold_is_no_violation():
    row = FACTUAL.iloc[0]
    at = float(FOREST.score_samples(FACTUAL[["u", "v"]])[0])
    block = IsolationForestScore(FOREST, at, name="iso")
    m = explainer(block).milp
    assert block.violations(m, row, row) == []
    above = IsolationForestScore(FOREST, float(np.nextafter(at, 0)), name="iso")
    m = explainer(above).milp
    assert len(above.violations(m, row, row)) == 1


@pytest.mark.parametrize("side", ["left", "right"])
def test_crossing_a_forest_split_at_the_factual_is_a_change(side):
    tree = FOREST.estimators_[0].tree_
    node = int(np.flatnonzero(tree.feature >= 0)[0])
    feature = ["u", "v"][tree.feature[node]]
    on = np.float32(tree.threshold[node])  # the forest sends it left; the next float32 right
    factual = FACTUAL.copy()
    factual[feature] = float(on if side == "left" else np.nextafter(on, np.float32(np.inf)))
    m = explainer(IsolationForestScore(FOREST, name="iso"), objective="l0").milp
    m.set_factual(factual)
    m.set_target(1)
    rows = list(m.iso.factual_split_changes.values())
    assert len(rows) == 1
    left_of = next(v for v in identify_variables(rows[0].body) if "left_of" in v.name)
    changed = m.changed[feature]

    def holds(split, change):
        left_of.set_value(split)
        changed.set_value(change)
        row, body = rows[0], pyo.value(rows[0].body)
        return (not row.has_lb() or body >= pyo.value(row.lower) - 1e-9) and (
            not row.has_ub() or body <= pyo.value(row.upper) + 1e-9)

    factual_side = 1 if side == "left" else 0
    assert holds(factual_side, 0) and not holds(1 - factual_side, 0)
    assert holds(1 - factual_side, 1) and holds(factual_side, 1)


def test_a_forest_split_on_an_integer_value_takes_the_forests_side():
    XK = X.assign(k=np.random.default_rng(1).integers(0, 11, 120))
    space = cfopt.FeatureSpace.from_frame(XK)
    model = LogisticRegression().fit(space.transform(XK), Y)
    named = IsolationForest(n_estimators=1, max_samples=16, random_state=0).fit(XK[["u", "k"]])
    pipe = Pipeline([("pick", ColumnTransformer([("num", "passthrough", ["u", "k"])])),
                     ("iso", IsolationForest(n_estimators=1, max_samples=16,
                                             random_state=0))]).fit(XK)
    for forest in (named, pipe[-1]):
        tree = forest.estimators_[0].tree_
        tree.threshold[np.flatnonzero(tree.feature == 1)[0]] = 3.0  # k <= 3: left
    for forest in (named, pipe):
        m = cfopt.Explainer(model, space, constraints=[IsolationForestScore(
            forest, name="iso")]).milp
        (cut,) = [c for c in m.iso.forest.cuts.values() if c.theta == 3.0]
        assert (cut.input, cut.left, cut.right) == (1, 3.0, 4.0)
