"""Charts render without a display (Agg) to non-empty PNGs, in raw units and labels."""

from __future__ import annotations

import dataclasses

import pytest

import cfopt
from cfopt.plots import show_value

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
plt = pytest.importorskip("matplotlib.pyplot")


@pytest.fixture(scope="module")
def explained(german, german_model):
    net, space = german_model
    explainer = cfopt.Explainer(net, space)
    pred = explainer.milp.predict(german.X)
    row = german.X.iloc[[next(i for i in range(len(german.X)) if pred[i] == 0)]]
    ce = explainer.explain(row, target=1)
    found = explainer.explain(row, target=1, n=3, diversity="nogood")
    return ce, found


def save(ax, path):
    ax.figure.savefig(path, format="png")
    plt.close(ax.figure)
    data = path.read_bytes()
    assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"


def texts(ax):
    return [t.get_text() for t in ax.texts] + [t.get_text() for t in ax.get_yticklabels()]


def test_change_chart(explained, tmp_path):
    ce, _ = explained
    assert ce.space is not None
    ax = ce.plot()
    shown = texts(ax)
    changes = ce.changes()
    for name, row in changes.iterrows():
        assert any(t.startswith(name) for t in shown)  # one row per changed feature
        assert f"{show_value(row['from'])} → {show_value(row['to'])}" in shown
    assert len(ax.get_yticks()) == len(changes)
    save(ax, tmp_path / "ce.png")
    ax = ce.plot(features="all")
    assert len(ax.get_yticks()) == len(ce.factual.columns)
    save(ax, tmp_path / "all.png")


def test_category_labels_in_the_chart(explained, german_model, tmp_path):
    """A categorical move is labelled by its categories, not codes."""
    ce, _ = explained
    _, space = german_model
    before = ce.factual["purpose"].iloc[0]
    row = ce.counterfactual.copy()
    row["purpose"] = next(c for c in space["purpose"].categories if c != before)
    moved = dataclasses.replace(ce, counterfactual=row)
    ax = moved.plot(features=["purpose", "credit_amount"])
    assert f"{before} → {row['purpose'].iloc[0]}" in texts(ax)
    save(ax, tmp_path / "labels.png")


def test_without_a_space_and_into_given_axes(explained, tmp_path):
    ce, _ = explained
    fig, ax = plt.subplots()
    assert ce.plot(space=None, ax=ax) is ax
    ce_plain = dataclasses.replace(ce, space=None)
    save(ce_plain.plot(), tmp_path / "plain.png")


def test_diverse_set_chart(explained, tmp_path):
    _, found = explained
    assert len(found) >= 2
    ax = found.plot()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "factual" and len(labels) == len(found) + 1
    changed = {n for m in found for n in m.changes().index}
    assert {t.get_text() for t in ax.get_yticklabels()} == changed
    save(ax, tmp_path / "set.png")


def test_nothing_to_plot_is_an_error(explained):
    ce, found = explained
    empty = dataclasses.replace(ce, counterfactual=None, status=cfopt.Status.NO_SOLUTION)
    with pytest.raises(ValueError, match="no counterfactual to plot"):
        empty.plot()
    with pytest.raises(ValueError, match="unknown feature"):
        ce.plot(features=["not_a_feature"])
    with pytest.raises(ValueError, match="features must be"):
        found.plot(features="some")


def outside(fig):
    """The texts of ``fig`` (tick labels, axis labels, titles, annotations, the colour
    bar's label) whose drawn extent leaves the figure."""
    fig.canvas.draw()
    edge = fig.bbox
    found = []
    for ax in fig.axes:
        for artist in [*ax.get_xticklabels(), *ax.get_yticklabels(), ax.xaxis.label,
                       ax.yaxis.label, ax.title, *ax.texts]:
            if not artist.get_visible() or not artist.get_text():
                continue
            box = artist.get_window_extent()
            if (box.x0 < edge.x0 - 0.5 or box.y0 < edge.y0 - 0.5 or box.x1 > edge.x1 + 0.5
                    or box.y1 > edge.y1 + 0.5):
                found.append((artist.get_text(), tuple(round(v) for v in box.extents)))
    return found


def test_labels_inside_a_given_figure(explained, tmp_path):
    """The README's pattern ``fig, ax = plt.subplots(); ce.plot(ax=ax)``: the feature
    names and ranges (left) and the from → to texts (right) lie inside the figure (the
    y tick labels were cut at the left edge)."""
    ce, found = explained
    fig, ax = plt.subplots()
    ce.plot(ax=ax)
    assert outside(fig) == []
    save(ax, tmp_path / "given.png")
    fig, ax = plt.subplots()
    found.plot(ax=ax)
    assert outside(fig) == []
    save(ax, tmp_path / "given_set.png")


def test_set_chart_keeps_its_colour_bar_label(explained, tmp_path):
    """cfopt's own figure of a set: the colour bar's label (longer than a short chart is
    high when it stood vertically) and every tick label lie inside the figure."""
    _, found = explained
    for members in (found, dataclasses.replace(found, members=found.members[:1])):
        ax = members.plot()
        bar = next(a for a in ax.figure.axes if a is not ax)
        assert "move / feature range" in bar.get_xlabel() + bar.get_ylabel()
        assert outside(ax.figure) == []
        save(ax, tmp_path / f"set{len(members)}.png")


def test_charts_side_by_side_do_not_overlap(explained, tmp_path):
    """Two charts in one row of a user's grid stay within their own cells."""
    ce, found = explained
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    ce.plot(ax=left)
    found.plot(ax=right)
    fig.canvas.draw()
    assert outside(fig) == []
    charts = [left.get_tightbbox(), right.get_tightbbox()]
    assert charts[0].x1 <= charts[1].x0
    save(left, tmp_path / "grid.png")
