"""`import xlabind` in another Bazel workspace's py_test: the package.

Bazel puts this repository into a test's runfiles as a folder named `xlabind`,
at the front of sys.path; by default (without
--incompatible_default_to_explicit_init_py) it also writes an empty
`__init__.py` into that folder, which makes the folder a package `xlabind`
that hides the real one in python/xlabind ("module 'xlabind' has no attribute
..."). Bazel never overwrites an `__init__.py` that exists: this one, found
first, loads the real package in its place. The wheel does not contain it.
"""

import importlib.util as _util
import os as _os
import sys as _sys

if __name__ == "xlabind":
    _package = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "python", "xlabind")
    _spec = _util.spec_from_file_location(
        "xlabind", _os.path.join(_package, "__init__.py"), submodule_search_locations=[_package]
    )
    assert _spec is not None and _spec.loader is not None
    _real = _util.module_from_spec(_spec)
    # The import statement that got here hands out whatever sys.modules holds.
    _sys.modules["xlabind"] = _real
    _spec.loader.exec_module(_real)
