"""tools/gpu_check.py, the script the GPU machine runs, builds the extension
from the repository's sources without Bazel (here with this machine's g++ and
Python) and the result imports and runs a callback."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path("tools/gpu_check.py")


@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                    reason="no C++ compiler on PATH for the Bazel-free build")
def test_the_gpu_check_builds_the_extension_without_bazel(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--build-only", "--out", str(tmp_path),
                           "--jobs", "2"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "built " in done.stdout and "['CUDA', 'cpu']" in done.stdout
    built = list((tmp_path / "build" / "package" / "xlabind").glob("_xlabind*.so"))
    assert len(built) == 1
