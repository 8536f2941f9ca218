"""Offline stand-in for @rules_python//python:defs.bzl: Bazel 4.2.3's native
Python rules, re-exported.

BUILD files that load their Python rules from @rules_python, as later Bazel
releases expect (Bazel 9 has no native Python rules), build offline on 4.2.3
with this. A workspace that defines rules_python itself keeps its own.
"""

load("@bazel_tools//tools/python:toolchain.bzl", _py_runtime_pair = "py_runtime_pair")

py_binary = native.py_binary
py_library = native.py_library
py_runtime = native.py_runtime
py_runtime_pair = _py_runtime_pair
py_test = native.py_test
