"""tools/gpu_check.py, the script the GPU machine runs: it generates each
extension module's source as Bazel does (one generator, ffi/extension_module.bzl),
and reports every step even when one runs out of time; and how
tools/gpu_benchmark.py, which it runs, times kernels on the device. (Its Bazel-free build
is test_gpu_check_build.py, outside the default test set.)"""

import json
import os
import pathlib
import subprocess
import sys
import time
import types
import zipfile

import pytest
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
    generated["native_api_ops"] = check.module_source(
        "native_api_ops", *check.native_api_handlers()
    )
    bazel = {
        "_xlabind_ops": "ffi/ops/_xlabind_ops_module.cc",
        "_xlabind_cuda_ops": "ffi/ops/_xlabind_cuda_ops_module.cc",
        "native_api_ops": "tests/native/native_api_ops_module.cc",
    }
    for name, path in bazel.items():
        assert "%{" not in generated[name] and f"PyInit_{name}" in generated[name]
        assert generated[name] == (REPO / path).read_text(), name


def dry_run(tmp_path, *flags):
    """gpu_check.py --dry-run --quick: stand-ins for every step, each taking a
    fiftieth of its time on the GPU machine, within a fiftieth of the
    deadline (7 s: a step that hangs waits out its cap; passed with both
    cores busy with other work)."""
    return subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--dry-run",
            "--quick",
            "--time-scale",
            "0.02",
            "--out",
            str(tmp_path),
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_kernel_times_are_spans_of_repeated_runs():
    """gpu_benchmark's device times (the GPU issue's point 5): one run between
    two CUDA events counts the launch gaps at both ends, pulling every ratio
    toward 1. The timed program runs the operation REPEATS times between its
    markers, on copies of the arguments XLA cannot merge, and the time reported
    is the span over REPEATS; cupyx's cases likewise. Here on the CPU, with
    events that read the host clock and an operation that sleeps 20 ms."""
    import jax
    import numpy as np

    import xlabind

    bench = load_tool("gpu_benchmark")
    assert bench.REPEATS >= 4

    class Event:  # CuPy's, as far as the benchmark uses it
        def record(self):
            self.seconds = time.perf_counter()

        def synchronize(self):
            pass

    def elapsed_ms(start, stop):
        return (stop.seconds - start.seconds) * 1e3

    bench.jax, bench.jnp = jax, jax.numpy
    bench.cp = types.SimpleNamespace(
        cuda=types.SimpleNamespace(Event=Event, get_elapsed_time=elapsed_ms)
    )
    log, events = [], []

    def marker(*xs, out):
        event = Event()
        event.record()
        events.append(event)
        log.append("marker")
        out[...] = 0

    def run(x):
        time.sleep(0.02)
        log.append("run")
        return x

    token = lambda *xs: jax.ShapeDtypeStruct((), np.int32)
    mark = xlabind.callback(marker, token, in_place=True)
    # A native, side-effect-free operation XLA would merge on equal buffers.
    sine = bench._timed_on_device(jax.numpy.sin, mark)
    compiled = sine.lower(bench._copies((np.ones(4, np.float32),), 8)).compile().as_text()
    assert compiled.count(" sine(") == 8, compiled

    timed = bench._timed_on_device(xlabind.callback(run, lambda x: x), mark)
    times = bench._device_times(
        {"op": timed},
        {"op": (np.ones(4, np.float32),)},
        2,
        events,
        {"cupyx": lambda: time.sleep(0.02)},
        repeats=8,
    )
    # Each timed call: the markers around eight runs (two warm-up calls first).
    assert log == ["marker", *["run"] * 8, "marker"] * 4, log
    # One run's time (>= 20 ms), not eight runs' (>= 160 ms).
    for case in ("op", "cupyx"):
        assert len(times[case]) == 2 and all(0.02 <= t < 0.08 for t in times[case]), times


def test_the_summary_comes_even_when_a_step_runs_out_of_time(tmp_path):
    # The first GPU test file hangs: it is stopped at its cap, the other files
    # (run beside it) are reported, and the benchmark still gets its time.
    done = dry_run(tmp_path, "--overrun", "test_gpu.py")
    assert done.returncode == 1, done.stdout + done.stderr  # the timed-out step failed
    lines = done.stdout.splitlines()
    timed_out = next(line for line in lines if line.startswith("test_gpu.py"))
    assert "timed out after" in timed_out and timed_out.split()[3] == "1"  # one failure
    other = next(line for line in lines if line.startswith("test_gpu_map_coordinates.py"))
    assert other.split()[2:5] == ["2", "0", "1"]  # passed, failed, skipped: reported
    for group in ("host", "graph", "kernels"):
        assert f"== {group} (XLA_FLAGS='(dry run)'" in done.stdout, done.stdout
    log = tmp_path / "logs" / "gpu_tests_test_gpu.log"
    assert "partial output of a step that hangs" in log.read_text()
    summary = json.loads((tmp_path / "gpu_check.json").read_text())
    assert {"build", "gpu_tests", "benchmark"} <= set(summary["step_seconds"])


def test_a_benchmark_group_that_overruns_keeps_the_others_tables(tmp_path):
    done = dry_run(tmp_path, "--overrun", "benchmark:graph")
    assert "== graph" in done.stdout and "failed: timed out after" in done.stdout
    for group in ("host", "kernels"):  # before and after it: printed, and in the JSON
        assert f"== {group} (XLA_FLAGS='(dry run)'" in done.stdout, done.stdout
    reports = {r["group"]: r for r in json.loads((tmp_path / "gpu_benchmark.json").read_text())}
    assert "rows" in reports["host"] and "rows" in reports["kernels"]
    assert "timed out" in reports["graph"]["error"]


@pytest.mark.parametrize("wheel", [[], ["--wheel", "xlabind.whl"]])
def test_the_quick_run_fits_six_minutes_on_the_gpu_machine(wheel):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--plan", "--quick", *wheel],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    total = next(line for line in done.stdout.splitlines() if line.startswith("total"))
    assert "fits 360 s" in total and int(total.split()[1]) <= 360
    steps = [line.split()[0] for line in done.stdout.splitlines()[1:-1]]
    assert steps[0] == "build" and steps[-1] == "benchmark"
    assert ("gpu_tests_wheel" if wheel else "gpu_tests") in steps


def test_a_plan_over_six_minutes_is_refused(tmp_path):
    timings = tmp_path / "gpu_check.json"
    timings.write_text(json.dumps({"step_seconds": {"build": 300.0}}))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--plan", "--quick", "--timings", str(timings)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "OVER 360 s" in done.stdout, done.stdout


def test_build_tests_run_the_gpu_files_on_both_within_the_deadline_given():
    """--build-tests (a change's first device run): the GPU files on the build,
    then on the wheel; planned against --deadline, refused past it."""

    def plan(deadline):
        return subprocess.run(
            [sys.executable, str(SCRIPT), "--plan", "--quick", "--wheel", "x.whl"]
            + ["--build-tests", "--deadline", str(deadline)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = plan(450)
    assert done.returncode == 0, done.stdout + done.stderr
    steps = [line.split()[0] for line in done.stdout.splitlines()[1:-1]]
    assert steps.index("gpu_tests") < steps.index("wheel") < steps.index("gpu_tests_wheel")
    assert "fits 450 s" in done.stdout
    refused = plan(300)
    assert refused.returncode == 1 and "OVER 300 s" in refused.stdout, refused.stdout


def _probe_wheel(folder: pathlib.Path) -> pathlib.Path:
    """A pure-Python wheel of one module that says where it was imported from."""
    wheel = folder / "gpu_check_probe-1.0-py3-none-any.whl"
    info = "gpu_check_probe-1.0.dist-info"
    files = {
        "gpu_check_probe/__init__.py": "WHERE = __file__\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: gpu-check-probe\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


@pytest.mark.parametrize("outer_has_pip", [True, False])
def test_the_wheel_venv_made_inside_a_venv_sees_that_venvs_packages(tmp_path, outer_has_pip):
    # The GPU machine's python3 is itself a venv, whose packages (jax, CuPy,
    # PyTorch) a `venv --system-site-packages` made from it does not see. Here
    # the outer venv's packages are NumPy and pytest, by a .pth of its own.
    import importlib.util

    outer = tmp_path / "outer"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(outer)], check=True)
    outer_python = outer / "bin" / "python"
    outer_site = pathlib.Path(
        subprocess.check_output(
            [str(outer_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    pip_dir = pathlib.Path(importlib.util.find_spec("pip").origin).parent.parent
    numpy_dir = pathlib.Path(importlib.util.find_spec("numpy").origin).parent.parent
    dirs = [numpy_dir, pathlib.Path(importlib.util.find_spec("pytest").origin).parent.parent]
    if outer_has_pip:
        dirs.append(pip_dir)
    elif pip_dir == numpy_dir:
        pytest.skip("pip and NumPy are in one folder here: cannot hide pip alone")
    (outer_site / "outer_packages.pth").write_text("\n".join(map(str, dirs)) + "\n")
    wheel = _probe_wheel(tmp_path)
    inner = tmp_path / "inner"
    made = subprocess.run(
        [
            str(outer_python),
            "-c",
            "import pathlib, sys; sys.path.insert(0, sys.argv[1]); import gpu_check; "
            "python, how = gpu_check.wheel_environment(pathlib.Path(sys.argv[2]), "
            "pathlib.Path(sys.argv[3])); print(python); print(how)",
            str(SCRIPT.resolve().parent),
            str(wheel),
            str(inner),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": os.environ["PATH"]},
    )
    assert made.returncode == 0, made.stderr
    python, how = made.stdout.strip().splitlines()[-2:]
    assert how.startswith("pip --target" if outer_has_pip else "unpacked"), how
    looked = subprocess.run(
        [
            python,
            "-c",
            "import sys, numpy, gpu_check_probe; print(sys.prefix); "
            "print(gpu_check_probe.WHERE); print(numpy.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ["PATH"]},
    )
    assert looked.returncode == 0, looked.stderr  # NumPy: seen through the outer venv
    prefix, probe, numpy_file = looked.stdout.strip().splitlines()
    assert pathlib.Path(prefix) == inner
    assert pathlib.Path(probe).is_relative_to(inner)  # the wheel's, in the inner venv
    assert pathlib.Path(numpy_file).is_relative_to(numpy_dir)
