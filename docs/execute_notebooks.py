"""Run every notebook of ``notebooks/`` top to bottom and save it with its outputs, which
the documentation site shows without executing them (``tests/test_notebooks.py`` checks
that the committed outputs come from one clean run).

    CFOPT_DATA_HOME=../shared/data python docs/execute_notebooks.py [NOTEBOOK ...]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbclient
import nbformat

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def execute(path: Path) -> None:
    """Execute ``path`` in a fresh kernel, in its folder, and write it back."""
    book = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(book, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(book, path)


if __name__ == "__main__":
    os.environ.update(CFOPT_PROGRESS="0", MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    for name in sys.argv[1:] or sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")):
        print(f"executing {name}", flush=True)
        execute(NOTEBOOKS / Path(name).name)
