"""The examples in xlabind's public docstrings, as doctests. Lines that need
a CUDA GPU carry `# doctest: +GPU`: without one they are left out (a page's
other lines still run); tools/device_check.py runs them all on a GPU machine
(tests/gpu/test_gpu.py::test_docstring_examples_on_the_gpu)."""

from __future__ import annotations

import doctest
import importlib

GPU = doctest.register_optionflag("GPU")

# The modules whose docstrings hold the public names' examples (the public
# functions are defined in them), and compiled classes, whose docstrings
# doctest does not find through a module.
MODULES = [
    "xlabind",
    "xlabind.callback",
    "xlabind.linear",
    "xlabind.multilinear",
    "xlabind.nonlinear",
    "xlabind._runtime.native_targets",
    "xlabind.ops.map_coordinates.op",
    "xlabind._primitive.factors",
    "xlabind.sharding_check",
    "xlabind._primitive.definition",
    "xlabind.jaxbind",
    "xlabind.ops.spline_filter.op",
    "xlabind._runtime.extension",
    "xlabind.cuda",
    "xlabind._primitive.traced_rules",
    "xlabind._compatibility",
]
COMPILED = ["xlabind.cuda.DeviceArray"]


def _tests(name: str) -> list[doctest.DocTest]:
    if name in COMPILED:
        module_name, _, attribute = name.rpartition(".")
        obj = getattr(importlib.import_module(module_name), attribute)
        return [doctest.DocTestParser().get_doctest(obj.__doc__ or "", {}, name, None, 0)]
    return doctest.DocTestFinder().find(importlib.import_module(name))


def run(name: str, gpu: bool) -> doctest.TestResults:
    """Runs `name`'s docstring examples, those marked GPU only when `gpu`."""
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in _tests(name):
        if not gpu:
            test.examples = [e for e in test.examples if not e.options.get(GPU)]
        runner.run(test)
    return runner.summarize(verbose=False)


def gpu_examples(name: str) -> int:
    """How many of `name`'s examples are marked GPU."""
    return sum(bool(e.options.get(GPU)) for t in _tests(name) for e in t.examples)
