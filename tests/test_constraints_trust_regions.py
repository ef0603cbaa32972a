"""Trust regions (:mod:`cfopt.constraints.trust_regions`): the checks of their arguments,
the reference points a query selects (by label or prediction, the nearest to the
factual, with the factual, by k-means cluster), the LP check of a raw point, and tiny
solves whose answers lie in the region."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyomo.environ as pyo
import pytest
from sklearn.linear_model import LogisticRegression

import cfopt
import cfopt.constraints.trust_regions as trust_regions
from cfopt.constraints.trust_regions import (
    NORMS,
    ClusterHulls,
    ConvexHull,
    NearestNeighbourHull,
    in_region,
)
from cfopt.space.feature import Feature
from cfopt.space.space import FeatureSpace

SPACE = FeatureSpace([
    Feature("a", "continuous", lower=0.0, upper=10.0, scale=10.0),
    Feature("b", "continuous", lower=0.0, upper=10.0, scale=10.0),
    Feature("c", "categorical", categories=("p", "q")),
])
DATA = pd.DataFrame({"a": [1.0, 2.0, 8.0, 9.0, 7.0, 6.0, 0.5, 9.5],
                     "b": [1.0, 2.0, 8.0, 9.0, 6.0, 7.0, 3.0, 0.5],
                     "c": ["p", "p", "q", "q", "p", "q", "p", "q"]})
LABELS = [0, 0, 1, 1, 1, 1, 0, 1]
MODEL = LogisticRegression(C=100).fit(SPACE.transform(DATA), [0, 0, 1, 1, 1, 1, 0, 0])
FACTUAL = pd.DataFrame([{"a": 1.0, "b": 1.5, "c": "p"}])


def query(region, target=1):
    explainer = cfopt.Explainer(MODEL, SPACE, mip_gap=0.0, constraints=[region])
    m = explainer.milp
    m.set_factual(FACTUAL)
    m.set_target(target)
    return explainer, m


@pytest.mark.parametrize("kwargs, message", [
    (dict(data=DATA.iloc[:0]), "^the trust region needs at least one data row$"),
    (dict(labels=[1, 0]), "labels has 2 entries for 8 rows"),
    (dict(epsilon=-0.1), r"epsilon must be a non-negative number, got -0.1"),
    (dict(epsilon=float("nan")), "epsilon must be a non-negative number, got nan"),
    (dict(epsilon="1"), "epsilon must be a non-negative number, got '1'"),
    (dict(norm="l2"), r"norm must be one of \('l1', 'linf'\), got 'l2'"),
    (dict(max_points=0), "max_points must be a positive integer, got 0"),
    (dict(max_points=True), "max_points must be a positive integer, got True"),
    (dict(max_points=2.0), "max_points must be a positive integer, got 2.0"),
])
def test_bad_arguments_are_refused(kwargs, message):
    kwargs = {"data": DATA, **kwargs}
    with pytest.raises(ValueError, match=message):
        ConvexHull(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_clusters=0), "n_clusters must be a positive integer, got 0"),
    (dict(points_per_cluster=False), "points_per_cluster must be a positive integer, got "
                                     "False"),
    (dict(points_per_cluster=1.5), "points_per_cluster must be a positive integer"),
])
def test_bad_cluster_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ClusterHulls(DATA, **kwargs)


def test_the_arguments_kept():
    assert NORMS == ("l1", "linf")
    hull = ConvexHull(DATA.set_index(DATA.index + 5), epsilon=1, norm="linf")
    assert list(hull.data.index) == list(range(8))
    assert hull.epsilon == 1.0 and isinstance(hull.epsilon, float) and hull.norm == "linf"
    assert hull.max_points == 500 and hull.include_factual is False and hull.labels is None
    assert ConvexHull(DATA, epsilon=0).epsilon == 0.0
    knn = NearestNeighbourHull(DATA, labels=LABELS)
    assert knn.max_points == 10 and knn.include_factual is True
    assert list(knn.labels) == LABELS and knn.epsilon == 0.0 and knn.norm == "l1"
    assert NearestNeighbourHull(DATA, 3, epsilon=0.5, norm="linf", name="n").max_points == 3
    clusters = ClusterHulls(DATA)
    assert (clusters.n_clusters, clusters.points_per_cluster, clusters.seed) == (5, 50, 0)
    assert (ConvexHull.kind, NearestNeighbourHull.kind, ClusterHulls.kind) == (
        "convex_hull", "knn_hull", "cluster_hulls")


def test_data_without_a_feature_column_is_refused():
    with pytest.raises(ValueError, match=r"trust region 'hull': the data lack the feature "
                                         r"column\(s\) \['b'\]"):
        cfopt.Explainer(MODEL, SPACE, constraints=[ConvexHull(DATA.drop(columns="b"),
                                                              name="hull")])


def test_the_nearest_target_rows_by_label_and_by_prediction():
    hull = ConvexHull(DATA, labels=LABELS, max_points=2, name="hull")
    _, m = query(hull)
    # label 1: rows 2, 3, 4, 5, 7; weighted L1 to (1, 1.5, p) with weights 1/10 (a, b), 1 (c)
    assert np.allclose(hull._distance(m, np.array([2, 4, 7])), [1.35 + 1, 1.05, 0.95 + 1])
    points = hull.points(m)
    assert np.allclose(points, [[0.7, 0.6, 1, 0], [0.95, 0.05, 0, 1]])  # rows 4, 7
    points[0, 0] = 5.0  # a copy
    assert hull.points(m)[0, 0] == 0.7
    predicted = ConvexHull(DATA, max_points=3, name="hull")
    _, m = query(predicted)
    assert np.allclose(predicted.points(m), SPACE.encode(DATA.iloc[[4, 5, 2]]))


def test_few_rows_are_padded_with_the_last_and_the_factual_comes_first():
    labels = [0, 0, 1, 0, 0, 0, 0, 1]
    knn = NearestNeighbourHull(DATA, k=4, labels=labels, name="knn")
    _, m = query(knn)
    # no more than k target rows: taken in their order, the last repeated
    expected = SPACE.encode(pd.concat([FACTUAL, DATA.iloc[[2, 7, 7, 7]]]))
    assert np.allclose(knn.points(m), expected)
    assert len(m.knn.weight) == 5


def test_no_target_row_is_named():
    with pytest.raises(ValueError, match=r"trust region 'hull': no data row is labelled as "
                                         r"the target \[1\]"):
        query(ConvexHull(DATA, labels=[0] * 8, name="hull"))
    with pytest.raises(ValueError, match=r"trust region 'hull': no data row is predicted as "
                                         r"the target \[1\]"):
        query(ConvexHull(DATA.iloc[[0, 1, 6]], name="hull"))


def test_data_beyond_the_bounds_are_clipped_into_them():
    data = pd.DataFrame({"a": [12.0, 9.0], "b": [-3.0, 9.0], "c": ["q", "q"]})
    hull = ConvexHull(data, labels=[1, 1], name="hull")
    _, m = query(hull)
    assert np.allclose(hull.points(m), [[1.0, 0.0, 0, 1], [0.9, 0.9, 0, 1]])


def test_in_region_by_linear_program():
    segment = np.array([[0.0, 0.0], [1.0, 0.0]])
    assert in_region(np.array([0.5, 0.0]), segment, 0.0, "l1")
    assert in_region(np.array([0.5, 0.0]), segment, 0.0, "linf")
    z = np.array([2.0, 0.5])  # nearest (1, 0): l1 1.5, linf 1.0
    assert not in_region(z, segment, 1.2, "l1") and in_region(z, segment, 1.2, "linf")
    assert in_region(z, segment, 1.5, "l1") and not in_region(z, segment, 0.99, "linf")
    assert in_region(z, segment, 1.5 - 5e-8, "l1") and not in_region(z, segment, 1.5 - 2e-7,
                                                                     "l1")
    assert in_region(z, segment, 1.0 - 5e-8, "linf")
    assert not in_region(z, segment, 1.0 - 2e-7, "linf")
    assert in_region(z, segment, 1.4, "l1", tol=0.2)


def test_in_region_takes_a_certificate_without_a_linear_program(monkeypatch):
    def no_lp(*args, **kwargs):
        raise AssertionError("a linear program was solved")

    segment = np.array([[0.0, 0.0], [1.0, 0.0]])
    z = np.array([0.25, 0.1])
    monkeypatch.setattr(trust_regions, "linprog", no_lp)
    assert in_region(z, segment, 0.1, "l1", weights=np.array([3.0, 1.0]))
    assert in_region(z, segment, 0.1, "linf", weights=np.array([0.75, 0.25]))
    assert in_region(z, segment, 0.1, "l1", weights=np.array([0.75, 0.25, -1.0])[:2])
    assert in_region(np.array([1.0, 0.0]), segment, 0.0, "l1", weights=np.array([-1.0, 2.0]))
    # a certificate 0.05 + 0.1 away in l1 but 0.1 in linf
    z = np.array([0.3, 0.1])
    assert in_region(z, segment, 0.1, "linf", weights=np.array([0.75, 0.25]))
    for weights in (np.array([0.75, 0.25, 0.0]), np.array([0.0, 0.0]),
                    np.array([np.nan, 1.0]), np.array([0.75, 0.25])):
        with pytest.raises(AssertionError, match="a linear program was solved"):
            in_region(z, segment, 0.1, "l1", weights=weights)


def test_violations_of_a_raw_point():
    hull = ConvexHull(DATA, labels=LABELS, name="hull")
    _, m = query(hull)
    factual = FACTUAL.iloc[0]
    inside = pd.Series({"a": 7.5, "b": 7.5, "c": "q"})
    assert hull.violations(m, factual, inside) == []
    outside = pd.Series({"a": 1.0, "b": 1.5, "c": "p"})
    assert hull.violations(m, factual, outside) == [
        "trust region 'hull': the counterfactual lies outside the hull of its reference "
        "points"]
    wide = ConvexHull(DATA, labels=LABELS, epsilon=0.01, name="hull")
    _, m = query(wide)
    assert wide.violations(m, factual, outside) == [
        "trust region 'hull': the counterfactual lies outside the ε-hull of its reference "
        "points"]


@pytest.mark.parametrize("norm", ["l1", "linf"])
def test_a_solve_lands_in_the_region_and_costs_more_than_without(norm):
    plain = cfopt.Explainer(MODEL, SPACE, mip_gap=0.0).explain(FACTUAL, target=1)
    hull = ConvexHull(DATA, labels=LABELS, epsilon=0.15, norm=norm, name="hull")
    explainer, m = query(hull)
    ce = explainer.explain(FACTUAL, target=1)
    assert ce.verified
    assert ce.objective > plain.objective + 1e-6
    z = SPACE.encode(ce.counterfactual)[0]
    points = hull.points(m)
    assert in_region(z, points, 0.15, norm)
    assert not in_region(z, points, 0.14, norm)
    weights = hull._solution_weights(m)[0]
    assert weights is not None and weights.sum() == pytest.approx(1.0)


def test_weights_without_a_solution_are_no_certificate():
    hull = ConvexHull(DATA, labels=LABELS, name="hull")
    _, m = query(hull)
    assert hull._solution_weights(m) == [None]


def test_cluster_hulls_pick_the_members_nearest_each_centre():
    data = pd.DataFrame({"a": [8.0, 9.0, 8.5, 9.5, 1.0, 2.0, 1.5, 0.0],
                         "b": [8.0, 9.0, 8.5, 9.5, 9.0, 8.0, 8.5, 0.0],
                         "c": ["q"] * 7 + ["p"]})
    labels = [1, 1, 1, 1, 1, 1, 1, 0]
    region = ClusterHulls(data, n_clusters=3, labels=labels, points_per_cluster=2,
                          name="clusters")
    _, m = query(region)
    sets = region._reference_sets(m)
    assert len(sets) == 3 and all(s.shape == (2, 4) for s in sets)
    found = sorted(tuple(map(tuple, np.round(s, 6))) for s in sets)
    z = SPACE.encode(data)
    # the 4 rows around (8.75, 8.75) split in two, the 3 rows around (1.5, 8.5) one
    # cluster: its 2 members nearest its centre (1.5, 8.5) and (1, 9) or (2, 8)
    assert any(np.allclose(s[0], z[6]) for s in sets)
    assert len(found) == 3
    b = m.clusters
    assert [b.exists[c].value for c in range(3)] == [1.0, 1.0, 1.0]
    assert region._clusters(m) is region._clusters(m)  # cached per target
    two = ClusterHulls(data, n_clusters=4, labels=[0, 0, 0, 0, 1, 1, 1, 0],
                       points_per_cluster=3, name="clusters")
    _, m = query(two)
    sets = two._reference_sets(m)
    assert len(sets) == 3  # 3 distinct target rows: 3 clusters of one member each
    assert [m.clusters.exists[c].value for c in range(4)] == [1.0, 1.0, 1.0, 0.0]
    assert all(np.allclose(s, s[0]) for s in sets)  # padded with the one member
    assert sorted(tuple(np.round(s[0], 6)) for s in sets) == sorted(
        tuple(np.round(r, 6)) for r in z[[4, 5, 6]])
    assert all(m.clusters.point[3, i, j].value == 0.0 for i in range(3) for j in range(4))
    points = two._clusters(m)
    assert all(m.clusters.point[c, i, j].value == pytest.approx(points[c, i, j])
               for c in range(3) for i in range(3) for j in range(4))


def test_a_cluster_solve_lands_in_one_of_the_hulls():
    data = pd.DataFrame({"a": [8.0, 9.0, 8.0, 9.0, 1.0, 2.0, 1.0, 2.0],
                         "b": [8.0, 9.0, 9.0, 8.0, 9.0, 9.0, 8.0, 8.0],
                         "c": ["q"] * 8})
    region = ClusterHulls(data, n_clusters=2, labels=[1] * 8, points_per_cluster=4,
                          name="clusters")
    explainer, m = query(region)
    ce = explainer.explain(FACTUAL, target=1)
    assert ce.verified
    z = SPACE.encode(ce.counterfactual)[0]
    assert any(in_region(z, s, 0.0, "l1") for s in region._reference_sets(m))
    assert sum(m.clusters.chosen[c].value for c in range(2)) == pytest.approx(1.0)
    assert region.violations(m, FACTUAL.iloc[0], FACTUAL.iloc[0]) != []


def test_the_subclasses_keep_epsilon_and_norm():
    knn = NearestNeighbourHull(DATA, 3, epsilon=0.5, norm="linf")
    clusters = ClusterHulls(DATA, epsilon=0.25, norm="linf")
    assert (knn.epsilon, knn.norm, clusters.epsilon, clusters.norm) == (0.5, "linf", 0.25,
                                                                        "linf")
    one = ClusterHulls(DATA, n_clusters=1, points_per_cluster=1)
    assert (one.n_clusters, one.points_per_cluster) == (1, 1)


def test_violations_use_the_regions_norm():
    hull = ConvexHull(DATA, labels=LABELS, epsilon=0.12, name="hull")
    _, m = query(hull)
    factual = FACTUAL.iloc[0]
    z = SPACE.encode(pd.DataFrame([{"a": 7.5, "b": 7.5, "c": "q"}]))[0]
    points = hull.points(m)
    # a point 0.1 off in two inputs: l1 0.2 > 0.12, linf 0.1 <= 0.12
    off = pd.Series({"a": 10.0, "b": 10.0, "c": "q"})  # beyond the corner (9, 9)
    far = SPACE.encode(pd.DataFrame([off]))[0]
    assert in_region(z, points, 0.0, "l1")
    assert not in_region(far, points, 0.12, "l1") and in_region(far, points, 0.12, "linf")
    assert hull.violations(m, factual, off) != []


def test_a_cluster_solve_is_certified_by_its_rows():
    data = pd.DataFrame({"a": [8.0, 9.0, 8.0, 9.0, 1.0, 2.0, 1.0, 2.0],
                         "b": [8.0, 9.0, 9.0, 8.0, 9.0, 9.0, 8.0, 8.0],
                         "c": ["q"] * 8})
    region = ClusterHulls(data, n_clusters=2, labels=[1] * 8, points_per_cluster=3,
                          epsilon=0.05, name="clusters")
    explainer, m = query(region)
    b = m.clusters
    assert list(b.CLUSTERS) == [0, 1] and list(b.MEMBERS) == [0, 1, 2]
    assert all(b.chosen[c].is_binary() for c in b.CLUSTERS)
    ce = explainer.explain(FACTUAL, target=1)
    assert ce.verified
    chosen = [round(b.chosen[c].value) for c in b.CLUSTERS]
    assert sum(chosen) == 1
    for c in b.CLUSTERS:
        assert sum(b.weight[c, i].value for i in b.MEMBERS) == pytest.approx(chosen[c],
                                                                             abs=1e-7)
        assert chosen[c] <= pyo.value(b.exists[c])
    z = SPACE.encode(ce.counterfactual)[0]
    s = np.array([b.s_pos[j].value - b.s_neg[j].value for j in b.INPUTS])
    hull = np.array([sum(pyo.value(b.point[c, i, j]) * b.weight[c, i].value
                         for c in b.CLUSTERS for i in b.MEMBERS) for j in b.INPUTS])
    assert z + s == pytest.approx(hull, abs=1e-6)
    assert np.abs(s).sum() <= 0.05 + 1e-7 and np.abs(s).sum() > 1e-6


def test_clusters_are_per_target():
    data = pd.DataFrame({"a": [8.0, 9.0, 1.0, 2.0], "b": [8.0, 9.0, 1.0, 2.0],
                         "c": ["q", "q", "p", "p"]})
    region = ClusterHulls(data, n_clusters=1, labels=[1, 1, 0, 0], name="clusters")
    explainer = cfopt.Explainer(MODEL, SPACE, constraints=[region])
    m = explainer.milp
    m.set_factual(FACTUAL)
    m.set_target(1)
    ones = region._reference_sets(m)[0]
    m.set_factual(pd.DataFrame([{"a": 8.0, "b": 8.0, "c": "q"}]))
    m.set_target(0)
    zeros = region._reference_sets(m)[0]
    assert np.allclose(np.sort(ones[:2], axis=0), SPACE.encode(data.iloc[[0, 1]]))
    assert np.allclose(np.sort(zeros[:2], axis=0), SPACE.encode(data.iloc[[2, 3]]))


def test_exactly_max_points_rows_keep_their_order_and_knn_takes_the_k_nearest():
    hull = ConvexHull(DATA, labels=LABELS, max_points=5, name="hull")
    _, m = query(hull)
    assert np.allclose(hull.points(m), SPACE.encode(DATA.iloc[[2, 3, 4, 5, 7]]))
    knn = NearestNeighbourHull(DATA, k=2, labels=LABELS, name="knn")
    _, m = query(knn)
    assert np.allclose(knn.points(m), SPACE.encode(pd.concat([FACTUAL, DATA.iloc[[4, 7]]])))


def test_in_region_on_the_boundary_exactly():
    segment = np.array([[0.0, 0.0], [1.0, 0.0]])
    z = np.array([2.0, 0.5])  # exactly 1.5 (l1), 1.0 (linf) from the segment
    assert in_region(z, segment, 1.5, "l1", tol=0.0)
    assert in_region(z, segment, 1.0, "linf", tol=0.0)
    assert not in_region(z, segment, 1.5 - 1e-9, "l1", tol=0.0)


def test_a_certificate_on_the_boundary_and_bad_certificates(monkeypatch):
    import warnings

    segment = np.array([[0.0, 0.0], [1.0, 0.0]])
    solved = []

    def lp(*args, **kwargs):
        solved.append(1)
        return real(*args, **kwargs)

    real = trust_regions.linprog
    monkeypatch.setattr(trust_regions, "linprog", lp)
    z = np.array([0.5, 0.25])  # 0.25 from the certificate's point (0.5, 0) in both norms
    assert in_region(z, segment, 0.25, "linf", tol=0.0, weights=np.array([0.5, 0.5]))
    assert in_region(z, segment, 0.25, "l1", tol=0.0, weights=np.array([1.0, 1.0]))
    assert solved == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by a zero sum of weights
        assert in_region(z, segment, 0.25, "l1", tol=0.0, weights=np.array([0.0, -1.0]))
        # a certificate with a missing weight: no certificate, the LP decides
        assert in_region(z, segment, 0.25, "l1", tol=0.0, weights=[None, 1.0])
        assert not in_region(z, segment, 0.2, "l1", tol=0.0, weights=[None, 1.0])
    assert len(solved) == 3


def violated(block):
    """The names of the block's constraints its variables' current values violate."""
    out = set()
    for c in block.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        if (c.has_lb() and body < pyo.value(c.lower) - 1e-9) or (
                c.has_ub() and body > pyo.value(c.upper) + 1e-9):
            out.add(c.parent_component().local_name)
    return sorted(out)


def test_the_cluster_rows_hold_exactly_the_disjunction():
    data = pd.DataFrame({"a": [8.0, 9.0, 8.0, 9.0, 1.0, 2.0, 1.0, 2.0],
                         "b": [8.0, 9.0, 9.0, 8.0, 9.0, 9.0, 8.0, 8.0],
                         "c": ["q"] * 8})
    region = ClusterHulls(data, n_clusters=4, labels=[0, 0, 0, 0, 1, 1, 1, 0],
                          points_per_cluster=2, epsilon=0.1, norm="linf", name="clusters")
    explainer, m = query(region)
    assert explainer.explain(FACTUAL, target=1).verified
    b = m.clusters
    assert [pyo.value(b.exists[c]) for c in b.CLUSTERS] == [1.0, 1.0, 1.0, 0.0]
    assert violated(b) == []
    values = [(v, v.value) for v in b.component_data_objects(pyo.Var)]

    def reset():
        for v, value in values:
            v.set_value(value, skip_validation=True)

    # s = s_pos - s_neg: adding to both keeps the hull rows, not the slack's norm
    b.s_pos[0].value += 0.06
    b.s_neg[0].value += 0.06
    assert violated(b) == ["slack_norm"]
    reset()
    c = next(c for c in range(3) if round(b.chosen[c].value) == 1)
    other = (c + 1) % 3
    b.chosen[other].value = 1.0
    assert "one_cluster" in violated(b) and "convexity" in violated(b)
    reset()
    # the cluster that does not exist cannot be chosen
    b.chosen[c].value, b.chosen[3].value = 0.0, 1.0
    for i in b.MEMBERS:
        b.weight[3, i].value, b.weight[c, i].value = b.weight[c, i].value, 0.0
    assert "usable" in violated(b)
    reset()
    for i in b.MEMBERS:
        b.weight[c, i].value *= 0.5
    assert "convexity" in violated(b)


def test_the_hull_rows_and_a_certificate_from_the_solve(monkeypatch, caplog):
    hull = ConvexHull(DATA, labels=LABELS, epsilon=0.15, name="hull")
    explainer, m = query(hull)
    ce = explainer.explain(FACTUAL, target=1)
    b = m.hull
    assert violated(b) == []
    b.s_pos[0].value += 0.1
    b.s_neg[0].value += 0.1
    assert violated(b) == ["slack_norm"]

    def no_lp(*args, **kwargs):
        raise AssertionError("a linear program was solved")

    monkeypatch.setattr(trust_regions, "linprog", no_lp)
    b.s_pos[0].value -= 0.1
    b.s_neg[0].value -= 0.1
    # the MILP's weights certify its answer: no LP
    assert hull.violations(m, FACTUAL.iloc[0], ce.counterfactual.iloc[0]) == []
    with caplog.at_level("WARNING"):  # a new query replaces the hull's rows
        m.set_factual(pd.DataFrame([{"a": 2.0, "b": 1.5, "c": "p"}]))
    assert caplog.records == []
    assert len(b.hull) == 4


def test_one_point_per_region_and_the_target_of_a_regression():
    assert ConvexHull(DATA, max_points=1).max_points == 1
    hull = ConvexHull(DATA, labels=LABELS, max_points=1, name="hull")
    _, m = query(hull)
    assert np.allclose(hull.points(m), SPACE.encode(DATA.iloc[[4]]))  # the nearest
    one = cfopt.FeatureSpace([Feature("a", "continuous", lower=0.0, upper=10.0)])
    data = pd.DataFrame({"a": [1.0, 2.0, 8.0, 9.0]})
    from sklearn.linear_model import LinearRegression

    model = LinearRegression().fit(one.transform(data), [1.0, 2.0, 8.0, 9.0])
    region = ClusterHulls(data, n_clusters=3, points_per_cluster=1, name="clusters")
    explainer = cfopt.Explainer(model, one, constraints=[region])
    m = explainer.milp
    m.set_factual(pd.DataFrame({"a": [1.0]}))
    m.set_target((7.5, 20.0))  # the rows predicted 8 and 9
    sets = region._reference_sets(m)
    assert sorted(float(s[0, 0]) for s in sets) == pytest.approx(
        sorted(one.encode(data.iloc[[2, 3]])[:, 0]))
    assert [pyo.value(m.clusters.exists[c]) for c in range(3)] == [1.0, 1.0, 0.0]
    by_label = ConvexHull(data, labels=[1.0, 2.0, 8.0, 9.0], name="hull")
    explainer = cfopt.Explainer(model, one, constraints=[by_label])
    m = explainer.milp
    m.set_factual(pd.DataFrame({"a": [1.0]}))
    m.set_target((1.5, 8.5))
    assert np.allclose(by_label.points(m)[:2, 0], one.encode(data.iloc[[1, 2]])[:, 0])


def test_labels_of_mixed_types_select_the_target():
    hull = ConvexHull(DATA, labels=[0, 0, 1, 1, "unknown", 1, 0, 1], name="hull")
    _, m = query(hull)
    assert np.allclose(hull.points(m)[:4], SPACE.encode(DATA.iloc[[2, 3, 5, 7]]))
    assert list(ConvexHull(DATA.set_index(DATA.index + 5)).data.columns) == ["a", "b", "c"]


def test_rows_at_equal_distances_keep_their_order():
    # distances 0.25 / 10 to (5, 5, p) but every fourth row's 0.3 / 10
    pattern = [(7.5, 5.0), (2.5, 5.0), (8.0, 5.0), (5.0, 7.5)]
    data = pd.DataFrame([{"a": a, "b": b, "c": "p"} for a, b in pattern * 10])
    hull = ConvexHull(data, labels=[0] * 40, max_points=5, name="hull")
    explainer = cfopt.Explainer(MODEL, SPACE, constraints=[hull])
    m = explainer.milp
    m.set_factual(pd.DataFrame([{"a": 5.0, "b": 5.0, "c": "p"}]))
    m.set_target(0)
    assert np.allclose(hull.points(m), SPACE.encode(data.iloc[[0, 1, 3, 4, 5]]))
