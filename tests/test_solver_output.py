"""Solver output reaches the user only when asked for (``verbose=True``)."""

from __future__ import annotations

from sklearn.linear_model import LogisticRegression

import cfopt

from .conftest import german_space


def test_highs_pool_query_prints_nothing(german, capfd):
    """A pool query loads the model into HiGHS itself (to watch its incumbents); Pyomo's
    update then sent zero coefficients, and HiGHS printed one C-level ``changeCoeff``
    warning per zero to fd 1 (~40 lines on German credit)."""
    space = german_space(german)
    model = LogisticRegression(max_iter=3000).fit(space.transform(german.X), german.y)
    rejected = german.X[model.predict(space.transform(german.X)) == 0]
    explainer = cfopt.Explainer(model, space, solver="highs")
    capfd.readouterr()
    found = explainer.explain(rejected.iloc[[0]], target=1, n=5, diversity="pool")
    out, err = capfd.readouterr()
    assert found.method == "pool" and len(found) >= 1
    assert "changeCoeff" not in out + err
    assert out == ""
