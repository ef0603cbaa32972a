"""``solver="cpsat"``: OCEAN's CP model of tree-ensemble queries on OR-Tools CP-SAT.

Optimality against brute force on grids, continuous thresholds at the factual,
actionability, weights and ``max_changes``, the boosters and pipelines against HiGHS,
the time limit, and the refusals of what the CP model does not encode."""

from __future__ import annotations

import builtins
import time

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import cfopt

from .conftest import grid, valid_grid_points
from .test_limits import within

pytest.importorskip("ortools")

MARGIN = 1e-3


def _forest(toy, family, seed=0):
    frame, y = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    cls = {"rf": RandomForestClassifier, "et": ExtraTreesClassifier}.get(family)
    if cls is not None:
        model = cls(n_estimators=7, max_depth=4, random_state=seed)
    else:
        model = GradientBoostingClassifier(n_estimators=6, max_depth=2, random_state=seed)
    return space, model.fit(space.transform(frame), y)


def _against_enumeration(explainer, frame, space, norm, rows=30):
    """Every proven optimum is the enumerated minimum over the grid (with the margin),
    and INFEASIBLE comes only when the enumeration finds nothing; the answers."""
    predictions = explainer.milp.predict(frame)
    answers = []
    for i in range(rows):
        x = frame.iloc[[i]]
        target = 1 - int(predictions[i])
        points = valid_grid_points(explainer, x, target, space, MARGIN)
        expected = min((explainer.milp.distances(r)[norm] for r in points), default=np.inf)
        if not np.isfinite(expected):
            with pytest.raises(cfopt.InfeasibleError):
                explainer.explain(x, target=target)
            continue
        ce = explainer.explain(x, target=target)
        assert ce.status is cfopt.Status.OPTIMAL and ce.verified
        assert ce.objective == pytest.approx(expected, rel=1e-9, abs=1e-9)
        assert ce.bound <= ce.objective + 1e-12
        answers.append(ce)
    return answers


@pytest.mark.parametrize("family", ["rf", "et", "gb"])
@pytest.mark.parametrize("norm", ["l1", "l0", "linf"])
def test_optimum_equals_brute_force(toy, family, norm):
    frame, _ = toy
    space, model = _forest(toy, family)
    space.immutable("d").increase_only("b")
    explainer = cfopt.Explainer(model, space, solver="cpsat", objective=norm, margin=MARGIN,
                                mip_gap=0.0)
    answers = _against_enumeration(explainer, frame, space, norm)
    assert len(answers) >= 10
    for ce in answers:
        before, after = ce.factual.iloc[0], ce.counterfactual.iloc[0]
        assert after["d"] == before["d"] and after["b"] >= before["b"]


@pytest.mark.parametrize("norm", ["l1", "l0"])
def test_max_changes_and_weights_brute_force(toy, norm):
    """A cap of one change and user weights, against the enumeration."""
    frame, _ = toy
    space, model = _forest(toy, "rf", seed=3)
    weights = {"a": 5.0, "b": 0.1, "c": 2.0, "d": 0.5}
    explainer = cfopt.Explainer(model, space, solver="cpsat", objective=norm, max_changes=1,
                                weights=weights, margin=MARGIN, mip_gap=0.0)
    answers = _against_enumeration(explainer, frame, space, norm)
    assert len(answers) >= 5
    assert all(ce.distances["l0"] <= 1 for ce in answers)
    free = cfopt.Explainer(model, space, solver="cpsat", objective=norm, weights=weights,
                           margin=MARGIN, mip_gap=0.0)
    uncapped = [free.explain(ce.factual, target=ce.target) for ce in answers]
    assert all(u.objective <= ce.objective + 1e-9 for u, ce in zip(uncapped, answers))
    if norm == "l1":  # the cap binds somewhere: a dearer point, one change
        assert any(u.objective < ce.objective - 1e-6 for u, ce in zip(uncapped, answers))


def _continuous(seed=0, n=400):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"u": rng.uniform(0, 1, n), "v": rng.uniform(-5, 5, n),
                          "k": rng.integers(0, 6, n),
                          "c": rng.choice(["p", "q", "r"], n)})
    y = ((frame.u + frame.v / 5 + (frame.c == "q") + frame.k / 6) > 1.3).astype(int).to_numpy()
    return frame, y


def test_continuous_matches_highs_and_weights_matter():
    frame, y = _continuous()
    space = cfopt.FeatureSpace.from_frame(frame)
    model = RandomForestClassifier(n_estimators=15, max_depth=5, random_state=0).fit(
        space.transform(frame), y)
    cp = cfopt.Explainer(model, space, solver="cpsat")
    highs = cfopt.Explainer(model, space)
    heavy = cfopt.Explainer(model, space, solver="cpsat", weights={"u": 50.0, "v": 50.0})
    rejected = frame[model.predict(space.transform(frame)) == 0].iloc[:8]
    moved_other = 0
    for label in rejected.index:
        x = rejected.loc[[label]]
        a, b = cp.explain(x, target=1), highs.explain(x, target=1)
        assert a.status is cfopt.Status.OPTIMAL and b.status is cfopt.Status.OPTIMAL
        assert a.objective == pytest.approx(b.objective, rel=1e-6, abs=1e-7)
        c = heavy.explain(x, target=1)
        assert c.status is cfopt.Status.OPTIMAL and c.verified
        row, base = c.counterfactual.iloc[0], x.iloc[0]
        moved_other += row["u"] == base["u"] and row["v"] == base["v"]
    assert moved_other >= 1  # heavy continuous weights move the cheap features instead


def test_factual_on_a_threshold():
    """A factual exactly on a split threshold (float32 comparison, ``<=``): the optimum
    crosses it by the smallest move the library sees, as HiGHS finds it."""
    frame, y = _continuous(1)
    space = cfopt.FeatureSpace.from_frame(frame)
    model = RandomForestClassifier(n_estimators=9, max_depth=4, random_state=1).fit(
        space.transform(frame), y)
    cp, highs = cfopt.Explainer(model, space, solver="cpsat"), cfopt.Explainer(model, space)
    f = space["u"]
    thresholds = sorted({t for est in model.estimators_ for t, j in zip(
        est.tree_.threshold, est.tree_.feature) if j == 0})
    checked = 0
    for i, theta in enumerate(thresholds[:12]):
        x = frame.iloc[[i]].copy()
        x["u"] = theta * f.scale + f.shift  # the factual's input is the threshold
        target = 1 - int(model.predict(space.transform(x))[0])
        try:
            b = highs.explain(x, target=target)
        except cfopt.InfeasibleError:
            with pytest.raises(cfopt.InfeasibleError):
                cp.explain(x, target=target)
            continue
        a = cp.explain(x, target=target)
        assert a.verified and a.status is cfopt.Status.OPTIMAL
        assert a.objective == pytest.approx(b.objective, rel=1e-6, abs=1e-7)
        checked += 1
    assert checked >= 4


def test_boosters_multiclass_and_regression_match_highs():
    xgboost = pytest.importorskip("xgboost")
    lightgbm = pytest.importorskip("lightgbm")
    frame, y = _continuous(2)
    space = cfopt.FeatureSpace.from_frame(frame)
    Z = space.transform(frame)
    y3 = np.digitize(frame.u + frame.v / 5, [0.2, 0.9])
    models = [(xgboost.XGBClassifier(n_estimators=8, max_depth=3).fit(Z, y), y, None),
              (lightgbm.LGBMClassifier(n_estimators=8, num_leaves=6, verbose=-1).fit(Z, y3),
               y3, [0, 2]),
              (GradientBoostingClassifier(n_estimators=5, max_depth=2).fit(Z, y3), y3, None),
              (RandomForestRegressor(n_estimators=6, max_depth=4, random_state=0).fit(
                  Z, frame.v.to_numpy()), None, (2.0, None))]
    for model, labels, target in models:
        cp, highs = cfopt.Explainer(model, space, solver="cpsat"), cfopt.Explainer(model, space)
        for i in range(4):
            x = frame.iloc[[i]]
            if labels is not None and target is not None and labels[i] in target:
                continue
            try:
                b = highs.explain(x, target=target)
            except (cfopt.InfeasibleError, cfopt.errors.AlreadyTargetError):
                continue
            a = cp.explain(x, target=target)
            assert a.status is cfopt.Status.OPTIMAL and a.verified, type(model).__name__
            assert a.objective == pytest.approx(b.objective, rel=1e-6, abs=1e-7)


def test_regression_intervals_closed_above_equal_brute_force(toy):
    """A regressor's target interval with a finite upper end, open below or closed on
    both sides, above and below the factual's prediction: CP-SAT's optimum and HiGHS's
    are the enumerated minimum over the grid of the points predicted in
    [low + μ, high − μ] (an upper end dropped or shifted lets a closer point overshoot)."""
    frame, _ = toy
    space = cfopt.FeatureSpace.from_frame(frame)
    score = (frame.a - 1.5 * frame.b + 2.0 * (frame.c == "red") - frame.d).to_numpy(float)
    model = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(
        space.transform(frame), score)
    solvers = [cfopt.Explainer(model, space, solver=name, margin=MARGIN, mip_gap=0.0)
               for name in ("cpsat", "highs")]
    points = grid(space)
    values = model.predict(space.transform(points))
    checked = 0
    for i in range(10):
        x = frame.iloc[[i]]
        y0 = float(model.predict(space.transform(x))[0])
        for low, high in ((None, y0 - 1.0), (y0 - 3.0, y0 - 1.0), (y0 + 0.5, y0 + 1.5)):
            inside = (values <= high - MARGIN) & (values >= (-np.inf if low is None
                                                              else low + MARGIN))
            m = solvers[1].milp
            m.set_factual(x)
            costs = [m.distances(points.iloc[[k]].reset_index(drop=True))["l1"]
                     for k in np.flatnonzero(inside)]
            for explainer in solvers:
                if not costs:
                    with pytest.raises(cfopt.InfeasibleError):
                        explainer.explain(x, target=(low, high))
                    continue
                ce = explainer.explain(x, target=(low, high))
                got = float(model.predict(space.transform(ce.counterfactual))[0])
                assert ce.status is cfopt.Status.OPTIMAL and ce.verified, explainer.backend
                assert got <= high and (low is None or got >= low)
                assert ce.objective == pytest.approx(min(costs), rel=1e-9, abs=1e-9)
                checked += 1
    assert checked >= 30


def test_pipeline_with_encoder_and_scaler():
    """A raw frame behind OneHotEncoder + StandardScaler, as users have it."""
    frame, y = _continuous(3)
    space = cfopt.FeatureSpace.from_frame(frame).immutable("c").increase_only("k")
    pre = ColumnTransformer([("num", StandardScaler(), ["u", "v", "k"]),
                             ("cat", OneHotEncoder(), ["c"])], sparse_threshold=0)
    model = Pipeline([("pre", pre), ("rf", RandomForestClassifier(
        n_estimators=10, max_depth=5, random_state=0))]).fit(frame, y)
    cp, highs = cfopt.Explainer(model, space, solver="cpsat"), cfopt.Explainer(model, space)
    rejected = frame[model.predict(frame) == 0].iloc[:6]
    for label in rejected.index:
        x = rejected.loc[[label]]
        a, b = cp.explain(x, target=1), highs.explain(x, target=1)
        assert a.status is cfopt.Status.OPTIMAL and a.verified
        assert a.counterfactual.iloc[0]["c"] == x.iloc[0]["c"]
        assert a.counterfactual.iloc[0]["k"] >= x.iloc[0]["k"]
        assert a.objective == pytest.approx(b.objective, rel=1e-6, abs=1e-7)


def test_time_limit_is_honoured():
    """A forest of unlimited depth with a 1 s limit answers within a generous margin,
    with a verified point or none, and a valid bound."""
    frame, y = _continuous(4, n=3000)
    space = cfopt.FeatureSpace.from_frame(frame)
    model = RandomForestClassifier(n_estimators=60, random_state=0).fit(space.transform(frame),
                                                                         y)
    explainer = cfopt.Explainer(model, space, solver="cpsat", time_limit=1.0,
                                tighten_per_query=False)
    x = frame[model.predict(space.transform(frame)) == 0].iloc[[0]]
    t0 = time.perf_counter()
    ce = explainer.explain(x, target=1)
    assert time.perf_counter() - t0 < within(1.0)
    assert ce.status in (cfopt.Status.OPTIMAL, cfopt.Status.FEASIBLE, cfopt.Status.NO_SOLUTION)
    if ce.status.has_solution:
        assert ce.verified and ce.bound <= ce.objective + 1e-9


def test_refusals(toy):
    frame, y = toy
    space, model = _forest(toy, "rf")
    mlp = MLPClassifier((4,), max_iter=50, random_state=0).fit(space.transform(frame), y)
    with pytest.raises(cfopt.UnsupportedModelError, match="tree ensembles only.*highs"):
        cfopt.Explainer(mlp, space, solver="cpsat")
    rule = cfopt.LinearConstraint({"a": 1.0, "b": 1.0}, "<=", 6.0)
    with pytest.raises(ValueError, match="constraint blocks.*highs"):
        cfopt.Explainer(model, space, solver="cpsat", constraints=[rule])
    explainer = cfopt.Explainer(model, space, solver="cpsat")
    with pytest.raises(ValueError, match="diverse sets.*highs"):
        explainer.explain(frame.iloc[[0]], n=3)
    import pyomo.environ as pyo

    m = explainer.milp
    m.my_rule = pyo.Constraint(expr=m.x["a"] <= 3)
    with pytest.raises(ValueError, match="my_rule.*highs"):
        explainer.explain(frame.iloc[[0]])
    with pytest.raises(ValueError, match="no parameter 'no_such_option'"):
        cfopt.Explainer(model, space, solver="cpsat", solver_options={"no_such_option": 1})


def test_missing_ortools_names_the_extra(monkeypatch):
    real = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name.startswith("ortools"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    with pytest.raises(cfopt.SolverNotAvailableError, match=r"cfopt\[cpsat\]"):
        cfopt.solvers.make_solver("cpsat")


@pytest.mark.parametrize("seed", [22, 189, 906])
def test_differential_findings(seed):
    """Factuals within rounding of a split the feature cannot cross (immutable, or
    decrease-only on LightGBM's zero split): the CP model once reached the other side,
    its point failed verification, and the answer was weaker than HiGHS's."""
    from .differential import make_instance, run_instance

    record = run_instance(make_instance(seed), ["highs", "cpsat"])
    claims = record["solvers"]
    assert not claims["cpsat"]["problems"] and not record["disagreements"]
    assert claims["cpsat"]["status"] == claims["highs"]["status"]


def test_threads_and_seed():
    """The same seed and one thread give the same answer; threads are CP-SAT workers."""
    frame, y = _continuous(5)
    space = cfopt.FeatureSpace.from_frame(frame)
    model = ExtraTreesClassifier(n_estimators=12, max_depth=6, random_state=0).fit(
        space.transform(frame), y)
    x = frame[model.predict(space.transform(frame)) == 0].iloc[[0]]
    answers = [cfopt.Explainer(model, space, solver="cpsat", seed=7, threads=t).explain(
        x, target=1) for t in (1, 1, 2)]
    assert answers[0].counterfactual.equals(answers[1].counterfactual)
    assert all(a.status is cfopt.Status.OPTIMAL for a in answers)
    assert answers[2].objective == pytest.approx(answers[0].objective, rel=1e-6, abs=1e-9)
