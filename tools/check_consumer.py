#!/usr/bin/env python3
"""Builds and tests tests/consumer, another Bazel workspace that uses xlabind,
the two ways README's "From another Bazel workspace" offers:

  readme  tests/consumer as it is: xlabind as a local_repository, the zig
          toolchain opted into, its .bazelrc, and tools/forward_compat.bazelrc
          (what later Bazel releases make the default);
  own     a copy of it that pins xlabind as README's http_archive of a
          `git archive` tarball of this checkout (sha256, strip_prefix), with
          no .bazelrc at all: Bazel's auto-configured C++ toolchain, legacy
          __init__.py creation in runfiles.

    tools/check_consumer.py [readme] [own]

Each checks which compiler built the consumer's module (zig links libc++ in;
the host gcc needs libstdc++.so). CI runs both.
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
BAZEL = REPO / "tools" / "bazel"
CONSUMER = REPO / "tests" / "consumer"
# The consumer's sources, without its .bazelrc, WORKSPACE and README check.
SOURCES = ("BUILD.bazel", "consumer_handlers.bzl", "scale_handlers.cc", "scale_kernels.cu",
           "scale_kernels.h", "square_handlers.cc", "table_handlers.cc", "table_kernels.cu",
           "table_kernels.h", "test_consumer_ops.py")


def run(command: list[str], cwd: pathlib.Path) -> None:
    print("+", " ".join(map(str, command)), f"(in {cwd})", flush=True)
    subprocess.run(command, cwd=cwd, check=True)


def needs_libstdcxx(module: pathlib.Path) -> bool:
    dynamic = subprocess.run(["readelf", "-d", str(module)], capture_output=True, text=True,
                             check=True).stdout
    return "libstdc++.so" in dynamic


def readme_http_archive() -> str:
    """README's http_archive block (```starlark http_archive)."""
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```starlark http_archive\n(.*?)```", readme, flags=re.S)
    if len(blocks) != 1:
        raise SystemExit(f"check_consumer: README has {len(blocks)} http_archive blocks, not 1")
    return blocks[0]


def make_tarball(prefix: str, out: pathlib.Path) -> str:
    """`git archive` of this checkout (uncommitted changes to tracked files
    included) with `prefix`; returns its sha256."""
    snapshot = subprocess.run(["git", "stash", "create"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip() or "HEAD"
    subprocess.run(["git", "archive", "--format=tar.gz", f"--prefix={prefix}/", "-o", str(out),
                    snapshot], cwd=REPO, check=True)
    return hashlib.sha256(out.read_bytes()).hexdigest()


def own_workspace(root: pathlib.Path) -> pathlib.Path:
    """The consumer, pinning xlabind by README's http_archive of a tarball."""
    block = readme_http_archive()
    prefix = re.search(r'strip_prefix = "([^"]+)"', block).group(1)
    tarball = root / f"{prefix}.tar.gz"
    sha256 = make_tarball(prefix, tarball)
    workspace = re.sub(r"urls = \[[^\]]*\]", f'urls = ["file://{tarball}"]', block)
    workspace, replaced = re.subn(r'sha256 = "[^"]*"', f'sha256 = "{sha256}"', workspace)
    if replaced != 1 or f"file://{tarball}" not in workspace:
        raise SystemExit("check_consumer: README's http_archive block lacks urls or sha256")
    consumer = root / "consumer"
    consumer.mkdir()
    (consumer / "WORKSPACE").write_text('workspace(name = "consumer")\n\n' + workspace)
    for name in SOURCES:
        shutil.copy(CONSUMER / name, consumer / name)
    return consumer


def check_readme() -> None:
    run([str(BAZEL), f"--bazelrc={REPO / 'tools' / 'forward_compat.bazelrc'}", "test", "//..."],
        CONSUMER)
    module = CONSUMER / "bazel-bin" / "consumer_ops.so"
    if needs_libstdcxx(module):
        raise SystemExit("check_consumer: readme: consumer_ops.so needs libstdc++, so zig did "
                         "not build it")
    print("check_consumer: readme: passed, built by zig")


def check_unknown_platform(consumer: pathlib.Path, output_base: pathlib.Path) -> None:
    """A handlers key other than cpu / cuda fails the build, naming both."""
    bad = consumer / "bad_platform"
    bad.mkdir()
    (bad / "BUILD.bazel").write_text(
        'load("@xlabind//ffi:defs.bzl", "xlabind_extension")\n\n'
        'xlabind_extension(name = "ops", handlers = {"rocm": {"op": "Op"}})\n')
    done = subprocess.run([str(BAZEL), f"--output_base={output_base}", "--bazelrc=/dev/null",
                           "build", "//bad_platform:all"], cwd=consumer, capture_output=True,
                          text=True)
    expected = 'unknown platform "rocm" in handlers; use "cpu" or "cuda" (any case)'
    if done.returncode == 0 or expected not in done.stderr:
        raise SystemExit(f"check_consumer: own: an unknown platform did not fail the build with "
                         f"{expected!r}:\n{done.stderr[-2000:]}")
    shutil.rmtree(bad)


def check_own() -> None:
    root = pathlib.Path(tempfile.mkdtemp(prefix="xlabind-consumer-"))
    output_base = root / "output_base"
    try:
        consumer = own_workspace(root)
        run([str(BAZEL), f"--output_base={output_base}", "--bazelrc=/dev/null", "test",
             "//:test_consumer_ops", "--test_output=errors",
             "--nosandbox_debug"],  # Debian's /etc/bazel/bazelrc logs every mount
            consumer)
        # Bazel made the runfiles' folders packages (what used to shadow
        # xlabind), and the test passed all the same.
        runfiles = consumer / "bazel-bin" / "test_consumer_ops.runfiles" / "xlabind"
        if not (runfiles / "python" / "__init__.py").exists():
            raise SystemExit("check_consumer: own: Bazel created no __init__.py files in the "
                             "runfiles; the variant no longer tests the default")
        module = consumer / "bazel-bin" / "consumer_ops.so"
        if not needs_libstdcxx(module):
            raise SystemExit("check_consumer: own: consumer_ops.so does not need libstdc++, so "
                             "the host toolchain did not build it")
        check_unknown_platform(consumer, output_base)
        print("check_consumer: own: passed, built by the workspace's own toolchain")
    finally:
        subprocess.run([str(BAZEL), f"--output_base={output_base}", "shutdown"], cwd=root)
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", choices=("readme", "own"),
                        default=["readme", "own"])
    for variant in parser.parse_args().variants:
        {"readme": check_readme, "own": check_own}[variant]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
