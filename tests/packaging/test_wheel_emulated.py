"""The Linux aarch64 wheel, run where it runs: installed beside jax's aarch64
wheels in a Debian aarch64 sysroot (aarch64_sysroot.py) and run by that
sysroot's CPython under qemu-user, on this x86_64 machine: `python -m
xlabind`, the README's example, the constructors under jit, grad and vmap,
the jaxbind drop-in, errors and the call after one, map_coordinates at
every order against SciPy with its gradients (emulated_checks.py), and
examples/native_op's test beside its module built for aarch64.

Skips, saying why, where qemu-user or the sysroot is missing: CI makes the
sysroot first (`python3 tests/packaging/aarch64_sysroot.py --python 3.11`)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

import aarch64_sysroot as sysroots
import pytest
import runfiles_repos
from wheel_tools import RUNFILES, load_tool

VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"

# Each in a process of its own (some turn on float64 for their whole
# process), as tools/check_wheel.py runs them; with what they leave out under
# emulation, where jax runs ~50 times slower: the Hessians and third
# derivatives (two to three minutes each there), whose first derivatives run.
TEST_FILES = {
    "tests/docs/test_readme.py": None,
    "tests/api/test_callback.py": None,
    "tests/api/test_linear.py": "not third_and_fourth_derivatives",
    "tests/api/test_nonlinear.py": "not hessian",
    "tests/api/test_multilinear.py": "not hessian",
    "tests/api/test_jaxbind.py": None,
    "tests/api/test_errors.py": None,
    "tests/packaging/emulated_checks.py": None,
    # Run in a folder of its own (the `example` fixture).
    "test_example_ops.py": None,
}
#: What a file skips under emulation, and why: the example's module for
#: aarch64 has no CUDA handlers (ffi/defs.bzl leaves CUDA out there), so its
#: test of the CUDA table's registration skips.
EXPECTED_SKIPS = {"test_example_ops.py": 1}


def _missing() -> str | None:
    """Why the wheel cannot run here, or None."""
    if VERSION not in sysroots.SUITES:
        return (
            f"Debian ships no aarch64 CPython {VERSION} (only {sorted(sysroots.SUITES)}): "
            f"the cp{VERSION.replace('.', '')} aarch64 wheel is built and checked from its "
            "bytes, not run"
        )
    if not shutil.which("qemu-aarch64-static"):
        return "qemu-aarch64-static is not installed (Debian package qemu-user-static)"
    if not sysroots.is_ready(VERSION):
        return (
            f"no aarch64 sysroot for CPython {VERSION} at {sysroots.sysroot(VERSION)}: "
            f"make it with `python3 tests/packaging/aarch64_sysroot.py --python {VERSION}`"
        )
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A folder with the aarch64 wheel installed, as pip installs it there."""
    wheel = load_tool("build_wheel").build(tmp_path_factory.mktemp("dist"), "linux_aarch64")
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
        + ["--disable-pip-version-check", "--only-binary=:all:"]
        + ["--platform", "manylinux_2_17_aarch64", "--python-version", VERSION]
        + ["--target", str(target), str(wheel)],
        check=True,
    )
    return target


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """The runfiles again, but the main repository's folder is not named
    `xlabind` and has no __init__.py there: pytest would import that file as
    the package (this machine's modules, which the emulated CPython cannot
    load). The other repositories stay beside it (runfiles_repos.py)."""
    runfiles = tmp_path_factory.mktemp("runfiles")
    for entry in RUNFILES.parent.iterdir():
        if entry != RUNFILES:
            (runfiles / entry.name).symlink_to(entry)
    folder = runfiles / "main"
    folder.mkdir()
    for entry in RUNFILES.iterdir():
        if entry.name != "__init__.py":
            (folder / entry.name).symlink_to(entry)
    return folder


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """examples/native_op's Python files beside its module built for aarch64
    (//tests/packaging:example_aarch64), as its py_test sees them."""
    folder = tmp_path_factory.mktemp("example")
    sources = runfiles_repos.repository("xlabind_example")
    for name in ("ops.py", "test_example_ops.py"):
        (folder / name).symlink_to(sources / name)
    module = RUNFILES / "tests" / "packaging" / "example_aarch64" / "example_ops.so"
    (folder / "example_ops.so").symlink_to(module)
    return folder


def emulated(site, checkout, *arguments: str, cwd=None) -> subprocess.CompletedProcess:
    """The sysroot's CPython under qemu-user, with the wheel, then jax's
    aarch64 wheels, then the suite's helpers on its path, in `cwd` (default:
    `checkout`)."""
    root = sysroots.sysroot(VERSION)
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("TEST_TMPDIR", "/tmp"),
        "JAX_PLATFORMS": "cpu",
        # XLA without LLVM's optimizations, as the suite runs everywhere
        # (tests/run_pytest.py; jaxlib 0.10.2, the aarch64 lock's, has the
        # emitter flag): under emulation the passes dominate (eight small
        # programs compiled in 70 s with them, 12 s without).
        "XLA_FLAGS": "--xla_backend_optimization_level=0 "
        "--xla_llvm_disable_expensive_passes=true "
        "--xla_cpu_parallel_codegen_split_count=1 --xla_cpu_use_fusion_emitters=false",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.pathsep.join(
            [str(site), str(root / sysroots.SITE), str(checkout / "tests" / "support")]
        ),
    }
    return subprocess.run(
        ["qemu-aarch64-static", "-L", str(root), str(root / "usr" / "bin" / f"python{VERSION}")]
        + list(arguments),
        capture_output=True,
        text=True,
        cwd=cwd or checkout,
        env=environment,
        timeout=900,
    )


def test_the_installed_wheel_reports_itself_under_emulation(site, checkout):
    done = emulated(site, checkout, "-m", "xlabind")
    assert done.returncode == 0, done.stderr
    assert f"xlabind 0.5.0 at {site}/xlabind/__init__.py" in done.stdout, done.stdout
    assert "Python callbacks: CPU" in done.stdout, done.stdout
    # The CUDA kernels are not in this wheel at all: no word of a CUDA runtime
    # that failed to load (python/xlabind/ops/_native.py).
    cuda = next(line for line in done.stdout.splitlines() if "native CUDA kernels" in line)
    assert "wheels for aarch64 carry no native CUDA kernels yet" in cuda, cuda
    assert "libcudart" not in cuda, cuda
    machine = emulated(site, checkout, "-c", "import platform; print(platform.machine())")
    assert machine.stdout.strip() == "aarch64", machine


@pytest.mark.parametrize("test_file", TEST_FILES)
def test_the_suites_files_pass_under_emulation(site, checkout, example, test_file):
    left_out = TEST_FILES[test_file]
    done = emulated(
        site,
        checkout,
        *("-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", test_file),
        *(("-k", left_out) if left_out else ()),
        cwd=example if test_file == "test_example_ops.py" else None,
    )
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    assert done.returncode == 0, f"{last}\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
    # Nothing failed, and nothing skipped but EXPECTED_SKIPS; only the tests
    # named above deselected.
    skips = EXPECTED_SKIPS.get(test_file)
    skipped = rf", {skips} skipped" if skips else ""
    deselected = r", \d+ deselected" if left_out else ""
    assert re.fullmatch(rf"\d+ passed{skipped}{deselected}(, \d+ warnings?)? in .*", last), (
        f"{last}\n{done.stdout[-4000:]}"
    )


def _size_macros(path) -> dict[str, str]:
    found = re.findall(r"^#define ((?:SIZEOF|ALIGNOF)_\w+) (\S+)", path.read_text(), re.M)
    return dict(found)


def test_the_aarch64_pyconfig_has_the_sizes_of_the_one_the_build_used():
    # A Linux aarch64 build compiles against this machine's pyconfig.h
    # (third_party/python/interpreter.bzl); Debian's aarch64 CPython's own
    # must agree with it in every size and alignment.
    own = sysroots.sysroot(VERSION) / "usr" / "include" / "aarch64-linux-gnu"
    aarch64 = _size_macros(own / f"python{VERSION}" / "pyconfig.h")
    build = sysconfig.get_config_h_filename()
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch and f"<{multiarch}/python{VERSION}/pyconfig.h>" in pathlib.Path(build).read_text():
        build = f"/usr/include/{multiarch}/python{VERSION}/pyconfig.h"  # Debian's layout
    this_machine = _size_macros(pathlib.Path(build))
    assert len(aarch64) > 10 and aarch64 == this_machine
