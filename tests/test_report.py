"""The benchmark report builds from the committed results, and from files of unknown or
broken schemas."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("matplotlib")
from benchmarks import report  # noqa: E402


def figures_of(text: str, folder) -> list:
    return [folder.parent / line.split("](")[1].rstrip(")") for line in text.splitlines()
            if line.startswith("![")]


def test_report_from_the_committed_results(tmp_path):
    out = report.build(report.RESULTS, tmp_path / "REPORT.md")
    text = out.read_text(encoding="utf-8")
    files = sorted(report.RESULTS.glob("*.json"))
    assert files, "no committed results"
    for path in files:
        assert f"(`results/{path.name}`)" in text
    assert text.count("**Where cfopt stands:**") >= 3
    assert "| cfopt-reuse | highs | lp | yes |" in text       # core.json as a table
    assert "0.908 (0.93)" in text                              # ours (paper), CE-OCL
    assert "DiCE genetic val / L1 / s" in text                 # DiCE beside cfopt (trees)
    pngs = figures_of(text, tmp_path / "figures")
    assert len(pngs) >= 5
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_unknown_and_broken_files(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(report.RESULTS / "core.json", results / "core.json")
    rows = [{"method": "cfopt-x", "median_s": 0.5, "score": 1.25, "paper_score": 1.5,
             "trace": [1, 2]},
            {"method": "other", "median_s": 2.0, "score": None, "extra": "yes"}]
    (results / "new_benchmark.json").write_text(json.dumps({"command": "python x.py",
                                                            "rows": rows}))
    (results / "just_a_list.json").write_text(json.dumps([{"a": 1}, {"a": 2}]))
    (results / "broken.json").write_text("{not json")
    (results / "core_renamed.json").write_text(json.dumps({"rows": [{"unexpected": 1}]}))
    (results / "no_rows.json").write_text(json.dumps({
        "summary": {"cases": 3, "failures": []}, "cases": [{"case": "nan", "ok": True}],
        "per_model": {"mlp": {"examples": 100, "outcomes": [1]}}}))
    text = report.build(results, tmp_path / "REPORT.md").read_text(encoding="utf-8")
    assert "| method | median_s | score | extra |" in text       # generic table, lists dropped
    assert "| cfopt-x | 0.5 | 1.25 (1.5) | – |" in text          # ours (paper) merged
    assert "| a |" in text and "not readable: JSONDecodeError" in text
    assert (tmp_path / "figures" / "new_benchmark_median_s.png").stat().st_size > 0
    assert "`python x.py`" in text
    assert "| cases | 3 |" in text and "| nan | yes |" in text and "| mlp | 100 |" in text
