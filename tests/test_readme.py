"""The README is executable: its python blocks run in order, as written, in a fresh
interpreter (a new user pasting them into one session). A block may be left out only
when the line above it is an HTML comment saying "not run" (at most two, e.g. one
that needs a Dask scheduler)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: the blocks that may be left out
MAX_NOT_RUN = 2


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(line number, code, runs) of every python block, in order; a block does not run
    when the last non-blank line before it is an HTML comment with "not run"."""
    out = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip().splitlines()
        previous = before[-1].strip() if before else ""
        skipped = previous.startswith("<!--") and "not run" in previous.lower()
        out.append((text[:match.start()].count("\n") + 1, match.group(1), not skipped))
    return out


def test_readme_blocks_run_in_order(tmp_path):
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "no python blocks found in README.md"
    assert sum(not runs for *_, runs in blocks) <= MAX_NOT_RUN
    script = ["import sys"]
    for k, (line, code, runs) in enumerate(blocks):
        if not runs:
            continue
        script.append(f"print('--- README block {k + 1} (line {line})', flush=True)")
        script.append(code)
    path = tmp_path / "readme_blocks.py"
    path.write_text("\n".join(script), encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg", "CFOPT_PROGRESS": "0", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    last = [ln for ln in done.stdout.splitlines() if ln.startswith("--- README block")]
    assert done.returncode == 0, (f"{last[-1] if last else 'before the first block'} "
                                  f"failed:\n{done.stderr[-3000:]}")


def test_not_run_marker_is_read():
    text = ("intro\n\n```python\nx = 1\n```\n\n<!-- not run: needs a Dask scheduler -->\n"
            "```python\nraise SystemExit(1)\n```\n")
    assert [runs for *_, runs in python_blocks(text)] == [True, False]
