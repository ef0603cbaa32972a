"""The notebooks in notebooks/ execute without error, and are committed without outputs."""

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
def test_committed_without_outputs(path):
    book = nbformat.read(path, as_version=4)
    for c in book.cells:
        if c.cell_type == "code":
            assert not c.get("outputs") and c.get("execution_count") is None, path.name
