"""tools/gpu_check.py, the script the GPU machine runs: it generates each
extension module's source as Bazel does (one generator, ffi/extension_module.bzl),
and reports every step even when one runs out of time. (Its Bazel-free build
is test_gpu_check_build.py, outside the default test set.)"""

import pathlib
import subprocess
import sys

from wheel_tools import load_tool

SCRIPT = pathlib.Path("tools/gpu_check.py")
REPO = pathlib.Path(".")  # the runfiles' copy of this workspace


def gpu_check_module():
    return load_tool("gpu_check")


def test_the_gpu_check_makes_the_modules_bazel_makes():
    """The Bazel-free build generates each extension module from the template
    and the handler tables Bazel uses: byte for byte the source Bazel made
    (stages, state types and command-buffer wrappers included)."""
    check = gpu_check_module()
    modules = check.native_op_modules()
    assert set(modules) == {"_xlabind_ops", "_xlabind_cuda_ops"}
    generated = {name: check.module_source(name, handlers) for name, handlers in modules.items()}
    generated["native_api_ops"] = check.module_source("native_api_ops", *check.native_api_handlers())
    bazel = {"_xlabind_ops": "ffi/ops/_xlabind_ops_module.cc",
             "_xlabind_cuda_ops": "ffi/ops/_xlabind_cuda_ops_module.cc",
             "native_api_ops": "tests/native/native_api_ops_module.cc"}
    for name, path in bazel.items():
        assert "%{" not in generated[name] and f"PyInit_{name}" in generated[name]
        assert generated[name] == (REPO / path).read_text(), name


def test_the_summary_comes_even_when_a_step_runs_out_of_time(tmp_path):
    # --dry-run: stand-ins for the build and the GPU steps; the first GPU test
    # file hangs and is stopped after --step-seconds, the rest still run.
    done = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--quick", "--out",
                           str(tmp_path), "--step-seconds", "3", "--deadline", "120"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # the timed-out step failed
    lines = done.stdout.splitlines()
    timed_out = next(line for line in lines if line.startswith("test_gpu.py"))
    assert "timed out after" in timed_out and timed_out.split()[3] == "1"  # one failure
    other = next(line for line in lines if line.startswith("test_gpu_map_coordinates.py"))
    assert other.split()[2:5] == ["2", "0", "1"]  # passed, failed, skipped: reported
    assert "benchmark:" in done.stdout and "xlabind no-op  1  61.0" in done.stdout
    assert "partial output of a step that hangs" in (tmp_path / "logs" / "test_gpu.log").read_text()
    assert (tmp_path / "gpu_check.json").exists()
