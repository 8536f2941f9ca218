#!/usr/bin/env python3
"""The GPU check, for the device machine (no Bazel, no network there).

    python3 tools/gpu_check.py               # build, GPU tests, CPU tests, benchmark
    python3 tools/gpu_check.py --quick       # build, GPU tests, benchmark: about 5 minutes
    python3 tools/gpu_check.py --build-only  # build the extension and import it (any machine)
    python3 tools/gpu_check.py --quick --wheel dist/xlabind-...-cp312-...whl
                                             # and the GPU tests again on the installed wheel

1. Builds xlabind's extension modules from this repository's sources with
   this machine's compiler ($CXX, else g++; nvcc for the CUDA kernels) against
   this interpreter's headers and the installed jax (XLA FFI headers), NumPy
   and nanobind: no Bazel. The package lands in <out>/package/xlabind.
2. Runs the GPU test files (GPU_TESTS) on the GPU, one after the other (each
   with XLA's preallocation capped, so CuPy and PyTorch get memory too), and,
   without --quick, every other test file on the CPU (JAX_PLATFORMS=cpu),
   several at once.
   With --wheel FILE (a wheel built with Bazel: the artifact users install),
   also installs it (pip --no-deps, no index) into a venv that sees this
   machine's jax, CUDA plugin, CuPy and PyTorch (--system-site-packages),
   reports which libcudart its CUDA ops loaded (a CUDA toolkit's copy is a
   failure: users have none), and runs the GPU test files again against it.
3. Runs tools/gpu_benchmark.py (the timing tables of the GPU issues).
4. Always prints one summary and the benchmark table, whatever failed or ran
   out of time; the logs (partial ones too) and gpu_check.json go to <out>
   ($OUT when set).

Every step is time-boxed, and the whole run keeps within --deadline (the
device machine allows 10 minutes a command): a step that runs out of time is
stopped, its output so far kept, and reported as failed; steps with no time
left are reported as not run. Skipped tests are reported, not failed.

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
# examples package, the workspace's Starlark); the CPU suite under
# `bazel test //...` covers them.
BAZEL_ONLY = {"test_wheel.py", "test_wheel_installed.py", "test_examples.py",
              "test_bazel_files.py", "test_docs.py", "test_gpu_check_build.py",
              "test_doc_examples.py", "test_doc_sources.py", "test_readme.py"}
# Test files that need a GPU: skipped elsewhere, run on the GPU here.
GPU_TESTS = {"test_gpu.py", "test_gpu_graphs.py", "test_gpu_map_coordinates.py",
             "test_gpu_native_api.py"}


def native_op_modules() -> dict:
    """{module: {platform: {target: handler}}} from ffi/ops/native_ops.bzl (a dict literal)."""
    namespace: dict = {}
    exec((REPO / "ffi" / "ops" / "native_ops.bzl").read_text(), namespace)
    return namespace["NATIVE_OP_MODULES"]


def example_handlers() -> tuple[dict, dict]:
    """(handlers, state types) of examples/native_op's module, from the dict
    literals its BUILD.bazel loads."""
    namespace: dict = {}
    exec((REPO / "examples" / "native_op" / "example_handlers.bzl").read_text(), namespace)
    return namespace["EXAMPLE_HANDLERS"], namespace["EXAMPLE_STATE_TYPES"]


def native_api_handlers() -> tuple[dict, dict]:
    """(handlers, state types) of tests/native/native_api_handlers.cc's module,
    which tests/native/test_native_api.py imports, from
    tests/native/native_api_module.bzl."""
    namespace: dict = {}
    exec((REPO / "tests" / "native" / "native_api_module.bzl").read_text(), namespace)
    return namespace["NATIVE_API_HANDLERS"], namespace["NATIVE_API_STATE_TYPES"]


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
        module, generator["module_handlers"](module, handlers),
        generator["module_state_types"](module, state_types or {}))
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
    # The helpers' public include path, xlabind/native/*.h, as Bazel's
    # include_prefix gives it (ffi/native/BUILD.bazel).
    public = out / "include"
    (public / "xlabind").mkdir(parents=True, exist_ok=True)
    if not (public / "xlabind" / "native").exists():
        (public / "xlabind" / "native").symlink_to(REPO / "ffi" / "native")
    includes = [REPO, sysconfig.get_paths()["include"], numpy.get_include(),
                jax.ffi.include_dir(), nanobind.include_dir(),
                nanobind_src.parent / "ext" / "robin_map" / "include"]
    # Other projects' headers as system headers: their warnings are not ours.
    flags = ["-std=c++17", "-O0" if fast else "-O2", "-fPIC", "-fvisibility=hidden", "-fno-strict-aliasing",
             f"-I{REPO}", f"-I{public}", *(f"-isystem{path}" for path in includes[1:])]
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
            sass = [] if fast else ["-gencode", "arch=compute_90,code=sm_90"]
            command = [str(toolkit / "bin" / "nvcc"), "-ccbin", cxx, "-std=c++17",
                       "-O0" if fast else "-O3",
                       "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden", *sass,
                       "-gencode", "arch=compute_90,code=compute_90",
                       f"-I{REPO}", f"-I{public}", f"-I{source.parent}", "-isystem",
                       str(jax.ffi.include_dir()),
                       "-c", str(source), "-o", str(obj)]
        else:
            command = [cxx, *flags, f"-I{source.parent}", "-c", str(source), "-o", str(obj)]
        subprocess.run(command, check=True)
        return obj

    ops = sorted(op.parent for op in REPO.glob("ffi/ops/*/cpu_handlers.h"))
    modules = {
        "_xlabind": ([*sorted(REPO.glob("ffi/common/*.cc")), *sorted(REPO.glob("ffi/cpu/*.cc")),
                      *sorted(REPO.glob("ffi/cuda/*.cc")), REPO / "ffi" / "module.cc",
                      nanobind_src / "nb_combined.cpp"], "extension_exports.lds", ["-ldl"]),
    }
    generated = {}
    for module, handlers in native_op_modules().items():
        source = out / "generated" / f"{module}_module.cc"
        source.write_text(module_source(module, handlers))
        generated[module] = source
    modules["_xlabind_ops"] = ([generated["_xlabind_ops"]] +
                               sorted(source for op in ops for source in op.glob("cpu_*.cc")), "module_exports.lds", [])
    if toolkit is not None:
        # The static CUDA runtime: the module needs no libcudart at run time.
        cudart = [f"-L{toolkit / 'lib64'}", "-lcudart_static", "-lrt", "-lpthread", "-ldl"]
        modules["_xlabind_cuda_ops"] = (
            [generated["_xlabind_cuda_ops"]] + [op / "cuda_handlers.cc" for op in ops] +
            [op / "cuda_kernels.cu" for op in ops], "module_exports.lds", cudart)
    # The test module of tests/native/test_native_api.py (C++ only: its CUDA handlers
    # launch nothing), beside the package as Bazel puts it beside the tests.
    source = out / "generated" / "native_api_ops_module.cc"
    source.write_text(module_source("native_api_ops", *native_api_handlers()))
    modules["native_api_ops"] = (
        [source, REPO / "tests" / "native" / "native_api_handlers.cc"], "module_exports.lds", [])
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
            "module_exports.lds", cudart)

    # Every module's sources in one queue: one module's slow file (nvcc's
    # kernels, the map_coordinates handlers) does not hold back the others'.
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        pending = {name: [pool.submit(compile_one, source) for source in sources]
                   for name, (sources, _, _) in modules.items()}
        objects = {name: [job.result() for job in jobs_of]
                   for name, jobs_of in pending.items()}
    package = out / "package"
    target = package / "xlabind"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(REPO / "python" / "xlabind", target,
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for name, (_, exports, libraries) in modules.items():
        folder = package if name in ("example_ops", "native_api_ops") else target
        module = folder / (name + sysconfig.get_config_var("EXT_SUFFIX"))
        subprocess.run([cxx, "-shared", *map(str, objects[name]), "-o", str(module),
                        f"-Wl,--version-script={REPO / 'ffi' / exports}", *libraries], check=True)
    return package


def environment(package: pathlib.Path, platforms: str | None) -> dict:
    env = dict(os.environ)
    # The built package, the tests' shared helpers, and the native API's test
    # module (built beside the package).
    env["PYTHONPATH"] = os.pathsep.join(
        [str(package), str(REPO / "tests" / "support"), str(REPO / "python"),
         env.get("PYTHONPATH", "")])
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
import json, os, xlabind
from xlabind import _xlabind_cuda_ops  # raises when it cannot load
maps = open("/proc/self/maps").read().splitlines()
cudart = sorted({line.split()[-1] for line in maps if "libcudart" in line})
print(json.dumps({"xlabind": xlabind.__file__, "cudart": cudart,
                  "cudart_real": [os.path.realpath(p) for p in cudart]}))
"""


def install_wheel(wheel: pathlib.Path, out: pathlib.Path, package: pathlib.Path) -> dict:
    """Installs `wheel` into a fresh venv under `out` that sees this machine's
    packages; returns {"python", "env", facts...} for running tests on it."""
    venv = out / "wheel-venv"
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                    str(wheel)], check=True)
    venv_site = pathlib.Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True).strip())
    facts: dict = {"wheel": wheel.name, "site": str(venv_site)}
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
        [str(REPO / "tests" / "support"), str(extras), env.get("PYTHONPATH", "")])
    env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = GPU_MEMORY_FRACTION
    probe = subprocess.run([str(python), "-c", WHEEL_PROBE], env=env, capture_output=True,
                           text=True, cwd=out)
    if probe.returncode != 0:
        raise RuntimeError("the installed wheel's CUDA ops do not load:\n" + probe.stderr[-3000:])
    facts.update(json.loads(probe.stdout.strip().splitlines()[-1]))
    if not pathlib.Path(facts["xlabind"]).is_relative_to(venv_site):
        raise RuntimeError(f"the tests would import {facts['xlabind']}, not the installed wheel")
    wheel_runtime = [p for p in facts["cudart_real"] if "/nvidia/" in p]
    if not facts["cudart"] or len(wheel_runtime) != len(facts["cudart_real"]):
        raise RuntimeError(f"the wheel's CUDA ops loaded libcudart from {facts['cudart_real']}, "
                           f"not from an nvidia-cuda-runtime package (the cuda13 extra's, "
                           f"through the RUNPATH): users without a CUDA toolkit would have "
                           f"none")
    return {"python": str(python), "env": env, **facts}


def smoke_test(package: pathlib.Path) -> str:
    """Imports the built package and runs a callback and a native op on the CPU."""
    code = ("import jax, jax.numpy as jnp, numpy as np, xlabind\n"
            "op = xlabind.callback(lambda x: x * 2, lambda x: x)\n"
            "assert float(jax.jit(op)(jnp.ones(()))) == 2.0\n"
            "from xlabind.ops import map_coordinates\n"
            "grid = jnp.arange(4.0)\n"
            "assert float(map_coordinates(grid, [jnp.asarray([1.5])], order=1)[0]) == 1.5\n"
            "print(xlabind.__file__, sorted(xlabind._runtime.extension.REGISTRATIONS),\n"
            "      'CUDA ops:', 'missing' if xlabind._runtime.extension.UNAVAILABLE else 'built')\n")
    done = subprocess.run([sys.executable, "-c", code], env=environment(package, "cpu"),
                          capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError("the built package does not work:\n" + done.stderr[-3000:])
    return done.stdout.strip()


COUNTS = re.compile(r"(\d+) (passed|failed|skipped|error|errors)")

# The part of the GPU each GPU test file's jax may preallocate: the rest is
# CuPy's and PyTorch's.
GPU_MEMORY_FRACTION = "0.4"
# Seconds reserved at the end of the run for the summary.
SUMMARY_RESERVE = 10


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def run_step(name: str, command: list[str], env: dict, timeout: float,
             logs: pathlib.Path) -> dict:
    """Runs one step, time-boxed; its output (partial, when it ran out of time)
    goes to logs/<name>.log."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=REPO,
                              timeout=max(1.0, timeout))
        output, returncode, timed_out = done.stdout + done.stderr, done.returncode, False
    except subprocess.TimeoutExpired as expired:
        output = _text(expired.stdout) + _text(expired.stderr)
        returncode, timed_out = None, True
    (logs / f"{name}.log").write_text(output)
    return {"name": name, "seconds": round(time.perf_counter() - start, 1),
            "returncode": returncode, "timed_out": timed_out, "output": output}


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
    return {"file": path.name, "platform": platforms or "gpu", "seconds": step["seconds"],
            "note": note, **counts}


class Deadline:
    """Seconds left of the run, for time-boxing each step."""

    def __init__(self, seconds: float, step_cap: float | None = None):
        self.end = time.perf_counter() + seconds
        self.step_cap = step_cap

    def left(self, cap: float) -> float:
        if self.step_cap is not None:
            cap = min(cap, self.step_cap)
        return min(cap, self.end - time.perf_counter() - SUMMARY_RESERVE)


def pytest_command(path: pathlib.Path, python: str = sys.executable) -> list[str]:
    return [python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(path)]


def dry_run_command(kind: str, seconds: float) -> list[str]:
    """--dry-run's stand-ins for the GPU steps: what they print, and a step
    that never ends (the first GPU test file)."""
    scripts = {
        "hang": "import time; print('partial output of a step that hangs', flush=True); "
                "time.sleep(3600)",
        "tests": "print('..s'); print('2 passed, 1 skipped in 0.1s')",
        "benchmark": "print('case  n  median'); print('xlabind no-op  1  61.0')",
    }
    return [sys.executable, "-c", scripts[kind]]


def print_summary(summary: dict) -> None:
    results = summary.get("tests", [])
    print(f"\n{'test file':36} {'where':6} {'passed':>7} {'failed':>7} {'skipped':>8} "
          f"{'seconds':>8}  note")
    for r in results:
        print(f"{r['file']:36} {r['platform']:6} {r['passed']:>7} {r['failed']:>7} "
              f"{r['skipped']:>8} {r['seconds']:>8}  {r['note']}")
    totals = {k: sum(r[k] for r in results) for k in ("passed", "failed", "skipped")}
    print(f"{'total':36} {'':6} {totals['passed']:>7} {totals['failed']:>7} "
          f"{totals['skipped']:>8}")
    for line in summary.get("not_run", []):
        print(f"not run (no time left): {line}")
    print("\nbenchmark:")
    print(summary.get("benchmark") or "(none: see logs/gpu_benchmark.log)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(
        prefix="xlabind-gpu-check-"), help="where the build, logs and summary go")
    parser.add_argument("--build-only", action="store_true",
                        help="build and import the extension, then stop")
    parser.add_argument("--quick", action="store_true",
                        help="build, GPU tests and benchmark only (no CPU suite)")
    parser.add_argument("--no-benchmark", action="store_true")
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds for the whole run (default 450 with --quick, else 560; "
                             "100 more with --wheel, at most 570)")
    parser.add_argument("--step-seconds", type=float, default=None,
                        help="at most this long for any one step (default: each step's own cap)")
    parser.add_argument("--dry-run", action="store_true",
                        help="stand-ins for the build and the GPU steps (the first one hangs): "
                             "checks this script's control flow on any machine")
    parser.add_argument("--wheel", type=pathlib.Path, default=None,
                        help="also install this wheel in a venv and run the GPU test files "
                             "against it (the artifact users install)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--fast-build", action="store_true",
                        help="unoptimized, PTX only: checks that everything builds (not for "
                             "measuring or a GPU run)")
    args = parser.parse_args(argv)
    default_deadline = (450 if args.quick else 560) + (100 if args.wheel else 0)
    deadline = Deadline(args.deadline or min(default_deadline, 570), args.step_seconds)
    out = pathlib.Path(args.out).resolve()
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    summary: dict = {"python": sys.version.split()[0], "tests": [], "not_run": []}
    failed = False
    try:
        start = time.perf_counter()
        if args.dry_run:
            package = out / "package"
            summary["import"] = "dry run: nothing built"
        else:
            package = build(out / "build", args.jobs, fast=args.fast_build)
            summary["import"] = smoke_test(package)
        summary["build_seconds"] = round(time.perf_counter() - start, 1)
        print(f"built {package} in {summary['build_seconds']} s: {summary['import']}", flush=True)
        if args.build_only:
            return 0

        files = sorted((REPO / "tests").glob("*/test_*.py"))
        gpu_env = environment(package, None)
        gpu_env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = GPU_MEMORY_FRACTION
        for k, path in enumerate(f for f in files if f.name in GPU_TESTS):  # in turn
            budget = deadline.left(240)
            if budget <= 0:
                summary["not_run"].append(path.name)
                continue
            command = (dry_run_command("hang" if k == 0 else "tests", budget) if args.dry_run
                       else pytest_command(path))
            step = run_step(path.stem, command, gpu_env, budget, logs)
            result = test_result(step, path, None)
            summary["tests"].append(result)
            print(f"[gpu] {path.name}: {result['passed']} passed, {result['failed']} failed, "
                  f"{result['skipped']} skipped {result['note']}", flush=True)

        if args.wheel and not args.dry_run:
            installed = install_wheel(args.wheel.resolve(), out, package)
            summary["wheel"] = {k: v for k, v in installed.items() if k != "env"}
            print(f"[wheel] {installed['wheel']}: xlabind from {installed['xlabind']}, "
                  f"libcudart {installed['cudart_real']} ({installed['cuda_runtime']})",
                  flush=True)
            for path in (f for f in files if f.name in GPU_TESTS):
                budget = deadline.left(240)
                if budget <= 0:
                    summary["not_run"].append(f"{path.name} (wheel)")
                    continue
                step = run_step(f"wheel_{path.stem}", pytest_command(path, installed["python"]),
                                installed["env"], budget, logs)
                result = test_result(step, path, "wheel")
                summary["tests"].append(result)
                print(f"[wheel] {path.name}: {result['passed']} passed, {result['failed']} "
                      f"failed, {result['skipped']} skipped {result['note']}", flush=True)

        if not args.quick and not args.dry_run:
            cpu = [f for f in files if f.name not in GPU_TESTS | BAZEL_ONLY]
            budget = deadline.left(420)

            def one(path):
                if deadline.left(budget) <= 0:
                    return None
                return test_result(run_step(path.stem, pytest_command(path),
                                            environment(package, "cpu"), deadline.left(budget),
                                            logs), path, "cpu")

            with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs // 2)) as pool:
                for path, result in zip(cpu, pool.map(one, cpu)):
                    if result is None:
                        summary["not_run"].append(path.name)
                    else:
                        summary["tests"].append(result)

        if not args.no_benchmark:
            budget = deadline.left(270)  # gpu_benchmark.py's groups, QUICK_SECONDS
            if budget <= 0:
                summary["not_run"].append("gpu_benchmark.py")
            else:
                command = (dry_run_command("benchmark", budget) if args.dry_run else
                           [sys.executable, str(REPO / "tools" / "gpu_benchmark.py"),
                            "--json", str(out / "gpu_benchmark.json"),
                            *(["--quick"] if args.quick else [])])
                step = run_step("gpu_benchmark", command, environment(package, None), budget,
                                logs)
                summary["benchmark"] = (step["output"] if not step["timed_out"] else
                                        f"timed out after {step['seconds']} s; so far:\n"
                                        + step["output"])
                failed |= step["timed_out"] or step["returncode"] != 0
    except Exception as error:  # noqa: BLE001  (the summary below must still come)
        summary["error"] = f"{type(error).__name__}: {error}"
        print(f"gpu_check: {summary['error']}", flush=True)
        failed = True
    finally:
        if not args.build_only or "error" in summary:
            print_summary(summary)
            (out / "gpu_check.json").write_text(json.dumps(summary, indent=1, default=str))
    results = summary["tests"]
    gpu = [r for r in results if r["file"] in GPU_TESTS and r["platform"] in ("gpu", "wheel")]
    ran_on_gpu = bool(gpu) and all(r["passed"] > 0 for r in gpu)
    if not ran_on_gpu:
        print("the GPU tests did not all run on a GPU (see logs/test_gpu*.log)")
    return 1 if failed or any(r["failed"] for r in results) or not ran_on_gpu else 0


if __name__ == "__main__":
    sys.exit(main())
