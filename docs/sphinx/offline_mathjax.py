"""MathJax served with the site instead of from a CDN (Sphinx's default):
the TeX-to-HTML bundle and its fonts from the pinned sphinx-mathjax-offline
wheel, about 1.5 MB of its 24, copied into the site's _static/mathjax."""

from __future__ import annotations

import importlib.metadata
import pathlib
import shutil

# What tex-chtml.js loads: itself, then its fonts from next to it.
_FILES = ("tex-chtml.js", "output/chtml/fonts/woff-v2")


def _mathjax_folder() -> pathlib.Path:
    distribution = importlib.metadata.distribution("sphinx-mathjax-offline")
    script = next(f for f in distribution.files if f.name == "tex-chtml.js")
    return pathlib.Path(distribution.locate_file(script)).parent


def _copy(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source, target = _mathjax_folder(), pathlib.Path(app.outdir) / "_static" / "mathjax"
    for name in _FILES:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name, dirs_exist_ok=True)
        else:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / name, target / name)


def setup(app):
    app.setup_extension("sphinx.ext.mathjax")
    app.config.mathjax_path = "mathjax/tex-chtml.js"
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
