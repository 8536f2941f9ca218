"""xlabind_cc_library: a compiled library of xlabind's own C++ (the callback
core under ffi/common, ffi/cpu and ffi/cuda), for its BUILD files only.

Each of them is compiled with xlabind's flags (XLABIND_COPTS: C++17, hidden
visibility) and linked statically into the extension module that uses it:
nanobind's internals are hidden, so each module carries its own copy (see
ffi/BUILD.bazel). Handler authors use the public macros of ffi/defs.bzl.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")
load("//ffi:defs.bzl", "XLABIND_COPTS")

def xlabind_cc_library(name, copts = [], **kwargs):
    """A cc_library with xlabind's copts (then `copts`), linked statically.

    Args:
      name: the target's name.
      copts: flags after XLABIND_COPTS.
      **kwargs: the rest of cc_library's attributes.
    """
    cc_library(
        name = name,
        copts = XLABIND_COPTS + copts,
        linkstatic = True,
        **kwargs
    )
