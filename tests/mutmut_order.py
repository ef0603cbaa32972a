"""A pytest plugin for mutation runs only (``-p tests.mutmut_order`` in the
``[tool.mutmut]`` table of pyproject.toml; ``benchmarks/mutation.py``): the tests selected
for a mutant run fastest first, by the durations mutmut recorded in its stats, so that a
quick test that kills the mutant ends the run (``-x``) before the slow ones start."""

from __future__ import annotations

import json
from pathlib import Path


def pytest_collection_modifyitems(session, config, items) -> None:
    stats = Path("mutmut-stats.json")  # mutmut runs pytest inside its mutants/ directory
    if not stats.exists():
        return
    durations = json.loads(stats.read_text()).get("duration_by_test", {})
    items.sort(key=lambda item: durations.get(item.nodeid, 0.0))
