"""Regression tests for issue 16, classes 1-4 (formulation and decoding) of false claims.

A result's claims are proofs about the user's declared problem: the real model's own
``predict`` and scores, the declared space, actionability and constraints, the objective
and the validity margin μ.

* ``Status.OPTIMAL``: no admissible point that the library classifies as the target with
  score ≥ μ is cheaper than the returned objective beyond the MIP gap (relative
  ``mip_gap`` plus an absolute 1e-6);
* ``INFEASIBLE`` / :class:`cfopt.InfeasibleError`: no such point exists;
* ``bound``: a valid lower bound on that optimum;
* every returned point is classified as the target by the library itself.

Whenever a test needs the true optimum it computes it without cfopt: by enumerating a
small discrete grid, by enumerating the sides of every split of a tree ensemble, or in
closed form. Each test's docstring names the class of the issue (1-8) it guards.
"""

from __future__ import annotations

import itertools
import json
import math
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.tree import DecisionTreeClassifier

import cfopt
from cfopt import Status

from .claims_common import MU, explain_or_infeasible, l1_costs, solver_or_skip, within_gap
from .conftest import carla_or_skip


# ======================================================== 1. multiclass target sets
def test_target_set_with_a_class_that_never_wins():
    """Class 1: a target set holding a class that can never beat another class (the
    pairwise big-M goes negative) must not cut the points where another target class
    wins: target=None and target=[1, 2] find what target=2 finds."""
    space = cfopt.FeatureSpace.from_frame(pd.DataFrame({"a": [0, 1], "b": [0, 1]}))
    net = torch.nn.Sequential(torch.nn.Linear(2, 3))
    with torch.no_grad():  # logits 5 - 10a, -10, 10a - 5: class 1 never wins
        net[0].weight.copy_(torch.tensor([[-10.0, 0.0], [0.0, 0.0], [10.0, 0.0]]))
        net[0].bias.copy_(torch.tensor([5.0, -10.0, -5.0]))
    explainer = cfopt.Explainer(net, space)
    x = pd.DataFrame({"a": [0], "b": [0]})  # logits (5, -10, -5): class 0
    single = explainer.explain(x, target=2)
    assert single.status is Status.OPTIMAL and single.counterfactual["a"].iloc[0] == 1
    for target in (None, [1, 2]):
        ce = explain_or_infeasible(explainer, x, target)
        assert not isinstance(ce, Exception), (
            f"target={target!r} raised {type(ce).__name__}: {ce}; but a=1 has logits "
            f"(-5, -10, 5), classified as 2, which is in the target set")
        assert ce.status is Status.OPTIMAL and ce.verified, f"target={target!r}: {ce.status}"
        assert ce.counterfactual["a"].iloc[0] == 1 and ce.objective == pytest.approx(1.0)


def _multiclass_instance(family: str, seed: int):
    """A random 3-class model on three small integer features (class 1 made rarer), and
    its feature space; the model consumes ``space.transform``."""
    rng = np.random.default_rng(seed)
    n = 300
    X = pd.DataFrame({"a": rng.integers(0, 5, n), "b": rng.integers(0, 5, n),
                      "c": rng.integers(0, 4, n)})
    W, b = rng.normal(size=(3, 3)), rng.normal(size=3)
    s = X.to_numpy() @ W + b + rng.normal(scale=0.5, size=(n, 3))
    s[:, 1] -= rng.uniform(0, 1.5)
    y = s.argmax(axis=1)
    space = cfopt.FeatureSpace.from_frame(X)
    Z = space.transform(X)
    if family == "xgboost":
        xgb = pytest.importorskip("xgboost")
        model = xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1,
                                  random_state=seed).fit(Z, y)
    elif family == "sklearn-mlp":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = MLPClassifier((6,), max_iter=500, random_state=seed).fit(Z, y)
    else:
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.ReLU(),
                                    torch.nn.Linear(6, 3))
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        Zt, yt = torch.tensor(Z, dtype=torch.float32), torch.tensor(y)
        for _ in range(150):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(Zt), yt).backward()
            opt.step()
        model.eval()
    return space, model


def _class_scores(model, Z: np.ndarray) -> np.ndarray:
    """The library's own per-class scores (what argmax classifies), without cfopt."""
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            return model(torch.tensor(Z, dtype=torch.float32)).double().numpy()
    if isinstance(model, MLPClassifier):  # relu hidden layers, identity output + softmax
        h = Z
        for W, b in zip(model.coefs_[:-1], model.intercepts_[:-1]):
            h = np.maximum(h @ W + b, 0.0)
        return h @ model.coefs_[-1] + model.intercepts_[-1]
    return model.predict(Z, output_margin=True)  # xgboost


#: (family, seed) of random 3-class instances; today's code answers target-set queries
#: of each wrongly (xgboost 1 and torch 24: false InfeasibleErrors; sklearn-mlp 6: a
#: false OPTIMAL at 1.083 where 0.75 is valid)
MULTICLASS_INSTANCES = [("xgboost", 1), ("sklearn-mlp", 6), ("torch", 24)]


@pytest.mark.parametrize("family, seed", MULTICLASS_INSTANCES,
                         ids=[f"{f}-{s}" for f, s in MULTICLASS_INSTANCES])
def test_target_sets_match_enumeration_on_random_multiclass_models(family, seed):
    """Class 1: with target=None and the same set listed, answers on a random 3-class
    model match the optimum enumerated over the whole integer grid: OPTIMAL at it
    (within the gap) with a point the model classifies in the set, InfeasibleError only
    when no grid point reaches the set with margin μ."""
    grid = pd.DataFrame(list(itertools.product(range(5), range(5), range(4))),
                        columns=["a", "b", "c"])
    space, model = _multiclass_instance(family, seed)
    scores = _class_scores(model, space.transform(grid))
    explainer = cfopt.Explainer(model, space)
    problems = []
    for i in np.random.default_rng(seed).choice(len(grid), 15, replace=False):
        x = grid.iloc[[i]].reset_index(drop=True)
        factual = int(scores[i].argmax())
        others = [k for k in range(3) if k != factual]
        # the target set is every class but the factual's (None, or listed): a point
        # reaches it with margin μ when its best target score beats the factual's by μ
        valid = scores[:, others].max(axis=1) - scores[:, factual] >= MU
        best = l1_costs(space, grid, x)[valid].min() if valid.any() else math.inf
        for target in (None, others):
            ce = explain_or_infeasible(explainer, x, target)
            where = f"x={x.iloc[0].to_dict()}, target={target!r}"
            if isinstance(ce, Exception):
                if math.isfinite(best):
                    problems.append(f"{where}: InfeasibleError, but {best:.6g} is reachable")
                continue
            if ce.verified:
                label = int(_class_scores(model, space.transform(ce.counterfactual)).argmax())
                if label not in others:
                    problems.append(f"{where}: the returned point is classified {label}")
            if not math.isfinite(best):
                continue
            if ce.status is not Status.OPTIMAL or not ce.verified:
                problems.append(f"{where}: {ce.status.value}, but {best:.6g} is reachable")
            elif not within_gap(ce.objective, best):
                problems.append(f"{where}: OPTIMAL {ce.objective:.6g}, but {best:.6g} is "
                                f"reachable")
    assert not problems, f"{len(problems)} wrong answers, the first:\n" + \
        "\n".join(problems[:8])


# ==================================== 2. verification retries and false OPTIMAL claims
def _tree_splits(model, n_inputs: int
                 ) -> tuple[list[np.ndarray], Callable[[float, float], bool]]:
    """Per model input, the sorted split thresholds of a float32 tree ensemble, read
    from the library's own structures, and the library's rule sending input ``z`` right
    of threshold ``t``: XGBoost ``float32(z) >= t`` (float32 conditions, JSON dump),
    sklearn ``float32(z) > t`` (float64 thresholds, ``tree_`` arrays)."""
    found: list[set] = [set() for _ in range(n_inputs)]
    if isinstance(model, GradientBoostingClassifier):
        for estimator in model.estimators_.ravel():
            tree = estimator.tree_
            for node in np.flatnonzero(tree.feature >= 0):
                found[int(tree.feature[node])].add(float(tree.threshold[node]))
        return [np.array(sorted(s)) for s in found], \
            lambda z, t: float(np.float32(z)) > t
    learner = json.loads(model.get_booster().save_raw("json"))["learner"]
    for tree in learner["gradient_booster"]["model"]["trees"]:
        left = np.asarray(tree["left_children"])
        for node in np.flatnonzero(left >= 0):
            found[int(tree["split_indices"][node])].add(
                float(np.float32(tree["split_conditions"][node])))
    return [np.array(sorted(s)) for s in found], \
        lambda z, t: bool(np.float32(z) >= np.float32(t))


def _binary_score(model, Z: np.ndarray) -> np.ndarray:
    """The library's own class-1 score (class 1 iff > 0)."""
    if isinstance(model, GradientBoostingClassifier):
        return model.decision_function(Z)
    return model.predict(Z, output_margin=True)


def _split_sides(feature: cfopt.Feature, threshold: float,
                 right: Callable[[float, float], bool]) -> tuple[float, float] | None:
    """(largest raw value going left, smallest going right) of one split on the min-max
    input (x - shift) / scale, or None when the whole range goes one way."""
    def goes_right(v: float) -> bool:
        return right((v - feature.shift) / feature.scale, threshold)

    lo, hi = feature.lower, feature.upper
    if goes_right(lo) or not goes_right(hi):
        return None
    if feature.is_integral:
        k = math.floor(threshold * feature.scale + feature.shift) - 2
        while not goes_right(k):
            k += 1
        return float(k - 1), float(k)
    for _ in range(2000):  # bisection on floats, keeping goes_right(lo) false, (hi) true
        mid = lo + (hi - lo) / 2
        if mid <= lo or mid >= hi:
            break
        lo, hi = (lo, mid) if goes_right(mid) else (mid, hi)
    return lo, hi


def cheapest_tree_counterfactual(model, space: cfopt.FeatureSpace, x: pd.DataFrame,
                                 cap: float) -> tuple[float, pd.DataFrame] | None:
    """The cheapest point of cost ≤ ``cap`` (range-weighted L1) that a binary tree
    ensemble scores ≥ μ for class 1, by enumerating, per feature, the factual value and
    the values just left and right of every split (the cheapest point of each cell of
    the model's piecewise-constant partition is among them); None if there is none."""
    thresholds, right = _tree_splits(model, space.n_inputs)
    partial: list[tuple[float, dict]] = [(0.0, {})]
    for j, f in enumerate(space):
        x0 = float(x[f.name].iloc[0])
        values = {x0}
        if not f.immutable:
            for t in thresholds[j]:
                values.update(_split_sides(f, t, right) or ())
        weight = 1.0 / f.weight_spread
        options = [(abs(v - x0) * weight, v) for v in values if f.lower <= v <= f.upper]
        partial = [(c + dc, {**p, f.name: v}) for c, p in partial for dc, v in options
                   if c + dc <= cap]
    rows = pd.DataFrame([p for _, p in partial], columns=space.names)
    for f in space:
        if f.is_integral:
            rows[f.name] = rows[f.name].round().astype(int)
    cost = np.array([c for c, _ in partial])
    cost[_binary_score(model, space.transform(rows)) < MU] = np.inf
    if not np.isfinite(cost).any():
        return None
    k = int(np.argmin(cost))
    return float(cost[k]), rows.iloc[[k]].reset_index(drop=True)


#: Give Me Some Credit rows (index labels) whose first solution lands one float32 ulp
#: on the wrong side of a split; today the retried problem's optimum is reported OPTIMAL
#: at 2.6x, 7.1x and 42x (XGBoost), 1.015x and 4.4x (sklearn) the cost of a verified
#: counterfactual
GMC_CASES = [("xgboost", (11487, 11683, 12997)), ("sklearn-gb", (10196, 12661))]


@pytest.mark.parametrize("family, rows", GMC_CASES, ids=[c[0] for c in GMC_CASES])
def test_verification_retry_is_not_reported_optimal(family, rows):
    """Class 2: when the solver's point fails verification on a float32 tree ensemble
    and the query is retried with a larger margin, the answer is verified by the
    library and, if OPTIMAL (or retried), no verified counterfactual found by
    enumerating the splits' sides is cheaper beyond the gap."""
    data = carla_or_skip(cfopt.datasets.load_gmc)
    train = data.X.iloc[:10000]
    space = cfopt.FeatureSpace.from_frame(train)
    if family == "xgboost":
        xgb = pytest.importorskip("xgboost")
        model = xgb.XGBClassifier(n_estimators=50, max_depth=4, n_jobs=1, random_state=0)
    else:
        model = GradientBoostingClassifier(n_estimators=50, max_depth=3, random_state=0)
    model.fit(space.transform(train), data.y.iloc[:10000])
    explainer = cfopt.Explainer(model, space)
    problems = []
    for idx in rows:
        x = data.X.loc[[idx]].reset_index(drop=True)
        assert model.predict(space.transform(x))[0] == 0
        ce = explainer.explain(x, target=1)
        if not ce.verified:
            problems.append(f"row {idx}: {ce.status.value} ({ce.message})")
            continue
        if model.predict(space.transform(ce.counterfactual))[0] != 1:
            problems.append(f"row {idx}: the returned point is not classified 1")
        if ce.attempts > 1 or ce.status is Status.OPTIMAL:
            cheaper = cheapest_tree_counterfactual(model, space, x, cap=ce.objective)
            if cheaper is not None and not within_gap(ce.objective, cheaper[0]):
                cost, point = cheaper
                moves = {k: (float(x[k].iloc[0]), float(v)) for k, v in point.iloc[0].items()
                         if v != x[k].iloc[0]}
                score = float(_binary_score(model, space.transform(point))[0])
                problems.append(f"row {idx}: {ce.status.value} {ce.objective:.6g} after "
                                f"{ce.attempts} solves, but moving {moves} costs {cost:.6g} "
                                f"and the model scores it {score:.4g} >= {MU}")
    assert not problems, "\n".join(problems)


# =========================================== 3. decoding must not snap optimal moves
@pytest.mark.parametrize("solver", ["highs", "cbc", "gurobi"])
def test_one_unit_move_on_a_wide_integer_feature(solver):
    """Class 3: decoding must not snap a one-unit move on an integer feature of range
    1e6 back to the factual: a stump split at 500783.5 is crossed by income 500784."""
    frame = pd.DataFrame({"income": [0, 500_783, 500_784, 1_000_000]})
    space = cfopt.FeatureSpace.from_frame(frame)
    stump = DecisionTreeClassifier(max_depth=1, random_state=0)
    stump.fit(space.transform(frame), [0, 0, 1, 1])
    assert stump.tree_.threshold[0] * 1e6 == pytest.approx(500_783.5)
    x = pd.DataFrame({"income": [500_783]})
    with solver_or_skip(solver):
        ce = cfopt.Explainer(stump, space, solver=solver).explain(x, target=1)
    assert ce.status is Status.OPTIMAL and ce.verified, f"{ce.status.value}: {ce.message}"
    assert ce.counterfactual["income"].iloc[0] == 500_784
    assert ce.objective == pytest.approx(1e-6, rel=1e-9)


@pytest.mark.parametrize("solver", ["highs", "gurobi"])
def test_move_below_the_snap_tolerance_is_optimal_at_the_closed_form(solver):
    """Class 3: a logistic regression whose factual logit is -1e-9 is crossed by a move
    of 2e-7 (below 1e-6 x range): OPTIMAL must be at that closed-form optimum, not at
    the 10x larger move a retry with margin 10μ finds."""
    frame = pd.DataFrame({"x": np.linspace(0, 1, 11), "w": np.linspace(1, 0, 11)})
    space = cfopt.FeatureSpace.from_frame(frame)
    model = LogisticRegression().fit(space.transform(frame), (frame.x > 0.5).astype(int))
    slope = 5000.0
    model.coef_ = np.array([[slope, 0.0]])
    model.intercept_ = np.array([-1e-9 - slope * 0.5])
    x = pd.DataFrame({"x": [0.5], "w": [0.3]})
    assert -2e-9 < model.decision_function(space.transform(x))[0] < 0
    f = space["x"]
    z_star = (MU - model.intercept_[0]) / slope  # the input where the logit reaches μ
    optimum = (z_star * f.scale + f.shift - 0.5) / f.weight_spread
    assert optimum < 1e-6 * (f.upper - f.lower)
    with solver_or_skip(solver):
        ce = cfopt.Explainer(model, space, solver=solver).explain(x, target=1)
    assert ce.status is Status.OPTIMAL and ce.verified, f"{ce.status.value}: {ce.message}"
    assert ce.objective == pytest.approx(optimum, rel=1e-6), (
        f"OPTIMAL at {ce.objective:.8g} = {ce.objective / optimum:.4g} x the optimum "
        f"{optimum:.8g} (attempts {ce.attempts})")


# ============================ 4. the split gap must not exclude admissible values
def test_immutable_value_beside_a_split_is_admissible():
    """Class 4: an immutable continuous value 1e-6 beside a LightGBM split (float64
    comparisons) lies inside cfopt's excluded band (1e-4 x range), yet the model and the
    query admit it: the answer is the enumerated optimum, not an InfeasibleError."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    n = 2000
    frame = pd.DataFrame({"rate": rng.integers(0, 101, n) / 100.0,
                          "score": rng.integers(0, 11, n)})
    y = ((frame.rate > 0.035) & (frame.score >= 5)).astype(int).to_numpy()
    space = cfopt.FeatureSpace.from_frame(frame).immutable("rate")
    model = lgb.LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=5,
                               verbose=-1, random_state=0).fit(space.transform(frame), y)
    dump = model.booster_.dump_model()

    def splits(node):
        if "split_feature" in node:
            yield node["split_feature"], node["threshold"]
            yield from splits(node["left_child"])
            yield from splits(node["right_child"])

    rate_splits = [t for info in dump["tree_info"] for j, t in splits(info["tree_structure"])
                   if j == 0]
    assert any(abs(t - 0.035) < 1e-12 for t in rate_splits)
    x = pd.DataFrame({"rate": [0.035001], "score": [2]})
    candidates = pd.DataFrame({"rate": [0.035001] * 11, "score": range(11)})
    valid = model.predict(space.transform(candidates), raw_score=True) >= MU
    optimum = l1_costs(space, candidates, x)[valid].min()
    ce = explain_or_infeasible(cfopt.Explainer(model, space), x, 1)
    assert not isinstance(ce, Exception), (
        f"{type(ce).__name__}: {ce}; but score={int(candidates.score[valid].min())} with "
        f"rate 0.035001 is classified 1 (cost {optimum:g})")
    assert ce.status is Status.OPTIMAL and ce.verified, f"{ce.status.value}: {ce.message}"
    assert ce.counterfactual["rate"].iloc[0] == 0.035001
    assert ce.objective == pytest.approx(optimum, rel=1e-9)
