"""The wheel for another machine (tools/build_wheel.py --platform
linux_aarch64): packed from the modules this build cross-compiles
(//tools/platforms:linux_aarch64_modules) without importing them, tagged
from their bytes, holding this machine's wheel's files but the CUDA module,
and installable where pip installs for Linux aarch64."""

import re
import subprocess
import sys
import zipfile

import aarch64_sysroot
import pytest
from wheel_tools import RUNFILES, build_wheel, load_tool

packer = load_tool("build_wheel")
PYTHON_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    return {
        "linux_x86_64": build_wheel(tmp_path_factory.mktemp("x86_64")),
        "linux_aarch64": packer.build(tmp_path_factory.mktemp("aarch64"), "linux_aarch64"),
    }


def read(wheel, suffix: str) -> bytes:
    archive = zipfile.ZipFile(wheel)
    return archive.read(next(n for n in archive.namelist() if n.endswith(suffix)))


def test_the_aarch64_wheel_is_tagged_from_its_modules(wheels):
    wheel = wheels["linux_aarch64"]
    tag = f"{PYTHON_TAG}-{PYTHON_TAG}-manylinux_2_17_aarch64"
    assert wheel.name.endswith(f"-{tag}.whl"), wheel.name
    assert f"Tag: {tag}\n" in read(wheel, "/WHEEL").decode()
    archive = zipfile.ZipFile(wheel)
    for name in ("xlabind/_xlabind.so", "xlabind/_xlabind_ops.so"):
        assert packer.read_elf(archive.read(name), name) == ("aarch64", (2, 17)), name


def test_it_holds_what_this_machines_wheel_holds_but_the_cuda_module(wheels):
    x86_64, aarch64 = (set(zipfile.ZipFile(wheels[p]).namelist()) for p in wheels)
    assert x86_64 - aarch64 == {"xlabind/_xlabind_cuda_ops.so"}
    assert aarch64 <= x86_64
    # Every file but the modules and RECORD (which lists them) is the same.
    same = [n for n in aarch64 if not n.endswith((".so", "/RECORD", "/METADATA", "/WHEEL"))]
    for name in same:
        assert read(wheels["linux_aarch64"], name) == read(wheels["linux_x86_64"], name), name


def test_its_metadata_has_no_cuda13_extra_and_is_otherwise_the_same(wheels):
    x86_64, aarch64 = (read(wheels[p], "/METADATA").decode().partition("\n\n") for p in wheels)
    assert aarch64[2] == x86_64[2]  # the README, as the description
    headers = x86_64[0].splitlines()
    cuda_lines = [line for line in headers if "cuda13" in line]
    assert len(cuda_lines) == 2, cuda_lines  # Provides-Extra, and its Requires-Dist
    assert "cuda13" not in aarch64[0] and "nvidia" not in aarch64[0]
    assert aarch64[0].splitlines() == [line for line in headers if line not in cuda_lines]


def test_the_aarch64_wheel_is_reproducible(wheels, tmp_path):
    again = load_tool("build_wheel").build(tmp_path, "linux_aarch64")
    assert again.read_bytes() == wheels["linux_aarch64"].read_bytes()


def test_pip_installs_it_for_linux_aarch64_and_refuses_it_here(wheels, tmp_path):
    wheel = wheels["linux_aarch64"]
    common = ["--quiet", "--no-deps", "--no-index", "--disable-pip-version-check"]
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", *common, "--only-binary=:all:"]
        # The tag itself: pip takes a named --platform as the only one.
        + ["--platform", "manylinux_2_17_aarch64", "--python-version", version]
        + ["--target", str(tmp_path / "aarch64"), str(wheel)],
        check=True,
    )
    assert (tmp_path / "aarch64" / "xlabind" / "_xlabind_ops.so").is_file()
    refused = subprocess.run(
        [sys.executable, "-m", "pip", "install", *common]
        + ["--target", str(tmp_path / "here"), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0
    assert "is not a supported wheel on this platform" in refused.stderr, refused.stderr


def test_the_packer_never_imports_the_package_it_packs(tmp_path):
    # Another machine's modules cannot load here: with `xlabind` unimportable,
    # the aarch64 wheel still packs.
    packer = RUNFILES / "tools" / "build_wheel.py"
    script = (
        "import importlib.util, pathlib, sys\n"
        "sys.modules['xlabind'] = None  # any import of it raises\n"
        f"spec = importlib.util.spec_from_file_location('packer', {str(packer)!r})\n"
        "packer = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(packer)\n"
        f"print(packer.build(pathlib.Path({str(tmp_path)!r}), 'linux_aarch64').name)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("manylinux_2_17_aarch64.whl"), done.stdout


def test_modules_of_another_machine_are_refused_for_this_one():
    aarch64 = RUNFILES / "tools" / "platforms" / "linux_aarch64_modules" / "_xlabind.so"
    with pytest.raises(SystemExit, match=r"--platform linux_x86_64 needs x86_64 modules.*aarch64"):
        packer.platform_tag({"xlabind/_xlabind.so": aarch64.read_bytes()}, "linux_x86_64")


def test_macos_arm64_is_refused_saying_why(tmp_path):
    with pytest.raises(SystemExit, match=r"--platform macos_arm64: no macOS arm64 wheel.*pyconfig"):
        packer.build(tmp_path, "macos_arm64")
    assert list(tmp_path.iterdir()) == []


def test_the_target_headers_pin_the_numpy_the_build_pins():
    def numpy_pin(name: str) -> str:
        text = (RUNFILES / "third_party" / "python" / name).read_text()
        return re.search(r"^numpy==(\S+)", text, flags=re.M).group(1)

    assert numpy_pin("target_headers.in") == numpy_pin("requirements.in")
    lock = (RUNFILES / "third_party" / "python" / "target_headers.lock").read_text()
    wheels = re.findall(r"numpy-([\d.]+)-(cp3\d+)-\2-([\w.]+)\.whl", lock)
    assert wheels and {version for version, _, _ in wheels} == {numpy_pin("requirements.in")}
    assert all(platform.endswith(("aarch64", "arm64")) for _, _, platform in wheels), wheels


def test_the_aarch64_platform_tags_are_the_same_everywhere():
    # pip's tags for Linux aarch64: the locks' (tools/update_lock.py), the
    # target headers' repository (repositories.bzl) and the sysroot's pip.
    locks = load_tool("update_lock").TARGET_PLATFORMS["Linux aarch64"]
    assert aarch64_sysroot.PLATFORMS == locks
    text = (RUNFILES / "repositories.bzl").read_text()
    block = re.search(r'name = "xlabind_headers_linux_aarch64".*?platforms = \[(.*?)\]', text, re.S)
    assert tuple(re.findall(r'"([\w.]+)"', block.group(1))) == locks
