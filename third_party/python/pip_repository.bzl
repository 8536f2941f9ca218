"""pip_repository: installs a hash-pinned lock file into an external repository.

The packages land in <repo>/site, installed by the host interpreter's pip with
--require-hashes, so every byte is checked against the lock. The BUILD file of
the repository comes from the main repository (`build_file`), so what the
packages expose to Bazel is reviewed like any other source.
"""

load("//third_party/python:interpreter.bzl", "find_python")

_COMPILE_ALL = """
import compileall, re, sys
skip = re.compile(re.escape(sys.argv[1]) + r".*[/\\\\]tests?[/\\\\]")
# A file that does not compile (one written for another Python) is left to
# its source, as pip leaves it.
compileall.compile_dir(sys.argv[1], quiet=2, workers=0, rx=skip)
"""

def pip_install(rctx, lock, target, platforms = []):
    """Installs the hash-pinned `lock` (a Label) into `target` under rctx:
    this machine's wheels, or those of another machine where `platforms`
    names its pip platform tags (then nothing is compiled: such a wheel's
    files are headers to build against, not code to run here)."""
    python = find_python(rctx)
    args = [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--require-hashes",
        "--only-binary=:all:",
        # Bytecode is compiled below, on every core and without the
        # packages' own test suites.
        "--no-compile",
        "--target",
        str(rctx.path(target)),
        "-r",
        str(rctx.path(lock)),
    ]
    for platform in platforms:
        args += ["--platform", platform]
    rctx.report_progress("pip install -r %s" % lock)
    _run(rctx, "pip install of %s" % lock, args, {
        # Debian's pip refuses installs into an "externally managed" Python
        # even with --target; this install touches only the repository.
        "PIP_BREAK_SYSTEM_PACKAGES": "1",
    })

    if platforms:
        return

    # The packages' bytecode, compiled here once: tests run in sandboxes that
    # cannot write it, and would otherwise compile jax from source in every
    # process (about a second each). Not their own tests/ folders, which
    # nothing imports (a fifth of the source), and on every core (pip's own
    # compile used one).
    _run(
        rctx,
        "compiling the bytecode of %s" % lock,
        [python, "-c", _COMPILE_ALL, str(rctx.path(target))],
        {"PYTHONDONTWRITEBYTECODE": ""},
    )

def _run(rctx, what, args, environment):
    """Runs `args` in the repository; fails naming `what`, with its output."""
    result = rctx.execute(args, timeout = 1800, quiet = True, environment = environment)
    if result.return_code != 0:
        fail("%s failed (exit %d):\n%s\n%s" % (what, result.return_code, result.stdout, result.stderr))

def lock_pins(rctx, lock):
    """`lock`'s pins (its `name==version` and sha256 lines) as shell comment
    lines: in a tool's wrapper script they make the wrapper, and so the key of
    every action that runs it, change whenever the pinned tool does."""
    pins = []
    for line in rctx.read(lock).splitlines():
        line = line.strip().rstrip("\\").strip()
        if "==" in line or line.startswith("--hash="):
            pins.append("# " + line + "\n")
    return "".join(pins)

def _chosen_lock(rctx):
    """The lock XLABIND_LOCK picks: "pinned" (the default) or "newest" (where
    the repository has one; the others keep their one lock)."""
    choice = rctx.os.environ.get("XLABIND_LOCK", "pinned")
    if choice not in ("pinned", "newest"):
        fail('XLABIND_LOCK must be "pinned" or "newest", not %r' % choice)
    if choice == "newest" and rctx.attr.newest_lock:
        return rctx.attr.newest_lock
    return rctx.attr.lock

def _pip_repository_impl(rctx):
    pip_install(rctx, _chosen_lock(rctx), "site")
    rctx.symlink(rctx.attr.build_file, "BUILD.bazel")
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)

pip_repository = repository_rule(
    implementation = _pip_repository_impl,
    attrs = {
        "lock": attr.label(mandatory = True, allow_single_file = True),
        # What XLABIND_LOCK=newest installs instead (the newest jax, NumPy,
        # SciPy and ml_dtypes, for CPython 3.12 and later).
        "newest_lock": attr.label(allow_single_file = True),
        "build_file": attr.label(mandatory = True, allow_single_file = True),
    },
    environ = ["XLABIND_PYTHON", "XLABIND_LOCK"],
)

def _target_headers_repository_impl(rctx):
    pip_install(rctx, rctx.attr.lock, "site", platforms = rctx.attr.platforms)
    rctx.symlink(rctx.attr.build_file, "BUILD.bazel")
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)

# Another machine's wheels of the pinned packages (for the version of the
# host interpreter, XLABIND_PYTHON), whose headers a build for that machine
# compiles against (tools/platforms): each target's own NumPy C API
# configuration (_numpyconfig.h), as its wheel ships it.
target_headers_repository = repository_rule(
    implementation = _target_headers_repository_impl,
    attrs = {
        "lock": attr.label(mandatory = True, allow_single_file = True),
        "platforms": attr.string_list(
            mandatory = True,
            doc = "pip's platform tags for the target (--platform), any of which will do",
        ),
        "build_file": attr.label(mandatory = True, allow_single_file = True),
    },
    environ = ["XLABIND_PYTHON"],
)
