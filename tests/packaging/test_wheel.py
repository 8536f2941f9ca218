"""The wheel from tools/build_wheel.py: what it holds (and nothing else), its
RECORD, its metadata's ranges; the cuda13 extra's CUDA runtime is found through
RUNPATH. tests/packaging/test_wheel_installed.py installs it beside each lock's jax."""

import base64
import hashlib
import json
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import runfiles_repos
from wheel_tools import RUNFILES, SITES, build_wheel, load_tool

from xlabind import _compatibility


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return build_wheel(tmp_path_factory.mktemp("dist"))


def read(wheel: pathlib.Path, suffix: str) -> bytes:
    archive = zipfile.ZipFile(wheel)
    return archive.read(next(n for n in archive.namelist() if n.endswith(suffix)))


def test_the_wheel_is_reproducible_and_tagged_for_this_interpreter(wheel, tmp_path):
    again = build_wheel(tmp_path)
    assert again.read_bytes() == wheel.read_bytes()  # fixed time stamps, sorted entries
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheel.name.endswith(f"-{tag}-{tag}-manylinux_2_17_x86_64.whl"), wheel.name


def test_the_wheel_holds_the_package_and_nothing_else(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "xlabind/__init__.py",
        "xlabind/py.typed",
        "xlabind/ops/__init__.py",
        "xlabind/ops/map_coordinates/op.py",
        "xlabind/_xlabind.so",
        "xlabind/_xlabind_ops.so",
        "xlabind/_xlabind_cuda_ops.so",
        "xlabind/include/xlabind/native/errors.h",
        "xlabind/cmake/xlabindConfig.cmake",
    ):
        assert required in names
    dist_info = r"xlabind-[\d.]+\.dist-info/(METADATA|WHEEL|RECORD|top_level\.txt|licenses/LICENSE)"
    # The native API for builds without Bazel: headers and the CMake package.
    native_build = (
        r"include/xlabind/native/\w+\.h|cmake/(xlabindConfig(Version)?\.cmake"
        r"|extension_module\.bzl|extension_module\.cc\.tmpl)"
    )
    allowed = re.compile(
        rf"xlabind/([\w/]+\.py|py\.typed|_xlabind\w*\.so|{native_build})|{dist_info}"
    )
    assert [n for n in names if not allowed.fullmatch(n)] == []
    assert not [n for n in names if "__pycache__" in n or n.startswith("xlabind/tests")]


def test_record_lists_every_file_with_its_hash_and_size(wheel):
    archive = zipfile.ZipFile(wheel)
    rows = [line.split(",") for line in read(wheel, "/RECORD").decode().splitlines()]
    listed = {name for name, _, _ in rows}
    assert listed == set(archive.namelist())
    for name, digest, size in rows:
        if name.endswith("/RECORD"):
            assert digest == size == ""
            continue
        data = archive.read(name)
        expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        assert digest == "sha256=" + expected.decode(), name
        assert int(size) == len(data), name


def test_metadata_has_ranges_the_readme_and_the_cuda13_extra(wheel):
    text = read(wheel, "/METADATA").decode()
    headers, _, body = text.partition("\n\n")
    requires = re.findall(r"^Requires-Dist: (.*)$", headers, flags=re.M)
    for name, (low, _) in _compatibility.TESTED.items():
        assert f"{name}>={low}" in requires
    # jax, NumPy, ml_dtypes: lower bounds, no pins, no caps (only what is
    # known to fail refuses); the CUDA runtime is capped below its next major
    # version, whose library has another name (libcudart.so.14).
    assert not [r for r in requires if "==" in r.split(";")[0]]
    assert not [r for r in requires if "<" in r and r.split(">=")[0] in _compatibility.TESTED]
    cuda = [r for r in requires if r.startswith("nvidia-cuda-runtime")]
    assert cuda and cuda[0].endswith('; extra == "cuda13"'), requires
    # What the missing-runtime error tells a user to install is the extra's.
    from xlabind.ops import _native

    assert cuda[0].split(";")[0].strip() == _native.CUDA_RUNTIME_REQUIREMENT
    assert "Provides-Extra: cuda13" in headers
    assert "Description-Content-Type: text/markdown" in headers
    assert body == (RUNFILES / "README.md").read_text()
    assert "License: Apache-2.0" in headers and "Project-URL: Source, https://" in headers
    assert read(wheel, "/licenses/LICENSE") == (RUNFILES / "LICENSE").read_bytes()
    tag = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"Requires-Python: =={tag}.*" in headers


def test_the_modules_keep_only_the_runpath_of_the_cuda13_extra(wheel):
    archive = zipfile.ZipFile(wheel)
    for name in archive.namelist():
        if name.endswith(".so"):
            data = archive.read(name)
            assert b"_solib" not in data and b"xlabind_cuda/site" not in data, name
    cuda_ops = archive.read("xlabind/_xlabind_cuda_ops.so")
    assert b"$ORIGIN/../nvidia/cu13/lib\0" in cuda_ops


def test_the_cuda13_extra_runtime_is_the_one_the_kernels_load(wheel, tmp_path):
    target = tmp_path / "site"
    clean_environment = load_tool("check_wheel").clean_environment
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        env=clean_environment(),
    )
    # What `pip install xlabind[cuda13]` adds: nvidia-cuda-runtime's library,
    # here copied from the pinned package the build links against.
    pinned = runfiles_repos.repository("xlabind_cuda") / "site" / "nvidia" / "cu13" / "lib"
    extra = target / "nvidia" / "cu13" / "lib"
    extra.mkdir(parents=True)
    shutil.copy(pinned / "libcudart.so.13", extra / "libcudart.so.13")
    script = (
        "import pathlib, xlabind, xlabind.ops  # the ops load the CUDA module\n"
        "from xlabind._runtime import extension as _extension\n"
        "assert not _extension.UNAVAILABLE, _extension.UNAVAILABLE\n"
        "maps = pathlib.Path('/proc/self/maps').read_text().splitlines()\n"
        "print({line.split()[-1] for line in maps if 'libcudart.so' in line})\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path[:0] = [{str(target)!r}, {str(SITES['pinned'])!r}]\n" + script,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_environment(),
    )
    assert done.returncode == 0, done.stderr
    # /usr/local/cuda has the same library and is in ldconfig: RUNPATH must win.
    assert done.stdout.strip() == repr({str(extra / "libcudart.so.13")}), done.stdout


def test_the_device_runbook_installs_the_wheel_and_names_the_libcudart_it_loads(wheel, tmp_path):
    # tools/device_check.py's install step on the CPU: the wheel into a
    # --target folder, the cuda13 extra's runtime linked in from where the
    # machine's jax plugin brought it, and its CUDA ops loaded from there.
    runbook = load_tool("device_check")
    machine = tmp_path / "machine-site"
    (machine / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    pinned = runfiles_repos.repository("xlabind_cuda") / "site" / "nvidia" / "cu13" / "lib"
    shutil.copy(pinned / "libcudart.so.13", machine / "nvidia" / "cu13" / "lib")
    target = tmp_path / "site"
    assert runbook.install(wheel, target) == "pip --target"
    how = runbook.link_runtime(target, "libcudart", [machine])
    assert how.startswith("libcudart linked from"), how
    clean_environment = load_tool("check_wheel").clean_environment
    env = {**clean_environment(), "PYTHONPATH": f"{SITES['pinned']}:{target}"}
    check = runbook.PLATFORMS["cuda"].device_check

    def probe():
        native = json.dumps({check.native_module: check.runtime_library})
        done = subprocess.run(
            [sys.executable, "-c", runbook.PROBE, native, "[]"],
            env=env,
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    facts = probe()
    assert pathlib.Path(facts["xlabind"]).parent == target / "xlabind"
    loaded = facts["loaded"][check.native_module]
    assert loaded == [str(machine / "nvidia" / "cu13" / "lib" / "libcudart.so.13")]
    assert runbook.installation_errors(facts, check, [machine, target]) == []
    # Without that package the RUNPATH finds nothing: a toolkit's copy (in
    # ldconfig here) or none is refused, since users have neither.
    (target / "nvidia" / "cu13" / "lib").unlink()
    (error,) = runbook.installation_errors(probe(), check, [machine, target])
    assert "not from a Python package" in error or "does not load" in error, error
