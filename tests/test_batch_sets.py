"""A batch of diverse sets (``explain_many(X, n=k)``, DiCE's ``total_CFs=k`` over many
queries): a :class:`~cfopt.CounterfactualSet` per row, the same as ``explain(x, n=k)``
row by row, frames with a row per member, resumable from its file, in parallel the same,
and bad requests refused before any solve."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.batch.result import UNCHANGED
from cfopt.results.counterfactual import answer_from_dict


@pytest.fixture(scope="module")
def credit():
    rng = np.random.default_rng(11)
    n = 300
    X = pd.DataFrame({"age": rng.integers(18, 70, n),
                      "income": rng.uniform(10, 100, n).round(1),
                      "housing": rng.choice(["rent", "own", "free"], n)},
                     index=[f"r{i}" for i in range(n)])
    y = ((X.income - 55) / 20 + (X.housing == "own") * 1.0 + (X.age - 40) / 30 > 0)
    space = cfopt.FeatureSpace.from_frame(X)
    model = LogisticRegression().fit(space.transform(X), y.astype(int))
    explainer = cfopt.Explainer(model, space)
    pred = explainer.milp.predict(X)
    rows = pd.concat([X[pred == 0].iloc[:3], X[pred == 1].iloc[:1]])
    return X, explainer, rows


@pytest.fixture(scope="module")
def sets(credit):
    _, explainer, rows = credit
    return explainer.explain_many(rows, target=1, n=3, diversity="nogood", progress=False)


def test_each_row_gets_the_set_explain_gives(credit, sets):
    _, explainer, rows = credit
    assert [type(a).__name__ for a in sets] == ["CounterfactualSet"] * 4
    for k in range(3):
        alone = explainer.explain(rows.iloc[[k]], target=1, n=3, diversity="nogood")
        assert sets[k].counterfactuals.equals(alone.counterfactuals)
        assert sets[k].costs == pytest.approx(alone.costs) and sets[k].found
    accepted = sets[3]
    assert accepted.status is cfopt.Status.ALREADY_TARGET and len(accepted) == 0
    assert not accepted.found and accepted.requested == 3 and accepted.method == "nogood"
    assert "already classified" in accepted.message
    assert sets.counts() == {"optimal": 3, "already_target": 1} and sets.of_sets


def test_frames_have_a_row_per_member(sets):
    frame = sets.to_frame()
    assert list(frame.index) == list(sets.labels)
    assert frame["members"].tolist() == [len(a) for a in sets]
    assert frame["objective"].tolist()[:3] == [a.costs[0] for a in sets[:3]]
    assert frame["changed"].tolist()[:3] == [len(a[0].changes()) for a in sets[:3]]
    table = sets.counterfactuals()
    expected = [(label, k) for label, a in zip(sets.labels, sets)
                for k in range(max(len(a), 1))]
    assert list(table.index) == expected and table.index.names == [None, "member"]
    for label, a in zip(sets.labels[:3], sets):  # integers nullable: a row has none
        pd.testing.assert_frame_equal(table.loc[label].reset_index(drop=True),
                                      a.counterfactuals, check_dtype=False)
    assert table.loc[sets.labels[3]].isna().all(axis=None)  # no member: one empty row
    view = sets.counterfactuals(changes_only=True)
    for (label, k), row in view.iterrows():
        answer = sets.by_label(label)
        if not answer.found:
            assert row.isna().all()
            continue
        changed = set(answer[k].changes().index)
        for name, value in row.items():
            assert (value == UNCHANGED) == (name not in changed)
    long = sets.changes()
    assert list(long.columns) == ["row", "member", "feature", "from", "to"]
    assert [tuple(r) for r in long.itertuples(index=False)] == [
        (label, k, name, c["from"], c["to"]) for label, a in zip(sets.labels, sets)
        for k, member in enumerate(a) for name, c in member.changes().iterrows()]
    assert "BatchResult" in sets._repr_html_() and "3 of 4 found" in sets._repr_html_()


def test_sets_resume_from_their_file_and_a_changed_n_is_refused(credit, sets, tmp_path):
    _, explainer, rows = credit
    out = tmp_path / "sets.jsonl"
    first = explainer.explain_many(rows, target=1, n=3, out=out, progress=False)
    again = explainer.explain_many(rows, target=1, n=3, out=out, progress=False)
    assert again.resumed == len(rows) and again.counterfactuals().equals(
        first.counterfactuals())
    assert [a.status for a in again] == [a.status for a in first]
    assert [a.costs for a in again] == [a.costs for a in first]
    assert again.counterfactuals().equals(sets.counterfactuals())
    with pytest.raises(ValueError, match="options changed"):
        explainer.explain_many(rows, target=1, n=2, out=out, progress=False)


def test_a_set_reads_back_from_its_dict(sets):
    for answer in sets:
        back = answer_from_dict(json.loads(answer.to_json()))
        assert type(back) is type(answer) and back.to_dict() == answer.to_dict()
    plain = cfopt.Counterfactual(
        factual=pd.DataFrame({"a": [1]}), counterfactual=None, target=(1,),
        factual_class=0, predicted_class=None, status=cfopt.Status.INFEASIBLE,
        verified=False, objective=None, bound=None)
    assert type(answer_from_dict(plain.to_dict())) is cfopt.Counterfactual
    with pytest.raises(ValueError, match="not a serialized CounterfactualSet"):
        answer_from_dict({"members": []})


def test_sets_in_parallel_equal_the_serial_ones(credit, sets):
    _, explainer, rows = credit
    parallel = explainer.explain_many(rows, target=1, n=3, diversity="nogood", n_jobs=2,
                                      progress=False)
    assert parallel.counterfactuals().equals(sets.counterfactuals())
    assert [type(a).__name__ for a in parallel] == ["CounterfactualSet"] * 4


def test_a_row_without_a_set_keeps_its_status(credit):
    """A row narrowed to a feature that cannot reach the target: an empty set, proven
    infeasible, the batch going on."""
    X, explainer, rows = credit
    batch = explainer.explain_many(rows.iloc[:3], target=1, n=2,
                                   permitted_range={"income": (None, 11.0),
                                                    "housing": ["rent"]},
                                   features_to_vary=["income", "housing"], progress=False)
    assert all(type(a).__name__ == "CounterfactualSet" for a in batch)
    failed = [a for a in batch if a.status is cfopt.Status.INFEASIBLE]
    assert failed and all(len(a) == 0 and "query_range" in a.message for a in failed)
    members = batch.to_frame()["members"]
    assert [members.iloc[i] for i, a in enumerate(batch)
            if a.status is cfopt.Status.INFEASIBLE] == [0] * len(failed)


@pytest.mark.parametrize("options, error, message", [
    ({"n": 0}, ValueError, "n must be a positive integer, got 0"),
    ({"n": True}, ValueError, "n must be a positive integer, got True"),
    ({"diversity": "far"}, ValueError, "unknown diversity method 'far'"),
    ({"n": 2, "diversity": "distance", "hamming": 2}, TypeError,
     r"option\(s\) \['hamming'\] do not apply to diversity='distance'"),
    ({"n": 2, "colour": 1}, TypeError, r"unknown option\(s\) \['colour'\]"),
    ({"hamming": 2}, TypeError, r"unknown option\(s\) \['hamming'\] for explain_many"),
])
def test_bad_set_requests_are_refused_before_any_solve(credit, tmp_path, options, error,
                                                        message):
    _, explainer, rows = credit
    out = tmp_path / "never.jsonl"
    with pytest.raises(error, match=message):
        explainer.explain_many(rows, target=1, out=out, progress=False, **options)
    assert not out.exists()  # nothing partial


def test_cpsat_refuses_sets_in_a_batch(credit):
    from sklearn.tree import DecisionTreeClassifier

    X, explainer, rows = credit
    space = explainer.space
    tree = DecisionTreeClassifier(max_depth=3, random_state=0).fit(
        space.transform(X), (X.income > 55).astype(int))
    cpsat = cfopt.Explainer(tree, space, solver="cpsat")
    with pytest.raises(ValueError, match="not supported with solver='cpsat'"):
        cpsat.explain_many(rows, target=1, n=2, progress=False)
