"""Solver output reaches the user only when asked for (``verbose=True``)."""

from __future__ import annotations

import pytest
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


@pytest.mark.parametrize("verbose", [True, False])
def test_highs_log_is_printed_exactly_when_verbose(german, capfd, verbose):
    """HiGHS runs on the loaded model directly (not through Pyomo's ``solve``, which
    captured its output): ``verbose=True`` prints its log to the terminal, the default
    prints nothing."""
    space = german_space(german)
    model = LogisticRegression(max_iter=3000).fit(space.transform(german.X), german.y)
    rejected = german.X[model.predict(space.transform(german.X)) == 0]
    explainer = cfopt.Explainer(model, space, solver="highs", verbose=verbose)
    capfd.readouterr()
    ce = explainer.explain(rejected.iloc[[0]], target=1)
    out, err = capfd.readouterr()
    assert ce.status is cfopt.Status.OPTIMAL
    if verbose:
        assert "HiGHS" in out and "Solving report" in out
    else:
        assert out == "" and err == ""
