"""Property checks over random feature spaces and random small models of every family.

Shared by ``tests/test_properties.py`` (hypothesis, a few examples per family) and
``benchmarks/robustness_suite.py`` (more examples, counted per family). One example: a
random space (2-5 features of every kind, raw ranges from 1 to 1e5 next to binaries,
random actionability, min-max / standard / no scaling, sometimes a cap on changes),
random rows, a random small model fitted on them, a random row to explain. The checks
use the libraries directly, never cfopt's own predictions:

* a returned counterfactual is classified as the target by the model's own
  ``predict`` on ``space.transform`` of the decoded raw row;
* it satisfies every declared constraint on that raw row (kinds, bounds, categories,
  immutable, increase-/decrease-only, the cap);
* its objective is the distance of that row (weighted L1, L0 or weighted L∞),
  recomputed;
* the solver's bound never exceeds the objective; OPTIMAL ⇒ it is within the MIP gap;
* no sampled admissible point that the model classifies as the target with the
  validity margin is cheaper than an OPTIMAL answer (beyond the MIP gap), and none
  exists when cfopt reports the query infeasible.
"""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import cfopt

FAMILIES = ("mlp", "tree", "forest", "boosting", "linear", "svm")
TREE_FAMILIES = ("tree", "forest", "boosting")
N_ROWS = 80
MARGIN = 1e-3
MIP_GAP = 1e-4
TIME_LIMIT = 60.0
#: examples checked per family in this process (the report prints them)
EXAMPLES: Counter = Counter()

# hypothesis profiles: a few examples per family in the test suite, more in the report;
# derandomized, so every run checks the same examples
settings.register_profile("hardening-ci", max_examples=5, deadline=None, derandomize=True,
                          database=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("hardening-report", max_examples=40, deadline=None,
                          derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class FeatureSpec:
    kind: str
    low: float
    width: float
    levels: int
    action: str  # "any", "immutable", "increase", "decrease"
    rounded: bool  # continuous values on a coarse grid: ties, factuals on split sides


@dataclass(frozen=True)
class Example:
    family: str
    features: tuple[FeatureSpec, ...]
    scaling: str
    objective: str  # "l1", "l0" or "linf"
    max_changes: int | None
    variant: int
    row: int
    seed: int


@dataclass
class Result:
    """What one example gave: ``outcome`` is ``"found"``, ``"infeasible"``, or a
    status; ``problems`` lists every failed check."""

    outcome: str
    problems: list[str] = field(default_factory=list)


# --------------------------------------------------------------------- strategies
@st.composite
def feature_specs(draw: Any) -> FeatureSpec:
    kind = draw(st.sampled_from(["continuous", "integer", "binary", "categorical", "ordinal"]))
    width = {"continuous": draw(st.sampled_from([1.0, 250.0, 50_000.0])),
             "integer": float(draw(st.sampled_from([2, 5, 40, 20_000])))}.get(kind, 1.0)
    low = draw(st.sampled_from([0.0, -width / 2, 10_000.0])) if kind in (
        "continuous", "integer") else 0.0
    actions = ["any", "immutable"] if kind == "categorical" else [
        "any", "any", "immutable", "increase", "decrease"]
    return FeatureSpec(kind, float(np.floor(low)) if kind == "integer" else low, width,
                       draw(st.integers(2, 4)), draw(st.sampled_from(actions)),
                       draw(st.booleans()))


def examples(family: str) -> st.SearchStrategy[Example]:
    return st.builds(Example, family=st.just(family),
                     features=st.lists(feature_specs(), min_size=2, max_size=5).map(tuple),
                     scaling=st.sampled_from(["minmax", "standard", "none"]),
                     objective=st.sampled_from(["l1", "l1", "l0", "linf"]),
                     max_changes=st.sampled_from([None, None, 1, 2]),
                     variant=st.integers(0, 3), row=st.integers(0, N_ROWS - 1),
                     seed=st.integers(0, 2**16))


# ------------------------------------------------------------------ construction
def frame_and_space(ex: Example) -> tuple[pd.DataFrame, cfopt.FeatureSpace]:
    rng = np.random.default_rng(ex.seed)
    columns, kinds = {}, {}
    for k, f in enumerate(ex.features):
        name = f"{f.kind[:3]}{k}"
        if f.kind == "continuous":
            values = rng.random(N_ROWS)
            columns[name] = f.low + f.width * (np.round(values, 1) if f.rounded else values)
        elif f.kind == "integer":
            columns[name] = rng.integers(int(f.low), int(f.low + f.width) + 1, N_ROWS)
        elif f.kind == "binary":
            columns[name] = rng.integers(0, 2, N_ROWS)
        elif f.kind == "categorical":
            columns[name] = rng.choice([f"c{i}" for i in range(f.levels)], N_ROWS)
        else:
            levels = [f"o{i}" for i in range(max(f.levels, 2))]
            columns[name] = pd.Categorical(rng.choice(levels, N_ROWS), categories=levels,
                                           ordered=True)
        kinds[name] = f.kind
    frame = pd.DataFrame(columns)
    space = cfopt.FeatureSpace.from_frame(frame, scaling=ex.scaling, kinds=kinds)
    for (name, f) in zip(frame.columns, ex.features):
        if f.action == "immutable":
            space.immutable(name)
        elif f.action == "increase":
            space.increase_only(name)
        elif f.action == "decrease":
            space.decrease_only(name)
    return frame, space


def fit_model(ex: Example, Z: np.ndarray) -> Any:
    """A random small model of the family, fitted on ``Z`` (both classes present)."""
    rng = np.random.default_rng(ex.seed + 1)
    standard = (Z - Z.mean(axis=0)) / np.where(Z.std(axis=0) > 0, Z.std(axis=0), 1.0)
    score = standard @ rng.normal(size=Z.shape[1])
    y = (score > np.median(score)).astype(int)
    if y.min() == y.max():
        y = np.arange(len(y)) % 2
    if ex.family == "mlp":
        return _random_net(Z, (3 + 2 * ex.variant,) * (1 + ex.variant % 2), ex.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence of the tiny models is irrelevant
        return _estimator(ex).fit(Z, y)


def _estimator(ex: Example) -> Any:
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        GradientBoostingClassifier,
        HistGradientBoostingClassifier,
        RandomForestClassifier,
    )
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC, LinearSVC
    from sklearn.tree import DecisionTreeClassifier

    v, seed = ex.variant, ex.seed
    if ex.family == "linear":
        return LogisticRegression(C=1.0, max_iter=300)
    if ex.family == "svm":
        return SVC(kernel="linear", C=1.0) if v % 2 and ex.scaling != "none" else \
            LinearSVC(C=1.0, max_iter=2000)
    if ex.family == "tree":
        return DecisionTreeClassifier(max_depth=2 + v % 3, random_state=seed)
    if ex.family == "forest":
        cls = RandomForestClassifier if v % 2 else ExtraTreesClassifier
        return cls(n_estimators=3 + v, max_depth=3, random_state=seed)
    if v == 0:
        return GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=seed)
    if v == 1:
        return HistGradientBoostingClassifier(max_iter=5, max_depth=2, min_samples_leaf=5,
                                              random_state=seed)
    if v == 2:
        from xgboost import XGBClassifier

        return XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1, random_state=seed)
    from lightgbm import LGBMClassifier

    return LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=5, n_jobs=1,
                          verbose=-1, random_state=seed)


def _random_net(Z: np.ndarray, hidden: tuple[int, ...], seed: int) -> torch.nn.Sequential:
    """A random ReLU network whose decision boundary splits the rows in half."""
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    width = Z.shape[1]
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    net = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1)).eval()
    with torch.no_grad():
        logits = net(torch.tensor(Z, dtype=torch.float32))[:, 0]
        net[-1].bias -= float(logits.median()) + 1e-3 * float(logits.std() + 1)
    return net


# --------------------------------------------------------------- independent checks
def predict(model: Any, Z: np.ndarray) -> np.ndarray:
    """Class labels from the library itself."""
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            logits = model(torch.tensor(Z, dtype=torch.float32))[:, 0].numpy()
        return (logits > 0).astype(int)
    return np.asarray(model.predict(Z)).astype(int)


def score(model: Any, Z: np.ndarray) -> np.ndarray:
    """The library's score for class 1 against class 0 (what the margin applies to)."""
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            return model(torch.tensor(Z, dtype=torch.float32))[:, 0].double().numpy()
    name = type(model).__name__
    if name.startswith(("RandomForest", "ExtraTrees", "DecisionTree")):
        p = model.predict_proba(Z)
        return p[:, 1] - p[:, 0]
    if name == "XGBClassifier":
        return model.predict(Z, output_margin=True)
    if name == "LGBMClassifier":
        return model.predict(Z, raw_score=True)
    return model.decision_function(Z)


def weights(space: cfopt.FeatureSpace) -> dict[str, float]:
    return {f.name: 1.0 if f.is_onehot else 1.0 / (f.spread if f.spread else 1.0)
            for f in space}


def cost(space: cfopt.FeatureSpace, x: pd.Series, rows: pd.DataFrame,
         objective: str = "l1") -> np.ndarray:
    """Distance of raw rows from ``x``: range-weighted L1 (a category change counts 1),
    L0 (changed features) or range-weighted L∞."""
    w = weights(space)
    moves = []
    for f in space:
        if f.is_onehot:
            moves.append(w[f.name] * (rows[f.name].to_numpy() != x[f.name]))
        else:
            codes = np.array([f.to_code(v) for v in rows[f.name]])
            moves.append(w[f.name] * np.abs(codes - f.to_code(x[f.name])))
    moves = np.array(moves).reshape(len(moves), len(rows))
    if objective == "l0":
        return (moves > 0).sum(axis=0).astype(float)
    return moves.max(axis=0) if objective == "linf" else moves.sum(axis=0)


def admissible(space: cfopt.FeatureSpace, x: pd.Series, rows: pd.DataFrame,
               max_changes: int | None) -> tuple[np.ndarray, list[str]]:
    """Which raw rows meet every declared constraint, and the first violation found."""
    ok = np.ones(len(rows), dtype=bool)
    why: list[str] = []
    changed = np.zeros(len(rows), dtype=int)
    for f in space:
        col = rows[f.name]
        moved = (col != x[f.name]).to_numpy()
        changed += moved
        if f.labelled:
            inside = col.isin(f.categories).to_numpy()
        else:
            vals = col.to_numpy(dtype=float)
            inside = (vals >= f.lower) & (vals <= f.upper)
            if f.is_integral:
                inside &= vals == np.round(vals)
        checks = {"outside its bounds or categories": ~inside}
        if f.immutable:
            checks["immutable but changed"] = moved
        if f.direction != "any":
            delta = np.array([f.to_code(v) for v in col]) - f.to_code(x[f.name])
            checks[f"{f.direction}-only but moved the other way"] = (
                delta < 0 if f.direction == "increase" else delta > 0)
        for what, bad in checks.items():
            if bad.any() and not why:
                why.append(f"{f.name!r} {what}")
            ok &= ~bad
    if max_changes is not None:
        over = changed > max_changes
        if over.any() and not why:
            why.append(f"{int(changed.max())} features changed, above the cap {max_changes}")
        ok &= ~over
    return ok, why


def candidates(space: cfopt.FeatureSpace, x: pd.Series, max_changes: int | None,
               rng: np.random.Generator, n_random: int = 300) -> pd.DataFrame:
    """Admissible raw rows: single-feature sweeps from ``x`` and random sparse moves."""
    mutable = [f for f in space if not f.immutable]
    rows = []
    for f in mutable:
        for value in _values(f, x[f.name], rng, 25):
            rows.append({**x.to_dict(), f.name: value})
    for _ in range(n_random if mutable else 0):
        k = len(mutable) if max_changes is None else rng.integers(1, max_changes + 1)
        chosen = rng.choice(len(mutable), size=min(k, len(mutable)), replace=False)
        row = x.to_dict()
        for i in chosen:
            f = mutable[i]
            row[f.name] = _values(f, x[f.name], rng, 1)[0]
        rows.append(row)
    return pd.DataFrame(rows, columns=space.names)


def _values(f: Any, current: Any, rng: np.random.Generator, n: int) -> list[Any]:
    if f.is_onehot:
        return [f.categories[i] for i in rng.integers(0, len(f.categories), n)]
    lo, hi = f.lower, f.upper
    code = f.to_code(current)
    if f.direction == "increase":
        lo = code
    elif f.direction == "decrease":
        hi = code
    codes = rng.uniform(lo, hi, n)
    if f.is_integral:
        codes = np.round(codes)
    return [f.from_code(c) for c in codes]


# --------------------------------------------------------------------- the check
def check(ex: Example) -> Result:
    """Build the example, explain its row, and check everything (module docstring)."""
    EXAMPLES[ex.family] += 1
    frame, space = frame_and_space(ex)
    Z = space.transform(frame)
    model = fit_model(ex, Z)
    x = frame.iloc[[ex.row]].reset_index(drop=True)
    current = int(predict(model, space.transform(x))[0])
    target = 1 - current
    formulation = ("leaf", "threshold")[ex.seed % 2] if ex.family in TREE_FAMILIES else None
    explainer = cfopt.Explainer(model, space, objective=ex.objective,
                                max_changes=ex.max_changes, margin=MARGIN,
                                mip_gap=MIP_GAP, time_limit=TIME_LIMIT,
                                tree_formulation=formulation)
    rng = np.random.default_rng(ex.seed + 2)
    pool = candidates(space, space.validate(x).iloc[0], ex.max_changes, rng)
    valid = pool
    if len(pool):
        sign = 1.0 if target == 1 else -1.0
        # twice the margin: clear of float32-vs-float64 differences at the MILP's margin
        decisive = sign * score(model, space.transform(pool, check_bounds=False)) >= 2 * MARGIN
        ok, _ = admissible(space, space.validate(x).iloc[0], pool, ex.max_changes)
        valid = pool[decisive & ok]
    try:
        ce = explainer.explain(x, target=target)
    except cfopt.InfeasibleError as exc:
        result = Result("infeasible")
        if len(valid):
            result.problems.append(f"reported infeasible ({exc}) but {len(valid)} sampled "
                                   f"admissible points reach the target, e.g. "
                                   f"{valid.iloc[0].to_dict()}")
        return result
    return _check_answer(ex, space, model, x, target, ce, valid)


def _check_answer(ex: Example, space: cfopt.FeatureSpace, model: Any, x: pd.DataFrame,
                  target: int, ce: cfopt.Counterfactual, valid: pd.DataFrame) -> Result:
    result = Result(ce.status.value)
    problems = result.problems
    if ce.status not in (cfopt.Status.OPTIMAL, cfopt.Status.FEASIBLE):
        problems.append(f"status {ce.status.value}: {ce.message}")
        return result
    result.outcome = "found"
    row = ce.counterfactual
    if row is None or not ce.verified:
        problems.append("a solution status without a verified counterfactual")
        return result
    factual = space.validate(x).iloc[0]
    if int(predict(model, space.transform(row, check_bounds=False))[0]) != target:
        problems.append(f"the model does not classify {row.iloc[0].to_dict()} as {target}")
    _, why = admissible(space, factual, row, ex.max_changes)
    problems.extend(f"declared constraint broken: {w}" for w in why)
    objective = float(cost(space, factual, row, ex.objective)[0])
    if abs(objective - ce.objective) > 1e-6 * max(1.0, abs(objective)):
        problems.append(f"objective {ce.objective} but the decoded row costs {objective}")
    tol = 1e-6 * max(1.0, abs(ce.objective))
    if ce.bound is not None and ce.bound > ce.objective + tol:
        problems.append(f"bound {ce.bound} above the objective {ce.objective}")
    if ce.status is cfopt.Status.OPTIMAL:
        if ce.bound is None or ce.bound > ce.objective + tol or \
                ce.objective - ce.bound > MIP_GAP * abs(ce.objective) + tol:
            problems.append(f"OPTIMAL with objective {ce.objective} but bound {ce.bound}")
        best = cost(space, factual, valid, ex.objective).min() if len(valid) else np.inf
        if best < ce.objective * (1 - MIP_GAP) - 1e-6:
            problems.append(f"OPTIMAL objective {ce.objective} but a sampled admissible "
                            f"point reaches the target at cost {best}")
    return result
