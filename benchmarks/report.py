"""``python -m benchmarks.report``: ``benchmarks/REPORT.md`` from every
``benchmarks/results/*.json``, with tables and figures (``benchmarks/figures/``).

Each result file known here gets its own table layout (ours beside the paper's numbers,
written "ours (paper)", and beside DiCE's where the file has them), a headline and a
figure (:mod:`benchmarks.report_figures`); a file of any other schema gets a generic
table of its rows' scalar fields, so results added later appear without changes here.
Nothing is re-run: the report is built from the committed JSON alone.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import report_figures

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
#: rows and columns of a generic table at most
MAX_ROWS, MAX_COLUMNS = 60, 14

Row = dict[str, Any]


@dataclass(frozen=True)
class Beside:
    """Columns taken from other rows of the same file: rows matching ``select`` (key:
    value) are removed from the table and shown beside the rows that agree on ``match``
    (a ``None`` in the other row matches anything)."""

    label: str
    select: dict[str, Any]
    match: tuple[str, ...]
    metrics: tuple[str, ...]


@dataclass(frozen=True)
class Layout:
    """How one known result file is shown."""

    title: str
    about: str
    columns: tuple[tuple[str, str], ...]  # (key, header)
    beside: tuple[Beside, ...] = ()
    keep: Callable[[Row], bool] = field(default=lambda row: True)
    headline: Callable[[dict[str, Any]], str] | None = None
    extra: tuple[str, ...] = ()  # other top-level lists of rows, shown as generic tables


# ------------------------------------------------------------------ formatting
def fmt(value: Any) -> str:
    """A cell: numbers to 3 significant digits (thousands with separators), booleans as
    yes/no, missing as –."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–"
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.0f}"
        return f"{value:.3g}"
    if isinstance(value, (list, dict)):
        return f"{len(value)} items"
    text = str(value).replace("|", "/").replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "…"


def paper_value(row: Row, key: str) -> Any:
    """The paper's value of ``key`` in a row (``paper_<key>`` or ``paper[key]``)."""
    if f"paper_{key}" in row:
        return row[f"paper_{key}"]
    paper = row.get("paper")
    return paper.get(key) if isinstance(paper, dict) else None


def cell(row: Row, key: str) -> str:
    if "skipped" in row and row.get(key) is None and key not in ("dataset", "model"):
        return "–"
    text = fmt(row.get(key))
    ref = paper_value(row, key)
    return text if ref is None or isinstance(ref, (dict, list)) else f"{text} ({fmt(ref)})"


def table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def _selected(row: Row, select: dict[str, Any]) -> bool:
    return all(row.get(k) == v for k, v in select.items())


def layout_table(rows: list[Row], layout: Layout) -> str:
    """The table of a known file: its columns, ours (paper), and the beside columns."""
    taken = [r for r in rows if any(_selected(r, b.select) for b in layout.beside)]
    main = [r for r in rows if layout.keep(r) and not any(r is t for t in taken)]
    headers = [h for _, h in layout.columns] + [b.label for b in layout.beside]
    body = []
    for r in main:
        line = [cell(r, k) for k, _ in layout.columns]
        for b in layout.beside:
            other = next((o for o in taken if _selected(o, b.select) and all(
                o.get(k) is None or o.get(k) == r.get(k) for k in b.match)), None)
            if other is None:
                line.append("–")
            elif other.get("skipped"):
                line.append("skipped")
            else:
                line.append(" / ".join(fmt(other.get(m)) for m in b.metrics))
        if r.get("skipped") and "skipped" not in dict(layout.columns):
            line[-1 - len(layout.beside)] += f" (skipped: {fmt(r['skipped'])})"
        body.append(line)
    return table(headers, body)


def generic_table(rows: list[Any]) -> str:
    """Every scalar field of the rows (paper values merged as "ours (paper)")."""
    rows = [r for r in rows if isinstance(r, dict)]
    if not rows:
        return "_(no rows)_"
    scalar = {k for r in rows for k, v in r.items() if not isinstance(v, (list, dict))}
    nested = {k for r in rows for k, v in r.items() if isinstance(v, (list, dict))} - scalar
    keys = [k for k in dict.fromkeys(k for r in rows for k in r) if k in scalar and
            not k.startswith("paper") and not k.endswith(("_std", "_se"))]
    shown = keys[:MAX_COLUMNS]
    text = table(shown, [[cell(r, k) for k in shown] for r in rows[:MAX_ROWS]])
    notes = []
    if len(rows) > MAX_ROWS:
        notes.append(f"first {MAX_ROWS} of {len(rows)} rows")
    if len(keys) > MAX_COLUMNS or nested:
        more = keys[MAX_COLUMNS:] + sorted(nested)
        notes.append(f"{len(more)} more columns in the JSON: {', '.join(more)}")
    return text + ("\n\n_(" + "; ".join(notes) + ")_" if notes else "")


# ------------------------------------------------------------------ environment
def environment(data: dict[str, Any]) -> str:
    """Command, date, machine and solver versions of a result file, in one line."""
    env = data.get("environment") if isinstance(data.get("environment"), dict) else data
    parts = []
    if env.get("command"):
        parts.append(f"`{env['command']}`")
    if env.get("date"):
        parts.append(str(env["date"])[:10])
    machine = env.get("machine")
    if isinstance(machine, dict):
        parts.append(f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores")
    versions = env.get("versions")
    if isinstance(versions, dict):
        shown = [f"{k} {versions[k]}" for k in ("cfopt", "highspy", "gurobipy", "cbc", "dice-ml")
                 if versions.get(k)]
        parts.append(", ".join(shown))
    runs = data.get("runs")
    if isinstance(runs, list) and len(runs) > 1:
        parts.append(f"merged from {len(runs)} runs")
    return " · ".join(parts) if parts else "(no environment recorded)"


# ------------------------------------------------------------------ headlines
def _rows(data: dict[str, Any]) -> list[Row]:
    return [r for r in data.get("rows", []) if isinstance(r, dict)]


def _core(data: dict[str, Any]) -> str:
    rows = _rows(data)
    ours = [r for r in rows if r.get("method") == "cfopt-reuse" and r.get("per_query_tightening")
            and r.get("bound_tightening") == "lp"]
    dice = next(r for r in rows if str(r.get("method", "")).startswith("dice"))
    highs = next(r for r in ours if r["solver"] == "highs")
    best = min(ours, key=lambda r: r["median_s"])
    return (f"cfopt: {fmt(highs['median_s'])} s median per CE on HiGHS "
            f"({fmt(best['median_s'])} s on {best['solver']}), validity {fmt(highs['validity'])}, "
            f"proven optimal {fmt(highs['optimal'])}; mean L1 {fmt(highs['mean_l1'])}, "
            f"{dice['mean_l1'] / highs['mean_l1']:.1f}× below DiCE random's "
            f"({fmt(dice['median_s'])} s median).")


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _trees(data: dict[str, Any]) -> str:
    rows = _rows(data)
    ours = [r for r in rows if r.get("method") == "cfopt" and r.get("solver") == "highs"
            and r.get("pruning")]
    genetic = [r for r in rows if r.get("method") == "dice-genetic"]
    full = sum(r["validity"] == 1.0 for r in ours)
    return (f"cfopt (HiGHS, leaf pruning): validity 1.0 on {full} of {len(ours)} models, "
            f"median of the per-model medians {fmt(_median([r['median_s'] for r in ours]))} s "
            f"against DiCE genetic's {fmt(_median([r['median_s'] for r in genetic]))} s; "
            f"mean L1 {fmt(_median([r['mean_l1'] for r in ours if r.get('mean_l1')]))} against "
            f"{fmt(_median([r['mean_l1'] for r in genetic if r.get('mean_l1')]))} (medians "
            f"over models).")


def _paper_gaps(data: dict[str, Any], method: str, metric: str) -> str:
    rows = [r for r in _rows(data) if r.get("method") == method]
    pairs = [(r.get("dataset", "?"), r.get(metric), paper_value(r, metric)) for r in rows]
    return ", ".join(f"{d} {fmt(o)} ({fmt(p)})" for d, o, p in pairs if o is not None)


def _ceocl(data: dict[str, Any]) -> str:
    return (f"cfopt validity (paper): {_paper_gaps(data, 'cfopt', 'validity')}; sparsity: "
            f"{_paper_gaps(data, 'cfopt', 'sparsity')}.")


def _diversity(data: dict[str, Any]) -> str:
    groups: dict[tuple, list[Row]] = {}
    for r in _rows(data):
        groups.setdefault((r.get("dataset"), r.get("norm")), []).append(r)
    best = [min((r for r in g if r.get("k_distance") is not None),
                key=lambda r: r["k_distance"]) for g in groups.values()]
    wins = [r for r in best if str(r["method"]).startswith("cfopt")]
    return (f"a cfopt MILP set has the smallest k-distance on {len(wins)} of {len(groups)} "
            f"(data set, norm) pairs (validity of those sets ≥ "
            f"{fmt(min(r['validity'] for r in wins))}).")


def _german(data: dict[str, Any]) -> str:
    rows = _rows(data)
    valid = sum(r.get("validity") == 1.0 for r in rows)
    parts = sorted({str(r.get("part")) for r in rows})
    return (f"validity 1.0 in {valid} of {len(rows)} runs over parts {', '.join(parts)} "
            f"(the paper: 1.0), {fmt(min(r['time_s'] for r in rows))}–"
            f"{fmt(max(r['time_s'] for r in rows))} s per part.")


def _proplace(data: dict[str, Any]) -> str:
    rows = [r for r in _rows(data) if r.get("method") == "proplace"]
    return "PROPLACE: " + "; ".join(
        f"{r['dataset']} on {r.get('solver', 'highs')} vΔ {fmt(r['vdelta'])} % "
        f"({fmt(paper_value(r, 'vdelta'))}), ℓ1 {fmt(r['l1'])} "
        f"({fmt(paper_value(r, 'l1'))}), total {fmt(r['total_s'])} s "
        f"({fmt(paper_value(r, 'total_s'))} s)" for r in rows) + "."


def _formulations(data: dict[str, Any]) -> str:
    best: dict[str, Row] = {}
    for r in _rows(data):
        if r["model"] not in best or r["median_s"] < best[r["model"]]["median_s"]:
            best[r["model"]] = r
    return "fastest per model: " + "; ".join(
        f"{m}: {r['formulation']} {'with' if r['pruning'] else 'without'} pruning, "
        f"{fmt(r['median_s'])} s median" for m, r in best.items()) + "."


def _scaling(data: dict[str, Any]) -> str:
    first: dict[str, dict[str, Any]] = {}
    for f in data.get("fits", []):
        if f.get("exponent") is not None:
            first.setdefault(f["series"], f)
    rows = [r for r in _rows(data) if r.get("overhead_ratio") is not None]
    short = [r["overhead_ratio"] for r in rows if r["solver_s"] < 0.5]
    long = [r["overhead_ratio"] for r in rows if r["solver_s"] >= 0.5]
    text = "growth exponents b (time per CE ∝ size^b, proven-optimal points): " + "; ".join(
        f"{f['series']} ({f['solver']}, {f['config']}) b = {f['exponent']:.2f}"
        for f in first.values())
    if long:
        text += (f". Overhead (total − solver) / solver: median {fmt(_median(long))} where the "
                 f"solver needs ≥ 0.5 s ({sum(r <= 0.2 for r in long)} of {len(long)} rows ≤ 0.2,"
                 f" the goal)")
    if short:
        text += f", {fmt(_median(short))} on faster solves (a fixed per-query cost)"
    return text + "."


def _generic(data: dict[str, Any]) -> str:
    if "rows" not in data:
        tables = [f"{k} ({len(v)})" for k, v in data.items() if isinstance(v, (list, dict))
                  and k not in ENVIRONMENT]
        return f"no `rows`; tables: {', '.join(tables) or 'none'}."
    rows = _rows(data)
    methods = sorted({str(r["method"]) for r in rows if r.get("method") is not None})
    return f"{len(rows)} rows" + (f"; methods: {', '.join(methods)}" if methods else "") + "."


#: top-level keys describing the run, not results
ENVIRONMENT = ("environment", "command", "date", "machine", "versions", "runs")


def generic_sections(data: dict[str, Any]) -> list[str]:
    """A file without ``rows``: each top-level list of records or mapping as a table."""
    out = []
    for key, value in data.items():
        if key in ENVIRONMENT:
            continue
        if isinstance(value, dict):
            nested = all(isinstance(v, dict) for v in value.values()) and value
            records = [{"": k, **v} for k, v in value.items()] if nested else \
                [{"key": k, "value": v} for k, v in value.items()]
        elif isinstance(value, list):
            records = value
        else:
            continue
        out += [f"`{key}`:", "", generic_table(records), ""]
    return out


# ------------------------------------------------------------------ layouts
DICE = ("validity", "mean_l1", "median_s")
LAYOUTS: dict[str, Layout] = {
    "core": Layout(
        "Core: one MLP on Adult, cfopt vs DiCE",
        "50 rejected Adult test points, torch MLP 13-20-20-1; weighted L1 in min-max units. "
        "`solver s` is the solver's own time, `overhead` the median (total − solver) / solver.",
        (("method", "method"), ("solver", "solver"), ("bound_tightening", "OBBT"),
         ("per_query_tightening", "per query"), ("validity", "validity"),
         ("optimal", "optimal"), ("median_s", "median s"), ("p90_s", "p90 s"),
         ("mean_l1", "mean L1"), ("solver_s", "solver s"), ("overhead_ratio", "overhead")),
        headline=_core),
    "trees": Layout(
        "Tree ensembles: cfopt vs DiCE",
        "German credit and Adult, 10 rejected test points per model, 30 s per solve; "
        "cfopt on HiGHS (rows) with Gurobi, DiCE random and DiCE genetic beside "
        "(validity / mean L1 / median s; Gurobi's pip licence refuses the larger models).",
        (("dataset", "data"), ("model", "model"), ("n_trees", "trees"),
         ("max_depth", "depth"), ("leaves", "leaves"), ("pruning", "pruning"),
         ("validity", "validity"), ("optimal", "optimal"), ("median_s", "median s"),
         ("mean_l1", "mean L1")),
        beside=(Beside("Gurobi val / L1 / s", {"method": "cfopt", "solver": "gurobi"},
                       ("dataset", "model", "n_trees", "max_depth", "pruning"), DICE),
                Beside("DiCE random val / L1 / s", {"method": "dice-random"},
                       ("dataset", "model", "n_trees", "max_depth"), DICE),
                Beside("DiCE genetic val / L1 / s", {"method": "dice-genetic"},
                       ("dataset", "model", "n_trees", "max_depth"), DICE)),
        headline=_trees),
    "ceocl_table2": Layout(
        "CE-OCL Table 2: random forests on four data sets",
        "30 factuals per data set, RF 20×4; ours (paper) where the paper reports it.",
        (("dataset", "data"), ("method", "method"), ("validity", "validity"),
         ("cat_proximity", "cat. prox."), ("cont_proximity", "cont. prox."),
         ("sparsity", "sparsity"), ("time_s", "mean s"), ("median_s", "median s")),
        headline=_ceocl),
    "ceocl_german": Layout(
        "CE-OCL German credit case study (Table 5)",
        "Linear SVM, the paper's factual, constraints added part by part; ours (paper).",
        (("part", "part"), ("method", "diversity"), ("solver", "solver"), ("n_ces", "CEs"),
         ("validity", "validity"), ("cat_proximity", "cat prox"),
         ("cont_proximity", "cont prox"), ("sparsity", "sparsity"),
         ("cat_diversity", "cat div"), ("cont_diversity", "cont div"),
         ("sparsity_diversity", "sparsity div"), ("time_s", "s")),
        headline=_german),
    "diversity_table9": Layout(
        "Diverse sets (Leofante & Potyka, Table 9)",
        "20 inputs × 3 perturbations per data set; means over valid pairs; ours (paper).",
        (("dataset", "data"), ("norm", "norm"), ("method", "method"), ("validity", "valid"),
         ("k_distance", "k-distance"), ("k_diversity", "k-diversity"),
         ("setdist_sum", "setdist Σ"), ("setdist_max", "setdist max"),
         ("median_s", "median s")),
        headline=_diversity),
    "proplace_table1": Layout(
        "PROPLACE Table 1: robust CEs under model shift",
        "50 inputs per data set; vr validity under retrained models, vΔ certified "
        "Δ-robustness (%); ours (paper).",
        (("dataset", "data"), ("method", "method"), ("solver", "solver"), ("vr", "vr"),
         ("vdelta", "vΔ"),
         ("l1", "ℓ1"), ("lof", "lof"), ("total_s", "total s"), ("median_s", "median s")),
        headline=_proplace),
    "tree_formulations": Layout(
        "Tree formulations: leaf vs threshold (Mišić)",
        "German, 8 rejected applicants, HiGHS, 60 s limit.",
        (("model", "model"), ("formulation", "formulation"), ("pruning", "pruning"),
         ("leaves", "leaves"), ("thresholds", "thresholds"), ("optimal", "optimal"),
         ("n", "n"), ("median_s", "median s"), ("p90_s", "p90 s"),
         ("max_excess_over_leaf", "excess over leaf")),
        headline=_formulations),
    "scaling": Layout(
        "Scaling: time per CE against model and trust-region size",
        "Median over a few queries per point, each solve time-limited. `total s` is "
        "cfopt's end-to-end time, `solver s` the solver's own, `overhead` = (total − "
        "solver) / solver, `MPS s` the same MILP written to MPS and solved by highspy "
        "directly with the same options.",
        (("series", "series"), ("size", "size"), ("solver", "solver"), ("config", "config"),
         ("n", "n"), ("optimal", "optimal"), ("total_s", "total s"), ("solver_s", "solver s"),
         ("overhead_ratio", "overhead"), ("mps_s", "MPS s"), ("binaries", "binaries"),
         ("skipped", "skipped")),
        headline=_scaling, extra=("fits",)),
}


# ------------------------------------------------------------------ the report
def section(path: Path, figures: Path, relative_to: Path) -> str:
    """The Markdown section of one result file (figure written to ``figures``)."""
    name = path.stem
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return f"## `{path.name}`\n\nnot readable: {type(exc).__name__}: {exc}\n"
    if not isinstance(data, dict):
        data = {"rows": data if isinstance(data, list) else []}
    layout = LAYOUTS.get(name)
    title = layout.title if layout else str(data.get("benchmark") or name.replace("_", " "))
    out = [f"## {title} (`results/{path.name}`)", "", environment(data), ""]
    try:
        if layout is None or layout.headline is None:
            raise KeyError("no headline")
        out += [f"**Where cfopt stands:** {layout.headline(data)}", ""]
    except (KeyError, TypeError, ValueError, StopIteration, ZeroDivisionError):
        out += [f"**Rows:** {_generic(data)}", ""]
    if layout:
        out += [layout.about, "", layout_table(_rows(data), layout), ""]
        for key in layout.extra:
            if isinstance(data.get(key), list):
                out += [f"`{key}`:", "", generic_table(data[key]), ""]
    elif "rows" in data:
        out += [generic_table(data["rows"]), ""]
    else:
        out += generic_sections(data)
    for png in report_figures.draw(name, data, figures):
        out += [f"![{png.stem}]({png.relative_to(relative_to).as_posix()})", ""]
    return "\n".join(out)


def build(results: Path = RESULTS, output: Path = HERE / "REPORT.md",
          figures: Path | None = None) -> Path:
    """Write the report of every ``results/*.json`` to ``output`` (figures beside it in
    ``figures``, default ``<output dir>/figures``); returns ``output``."""
    figures = figures if figures is not None else output.parent / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    paths = sorted(results.glob("*.json"), key=lambda p: (p.stem not in LAYOUTS,
                                                          list(LAYOUTS).index(p.stem)
                                                          if p.stem in LAYOUTS else 0, p.stem))
    head = [
        "# cfopt benchmark report", "",
        f"Generated by `python -m benchmarks.report` from the {len(paths)} result files in "
        "`benchmarks/results/` (edit those or the scripts, not this file). Numbers are as "
        "recorded: each section names the command, date, machine and versions that produced "
        "it. \"x (y)\": ours (the paper's). Timings on the shared 2-core machine are upper "
        "bounds. Details and deviations per benchmark: `benchmarks/README.md`.", "",
        "Contents: " + ", ".join(f"`{p.name}`" for p in paths), ""]
    body = [section(p, figures, output.parent) for p in paths]
    output.write_text("\n".join(head + body).rstrip() + "\n", encoding="utf-8")
    return output


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--output", type=Path, default=HERE / "REPORT.md")
    args = parser.parse_args(argv)
    print(build(args.results, args.output))


if __name__ == "__main__":
    main()
