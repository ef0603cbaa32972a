"""Figures of the benchmark report (PNG, matplotlib Agg), drawn from the result JSON.

:func:`draw` writes the figures of one result file and returns their paths: a chart
per known file, and for any other file with a ``median_s`` per row a bar chart of it.
A file whose rows lack what a chart needs gets no figure rather than an error.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

Data = dict[str, Any]
OURS, DICE, OTHER, PAPER = "#1d3557", "#e76f51", "#a8a8a8", "black"
MARKERS = "osD^vP*X"


def _rows(data: Data) -> list[dict[str, Any]]:
    return [r for r in data.get("rows", []) if isinstance(r, dict)]


def _paper(row: dict[str, Any], key: str) -> Any:
    if f"paper_{key}" in row:
        return row[f"paper_{key}"]
    paper = row.get("paper")
    return paper.get(key) if isinstance(paper, dict) else None


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _colour(method: str) -> str:
    method = method.lower()
    if method.startswith("dice"):
        return DICE
    return OURS if method.startswith(("cfopt", "proplace")) else OTHER


def _barh(labels: list[str], values: list[float], colours: list[str], xlabel: str,
          title: str, path: Path, log: bool = True) -> Path:
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.32 * len(labels)), layout="constrained")
    ax.barh(range(len(values)), values, color=colours)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def _core(data: Data, folder: Path) -> list[Path]:
    rows = [r for r in _rows(data) if r.get("median_s")]
    labels = [" ".join(str(r.get(k)) for k in ("method", "solver", "bound_tightening")
                       if r.get(k)) + (" +pq" if r.get("per_query_tightening") else "")
              for r in rows]
    return [_barh(labels, [r["median_s"] for r in rows], [_colour(r["method"]) for r in rows],
                  "median seconds per CE (log)", "Adult MLP: cfopt (blue) vs DiCE (orange)",
                  folder / "core_median_s.png")]


def _trees(data: Data, folder: Path) -> list[Path]:
    rows = _rows(data)
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    series = (("cfopt HiGHS + pruning", OURS, lambda r: r.get("method") == "cfopt" and
               r.get("solver") == "highs" and r.get("pruning")),
              ("DiCE genetic", DICE, lambda r: r.get("method") == "dice-genetic"),
              ("DiCE random", OTHER, lambda r: r.get("method") == "dice-random"))
    datasets = sorted({r.get("dataset") for r in rows if r.get("dataset")})
    for label, colour, keep in series:
        for k, dataset in enumerate(datasets):
            pts = [(r["leaves"], r["median_s"]) for r in rows if keep(r) and
                   r.get("dataset") == dataset and r.get("median_s") and r.get("leaves")]
            if pts:
                x, y = zip(*pts)
                ax.scatter(x, y, color=colour, marker=MARKERS[k % len(MARKERS)], alpha=0.8,
                           label=f"{label}, {dataset}")
    ax.set(xscale="log", yscale="log", xlabel="leaves in the ensemble",
           ylabel="median seconds per CE", title="Tree ensembles: time per CE vs size")
    ax.legend(fontsize=7)
    return [_save(fig, folder / "trees_median_s.png")]


def _grouped(ax: Any, rows: list[dict[str, Any]], group: str, key: str, ylabel: str,
             log: bool = False) -> None:
    """Bars of ``key`` per ``group`` value, one bar per method, paper values as ×."""
    groups = list(dict.fromkeys(r[group] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        for i, g in enumerate(groups):
            row = next((r for r in rows if r[group] == g and r["method"] == method), None)
            if row is None or row.get(key) is None:
                continue
            x = i + (j - (len(methods) - 1) / 2) * width
            ax.bar(x, abs(row[key]) if log else row[key], width,
                   color=plt.get_cmap("tab10")(j % 10), label=method if i == 0 else None)
            ref = _paper(row, key)
            if isinstance(ref, (int, float)):
                ax.plot(x, abs(ref) if log else ref, "x", color=PAPER, markersize=7,
                        label="paper" if (i, j) == (0, 0) else None)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")


def _ceocl(data: Data, folder: Path) -> list[Path]:
    rows = _rows(data)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    _grouped(axes[0], rows, "dataset", "sparsity", "sparsity (higher: fewer changes)")
    _grouped(axes[1], rows, "dataset", "median_s", "median seconds per CE (log)", log=True)
    axes[0].legend(fontsize=7)
    fig.suptitle("CE-OCL Table 2: ours (bars) and the paper's (×)", fontsize=10)
    return [_save(fig, folder / "ceocl_table2.png")]


def _diversity(data: Data, folder: Path) -> list[Path]:
    rows = [r for r in _rows(data) if r.get("norm") == "l1" and r.get("k_distance") is not None]
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    methods = list(dict.fromkeys(r["method"] for r in rows))
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    cmap = plt.get_cmap("tab10")
    for j, method in enumerate(methods):
        for k, dataset in enumerate(datasets):
            pts = [(r["k_distance"], r["setdist_sum"]) for r in rows
                   if r["method"] == method and r["dataset"] == dataset]
            if pts:
                ax.scatter(*zip(*pts), color=cmap(j % 10), marker=MARKERS[k % len(MARKERS)],
                           label=method if k == 0 else None)
    ax.set(xlabel="k-distance (L1; lower: closer)", ylabel="setdist Σ (L1; lower: more robust)",
           title="Diverse sets (L1): closeness vs robustness; marker = data set")
    ax.legend(fontsize=7)
    return [_save(fig, folder / "diversity_table9.png")]


def _proplace(data: Data, folder: Path) -> list[Path]:
    rows = _rows(data)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    _grouped(axes[0], rows, "dataset", "l1", "ℓ1 (lower: closer)")
    _grouped(axes[1], rows, "dataset", "total_s", "total seconds for 50 inputs (log)", log=True)
    axes[0].legend(fontsize=7)
    fig.suptitle("PROPLACE Table 1: ours (bars) and the paper's (×)", fontsize=10)
    return [_save(fig, folder / "proplace_table1.png")]


def _formulations(data: Data, folder: Path) -> list[Path]:
    rows = _rows(data)
    labels = [f"{r['model']} {r['formulation']}{' + pruning' if r['pruning'] else ''}"
              for r in rows]
    colours = [OURS if r["pruning"] else OTHER for r in rows]
    return [_barh(labels, [r["median_s"] for r in rows], colours, "median seconds per CE (log)",
                  "Tree formulations (dark: with per-query pruning)",
                  folder / "tree_formulations.png")]


def _scaling(data: Data, folder: Path) -> list[Path]:
    rows = [r for r in _rows(data) if r.get("total_s") and not r.get("skipped")]
    series = list(dict.fromkeys(r["series"] for r in rows))
    fig, axes = plt.subplots(1, len(series), figsize=(4.2 * len(series), 3.8),
                             layout="constrained", squeeze=False)
    cmap = plt.get_cmap("tab10")
    fits = {(f["series"], f["solver"], f["config"]): f for f in data.get("fits", [])}
    for ax, name in zip(axes[0], series):
        mine = [r for r in rows if r["series"] == name]
        for j, key in enumerate(dict.fromkeys((r["solver"], r["config"]) for r in mine)):
            pts = sorted((r["size"], r["total_s"]) for r in mine
                         if (r["solver"], r["config"]) == key)
            fit = fits.get((name, *key), {})
            b = fit.get("exponent")
            label = f"{key[0]} {key[1]}" + (f" (b={b:.2f})" if b is not None else "")
            ax.plot(*zip(*pts), "o-", color=cmap(j % 10), label=label)
            mps = sorted((r["size"], r["mps_s"]) for r in mine
                         if (r["solver"], r["config"]) == key and r.get("mps_s"))
            if mps:
                ax.plot(*zip(*mps), "x:", color=cmap(j % 10))
        ax.set(xscale="log", yscale="log", xlabel=mine[0].get("size_label", "size"),
               ylabel="median seconds per CE", title=name)
        ax.legend(fontsize=7)
    fig.suptitle("Growth: cfopt end to end (o), the same MILP from MPS in highspy (×)",
                 fontsize=10)
    out = [_save(fig, folder / "scaling_growth.png")]
    ratios = [r for r in rows if r.get("overhead_ratio") is not None]
    if ratios:
        fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
        for j, name in enumerate(series):
            pts = [(r["solver_s"], r["overhead_ratio"]) for r in ratios if r["series"] == name]
            if pts:
                ax.scatter(*zip(*pts), color=cmap(j % 10), label=name)
        ax.axhline(0.2, color=PAPER, linestyle="--", linewidth=1, label="goal 0.2")
        ax.set(xscale="log", yscale="symlog", xlabel="solver's own seconds per CE",
               ylabel="(total − solver) / solver", title="Overhead over the solver")
        ax.legend(fontsize=7)
        out.append(_save(fig, folder / "scaling_overhead.png"))
    return out


def _generic(name: str, data: Data, folder: Path) -> list[Path]:
    rows = [r for r in _rows(data) if isinstance(r.get("median_s"), (int, float))
            and r["median_s"] > 0][:40]
    if not rows:
        return []
    keys = [k for k, v in rows[0].items() if isinstance(v, str)][:3]
    labels = [" ".join(str(r.get(k, "")) for k in keys) for r in rows]
    return [_barh(labels, [r["median_s"] for r in rows],
                  [_colour(str(r.get("method", ""))) for r in rows],
                  "median seconds per query (log)", name, folder / f"{name}_median_s.png")]


CHARTS: dict[str, Callable[[Data, Path], list[Path]]] = {
    "core": _core, "trees": _trees, "ceocl_table2": _ceocl, "diversity_table9": _diversity,
    "proplace_table1": _proplace, "tree_formulations": _formulations, "scaling": _scaling,
}
#: known files without a chart
NO_CHART = ("ceocl_german",)


def draw(name: str, data: Data, folder: Path) -> list[Path]:
    """The figures of result file ``name`` written to ``folder`` (none when the rows
    lack what the chart needs)."""
    if name in NO_CHART:
        return []
    chart = CHARTS.get(name)
    try:
        return chart(data, folder) if chart else _generic(name, data, folder)
    except (KeyError, TypeError, ValueError, IndexError, StopIteration):
        plt.close("all")
        return []
