"""sklearn trees and tree ensembles read from their fitted arrays
(:mod:`cfopt.models.trees`): a tree's walk under either split rule (points on a
threshold included), the float32 rounding of the inputs, every family's parsed outputs
against the library's own (on the thresholds themselves), the constant prior of
boosting, and the models refused with a message naming them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from cfopt.errors import UnsupportedModelError
from cfopt.models import decide
from cfopt.models.trees import (
    SklearnTreeAdapter,
    Tree,
    TreeEnsemble,
    _check_constant_init,
    _class_fractions,
)
from tests.conftest import rows_on_thresholds

RNG = np.random.default_rng(0)
X = np.round(RNG.normal(size=(60, 3)), 2)
Y2 = (X[:, 0] + X[:, 1] > 0).astype(int)
Y3 = np.digitize(X[:, 0], [-0.5, 0.5])
YR = X @ [1.0, -2.0, 0.5] + 0.3

#        0: x0 <= 0.1
#      1     2: x1 <= -1
#           3  4
STUMP = Tree(feature=np.array([0, -2, 1, -2, -2]),
             threshold=np.array([0.1, -2.0, -1.0, -2.0, -2.0]),
             left=np.array([1, -1, 3, -1, -1]), right=np.array([2, -1, 4, -1, -1]),
             value=np.array([[0.0], [1.0], [0.0], [10.0], [100.0]]))


def test_a_trees_walk_under_either_rule():
    assert STUMP.leaves.tolist() == [1, 3, 4]
    Z = np.array([[0.0, 5.0], [0.1, 5.0], [0.2, -1.0], [0.2, -0.5], [0.2, -3.0]])
    assert STUMP.apply(Z, "le").tolist() == [1, 1, 3, 4, 3]
    assert STUMP.apply(Z, "lt").tolist() == [1, 4, 4, 4, 3]
    assert STUMP.apply(np.zeros((0, 2)), "le").tolist() == []


def test_an_ensemble_sums_its_leaves_on_float32_or_float64_inputs():
    ensemble = TreeEnsemble((STUMP, STUMP), 2, np.array([0.5]))
    assert ensemble.n_outputs == 1 and ensemble.rule == "le" and ensemble.float32
    # float32(0.1) > 0.1: the library's rounding sends 0.1 right, float64 sends it left
    assert ensemble.outputs([0.1, -1.0]).tolist() == [[20.5]]
    exact = TreeEnsemble((STUMP,), 2, np.array([0.5]), "le", float32=False)
    assert exact.outputs(np.array([[0.1, -1.0], [0.3, -0.5]])).tolist() == [[1.5], [100.5]]
    assert TreeEnsemble((), 2, np.zeros(3)).n_outputs == 3
    assert exact.logits(np.array([[0.1, 0.0]])).tolist() == [[1.5]]
    assert ensemble.margin_scores(np.zeros((1, 2))) is None


def test_class_fractions_and_a_constant_prior():
    tree = SimpleNamespace(tree_=SimpleNamespace(value=np.array([[[2.0, 6.0]], [[0.0, 0.0]],
                                                                  [[3.0, 0.0]]])))
    assert _class_fractions(tree).tolist() == [[0.25, 0.75], [0.0, 0.0], [1.0, 0.0]]
    init = np.array([[1.0, 2.0], [1.0 + 5e-10, 2.0]])
    assert _check_constant_init("M", init).tolist() == [1.0, 2.0]
    for bad in (np.array([[1.0], [1.5]]), np.array([[0.0], [2e-9]]),
                np.array([[1e6], [1e6 + 1.0]]), np.array([[0.0], [0.8e-9], [1.6e-9]])):
        with pytest.raises(UnsupportedModelError, match=r"^M has an init estimator whose "
                                                        r"score depends on the input; only "
                                                        r"constant priors \(the default, or "
                                                        r"init='zero'\) are encoded$"):
            _check_constant_init("M", bad)


def thresholds(model) -> np.ndarray:
    """Points on every split threshold of the model (each column at its thresholds)."""
    return rows_on_thresholds(SklearnTreeAdapter(model).structure.trees, X)


def library_output(model, Z):
    if hasattr(model, "classes_"):
        out = (model.decision_function(Z) if hasattr(model, "learning_rate")
               else model.predict_proba(Z))
    else:
        out = model.predict(Z)
    return np.asarray(out, dtype=np.float64).reshape(len(Z), -1)


FAMILIES = {
    "tree": (lambda: DecisionTreeClassifier(max_depth=3, random_state=0), Y3, "argmax", 3),
    "forest": (lambda: RandomForestClassifier(3, max_depth=3, random_state=0), Y2, "argmax",
               2),
    "extra-trees": (lambda: ExtraTreesClassifier(3, max_depth=3, random_state=0), Y3,
                    "argmax", 3),
    "boosting": (lambda: GradientBoostingClassifier(n_estimators=3, max_depth=2,
                                                    random_state=0), Y2, "sign", 1),
    "boosting-3": (lambda: GradientBoostingClassifier(n_estimators=2, max_depth=2,
                                                      random_state=0), Y3, "argmax", 3),
    "hist": (lambda: HistGradientBoostingClassifier(max_iter=3, max_depth=2), Y2, "sign", 1),
    "hist-3": (lambda: HistGradientBoostingClassifier(max_iter=2, max_depth=2), Y3, "argmax",
               3),
    "tree-regressor": (lambda: DecisionTreeRegressor(max_depth=3), YR, "regression", 1),
    "forest-regressor": (lambda: RandomForestRegressor(3, max_depth=3, random_state=0), YR,
                         "regression", 1),
    "boosting-regressor": (lambda: GradientBoostingRegressor(n_estimators=3, max_depth=2,
                                                             random_state=0), YR,
                           "regression", 1),
    "hist-regressor": (lambda: HistGradientBoostingRegressor(max_iter=3, max_depth=2), YR,
                       "regression", 1),
    "hist-absolute": (lambda: HistGradientBoostingRegressor(loss="absolute_error",
                                                            max_iter=2, max_depth=2), YR,
                      "regression", 1),
    "hist-quantile": (lambda: HistGradientBoostingRegressor(loss="quantile", quantile=0.3,
                                                            max_iter=2, max_depth=2), YR,
                      "regression", 1),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_family_reproduces_the_library(family):
    make, y, decision, n_out = FAMILIES[family]
    model = make().fit(X, y)
    a = SklearnTreeAdapter(model)
    assert a.decision == decision and a.structure.n_outputs == n_out
    assert a.n_inputs == 3 and a.structure.n_inputs == 3
    assert a.classes == (() if decision == "regression" else tuple(np.unique(y).tolist()))
    assert a.structure.float32 == (not family.startswith("hist"))
    Z = np.vstack([X[:20], thresholds(model), RNG.normal(size=(20, 3)) * 3])
    out = a.structure.outputs(Z)
    assert out.shape == (len(Z), n_out)
    assert np.allclose(a.output(Z), library_output(model, Z), rtol=0, atol=1e-12)
    assert np.allclose(out, library_output(model, Z), rtol=0, atol=1e-9)
    assert np.array_equal(a.predict(Z), model.predict(Z))
    if decision != "regression":
        assert np.array_equal(np.array(a.classes)[decide(out, decision)], model.predict(Z))
    assert a.output(Z[0]).shape == (1, n_out)


def test_models_refused():
    with pytest.raises(UnsupportedModelError, match="^RandomForestClassifier is not fitted; "
                                                    "fit it before explaining$"):
        SklearnTreeAdapter(RandomForestClassifier())
    with pytest.raises(UnsupportedModelError, match="^multi-output DecisionTreeClassifier is "
                                                    "not supported$"):
        SklearnTreeAdapter(DecisionTreeClassifier(max_depth=2).fit(X, np.column_stack([Y2,
                                                                                       Y3])))
    with pytest.raises(UnsupportedModelError, match=r"^HistGradientBoostingRegressor\(loss="
                                                    r"'poisson'\) predicts through a non-"
                                                    r"identity link; cfopt encodes "
                                                    r"squared_error, absolute_error and "
                                                    r"quantile losses$"):
        SklearnTreeAdapter(HistGradientBoostingRegressor(loss="poisson", max_iter=2).fit(
            X, np.exp(YR / 4)))
    categories = np.column_stack([RNG.integers(0, 4, 60), X[:, 1]])
    with pytest.raises(UnsupportedModelError, match="^HistGradientBoosting categorical splits "
                                                    "are not supported; one-hot encode the "
                                                    "categories instead$"):
        SklearnTreeAdapter(HistGradientBoostingClassifier(
            max_iter=2, categorical_features=[0], min_samples_leaf=2).fit(
                categories, np.isin(categories[:, 0], [0, 3]).astype(int)))
    init = GradientBoostingRegressor(n_estimators=2, init=DecisionTreeRegressor(max_depth=2))
    with pytest.raises(UnsupportedModelError, match="^GradientBoostingRegressor has an init "
                                                    "estimator whose score depends"):
        SklearnTreeAdapter(init.fit(X, YR))
    zero = GradientBoostingClassifier(n_estimators=2, init="zero", random_state=0).fit(X, Y2)
    assert SklearnTreeAdapter(zero).structure.init.tolist() == [0.0]
