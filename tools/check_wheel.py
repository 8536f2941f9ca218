#!/usr/bin/env python3
"""Installs an xlabind wheel into a fresh environment that already has jax, and
runs the demo, the core of the test suite and a type check there.

    python3.12 tools/check_wheel.py dist/xlabind-*-cp312-*.whl --site DIR

DIR is a folder of installed packages (jax, jaxlib, NumPy, ml_dtypes, SciPy,
pytest), e.g. from `pip install --target DIR -r third_party/python/lower_bound.lock`.
The environment is a venv of the interpreter running this script that sees
DIR through a .pth file. pip installs the wheel with --no-index, so the
install fails if the wheel wanted anything the environment lacks: it proves
the wheel installs beside that jax without touching it.
tests/packaging/test_wheel_installed.py runs this for both locks; CI runs it for other
interpreters.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import pathlib
import re
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).parent.parent
# Test files run against the installed wheel, each in its own process (some
# turn on float64 for their whole process), as many at a time as cores, the
# longest first. map_coordinates: its promised value on every input (the
# comparison with jax's own runs in the main suite).
CORE_TESTS = (
    "tests/transforms/test_trust_sweep.py",
    "tests/docs/test_doc_examples.py",
    "tests/api/test_callback.py",
    "tests/api/test_linear.py",
    "tests/api/test_nonlinear.py",
    "tests/transforms/test_vmap.py",
    "tests/api/test_dtypes.py",
    "tests/api/test_errors.py",
    "tests/ops/test_map_coordinates_domain.py",
    "tests/api/test_compatibility.py",
    "tests/api/test_jax_internals.py",
    "tests/docs/test_readme.py",
    "tests/runtime/test_lifetime.py",
)
# What only an installed wheel can get wrong, for a jax the main suite has just
# run every test on with the same compiled modules: the package imports from
# the environment, its data and modules are there, the modules find what they
# load (RUNPATH), callbacks and their lifetime work, the README runs (the
# documentation's examples run in CORE_TESTS, on the oldest jax).
INSTALL_TESTS = (
    "tests/api/test_callback.py",
    "tests/runtime/test_extension_module.py",
    "tests/runtime/test_lifetime.py",
    "tests/docs/test_readme.py",
)


def clean_environment(**extra) -> dict:
    """This process's environment without PYTHONPATH (under Bazel it names the
    source tree and the pinned packages), on the CPU."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(
        PIP_BREAK_SYSTEM_PACKAGES="1", PIP_DISABLE_PIP_VERSION_CHECK="1", JAX_PLATFORMS="cpu"
    )
    env.update(extra)
    return env


def make_environment(workdir: pathlib.Path, site: pathlib.Path) -> pathlib.Path:
    """A venv (no pip of its own) that sees the packages in `site`; its python."""
    venv = workdir / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    pathlib.Path(purelib, "preinstalled_packages.pth").write_text(f"{site}\n")
    return python


def install(python: pathlib.Path, wheel: pathlib.Path) -> list[str]:
    """pip-installs `wheel` into `python`'s environment from nothing but the
    wheel; returns what pip says it installed."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        env=clean_environment(),
    )
    if done.returncode != 0:
        raise AssertionError(f"pip install failed:\n{done.stdout}\n{done.stderr}")
    installed = re.findall(r"Successfully installed (.*)", done.stdout)
    return installed[0].split() if installed else []


def run_demo(python: pathlib.Path, examples: pathlib.Path, workdir: pathlib.Path) -> str:
    """Runs examples/python_ops/demo.py from a copy of its package (`python -m
    python_ops.demo`)."""
    demo = workdir / "demo"
    shutil.copytree(examples, demo / "python_ops")
    done = subprocess.run(
        [str(python), "-m", "python_ops.demo"],
        cwd=demo,
        capture_output=True,
        text=True,
        env=clean_environment(),
        timeout=600,
    )
    if done.returncode != 0:
        raise AssertionError(f"the demo failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def versions(python: pathlib.Path, workdir: pathlib.Path) -> dict[str, str]:
    """Where xlabind was imported from, and the jax it runs with."""
    done = subprocess.run(
        [
            str(python),
            "-c",
            "import jax, jaxlib.version, xlabind; print(xlabind.__file__); "
            "print(jax.__version__); print(jaxlib.version.__version__)",
        ],
        capture_output=True,
        text=True,
        env=clean_environment(),
        cwd=workdir,
        check=True,
    )
    location, jax_version, jaxlib_version = done.stdout.split()
    return {"xlabind": location, "jax": jax_version, "jaxlib": jaxlib_version}


def run_tests(
    python: pathlib.Path,
    root: pathlib.Path,
    tests: tuple[str, ...] = CORE_TESTS,
    jobs: int | None = None,
) -> dict[str, str]:
    """{test file: pytest's last line}, for `tests` (paths in root), run in
    root (where README.md is), `jobs` files at a time (default: one a core;
    each file is mostly one busy thread, compiling and dispatching)."""

    def run(test: str) -> str:
        done = subprocess.run(
            [
                str(python),
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(root / test),
            ],
            capture_output=True,
            text=True,
            cwd=root,
            env=clean_environment(PYTHONPATH=str(root / "tests" / "support")),
            timeout=900,
        )
        last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
        return (
            last
            if done.returncode == 0
            else (f"FAILED: {last}\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        )

    with concurrent.futures.ThreadPoolExecutor(jobs or os.cpu_count() or 1) as pool:
        return dict(zip(tests, pool.map(run, tests)))


def type_check(python: pathlib.Path, root: pathlib.Path, workdir: pathlib.Path) -> str:
    """mypy on tests/typing/public_api.py (a user's script) against the installed
    wheel; pytest's-style one-line summary. Needs mypy beside this script."""
    try:
        import mypy
    except ImportError:
        return "skipped: mypy is not installed for this interpreter"
    # In a folder of its own, as a user's script is: inside the source tree,
    # mypy would take the tree's folders for packages around it.
    script = workdir / "user_script" / "public_api.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / "tests" / "typing" / "public_api.py", script)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--warn-unused-ignores",
            "--python-executable",
            str(python),
            str(script),
        ],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=clean_environment(PYTHONPATH=str(pathlib.Path(mypy.__file__).parent.parent)),
    )
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    return last if done.returncode == 0 else f"FAILED: {done.stdout[-3000:]}{done.stderr[-2000:]}"


def check(
    wheel: pathlib.Path,
    site: pathlib.Path,
    workdir: pathlib.Path,
    root: pathlib.Path = REPO,
    tests: tuple[str, ...] = CORE_TESTS,
    jobs: int | None = None,
) -> dict:
    """Every step above; raises AssertionError on the first that fails."""
    python = make_environment(workdir, site)
    installed = install(python, wheel)
    expected = [f"xlabind-{wheel.name.split('-')[1]}"]
    if installed != expected:
        raise AssertionError(f"pip installed {installed}, not only {expected}")
    found = versions(python, workdir)
    if not found["xlabind"].startswith(str(workdir / "venv")):
        raise AssertionError(f"xlabind came from {found['xlabind']}, not the environment")
    run_demo(python, root / "examples" / "python_ops", workdir)
    results = run_tests(python, root, tests, jobs)
    results["mypy tests/typing/public_api.py"] = type_check(python, root, workdir)
    failed = [f"{name}: {line}" for name, line in results.items() if line.startswith("FAILED")]
    if failed:
        raise AssertionError("\n".join(failed))
    return {"versions": found, "tests": results}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=pathlib.Path)
    parser.add_argument(
        "--site",
        type=pathlib.Path,
        required=True,
        help="folder with jax, jaxlib, NumPy, ml_dtypes, SciPy, pytest",
    )
    parser.add_argument(
        "--workdir", type=pathlib.Path, help="kept afterwards (default: a temporary one, removed)"
    )
    parser.add_argument(
        "--tests",
        choices=("core", "install"),
        default="core",
        help="core: CORE_TESTS (default); install: INSTALL_TESTS only",
    )
    parser.add_argument("--jobs", type=int, help="test files at a time (default: one a core)")
    args = parser.parse_args()
    import contextlib
    import tempfile

    tests = CORE_TESTS if args.tests == "core" else INSTALL_TESTS
    # The default folder (the installed wheel, the tests' copies: 36 MB) goes
    # once the check is done; a named one stays.
    folder = (
        contextlib.nullcontext(args.workdir)
        if args.workdir
        else tempfile.TemporaryDirectory(prefix="xlabind-check-wheel-")
    )
    with folder as workdir:
        result = check(
            args.wheel.resolve(),
            args.site.resolve(),
            pathlib.Path(workdir),
            tests=tests,
            jobs=args.jobs,
        )
    print(
        f"{args.wheel.name}: installed alone beside jax {result['versions']['jax']}, "
        f"jaxlib {result['versions']['jaxlib']}; the demo ran"
    )
    for name, line in result["tests"].items():
        print(f"  {name:40} {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
