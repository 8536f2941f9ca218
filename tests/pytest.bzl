"""pytest_test: one pytest file as a py_test against the built xlabind package."""

load("@rules_python//python:defs.bzl", "py_test")

def pytest_test(name, src, deps = [], data = [], pytest_args = [], **kwargs):
    py_test(
        name = name,
        srcs = [src, "//tests:run_pytest.py"],
        main = "//tests:run_pytest.py",
        args = ["$(location %s)" % src] + pytest_args,
        python_version = "PY3",
        deps = ["//python:xlabind"] + deps,
        data = data,
        **kwargs
    )
