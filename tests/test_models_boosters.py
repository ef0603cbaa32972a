"""XGBoost and LightGBM read from their own dumps (:mod:`cfopt.models.boosters`): tiny
boosters' parsed margins against the library's, on points exactly on each threshold;
XGBoost's sparse zeros read as missing (each node's default way); LightGBM's zero band;
and the models refused with a message naming the culprit."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy import sparse

from cfopt.errors import UnsupportedModelError
from cfopt.models import decide
from cfopt.models.boosters import (
    LIGHTGBM_ZERO,
    LightGBMAdapter,
    XGBoostAdapter,
    _init_score,
    _zero_read_threshold,
)
from cfopt.models.trees import Tree, TreeEnsemble
from tests.conftest import rows_on_thresholds

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

RNG = np.random.default_rng(0)
X = np.round(RNG.normal(size=(120, 3)), 2)
Y2 = (X[:, 0] + X[:, 1] > 0).astype(int)
Y3 = np.digitize(X[:, 0], [-0.5, 0.5])
YR = X @ [1.0, -2.0, 0.5] + 0.3

XGB = dict(n_estimators=3, max_depth=2, n_jobs=1, random_state=0)
LGB = dict(n_estimators=3, num_leaves=4, min_child_samples=5, verbose=-1, n_jobs=1)
BOOSTERS = {
    "xgb": (lambda: xgb.XGBClassifier(**XGB), Y2, "sign", 1),
    "xgb-3": (lambda: xgb.XGBClassifier(**XGB), Y3, "argmax", 3),
    "xgb-regressor": (lambda: xgb.XGBRegressor(**XGB), YR, "regression", 1),
    "lgb": (lambda: lgb.LGBMClassifier(**LGB), Y2, "sign", 1),
    "lgb-3": (lambda: lgb.LGBMClassifier(**LGB), Y3, "argmax", 3),
    "lgb-regressor": (lambda: lgb.LGBMRegressor(**LGB), YR, "regression", 1),
}


def on_thresholds(a) -> np.ndarray:
    """Rows of X with one column moved onto each split threshold."""
    return rows_on_thresholds(a.structure.trees, X)


@pytest.mark.parametrize("family", list(BOOSTERS))
def test_each_booster_reproduces_the_library(family):
    make, y, decision, n_out = BOOSTERS[family]
    model = make().fit(X, y)
    a = XGBoostAdapter(model) if family.startswith("xgb") else LightGBMAdapter(model)
    assert a.decision == decision and a.structure.n_outputs == n_out
    assert a.structure.n_inputs == 3 and a.n_inputs == 3
    assert a.classes == (() if decision == "regression" else tuple(np.unique(y).tolist()))
    assert (a.structure.rule, a.structure.float32) == (("lt", True) if family.startswith("xgb")
                                                       else ("le", False))
    assert len(a.structure.trees) == 3 * (3 if n_out == 3 else 1)
    Z = np.vstack([X[:20], on_thresholds(a), RNG.normal(size=(20, 3)) * 3])
    margin = model.predict(Z, **({"output_margin": True} if family.startswith("xgb")
                                 else {"raw_score": True}))
    assert np.allclose(a.output(Z), np.reshape(margin, (len(Z), -1)), rtol=0, atol=0)
    assert a.output(Z).dtype == np.float64  # XGBoost's margins are float32
    out = a.structure.outputs(Z)
    assert np.allclose(out, a.output(Z), rtol=0, atol=1e-5 if family.startswith("xgb") else 1e-9)
    assert np.array_equal(a.predict(Z), model.predict(Z))
    if decision != "regression":
        assert np.array_equal(np.array(a.classes)[decide(out, decision)], model.predict(Z))
    assert a.output(Z[0]).shape == (1, n_out)


def test_xgboost_reads_a_sparse_zero_as_missing():
    """Trained on a sparse matrix, XGBoost sends an absent 0 its node's default way:
    binary inputs are re-split exactly, a continuous one is returned."""
    n = 200
    B = RNG.integers(0, 2, (n, 2)).astype(float)
    C = RNG.normal(size=(n, 1))
    Xs = np.column_stack([B, C])
    y = ((B[:, 0] == 1) ^ (C[:, 0] > 0.3)).astype(int)
    model = xgb.XGBClassifier(**XGB).fit(sparse.csr_matrix(Xs), y)
    a = XGBoostAdapter(model)
    assert a.read_zero_as_missing([True, True, False]) == [2]
    Z = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0.5, -1.0, 0.3, 2.0)])
    assert np.array_equal(a.predict(Z), model.predict(sparse.csr_matrix(Z)))
    margin = model.predict(sparse.csr_matrix(Z), output_margin=True)
    assert np.allclose(a.output(Z)[:, 0], margin, rtol=0, atol=0)
    assert np.allclose(a.structure.outputs(Z)[:, 0], margin, rtol=0, atol=1e-6)
    assert a.structure.rule == "lt" and a.structure.float32 and a.structure.n_inputs == 3
    assert a.structure.init.tolist() == XGBoostAdapter(model).structure.init.tolist()


def sparse_reading(tree: Tree, default_left: np.ndarray, z: np.ndarray) -> float:
    """XGBoost's walk of a sparse row: a 0 takes the default way."""
    node = 0
    while tree.feature[node] >= 0:
        x, theta = z[tree.feature[node]], tree.threshold[node]
        go_left = bool(default_left[node]) if x == 0 else x < theta
        node = tree.left[node] if go_left else tree.right[node]
    return float(tree.value[node, 0])


def test_zero_as_missing_on_every_kind_of_node():
    """A complete tree of 7 splits on binary inputs, thresholds above 1, at 1, between,
    at 0 and below 0, under every pattern of default ways: the re-split structure is
    XGBoost's sparse reading of every binary point; an input that is not binary is
    returned where 0 and missing part ways (and not where they agree)."""
    feature = np.array([0, 1, 2, 3, 4, 5, 0] + [-1] * 8)
    threshold = np.array([2.0, 1.0, 0.5, 0.0, -1.0, 0.3, 1.5] + [0.0] * 8)
    left = np.array([1, 3, 5, 7, 9, 11, 13] + [-1] * 8)
    right = np.array([2, 4, 6, 8, 10, 12, 14] + [-1] * 8)
    value = 2.0 ** np.arange(15)[:, None]
    tree = Tree(feature, threshold, left, right, value)
    points = np.array(list(np.ndindex(*[2] * 6)), dtype=float)
    a = object.__new__(XGBoostAdapter)
    for pattern in np.ndindex(*[2] * 7):
        default = np.array(list(pattern) + [0] * 8, dtype=bool)
        a.structure = TreeEnsemble((tree,), 6, np.array([0.25]), "lt", True)
        a._default_left = [default]
        assert a.read_zero_as_missing([True] * 6) == []
        assert (a.structure.n_inputs, a.structure.rule, a.structure.float32) == (6, "lt", True)
        expected = [0.25 + sparse_reading(tree, default, z) for z in points]
        assert a.structure.outputs(points)[:, 0].tolist() == expected, pattern
    assert a._sparse
    a.structure = TreeEnsemble((tree,), 6, np.array([0.0]), "lt", True)
    a._default_left = [np.array([0, 1, 1, 0, 1, 0, 1] + [0] * 8, dtype=bool)]
    # clashes: x0 < 2 (right; 0 goes left), x3 < 0 (right; 0 goes right: none), x4 < -1
    # (left; 0 goes right), x1 < 1 (left: none), x2 < 0.5 (left: none), x5 < 0.3 (right)
    assert a.read_zero_as_missing([False] * 6) == [0, 4, 5]


def test_lightgbm_zero_band():
    zero = LIGHTGBM_ZERO
    below = float(np.nextafter(-zero, -np.inf))
    for node, expected in (({"threshold": 0.5}, 0.5), ({"threshold": -0.5}, -0.5),
                           ({"threshold": 1e-35}, zero), ({"threshold": 0.0}, zero),
                           ({"threshold": -1e-35}, below), ({"threshold": -zero}, below),
                           ({"threshold": zero}, zero),
                           ({"threshold": 0.5, "missing_type": "Zero"}, 0.5),
                           ({"threshold": -0.5, "missing_type": "Zero",
                             "default_left": False}, -0.5),
                           ({"threshold": 1e-35, "missing_type": "Zero",
                             "default_left": False}, below),
                           ({"threshold": -1e-35, "missing_type": "Zero",
                             "default_left": True}, zero),
                           ({"threshold": -1e-35, "missing_type": "Zero"}, zero),
                           ({"threshold": -1e-35, "missing_type": "None"}, below)):
        assert _zero_read_threshold(node) == expected, node
    with pytest.raises(UnsupportedModelError, match=r"^a LightGBM split at 0.5 sends zero "
                                                    r"\(missing\) values right but smaller "
                                                    r"values the other way; cfopt encodes "
                                                    r"splits whose left side is a half-line "
                                                    r"\(train with zero_as_missing=False\)$"):
        _zero_read_threshold({"threshold": 0.5, "missing_type": "Zero", "default_left": False})
    with pytest.raises(UnsupportedModelError, match=r"^a LightGBM split at -0.5 sends zero "
                                                    r"\(missing\) values left but"):
        _zero_read_threshold({"threshold": -0.5, "missing_type": "Zero"})


def test_a_base_score_that_depends_on_the_input_is_refused():
    partial = TreeEnsemble((), 2, np.zeros(1))
    constant = SimpleNamespace(kind="M", output=lambda Z: np.full((len(Z), 1), 0.5 + 5e-6))
    assert _init_score(constant, partial).tolist() == [0.5 + 5e-6]
    varying = SimpleNamespace(kind="M", output=lambda Z: 1e-4 * Z[:, :1])
    with pytest.raises(UnsupportedModelError, match="^M: the base score depends on the input; "
                                                    "only a constant base score is encoded$"):
        _init_score(varying, partial)
    large = SimpleNamespace(kind="M", output=lambda Z: 1e6 + 1e-3 * Z[:, :1])
    with pytest.raises(UnsupportedModelError, match="^M: the base score depends"):
        _init_score(large, partial)  # 1e-3 apart: not within 1e-5, however large
    probes = SimpleNamespace(kind="M", output=lambda Z: (Z[:, :1] >= 0) & (Z[:, :1] < 1))
    assert _init_score(probes, partial).tolist() == [1.0]  # probes in [0, 1)


def test_boosters_refused():
    with pytest.raises(UnsupportedModelError, match="^XGBClassifier is not fitted; fit it "
                                                    "first$"):
        XGBoostAdapter(xgb.XGBClassifier())
    with pytest.raises(UnsupportedModelError, match="^LGBMRegressor is not fitted; fit it "
                                                    "first$"):
        LightGBMAdapter(lgb.LGBMRegressor())
    with pytest.raises(UnsupportedModelError, match="^XGBoost booster 'gblinear' is not "
                                                    "supported; use booster='gbtree'$"):
        XGBoostAdapter(xgb.XGBClassifier(booster="gblinear", n_estimators=2).fit(X, Y2))
    early = xgb.XGBClassifier(early_stopping_rounds=1, **XGB).fit(
        X[:80], Y2[:80], eval_set=[(X[80:], Y2[80:])], verbose=False)
    with pytest.raises(UnsupportedModelError, match="^XGBoost models with early stopping are "
                                                    "not supported$"):
        XGBoostAdapter(early)
    import pandas as pd

    frame = pd.DataFrame({"c": pd.Categorical(RNG.integers(0, 4, 120)), "x": X[:, 1]})
    target = frame.c.isin([0, 3]).astype(int)
    with pytest.raises(UnsupportedModelError, match="^XGBoost categorical splits are not "
                                                    "supported$"):
        XGBoostAdapter(xgb.XGBClassifier(enable_categorical=True, tree_method="hist",
                                         **XGB).fit(frame, target))
    with pytest.raises(UnsupportedModelError, match=r"^LightGBM split type '==' "
                                                    r"\(categorical\) is not supported$"):
        LightGBMAdapter(lgb.LGBMClassifier(min_data_per_group=5, cat_smooth=0.0, **LGB).fit(
            frame, target))
    for model in (xgb.XGBRegressor(objective="count:poisson", **XGB),
                  lgb.LGBMRegressor(objective="poisson", **LGB)):
        model.fit(X, np.exp(YR / 4))
        name = type(model).__name__
        with pytest.raises(UnsupportedModelError, match=rf"^{name}'s objective predicts through "
                                                        rf"a non-identity link \(e.g. poisson, "
                                                        rf"gamma, logistic\); cfopt encodes "
                                                        rf"identity-link regression "
                                                        rf"objectives$"):
            XGBoostAdapter(model) if name.startswith("XGB") else LightGBMAdapter(model)
