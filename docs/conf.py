"""Sphinx configuration of cfopt's documentation site.

Built with ``python -m sphinx -W docs docs/_build`` (warnings are errors): the guides are
MyST Markdown, the notebooks are rendered from their committed outputs (never executed
here) and the API reference is generated from the docstrings of every public name.
"""

from __future__ import annotations

import cfopt

project = "cfopt"
author = "the cfopt developers"
copyright = "2026, the cfopt developers"
release = version = cfopt.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]

# the README-style guides and the notebooks
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
nb_execution_mode = "off"  # the committed outputs are shown; CI runs the notebooks apart
exclude_patterns = ["_build", "**.ipynb_checkpoints", "jupyter_execute"]

# the API reference: Google-style docstrings, one page per public name
autosummary_generate = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True

html_theme = "pydata_sphinx_theme"
html_title = f"cfopt {version}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "icon_links": [],
}
