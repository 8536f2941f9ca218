"""Sphinx configuration of xlabind's documentation site (tools/docs/build_docs.py
writes the pages next to this file's copy, then builds them)."""

project = "xlabind"
author = "the xlabind authors"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# README chapters skip heading levels (#### under ##) in places.
suppress_warnings = ["myst.header"]
myst_heading_anchors = 3
# Signatures with their types, as the code annotates them.
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
html_theme = "alabaster"
html_title = "xlabind"
html_theme_options = {"description": "Fast native and Python code inside jax.jit, vmap and grad",
                      "fixed_sidebar": True}
html_static_path = []
