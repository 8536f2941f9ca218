"""pytest_test: one pytest file as a py_test against the built xlabind package;
pytest_tests: one for each file of a list; pytest_group: several files in one
process."""

load("@rules_python//python:defs.bzl", "py_test")
load("//tools:checkout.bzl", "checkout_files")

def pytest_test(name, src, deps = [], data = [], pytest_args = [], package = "//python:xlabind", **kwargs):
    """`package`: the xlabind target the test runs against."""
    py_test(
        name = name,
        srcs = [src, "//tests:run_pytest.py"],
        main = "//tests:run_pytest.py",
        args = ["$(location %s)" % src] + pytest_args,
        python_version = "PY3",
        deps = [package] + deps,
        data = data,
        **kwargs
    )

def pytest_group(name, srcs, deps = [], data = [], **kwargs):
    """Several pytest files in one process: they share its jax import (two
    seconds a file) and jax's caches. Only for files that set up jax alike
    (jax_enable_x64, the number of devices) and count nothing process-wide."""
    py_test(
        name = name,
        srcs = srcs + ["//tests:run_pytest.py"],
        main = "//tests:run_pytest.py",
        args = ["$(location %s)" % src for src in srcs],
        python_version = "PY3",
        deps = ["//python:xlabind"] + deps,
        data = data,
        size = "small",
        timeout = "moderate",
        **kwargs
    )

def pytest_tests(srcs, deps = [], data = {}, timeouts = {}, tags = {}, shard_counts = {}, **kwargs):
    """A pytest_test per file of `srcs`, named after it; `data`, `timeouts`,
    `tags` and `shard_counts` by file name (else none, "moderate", none, 1:
    a file that would run alone at the end of a cold `bazel test //...` is
    split so that both cores finish together; tests/run_pytest.py)."""
    for src in srcs:
        pytest_test(
            name = src[:-len(".py")],
            src = src,
            size = "small",
            timeout = timeouts.get(src, "moderate"),
            data = data.get(src, []),
            tags = tags.get(src, []),
            shard_count = shard_counts.get(src, 1),
            deps = deps,
            **kwargs
        )

def folder_files():
    """This folder's Python files (`test_files`: the suite run against the
    installed wheel) and its Starlark (`bazel_files`:
    tests/packaging/test_bazel_files.py), for //tests to gather; and all its
    files (`checkout_files`: tools/checkout.bzl)."""
    checkout_files()
    native.filegroup(
        name = "test_files",
        srcs = native.glob(["*.py"]),
        visibility = ["//tests:__pkg__"],
    )
    native.filegroup(
        name = "bazel_files",
        srcs = native.glob(["BUILD.bazel", "*.bzl"], allow_empty = True),
        visibility = ["//tests:__pkg__"],
    )
