"""The seed-000 explainer (Leofante & Potyka's diverse neighbours) and the set metrics."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt import metrics
from cfopt.baselines import DiverseNeighbours
from cfopt.space.feature import Feature, Kind
from cfopt.space.space import FeatureSpace

from .conftest import mixed_data


def raw_space(names: list[str], lower: float = -2.0, upper: float = 2.0) -> FeatureSpace:
    """Continuous features whose model input and distance unit are the raw value."""
    return FeatureSpace(Feature(n, Kind.CONTINUOUS, lower=lower, upper=upper, shift=0.0,
                                scale=1.0, spread=1.0) for n in names)


@pytest.fixture(scope="module")
def mixed():
    X, y = mixed_data(240)
    space = FeatureSpace.from_frame(X)
    model = LogisticRegression(max_iter=500).fit(space.transform(X), y)
    return X, space, model


# ----------------------------------------------------------------------------- validity
@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("minimise", [True, False])
def test_outputs_valid_coherent_and_respect_actionability(mixed, norm, minimise):
    X, space, model = mixed
    space = FeatureSpace.from_dict(space.to_dict())
    space.immutable("married", "housing").increase_only("age")
    dn = DiverseNeighbours(model, space, norm=norm, alpha=50, minimise=minimise).fit(X[:200])
    for i in range(200, 215):
        x = X.iloc[[i]]
        res = dn.explain(x)
        assert 1 <= len(res) <= 5
        assert res.verified and res.found and res.n_dropped == 0
        ce = res.counterfactuals
        space.validate(ce)  # coherent raw rows: integral ages, known categories, in bounds
        assert (ce["age"] == ce["age"].round()).all()
        pred = model.predict(space.transform(ce))
        assert (pred != res.factual_class).all()
        assert list(pred) == res.predicted
        assert (ce["married"] == x["married"].iloc[0]).all()
        assert (ce["housing"] == x["housing"].iloc[0]).all()
        assert (ce["age"] >= x["age"].iloc[0]).all()
        assert np.allclose(res.distances,
                           metrics.distance_matrix(space, res.factual, ce, norm)[0])
        if minimise:  # the search only moves towards the factual
            cand = metrics.distance_matrix(space, res.factual, res.candidates, norm)[0]
            assert (np.array(res.distances) <= cand + 1e-9).all()
        else:
            pd.testing.assert_frame_equal(ce, res.candidates)
        payload = json.loads(res.to_json())
        assert len(payload["counterfactuals"]) == len(res)
        assert payload["norm"] == norm and set(payload["timings"]) >= {"total", "search"}


def test_torch_model_and_explicit_target(mixed):
    torch = pytest.importorskip("torch")
    X, space, _ = mixed
    _, y = mixed_data(240)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(space.n_inputs, 8), torch.nn.ReLU(),
                              torch.nn.Linear(8, 1))
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    Z = torch.tensor(space.transform(X), dtype=torch.float32)
    for _ in range(200):
        opt.zero_grad()
        torch.nn.functional.binary_cross_entropy_with_logits(
            net(Z).squeeze(1), torch.tensor(y, dtype=torch.float32)).backward()
        opt.step()
    dn = DiverseNeighbours(net.eval(), space, alpha=30).fit(X)
    adapter = cfopt.models.parse_model(net)
    rejected = X[adapter.predict(space.transform(X)) == 0]
    res = dn.explain(rejected.iloc[[0]], target=1)
    assert res.found and res.target == (1,)
    assert (adapter.predict(space.transform(res.counterfactuals)) == 1).all()


def test_multiclass_target():
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"a": rng.uniform(0, 1, 150), "b": rng.uniform(0, 1, 150)})
    y = np.digitize(X.a + 0.3 * X.b, [0.45, 0.85])
    space = FeatureSpace.from_frame(X)
    model = LogisticRegression(max_iter=1000).fit(space.transform(X), y)
    x = pd.DataFrame({"a": [0.1], "b": [0.1]})
    assert model.predict(space.transform(x))[0] == 0
    res = DiverseNeighbours(model, space, alpha=40).fit(X).explain(x, target=2)
    assert res.found and set(res.predicted) == {2}
    res = DiverseNeighbours(model, space, alpha=40).fit(X).explain(x)
    assert res.found and set(res.predicted) <= {1, 2}


def test_no_candidates_gives_empty_result():
    space = raw_space(["a", "b"])
    X = pd.DataFrame({"a": [0.5, 1.0], "b": [0.5, 1.0]})
    res = DiverseNeighbours(lambda Z: np.zeros(len(Z), int), space, alpha=2).fit(X) \
        .explain({"a": 0.0, "b": 0.0})
    assert len(res) == 0 and not res.found and res.n_candidates["S1"] == 0
    json.loads(res.to_json())


# ---------------------------------------------------------------------- binary search
def linear(w: np.ndarray, b: float, calls: list[int] | None = None):
    def predict(Z: np.ndarray) -> np.ndarray:
        if calls is not None:
            calls.append(len(Z))
        return (Z @ w + b > 0).astype(int)
    return predict


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("gamma", [0.1, 0.01])
def test_binary_search_lands_within_gamma_of_a_linear_boundary(norm, gamma):
    rng = np.random.default_rng(3)
    names = ["a", "b", "c"]
    space = raw_space(names)
    w, b = np.array([1.0, -0.5, 0.25]), -0.2
    X = pd.DataFrame(rng.uniform(-2, 2, (300, 3)), columns=names)
    calls: list[int] = []
    dn = DiverseNeighbours(linear(w, b, calls), space, norm=norm, alpha=100, gamma=gamma,
                           beta=0.9).fit(X)
    a = metrics.distance_weights(space, norm)
    for x in rng.uniform(-2, 2, (10, 3)):
        if x @ w + b > 0:
            continue
        calls.clear()
        res = dn.explain(dict(zip(names, x)))
        assert len(res) >= 2
        C, P = res.candidates.to_numpy(), res.counterfactuals.to_numpy()
        for c, p in zip(C, P):
            d = float(np.linalg.norm((c - x) * a, ord=1 if norm == "l1" else 2))
            t_star = -(x @ w + b) / ((c - x) @ w)  # the boundary on the segment
            t = np.linalg.norm(p - x) / np.linalg.norm(c - x)
            assert np.allclose(p, x + t * (c - x))  # on the segment
            assert p @ w + b > 0  # target side
            assert t >= t_star and (t - t_star) * d <= gamma + 1e-12  # within gamma
        d_all = metrics.distance_matrix(space, res.factual, res.candidates, norm)[0]
        steps = [max(0, math.ceil(math.log2(d / gamma))) for d in d_all]
        # one factual prediction, then one row per candidate and step, then the re-check
        assert sum(calls) == 1 + sum(steps) + len(res)
        assert res.predictions == sum(calls)


def test_no_search_when_segment_is_shorter_than_gamma():
    space = raw_space(["a"])
    X = pd.DataFrame({"a": [0.05, 1.0]})
    dn = DiverseNeighbours(linear(np.array([1.0]), 0.0), space, alpha=5, gamma=0.1).fit(X)
    res = dn.explain({"a": -0.01})
    assert res.counterfactuals["a"].tolist() == [0.05]  # d = 0.06 <= gamma: kept as is


# ---------------------------------------------------------------------- diversity filters
CANDIDATES = [(1.0, 0.0), (1.1, 0.2), (0.0, -1.2), (-1.3, 0.0), (1.0, 1.0)]


def filtered(diversity: str, beta: float) -> list[tuple[float, float]]:
    space = raw_space(["a", "b"])
    X = pd.DataFrame(CANDIDATES, columns=["a", "b"])
    model = lambda Z: (np.abs(Z).max(axis=1) > 0.05).astype(int)  # noqa: E731
    dn = DiverseNeighbours(model, space, norm="l2", alpha=10, diversity=diversity, beta=beta,
                           minimise=False).fit(X)
    res = dn.explain({"a": 0.0, "b": 0.0})
    assert res.n_candidates == {"S1": 5, "S2": 5, "S3": len(res)}
    return [tuple(r) for r in res.counterfactuals.to_numpy()]


def test_angle_filter_on_hand_made_candidates():
    # cosines with (1, 0): 0.98, 0, -1, 0.71; (1, 1) with (0, -1.2): -0.71
    assert filtered("angle", 0.5) == [(1.0, 0.0), (0.0, -1.2)]
    assert filtered("angle", 0.75) == [(1.0, 0.0), (0.0, -1.2), (1.0, 1.0)]  # larger β: less diverse
    assert filtered("angle", 1.0) == CANDIDATES  # β = 1 keeps everything
    assert filtered("angle", 0.0) == [(1.0, 0.0), (0.0, -1.2)]


def test_distance_filter_on_hand_made_candidates():
    # m = 1; kept iff distance to every kept candidate >= (1 + β) m
    # d((1.1,.2),(1,0)) = 0.22; d((0,-1.2),(1,0)) = 1.56; d((-1.3,0),(1,0)) = 2.3,
    # d((-1.3,0),(0,-1.2)) = 1.77; d((1,1),(1,0)) = 1
    assert filtered("distance", 0.5) == [(1.0, 0.0), (0.0, -1.2), (-1.3, 0.0)]
    assert filtered("distance", 0.6) == [(1.0, 0.0), (-1.3, 0.0)]
    assert filtered("distance", 0.0) == [(1.0, 0.0), (0.0, -1.2), (-1.3, 0.0), (1.0, 1.0)]


def test_number_and_distance_selection():
    space = raw_space(["a", "b"])
    X = pd.DataFrame(CANDIDATES, columns=["a", "b"])
    model = lambda Z: (np.abs(Z).max(axis=1) > 0.05).astype(int)  # noqa: E731
    x = {"a": 0.0, "b": 0.0}
    res = DiverseNeighbours(model, space, norm="l2", alpha=2, beta=1.0).fit(X).explain(x)
    assert res.n_candidates["S2"] == 2
    res = DiverseNeighbours(model, space, norm="l2", selection="distance", alpha=0.2,
                            beta=1.0).fit(X).explain(x)
    assert res.n_candidates["S2"] == 3  # distances 1, 1.118, 1.2 within 1.2 m


def test_at_most_n():
    space = raw_space(["a", "b"])
    X = pd.DataFrame(CANDIDATES, columns=["a", "b"])
    model = lambda Z: (np.abs(Z).max(axis=1) > 0.05).astype(int)  # noqa: E731
    res = DiverseNeighbours(model, space, n=2, beta=1.0, alpha=10).fit(X).explain(
        {"a": 0.0, "b": 0.0})
    assert len(res) == 2


# ----------------------------------------------------------------------------- metrics
def test_set_metrics_by_hand():
    space = raw_space(["a", "b"])
    S1 = pd.DataFrame({"a": [0.0, 1.0], "b": [0.0, 0.0]})
    S2 = pd.DataFrame({"a": [0.0], "b": [1.0]})
    # L1: d(S1, S2) = [[1], [2]]
    assert metrics.setdist_sum(space, S1, S2, "l1") == pytest.approx(0.5 * 1.5 + 0.5 * 1.0)
    assert metrics.setdist_max(space, S1, S2, "l1") == pytest.approx(0.5 * 2.0 + 0.5 * 1.0)
    # L2: [[1], [sqrt 2]]
    r2 = math.sqrt(2)
    assert metrics.setdist_sum(space, S1, S2, "l2") == pytest.approx(0.25 * (1 + r2) + 0.5)
    assert metrics.setdist_max(space, S1, S2, "l2") == pytest.approx(0.5 * r2 + 0.5)
    assert metrics.setdist_sum(space, S2, S1, "l1") == metrics.setdist_sum(space, S1, S2, "l1")
    assert metrics.setdist_sum(space, S1, S1) == 0.0 and metrics.setdist_max(space, S1, S1) == 0.0
    x = S1.iloc[[0]]
    assert metrics.k_distance(space, x, S1, "l1") == pytest.approx(0.5)
    assert metrics.k_distance(space, x, S2, "l2") == pytest.approx(1.0)
    S3 = pd.DataFrame({"a": [0.0, 1.0, 0.0], "b": [0.0, 0.0, 1.0]})
    assert metrics.k_diversity(space, S3, "l1") == pytest.approx((1 + 1 + 2) / 3)
    assert metrics.k_diversity(space, S3, "l2") == pytest.approx((1 + 1 + r2) / 3)
    assert metrics.k_diversity(space, S2) is None
    with pytest.raises(ValueError, match="empty"):
        metrics.setdist_sum(space, S1, S2.iloc[:0])
    with pytest.raises(ValueError, match="norm"):
        metrics.k_distance(space, x, S1, "linf")


def test_distances_in_minmax_units_with_a_category_counting_once():
    X = pd.DataFrame({"v": [0.0, 10.0, 5.0], "c": ["r", "g", "b"]})
    space = FeatureSpace.from_frame(X)
    D1 = metrics.distance_matrix(space, X.iloc[[0]], X, "l1")[0]
    D2 = metrics.distance_matrix(space, X.iloc[[0]], X, "l2")[0]
    assert D1 == pytest.approx([0.0, 1.0 + 1.0, 0.5 + 1.0])
    assert D2 == pytest.approx([0.0, math.sqrt(2), math.sqrt(1.25)])


# ----------------------------------------------------------------------------- errors
def test_bad_options_and_input(mixed):
    X, space, model = mixed
    for kwargs, match in [({"norm": "l3"}, "norm"), ({"selection": "k"}, "selection"),
                          ({"diversity": "cos"}, "diversity"), ({"n": 0}, "n must"),
                          ({"alpha": 2.5}, "positive integer"), ({"gamma": 0.0}, "gamma"),
                          ({"beta": 1.5}, r"\[0, 1\]"), ({"beta": -1.0}, "beta"),
                          ({"selection": "distance"}, "needs alpha")]:
        with pytest.raises(ValueError, match=match):
            DiverseNeighbours(model, space, **kwargs)
    with pytest.raises(TypeError):
        DiverseNeighbours(model, space, kappa=1)
    with pytest.raises(TypeError, match="predict"):
        DiverseNeighbours(object(), space)
    dn = DiverseNeighbours(model, space)
    with pytest.raises(RuntimeError, match="fit"):
        dn.explain(X.iloc[[0]])
    with pytest.raises(ValueError, match="unexpected column"):
        dn.fit(X.assign(label=0))
    dn.fit(X)
    bad = X.iloc[[0]].copy()
    bad.loc[bad.index[0], "income"] = np.nan
    with pytest.raises(ValueError, match="income.*NaN"):
        dn.explain(bad)
    with pytest.raises(ValueError, match="missing column"):
        dn.explain(X.iloc[[0]].drop(columns="debt"))
    with pytest.raises(ValueError, match="unseen category"):
        dn.explain(X.iloc[[0]].assign(housing="boat"))
    with pytest.raises(ValueError, match="one row"):
        dn.explain(X.iloc[:2])
    with pytest.raises(ValueError, match="not among the classes"):
        dn.explain(X.iloc[[0]], target=7)
    own = model.predict(space.transform(X.iloc[[0]]))[0]
    with pytest.raises(ValueError, match="own class"):
        dn.explain(X.iloc[[0]], target=own)


# ----------------------------------------------------------------------------- random
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_rows=st.integers(4, 40), n_features=st.integers(1, 4),
       norm=st.sampled_from(["l1", "l2"]), diversity=st.sampled_from(["angle", "distance"]),
       beta=st.floats(0.0, 1.0), gamma=st.sampled_from([0.3, 0.1, 0.01]),
       minimise=st.booleans())
def test_random_small_data(seed, n_rows, n_features, norm, diversity, beta, gamma, minimise):
    rng = np.random.default_rng(seed)
    names = [f"f{i}" for i in range(n_features)]
    X = pd.DataFrame(rng.normal(0, 3, (n_rows, n_features)), columns=names)
    X["k"] = rng.integers(0, 4, n_rows)
    space = FeatureSpace.from_frame(X)
    w, b = rng.normal(size=space.n_inputs), float(rng.normal())
    predict = linear(w, b)
    dn = DiverseNeighbours(predict, space, norm=norm, alpha=n_rows, diversity=diversity,
                           beta=beta, gamma=gamma, minimise=minimise, n=3).fit(X)
    x = X.iloc[[int(rng.integers(n_rows))]]
    res = dn.explain(x)
    own = predict(space.transform(x))[0]
    n_other = int((predict(space.transform(X)) != own).sum())
    assert res.n_candidates["S1"] == n_other
    assert len(res) <= 3 and (len(res) > 0) == (n_other > 0)
    if not len(res):
        return
    space.validate(res.counterfactuals)
    assert (predict(space.transform(res.counterfactuals)) != own).all()
    D = metrics.distance_matrix(space, x, res.counterfactuals, norm)[0]
    assert np.allclose(D, res.distances)
    assert res.distances[0] > 0
    cand = metrics.distance_matrix(space, x, res.candidates, norm)[0]
    assert (np.diff(cand) >= -1e-12).all()  # kept in distance order
    if diversity == "distance":
        DC = metrics.distance_matrix(space, res.candidates, res.candidates, norm)
        off = DC[np.triu_indices(len(DC), 1)]
        assert (off >= (1 + beta) * cand[0] - 1e-9).all()
    else:
        a = metrics.distance_weights(space, norm)
        U = (space.transform(res.candidates) - space.transform(x)) * a
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        cos = np.abs(U @ U.T)[np.triu_indices(len(U), 1)]
        assert (cos <= beta + 1e-9).all()
