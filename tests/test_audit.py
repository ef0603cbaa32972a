"""Recourse audits (``cfopt/batch/audit.py``): per group the rows needing recourse, the
shares with a counterfactual and proven without one, the cost between its proven bound
and the counterfactual's, bootstrap intervals and the gaps to a reference group;
figures checked by hand on a made-up batch, and on a real one."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import cfopt
from cfopt import BatchResult, Counterfactual, Status
from cfopt.batch.audit import recourse_audit


def answer(status: Status, cost: float | None = None, bound: float | None = None,
           moved: int = 1, group: str = "a") -> Counterfactual:
    """A made-up answer: ``moved`` features of three changed at ``cost``."""
    factual = pd.DataFrame({"g": [group], "x": [0.0], "y": [0.0], "z": [0.0]})
    point = None
    if cost is not None:
        point = factual.copy()
        for name in ["x", "y", "z"][:moved]:
            point[name] = 1.0
    return Counterfactual(factual=factual, counterfactual=point, target=(1,),
                          factual_class=0, predicted_class=1 if point is not None else None,
                          status=status, verified=point is not None, objective=cost,
                          bound=bound)


@pytest.fixture
def batch() -> BatchResult:
    opt, feas = Status.OPTIMAL, Status.FEASIBLE
    answers = [answer(opt, 1.0, 1.0, 1), answer(opt, 2.0, 2.0, 2), answer(opt, 3.0, 3.0, 3),
               answer(Status.INFEASIBLE), answer(opt, 2.0, 2.0, 1, "b"),
               answer(feas, 4.0, None, 2, "b"), answer(Status.ERROR, group="b"), answer(Status.ALREADY_TARGET, group="b"),
               answer(Status.INTERRUPTED, group="a")]
    return BatchResult(answers, index=pd.Index([f"r{i}" for i in range(9)]))


def test_each_group_counted_and_costed_by_hand(batch):
    audit = batch.audit("g")
    t = audit.table
    assert list(t.index) == ["a", "b"] and t.index.name == "g"
    assert t.loc["a", ["rows", "recourse", "no_recourse", "undecided", "proven"]].tolist() \
        == [4, 3, 1, 0, 3]
    assert t.loc["b", ["rows", "recourse", "no_recourse", "undecided", "proven"]].tolist() \
        == [3, 2, 0, 1, 1]
    assert t.loc["a", "recourse_share"] == 0.75 and t.loc["a", "no_recourse_share"] == 0.25
    assert t.loc["b", "recourse_share"] == pytest.approx(2 / 3)
    assert t.loc["a", "mean_cost"] == 2.0 and t.loc["a", "mean_bound"] == 2.0
    # b: a proven 2 and a feasible 4 without a bound (0): the least costs lie in [1, 3]
    assert t.loc["b", "mean_cost"] == 3.0 and t.loc["b", "mean_bound"] == 1.0
    assert t.loc["a", "median_cost"] == 2.0 and t.loc["b", "mean_changed"] == 1.5
    assert audit.excluded == {"already_target": 1, "interrupted": 1}
    assert audit.reference == "a"  # the largest group
    assert audit.costs["b"].tolist() == [2.0, 4.0]


def test_intervals_are_bootstrap_percentiles(batch):
    audit = batch.audit("g", n_boot=4000, seed=3)
    t = audit.table
    # a's costs 1, 2, 3: resampled means lie in [1, 3]; the 95 % interval is inside
    assert 1.0 <= t.loc["a", "mean_cost_low"] < 2.0 < t.loc["a", "mean_cost_high"] <= 3.0
    assert t.loc["a", "no_recourse_share_low"] == 0.0
    assert t.loc["a", "no_recourse_share_high"] == pytest.approx(0.75)
    narrow = batch.audit("g", n_boot=4000, seed=3, confidence=0.5).table
    assert narrow.loc["a", "mean_cost_low"] > t.loc["a", "mean_cost_low"]
    assert narrow.loc["a", "mean_cost_high"] < t.loc["a", "mean_cost_high"]
    again = batch.audit("g", n_boot=4000, seed=3).table
    pd.testing.assert_frame_equal(again, t)  # the seed fixes the resamples
    # a group of one cost: its interval is that cost
    one = BatchResult([answer(Status.OPTIMAL, 5.0, 5.0)])
    only = one.audit("g", n_boot=50).table.loc["a"]
    assert only["mean_cost_low"] == only["mean_cost_high"] == 5.0


def test_gaps_to_the_reference(batch):
    audit = batch.audit("g", n_boot=3000, seed=1)
    gap = audit.gaps.loc["b"]
    assert list(audit.gaps.index) == ["b"]
    assert gap["mean_cost_gap"] == 1.0  # b's 3.0 against a's 2.0
    assert gap["no_recourse_gap"] == -0.25
    assert gap["mean_cost_gap_low"] < 1.0 < gap["mean_cost_gap_high"]
    flipped = batch.audit("g", reference="b", n_boot=100)
    assert list(flipped.gaps.index) == ["a"] and flipped.gaps.loc["a", "mean_cost_gap"] == -1.0


def test_groups_from_a_series_indexed_like_x(batch):
    groups = pd.Series(["u", "v"] * 5, index=[f"r{i}" for i in range(10)], name="kind")
    audit = recourse_audit(batch, groups)
    assert audit.by == "kind" and set(audit.table.index) == {"u", "v"}
    assert audit.table["rows"].sum() == 7


@pytest.mark.parametrize("by, options, message", [
    ("nope", {}, "by='nope' is not a column of the batch's rows"),
    (pd.Series(["u"], index=["r0"]), {}, r"no group for the rows \['r1'"),
    (pd.Series(["u"] * 9 + [None], index=[f"r{i}" for i in range(9)] + ["r0"]), {},
     "duplicated index"),
    (pd.Series([None] + ["u"] * 8, index=[f"r{i}" for i in range(9)]), {},
     r"no group \(NaN\) for the rows \['r0'\]"),
    (["a"], {}, "by must be a column name or a pandas Series, got list"),
    ("g", {"reference": "c"}, "reference 'c' is not a group of 'g'"),
    ("g", {"confidence": 1.0}, "confidence must be a float in"),
    ("g", {"confidence": 0.0}, "confidence must be a float in"),
    ("g", {"confidence": float("nan")}, "confidence must be a float in"),
    ("g", {"n_boot": 0}, "n_boot must be a positive integer"),
    ("g", {"n_boot": True}, "n_boot must be a positive integer"),
])
def test_bad_requests_name_the_culprit(batch, by, options, message):
    with pytest.raises(ValueError, match=message):
        recourse_audit(batch, by, **options)


def test_json_card_and_plot(batch):
    audit = batch.audit("g", n_boot=200)
    data = json.loads(audit.to_json())
    assert data["groups"]["a"]["rows"] == 4 and isinstance(data["groups"]["a"]["rows"], int)
    assert data["groups"]["b"]["no_recourse_share_low"] == 0.0
    assert data["gaps"]["b"]["mean_cost_gap"] == 1.0 and data["reference"] == "a"
    assert data["excluded"] == {"already_target": 1, "interrupted": 1}
    markup = audit._repr_html_()
    assert "RecourseAudit" in markup and "gaps to a" in markup
    import matplotlib

    matplotlib.use("Agg")
    ax = audit.plot()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["a\n4 rows\n25% none", "b\n3 rows\n0% none"]


def test_a_real_batch_audited_by_a_feature():
    from sklearn.linear_model import LogisticRegression

    data = cfopt.datasets.load_german()
    space = cfopt.FeatureSpace.from_frame(data.X)
    space.immutable("status_sex")
    model = LogisticRegression(max_iter=500).fit(space.transform(data.X), data.y)
    explainer = cfopt.Explainer(model, space)
    rows = data.X.iloc[:40]
    batch = explainer.explain_many(rows, target=1, progress=False)
    audit = batch.audit("status_sex", n_boot=200)
    needing = sum(a.status is not Status.ALREADY_TARGET for a in batch)
    assert audit.table["rows"].sum() == needing
    assert audit.table["proven"].sum() == needing  # every query proven optimal
    for group, row in audit.table.iterrows():
        costs = [a.objective for a, g in zip(batch, rows["status_sex"])
                 if g == group and a.found]
        assert row["mean_cost"] == pytest.approx(np.mean(costs))
        assert row["mean_bound"] == pytest.approx(np.mean(costs), rel=1e-3)
