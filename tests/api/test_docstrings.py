"""The examples in the public docstrings run and print what they claim."""

import doctest
import importlib
import os

# Several devices, as the sharding examples (check_sharding) need.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=4")

import pytest  # noqa: E402

import xlabind  # noqa: E402,F401  (registers the primitive before the modules run)

# xlabind.callback etc. are the functions; the modules are reached by name.
MODULES = ["xlabind.callback", "xlabind.linear", "xlabind.multilinear", "xlabind.nonlinear",
           "xlabind._runtime.native_targets", "xlabind.ops.map_coordinates",
           "xlabind._primitive.factors", "xlabind.sharding_check", "xlabind._primitive.definition",
           "xlabind.jaxbind", "xlabind.ops.spline_filter", "xlabind._runtime.extension",
           "xlabind.cuda", "xlabind._primitive.traced_rules", "xlabind._compatibility"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0
