"""``explain_many(..., out=...)``: answers written as they arrive, read back on a
re-run, and a file that belongs to another batch refused."""

from __future__ import annotations

import json

import pytest

import cfopt


@pytest.fixture(scope="module")
def small(german, german_model):
    net, space = german_model
    explainer = cfopt.Explainer(net, space, mip_gap=0.0)
    X = german.X[explainer.milp.predict(german.X) == 0].iloc[:3]
    return explainer, X


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_answers_are_written_and_read_back(small, tmp_path, monkeypatch):
    explainer, X = small
    out = tmp_path / "a.jsonl"
    first = explainer.explain_many(X, target=1, out=out, progress=False)
    records = lines(out)
    assert records[0]["format"] == "cfopt-batch/1" and len(records) == 1 + len(X)
    assert [r["label"] for r in records[1:]] == [json.dumps(int(i)) for i in X.index]
    assert first.resumed == 0 and first.out == str(out)

    def no_solve(*args, **kwargs):
        raise AssertionError("a resumed row was solved again")

    monkeypatch.setattr(explainer, "explain", no_solve)
    again = explainer.explain_many(X, target=1, out=out, progress=False)
    assert again.resumed == len(X) and len(lines(out)) == 1 + len(X)
    for a, b in zip(first, again):
        assert (a.status, a.objective, a.bound) == (b.status, b.objective, b.bound)
        assert a.changes().equals(b.changes()) and a.factual.equals(b.factual)
        assert a.counterfactual.astype(str).equals(b.counterfactual.astype(str))
    assert again.to_frame().index.equals(X.index)


def test_only_new_and_failed_rows_are_solved(small, tmp_path, monkeypatch):
    """A row recorded as ``error`` is solved again; a row cut short by a crash (a
    partial last line) is dropped from the file and solved."""
    explainer, X = small
    out = tmp_path / "a.jsonl"
    explainer.explain_many(X.iloc[:2], target=1, out=out, progress=False)
    records = lines(out)
    records[1]["answer"]["status"] = "error"
    out.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"label": "3')
    solved = []
    explain = explainer.explain

    def counting(x, *args, **kwargs):
        solved.append(x.index[0])
        return explain(x, *args, **kwargs)

    monkeypatch.setattr(explainer, "explain", counting)
    batch = explainer.explain_many(X, target=1, out=out, progress=False)
    assert solved == [X.index[0], X.index[2]] and batch.resumed == 1
    assert all(a.found for a in batch)
    assert out.read_text().endswith("\n") and len(lines(out)) == 1 + 2 + 2


def test_another_batch_is_refused(small, german, tmp_path):
    explainer, X = small
    out = tmp_path / "a.jsonl"
    explainer.explain_many(X.iloc[:1], target=1, out=out, progress=False)
    with pytest.raises(ValueError, match="options changed"):
        explainer.explain_many(X.iloc[:1], target=1, out=out, time_limit=5, progress=False)
    with pytest.raises(ValueError, match="target changed"):
        explainer.explain_many(X.iloc[:1], target="opposite", out=out, progress=False)
    other = cfopt.Explainer(explainer.build_arguments["model"], explainer.space, mip_gap=0.0,
                            weights={"age": 3.0})
    with pytest.raises(ValueError, match="arguments changed"):
        other.explain_many(X.iloc[:1], target=1, out=out, progress=False)
    edited = X.iloc[:1].copy()
    edited["age"] += 1
    with pytest.raises(ValueError, match=f"row {int(X.index[0])} of X differs"):
        explainer.explain_many(edited, target=1, out=out, progress=False)
    with pytest.raises(ValueError, match="repeats"):
        explainer.explain_many(german.X.iloc[[0, 0]], target=1, out=out, progress=False)
    junk = tmp_path / "notes.txt"
    junk.write_text("my notes\n")
    with pytest.raises(ValueError, match="not a cfopt batch file"):
        explainer.explain_many(X.iloc[:1], target=1, out=junk, progress=False)
    assert junk.read_text() == "my notes\n"
    with pytest.raises(TypeError, match="out must be a file path"):
        explainer.explain_many(X.iloc[:1], target=1, out=3, progress=False)
