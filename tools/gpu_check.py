#!/usr/bin/env python3
"""The GPU check, for the device machine (no Bazel, no network there).

    python3 tools/gpu_check.py --plan --quick [--wheel W]   # the steps and their times
    python3 tools/gpu_check.py --quick --wheel dist/xlabind-...-cp312-...whl
                                             # build, GPU files on the wheel, benchmark:
                                             # about 4 minutes there (2026-12-04)
    python3 tools/gpu_check.py --quick       # build, GPU files on the build, benchmark
    python3 tools/gpu_check.py               # and the CPU files, GPU files on both
    python3 tools/gpu_check.py --build-only  # build the extension and import it (any machine)
    python3 tools/gpu_check.py --dry-run --quick --time-scale 0.1 [--overrun STEP]
                                             # every step a stand-in (any machine)

1. Builds xlabind's extension modules from this repository's sources with
   this machine's compiler ($CXX, else g++; nvcc for the CUDA kernels) against
   this interpreter's headers and the installed jax (XLA FFI headers), NumPy
   and nanobind: no Bazel. The package lands in <out>/package/xlabind.
2. Runs the GPU test files (GPU_TESTS) on the GPU, all at once (--gpu-jobs;
   XLA's preallocation capped, so CuPy, PyTorch and the other files get
   memory too). With --wheel FILE (a wheel built with Bazel: the artifact
   users install), installs it (no dependencies, no index) into a venv that
   sees every package this interpreter sees (jax, its CUDA plugin, CuPy,
   PyTorch: this interpreter may itself be a venv's), reports which libcudart
   its CUDA ops loaded (a CUDA toolkit's copy is a failure: users have none),
   and runs the GPU files against it; with --quick, on the wheel only.
   Without --quick, every other test file too, on the CPU.
3. Runs tools/gpu_benchmark.py, its groups in priority order within what is
   left, each group's table printed and its JSON written as it ends.
4. Always prints one summary and the benchmark's tables, whatever failed or
   ran out of time; the logs (partial ones too) and gpu_check.json (with each
   step's seconds, for --timings) go to <out> ($OUT when set).

One deadline bounds the run (--quick: QUICK_LIMIT, so that a second run fits
the device machine's 15 minutes); each step gets what is left of it, at most
its planned time and half again, less what the steps after it need at the
least; a step that runs out of time is stopped with its process group (the
benchmark's workers too), its output so far kept, and reported as failed;
one that fails does not stop the next; steps with no time left are reported
as not run. Skipped tests are reported, not failed. STEP_SECONDS are the
planned times.

Exits non-zero when the build fails, a test fails or times out, or the GPU
tests did not run on a GPU (none passed), unless --build-only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
# Test files that need what only Bazel provides (the wheel builder, ducc0, the
# examples package, the workspace's Starlark, the fake CUDA driver); the CPU suite under
# `bazel test //...` covers them.
BAZEL_ONLY = {
    "test_wheel.py",
    "test_wheel_installed.py",
    "test_examples.py",
    "test_bazel_files.py",
    "test_docs.py",
    "test_gpu_check_build.py",
    "test_doc_examples.py",
    "test_doc_sources.py",
    "test_readme.py",
    "test_fake_driver.py",
}
# Test files that need a GPU: skipped elsewhere, run on the GPU here.
GPU_TESTS = {
    "test_gpu.py",
    "test_gpu_graphs.py",
    "test_gpu_map_coordinates.py",
    "test_gpu_native_api.py",
}


def native_op_modules() -> dict:
    """{module: {platform: {target: handler}}} from ffi/ops/native_ops.bzl (a dict literal)."""
    namespace: dict = {}
    exec((REPO / "ffi" / "ops" / "native_ops.bzl").read_text(), namespace)
    return namespace["NATIVE_OP_MODULES"]


def _handler_tables(path: pathlib.Path) -> dict:
    """The names a .bzl file of handler tables defines: literals and
    xlabind_handler calls (ffi/extension_module.bzl's `handler`), its load()
    of xlabind_handler a no-op here."""
    namespace: dict = {
        "load": lambda *_: None,
        "xlabind_handler": _starlark(REPO / "ffi" / "extension_module.bzl")["handler"],
    }
    exec(path.read_text(), namespace)
    return namespace


def example_handlers() -> tuple[dict, dict]:
    """(handlers, state types) of examples/native_op's module, from the tables
    its BUILD.bazel loads."""
    tables = _handler_tables(REPO / "examples" / "native_op" / "example_handlers.bzl")
    return tables["EXAMPLE_HANDLERS"], tables["EXAMPLE_STATE_TYPES"]


def native_api_handlers() -> tuple[dict, dict]:
    """(handlers, state types) of tests/native/native_api_handlers.cc's module,
    which tests/native/test_native_api.py imports, from
    tests/native/native_api_module.bzl."""
    tables = _handler_tables(REPO / "tests" / "native" / "native_api_module.bzl")
    return tables["NATIVE_API_HANDLERS"], tables["NATIVE_API_STATE_TYPES"]


def _starlark(path: pathlib.Path) -> dict:
    """The names a .bzl file written in the Python part of Starlark defines."""

    def fail(message):
        raise ValueError(message)

    namespace: dict = {"fail": fail}
    exec(path.read_text(), namespace)
    return namespace


def module_source(module: str, handlers: dict, state_types: dict | None = None) -> str:
    """The extension module's C++ source, as xlabind_extension (ffi/defs.bzl)
    makes it: ffi/extension_module.bzl's one generator, executed here."""
    generator = _starlark(REPO / "ffi" / "extension_module.bzl")
    substitutions = generator["extension_module_substitutions"](
        module,
        generator["module_handlers"](module, handlers),
        generator["module_state_types"](module, state_types or {}),
    )
    text = (REPO / "ffi" / "extension_module.cc.tmpl").read_text()
    for placeholder, value in substitutions.items():
        text = text.replace(placeholder, value)
    return text


def cuda_toolkit() -> pathlib.Path | None:
    """A CUDA toolkit with nvcc and the static runtime: $CUDA_HOME, /usr/local/cuda,
    or the one around the nvcc on PATH."""
    candidates = [os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    if shutil.which("nvcc"):
        candidates.append(str(pathlib.Path(shutil.which("nvcc")).resolve().parent.parent))
    for candidate in filter(None, candidates):
        root = pathlib.Path(candidate)
        if (root / "bin" / "nvcc").exists() and (root / "lib64" / "libcudart_static.a").exists():
            return root
    return None


def build(out: pathlib.Path, jobs: int, fast: bool = False) -> pathlib.Path:
    """Compiles xlabind's three extension modules into <out>/package/xlabind, as
    ffi/BUILD.bazel does; returns <out>/package. The CUDA ops need nvcc: without
    one that module is left out, and the package says so when they are used.
    `fast`: unoptimized, and PTX only (no ptxas): proves that everything
    compiles and links, in a fraction of the time, for tests/gpu/test_gpu_check_build.py."""
    import jax
    import nanobind
    import numpy

    cxx = os.environ.get("CXX", "g++")
    nanobind_src = pathlib.Path(nanobind.source_dir())
    # The helpers' public include path, xlabind/native/*.h.
    public = REPO / "ffi" / "native" / "include"
    includes = [
        REPO,
        # The callback handlers' public headers, xlabind/{cpu,cuda}/*.h.
        REPO / "ffi" / "cpu" / "include",
        REPO / "ffi" / "cuda" / "include",
        sysconfig.get_paths()["include"],
        numpy.get_include(),
        jax.ffi.include_dir(),
        nanobind.include_dir(),
        nanobind_src.parent / "ext" / "robin_map" / "include",
    ]
    # Other projects' headers as system headers: their warnings are not ours.
    flags = [
        "-std=c++17",
        "-O0" if fast else "-O2",
        "-fPIC",
        "-fvisibility=hidden",
        "-fno-strict-aliasing",
        f"-I{REPO}",
        f"-I{public}",
        *(f"-isystem{path}" for path in includes[1:]),
    ]
    toolkit = cuda_toolkit()
    objects_dir = out / "objects"
    objects_dir.mkdir(parents=True, exist_ok=True)
    (out / "generated").mkdir(exist_ok=True)

    def compile_one(source: pathlib.Path) -> pathlib.Path:
        # ffi/cpu/x.cc and ffi/cuda/x.cc share file names: keep their folders apart.
        relative = source.relative_to(REPO) if source.is_relative_to(REPO) else source.name
        obj = objects_dir / (str(relative).replace(os.sep, "_") + ".o")
        if source.suffix == ".cu":
            # sm_90 (the H200) and PTX for anything newer; g++ is nvcc's host compiler.
            # As Bazel's release build: nvcc's warnings and register spills fail.
            sass = (
                []
                if fast
                else [
                    "-gencode",
                    "arch=compute_90,code=sm_90",
                    "-Xptxas",
                    "-warn-spills",
                    "-Xptxas",
                    "-Werror",
                ]
            )
            command = [
                str(toolkit / "bin" / "nvcc"),
                "-ccbin",
                cxx,
                "-std=c++17",
                "-O0" if fast else "-O3",
                "-Werror",
                "all-warnings",
                "-Xcompiler",
                "-fPIC",
                "-Xcompiler",
                "-fvisibility=hidden",
                *sass,
                "-gencode",
                "arch=compute_90,code=compute_90",
                f"-I{REPO}",
                f"-I{public}",
                f"-I{source.parent}",
                "-isystem",
                str(jax.ffi.include_dir()),
                "-c",
                str(source),
                "-o",
                str(obj),
            ]
        else:
            command = [cxx, *flags, f"-I{source.parent}", "-c", str(source), "-o", str(obj)]
        subprocess.run(command, check=True)
        return obj

    ops = sorted(op.parent for op in REPO.glob("ffi/ops/*/cpu_handlers.h"))
    modules = {
        "_xlabind": (
            [
                *sorted(REPO.glob("ffi/common/*.cc")),
                *sorted(REPO.glob("ffi/cpu/*.cc")),
                *sorted(REPO.glob("ffi/cuda/*.cc")),
                REPO / "ffi" / "module.cc",
                nanobind_src / "nb_combined.cpp",
            ],
            "extension_exports.lds",
            ["-ldl"],
        ),
    }
    generated = {}
    for module, handlers in native_op_modules().items():
        source = out / "generated" / f"{module}_module.cc"
        source.write_text(module_source(module, handlers))
        generated[module] = source
    modules["_xlabind_ops"] = (
        [generated["_xlabind_ops"]]
        + sorted(source for op in ops for source in op.glob("cpu_*.cc")),
        "module_exports.lds",
        [],
    )
    if toolkit is not None:
        # The static CUDA runtime: the module needs no libcudart at run time.
        cudart = [f"-L{toolkit / 'lib64'}", "-lcudart_static", "-lrt", "-lpthread", "-ldl"]
        modules["_xlabind_cuda_ops"] = (
            [generated["_xlabind_cuda_ops"]]
            + [op / "cuda_handlers.cc" for op in ops]
            + [op / "cuda_kernels.cu" for op in ops],
            "module_exports.lds",
            cudart,
        )
    # The test module of tests/native/test_native_api.py (C++ only: its CUDA handlers
    # launch nothing), beside the package as Bazel puts it beside the tests.
    source = out / "generated" / "native_api_ops_module.cc"
    source.write_text(module_source("native_api_ops", *native_api_handlers()))
    modules["native_api_ops"] = (
        [
            source,
            REPO / "tests" / "native" / "native_api_handlers.cc",
            REPO / "tests" / "native" / "cuda_bodies_handlers.cc",
        ],
        "module_exports.lds",
        [],
    )
    example = REPO / "examples" / "native_op"
    if toolkit is not None and (example / "example_handlers.bzl").exists():
        # examples/native_op's module (a user's native ops: state, scratch,
        # command buffers on the GPU), for tests/gpu/test_gpu_native_api.py.
        # Built beside the package, not in it: it is a module of its own.
        # (Bazel's copy of this checkout has no examples/native_op, another
        # workspace.)
        source = out / "generated" / "example_ops_module.cc"
        source.write_text(module_source("example_ops", *example_handlers()))
        modules["example_ops"] = (
            [source, *sorted(example.glob("*.cc")), *sorted(example.glob("*.cu"))],
            "module_exports.lds",
            cudart,
        )

    # Every module's sources in one queue: one module's slow file (nvcc's
    # kernels, the map_coordinates handlers) does not hold back the others'.
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        pending = {
            name: [pool.submit(compile_one, source) for source in sources]
            for name, (sources, _, _) in modules.items()
        }
        objects = {name: [job.result() for job in jobs_of] for name, jobs_of in pending.items()}
    package = out / "package"
    target = package / "xlabind"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(
        REPO / "python" / "xlabind", target, ignore=shutil.ignore_patterns("*.so", "__pycache__")
    )
    for name, (_, exports, libraries) in modules.items():
        folder = package if name in ("example_ops", "native_api_ops") else target
        module = folder / (name + sysconfig.get_config_var("EXT_SUFFIX"))
        subprocess.run(
            [
                cxx,
                "-shared",
                *map(str, objects[name]),
                "-o",
                str(module),
                f"-Wl,--version-script={REPO / 'ffi' / exports}",
                *libraries,
            ],
            check=True,
        )
    return package


def environment(package: pathlib.Path, platforms: str | None) -> dict:
    env = dict(os.environ)
    # The built package, the tests' shared helpers, and the native API's test
    # module (built beside the package).
    env["PYTHONPATH"] = os.pathsep.join(
        [
            str(package),
            str(REPO / "tests" / "support"),
            str(REPO / "python"),
            env.get("PYTHONPATH", ""),
        ]
    )
    # The built package must win over the source tree: the source tree has no extension.
    env["PYTHONPATH"] = env["PYTHONPATH"].replace(str(REPO / "python") + os.pathsep, "", 1)
    if platforms is None:
        env.pop("JAX_PLATFORMS", None)
    else:
        env["JAX_PLATFORMS"] = platforms
    return env


# What the installed wheel's CUDA ops loaded, asked before jax's CUDA plugin
# can load a libcudart of its own.
WHEEL_PROBE = """
import json, os, xlabind, xlabind.testing
xlabind.testing.load_compiled_module("_xlabind_cuda_ops")  # raises when it cannot
maps = open("/proc/self/maps").read().splitlines()
cudart = sorted({line.split()[-1] for line in maps if "libcudart" in line})
print(json.dumps({"xlabind": xlabind.__file__, "cudart": cudart,
                  "cudart_real": [os.path.realpath(p) for p in cudart]}))
"""


def visible_site_dirs() -> list[str]:
    """Where this interpreter finds installed packages: its own site-packages
    (a venv's, when it runs in one) and those beneath it."""
    paths = sysconfig.get_paths()
    dirs = [*site.getsitepackages(), paths.get("purelib", ""), paths.get("platlib", "")]
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return list(dict.fromkeys(d for d in dirs if os.path.isdir(d)))


def wheel_environment(wheel: pathlib.Path, venv: pathlib.Path) -> tuple[pathlib.Path, str]:
    """A fresh venv at `venv` holding `wheel` (no dependencies) and seeing every
    package this interpreter sees; returns its python and how the wheel went in.

    `venv --system-site-packages` is not enough: made from inside a venv (the
    GPU machine's python3 is /opt/torch/.venv's), it sees the base
    interpreter's packages, not that venv's jax, CuPy and PyTorch. A .pth file
    adds this interpreter's site directories after the venv's own, so the
    wheel's xlabind comes first (a .pth runs after the folder it is in was
    added). pip is this interpreter's (the venv gets none:
    ensurepip may be missing); where it has none, the wheel is unpacked."""
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    venv_site = pathlib.Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    # addsitedir, not bare paths: the .pth files in those folders count too
    # (editable installs, a venv's own .pth), as they do for this interpreter.
    (venv_site / "zz_gpu_check_outer_site.pth").write_text(
        f"import site; list(map(site.addsitedir, {visible_site_dirs()!r}))\n"
    )
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            "--target",
            str(venv_site),
            str(wheel),
        ],
        capture_output=True,
        text=True,
    )
    if pip.returncode == 0:
        return python, "pip --target"
    import zipfile

    with zipfile.ZipFile(wheel) as archive:  # a wheel is its files, laid out for site-packages
        archive.extractall(venv_site)
    for module in venv_site.glob("**/*.so"):
        module.chmod(0o755)
    return python, f"unpacked (pip: {pip.stderr.strip().splitlines()[-1:] or pip.returncode})"


def install_wheel(wheel: pathlib.Path, out: pathlib.Path, package: pathlib.Path) -> dict:
    """Installs `wheel` into a fresh venv under `out` that sees this machine's
    packages; returns {"python", "env", facts...} for running tests on it."""
    python, how = wheel_environment(wheel, out / "wheel-venv")
    venv_site = pathlib.Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    facts: dict = {"wheel": wheel.name, "site": str(venv_site), "installed": how}
    # `pip install xlabind[cuda13]` puts nvidia-cuda-runtime beside xlabind,
    # where the modules' RUNPATH ($ORIGIN/../nvidia/cu13/lib) looks. In this
    # venv the runtime is in the system's site-packages (jax's CUDA plugin
    # brought it): link it in where the extra would have installed it.
    runtime = venv_site / "nvidia" / "cu13" / "lib"
    facts["cuda_runtime"] = "installed beside xlabind"
    if not runtime.exists():
        facts["cuda_runtime"] = "none found for the RUNPATH"
        for base in map(pathlib.Path, {*site.getsitepackages(), sysconfig.get_paths()["purelib"]}):
            candidate = base / "nvidia" / "cu13" / "lib"
            if (candidate / "libcudart.so.13").exists():
                runtime.parent.mkdir(parents=True, exist_ok=True)
                runtime.symlink_to(candidate)
                facts["cuda_runtime"] = f"linked from {candidate} (the extra's package)"
                break
    # The tests' own modules, built beside gpu_check's package, without it.
    extras = out / "wheel-test-modules"
    extras.mkdir(exist_ok=True)
    for module in package.glob("*_ops*.so"):
        link = extras / module.name
        if not link.exists():
            link.symlink_to(module)
    env = dict(os.environ)
    env.pop("JAX_PLATFORMS", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "tests" / "support"), str(extras), env.get("PYTHONPATH", "")]
    )
    env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = GPU_MEMORY_FRACTION
    probe = subprocess.run(
        [str(python), "-c", WHEEL_PROBE], env=env, capture_output=True, text=True, cwd=out
    )
    if probe.returncode != 0:
        raise RuntimeError("the installed wheel's CUDA ops do not load:\n" + probe.stderr[-3000:])
    facts.update(json.loads(probe.stdout.strip().splitlines()[-1]))
    if not pathlib.Path(facts["xlabind"]).is_relative_to(venv_site):
        raise RuntimeError(f"the tests would import {facts['xlabind']}, not the installed wheel")
    wheel_runtime = [p for p in facts["cudart_real"] if "/nvidia/" in p]
    if not facts["cudart"] or len(wheel_runtime) != len(facts["cudart_real"]):
        raise RuntimeError(
            f"the wheel's CUDA ops loaded libcudart from {facts['cudart_real']}, "
            f"not from an nvidia-cuda-runtime package (the cuda13 extra's, "
            f"through the RUNPATH): users without a CUDA toolkit would have "
            f"none"
        )
    return {"python": str(python), "env": env, **facts}


def smoke_test(package: pathlib.Path) -> str:
    """Imports the built package and runs a callback and a native op on the CPU."""
    code = (
        "import jax, jax.numpy as jnp, numpy as np, xlabind, xlabind.testing\n"
        "op = xlabind.callback(lambda x: x * 2, lambda x: x)\n"
        "assert float(jax.jit(op)(jnp.ones(()))) == 2.0\n"
        "from xlabind.ops import map_coordinates\n"
        "grid = jnp.arange(4.0)\n"
        "assert float(map_coordinates(grid, [jnp.asarray([1.5])], order=1)[0]) == 1.5\n"
        "print(xlabind.__file__, sorted(xlabind.testing.registered_targets()),\n"
        "      'CUDA ops:', 'missing' if xlabind.testing.unavailable_targets() else 'built')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=environment(package, "cpu"),
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if done.returncode != 0:
        raise RuntimeError("the built package does not work:\n" + done.stderr[-3000:])
    return done.stdout.strip()


COUNTS = re.compile(r"(\d+) (passed|failed|skipped|error|errors)")

# The part of the GPU each GPU test file's jax may preallocate: the rest is
# CuPy's and PyTorch's (and the other files', when they run at once).
GPU_MEMORY_FRACTION = "0.4"
PARALLEL_GPU_MEMORY_FRACTION = "0.15"
# Seconds reserved at the end of the run for the summary.
SUMMARY_RESERVE = 10

# What each step takes on the GPU machine (one H200, 16 cores): the plan's
# durations, and --dry-run's. Measured there on 2026-12-04 (jax 0.11.2; three
# runs' gpu_check.json, rounded up): the build 66-83 s; the GPU files side by
# side, on a release wheel (SASS for sm_90) or the build. A wheel built without
# --config=release carries PTX only, and the driver compiles it at the first
# CUDA op: test_gpu_map_coordinates.py then took 77-98 s. The CPU files are
# unmeasured there. --timings FILE plans with one run's own times instead.
STEP_SECONDS = {
    "build": 85.0,
    "wheel": 5.0,
    "cpu_tests": 240.0,
    "test_gpu.py": 35.0,
    "test_gpu_graphs.py": 12.0,
    "test_gpu_map_coordinates.py": 50.0,
    "test_gpu_native_api.py": 6.0,
}
#: --quick must fit this, leaving room in the GPU machine's 15 minutes for a
#: second run.
QUICK_LIMIT = 360.0
#: The benchmark's groups with --quick (the torch group only in a full run).
QUICK_GROUPS = ("host", "graph", "kernels")


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def run_step(name: str, command: list[str], env: dict, timeout: float, logs: pathlib.Path) -> dict:
    """Runs one step, time-boxed, in a process group of its own: when it runs out
    of time the whole group is stopped (a benchmark's workers too), and its
    output so far is in logs/<name>.log."""
    import signal

    start = time.perf_counter()
    log = logs / f"{name}.log"
    with open(log, "w") as sink:
        process = subprocess.Popen(
            command,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
        try:
            returncode, timed_out = process.wait(timeout=max(1.0, timeout)), False
        except subprocess.TimeoutExpired:
            returncode, timed_out = None, True
            for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 30)):
                try:
                    os.killpg(process.pid, sig)
                    process.wait(timeout=grace)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
    return {
        "name": name,
        "seconds": round(time.perf_counter() - start, 1),
        "returncode": returncode,
        "timed_out": timed_out,
        "output": log.read_text(errors="replace"),
    }


def test_result(step: dict, path: pathlib.Path, platforms: str | None) -> dict:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    lines = [line for line in step["output"].splitlines() if COUNTS.search(line)]
    for number, kind in COUNTS.findall(lines[-1] if lines else ""):
        counts["failed" if kind.startswith("error") else kind] += int(number)
    note = ""
    if step["timed_out"]:
        counts["failed"] += 1
        note = f"timed out after {step['seconds']} s"
    elif step["returncode"] not in (0, 5) and counts["failed"] == 0:
        counts["failed"] = 1  # it crashed before pytest could count
        note = f"exit status {step['returncode']}"
    return {
        "file": path.name,
        "platform": platforms or "gpu",
        "seconds": step["seconds"],
        "note": note,
        **counts,
    }


class Deadline:
    """The run's one deadline: each step gets what is left of it, less what the
    steps after it need at the least, and at most its own cap."""

    def __init__(self, seconds: float, step_cap: float | None = None):
        self.end = time.perf_counter() + seconds
        self.step_cap = step_cap

    def left(self, cap: float, later: float = 0.0) -> float:
        if self.step_cap is not None:
            cap = min(cap, self.step_cap)
        return min(cap, self.end - time.perf_counter() - SUMMARY_RESERVE - later)


def pytest_command(path: pathlib.Path, python: str = sys.executable) -> list[str]:
    return [python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(path)]


def _benchmark_module():
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import gpu_benchmark
    finally:
        sys.path.pop(0)
    return gpu_benchmark


def plan(
    quick: bool,
    wheel: bool,
    benchmark: bool,
    timings: dict,
    gpu_jobs: int,
    build_tests: bool = False,
) -> list[tuple[str, float]]:
    """The steps in the order they run, each with what it takes on the GPU
    machine. With --quick and --wheel the GPU files run on the wheel only
    (the artifact users install; the build's modules are the same sources),
    unless `build_tests` (--build-tests) asks for both."""
    files = sorted(GPU_TESTS)
    per_file = [timings[f] for f in files]
    gpu = max(per_file) if gpu_jobs >= len(files) else sum(per_file)
    steps = [("build", timings["build"])]
    if not (quick and wheel) or build_tests:
        steps.append(("gpu_tests", gpu))
    if wheel:
        steps += [("wheel", timings["wheel"]), ("gpu_tests_wheel", gpu)]
    if not quick:
        steps.append(("cpu_tests", timings["cpu_tests"]))
    if benchmark:
        bench = _benchmark_module()
        groups, boxes = (
            (QUICK_GROUPS, bench.QUICK_SECONDS) if quick else (bench.GROUPS, bench.FULL_SECONDS)
        )
        steps.append(("benchmark", sum(boxes[g] for g in groups)))
    return steps


def print_plan(steps: list[tuple[str, float]], limit: float | None) -> float:
    total = 0.0
    print(f"{'step':20} {'seconds':>8} {'by then':>8}   (on the GPU machine)")
    for name, seconds in steps:
        total += seconds
        print(f"{name:20} {seconds:8.0f} {total:8.0f}")
    fits = (
        ""
        if limit is None
        else (
            f"  fits {limit:.0f} s" if total + SUMMARY_RESERVE <= limit else f"  OVER {limit:.0f} s"
        )
    )
    print(f"{'total':20} {total + SUMMARY_RESERVE:8.0f}{fits}  (with the summary)", flush=True)
    return total + SUMMARY_RESERVE


def dry_run_command(seconds: float, hang: bool = False) -> list[str]:
    """--dry-run's stand-in for a step: its output after its duration, or,
    `hang`ing, partial output and no end."""
    if hang:
        code = (
            "import time; print('partial output of a step that hangs', flush=True); "
            "time.sleep(3600)"
        )
    else:
        code = (
            f"import time; time.sleep({seconds}); print('..s'); "
            "print('2 passed, 1 skipped in 0.1s')"
        )
    return [sys.executable, "-c", code]


def print_summary(summary: dict) -> None:
    results = summary.get("tests", [])
    print(
        f"\n{'test file':36} {'where':6} {'passed':>7} {'failed':>7} {'skipped':>8} "
        f"{'seconds':>8}  note"
    )
    for r in results:
        print(
            f"{r['file']:36} {r['platform']:6} {r['passed']:>7} {r['failed']:>7} "
            f"{r['skipped']:>8} {r['seconds']:>8}  {r['note']}"
        )
    totals = {k: sum(r[k] for r in results) for k in ("passed", "failed", "skipped")}
    print(f"{'total':36} {'':6} {totals['passed']:>7} {totals['failed']:>7} {totals['skipped']:>8}")
    for line in summary.get("not_run", []):
        print(f"not run: {line}")
    for line in summary.get("errors", []):
        print(f"failed: {line}")
    print("\nbenchmark:")
    print(summary.get("benchmark") or "(none: see logs/gpu_benchmark.log)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        default=os.environ.get("OUT"),
        help="where the build, logs and summary go (default: a new folder under the temp dir)",
    )
    parser.add_argument(
        "--build-only", action="store_true", help="build and import the extension, then stop"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="build, GPU tests and benchmark only (no CPU suite): fits "
        f"{QUICK_LIMIT:.0f} s on the GPU machine",
    )
    parser.add_argument("--no-benchmark", action="store_true")
    parser.add_argument(
        "--deadline",
        type=float,
        default=None,
        help=f"seconds for the whole run (default {QUICK_LIMIT:.0f} with --quick, else 570)",
    )
    parser.add_argument(
        "--step-seconds",
        type=float,
        default=None,
        help="at most this long for any one step (default: each step's own cap)",
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print the steps with what each takes on the GPU machine, and stop",
    )
    parser.add_argument(
        "--timings",
        type=pathlib.Path,
        default=None,
        help="plan with the step times a run recorded (its gpu_check.json)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="stand-ins for every step, each taking its planned time times "
        "--time-scale: this script's control flow and time boxes, tested "
        "on any machine",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="with --dry-run: scales every duration and the deadline",
    )
    parser.add_argument(
        "--overrun",
        default=None,
        help="with --dry-run: the step that never ends (a GPU test file, or benchmark:GROUP)",
    )
    parser.add_argument(
        "--wheel",
        type=pathlib.Path,
        default=None,
        help="also install this wheel in a venv and run the GPU test files "
        "against it (the artifact users install)",
    )
    parser.add_argument(
        "--build-tests",
        action="store_true",
        help="with --quick --wheel: the GPU files on the build too (a change's "
        "first device run; plans close to the quick limit, so give --deadline)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--gpu-jobs",
        type=int,
        default=len(GPU_TESTS),
        help="GPU test files at a time (default: all at once)",
    )
    parser.add_argument(
        "--fast-build",
        action="store_true",
        help="unoptimized, PTX only: checks that everything builds (not for "
        "measuring or a GPU run)",
    )
    args = parser.parse_args(argv)
    timings = dict(STEP_SECONDS)
    if args.timings:
        timings.update(json.loads(args.timings.read_text()).get("step_seconds", {}))
    steps = plan(
        args.quick,
        args.wheel is not None,
        not args.no_benchmark,
        timings,
        args.gpu_jobs,
        args.build_tests,
    )
    limit = args.deadline or (QUICK_LIMIT if args.quick else 570.0)
    planned = print_plan(steps, limit if args.quick else None)
    if args.plan:
        return 0 if not args.quick or planned <= limit else 1
    scale = args.time_scale if args.dry_run else 1.0
    deadline = Deadline(
        limit * scale + (SUMMARY_RESERVE if args.dry_run else 0),
        args.step_seconds,
    )
    # What a later step keeps at the least: the benchmark its first two
    # groups (the host cost and the captured copy), the others 30 s.
    floors = {name: min(seconds, 30.0) * scale for name, seconds in steps}
    if "benchmark" in floors:
        bench = _benchmark_module()
        first = (QUICK_GROUPS if args.quick else bench.GROUPS)[:2]
        floors["benchmark"] = (
            sum((bench.QUICK_SECONDS if args.quick else bench.FULL_SECONDS)[g] for g in first)
            * scale
        )

    def budget(step: str, cap: float) -> float:
        """What `step` may take: at most `cap` (its planned time and half again),
        and no more than leaves the later steps their floors."""
        names = [name for name, _ in steps]
        later = sum(floors[n] for n in names[names.index(step) + 1 :]) if step in names else 0
        return deadline.left(cap * scale, later)

    # Made only when no folder was named: a default made while parsing leaked
    # one folder a run even with --out.
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="xlabind-gpu-check-")).resolve()
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    summary: dict = {
        "python": sys.version.split()[0],
        "plan": steps,
        "tests": [],
        "not_run": [],
        "errors": [],
        "step_seconds": {},
    }
    failed = False
    package = None
    files = sorted((REPO / "tests").glob("*/test_*.py"))
    gpu_files = [f for f in files if f.name in GPU_TESTS]

    def gpu_tests(label: str, python: str, env: dict) -> None:
        """The GPU files, `args.gpu_jobs` at a time, each time-boxed."""
        cap = 1.5 * max(timings[f.name] for f in gpu_files)
        seconds = budget(label, cap)
        if seconds <= 0:
            summary["not_run"] += [f"{f.name} ({label}): no time left" for f in gpu_files]
            return
        env = dict(env)
        if args.gpu_jobs > 1:
            env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = PARALLEL_GPU_MEMORY_FRACTION
        where = "wheel" if label.endswith("wheel") else None

        def one(path):
            command = (
                dry_run_command(timings[path.name] * scale, hang=args.overrun == path.name)
                if args.dry_run
                else pytest_command(path, python)
            )
            return test_result(
                run_step(f"{label}_{path.stem}", command, env, seconds, logs), path, where
            )

        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max(1, args.gpu_jobs)) as pool:
            for result in pool.map(one, gpu_files):
                summary["tests"].append(result)
                print(
                    f"[{label}] {result['file']}: {result['passed']} passed, "
                    f"{result['failed']} failed, {result['skipped']} skipped "
                    f"{result['note']}",
                    flush=True,
                )
        summary["step_seconds"][label] = round(time.perf_counter() - start, 1)
        for result in summary["tests"][-len(gpu_files) :]:
            summary["step_seconds"].setdefault(result["file"], result["seconds"])

    def record_error(step: str, error: Exception) -> None:
        nonlocal failed
        summary["errors"].append(f"{step}: {type(error).__name__}: {error}")
        print(f"gpu_check: {step} failed: {type(error).__name__}: {error}", flush=True)
        failed = True

    try:
        # 1. The build (and its smoke test): what the GPU files and the
        # benchmark run on, unless only the wheel's GPU files run.
        start = time.perf_counter()
        try:
            if args.dry_run:
                time.sleep(timings["build"] * scale)
                package = out / "package"
                summary["import"] = "dry run: nothing built"
            else:
                package = build(out / "build", args.jobs, fast=args.fast_build)
                summary["import"] = smoke_test(package)
            summary["step_seconds"]["build"] = round(time.perf_counter() - start, 1)
            print(
                f"built {package} in {summary['step_seconds']['build']} s: {summary['import']}",
                flush=True,
            )
        except Exception as error:
            record_error("build", error)
            package = None
        if args.build_only:
            return 1 if package is None else 0

        if "gpu_tests" in dict(steps):
            if package is None:
                summary["not_run"].append("the GPU files on the build: the build failed")
            else:
                gpu_env = environment(package, None)
                gpu_env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = GPU_MEMORY_FRACTION
                gpu_tests("gpu_tests", sys.executable, gpu_env)

        # 2. The wheel, in a venv that sees this machine's packages.
        if args.wheel:
            start = time.perf_counter()
            installed = None
            try:
                if args.dry_run:
                    time.sleep(timings["wheel"] * scale)
                    installed = {"python": sys.executable, "env": dict(os.environ)}
                else:
                    if package is None:
                        raise RuntimeError("no build: the tests' own modules are missing")
                    installed = install_wheel(args.wheel.resolve(), out, package)
                    summary["wheel"] = {k: v for k, v in installed.items() if k != "env"}
                    print(
                        f"[wheel] {installed['wheel']} ({installed['installed']}): xlabind "
                        f"from {installed['xlabind']}, libcudart {installed['cudart_real']} "
                        f"({installed['cuda_runtime']})",
                        flush=True,
                    )
                summary["step_seconds"]["wheel"] = round(time.perf_counter() - start, 1)
            except Exception as error:
                record_error("wheel", error)
            if installed is not None:
                gpu_tests("gpu_tests_wheel", installed["python"], installed["env"])

        # 3. Without --quick: every other test file on the CPU.
        if not args.quick and package is not None:
            cpu = [f for f in files if f.name not in GPU_TESTS | BAZEL_ONLY]
            seconds = budget("cpu_tests", 1.5 * timings["cpu_tests"])
            start = time.perf_counter()

            def one(path):
                left = deadline.left(seconds)
                if left <= 0:
                    return None
                command = dry_run_command(0.01) if args.dry_run else pytest_command(path)
                return test_result(
                    run_step(path.stem, command, environment(package, "cpu"), left, logs),
                    path,
                    "cpu",
                )

            with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs // 2)) as pool:
                for path, result in zip(cpu, pool.map(one, cpu)):
                    if result is None:
                        summary["not_run"].append(f"{path.name}: no time left")
                    else:
                        summary["tests"].append(result)
            summary["step_seconds"]["cpu_tests"] = round(time.perf_counter() - start, 1)

        # 4. The benchmark: its groups in priority order, within what is left;
        # each group's table is printed (and its JSON written) as it ends.
        if not args.no_benchmark:
            seconds = budget("benchmark", float("inf"))
            if seconds <= 0 or package is None and not args.dry_run:
                summary["not_run"].append(
                    "gpu_benchmark.py: " + ("no time left" if seconds <= 0 else "no build")
                )
            else:
                groups = QUICK_GROUPS if args.quick else _benchmark_module().GROUPS
                command = [
                    sys.executable,
                    str(REPO / "tools" / "gpu_benchmark.py"),
                    "--json",
                    str(out / "gpu_benchmark.json"),
                    "--deadline",
                    str(max(1.0, seconds - 5 * scale)),
                    "--only",
                    *groups,
                    *(["--quick"] if args.quick else []),
                ]
                if args.dry_run:
                    command += ["--dry-run", "--time-scale", str(scale)]
                    if (args.overrun or "").startswith("benchmark:"):
                        command += ["--overrun", args.overrun.split(":", 1)[1]]
                env = environment(package, None) if package else dict(os.environ)
                step = run_step("gpu_benchmark", command, env, seconds, logs)
                summary["step_seconds"]["benchmark"] = step["seconds"]
                summary["benchmark"] = (
                    step["output"]
                    if not step["timed_out"]
                    else f"timed out after {step['seconds']} s; so far:\n" + step["output"]
                )
                failed |= step["timed_out"] or step["returncode"] != 0
    except Exception as error:
        record_error("gpu_check", error)
    finally:
        if not args.build_only or summary["errors"]:
            print_summary(summary)
            (out / "gpu_check.json").write_text(json.dumps(summary, indent=1, default=str))
    results = summary["tests"]
    gpu = [r for r in results if r["file"] in GPU_TESTS and r["platform"] in ("gpu", "wheel")]
    ran_on_gpu = bool(gpu) and all(r["passed"] > 0 for r in gpu)
    if not ran_on_gpu:
        print("the GPU tests did not all run on a GPU (see logs/gpu_tests_test_gpu*.log)")
    return 1 if failed or any(r["failed"] for r in results) or not ran_on_gpu else 0


if __name__ == "__main__":
    sys.exit(main())
