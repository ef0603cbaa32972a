"""CoGS (Virgolin & Fracaros): loss, plausibility by construction, robustness terms,
reproducibility."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

import cfopt
from cfopt.baselines.cogs import CoGS
from cfopt.space import perturbations
from cfopt.space.feature import Perturbation
from cfopt.space.space import FeatureSpace

from .conftest import mixed_data

FAST = {"population": 120, "generations": 25}


def annotated(space: FeatureSpace) -> FeatureSpace:
    space = FeatureSpace.from_dict(space.to_dict())
    space.set("income", perturbation=Perturbation.relative(0.1, 0.1))
    space.set("age", perturbation=Perturbation.absolute(2, 0))
    space.set("debt", perturbation=Perturbation.absolute(5, 5))
    space.set("housing", perturbation=Perturbation.to_categories("rent", "free"))
    return space


@pytest.fixture(scope="module")
def mixed():
    X, y = mixed_data()
    space = FeatureSpace.from_frame(X)
    model = RandomForestClassifier(n_estimators=15, max_depth=5, random_state=0)
    model.fit(space.transform(X), y)
    rejected = [X.iloc[[i]] for i in np.flatnonzero(model.predict(space.transform(X)) == 0)[:6]]
    return X, space, model, rejected


def eq9(space: FeatureSpace, x: pd.DataFrame, z: pd.DataFrame) -> float:
    """Eq. 9 of a valid z, by hand from the raw rows."""
    terms, changed = [], 0
    for f in space:
        a, b = x[f.name].iloc[0], z[f.name].iloc[0]
        changed += a != b
        terms.append(float(a != b) if f.labelled else abs(a - b) / f.weight_spread)
    return 0.5 * np.mean(terms) + 0.5 * changed / len(space)


def test_counterfactuals_verified_with_eq9_loss_and_reproducible(mixed):
    _, space, model, rejected = mixed
    cogs = CoGS(model, space, **FAST)
    for x in rejected[:4]:
        ce = cogs.explain(x, target=1)
        assert ce.found and ce.status is cfopt.Status.FEASIBLE and ce.solver == "cogs"
        assert model.predict(space.transform(ce.counterfactual))[0] == 1
        space.validate(ce.counterfactual)
        assert ce.objective == pytest.approx(eq9(space, x, ce.counterfactual))
        assert ce.objective < 1  # valid: no invalidity term
        assert ce.details["generations"] <= FAST["generations"]
        again = cogs.explain(x, target=1)
        pd.testing.assert_frame_equal(ce.counterfactual, again.counterfactual)


def test_plausibility_by_construction(mixed):
    _, space, model, rejected = mixed
    space = FeatureSpace.from_dict(space.to_dict())
    space.immutable("housing", "married").increase_only("age").decrease_only("debt")
    cogs = CoGS(model, space, **FAST)
    for x in rejected[:4]:
        g0 = cogs.genes.of_frame(space.validate(x))[0]
        lo, hi = cogs._interval(g0)
        rng = np.random.default_rng(0)
        # every individual the search makes is plausible: initial draws and offspring
        P = cogs._uniform(lo, hi, (500, cogs.genes.d), rng)
        children = cogs._vary(P, g0, lo, hi, hi > lo, rng)
        for G in (P, children):
            assert (G >= lo).all() and (G <= hi).all()
            frame = cogs.genes.frame(G)
            assert (frame.housing == x.housing.iloc[0]).all()
            assert (frame.married == x.married.iloc[0]).all()
            assert (frame.age >= x.age.iloc[0]).all() and (frame.debt <= x.debt.iloc[0]).all()
        ce = cogs.explain(x, target=1)
        if ce.found:
            row = ce.counterfactual.iloc[0]
            assert row.housing == x.housing.iloc[0] and row.age >= x.age.iloc[0]


def test_setback_and_k_neighbourhood_match_the_perturbation_module(mixed):
    X, space, model, rejected = mixed
    space = annotated(space)
    cogs = CoGS(model, space, population=40, generations=3, m=16, robust="CK")
    x = rejected[0]
    g0 = cogs.genes.of_frame(space.validate(x))[0]
    rng = np.random.default_rng(3)
    G = cogs._uniform(*cogs._interval(g0), (12, cogs.genes.d), rng)
    G[:6, 1] = g0[1]  # some keep age
    setback = cogs.setback(G, g0)
    weights = {f.name: 1.0 / f.weight_spread for f in space}
    rows = cogs.genes.frame(G)
    for j in range(len(G)):
        z = rows.iloc[[j]]
        assert setback[j].sum() == pytest.approx(
            perturbations.setback_cost(space, weights, x, z))
    S = cogs.k_neighbours(G, g0, rng)
    for j in range(len(G)):
        z = rows.iloc[j]
        samples = cogs.genes.frame(S[j])
        for f in space:
            if x[f.name].iloc[0] != z[f.name] or f.perturbation is None:
                assert (samples[f.name] == z[f.name]).all()
            elif f.is_onehot:
                assert set(samples[f.name]) <= set(f.perturbation.categories)
            else:
                lo, hi = perturbations.numeric_range(f, f.to_code(z[f.name]))
                assert samples[f.name].between(lo, hi).all()
    ce = cogs.explain(x, target=1)
    assert ce.found and 0.0 <= ce.details["k_score"] <= 1.0 and ce.details["setback"] >= 0


def test_k_robust_loss_prefers_robust_points(mixed):
    _, space, model, rejected = mixed
    space = annotated(space)
    plain = CoGS(model, space, **FAST)
    robust = CoGS(model, space, robust="K", m=32, **FAST)
    judge = CoGS(model, space, robust="K", m=400)
    x = rejected[5]  # its closest counterfactual has a fragile K-neighbourhood
    a, b = plain.explain(x, target=1), robust.explain(x, target=1)
    g0 = plain.genes.of_frame(space.validate(x))[0]
    score = [judge.k_scores(plain.genes.of_frame(ce.counterfactual), g0, (1,),
                            np.random.default_rng(0))[0] for ce in (a, b)]
    assert score[0] < 0.5 < 0.9 <= score[1]


def test_bad_options(mixed):
    _, space, model, rejected = mixed
    with pytest.raises(ValueError, match="robust"):
        CoGS(model, space, robust="X")
    with pytest.raises(ValueError, match="perturbation annotations"):
        CoGS(model, space, robust="K")
    with pytest.raises(ValueError, match="population"):
        CoGS(model, space, population=0)
    with pytest.raises(ValueError, match="mutation_scale"):
        CoGS(model, space, mutation_scale=0)
    with pytest.raises(ValueError, match="classes"):
        CoGS(model, space, **FAST).explain(rejected[0], target=5)
    with pytest.raises(ValueError, match="one row"):
        CoGS(model, space, **FAST).explain(pd.concat(rejected[:2]))
