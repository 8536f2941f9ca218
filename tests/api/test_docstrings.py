"""The examples in the public docstrings run and print what they claim
(tests/support/docstring_examples.py; the lines marked GPU run in
tools/device_check.py)."""

import os

# Several devices, as the sharding examples (check_sharding) need.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
)

import docstring_examples
import pytest

import xlabind  # noqa: F401  (registers the primitive before the modules run)


@pytest.mark.parametrize("name", docstring_examples.MODULES + docstring_examples.COMPILED)
def test_docstring_examples(name):
    result = docstring_examples.run(name, gpu=False)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0


def test_gpu_examples_are_marked_and_counted():
    # The CUDA examples are there to run on a GPU, not skipped for good.
    assert docstring_examples.gpu_examples("xlabind.cuda") >= 3
    assert docstring_examples.gpu_examples("xlabind.cuda.DeviceArray") >= 2
