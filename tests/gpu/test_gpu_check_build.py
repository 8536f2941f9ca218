"""tools/gpu_check.py builds the extension from the repository's sources
without Bazel (here with this machine's g++, Python and nvcc, unoptimized and
PTX only), and the result imports and runs a callback: what the GPU machine
does before its tests. Outside the default test set (it builds without
Bazel, tests/BUILD.bazel); `bazel test --config=all` and CI run it."""

import os
import shutil
import subprocess
import sys

import pytest
from wheel_tools import load_tool

SCRIPT = "tools/gpu_check.py"


@pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "g++")) is None,
    reason="no C++ compiler on PATH for the Bazel-free build",
)
def test_the_gpu_check_builds_the_extension_without_bazel(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--build-only",
            "--fast-build",
            "--out",
            str(tmp_path),
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "built " in done.stdout and "['CUDA', 'cpu']" in done.stdout
    built = sorted(
        p.name.split(".")[0]
        for p in (tmp_path / "build" / "package" / "xlabind").glob("_xlabind*.so")
    )
    # The CUDA kernels are built where there is nvcc (this machine has CUDA 13's).
    with_cuda = load_tool("gpu_check").cuda_toolkit() is not None
    expected = (
        ["_xlabind", "_xlabind_cuda_ops", "_xlabind_ops"]
        if with_cuda
        else ["_xlabind", "_xlabind_ops"]
    )
    assert built == expected
    assert ("CUDA ops: built" if with_cuda else "CUDA ops: missing") in done.stdout
