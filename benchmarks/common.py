"""Shared benchmark helpers: environment record, timing statistics, result files, DiCE runs."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import cfopt
from cfopt.progress import progress_bar

RESULTS = Path(__file__).resolve().parent / "results"

PACKAGES = ("cfopt", "pyomo", "highspy", "omlt", "onnx", "torch", "scikit-learn", "numpy",
            "pandas", "gurobipy", "dice-ml", "ortools", "pyscipopt", "pyscipopt-ml",
            "gurobi-machinelearning")


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
                    "cores": os.cpu_count(), "memory_gb": _memory_gb(),
                    "load_average": _load_average()},
        "versions": versions,
    }


def _load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages when the record is written."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def _memory_gb() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return round(pages * size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def progress(items: Iterable[Any], desc: str, total: int | None = None) -> Iterator[Any]:
    """``items`` with a tqdm bar on stderr (``CFOPT_PROGRESS=0`` silences every bar)."""
    items = list(items) if total is None else items
    with progress_bar(len(items) if total is None else total, desc) as bar:
        for item in items:
            yield item
            bar.update(1)


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


class _DiceModel:
    """A model over ``space.transform`` (or, ``raw_input``, over raw frames, e.g. a
    Pipeline) seen by DiCE as one over raw frames."""

    def __init__(self, model: Any, space: cfopt.FeatureSpace, raw_input: bool = False) -> None:
        self.model, self.space, self.raw_input = model, space, raw_input

    def predict_proba(self, frame: pd.DataFrame) -> np.ndarray:
        rows = _coerce(frame[self.space.names], self.space)
        if self.raw_input:
            return self.model.predict_proba(rows)
        return self.model.predict_proba(self.space.transform(rows, check_bounds=False))

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        return self.predict_proba(frame).argmax(axis=1)


def _coerce(frame: pd.DataFrame, space: cfopt.FeatureSpace) -> pd.DataFrame:
    frame = frame.copy()
    for f in space:
        if not f.labelled:
            frame[f.name] = np.round(pd.to_numeric(frame[f.name])) if f.is_integral \
                else pd.to_numeric(frame[f.name])
    return frame


class DiceSearch:
    """DiCE (``method`` ``"random"`` or ``"genetic"``) on the same model (any
    ``predict_proba`` model over ``space.transform``, or over raw frames when
    ``raw_input``, e.g. a Pipeline) and points as cfopt, set up once for many queries."""

    def __init__(self, method: str, model: Any, space: cfopt.FeatureSpace,
                 train_X: pd.DataFrame, train_y: pd.Series, raw_input: bool = False) -> None:
        if method not in ("random", "genetic"):
            raise ValueError(f"DiCE method must be 'random' or 'genetic', got {method!r}")
        import dice_ml

        continuous = [f.name for f in space if not f.labelled]
        frame = pd.concat([train_X, train_y.rename("label")], axis=1)
        data = dice_ml.Data(dataframe=frame, continuous_features=continuous,
                            outcome_name="label")
        self.method, self.space = method, space
        self.dice = dice_ml.Dice(data, dice_ml.Model(model=_DiceModel(model, space, raw_input),
                                                     backend="sklearn"), method=method)

    def counterfactuals(self, x: pd.DataFrame, seed: int, total_cfs: int = 1,
                        desired_class: int = 1,
                        features_to_vary: str | Sequence[str] = "all",
                        permitted_range: dict[str, list[Any]] | None = None
                        ) -> tuple[pd.DataFrame | None, float, str | None]:
        """Up to ``total_cfs`` counterfactuals of the one-row frame ``x`` of class
        ``desired_class`` as a raw frame (integral features rounded; ``None`` when DiCE
        found nothing), the seconds DiCE took, and DiCE's error (it raises when it finds
        nothing) or ``None``. Validity is left to the caller. ``permitted_range``: DiCE's
        (e.g. an increase-only feature's ``[value, upper]``)."""
        seeded = {"random_seed": seed} if self.method == "random" else {}  # genetic: none
        np.random.seed(seed)
        cf, error = None, None
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = self.dice.generate_counterfactuals(
                    x, total_CFs=total_cfs, desired_class=desired_class, verbose=False,
                    features_to_vary=features_to_vary, permitted_range=permitted_range,
                    **seeded)
            cf = result.cf_examples_list[0].final_cfs_df
        except Exception as exc:  # DiCE raises when it finds nothing
            error = f"{type(exc).__name__}: {exc}"[:120]
        seconds = time.perf_counter() - t0
        row = None if cf is None or len(cf) == 0 else \
            _coerce(cf[self.space.names].iloc[:total_cfs].reset_index(drop=True), self.space)
        return row, seconds, error


def dice_counterfactuals(method: str, model: Any, space: cfopt.FeatureSpace,
                         train_X: pd.DataFrame, train_y: pd.Series, X: pd.DataFrame,
                         features_to_vary: str | Sequence[str] = "all", total_cfs: int = 1,
                         desired_class: int = 1
                         ) -> list[tuple[pd.DataFrame | None, float, str | None]]:
    """:meth:`DiceSearch.counterfactuals` of each row of ``X`` (seed: its position)."""
    search = DiceSearch(method, model, space, train_X, train_y)
    return [search.counterfactuals(X.iloc[[i]], i, total_cfs, desired_class, features_to_vary)
            for i in range(len(X))]


def inside_space(space: Any, frame: Any) -> Any:
    """The rows of ``frame`` inside the feature space's bounds and known categories."""
    inside = np.ones(len(frame), dtype=bool)
    for f in space:
        if f.labelled:
            inside &= frame[f.name].isin(f.categories).to_numpy()
        else:
            inside &= ((frame[f.name] >= f.lower) & (frame[f.name] <= f.upper)).to_numpy()
    return frame[inside]
