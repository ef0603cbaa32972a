"""Charts of counterfactuals (matplotlib; ``pip install "cfopt[plot]"``).

* :func:`plot_changes`: one counterfactual, one row per feature: the feature's range as
  a track, the factual as a dot and an arrow to the counterfactual value, both placed
  by their position within the feature's bounds and labelled in raw units or category
  labels (``from → to``).
* :func:`plot_set`: a set of counterfactuals as a grid, features by members: each cell
  shows the member's raw value or label where it differs from the factual, coloured by
  the signed move as a share of the feature's range (category changes in one colour).
* :func:`plot_audit`: a recourse audit, the cost of recourse by group (a box of the
  rows' costs, the mean with its confidence interval) and the share of rows proven to
  have none.

``Counterfactual.plot()`` and ``CounterfactualSet.plot()`` call these. Positions come
from the counterfactual's feature space (set by the explainer, or ``space=``); without
one each feature's track spans its own from → to values.

Layout: a figure cfopt creates uses matplotlib's constrained layout. Given ``ax=`` in a
figure without a layout engine (``fig, ax = plt.subplots()``), the Axes (and the set
chart's colour bar) shrink within their place just enough that every label, tick label
and title lies inside the figure; a figure with a layout engine is left to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .space.feature import Feature
from .space.space import FeatureSpace

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .batch.audit import RecourseAudit
    from .results.counterfactual import Counterfactual, CounterfactualSet

#: characters of a label shown at most
_WIDTH = 24
#: colours: increase, decrease, category change, factual, range track
_UP, _DOWN, _SWITCH, _FACTUAL, _TRACK = "#2a9d8f", "#e76f51", "#7b2cbf", "#264653", "#d9d9d9"


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'cfopt[plot]'") from exc
    return plt


#: room kept between a label and the figure's edge, in pixels
_EDGE = 4.0


def _axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=size, layout="constrained")
    return ax


def _slot(ax: Axes) -> Any:
    """The part of the figure (in pixels) a chart drawn into ``ax`` may use: the whole
    figure, or for a grid cell the cell up to half-way to its neighbours."""
    from matplotlib.transforms import Bbox

    fig = ax.figure
    spec = ax.get_subplotspec()
    if spec is None:
        return fig.bbox
    spec = spec.get_topmost_subplotspec()
    grid = spec.get_gridspec()
    bottoms, tops, lefts, rights = grid.get_grid_positions(fig)
    rows, cols = grid.get_geometry()
    r0, r1 = spec.rowspan.start, spec.rowspan.stop - 1
    c0, c1 = spec.colspan.start, spec.colspan.stop - 1
    x0 = 0.0 if c0 == 0 else (rights[c0 - 1] + lefts[c0]) / 2
    x1 = 1.0 if c1 == cols - 1 else (rights[c1] + lefts[c1 + 1]) / 2
    y1 = 1.0 if r0 == 0 else (bottoms[r0 - 1] + tops[r0]) / 2
    y0 = 0.0 if r1 == rows - 1 else (bottoms[r1] + tops[r1 + 1]) / 2
    return Bbox.from_extents(x0, y0, x1, y1).transformed(fig.transSubfigure)


def _fit(axes: Sequence[Axes]) -> None:
    """Shrink ``axes`` (one chart: the Axes and its colour bar) within the box they
    span, so that their labels, tick labels and titles lie inside the figure (inside
    their cell of a grid). Only for a figure without a layout engine: cfopt's own figures
    use constrained layout, and a user's engine lays the chart out itself."""
    from matplotlib.transforms import Bbox

    fig = axes[0].figure
    if fig.get_layout_engine() is not None:
        return
    edge = _slot(axes[0])
    width, height = fig.bbox.width, fig.bbox.height
    for _ in range(3):  # a shrunk Axes can re-flow its tick labels: settle in a few steps
        tight = Bbox.union([a.get_tightbbox() for a in axes])
        over = (max(0.0, edge.x0 + _EDGE - tight.x0), max(0.0, edge.y0 + _EDGE - tight.y0),
                max(0.0, tight.x1 - edge.x1 + _EDGE), max(0.0, tight.y1 - edge.y1 + _EDGE))
        if max(over) < 0.5:
            return
        box = Bbox.union([a.get_position() for a in axes])
        left, bottom = box.x0 + over[0] / width, box.y0 + over[1] / height
        right, top = box.x1 - over[2] / width, box.y1 - over[3] / height
        if right - left < 0.2 * box.width or top - bottom < 0.2 * box.height:
            return  # no room to make: the figure is too small for the labels
        sx, sy = (right - left) / box.width, (top - bottom) / box.height
        for a in axes:
            p, in_layout = a.get_position(), a.get_in_layout()
            a.set_position([left + (p.x0 - box.x0) * sx, bottom + (p.y0 - box.y0) * sy,
                            p.width * sx, p.height * sy])
            a.set_in_layout(in_layout)  # a later fig.tight_layout() still places it


def show_value(value: Any) -> str:
    """A raw value as text: labels as they are, integral numbers without decimals,
    others with 4 significant digits."""
    if isinstance(value, (bool, np.bool_)) or isinstance(value, str):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.4g}"
    return str(value)


def _position(f: Feature | None, value: Any, other: Any) -> float:
    """Where ``value`` lies within the feature's bounds (0 lower, 1 upper); without a
    feature, within the pair (``value``, ``other``)."""
    if f is None:
        if isinstance(value, (int, float, np.number)) and isinstance(other, (int, float,
                                                                             np.number)):
            lo, hi = min(value, other), max(value, other)
            return 0.5 if hi == lo else (float(value) - lo) / (hi - lo)
        return 0.0 if value != other else 0.5
    if f.is_onehot:
        k = len(f.categories)
        return f.categories.index(value) / (k - 1) if k > 1 else 0.5
    span = f.upper - f.lower
    return 0.5 if span == 0 else (f.to_code(value) - f.lower) / span


def _short(text: str, width: int = _WIDTH) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _range_text(f: Feature) -> str:
    if f.is_onehot:
        return f"{len(f.categories)} categories"
    if f.labelled:
        return f"{_short(show_value(f.categories[0]), 12)} … " \
               f"{_short(show_value(f.categories[-1]), 12)}"
    return f"{show_value(f.lower)} … {show_value(f.upper)}"


def _feature(space: FeatureSpace | None, name: str) -> Feature | None:
    return space[name] if space is not None and name in space else None


def _pick(factual: pd.Series, rows: Sequence[pd.Series], features: str | Sequence[str]
          ) -> list[str]:
    names = list(factual.index)
    if features == "changed":
        return [n for n in names if any(r[n] != factual[n] for r in rows)]
    if features == "all":
        return names
    if isinstance(features, str):
        raise ValueError(f"features must be 'changed', 'all' or a list of names, "
                         f"got {features!r}")
    unknown = [n for n in features if n not in names]
    if unknown:
        raise ValueError(f"unknown feature(s) {unknown}; the features are {names}")
    return list(features)


def plot_changes(ce: Counterfactual, *, space: FeatureSpace | None = None,
                 features: str | Sequence[str] = "changed", ax: Axes | None = None) -> Axes:
    """The change chart of one counterfactual (see the module); returns the Axes.

    Args:
        ce: a counterfactual with a point (``ce.found``).
        space: the feature space (default: the one the explainer attached).
        features: ``"changed"`` (default), ``"all"`` or a list of names.
        ax: draw into these Axes (default: a new figure).

    Raises:
        ValueError: ``ce`` has no counterfactual point, or unknown feature names.
    """
    if ce.counterfactual is None:
        raise ValueError(f"no counterfactual to plot (status {ce.status.value}): "
                         f"{ce.message or 'nothing was found'}")
    space = space if space is not None else ce.space
    before, after = ce.factual.iloc[0], ce.counterfactual.iloc[0]
    names = _pick(before, [after], features)
    ax = _axes(ax, (8.0, 1.2 + 0.55 * max(len(names), 1)))
    for y, name in enumerate(names):
        f = _feature(space, name)
        a, b = before[name], after[name]
        x0, x1 = _position(f, a, b), _position(f, b, a)
        ax.plot([0, 1], [y, y], color=_TRACK, linewidth=6, solid_capstyle="round", zorder=1)
        ax.scatter([x0], [y], color=_FACTUAL, s=40, zorder=3)
        if a != b:
            ordered = not f.is_onehot if f is not None else not isinstance(a, str)
            colour = (_UP if x1 > x0 else _DOWN) if ordered else _SWITCH
            ax.annotate("", xy=(x1, y), xytext=(x0, y), zorder=4,
                        arrowprops={"arrowstyle": "-|>", "color": colour, "linewidth": 2})
        text = f"{_short(show_value(a))} → {_short(show_value(b))}" if a != b \
            else _short(show_value(a))
        # beside the track, a fixed distance right of the Axes (room made by the layout)
        ax.annotate(text, xy=(1, y), xytext=(14, 0), textcoords="offset points",
                    va="center", ha="left", fontsize=9, annotation_clip=False)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([_short(n) if f is None else f"{_short(n)}\n[{_range_text(f)}]"
                        for n, f in ((n, _feature(space, n)) for n in names)], fontsize=9)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xlim(-0.05, 1.05)
    ax.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])  # three labels fit a narrow chart too
    ax.set_xticks([0.25, 0.75], minor=True)
    ax.set_xlabel("position within the feature's range" if space is not None
                  else "from → to (no feature space: each track spans its own change)")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.spines["bottom"].set_bounds(0, 1)
    ax.set_title(_title(ce), fontsize=10)
    _fit([ax])
    return ax


def _title(ce: Counterfactual) -> str:
    cost = "" if ce.objective is None else f", cost {ce.objective:.4g}"
    return (f"class {show_value(ce.factual_class)} → {show_value(ce.predicted_class)}"
            f" ({ce.status.value}{cost}, {len(ce.changes())} changed)")


def _signed_move(f: Feature | None, a: Any, b: Any) -> float:
    """The move a → b as a share of the feature's range; NaN for a category change."""
    if a == b:
        return 0.0
    if f is None or f.is_onehot:
        return math.nan
    span = f.upper - f.lower
    return 0.0 if span == 0 else (f.to_code(b) - f.to_code(a)) / span


def plot_set(found: CounterfactualSet, *, space: FeatureSpace | None = None,
             features: str | Sequence[str] = "changed", ax: Axes | None = None) -> Axes:
    """The grid chart of a set of counterfactuals (see the module); returns the Axes.

    Raises:
        ValueError: the set is empty, or unknown feature names.
    """
    if not found.members:
        raise ValueError(f"no counterfactual to plot (the search stopped: {found.stopped})")
    if space is None:
        space = next((m.space for m in found.members if m.space is not None), None)
    before = found.factual.iloc[0]
    rows = [m.counterfactual.iloc[0] for m in found.members]
    names = _pick(before, rows, features)
    plt = _pyplot()
    from matplotlib.colors import to_rgba

    ax = _axes(ax, (2.0 + 1.45 * (len(rows) + 1), 2.1 + 0.5 * max(len(names), 1)))
    moves = np.full((len(names), len(rows) + 1), 0.0)
    for i, name in enumerate(names):
        f = _feature(space, name)
        for j, row in enumerate(rows, start=1):
            if f is None and row[name] != before[name]:
                moves[i, j] = math.nan
            else:
                moves[i, j] = _signed_move(f, before[name], row[name])
    cmap = plt.get_cmap("RdBu").with_extremes(bad=to_rgba(_SWITCH, 0.35))
    image = ax.imshow(np.ma.masked_invalid(moves), cmap=cmap, vmin=-1, vmax=1, aspect="auto")
    ax.axvline(0.5, color="black", linewidth=1)
    for i, name in enumerate(names):
        ax.text(0, i, _short(show_value(before[name]), 14), ha="center", va="center",
                fontsize=8)
        for j, row in enumerate(rows, start=1):
            changed = row[name] != before[name]
            ax.text(j, i, _short(show_value(row[name]), 14) if changed else "·", ha="center",
                    va="center", fontsize=8, color="black" if changed else "#8c8c8c")
    costs = [m.objective for m in found.members]
    ax.set_xticks(range(len(rows) + 1))
    ax.set_xticklabels(["factual"] + [f"CE {k}\ncost {c:.3g}" if c is not None else f"CE {k}"
                                      for k, c in enumerate(costs, start=1)], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([_short(n) for n in names], fontsize=9)
    # below the grid, horizontal: its label runs along the chart's width, which grows
    # with the members (a vertical label outgrew a short chart's height)
    bar = ax.figure.colorbar(image, ax=ax, location="bottom", shrink=0.7, aspect=40,
                             pad=0.04)
    bar.ax.tick_params(labelsize=8)
    bar.set_label("move / feature range (purple: category changed)", fontsize=8)
    ax.set_title(f"{len(rows)} counterfactuals ({found.method}); · = unchanged", fontsize=10)
    _fit([ax, bar.ax])
    return ax


def plot_audit(audit: RecourseAudit, *, ax: Axes | None = None) -> Axes:
    """The cost of recourse by group: a box of the answered rows' counterfactual costs
    per group, its mean as a dot with the bootstrap interval as a bar, and under each
    group's name its rows and the share proven to have no recourse."""
    table = audit.table
    ax = _axes(ax, (1.6 + 1.3 * len(table), 3.6))
    names = list(table.index)
    data = [audit.costs.get(g, np.array([])) for g in names]
    positions = np.arange(1, len(names) + 1)
    shown = [k for k, d in enumerate(data) if len(d)]
    if shown:
        ax.boxplot([data[k] for k in shown], positions=positions[shown], widths=0.5,
                   showfliers=False, medianprops={"color": _TRACK})
    means = table["mean_cost"].to_numpy(float)
    low = means - table["mean_cost_low"].to_numpy(float)
    high = table["mean_cost_high"].to_numpy(float) - means
    ax.errorbar(positions, means, yerr=[low, high], fmt="o", color=_FACTUAL, capsize=4,
                label=f"mean cost, {audit.confidence:.0%} interval")
    ax.set_xticks(positions, [f"{_short(str(g), 14)}\n{int(r)} rows\n{s:.0%} none"
                              for g, r, s in zip(names, table["rows"],
                                                 table["no_recourse_share"].fillna(0.0))])
    ax.set_xlabel(audit.by)
    ax.set_ylabel("cost of recourse")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize="small",
              frameon=False)
    _fit([ax])
    return ax

