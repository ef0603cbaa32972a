"""The documentation site (issue 40) stays whole: its API reference lists every public
name, each guide's excerpt of the README still finds its headings, and every guide and
notebook is in its table of contents (the notebooks' committed outputs:
``tests/test_notebooks.py``). The build itself, with warnings as errors, is a step of
``.ci/run``."""

from __future__ import annotations

import re
from pathlib import Path

import cfopt

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
INCLUDE = re.compile(r"```\{include\} (?P<path>\S+)\n(?P<options>(?::[^\n]*\n)*)```")


def test_api_reference_lists_every_public_name():
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^   (\w+)$", text, re.MULTILINE))
    assert listed == set(cfopt.__all__), (set(cfopt.__all__) - listed, listed -
                                          set(cfopt.__all__))


def test_guides_excerpts_find_their_headings():
    pages = sorted(DOCS.glob("**/*.md"))
    included = 0
    for page in pages:
        for match in INCLUDE.finditer(page.read_text(encoding="utf-8")):
            source = (page.parent / match["path"]).resolve()
            text = source.read_text(encoding="utf-8")
            for option in re.findall(r':(?:start-after|end-before): "(.*)"', match["options"]):
                assert option in text, f"{page.name}: {option!r} is not in {source.name}"
            included += 1
    assert included >= 8


def test_every_guide_and_notebook_is_in_the_table_of_contents():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for page in (DOCS / "guide").glob("*.md"):
        assert f"guide/{page.stem}" in index, page.name
    for notebook in (ROOT / "notebooks").glob("*.ipynb"):
        assert f"notebooks/{notebook.stem}" in index, notebook.name


def test_the_browser_check_of_the_cards_sees_each_colour(tmp_path):
    """``docs/render_cards.py``'s check of Chromium's screenshot: a blank page, or one
    without a status colour, fails; the committed screenshot passes."""
    import importlib.util

    import matplotlib.image
    import numpy as np
    import pytest

    spec = importlib.util.spec_from_file_location("render_cards", DOCS / "render_cards.py")
    render = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(render)
    picture = np.ones((60, 90, 3))
    path = tmp_path / "cards.png"
    matplotlib.image.imsave(path, picture)
    with pytest.raises(RuntimeError, match="blank"):
        render.check(path)
    rng = np.random.default_rng(0)
    picture[:, :30] = rng.uniform(0, 1, (60, 30, 3))  # text and tables: many colours
    for k, name in enumerate(["proven", "unproven", "none"]):
        picture[10 * k:10 * k + 8, 40:50] = np.array(render.COLOURS[name]) / 255
    matplotlib.image.imsave(path, picture)
    assert render.check(path) == {"proven": 80, "unproven": 80, "none": 80}
    picture[10:18, 40:50] = 1.0  # the amber badge gone
    matplotlib.image.imsave(path, picture)
    with pytest.raises(RuntimeError, match=r"\['unproven'\]"):
        render.check(path)
    counts = render.check(DOCS / "_static" / "cards.png")
    assert min(counts.values()) >= 50
