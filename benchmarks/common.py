"""Shared benchmark helpers: environment record, timing statistics, result files."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"

PACKAGES = ("cfopt", "pyomo", "highspy", "omlt", "onnx", "torch", "scikit-learn", "numpy",
            "pandas", "gurobipy", "dice-ml")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cbc_version() -> str | None:
    exe = shutil.which("cbc")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "-quit"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if line.strip().startswith("Version"):
            return line.split(":", 1)[1].strip()
    return None


def environment() -> dict[str, Any]:
    """Command, date, machine and versions, recorded with every result file."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    versions["cbc"] = _cbc_version()
    versions["python"] = platform.python_version()
    return {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpu": _cpu_model(),
                    "cores": os.cpu_count(), "memory_gb": _memory_gb()},
        "versions": versions,
    }


def _memory_gb() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return round(pages * size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def stats(times: list[float]) -> dict[str, float | None]:
    if not times:
        return {"median_s": None, "p90_s": None, "mean_s": None}
    arr = np.asarray(times, dtype=float)
    return {"median_s": float(np.median(arr)), "p90_s": float(np.percentile(arr, 90)),
            "mean_s": float(arr.mean())}


def write(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps(payload, indent=2, default=_default) + "\n", encoding="utf-8")
    return path


def _default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
