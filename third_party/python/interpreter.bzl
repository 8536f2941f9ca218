"""The host Python interpreter: the one input xlabind does not pin.

XLABIND_PYTHON (an absolute path) overrides `python3` on PATH. The same
interpreter installs the pinned packages, provides the C headers extensions
compile against, and runs every py_binary and py_test.
"""

def find_python(rctx):
    python = rctx.os.environ.get("XLABIND_PYTHON", "")
    if python:
        return rctx.path(python)
    found = rctx.which("python3")
    if not found:
        fail("xlabind needs python3 (3.11-3.13) on PATH, or XLABIND_PYTHON set to one")
    return found

# The CPython versions each lock has wheels for (XLABIND_LOCK: pip_repository.bzl).
_SUPPORTED = {
    "pinned": ((3, 11), (3, 13), "xlabind pins jax 0.10.2, which supports CPython 3.11-3.13"),
    "newest": ((3, 12), (3, 14), "XLABIND_LOCK=newest pins jax 0.12.0.1, for CPython 3.12-3.14"),
}

_PROBE = """
import sys, sysconfig
if not ({low} <= sys.version_info[:2] <= {high}):
    sys.exit("{why}; found %d.%d" % sys.version_info[:2])
# The callback registry and call path rely on the GIL, and no free-threaded
# CPython has run the suite yet (docs/getting-started/install.md).
if sysconfig.get_config_var("Py_GIL_DISABLED"):
    sys.exit("xlabind does not build for free-threaded CPython yet; found " + sys.executable)
print(sys.executable)
print(sysconfig.get_paths()["include"])
print("%d.%d" % sys.version_info[:2])
# Debian's pyconfig.h includes <MULTIARCH/pythonX.Y/pyconfig.h> from
# /usr/include, which a hermetic compiler (zig) does not search.
multiarch = sysconfig.get_config_var("MULTIARCH") or ""
platform = "/usr/include/%s/python%d.%d" % ((multiarch,) + sys.version_info[:2])
import os
print(multiarch if multiarch and os.path.isdir(platform) else "")
"""

def _local_python_impl(rctx):
    python = find_python(rctx)
    low, high, why = _SUPPORTED.get(
        rctx.os.environ.get("XLABIND_LOCK", "pinned"),
        _SUPPORTED["pinned"],
    )
    result = rctx.execute([python, "-c", _PROBE.format(low = low, high = high, why = why)])
    if result.return_code != 0:
        fail("probing %s failed:\n%s" % (python, result.stderr))
    lines = result.stdout.strip().split("\n") + [""]
    executable, include, version, multiarch = lines[:4]
    rctx.symlink(include, "include")
    if multiarch:
        python = "python" + version
        rctx.symlink(
            "/usr/include/%s/%s" % (multiarch, python),
            "platform/%s/%s" % (multiarch, python),
        )
    else:
        rctx.file("platform/README", "No multiarch headers: pyconfig.h is in include/.\n")
    rctx.template("BUILD.bazel", rctx.attr.build_template, {
        "{INTERPRETER}": executable,
        "{VERSION}": version,
    })
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)

local_python = repository_rule(
    implementation = _local_python_impl,
    attrs = {
        "build_template": attr.label(
            default = Label("//third_party/python:local_python.BUILD.tpl"),
            allow_single_file = True,
        ),
    },
    environ = ["XLABIND_PYTHON", "XLABIND_LOCK", "PATH"],
    local = True,
)
