"""The notebook cards in a real browser: render them with headless Chromium and check the picture.

Unit tests check the cards' markup (``tests/test_display.py``); this script checks what a
person sees. On German credit with a logistic regression it builds the objects a notebook
shows: the explainer, an answer proven optimal, a diverse set, a batch narrowed to
``duration`` alone (some rows answered, some proven infeasible) and one of its
infeasible answers; and a forest's answer cut short by a time limit (a verified point
without its proof). It writes them, each under its name, into one HTML page, has
Chromium (``--headless``) take a screenshot of it, and checks the picture: the page is not
blank and each status colour of :mod:`cfopt.results.display` (green: proven; amber: a
point without that proof; red: no point) is drawn. The PNG is committed
(``docs/_static/cards.png``) and shown on the documentation site.

    python docs/render_cards.py [--chromium /usr/bin/chromium] [--out docs/_static/cards.png]

Chromium is Debian's ``chromium`` package (not a dependency of cfopt).
"""

from __future__ import annotations

import argparse
import html
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

import cfopt
from cfopt.datasets import load_german

HERE = Path(__file__).resolve().parent

#: the badge colours of cfopt.results.display, as RGB in 0..255
COLOURS = {"proven": (0x2E, 0x7D, 0x32), "unproven": (0xB2, 0x6A, 0x00),
           "none": (0xB7, 0x1C, 0x1C)}


def cards() -> list[tuple[str, str]]:
    """(name, markup) of each object a notebook displays."""
    data = load_german()
    space = cfopt.FeatureSpace.from_frame(data.X)
    space.immutable("foreign_worker", "status_sex", "people_liable").increase_only("age")
    model = LogisticRegression(max_iter=1000).fit(space.transform(data.X), data.y)
    explainer = cfopt.Explainer(model, space)
    rejected = data.X[model.predict(space.transform(data.X)) == 0]
    answer = explainer.explain(rejected.iloc[[0]], target=1)
    found = explainer.explain(rejected.iloc[[0]], target=1, n=3, diversity="nogood")
    batch = explainer.explain_many(rejected.iloc[:8], target=1, features_to_vary=["duration"],
                                   progress=False)
    infeasible = [a for a in batch if a.status is cfopt.Status.INFEASIBLE]
    if not infeasible or not any(a.found for a in batch):
        raise RuntimeError("the narrowed batch should have both answered and infeasible rows")
    forest = RandomForestClassifier(n_estimators=300, max_depth=8, random_state=0).fit(
        space.transform(data.X), data.y)
    hurried = cfopt.Explainer(forest, space, time_limit=0.05)
    short = hurried.explain(rejected.iloc[[0]], target=1)
    return [("Explainer", explainer._repr_html_()),
            ("explain(x, target=1)", answer._repr_html_()),
            ("explain(x, target=1, n=3)", found._repr_html_()),
            ("explain_many(rows, target=1, features_to_vary=['duration'])",
             batch._repr_html_()),
            ("an infeasible row of that batch", infeasible[0]._repr_html_()),
            ("a 300-tree forest, time_limit=0.05 s", short._repr_html_())]


def page(parts: list[tuple[str, str]]) -> str:
    body = "".join(f"<h3 style='font-family:sans-serif'>{html.escape(name)}</h3>{markup}"
                   for name, markup in parts)
    return f"<!doctype html><html><head><meta charset='utf-8'></head><body>{body}</body></html>"


def screenshot(chromium: str, source: Path, out: Path, size: tuple[int, int]) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-quic", "--no-first-run", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
                        f"--screenshot={out}", source.as_uri()],
                       check=True, capture_output=True, timeout=120)


def check(picture: Path) -> dict[str, int]:
    """Pixels of each badge colour in the picture; raises when the page is blank or a
    colour is missing."""
    import matplotlib.image

    rgb = (matplotlib.image.imread(picture)[..., :3] * 255).round().astype(int)
    if len(np.unique(rgb.reshape(-1, 3), axis=0)) < 10:
        raise RuntimeError(f"{picture} is blank")
    counts = {name: int((np.abs(rgb - np.array(colour)).max(axis=-1) <= 2).sum())
              for name, colour in COLOURS.items()}
    missing = [name for name, count in counts.items() if count < 50]
    if missing:
        raise RuntimeError(f"{picture}: no badge drawn in the colour of {missing} ({counts})")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=HERE / "_static" / "cards.png")
    parser.add_argument("--size", default="1100,2900", help="window width,height in pixels")
    args = parser.parse_args(argv)
    if not Path(args.chromium).exists():
        parser.error(f"no Chromium at {args.chromium} (Debian: apt-get install chromium)")
    width, height = (int(v) for v in args.size.split(","))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "cards.html"
        source.write_text(page(cards()), encoding="utf-8")
        screenshot(args.chromium, source, args.out, (width, height))
    counts = check(args.out)
    print(f"{args.out}: {width}x{height}, badge pixels {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
