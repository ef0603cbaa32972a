"""The command line: `cfopt demo` and `cfopt explain`."""

from __future__ import annotations

import json
import subprocess
import sys

import joblib
import numpy as np
import pytest

import cfopt
from cfopt.cli import main

from .conftest import export_onnx, train_torch


def test_demo_prints_verified_counterfactuals(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.count("verified by the model: yes") == 3
    assert "3/3 counterfactuals verified" in out
    assert "from" in out and "to" in out
    # never advised into an overdraft (a move into the level "... < 0 DM")
    assert "never into an overdraft" in out
    moves = [line.strip() for line in out.splitlines() if line.strip().startswith("status ")]
    assert not [m for m in moves if m.endswith("... < 0 DM")]  # a change's "to" column
    assert "-> ... < 0 DM" not in out  # nor in the diverse set's lines


@pytest.fixture
def onnx_and_csv(tmp_path, german):
    space = cfopt.FeatureSpace.from_frame(german.X)
    net = train_torch(space.transform(german.X), german.y.to_numpy(), hidden=(8,), epochs=100)
    model = export_onnx(net, space.n_inputs, tmp_path / "credit.onnx")
    csv = tmp_path / "credit.csv"
    german.frame.to_csv(csv, index=False)
    space_file = tmp_path / "space.json"
    space.to_json(str(space_file))
    pred = cfopt.models.parse_model(str(model)).predict(space.transform(german.X))
    row = int((pred == 0).nonzero()[0][0])
    return model, csv, space_file, row


def test_explain_onnx_row_as_json(onnx_and_csv, capsys):
    model, csv, space_file, row = onnx_and_csv
    code = main(["explain", "--model", str(model), "--data", str(csv), "--target-col",
                 "good_credit", "--row", str(row), "--space", str(space_file),
                 "--immutable", "foreign_worker", "--increase-only", "age", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["verified"] and result["status"] == "optimal"
    assert result["factual_class"] == 0 and result["predicted_class"] == 1
    assert "foreign_worker" not in result["changes"]


def test_explain_as_a_subprocess(onnx_and_csv):
    model, csv, _, row = onnx_and_csv
    proc = subprocess.run([sys.executable, "-m", "cfopt", "explain", "--model", str(model),
                           "--data", str(csv), "--target-col", "good_credit", "--row", str(row)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "verified by the model: yes" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["--target-col", "nope", "--row", "0"], "--target-col 'nope' is not a column"),
    (["--target-col", "good_credit", "--row", "5000"], "--row 5000 is out of range"),
])
def test_explain_argument_errors(onnx_and_csv, capsys, args, message):
    model, csv, _, _ = onnx_and_csv
    assert main(["explain", "--model", str(model), "--data", str(csv), *args]) == 2
    assert message in capsys.readouterr().err


def test_explain_bad_files(tmp_path, onnx_and_csv, capsys):
    model, csv, _, _ = onnx_and_csv
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_bytes(b'a,b\n1,"2\n3,4,5,6\n')
    assert main(["explain", "--model", str(model), "--data", str(bad_csv), "--target-col", "a",
                 "--row", "0"]) == 2
    assert "is not a readable CSV file" in capsys.readouterr().err
    not_onnx = tmp_path / "model.onnx"
    not_onnx.write_text("hello")
    assert main(["explain", "--model", str(not_onnx), "--data", str(csv), "--target-col",
                 "good_credit", "--row", "0"]) == 2
    assert "is not an ONNX model" in capsys.readouterr().err


def _explain(model, csv, row, *args):
    return ["explain", "--model", str(model), "--data", str(csv), "--row", str(row), *args]


@pytest.mark.parametrize("target", ["1", "1.0", "opposite"])
def test_explain_to_a_target_class(onnx_and_csv, capsys, target):
    """--target takes a class label as the model spells it (parsed into its type), or
    'opposite'."""
    model, csv, space_file, row = onnx_and_csv
    code = main(_explain(model, csv, row, "--target-col", "good_credit", "--space",
                         str(space_file), "--target", target, "--json"))
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["verified"]
    assert result["target"] == [1] and result["predicted_class"] == 1


@pytest.mark.parametrize("target, message", [
    ("2", "--target '2' is not a class of the model; its classes are [0, 1]"),
    ("good", "--target 'good' is not a class of the model; its classes are [0, 1]"),
    ("0", "already classified as 0"),
])
def test_explain_refuses_a_target_it_cannot_reach(onnx_and_csv, capsys, target, message):
    model, csv, _, row = onnx_and_csv
    assert main(_explain(model, csv, row, "--target-col", "good_credit", "--target",
                         target)) == 2
    assert message in capsys.readouterr().err


def test_explain_to_a_labelled_class_of_a_multiclass_model(tmp_path, german, capsys):
    """Text labels: '--target good' is the class 'good' of the model's classes."""
    from sklearn.linear_model import LogisticRegression

    space = cfopt.FeatureSpace.from_frame(german.X)
    Z = space.transform(german.X)
    score = LogisticRegression(max_iter=3000).fit(Z, german.y).decision_function(Z)
    labels = np.where(score > 1, "good", np.where(score > -1, "fair", "poor"))
    model = LogisticRegression(max_iter=3000).fit(Z, labels)
    joblib.dump(model, tmp_path / "model.joblib")
    frame = german.X.assign(rating=labels)
    frame.to_csv(tmp_path / "rated.csv", index=False)
    row = int(np.flatnonzero(model.predict(Z) == "poor")[0])
    args = _explain(tmp_path / "model.joblib", tmp_path / "rated.csv", row, "--target-col",
                    "rating", "--allow-pickle", "--json")
    assert main([*args, "--target", "good"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["target"] == ["good"] and result["predicted_class"] == "good"
    assert main([*args, "--target", "excellent"]) == 2
    assert "its classes are ['fair', 'good', 'poor']" in capsys.readouterr().err


def test_explain_a_regressor_to_an_interval(tmp_path, german, capsys):
    from sklearn.linear_model import Ridge

    space = cfopt.FeatureSpace.from_frame(german.X.drop(columns=["credit_amount"]))
    X = german.X.drop(columns=["credit_amount"])
    model = Ridge().fit(space.transform(X), german.X["credit_amount"])
    joblib.dump(model, tmp_path / "amount.joblib")
    german.X.to_csv(tmp_path / "amount.csv", index=False)
    low = float(model.predict(space.transform(X.iloc[[0]]))[0]) + 500
    args = _explain(tmp_path / "amount.joblib", tmp_path / "amount.csv", 0, "--target-col",
                    "credit_amount", "--allow-pickle", "--json")
    assert main([*args, f"--target={low},"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verified"] and result["predicted_class"] >= low
    assert main(args) == 2
    assert "--target is required" in capsys.readouterr().err


def test_wrong_target_col_against_the_space(onnx_and_csv, capsys):
    """--target-col names a feature: the columns are matched by name to --space, and the
    error names the missing feature and the unexpected label column."""
    model, csv, space_file, row = onnx_and_csv
    assert main(_explain(model, csv, row, "--target-col", "age", "--space",
                         str(space_file))) == 2
    err = capsys.readouterr().err
    assert "missing column(s) ['age']" in err
    assert "unexpected column(s) ['good_credit']" in err


def test_wrong_target_col_of_the_same_width_is_refused(onnx_and_csv, capsys):
    """Without --space, dropping 'age' (an integer, one input like the label) instead of
    the label kept the model's width and silently fed the label in age's place."""
    model, csv, _, row = onnx_and_csv
    assert main(_explain(model, csv, row, "--target-col", "age")) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "--target-col 'age' holds 53 distinct values" in captured.err
    assert "not the label column" in captured.err


def test_columns_of_a_pipeline_are_matched_by_name(tmp_path, german, capsys):
    """A Pipeline knows its columns: the CSV is matched to them by name."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler

    numeric = ["duration", "credit_amount", "age"]
    pipe = Pipeline([("scale", ColumnTransformer([("num", MinMaxScaler(), numeric)])),
                     ("clf", LogisticRegression())]).fit(german.X[numeric], german.y)
    joblib.dump(pipe, tmp_path / "pipe.joblib")
    german.frame[[*numeric, "installment_rate", "good_credit"]].to_csv(
        tmp_path / "few.csv", index=False)
    assert main(_explain(tmp_path / "pipe.joblib", tmp_path / "few.csv", 0, "--target-col",
                         "good_credit", "--allow-pickle")) == 2
    err = capsys.readouterr().err
    assert "do not match the columns the model was fitted on" in err
    assert "unexpected column(s) ['installment_rate']" in err


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == \
        f"cfopt {cfopt.__version__}"


def test_explain_help_says_what_each_option_takes():
    proc = subprocess.run([sys.executable, "-m", "cfopt", "explain", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for phrase in ("ONNX model or, with --allow-pickle, a pickled scikit-learn model",
                   "--rows SPEC", "0,3,10-19", "--out JSONL", "--n N", "--time-limit SECONDS",
                   "{nogood,distance,epsilon,pool}"):
        assert phrase in text, phrase


def test_explain_rows_into_a_resumable_file_as_a_subprocess(onnx_and_csv, tmp_path):
    model, csv, space_file, _ = onnx_and_csv
    out = tmp_path / "answers.jsonl"
    command = [sys.executable, "-m", "cfopt", "explain", "--model", str(model), "--data",
               str(csv), "--target-col", "good_credit", "--space", str(space_file),
               "--rows", "0-3,7", "--out", str(out), "--target", "opposite"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("5 rows of ") and f"answers in {out}" in first.stdout
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 6  # the header and one answer per row
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"(5 read back from {out})" in again.stdout
    assert len(out.read_text().splitlines()) == 6  # nothing solved twice


def test_explain_rows_as_json(onnx_and_csv, capsys):
    model, csv, space_file, row = onnx_and_csv
    code = main(["explain", "--model", str(model), "--data", str(csv), "--target-col",
                 "good_credit", "--space", str(space_file), "--rows", f"{row},{row}",
                 "--json", "--no-progress"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and len(result["results"]) == 1  # a row given twice is explained once
    assert result["results"][0]["verified"] and result["counts"] == {"optimal": 1}


def test_explain_a_diverse_set_of_one_row(onnx_and_csv, capsys):
    model, csv, space_file, row = onnx_and_csv
    code = main(["explain", "--model", str(model), "--data", str(csv), "--target-col",
                 "good_credit", "--space", str(space_file), "--row", str(row), "--n", "3",
                 "--diversity", "distance", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["method"] == "distance" and result["requested"] == 3
    assert 1 <= result["found"] <= 3 and len(result["members"]) == result["found"]
    code = main(["explain", "--model", str(model), "--data", str(csv), "--target-col",
                 "good_credit", "--space", str(space_file), "--row", str(row), "--n", "2"])
    text = capsys.readouterr().out
    assert code == 0 and "counterfactuals of 2 asked (nogood)" in text and "  1. " in text


def test_explain_diverse_sets_of_many_rows_resumably(onnx_and_csv, tmp_path, capsys):
    """``--rows`` with ``--n``: a set per row, each in the answers file, read back on a
    second run; the table has each row's members."""
    model, csv, space_file, row = onnx_and_csv
    out = tmp_path / "sets.jsonl"
    command = ["explain", "--model", str(model), "--data", str(csv), "--target-col",
               "good_credit", "--space", str(space_file), "--rows", f"{row},{row + 1}",
               "--n", "2", "--diversity", "distance", "--out", str(out), "--no-progress"]
    assert main(command) == 0
    text = capsys.readouterr().out
    assert "members" in text and text.startswith("2 rows of ")
    answers = [json.loads(line)["answer"] for line in out.read_text().splitlines()[1:]]
    assert len(answers) == 2 and all(a["method"] == "distance" and a["requested"] == 2
                                     for a in answers)
    assert any(a["found"] >= 1 for a in answers)
    assert main(command) == 0
    assert "(2 read back from" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--rows", "0,x"], "give 'all' or 0-based rows and ranges"),
    (["--rows", "5-3"], "the range '5-3' is empty"),
    (["--rows", "0,5000"], "row 5000 is out of range"),
    (["--rows", "0-2", "--n", "0"], "n must be a positive integer, got 0"),
])
def test_explain_rows_errors(onnx_and_csv, capsys, args, message):
    model, csv, _, _ = onnx_and_csv
    assert main(["explain", "--model", str(model), "--data", str(csv), "--target-col",
                 "good_credit", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--row", "0", "--out", "x.jsonl"], "--out and --no-progress go with --rows"),
    (["--row", "0", "--rows", "0-2"], "not allowed with argument"),
    ([], "one of the arguments --row --rows is required"),
])
def test_explain_option_combinations_are_refused(onnx_and_csv, capsys, args, message):
    model, csv, _, _ = onnx_and_csv
    with pytest.raises(SystemExit) as info:
        main(["explain", "--model", str(model), "--data", str(csv), "--target-col",
              "good_credit", *args])
    assert info.value.code == 2 and message in capsys.readouterr().err
