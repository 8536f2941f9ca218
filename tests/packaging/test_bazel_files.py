"""xlabind's Starlark stays buildable by later Bazel releases, where Bazel
4.2.3 has no flag to check it: tools/forward_compat.bazelrc turns on the rest
(docs/native/bazel.md, "Which Bazel")."""

import pathlib
import re

import pytest

RUNFILES = pathlib.Path(__file__).parents[2]
FORWARD_COMPAT = RUNFILES / "tools" / "forward_compat.bazelrc"

# Rules that leave Bazel itself (Bazel 9: C++ and Python rules come from
# rules_cc and rules_python), and where to load each from.
RULE_FILES = {
    "@rules_cc//cc:defs.bzl": (
        "cc_binary",
        "cc_import",
        "cc_library",
        "cc_test",
        "cc_toolchain",
        "cc_toolchain_suite",
    ),
    "@rules_python//python:defs.bzl": (
        "py_binary",
        "py_library",
        "py_runtime",
        "py_runtime_pair",
        "py_test",
    ),
}


def starlark_files():
    """Every BUILD file, .bzl file, repository BUILD template and rc file of the
    workspace (//:bazel_files); the shims' stand-ins are not among them."""
    names = ("BUILD.bazel", "WORKSPACE", ".bazelrc")
    suffixes = (".bzl", ".BUILD", ".tpl", ".bazelrc")
    files = [
        p
        for p in RUNFILES.rglob("*")
        if p.is_file()
        and "external" not in p.parts
        and (p.name in names or p.name.endswith(suffixes))
    ]
    return sorted(files)


def relative(path):
    return str(path.relative_to(RUNFILES))


def code(path):
    """The file without comments and docstrings (what Bazel evaluates)."""
    text = re.sub(r'"""(.*?)"""', '""', path.read_text(), flags=re.S)
    return re.sub(r"#.*", "", text)


def test_the_files_are_there():
    found = {relative(p) for p in starlark_files()}
    for expected in (
        "BUILD.bazel",
        "WORKSPACE",
        ".bazelrc",
        "repositories.bzl",
        "ffi/defs.bzl",
        "third_party/cuda/nvcc.bzl",
        "third_party/python/site_packages.BUILD",
        "third_party/toolchains/zig/toolchain.BUILD.tpl",
        "tests/pytest.bzl",
        "tools/forward_compat.bazelrc",
    ):
        assert expected in found, sorted(found)


@pytest.mark.parametrize("path", starlark_files(), ids=relative)
def test_no_host_transitions(path):
    # Bazel 7 deprecates cfg = "host" in Starlark; "exec" means the same.
    assert not re.search(r"""cfg\s*=\s*["']host["']""", code(path))
    assert "host_configuration" not in code(path) and "host_fragments" not in code(path)


@pytest.mark.parametrize("path", starlark_files(), ids=relative)
def test_cc_and_python_rules_are_loaded_not_native(path):
    text = code(path)
    loaded = set()
    for source, names in re.findall(r'load\(\s*"([^"]+)"\s*,([^)]*)\)', text):
        for name in re.findall(r'(?:(\w+)\s*=\s*)?"(\w+)"', names):
            if source in RULE_FILES:
                loaded.add(name[0] or name[1])
    for source, rules in RULE_FILES.items():
        for rule in rules:
            assert not re.search(rf"\bnative\.{rule}\b", text), (
                f"native.{rule}: load it from {source}"
            )
            if re.search(rf"(?<![\w.]){rule}\(", text):
                assert rule in loaded, f"{rule} is used but not loaded from {source}"


@pytest.mark.parametrize("path", starlark_files(), ids=relative)
def test_no_parameters_later_releases_removed(path):
    text = code(path)
    # rule(incompatible_use_toolchain_transition=) is a no-op from Bazel 5 on.
    assert "incompatible_use_toolchain_transition" not in text
    assert not re.search(r"\bdepset\([^)]*\bitems\s*=", text)


def test_the_zig_toolchain_is_opt_in_for_other_workspaces():
    """xlabind_dependencies() registers no C/C++ toolchain: a consumer keeps
    its own unless it calls xlabind_register_zig_toolchain()."""
    text = code(RUNFILES / "repositories.bzl")
    dependencies = re.search(r"def xlabind_dependencies\(.*?(?=\ndef |\Z)", text, flags=re.S)
    assert dependencies and "xlabind_zig//:cc_toolchain" not in dependencies.group(0)
    register = re.search(r"def xlabind_register_zig_toolchain\(\):.*", text, flags=re.S)
    assert register and 'register_toolchains("@xlabind_zig//:cc_toolchain")' in register.group(0)


def test_forward_compatibility_flags_are_on_and_each_says_its_release():
    rc = (RUNFILES / ".bazelrc").read_text()
    assert "import %workspace%/tools/forward_compat.bazelrc" in rc
    lines = FORWARD_COMPAT.read_text().splitlines()
    flags = [line.split()[1] for line in lines if line.startswith("build --")]
    assert len(flags) >= 10 and all(f.startswith("--incompatible_") for f in flags)
    for flag in flags:
        index = lines.index(f"build {flag}")
        comment = " ".join(
            line for line in lines[max(0, index - 3) : index] if line.startswith("#")
        )
        assert re.search(r"\((\d+\.\d+|announced[^)]*)\)", comment), flag


# -- MODULE.bazel and WORKSPACE --------------------------------------------------


def _defined_by(function: str) -> set[str]:
    """The repository names a function of repositories.bzl defines."""
    text = code(RUNFILES / "repositories.bzl")
    body = re.search(rf"def {function}\(.*?(?=\ndef |\Z)", text, flags=re.S).group(0)
    return set(re.findall(r'name = "(xlabind_\w+)"', body))


def test_module_and_workspace_define_the_same_repositories_one_way():
    """Both define xlabind's repositories through repositories.bzl (the pinned
    wheels' versions and sha256 live in the lock files those rules read), so
    they cannot pin differently: neither pins anything itself, and each makes
    exactly the repositories the other does."""
    module, extensions = code(RUNFILES / "MODULE.bazel"), code(RUNFILES / "extensions.bzl")
    workspace = code(RUNFILES / "WORKSPACE")
    for name, text in (
        ("MODULE.bazel", module),
        ("extensions.bzl", extensions),
        ("WORKSPACE", workspace),
    ):
        for pin in ("sha256", "urls", "url =", "http_archive", "strip_prefix", "integrity"):
            assert pin not in text, f"{name} pins ({pin!r}) outside the lock files"
    main, dev = _defined_by("define_repositories"), _defined_by("define_dev_repositories")
    assert main and dev
    used = set(
        re.findall(
            r'"(xlabind_\w+)"', " ".join(re.findall(r"use_repo\((.*?)\)", module, flags=re.S))
        )
    )
    assert used == main | dev, (used, main, dev)
    assert "define_repositories(" in extensions and "define_dev_repositories(" in extensions
    assert "xlabind_dependencies()" in workspace and "define_dev_repositories(" in workspace
    assert "define_repositories(existing)" in code(RUNFILES / "repositories.bzl")


def test_module_dependencies_are_served_offline():
    """Every bazel_dep, of xlabind's MODULE.bazel and of the example's (but
    xlabind itself, which its archive_override serves), is a version
    tools/bazel7's local registry serves."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "registry", RUNFILES / "third_party" / "bzlmod" / "registry.py"
    )
    registry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(registry)
    for text in (code(RUNFILES / "MODULE.bazel"), _example("MODULE.bazel")):
        deps = re.findall(r'bazel_dep\(name = "(\w+)", version = "([\w.]+)"', text)
        assert deps
        for name, version in deps:
            if name != "xlabind":
                assert version in registry.DEBIAN.get(name, ((), ""))[0], (name, version)


def _example(name: str) -> str:
    import runfiles_repos

    example = runfiles_repos.repository("xlabind_example")
    assert example is not None, "no @xlabind_example in the runfiles"
    return code(example / name)


def test_the_example_pins_this_release_both_ways():
    """examples/native_op's MODULE.bazel (bzlmod) and WORKSPACE pin the same
    release, the version xlabind's MODULE.bazel declares."""
    version = re.search(
        r'module\(\s*name = "xlabind",\s*version = "([\w.]+)"', code(RUNFILES / "MODULE.bazel")
    ).group(1)
    module, workspace = _example("MODULE.bazel"), _example("WORKSPACE")
    assert f'bazel_dep(name = "xlabind", version = "{version}")' in module
    for text in (module, workspace):
        assert f'strip_prefix = "xlabind-{version}"' in text
        assert f'/xlabind-{version}.tar.gz"' in text
    assert re.search(r'archive_override\(\s*module_name = "xlabind"', module)


def test_labels_a_consumer_evaluates_name_their_repository():
    """Under bzlmod a label string in a macro is read in the calling BUILD
    file's repository, which has no @xlabind_cuda, @xlabind_pypi or
    @xlabind_python: the macros' own labels go through Label()."""
    for name in ("ffi/defs.bzl", "ffi/extension_module.bzl", "third_party/cuda/nvcc.bzl"):
        text = code(RUNFILES / name)
        bare = [m.group(0) for m in re.finditer(r'(?<!Label\()"@xlabind_\w+//[^"]*"', text)]
        assert not bare, (name, bare)


def test_every_zig_target_is_a_platform_a_config_and_a_registered_toolchain():
    """Each target of cc_toolchain_config.bzl's ZIG_TARGETS is a platform of
    tools/platforms with a `--config` of that name in .bazelrc, and MODULE.bazel
    registers its toolchain as repositories.bzl does (this machine's first)."""
    config = code(RUNFILES / "third_party" / "toolchains" / "zig" / "cc_toolchain_config.bzl")
    targets = re.findall(r'^    "(\w+)": struct\(', config, flags=re.M)
    host = re.search(r'^HOST_TARGET = "(\w+)"', config, flags=re.M).group(1)
    assert "linux_aarch64" in targets and host in targets
    platforms = re.findall(
        r'platform\(\s*name = "(\w+)"', code(RUNFILES / "tools/platforms/BUILD.bazel")
    )
    assert sorted(platforms) == sorted(targets)
    rc = (RUNFILES / ".bazelrc").read_text()
    for target in targets:
        assert f"build:{target} --platforms=//tools/platforms:{target}\n" in rc, target
    module = code(RUNFILES / "MODULE.bazel")
    calls = re.findall(r"register_toolchains\((.*?)\)", module, flags=re.S)
    names = [n for call in calls for n in re.findall(r'"@xlabind_zig//:(\w+)"', call)]
    cross = [f"cc_toolchain_{target}" for target in targets if target != host]
    assert names == ["cc_toolchain"] + cross, names
