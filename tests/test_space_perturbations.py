"""The sampled perturbation notions of :mod:`cfopt.space.perturbations` on a hand-built
space, by hand: the changed features, each feature's K-interval and switch categories,
the maximal C-setback and its cost, and the samples (within their boxes, covering them,
each part moved only when asked)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import cfopt
from cfopt import Perturbation
from cfopt.space import perturbations as P
from cfopt.space.feature import Feature

SPACE = cfopt.FeatureSpace([
    Feature("x", "continuous", 0.0, 10.0, perturbation=Perturbation.absolute(1.0, 2.0)),
    Feature("r", "continuous", -10.0, 10.0, perturbation=Perturbation.relative(0.5, 0.25)),
    Feature("n", "integer", 0.0, 10.0, perturbation=Perturbation.absolute(1.5, 1.5)),
    Feature("c", "categorical", categories=("a", "b", "c"),
            perturbation=Perturbation.to_categories("a", "b")),
    Feature("o", "ordinal", categories=("lo", "mid", "hi"),
            perturbation=Perturbation.to_categories("mid")),
    Feature("k", "continuous", 0.0, 10.0),
])
X = {"x": 5.0, "r": -4.0, "n": 5, "c": "c", "o": "lo", "k": 1.0}


def row(**values) -> pd.DataFrame:
    return pd.DataFrame([{**X, **values}], columns=SPACE.names)


def test_changed_features_in_space_order():
    x, z = SPACE.validate(row()).iloc[0], SPACE.validate(row(k=2.0, x=6.0)).iloc[0]
    assert P.changed(SPACE, x, z) == ["x", "k"]
    assert P.changed(SPACE, x, x) == []


@pytest.mark.parametrize("name, value, expected", [
    ("x", 5.0, (3.0, 6.0)), ("x", 9.5, (7.5, 10.0)), ("x", 1.0, (0.0, 2.0)),  # clipped
    ("r", -4.0, (-5.0, -2.0)), ("r", 8.0, (6.0, 10.0)),  # relative to |value|
    ("n", 5.0, (4.0, 6.0)),  # [3.5, 6.5] rounded inwards
    ("n", 0.0, (0.0, 1.0)),
    ("k", 3.0, (3.0, 3.0)),  # no perturbation
    ("o", 1.0, (1.0, 1.0)),  # a 'categories' perturbation moves no code
])
def test_numeric_ranges(name, value, expected):
    assert P.numeric_range(SPACE[name], value) == expected


def test_integral_ranges_round_inwards_within_round_off():
    f = Feature("n", "integer", 0.0, 10.0, perturbation=Perturbation.absolute(0.3 * 3, 0.7))
    assert P.numeric_range(f, 5.0) == (5.0, 5.0)  # [4.3, 5.9]
    f = Feature("n", "integer", 0.0, 10.0, perturbation=Perturbation.absolute(1 - 1e-12, 0.0))
    assert P.numeric_range(f, 5.0) == (5.0, 6.0)  # 5.999999999999 is 6 within 1e-9
    f = Feature("n", "integer", 0.0, 10.0, perturbation=Perturbation.absolute(0.0, 1 - 1e-12))
    assert P.numeric_range(f, 5.0) == (4.0, 5.0)
    f = Feature("n", "integer", 0.0, 10.0, perturbation=Perturbation.absolute(1 - 1e-6, 0.0))
    assert P.numeric_range(f, 5.0) == (5.0, 5.0)


def test_switch_categories():
    assert P.switch_categories(SPACE["c"], "b") == ("b", "a")
    assert P.switch_categories(SPACE["c"], "c") == ("c", "a", "b")
    assert P.switch_categories(SPACE["o"], "hi") == ("hi", "mid")
    assert P.switch_categories(SPACE["x"], 3.0) == (3.0,)
    assert P.switch_categories(SPACE["k"], 3.0) == (3.0,)


@pytest.mark.parametrize("name, x, z, expected", [
    ("x", 5.0, 8.0, 2.0), ("x", 5.0, 6.0, 1.0),  # increased: pushed down by 2, at most 1
    ("x", 5.0, 2.0, 1.0), ("x", 5.0, 4.5, 0.5),  # decreased: pushed up by 1, at most 0.5
    ("x", 5.0, 5.0, 0.0),
    ("r", -4.0, 8.0, 2.0),  # relative at z: 0.25 x 8
    ("r", 4.0, -8.0, 4.0),  # 0.5 x |-8|
    ("k", 1.0, 3.0, 0.0), ("o", 0.0, 2.0, 0.0),
])
def test_setback_magnitudes(name, x, z, expected):
    value = P.setback_magnitude(SPACE[name], x, z)
    assert value == expected and isinstance(value, float)


def test_switching_away():
    assert P.can_switch_away(SPACE["c"], "c") and P.can_switch_away(SPACE["c"], "a")
    assert P.can_switch_away(SPACE["o"], "lo") and not P.can_switch_away(SPACE["o"], "mid")
    assert not P.can_switch_away(SPACE["x"], 1.0) and not P.can_switch_away(SPACE["k"], 1.0)


def test_the_maximal_setback_by_hand():
    z = row(x=8.0, r=-8.0, n=9, c="b", o="hi", k=4.0)
    back = P.max_setback(SPACE, row(), z)
    assert list(back.columns) == SPACE.names and len(back) == 1
    assert back.iloc[0].to_dict() == {"x": 6.0, "r": -4.0, "n": 8, "c": "a", "o": "mid",
                                      "k": 4.0}
    # back to x's category when allowed; a category that may not switch stays
    back = P.max_setback(SPACE, row(c="a", o="mid"), row(c="b", o="lo", n=4))
    assert back.iloc[0][["c", "o", "n"]].tolist() == ["a", "mid", 5]
    back = P.max_setback(SPACE, row(o="hi"), row(o="mid"))
    assert back.iloc[0]["o"] == "mid"
    back = P.max_setback(SPACE, row(), row(c="a"))
    assert back.iloc[0]["c"] == "b"  # c is not annotated: the first other allowed one
    three = cfopt.FeatureSpace([Feature("c", "categorical", categories=("a", "b", "c"),
                                        perturbation=Perturbation.to_categories("a", "b", "c"))])
    assert P.max_setback(three, {"c": "c"}, {"c": "a"}).iloc[0]["c"] == "c"  # not "b"
    unchanged = P.max_setback(SPACE, row(), row())
    pd.testing.assert_frame_equal(unchanged, SPACE.validate(row()).reset_index(drop=True))


def test_the_setback_cost_by_hand():
    weights = {"x": 1.0, "r": 10.0, "n": 100.0, "c": 1000.0, "o": 10000.0, "k": 5.0}
    z = row(x=8.0, r=-8.0, n=9, c="b", o="hi", k=4.0)
    assert P.setback_cost(SPACE, weights, row(), z) == 2.0 + 10 * 4.0 + 100 * 1.5 + 1000 + 10000
    assert P.setback_cost(SPACE, weights, row(o="hi"), row(o="mid")) == 0.0
    assert P.setback_cost(SPACE, weights, row(), row()) == 0.0
    assert P.setback_cost(SPACE, weights, row(), row(n=9, k=3.0)) == 100 * 1.5  # x, r kept
    with pytest.raises(ValueError, match="^expected one raw row, got 2$"):
        P.setback_cost(SPACE, weights, pd.concat([row(), row()]), row())


def test_sample_options_are_checked():
    with pytest.raises(ValueError, match="^on must be 'C', 'K' or 'CK', got 'KC'$"):
        P.sample_perturbations(SPACE, row(), row(), 5, on="KC")
    for m in (0, -1, 2.0, True, "3"):
        with pytest.raises(ValueError, match=f"^m must be a positive number of samples, "
                                             f"got {m!r}$"):
            P.sample_perturbations(SPACE, row(), row(), m)
    assert len(P.sample_perturbations(SPACE, row(), row(), np.int64(1))) == 1


Z = row(x=8.0, n=9, c="b", k=4.0)  # changed: x, n, c, k; kept: r, o


@pytest.mark.parametrize("on", ["C", "K", "CK"])
def test_samples_move_what_they_are_asked_to(on):
    samples = P.sample_perturbations(SPACE, row(), Z, 4000, on, rng=1)
    assert list(samples.columns) == SPACE.names and len(samples) == 4000
    assert (samples["k"] == 4.0).all()  # changed, but not annotated
    if "C" in on:
        assert samples["x"].min() == pytest.approx(6.0, abs=0.01)
        assert samples["x"].max() == pytest.approx(9.0, abs=0.01)
        assert sorted(samples["n"].unique()) == [8, 9, 10]
        assert abs((samples["n"] == 10).mean() - 1 / 3) < 0.05  # uniform over the codes
        assert samples["x"].nunique() > 1000  # not only integers
        assert sorted(samples["c"].unique()) == ["a", "b"]
        assert samples["n"].map(type).eq(int).all()
    else:
        assert (samples["x"] == 8.0).all() and (samples["n"] == 9).all()
        assert (samples["c"] == "b").all()
    if "K" in on:
        assert samples["r"].min() == pytest.approx(-5.0, abs=0.01)
        assert samples["r"].max() == pytest.approx(-2.0, abs=0.01)
        assert sorted(samples["o"].unique()) == ["lo", "mid"]
        assert abs((samples["o"] == "lo").mean() - 0.5) < 0.05
    else:
        assert (samples["r"] == -4.0).all() and (samples["o"] == "lo").all()


def test_a_changed_category_samples_its_annotation_only():
    """Changed from a to c (not annotated): C samples a and b, never c."""
    samples = P.sample_perturbations(SPACE, row(c="a"), row(c="c"), 200, "C", rng=2)
    assert sorted(samples["c"].unique()) == ["a", "b"]


def test_samples_are_reproducible_and_the_k_neighbourhood_is_k():
    a = P.sample_perturbations(SPACE, row(), Z, 50, "K", rng=7)
    pd.testing.assert_frame_equal(a, P.sample_k_neighbourhood(SPACE, row(), Z, 50, rng=7))
    assert not a.equals(P.sample_perturbations(SPACE, row(), Z, 50, "K", rng=8))
    assert len(P.sample_perturbations(SPACE, row(), Z, 3)) == 3  # default "CK", any seed


def test_the_k_score():
    """r is kept and moves within [-5, -2]: a model of r > -3.5 keeps z's class on half of
    them; one of r > -10 on all."""
    def predict(rows: pd.DataFrame) -> np.ndarray:
        return (rows["r"] > -3.5).to_numpy().astype(int)

    z = row(r=-2.5, x=8.0)  # predicted 1; K-interval [-3.125, -1.875]: all 1
    assert P.k_score(predict, SPACE, row(), z, m=200, rng=0) == 1.0
    z = row(r=-4.0, x=8.0)  # predicted 0; [-5, -2]: 0 below -3.5, half of it
    score = P.k_score(predict, SPACE, row(), z, m=4000, rng=0)
    assert isinstance(score, float) and abs(score - 0.5) < 0.05
    assert P.k_score(predict, SPACE, row(), z, rng=0) == P.k_score(
        predict, SPACE, row(), z, m=1000, rng=0)
