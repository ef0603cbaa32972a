"""The notebooks in notebooks/ execute without error, and are committed with the outputs
of one clean run from top to bottom (``python docs/execute_notebooks.py``), which the
documentation site shows without executing them."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 5


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("CFOPT_PROGRESS", "0")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # torch's OpenMP threads spin when the cores are shared (xdist workers): one each
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    book = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(book, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_with_the_outputs_of_one_clean_run(path):
    book = nbformat.read(path, as_version=4)
    code = [c for c in book.cells if c.cell_type == "code"]
    assert [c.get("execution_count") for c in code] == list(range(1, len(code) + 1)), \
        f"{path.name}: run it top to bottom with python docs/execute_notebooks.py"
    assert any(c.get("outputs") for c in code), path.name
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, path.name
