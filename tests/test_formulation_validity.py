"""The validity constraints and target helpers (:mod:`cfopt.formulations.validity`).

The constraints are checked on fixed output values, without a solver: a point of
logits is admitted when some choice of the target class satisfies every active
constraint, and that must hold exactly when its target score (computed here from the
logits, as the module docstring defines it) is at least μ.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.linear_model import LogisticRegression, Ridge

import cfopt
from cfopt.errors import AlreadyTargetError
from cfopt.formulations.validity import (
    add_validity,
    check_margin,
    check_target,
    deactivate_validity,
    parse_interval,
    set_target,
    set_target_interval,
    target_indices,
    target_interval,
    target_score,
)

MU = 1e-3
X = np.random.default_rng(0).normal(size=(90, 2))


def adapter(kind: str):
    if kind == "sign":
        return cfopt.models.parse_model(LogisticRegression().fit(X, (X[:, 0] > 0).astype(int)))
    if kind == "argmax":
        return cfopt.models.parse_model(
            LogisticRegression().fit(X, np.digitize(X[:, 0], [-0.5, 0.5])))
    if kind == "labels":
        y = np.array(["no", "opposite"])[(X[:, 0] > 0).astype(int)]
        return cfopt.models.parse_model(LogisticRegression().fit(X, y))
    return cfopt.models.parse_model(Ridge().fit(X, X[:, 0]))


def block(kind: str, bounds):
    m = pyo.ConcreteModel()
    m.y = pyo.Var(range(len(bounds)), bounds=lambda _, k: bounds[k])
    add_validity(m, m.y, bounds, adapter(kind), MU)
    return m


def satisfied(m) -> bool:
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        if (c.lower is not None and body < pyo.value(c.lower) - 1e-12) or \
                (c.upper is not None and body > pyo.value(c.upper) + 1e-12):
            return False
    return True


def admitted(m, logits) -> bool:
    """Whether some choice of the winning class admits the fixed ``logits``."""
    for k, v in enumerate(logits):
        m.y[k].set_value(float(v))
    if not hasattr(m, "target_choice"):
        return satisfied(m)
    for c in m.CLASSES:
        for j in m.CLASSES:
            m.target_choice[j].set_value(1.0 if j == c else 0.0)
        if satisfied(m):
            return True
    return False


#: class 1 can never beat class 0 or 2 (its logits lie far below theirs)
BOUNDS = [(-1.0, 1.0), (-10.0, -9.0), (-1.0, 1.0)]


@pytest.mark.parametrize("target", [[2], [0], [1, 2], [0, 2], [1]])
def test_argmax_validity_admits_exactly_the_target_with_margin(target):
    m = block("argmax", BOUNDS)
    a = adapter("argmax")
    set_target(m, a, target)
    rng = np.random.default_rng(len(target) + target[0])
    points = [np.array([rng.uniform(lo, hi) for lo, hi in BOUNDS]) for _ in range(300)]
    points += [np.array([0.0, -9.5, MU]), np.array([0.0, -9.5, 0.5 * MU]),
               np.array([MU, -9.5, 0.0]), np.array([-1.0, -9.0, 1.0])]
    for y in points:
        score = target_score(a, tuple(target), y)
        if abs(score - MU) < 1e-9:
            continue
        assert admitted(m, y) is (score >= MU), (target, y, score)


def test_target_score():
    sign, argmax, reg = adapter("sign"), adapter("argmax"), adapter("regression")
    assert target_score(sign, (1,), np.array([0.25])) == 0.25
    assert target_score(sign, (0,), np.array([0.25])) == -0.25
    y = np.array([0.5, -2.0, 0.25])
    assert target_score(argmax, (2,), y) == -0.25            # 0.25 - max(0.5, -2)
    assert target_score(argmax, (1, 2), y) == pytest.approx(-0.25)
    assert target_score(argmax, (0,), y) == 0.25             # 0.5 - max(-2, 0.25)
    assert target_score(argmax, (0, 1), y) == 0.25
    assert target_score(reg, (1.0, 4.0), np.array([1.5])) == 0.5
    assert target_score(reg, (1.0, 4.0), np.array([3.0])) == 1.0
    assert target_score(reg, (-math.inf, 4.0), np.array([5.0])) == -1.0
    # float32 logits are scored in float64 (0.3f - 0.1f in float32 is another number)
    y32 = np.array([0.1, 0.3, -1.0], dtype=np.float32)
    exact = float(np.float64(y32[1]) - np.float64(y32[0]))
    assert float(y32[1] - y32[0]) != exact
    assert target_score(argmax, (1,), y32) == exact


def test_sign_validity():
    m = block("sign", [(-5.0, 5.0)])
    a = adapter("sign")
    for target, y, ok in (([1], MU, True), ([1], 0.5 * MU, False), ([0], -MU, True),
                          ([0], MU, False), ([1], -2.0, False), ([0], -2.0, True)):
        set_target(m, a, target)
        assert admitted(m, [y]) is ok, (target, y)
    with pytest.raises(ValueError):
        set_target(m, a, [0, 1])


def test_open_sides_are_finite_beyond_any_retry():
    """An open side is set at the output's bound minus (plus) a finite slack of its
    range + 1000 μ + 1, beyond the margin of any retry (three, each 10x)."""
    bounds = [(2.0, 10.0)]
    m = block("regression", bounds)
    set_target_interval(m, bounds, -math.inf, 5.0)
    assert pyo.value(m.target_low) == pytest.approx(2.0 - (8.0 + 1e3 * MU + 1.0))
    assert pyo.value(m.target_high) == 5.0
    set_target_interval(m, bounds, 3.0, math.inf)
    assert pyo.value(m.target_high) == pytest.approx(10.0 + (8.0 + 1e3 * MU + 1.0))
    assert pyo.value(m.target_low) == 3.0


def test_regression_validity_and_interval():
    bounds = [(0.0, 10.0)]
    m = block("regression", bounds)
    a = adapter("regression")
    for y in (0.0, 10.0, 5.0):  # the initial target is slack: every output admitted
        assert admitted(m, [y])
    set_target_interval(m, bounds, 4.0, 6.0)
    for y, ok in ((4.0 + MU, True), (4.0 + 0.5 * MU, False), (6.0 - MU, True),
                  (6.0 - 0.5 * MU, False), (5.0, True), (3.0, False), (7.0, False)):
        assert admitted(m, [y]) is ok, y
    set_target_interval(m, bounds, -math.inf, 3.0)  # open below: as low as the bounds
    assert admitted(m, [0.0]) and admitted(m, [3.0 - MU]) and not admitted(m, [3.5])
    assert pyo.value(m.target_low) < -1e3 * MU - 1.0
    set_target_interval(m, bounds, 7.0, math.inf)
    assert admitted(m, [10.0]) and not admitted(m, [6.9])
    assert pyo.value(m.target_high) > 10.0 + 1e3 * MU + 1.0
    with pytest.raises(ValueError, match="interval"):
        set_target(m, a, [0])


def test_a_shared_margin_follows_its_param():
    main = pyo.ConcreteModel()
    main.margin = pyo.Param(mutable=True, initialize=MU)
    m = pyo.ConcreteModel()
    m.y = pyo.Var([0], bounds=(-5, 5))
    add_validity(m, m.y, [(-5.0, 5.0)], adapter("sign"), main.margin)
    assert admitted(m, [2 * MU])
    main.margin = 3 * MU
    assert not admitted(m, [2 * MU]) and admitted(m, [3 * MU])


def test_deactivate_validity():
    for kind, bounds in (("sign", [(-1.0, 1.0)]), ("argmax", BOUNDS),
                         ("regression", [(0.0, 1.0)])):
        m = block(kind, bounds)
        deactivate_validity(m, adapter(kind))
        assert not m.validity.active
        if kind == "argmax":
            assert not m.target_pick.active and not m.target_allowed.active


def test_target_indices():
    a = adapter("argmax")
    assert target_indices(a, None, 1) == [0, 2]
    assert target_indices(a, "opposite", 0) == [1, 2]
    assert target_indices(a, [2, 0, 2], 1) == [2, 0]
    assert target_indices(a, 2, 1) == [2]
    for collection in ((2, 0), {2}, frozenset({0}), np.array([0, 2]), pd.Index([2])):
        assert sorted(target_indices(a, collection, 1)) == sorted(set(np.ravel(list(collection))))
    with pytest.raises(AlreadyTargetError, match="already classified as 1"):
        target_indices(a, [1, 2], 1)
    labels = adapter("labels")  # a class named "opposite" is a label
    assert target_indices(labels, "opposite", "no") == [1]
    with pytest.raises(AlreadyTargetError):
        target_indices(labels, "opposite", "opposite")
    assert target_indices(labels, None, "opposite") == [0]


def test_check_target():
    check_target(adapter("argmax"), [0, 2])
    check_target(adapter("argmax"), None)
    check_target(adapter("sign"), "opposite")
    check_target(adapter("regression"), (1.0, None))
    for kind, target, words in (("argmax", [], "empty"), ("sign", [0, 1], "one target"),
                                ("argmax", [7], ""), ("regression", 3.0, "interval")):
        with pytest.raises(ValueError, match=words):
            check_target(adapter(kind), target)


def test_target_interval():
    assert target_interval((1.0, None), 0.5) == (1.0, math.inf)
    assert target_interval((None, 1.0), 1.5) == (-math.inf, 1.0)
    for prediction in (1.0, 2.0, 3.0):  # the ends are in the interval
        with pytest.raises(AlreadyTargetError, match="already lies"):
            target_interval((1.0, 3.0), prediction)


def test_check_margin():
    for ok in (1e-3, 1, 2.5):
        check_margin(ok)
    for bad in (0, 0.0, -1e-3, math.inf, math.nan, True, "0.1", None):
        with pytest.raises(ValueError, match="positive"):
            check_margin(bad)


def test_parse_interval():
    assert parse_interval((1, 2)) == (1.0, 2.0)
    assert parse_interval([None, np.float32(2.5)]) == (-math.inf, 2.5)
    assert parse_interval((np.int64(-1), None)) == (-1.0, math.inf)
    assert all(type(v) is float for v in parse_interval((np.int64(1), 3)))
    for bad, words in ((3.0, "interval"), ((1.0, 2.0, 3.0), "interval"), ([1.0], "interval"),
                       ((True, 2.0), "low end"), ((1.0, "2"), "high end"),
                       ((math.nan, 2.0), "low end"), ((2.0, 2.0), "empty"),
                       ((3.0, 2.0), "empty"), ((None, -math.inf), "empty")):
        with pytest.raises(ValueError, match=words):
            parse_interval(bad)


def test_binary_target_index_sets_the_sign():
    m = block("sign", [(-1.0, 1.0)])
    for target, sign in (([1], 1.0), ([0], -1.0)):
        set_target(m, adapter("sign"), target)
        assert pyo.value(m.target_sign) == sign
    m = block("argmax", BOUNDS)
    set_target(m, adapter("argmax"), [0, 2])
    assert [pyo.value(m.target_mask[c]) for c in m.CLASSES] == [1.0, 0.0, 1.0]


def test_logit_scores_score_each_row_on_its_own():
    """The vectorised score (walks, incumbents) of several rows of one-logit-per-class
    outputs is each row's own: max over the targets less max over the others, per row
    (mutation testing: a max over the whole array passed every one-row test)."""
    from cfopt.formulations.validity import logit_scores

    H = np.array([[3.0, 0.0, 1.0, -2.0],
                  [0.0, 5.0, -1.0, 4.0],
                  [-1.0, -1.0, 2.0, 0.5]])
    targets = [0, 2]
    expected = [max(r[0], r[2]) - max(r[1], r[3]) for r in H]
    assert logit_scores(H, "argmax", targets) == pytest.approx(expected)
    assert logit_scores(H[:, :1], "sign", [0]) == pytest.approx(-H[:, 0])
    assert logit_scores(H[:, :1], "regression", [-0.5, 4.0]) == pytest.approx(
        [min(h + 0.5, 4.0 - h) for h in H[:, 0]])
