#!/usr/bin/env python3
"""The GPU check, for the device machine (no Bazel, no network there).

    python3 tools/gpu_check.py               # build, GPU tests, CPU tests, benchmark
    python3 tools/gpu_check.py --build-only  # build the extension and import it (any machine)

1. Builds xlabind's extension modules from this repository's sources with
   this machine's compiler ($CXX, else g++; nvcc for the CUDA kernels) against
   this interpreter's headers and the installed jax (XLA FFI headers), NumPy
   and nanobind: no Bazel. The package lands in <out>/package/xlabind.
2. Runs the GPU test files (GPU_TESTS) on the GPU, and every other test file on the CPU
   (JAX_PLATFORMS=cpu), each file in its own process, several at once.
3. Runs tools/gpu_benchmark.py (the timing table of the GPU issue).
4. Prints one summary; the logs and gpu_check.json go to <out> ($OUT when set).

Exits non-zero when the build fails, a test fails, or the GPU tests did not run
on a GPU (unless --build-only).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
# Test files that need what only Bazel provides (the wheel builder, ducc0, the
# examples package); the CPU suite under `bazel test //...` covers them.
BAZEL_ONLY = {"test_wheel.py", "test_examples.py"}
# Test files that need a GPU: skipped elsewhere, run on the GPU here.
GPU_TESTS = {"test_gpu.py", "test_gpu_map_coordinates.py"}


def native_op_modules() -> dict:
    """{module: {platform: {target: symbol}}} from ffi/native_ops.bzl (a dict literal)."""
    namespace: dict = {}
    exec((REPO / "ffi" / "native_ops.bzl").read_text(), namespace)
    return namespace["NATIVE_OP_MODULES"]


def module_source(module: str, handlers: dict) -> str:
    """The extension module's C++ source, as xlabind_extension (ffi/defs.bzl) makes it."""
    declarations, entries = [], []
    for platform, targets in handlers.items():
        for target, symbol in targets.items():
            declarations.append(f"struct XLA_FFI_Error* {symbol}(struct XLA_FFI_CallFrame*);")
            entries.append(f'  if (!Add(platforms, "{platform}", "{target}", (void*)&{symbol})) '
                           f"return Fail(platforms);")
    template = (REPO / "ffi" / "extension_module.cc.tmpl").read_text()
    return (template.replace("%{module}", module)
            .replace("%{declarations}", "\n".join(sorted(declarations)))
            .replace("%{entries}", "\n".join(entries)))


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


def build(out: pathlib.Path, jobs: int) -> pathlib.Path:
    """Compiles xlabind's three extension modules into <out>/package/xlabind, as
    ffi/BUILD.bazel does; returns <out>/package. The CUDA ops need nvcc: without
    one that module is left out, and the package says so when they are used."""
    import jax
    import nanobind
    import numpy

    cxx = os.environ.get("CXX", "g++")
    nanobind_src = pathlib.Path(nanobind.source_dir())
    includes = [REPO, sysconfig.get_paths()["include"], numpy.get_include(),
                jax.ffi.include_dir(), nanobind.include_dir(),
                nanobind_src.parent / "ext" / "robin_map" / "include"]
    # Other projects' headers as system headers: their warnings are not ours.
    flags = ["-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-fno-strict-aliasing",
             f"-I{REPO}", *(f"-isystem{path}" for path in includes[1:])]
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
            command = [str(toolkit / "bin" / "nvcc"), "-ccbin", cxx, "-std=c++17", "-O3",
                       "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden",
                       "-gencode", "arch=compute_90,code=sm_90",
                       "-gencode", "arch=compute_90,code=compute_90",
                       f"-I{REPO}", "-isystem", str(jax.ffi.include_dir()),
                       "-c", str(source), "-o", str(obj)]
        else:
            command = [cxx, *flags, "-c", str(source), "-o", str(obj)]
        subprocess.run(command, check=True)
        return obj

    ops = sorted(REPO.glob("ffi/ops/*"))
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
                               [op / "cpu_handlers.cc" for op in ops], "module_exports.lds", [])
    if toolkit is not None:
        # The static CUDA runtime: the module needs no libcudart at run time.
        modules["_xlabind_cuda_ops"] = (
            [generated["_xlabind_cuda_ops"]] + [op / "cuda_handlers.cc" for op in ops] +
            [op / "cuda_kernels.cu" for op in ops], "module_exports.lds",
            [f"-L{toolkit / 'lib64'}", "-lcudart_static", "-lrt", "-lpthread", "-ldl"])

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        objects = {name: list(pool.map(compile_one, sources))
                   for name, (sources, _, _) in modules.items()}
    package = out / "package"
    target = package / "xlabind"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(REPO / "python" / "xlabind", target,
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for name, (_, exports, libraries) in modules.items():
        module = target / (name + sysconfig.get_config_var("EXT_SUFFIX"))
        subprocess.run([cxx, "-shared", *map(str, objects[name]), "-o", str(module),
                        f"-Wl,--version-script={REPO / 'ffi' / exports}", *libraries], check=True)
    return package


def environment(package: pathlib.Path, platforms: str | None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(package), str(REPO / "tests"), str(REPO / "python"), env.get("PYTHONPATH", "")])
    # The built package must win over the source tree: the source tree has no extension.
    env["PYTHONPATH"] = env["PYTHONPATH"].replace(str(REPO / "python") + os.pathsep, "", 1)
    if platforms is None:
        env.pop("JAX_PLATFORMS", None)
    else:
        env["JAX_PLATFORMS"] = platforms
    return env


def smoke_test(package: pathlib.Path) -> str:
    """Imports the built package and runs a callback and a native op on the CPU."""
    code = ("import jax, jax.numpy as jnp, numpy as np, xlabind\n"
            "op = xlabind.callback(lambda x: x * 2, lambda x: x)\n"
            "assert float(jax.jit(op)(jnp.ones(()))) == 2.0\n"
            "from xlabind.ops import map_coordinates\n"
            "grid = jnp.arange(4.0)\n"
            "assert float(map_coordinates(grid, [jnp.asarray([1.5])], order=1)[0]) == 1.5\n"
            "print(xlabind.__file__, sorted(xlabind._extension.REGISTRATIONS),\n"
            "      'CUDA ops:', 'missing' if xlabind._extension.UNAVAILABLE else 'built')\n")
    done = subprocess.run([sys.executable, "-c", code], env=environment(package, "cpu"),
                          capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError("the built package does not work:\n" + done.stderr[-3000:])
    return done.stdout.strip()


COUNTS = re.compile(r"(\d+) (passed|failed|skipped|error|errors)")


def run_tests(package: pathlib.Path, path: pathlib.Path, platforms: str | None,
              logs: pathlib.Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(path)],
        env=environment(package, platforms), capture_output=True, text=True, cwd=REPO,
        timeout=1800)
    (logs / (path.stem + ".log")).write_text(done.stdout + done.stderr)
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    tail = done.stdout.strip().splitlines()[-1:] or [""]
    for number, kind in COUNTS.findall(tail[0]):
        counts["failed" if kind.startswith("error") else kind] += int(number)
    if done.returncode not in (0, 5) and counts["failed"] == 0:
        counts["failed"] = 1  # it crashed before pytest could count
    return {"file": path.name, "platform": platforms or "gpu", **counts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or tempfile.mkdtemp(
        prefix="xlabind-gpu-check-"), help="where the build, logs and summary go")
    parser.add_argument("--build-only", action="store_true",
                        help="build and import the extension, then stop")
    parser.add_argument("--no-benchmark", action="store_true")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    out = pathlib.Path(args.out).resolve()
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    summary: dict = {"python": sys.version.split()[0]}

    start = time.perf_counter()
    package = build(out / "build", args.jobs)
    summary["build_seconds"] = round(time.perf_counter() - start, 1)
    summary["import"] = smoke_test(package)
    print(f"built {package} in {summary['build_seconds']} s: {summary['import']}", flush=True)
    if args.build_only:
        return 0

    files = sorted((REPO / "tests").glob("test_*.py"))
    jobs = [(f, None) for f in files if f.name in GPU_TESTS]
    jobs += [(f, "cpu") for f in files if f.name not in GPU_TESTS | BAZEL_ONLY]
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs // 2)) as pool:
        results = list(pool.map(lambda job: run_tests(package, job[0], job[1], logs), jobs))
    summary["tests"] = results

    if not args.no_benchmark:
        done = subprocess.run([sys.executable, str(REPO / "tools" / "gpu_benchmark.py"),
                               "--json", str(out / "gpu_benchmark.json")],
                              env=environment(package, None), capture_output=True, text=True,
                              cwd=REPO, timeout=900)
        (logs / "gpu_benchmark.log").write_text(done.stdout + done.stderr)
        summary["benchmark"] = done.stdout if done.returncode == 0 else done.stderr[-3000:]

    print(f"\n{'test file':32} {'where':6} {'passed':>7} {'failed':>7} {'skipped':>8}")
    for r in results:
        print(f"{r['file']:32} {r['platform']:6} {r['passed']:>7} {r['failed']:>7} "
              f"{r['skipped']:>8}")
    totals = {k: sum(r[k] for r in results) for k in ("passed", "failed", "skipped")}
    print(f"{'total':32} {'':6} {totals['passed']:>7} {totals['failed']:>7} "
          f"{totals['skipped']:>8}")
    if "benchmark" in summary:
        print("\n" + summary["benchmark"])
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=1))
    gpu = [r for r in results if r["file"] in GPU_TESTS]
    ran_on_gpu = all(r["passed"] > 0 and r["skipped"] == 0 for r in gpu)
    if not ran_on_gpu:
        print("the GPU tests did not all run on a GPU (see logs/test_gpu*.log)")
    return 0 if totals["failed"] == 0 and ran_on_gpu else 1


if __name__ == "__main__":
    sys.exit(main())
