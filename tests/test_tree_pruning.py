"""Per-query leaf pruning (cfopt.query.restrictions.trees) is exact: the same optimum with and
without it, the heuristic point is a verified counterfactual no better than the
optimum, and the query box holds every counterfactual within the radius."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

import cfopt
from cfopt.query.restrictions.relu import objective_value
from cfopt.query.restrictions.tree_walk import greedy_tree_counterfactual
from cfopt.query.restrictions.trees import query_box
from cfopt.space.encoding import encode

MODELS = {
    "forest": lambda: RandomForestClassifier(40, max_depth=5, random_state=0),
    "boosting": lambda: GradientBoostingClassifier(n_estimators=40, max_depth=3,
                                                   random_state=0),
}


@pytest.mark.parametrize("objective", ["l1", {"l1": 1.0, "l0": 0.05}, "linf"])
@pytest.mark.parametrize("family", list(MODELS))
def test_pruning_keeps_the_optimum(german, family, objective):
    space = cfopt.FeatureSpace.from_frame(german.X)
    space.immutable("foreign_worker", "status_sex").increase_only("age")
    model = MODELS[family]().fit(space.transform(german.X), german.y)
    pruned = cfopt.Explainer(model, space, objective=objective, mip_gap=0.0)
    full = cfopt.Explainer(model, space, objective=objective, mip_gap=0.0,
                           tighten_per_query=False)
    pred = pruned.milp.predict(german.X)
    rows = [i for i in range(len(pred)) if pred[i] == 0][:5]
    leaves = len(pruned.milp.predictor.leaf)
    pruned_any = False
    for i in rows:
        x = german.X.iloc[[i]]
        a, b = pruned.explain(x, target=1), full.explain(x, target=1)
        assert a.verified and b.verified
        assert a.objective == pytest.approx(b.objective, rel=1e-7, abs=1e-9)
        assert a.details["pruned_leaves"] < leaves
        pruned_any |= a.details["pruned_leaves"] > 0
        heuristic = a.details.get("heuristic_objective")
        if heuristic is not None:
            assert heuristic >= a.objective - 1e-9
    assert pruned_any


def test_heuristic_and_query_box(german):
    space = cfopt.FeatureSpace.from_frame(german.X)
    space.immutable("foreign_worker").decrease_only("duration")
    model = MODELS["forest"]().fit(space.transform(german.X), german.y)
    explainer = cfopt.Explainer(model, space)
    m = explainer.milp
    pred = m.predict(german.X)
    found = 0
    for i in [i for i in range(len(pred)) if pred[i] == 0][:10]:
        x = german.X.iloc[[i]]
        m.set_factual(x)
        m.set_target(1)
        candidate = greedy_tree_counterfactual(m)
        if candidate is None:
            continue
        found += 1
        assert m.classify(candidate)[0] == 1 and not m.violations(candidate)
        ce = explainer.explain(x, target=1)
        radius = objective_value(m, candidate)
        assert ce.objective <= radius + 1e-9
        # every model input of the optimum (objective <= radius) lies in the box
        box = np.array(query_box(m, radius))
        z = encode(space, m.input_specs, ce.counterfactual)[0]
        assert ((z >= box[:, 0] - 1e-9) & (z <= box[:, 1] + 1e-9)).all()
        # actionability alone: immutable inputs are points, decrease-only capped above
        free = np.array(query_box(m))
        z0 = encode(space, m.input_specs, x)[0]
        names = space.input_names
        k = names.index("duration")
        assert free[k, 1] == pytest.approx(z0[k])
        for j, name in enumerate(names):
            if name.startswith("foreign_worker"):
                assert free[j, 0] == free[j, 1] == pytest.approx(z0[j])
    assert found >= 5
