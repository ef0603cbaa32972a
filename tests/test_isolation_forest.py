"""The isolation-forest plausibility block (cfopt.IsolationForestScore): its path-length
encoding against sklearn's own score_samples, its effect on a query against brute force,
and its bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from pyomo.core.expr.visitor import identify_variables
from sklearn.ensemble import IsolationForest, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

import cfopt
from cfopt.results.status import Status


def _random_rows(space: cfopt.FeatureSpace, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Uniform raw rows of the feature space (codes within bounds, any category)."""
    cols = {}
    for f in space:
        if f.is_onehot:
            cols[f.name] = [f.categories[k] for k in rng.integers(0, len(f.categories), n)]
        elif f.is_integral:
            codes = rng.integers(int(f.lower), int(f.upper) + 1, n)
            cols[f.name] = [f.from_code(c) for c in codes]
        else:
            cols[f.name] = rng.uniform(f.lower, f.upper, n)
    return pd.DataFrame(cols, columns=space.names)


def _german() -> tuple[cfopt.FeatureSpace, np.ndarray, pd.Series]:
    data = cfopt.datasets.load_german()
    space = cfopt.FeatureSpace.from_frame(data.X)
    space.set("duration", kind="continuous").set("credit_amount", kind="continuous")
    return space, space.transform(data.X), data.y


def test_path_length_block_equals_score_samples() -> None:
    """The Pyomo block's E[h], with its inputs fixed at 1,000 random points and solved for
    its least and largest value, maps to exactly the forest's score_samples; its split
    binaries are the model's where the splits coincide."""
    space, Z, y = _german()
    model = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(Z, y)
    forest = IsolationForest(n_estimators=8, max_samples=32, max_features=0.5,
                             random_state=0).fit(Z)  # each tree on a subset of columns
    m = cfopt.CounterfactualModel(model, space,
                                  constraints=[cfopt.IsolationForestScore(forest, name="iso")])
    bounds = np.array(m.iso.constr.input_bounds)
    rows = _random_rows(space, 1000, np.random.default_rng(0))
    P = np.clip(m.adapter.model_inputs(space, rows), bounds[:, 0], bounds[:, 1])
    assert m.iso.constr.get_error(P) <= 1e-9
    # the block bounds that E[h] by -c(psi) log2(-offset_) = c(psi) (score_samples >= -0.5)
    c_psi = 2 * (np.log(31) + np.euler_gamma) - 2 * 31 / 32
    bound = m.iso.score_bound
    assert bound.active and bound.upper is None and bound.body.expr is m.iso.forest.outputs[0]
    assert pyo.value(bound.lower) == pytest.approx(c_psi, abs=1e-12)
    assert len(m.iso.shared_cuts) > 0  # e.g. one-hot columns split by both
    model_cuts, forest_cuts = m.predictor.cuts, m.iso.forest.cuts
    for row in m.iso.shared_cuts.values():
        ours, theirs = identify_variables(row.body)
        assert ours.parent_block() is m.iso.forest and theirs.parent_block() is m.predictor
        a, b = forest_cuts[ours.index()], model_cuts[theirs.index()]  # same sides
        assert (a.input, a.left, a.right, a.sure_left, a.sure_right) == (
            b.input, b.left, b.right, b.sure_left, b.sure_right)


def test_split_sides_are_sklearns_at_float32_edges() -> None:
    """At every continuous split of the forest, the threshold and the float32 values
    around it: the value lies on the block's side of the cut that sklearn takes (or in
    the few-ulp band that decoding settles), and the parsed forest scores it exactly."""
    space, Z, y = _german()
    forest = IsolationForest(n_estimators=30, max_samples=32, random_state=0).fit(Z)
    m = cfopt.CounterfactualModel(DecisionTreeClassifier(max_depth=2).fit(Z, y), space,
                                  constraints=[cfopt.IsolationForestScore(forest, name="iso")])
    edges = []
    for cut in m.iso.forest.cuts.values():
        spec = m.input_specs[cut.input]
        if spec.kind != "affine" or space[spec.feature].is_integral:
            continue
        t32 = np.float32(cut.theta)
        for v in (cut.theta, float(t32), float(np.nextafter(t32, np.float32(np.inf))),
                  float(np.nextafter(t32, np.float32(-np.inf)))):
            left = float(np.float32(v)) <= cut.theta  # sklearn: float32(x) <= threshold
            assert (v <= cut.sure_left and left) or (v >= cut.sure_right and not left) or (
                cut.sure_left < v < cut.sure_right and cut.goes_left(v) == left)
            assert cut.sure_right - cut.sure_left < 1e-12
            z = Z[len(edges) % len(Z)].copy()
            z[cut.input] = v
            edges.append(z)
    assert len(edges) > 80
    adapter = m.iso.constr.adapter
    parsed = adapter.output_from_logits(adapter.structure.outputs(np.array(edges)))[:, 0]
    assert np.abs(parsed - forest.score_samples(np.array(edges))).max() <= 1e-9


def _grid_problem() -> tuple:
    """Three integer features on 0..9; the data hug the diagonal a = b, so points far
    from it are outliers of the forest."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 10, 400)
    X = pd.DataFrame({"a": a, "b": np.clip(a + rng.integers(-1, 2, 400), 0, 9),
                      "c": rng.integers(0, 10, 400)})
    y = (X.a + 2 * X.b + 0.5 * X.c > 16).astype(int)
    space = cfopt.FeatureSpace.from_frame(X)
    model = DecisionTreeClassifier(max_depth=5, random_state=0).fit(space.transform(X), y)
    return X, space, model


@pytest.mark.parametrize("kind", ["frame", "pipeline"])
def test_constrained_optimum_is_an_inlier_and_matches_brute_force(kind: str) -> None:
    """The unconstrained CE is an outlier; with the block the CE's real score_samples
    clears the threshold, it is proven optimal, costlier, and is the cheapest inlier of
    the target class on the whole grid (brute force)."""
    X, space, model = _grid_problem()
    if kind == "frame":  # the forest on the raw numeric columns, by name
        forest = IsolationForest(n_estimators=20, max_samples=64, random_state=0).fit(X)
    else:  # a Pipeline on the raw DataFrame
        forest = Pipeline([("scale", StandardScaler()), ("iso", IsolationForest(
            n_estimators=20, max_samples=64, random_state=0))]).fit(X)
    threshold = -0.5  # the forest's offset_ (contamination="auto")
    weights = {"a": 1.0, "b": 1.0, "c": 1.0}
    x = X.iloc[[3]]  # (2, 1, 9), rejected
    plain = cfopt.Explainer(model, space, weights=weights).explain(x, target=1)
    block = cfopt.IsolationForestScore(  # both tree formulations of the forest
        forest, name="iso", formulation="leaf" if kind == "frame" else "threshold")
    explainer = cfopt.Explainer(model, space, weights=weights, constraints=[block])
    ce = explainer.explain(x, target=1)
    assert plain.status is Status.OPTIMAL and ce.status is Status.OPTIMAL and ce.verified
    assert forest.score_samples(plain.counterfactual)[0] < threshold  # an outlier
    assert explainer.milp.violations(plain.counterfactual)  # the block's real check
    assert forest.score_samples(ce.counterfactual)[0] >= threshold
    assert ce.objective > plain.objective
    grid = pd.DataFrame(list(itertools.product(range(10), repeat=3)), columns=list("abc"))
    admissible = (model.predict(space.transform(grid)) == 1) & (
        forest.score_samples(grid) >= threshold)
    cost = np.abs(grid.to_numpy() - x.to_numpy()).sum(axis=1)
    assert ce.objective == pytest.approx(cost[admissible].min(), abs=1e-6)


def test_decoding_keeps_the_forests_split_sides() -> None:
    """The solver's optimum sits on the MILP's side of a forest split that overlaps the
    other by a few ulps (a float32 threshold); there sklearn takes the other side and
    scores the point an outlier. Decoding moves it to the side the solver chose for the
    forest (ConstraintBlock.feature_intervals), where the real score clears the
    threshold: the CE is verified and proven optimal."""
    rng = np.random.default_rng(0)
    u = rng.uniform(0, 10, 400)
    X = pd.DataFrame({"u": u, "v": np.clip(u + rng.normal(0, 0.7, 400), 0, 10)})
    space = cfopt.FeatureSpace.from_frame(X)
    model = LogisticRegression().fit(space.transform(X), (X.u + X.v > 10).astype(int))
    forest = IsolationForest(n_estimators=20, max_samples=64, random_state=0).fit(X)
    explainer = cfopt.Explainer(model, space,
                                constraints=[cfopt.IsolationForestScore(forest, name="iso")])
    ce = explainer.explain(pd.DataFrame({"u": [1.0], "v": [3.0]}), target=1)
    assert ce.status is Status.OPTIMAL and ce.verified
    assert forest.score_samples(ce.counterfactual)[0] >= forest.offset_
    m = explainer.milp
    solver_point = pd.DataFrame({f: [pyo.value(m.x[f])] for f in ("u", "v")})
    assert forest.score_samples(solver_point)[0] < forest.offset_  # as the solver left it
    intervals = m.constraints["iso"].feature_intervals(m, m.iso)
    for f, (lo, hi) in intervals.items():
        assert lo <= ce.counterfactual[f].iloc[0] <= hi


def test_bad_input() -> None:
    X, space, model = _grid_problem()
    forest = IsolationForest(n_estimators=5, max_samples=32, random_state=0).fit(X)
    with pytest.raises(ValueError, match="not fitted"):
        cfopt.IsolationForestScore(IsolationForest())
    with pytest.raises(ValueError, match="IsolationForest, got RandomForestClassifier"):
        cfopt.IsolationForestScore(RandomForestClassifier().fit(X, X.a > 4))
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        cfopt.IsolationForestScore(forest, threshold=float("nan"))
    with pytest.raises(ValueError, match="negative everywhere"):
        cfopt.IsolationForestScore(forest, threshold=0.1)
    with pytest.raises(ValueError, match="not both"):
        cfopt.IsolationForestScore(forest, -0.5, contamination=0.1, data=X)
    with pytest.raises(ValueError, match="contamination needs data"):
        cfopt.IsolationForestScore(forest, contamination=0.1)
    with pytest.raises(ValueError, match=r"contamination must lie in \(0, 1\)"):
        cfopt.IsolationForestScore(forest, contamination=1.5, data=X)
    quantile = cfopt.IsolationForestScore(forest, contamination=0.1, data=X)
    assert quantile.threshold == pytest.approx(np.percentile(forest.score_samples(X), 10))
    renamed = IsolationForest(n_estimators=5, random_state=0).fit(X.rename(columns={"c": "z"}))
    with pytest.raises(ValueError, match="column 'z' is not a feature"):
        cfopt.Explainer(model, space, constraints=[cfopt.IsolationForestScore(renamed)])
    wrong = IsolationForest(n_estimators=5, random_state=0).fit(X.to_numpy()[:, :2])
    explainer = cfopt.Explainer(model, space)
    with pytest.raises(ValueError, match="fitted on 2 features, but the "
                                         "DecisionTreeClassifier model takes 3 inputs"):
        explainer.milp.add_constraint(cfopt.IsolationForestScore(wrong, name="iso"))
    assert explainer.milp.component("iso") is None  # nothing half-built stays
