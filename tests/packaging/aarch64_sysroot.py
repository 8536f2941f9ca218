#!/usr/bin/env python3
"""Makes, once, a Linux aarch64 sysroot from Debian's packages, with jax's
aarch64 wheels beside its CPython, where xlabind's aarch64 wheel runs under
qemu-user on this x86_64 machine: the environment of
tests/packaging/test_wheel_emulated.py, which finds it here (sysroot,
is_ready), and which CI makes before that test runs.

    python3 tests/packaging/aarch64_sysroot.py --python 3.11  # prints its folder
    python3 tests/packaging/aarch64_sysroot.py --python 3.13

Debian ships CPython 3.11 for aarch64 in bookworm and 3.13 in trixie (no 3.12
or 3.14): those are the two versions. The sysroot holds:

  ROOT/usr/bin/python3.X        Debian's CPython, and libpython3.X-dev's
                                headers (the aarch64 pyconfig.h)
  ROOT/opt/xlabind-site         third_party/python/aarch64_tests.lock: jax,
                                jaxlib, NumPy, SciPy, pytest (hash-checked)

and runs without root, binfmt or chroot:

    PYTHONPATH=ROOT/opt/xlabind-site qemu-aarch64-static -L ROOT \\
        ROOT/usr/bin/python3.11 script.py

debootstrap downloads the packages (checked against Debian's signed
release files) and unpacks them with its first stage alone (--foreign): no
package's scripts run, so nothing here runs under emulation. pip installs
the lock for aarch64 (--platform) with --require-hashes. A finished sysroot
is reused until its packages or the lock change. Needs root (debootstrap),
and installs debootstrap and qemu-user-static with apt-get where missing.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys

# Not resolved: under Bazel the runfiles tree (symlinks) holds the lock.
REPO = pathlib.Path(__file__).parents[2]
LOCK = REPO / "third_party" / "python" / "aarch64_tests.lock"
#: The Debian release of each CPython version it ships for aarch64.
SUITES = {"3.11": "bookworm", "3.13": "trixie"}
#: Where the sysroots live, one folder per release (XLABIND_AARCH64_SYSROOTS).
DEFAULT_PARENT = pathlib.Path("/var/cache/xlabind/aarch64")
#: pip's platform tags for Linux aarch64 (tools/update_lock.py's TARGET_PLATFORMS).
PLATFORMS = (
    "manylinux_2_17_aarch64",
    "manylinux2014_aarch64",
    "manylinux_2_27_aarch64",
    "manylinux_2_28_aarch64",
)
SITE = "opt/xlabind-site"
READY = ".xlabind-ready"


def parent_folder() -> pathlib.Path:
    return pathlib.Path(os.environ.get("XLABIND_AARCH64_SYSROOTS") or DEFAULT_PARENT)


def sysroot(python: str) -> pathlib.Path:
    """Where the sysroot for CPython `python` ("3.11", "3.13") is or will be."""
    if python not in SUITES:
        raise ValueError(
            f"sysroot: python must be one of {sorted(SUITES)} (Debian's aarch64 CPythons), "
            f"not {python!r}"
        )
    return parent_folder() / SUITES[python]


def packages(python: str) -> list[str]:
    return [f"python{python}", f"libpython{python}-dev"]


def fingerprint(python: str) -> str:
    """What a finished sysroot was made from: its release and packages, and
    the lock's sha256. A sysroot whose READY file says otherwise is made again."""
    lock = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    return f"{SUITES[python]} {' '.join(packages(python))} {lock} compiled\n"


def is_ready(python: str) -> bool:
    ready = sysroot(python) / READY
    return ready.is_file() and ready.read_text() == fingerprint(python)


def _mirror() -> str:
    """The Debian mirror apt already uses (as tools/bazel7 does)."""
    sources = pathlib.Path("/etc/apt/sources.list.d/debian.sources")
    if sources.is_file():
        found = re.search(r"^URIs:\s*(\S+)", sources.read_text(), flags=re.M)
        if found:
            return found.group(1)
    return "http://deb.debian.org/debian"


def _install_tools() -> None:
    missing = [
        package
        for command, package in (
            ("debootstrap", "debootstrap"),
            ("qemu-aarch64-static", "qemu-user-static"),
        )
        if not shutil.which(command) and not pathlib.Path("/usr/sbin", command).exists()
    ]
    if missing:
        environment = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=environment)


def make(python: str) -> pathlib.Path:
    """The sysroot for CPython `python`, made unless it is ready."""
    root = sysroot(python)
    if is_ready(python):
        return root
    if os.geteuid() != 0:
        sys.exit("aarch64_sysroot: making a sysroot needs root (debootstrap)")
    _install_tools()
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    include = "--include=" + ",".join(packages(python))
    command = ["debootstrap", "--arch=arm64", "--foreign", "--variant=minbase", include]
    subprocess.run(
        [*command, SUITES[python], str(root), _mirror()], check=True, stdout=subprocess.DEVNULL
    )
    # The first stage unpacks only what its second stage needs: the rest,
    # CPython among it, waits as .deb files. Unpack them all here.
    archives = root / "var" / "cache" / "apt" / "archives"
    for deb in sorted(archives.glob("*.deb")):
        subprocess.run(["dpkg-deb", "--extract", str(deb), str(root)], check=True)
        deb.unlink()
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--no-deps", "--require-hashes", "--only-binary=:all:", "--no-compile"]
    command += ["--implementation", "cp", "--python-version", python, "--target", str(root / SITE)]
    command += ["-r", str(LOCK), *(f"--platform={platform}" for platform in PLATFORMS)]
    subprocess.run(command, check=True, env=dict(os.environ, PIP_BREAK_SYSTEM_PACKAGES="1"))
    compile_sources(python)
    (root / READY).write_text(fingerprint(python))
    return root


def compile_sources(python: str) -> None:
    """Byte-compiles CPython's library and the lock's packages once: nothing
    ran Debian's py3compile (--foreign) or pip's compile (--no-compile), and
    the tests run with PYTHONDONTWRITEBYTECODE, so every emulated process
    compiled jax from its sources (`import jax`: 105 s of CPU under qemu,
    against 3-4 s compiled). Bytecode is the same on every machine: a host
    CPython of the same version (the same magic number) compiles it on every
    core in seconds; without one, the sysroot's own does, under qemu (about
    6 minutes of a core), in one process (compileall's workers cannot start
    under qemu-user without binfmt). Test folders are left out: nothing
    imports them."""
    root = sysroot(python)
    folders = [root / "usr" / "lib" / f"python{python}", root / SITE]
    emulated = [
        "qemu-aarch64-static",
        "-L",
        str(root),
        str(root / "usr" / "bin" / f"python{python}"),
    ]
    host = host_python(python, emulated)
    compiler = [host, "-m", "compileall", "-j", "0"] if host else [*emulated, "-m", "compileall"]
    subprocess.run(
        [*compiler, "-q", "-x", r"[/\\]tests?[/\\]", *map(str, folders)],
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )


_MAGIC = "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"


def host_python(python: str, emulated: list[str]) -> str | None:
    """A CPython `python` (X.Y) of this machine (on PATH, else pyenv's) whose
    bytecode is the emulated one's, or None."""
    pyenv = pathlib.Path(os.environ.get("PYENV_ROOT") or pathlib.Path.home() / ".pyenv")
    found = [shutil.which(f"python{python}")]
    found += sorted(map(str, pyenv.glob(f"versions/{python}.*/bin/python{python}")))
    magic = subprocess.run(
        [*emulated, "-c", _MAGIC], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    ).stdout
    for candidate in filter(None, found):
        done = subprocess.run([candidate, "-c", _MAGIC], capture_output=True, text=True)
        if done.returncode == 0 and magic and done.stdout == magic:
            return candidate
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, choices=sorted(SUITES))
    args = parser.parse_args()
    print(make(args.python))
    return 0


if __name__ == "__main__":
    sys.exit(main())
