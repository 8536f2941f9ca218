#!/usr/bin/env python3
"""Builds and tests examples/native_op, another Bazel workspace that uses
xlabind, pinned the way the documentation says (its WORKSPACE's http_archive),
two ways:

  docs  the workspace as it is, with its .bazelrc (xlabind's zig toolchain)
        and tools/forward_compat.bazelrc (what later Bazel releases make the
        default); @xlabind is this checkout (--override_repository);
  own   a copy whose http_archive pins a `git archive` tarball of this
        checkout by its sha256, with no .bazelrc at all: Bazel's
        auto-configured C++ toolchain, legacy __init__.py creation in
        runfiles, no zig registered.

and two ways with Bazel 7.7.1 (tools/bazel7), bzlmod only, in a copy outside
this checkout with only the MODULE.bazel (no WORKSPACE), whose
archive_override pins the tarball by its sha256:

  module      with the example's .bazelrc and xlabind's zig toolchain, as its
              MODULE.bazel registers it;
  module-own  with no .bazelrc and nothing of xlabind's toolchain registered:
              the consumer's own (Bazel's auto-configured gcc).

    tools/check_example.py [docs] [own] [module] [module-own]

Each checks which compiler built the example's module (zig links libc++ in;
the host gcc needs libstdc++.so). CI runs all four.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
BAZEL = REPO / "tools" / "bazel"
BAZEL7 = REPO / "tools" / "bazel7"
EXAMPLE = REPO / "examples" / "native_op"
MODULE = "example_ops.so"


def run(command: list[str], cwd: pathlib.Path) -> None:
    print("+", " ".join(map(str, command)), f"(in {cwd})", flush=True)
    subprocess.run(command, cwd=cwd, check=True)


def needs_libstdcxx(module: pathlib.Path) -> bool:
    dynamic = subprocess.run(
        ["readelf", "-d", str(module)], capture_output=True, text=True, check=True
    ).stdout
    return "libstdc++.so" in dynamic


def make_tarball(prefix: str, out: pathlib.Path) -> str:
    """`git archive` of this checkout (uncommitted changes to tracked files
    included) with `prefix`; returns its sha256."""
    snapshot = (
        subprocess.run(
            ["git", "stash", "create"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        or "HEAD"
    )
    subprocess.run(
        ["git", "archive", "--format=tar.gz", f"--prefix={prefix}/", "-o", str(out), snapshot],
        cwd=REPO,
        check=True,
    )
    return hashlib.sha256(out.read_bytes()).hexdigest()


def own_workspace(root: pathlib.Path) -> pathlib.Path:
    """The example, its http_archive pinning a tarball of this checkout, and
    without the optional zig toolchain."""
    workspace = (EXAMPLE / "WORKSPACE").read_text()
    prefix = re.search(r'strip_prefix = "([^"]+)"', workspace).group(1)
    tarball = root / f"{prefix}.tar.gz"
    sha256 = make_tarball(prefix, tarball)
    workspace, urls = re.subn(r"urls = \[[^\]]*\]", f'urls = ["file://{tarball}"]', workspace)
    workspace, sums = re.subn(r'sha256 = "[^"]*"', f'sha256 = "{sha256}"', workspace)
    workspace = workspace[: workspace.index("# Optional: build all C/C++ with xlabind's")]
    if urls != 1 or sums != 1:
        raise SystemExit("check_example: the example's WORKSPACE lacks one urls and one sha256")
    example = root / "example"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("bazel-*", ".bazelrc"))
    (example / "WORKSPACE").write_text(workspace)
    return example


def module_workspace(root: pathlib.Path, zig: bool) -> pathlib.Path:
    """The example with only its MODULE.bazel, its archive_override pinning a
    tarball of this checkout; `zig`: with its .bazelrc and the registration
    of xlabind's zig, else neither."""
    module = (EXAMPLE / "MODULE.bazel").read_text()
    prefix = re.search(r'strip_prefix = "([^"]+)"', module).group(1)
    tarball = root / f"{prefix}.tar.gz"
    digest = bytes.fromhex(make_tarball(prefix, tarball))
    integrity = "sha256-" + base64.b64encode(digest).decode()
    module, urls = re.subn(r"urls = \[[^\]]*\]", f'urls = ["file://{tarball}"]', module)
    module, sums = re.subn(r'integrity = "[^"]*"', f'integrity = "{integrity}"', module)
    if urls != 1 or sums != 1:
        raise SystemExit(
            "check_example: the example's MODULE.bazel lacks one urls and one integrity"
        )
    if not zig:
        module = module[: module.index("# [zig]")]
    example = root / "example"
    ignored = ["bazel-*", "WORKSPACE"] + ([] if zig else [".bazelrc"])
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns(*ignored))
    (example / "MODULE.bazel").write_text(module)
    return example


def check_module(zig: bool) -> None:
    variant = "module" if zig else "module-own"
    compiler = "zig" if zig else "the workspace's own toolchain"
    # A fixed folder outside the checkout, emptied first: Bazel keys its
    # output base by the workspace's path, so a rerun reuses the last one's.
    root = pathlib.Path.home() / ".cache" / "xlabind-bazel7" / "consumers" / variant
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    example = module_workspace(root, zig)
    try:
        run([str(BAZEL7), "test", "//...", "--test_output=errors"], example)
        if needs_libstdcxx(example / "bazel-bin" / MODULE) == zig:
            raise SystemExit(f"check_example: {variant}: {MODULE} was not built by {compiler}")
        print(
            f"check_example: {variant}: passed under Bazel 7.7.1, bzlmod only, built by {compiler}"
        )
    finally:
        subprocess.run([str(BAZEL7), "shutdown"], cwd=example)


def check_docs() -> None:
    run(
        [
            str(BAZEL),
            f"--bazelrc={REPO / 'tools' / 'forward_compat.bazelrc'}",
            "test",
            f"--override_repository=xlabind={REPO}",
            "//...",
        ],
        EXAMPLE,
    )
    module = EXAMPLE / "bazel-bin" / MODULE
    if needs_libstdcxx(module):
        raise SystemExit(f"check_example: docs: {MODULE} needs libstdc++, so zig did not build it")
    print("check_example: docs: passed, built by zig")


def check_unknown_platform(example: pathlib.Path, output_base: pathlib.Path) -> None:
    """A handlers key other than cpu / cuda fails the build, naming both."""
    bad = example / "bad_platform"
    bad.mkdir()
    (bad / "BUILD.bazel").write_text(
        'load("@xlabind//ffi:defs.bzl", "xlabind_extension")\n\n'
        'xlabind_extension(name = "ops", handlers = {"rocm": {"op": "Op"}})\n'
    )
    done = subprocess.run(
        [
            str(BAZEL),
            f"--output_base={output_base}",
            "--bazelrc=/dev/null",
            "build",
            "//bad_platform:all",
        ],
        cwd=example,
        capture_output=True,
        text=True,
    )
    expected = 'unknown platform "rocm" in handlers; use "cpu" or "cuda" (any case)'
    if done.returncode == 0 or expected not in done.stderr:
        raise SystemExit(
            f"check_example: own: an unknown platform did not fail the build with "
            f"{expected!r}:\n{done.stderr[-2000:]}"
        )
    shutil.rmtree(bad)


def check_own() -> None:
    root = pathlib.Path(tempfile.mkdtemp(prefix="xlabind-example-"))
    output_base = root / "output_base"
    try:
        example = own_workspace(root)
        run(
            [
                str(BAZEL),
                f"--output_base={output_base}",
                "--bazelrc=/dev/null",
                "test",
                "//:test_example_ops",
                "--test_output=errors",
                "--nosandbox_debug",
            ],  # Debian's /etc/bazel/bazelrc logs every mount
            example,
        )
        # Bazel made the runfiles' folders packages (what used to shadow
        # xlabind), and the test passed all the same.
        runfiles = example / "bazel-bin" / "test_example_ops.runfiles" / "xlabind"
        if not (runfiles / "python" / "__init__.py").exists():
            raise SystemExit(
                "check_example: own: Bazel created no __init__.py files in the "
                "runfiles; the variant no longer tests the default"
            )
        module = example / "bazel-bin" / MODULE
        if not needs_libstdcxx(module):
            raise SystemExit(
                f"check_example: own: {MODULE} does not need libstdc++, so the "
                f"host toolchain did not build it"
            )
        check_unknown_platform(example, output_base)
        print("check_example: own: passed, built by the workspace's own toolchain")
    finally:
        subprocess.run([str(BAZEL), f"--output_base={output_base}", "shutdown"], cwd=root)
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    checks = {
        "docs": check_docs,
        "own": check_own,
        "module": lambda: check_module(zig=True),
        "module-own": lambda: check_module(zig=False),
    }
    parser.add_argument("variants", nargs="*", choices=tuple(checks), default=list(checks))
    for variant in parser.parse_args().variants:
        checks[variant]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
