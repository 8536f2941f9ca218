"""The host Python interpreter: the one input xlabind does not pin.

XLABIND_PYTHON (an absolute path) overrides `python3` on PATH. The same
interpreter installs the pinned packages, provides the C headers extensions
compile against, and runs every py_binary and py_test.
"""

def absolute_label(label):
    """`label` as a string that means the same from inside another repository:
    under bzlmod its canonical form (@@...), which any repository can name;
    under WORKSPACE the repository's one global name."""
    if str(label).startswith("@@"):
        return str(label)
    return "@%s//%s:%s" % (label.workspace_name, label.package, label.name)

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

        # Debian's pyconfig.h includes the target's own, by its multiarch
        # name; for a Linux aarch64 build (tools/platforms) that is this
        # machine's x86-64 one, whose every SIZEOF_ and ALIGNOF_ macro an
        # aarch64 CPython of the same version shares (both LP64, with a
        # 16-byte long double). Only that build's include path names it.
        rctx.symlink(
            "/usr/include/%s/%s" % (multiarch, python),
            "cross/linux_aarch64/aarch64-linux-gnu/%s" % python,
        )
    else:
        rctx.file("platform/README", "No multiarch headers: pyconfig.h is in include/.\n")

    # Debian's pyconfig.h knows no location for macOS: for a macOS build,
    # include/ again, with this machine's own pyconfig.h in its place.
    macos_include = "include"
    if multiarch and "multiarch" in rctx.read(include + "/pyconfig.h"):
        for entry in rctx.path(include).readdir():
            if entry.basename != "pyconfig.h":
                rctx.symlink(entry, "cross/macos_arm64/" + entry.basename)
        rctx.symlink(
            "/usr/include/%s/python%s/pyconfig.h" % (multiarch, version),
            "cross/macos_arm64/pyconfig.h",
        )
        macos_include = "cross/macos_arm64"
    rctx.template("BUILD.bazel", rctx.attr.build_template, {
        "{INTERPRETER}": executable,
        "{LINUX_AARCH64}": absolute_label(rctx.attr.linux_aarch64),
        "{MACOS}": absolute_label(rctx.attr.macos),
        "{MACOS_INCLUDE}": macos_include,
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
        "linux_aarch64": attr.label(
            default = Label("//tools/platforms:linux_aarch64_target"),
            doc = "the condition of a build for Linux aarch64",
        ),
        "macos": attr.label(
            default = Label("//tools/platforms:macos_target"),
            doc = "the condition of a build for macOS",
        ),
    },
    environ = ["XLABIND_PYTHON", "XLABIND_LOCK", "PATH"],
    local = True,
)
