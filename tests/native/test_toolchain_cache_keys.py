"""The pinned compilers' wrappers (zig's, nvcc's) and the dependency files
zig writes name no output base: a compile action cached by one output base
(another checkout, another interpreter's wheel build, another machine's
remote cache) is then reused by the others instead of rebuilt
(third_party/toolchains/zig/zig_repository.bzl)."""

import pathlib
import subprocess

import pytest
import runfiles_repos

RUNFILES = pathlib.Path(__file__).parents[2]


def wrapper(repository: str, name: str) -> pathlib.Path:
    return (runfiles_repos.repository(repository) or RUNFILES.parent / repository) / name


def test_the_wrappers_name_no_output_base_and_their_tools_pins():
    """No output base; but the pinned tool's version and sha256, so that the
    wrapper, and every action that runs it, changes when the pin does (zig
    and nvcc are not the actions' inputs: they would be staged into every
    sandbox)."""
    for repository, name, pin in [
        ("xlabind_zig", "zig-cc", "ziglang=="),
        ("xlabind_zig", "zig-ar", "ziglang=="),
        ("xlabind_cuda", "nvcc", "nvidia-cuda-nvcc=="),
    ]:
        real = wrapper(repository, name).resolve()
        text = real.read_text()
        # The repository's own folder, where the output base's path would show.
        assert str(real.parent) not in text, (name, text)
        assert "/external/" not in text, (name, text)
        assert f"# {pin}" in text and "# --hash=sha256:" in text, (name, text)


@pytest.mark.parametrize("joined", [False, True], ids=["-MF path", "-MFpath"])
def test_a_dependency_file_names_only_the_sources_own_headers(tmp_path, joined):
    (tmp_path / "own.h").write_text("inline int own() { return 1; }\n")
    source = tmp_path / "unit.cc"
    source.write_text('#include <vector>\n#include "own.h"\nint f() { return own(); }\n')
    dependencies = tmp_path / "unit.d"
    done = subprocess.run(
        [str(wrapper("xlabind_zig", "zig-cc")), "-c", "-o", str(tmp_path / "unit.o")]
        + ["-MD"]
        + ([f"-MF{dependencies}"] if joined else ["-MF", str(dependencies)])
        + [str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    text = dependencies.read_text()
    assert "unit.cc" in text and "own.h" in text, text
    # <vector> is zig's: left out, with every other path of its library.
    assert "ziglang" not in text, text
