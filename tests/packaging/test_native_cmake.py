"""xlabind's native API without Bazel, as a CMake or Makefile user has it: the
wheel installed into a fresh environment with jax, then

* examples/native_op_cmake pip-installed there (scikit-build-core, CMake and
  Ninja from third_party/cmake/requirements.lock, no Bazel): its module is
  built against the *installed* wheel's headers and CMake package, and
  examples/native_op's own tests pass on it;
* `python -m xlabind --cmake-dir` is a folder where find_package(xlabind)
  succeeds in a fresh CMake project, which links xlabind::native;
* a handler compiled with nothing but `python -m xlabind --includes` runs
  through jax.ffi and xlabind.ffi_target.
"""

import pathlib
import shutil
import subprocess
import sys
import textwrap

import runfiles_repos
from wheel_tools import RUNFILES, SITES, build_wheel, load_tool

CMAKE_SITE = (
    runfiles_repos.repository("xlabind_cmake_pypi") or RUNFILES.parent / "xlabind_cmake_pypi"
) / "site"
EXAMPLE = runfiles_repos.repository("xlabind_example") or RUNFILES.parent / "xlabind_example"


def environment(tmp_path: pathlib.Path) -> pathlib.Path:
    """A venv seeing the pinned jax and the CMake tools, with the wheel
    installed into it; its python."""
    check_wheel = load_tool("check_wheel")
    python = check_wheel.make_environment(tmp_path / "env", SITES["pinned"])
    (pth,) = (tmp_path / "env" / "venv").rglob("preinstalled_packages.pth")
    pth.write_text(pth.read_text() + f"{CMAKE_SITE}\n")
    check_wheel.install(python, build_wheel(tmp_path / "dist"))
    return python


def run(command: list, cwd: pathlib.Path, with_stderr: bool = False) -> str:
    """`command`'s output (stdout, and stderr after it with `with_stderr`);
    fails the test with both if it fails."""
    done = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=load_tool("check_wheel").clean_environment(),
        timeout=900,
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    return done.stdout + done.stderr if with_stderr else done.stdout


def cmake(python: pathlib.Path) -> pathlib.Path:
    """The cmake binary of the locked cmake package."""
    return (
        pathlib.Path(
            run(
                [python, "-c", "import cmake; print(cmake.CMAKE_BIN_DIR)"], pathlib.Path.cwd()
            ).strip()
        )
        / "cmake"
    )


def copy_examples(tmp_path: pathlib.Path) -> pathlib.Path:
    """examples/native_op and examples/native_op_cmake side by side, as in a
    checkout (the CMake example builds the other's sources)."""
    examples = tmp_path / "examples"
    shutil.copytree(EXAMPLE, examples / "native_op", ignore=shutil.ignore_patterns("bazel-*"))
    shutil.copytree(RUNFILES / "examples" / "native_op_cmake", examples / "native_op_cmake")
    return examples


def test_the_cmake_example_builds_against_the_installed_wheel_and_its_tests_pass(tmp_path):
    python = environment(tmp_path)
    examples = copy_examples(tmp_path)
    log = run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "--no-index",
            "--no-deps",
            "--no-build-isolation",
            "-v",
            examples / "native_op_cmake",
        ],
        tmp_path,
        with_stderr=True,
    )
    assert "Successfully installed xlabind-example-ops" in log, log[-3000:]
    # Built from the wheel's copies of the headers, not from a source tree.
    include = run([python, "-c", "import xlabind; print(xlabind.include_dir())"], tmp_path)
    assert "site-packages" in include, include
    module = run(
        [
            python,
            "-c",
            "import example_ops, sys; print(example_ops.__file__); "
            "print(sorted(example_ops.registrations()))",
        ],
        tmp_path,
    ).split("\n")
    assert "site-packages" in module[0], module
    with_cuda = "CUDA compiler identification" in log
    assert module[1] == str(["CUDA", "cpu"] if with_cuda else ["cpu"]), (module, with_cuda)
    # examples/native_op's own tests, from a folder with no module of its own.
    tests = tmp_path / "tests"
    tests.mkdir()
    for name in ("ops.py", "test_example_ops.py"):
        shutil.copy(examples / "native_op" / name, tests / name)
    out = run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "test_example_ops.py"],
        tests,
    )
    assert "failed" not in out and " passed" in out, out
    assert ("skipped" in out) == (not with_cuda), out


def test_find_package_succeeds_in_a_fresh_cmake_project(tmp_path):
    python = environment(tmp_path)
    cmake_dir = run([python, "-m", "xlabind", "--cmake-dir"], tmp_path).strip()
    assert (pathlib.Path(cmake_dir) / "xlabindConfig.cmake").is_file(), cmake_dir
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        textwrap.dedent(f"""\
        cmake_minimum_required(VERSION 3.18)
        project(consumer LANGUAGES CXX)
        set(Python_EXECUTABLE "{python}")
        find_package(xlabind 0.5 CONFIG REQUIRED)
        add_library(consumer SHARED op.cc)
        target_link_libraries(consumer PRIVATE xlabind::native)
        """)
    )
    (project / "op.cc").write_text(
        textwrap.dedent("""\
        #include "xlabind/native/errors.h"
        #include "xlabind/native/shapes.h"
        #include "xla/ffi/api/ffi.h"
        static_assert(__cplusplus >= 201703L, "xlabind::native asks for C++17");
        """)
    )
    configure = run(
        [cmake(python), "-S", project, "-B", project / "build", f"-Dxlabind_DIR={cmake_dir}"],
        tmp_path,
    )
    assert "Generating done" in configure, configure
    run([cmake(python), "--build", project / "build"], tmp_path)
    # A major version it is not is refused.
    (project / "CMakeLists.txt").write_text(
        (project / "CMakeLists.txt").read_text().replace("xlabind 0.5", "xlabind 1.0")
    )
    done = subprocess.run(
        [
            str(cmake(python)),
            "-S",
            str(project),
            "-B",
            str(tmp_path / "b2"),
            f"-Dxlabind_DIR={cmake_dir}",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "xlabind" in done.stderr and "1.0" in done.stderr, done.stderr


def test_a_handler_built_with_only_the_includes_flags_runs(tmp_path):
    """examples/native_op_cmake/build_plain.sh (one compiler command and
    `python -m xlabind --includes`) and plain_scale.py (ctypes), as the
    docs show them."""
    python = environment(tmp_path)
    flags = run([python, "-m", "xlabind", "--includes"], tmp_path).split()
    assert len(flags) == 2 and all(f.startswith("-I") for f in flags), flags
    examples = copy_examples(tmp_path)
    done = subprocess.run(
        ["sh", str(examples / "native_op_cmake" / "build_plain.sh")],
        capture_output=True,
        text=True,
        timeout=600,
        env=load_tool("check_wheel").clean_environment(PYTHON=str(python)),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    script = textwrap.dedent("""\
        import jax, jax.numpy as jnp, numpy as np
        from plain_scale import scale
        x = jnp.arange(4.0, dtype=jnp.float32)
        np.testing.assert_array_equal(jax.jit(lambda x: scale(x, factor=3.0))(x), 3 * x)
        grad = jax.grad(lambda x: scale(x, factor=3.0).sum())(x)
        np.testing.assert_array_equal(grad, np.full(4, 3.0, np.float32))
        batch = jnp.arange(6.0).reshape(2, 3)
        np.testing.assert_array_equal(jax.vmap(lambda x: scale(x, factor=2.0))(batch),
                                      2 * batch)
        print("ran")
        """)
    assert run([python, "-c", script], examples / "native_op_cmake").strip() == "ran"
