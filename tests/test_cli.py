"""The command line: `cfopt demo` and `cfopt explain`."""

from __future__ import annotations

import json
import subprocess
import sys

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


@pytest.fixture
def onnx_and_csv(tmp_path, german):
    space = cfopt.FeatureSpace.from_frame(german.X)
    net = train_torch(space.transform(german.X), german.y.to_numpy(), hidden=(8,), epochs=100)
    model = export_onnx(net, space.n_inputs, tmp_path / "credit.onnx")
    csv = tmp_path / "credit.csv"
    german.frame.to_csv(csv, index=False)
    space_file = tmp_path / "space.json"
    space.to_json(str(space_file))
    pred = cfopt.parse_model(str(model)).predict(space.transform(german.X))
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
