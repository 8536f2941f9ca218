"""Sphinx configuration of xlabind's documentation site. docs/sphinx/build_docs.py
copies docs/ next to a copy of this file, adds the generated reference pages,
and builds; this folder (the domains, offline MathJax, the stylesheet) is on
the path."""

import json
import pathlib
import re
import sys

import xlabind

project = "xlabind"
author = "the xlabind authors"
copyright = "2026, the xlabind authors"
version = release = xlabind.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx_copybutton",
    "offline_mathjax",
    "reference_domains",
    "block_notes",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_examples"]

# Every reference to an xlabind name must resolve (the build fails on a
# dangling one); names of other projects (jax, numpy, typing) are plain text,
# for the site is built offline.
nitpicky = True
# Private names in signatures (xlabind._primitive...) are not documented.
nitpick_ignore_regex = [(r"py:.*", r"(?!xlabind\b).*"), (r"py:.*", r"xlabind(\.\w+)*\._.*")]

myst_enable_extensions = ["dollarmath", "deflist", "colon_fence", "substitution"]
# The numbers the pages quote ({{ name }}), from the data the figures are drawn
# from (figures.py writes the file beside the pages).
myst_substitutions = json.loads(
    (pathlib.Path(__file__).parent / "_figures" / "numbers.json").read_text()
)
myst_heading_anchors = 3
myst_dmath_double_inline = True

# Signatures show the names the code annotates with (xlabind.Function, not
# the union it stands for), linked to their entries.
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_type_aliases = {
    name: f"xlabind.{name}" for name in ("Function", "ResultSpec", "Rule", "Traceable")
}
autodoc_default_options = {"exclude-members": "__init__, __new__"}
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# Prompts and outputs are not copied with the code.
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = False

html_theme = "furo"
html_title = f"xlabind {release}"
html_static_path = ["static"]
html_css_files = ["xlabind.css"]
# Search snippets show math as text, not TeX.
html_js_files = ["search_math.js"]
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "sidebar_hide_name": False,
    "navigation_with_keys": True,
    "top_of_page_buttons": [],
}
# A signature longer than a line lists one parameter a line.
python_maximum_signature_line_length = 88

sys.dont_write_bytecode = True


def _alias_names(app, what, name, obj, options, signature, return_annotation):
    """Sphinx 9 prints an alias inside a union (``ResultSpec | Callable``) as
    ``TypeAliasForwardRef('xlabind.ResultSpec')``: the alias's name instead."""

    def clean(text):
        return re.sub(r"TypeAliasForwardRef\('([\w.]+)'\)", r"\1", text) if text else text

    return clean(signature), clean(return_annotation)


def setup(app):
    app.connect("autodoc-process-signature", _alias_names)
