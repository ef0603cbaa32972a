"""What a practitioner sees (issue 40): a batch's counterfactuals as frames indexed like
``X`` (values, DiCE's "changes only" view, one row per change) and the notebook cards
(``_repr_html_``) of answers, sets, batches and explainers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.batch.result import UNCHANGED, BatchResult
from cfopt.results.display import MAX_ROWS, card, frame_table, tone


@pytest.fixture(scope="module")
def credit():
    """A logistic model on three features (an integer, a float, a categorical), rows
    labelled "r0", "r1", ... and an explainer."""
    rng = np.random.default_rng(5)
    n = 300
    X = pd.DataFrame({"age": rng.integers(18, 70, n),
                      "income": rng.uniform(10, 100, n).round(1),
                      "housing": rng.choice(["rent", "own", "free"], n)},
                     index=[f"r{i}" for i in range(n)])
    y = ((X.income - 55) / 20 + (X.housing == "own") * 1.0 + (X.age - 40) / 30 > 0)
    space = cfopt.FeatureSpace.from_frame(X)
    model = LogisticRegression().fit(space.transform(X), y.astype(int))
    return X, space, model, cfopt.Explainer(model, space)


@pytest.fixture(scope="module")
def batch(credit):
    """Two rejected rows and one accepted (already in the target), labels kept."""
    X, space, model, explainer = credit
    pred = explainer.milp.predict(X)
    rejected = X[pred == 0].iloc[:2]
    accepted = X[pred == 1].iloc[:1]
    return explainer.explain_many(pd.concat([rejected, accepted]), target=1, progress=False)


def test_counterfactuals_frame_is_indexed_like_x_with_raw_values(batch):
    frame = batch.counterfactuals()
    assert list(frame.index) == list(batch.labels) and list(frame.columns) == \
        ["age", "income", "housing"]
    for label, answer in zip(batch.labels, batch):
        if answer.found:
            expected = answer.counterfactual.iloc[0]
            assert frame.loc[label].tolist() == expected.tolist()
        else:
            assert frame.loc[label].isna().all()
    # the already-accepted row has no counterfactual: its integer column stays integer
    assert batch[2].status is cfopt.Status.ALREADY_TARGET
    assert str(frame["age"].dtype) == "Int64"
    assert frame.dropna(how="all").index.tolist() == list(batch.labels[:2])


def test_changes_only_marks_unchanged_values_like_dice(batch):
    view = batch.counterfactuals(changes_only=True)
    full = batch.counterfactuals()
    factuals = batch.factuals()
    for label, answer in zip(batch.labels, batch):
        changed = set(answer.changes().index) if answer.found else set()
        for name in view.columns:
            shown = view.loc[label, name]
            if not answer.found:
                assert pd.isna(shown)
            elif name in changed:
                assert shown == full.loc[label, name] != factuals.loc[label, name]
            else:
                assert shown == UNCHANGED
    assert any(set(a.changes().index) for a in batch if a.found)


def test_changes_long_frame_lists_every_change_by_row_label(batch):
    long = batch.changes()
    assert list(long.columns) == ["row", "feature", "from", "to"]
    expected = [(label, name, c["from"], c["to"]) for label, a in zip(batch.labels, batch)
                if a.found for name, c in a.changes().iterrows()]
    assert [tuple(r) for r in long.itertuples(index=False)] == expected and expected
    assert set(long["row"]) == set(batch.labels[:2])


def test_frames_of_an_empty_and_an_unfound_batch():
    empty = BatchResult([])
    assert empty.counterfactuals().empty and empty.changes().empty
    assert list(empty.changes().columns) == ["row", "feature", "from", "to"]


def test_counterfactual_card_shows_status_changes_and_escapes(credit, batch):
    answer = batch[0]
    markup = answer._repr_html_()
    assert "cfopt-proven" in markup and ">optimal<" in markup
    for name, change in answer.changes().iterrows():
        assert f"<th>{name}</th>" in markup
    hostile = cfopt.Counterfactual(
        factual=pd.DataFrame({"c": ["<script>alert(1)</script>"]}),
        counterfactual=pd.DataFrame({"c": ["<b>"]}), target=("<i>",),
        factual_class=0, predicted_class=1, status=cfopt.Status.FEASIBLE, verified=True,
        objective=1.0, bound=0.5, message="gap <0.5>")
    markup = hostile._repr_html_()
    assert "<script>" not in markup and "&lt;script&gt;" in markup
    assert "<b>" not in markup.replace("<b>Counterfactual</b>", "")
    assert "cfopt-unproven" in markup and "gap &lt;0.5&gt;" in markup


def test_card_tones():
    assert [tone(False, True), tone(True, False), tone(True, True)] == \
        ["none", "unproven", "proven"]
    none = cfopt.Counterfactual(
        factual=pd.DataFrame({"a": [1]}), counterfactual=None, target=(1,),
        factual_class=0, predicted_class=None, status=cfopt.Status.INFEASIBLE,
        verified=False, objective=None, bound=None)
    assert "cfopt-none" in none._repr_html_() and ">infeasible<" in none._repr_html_()
    assert "<td>0 → –</td>" in none._repr_html_()  # no class: a dash, not "None"
    # an optimal status without a verified point is not green
    unverified = cfopt.Counterfactual(
        factual=pd.DataFrame({"a": [1]}), counterfactual=pd.DataFrame({"a": [2]}),
        target=(1,), factual_class=0, predicted_class=0, status=cfopt.Status.OPTIMAL,
        verified=False, objective=1.0, bound=1.0)
    assert "cfopt-none" in unverified._repr_html_()
    with pytest.raises(ValueError, match="badge"):
        card("x", "ok", "green", {})
    assert 'class="cfopt-badge' not in card("x", None, None, {"a": 1})


def test_frame_table_cuts_at_max_rows():
    frame = pd.DataFrame({"a": range(MAX_ROWS + 5)})
    markup = frame_table(frame)
    assert "… 5 more rows" in markup and f"<td>{MAX_ROWS - 1}</td>" in markup
    assert f"<td>{MAX_ROWS}</td>" not in markup
    exact = frame_table(pd.DataFrame({"a": range(MAX_ROWS)}))
    assert "more row" not in exact
    assert "… 1 more row<" in frame_table(pd.DataFrame({"a": range(MAX_ROWS + 1)}))


def test_set_batch_and_explainer_cards(credit, batch):
    X, space, model, explainer = credit
    x = X[explainer.milp.predict(X) == 0].iloc[[0]]
    members = explainer.explain(x, target=1, n=3)
    markup = members._repr_html_()
    assert "CounterfactualSet" in markup and f"{len(members)} of 3" in markup
    assert "<th>cost</th>" in markup
    markup = batch._repr_html_()
    assert "2 of 3 found" in markup and "cfopt-proven" in markup
    assert "2 optimal, 1 already_target" in markup and UNCHANGED in markup
    partly = BatchResult([batch[0], cfopt.Counterfactual(
        factual=batch[1].factual, counterfactual=None, target=(1,), factual_class=0,
        predicted_class=None, status=cfopt.Status.NO_SOLUTION, verified=False,
        objective=None, bound=None)])
    assert "cfopt-unproven" in partly._repr_html_()
    interrupted = BatchResult([batch[0]], interrupted=True)
    assert "cfopt-unproven" in interrupted._repr_html_()
    assert "interrupted" in interrupted._repr_html_()
    markup = explainer._repr_html_()
    assert "LogisticRegression" in markup and "integer variables" in markup
    assert all(f"<th>{name}</th>" in markup for name in ("age", "income", "housing"))
    assert repr(explainer) == "Explainer(LogisticRegression, 3 features, solver='highs', " \
        "margin=0.001)"
