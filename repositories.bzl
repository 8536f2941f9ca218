"""The external repositories xlabind builds with, for this workspace and any
other that depends on it.

In a consumer's WORKSPACE (Bazel 4.2.3, WORKSPACE mode):

    local_repository(name = "xlabind", path = "/path/to/xlabind")  # or http_archive
    load("@xlabind//:repositories.bzl", "xlabind_dependencies")
    xlabind_dependencies()

Every repository xlabind adds is named xlabind_*, so it cannot clash with a
consumer's own (`@pypi` of rules_python, say):

  @xlabind_pypi    the pinned Python packages (jax, jaxlib's XLA FFI headers,
                   NumPy, nanobind, ...), installed by pip with --require-hashes
  @xlabind_python  the host interpreter's headers, and the py_runtime toolchain
  @xlabind_zig     the hermetic C/C++ compiler, which xlabind builds with; a
                   workspace opts in with xlabind_register_zig_toolchain()
                   (and, on Bazel 4-6, toolchain resolution turned on:
                   docs/native/bazel.md).
                   Without it, xlabind's targets build with the workspace's
                   own C/C++ toolchain.
  @xlabind_cuda    nvcc, the CUDA runtime and CCCL from pinned NVIDIA wheels
  @xlabind_headers_linux_aarch64, @xlabind_headers_macos_arm64
                   NumPy's headers from its pinned Linux aarch64 (macOS
                   arm64) wheel, for a build for that machine (tools/platforms)

Bazel 4.2.3 also fetches four repositories of its own on the first build
(rules_cc, rules_java, remote_coverage_tools, platforms), and xlabind's
BUILD files load their Python rules from rules_python; offline stand-ins are
added for those the workspace has not defined itself.
"""

load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")
load("//third_party/cuda:cuda_repository.bzl", "cuda_repository")
load("//third_party/python:interpreter.bzl", "local_python")
load("//third_party/python:pip_repository.bzl", "pip_repository", "target_headers_repository")
load("//third_party/shims:shim_repository.bzl", "shim_repository")
load("//third_party/toolchains/zig:cc_toolchain_config.bzl", "HOST_TARGET", "ZIG_TARGETS")
load("//third_party/toolchains/zig:zig_repository.bzl", "zig_toolchain")

_BAZEL_SHIMS = ["rules_cc", "rules_java", "remote_coverage_tools", "platforms", "rules_python"]

def xlabind_dependencies(register_python_toolchain = True):
    """Defines xlabind's external repositories (see the module docstring).

    Args:
      register_python_toolchain: whether py_binary and py_test run on the host
        interpreter xlabind builds its extension for (they must, to import it).
    """
    existing = native.existing_rules()
    for shim in _BAZEL_SHIMS:
        if shim not in existing:
            shim_repository(name = shim, shim = shim)
    define_repositories(existing)
    if register_python_toolchain:
        native.register_toolchains("@xlabind_python//:toolchain")

def define_repositories(existing = {}):
    """Defines the xlabind_* repositories not in `existing` (names): what
    WORKSPACE's xlabind_dependencies() and MODULE.bazel's extension (which
    has no existing rules to ask) both call."""
    if "xlabind_python" not in existing:
        local_python(name = "xlabind_python")
    if "xlabind_pypi" not in existing:
        pip_repository(
            name = "xlabind_pypi",
            build_file = Label("//third_party/python:site_packages.BUILD"),
            lock = Label("//third_party/python:requirements.lock"),
            newest_lock = Label("//third_party/python:newest.lock"),
        )
    if "xlabind_headers_linux_aarch64" not in existing:
        # Fetched only by a build for that machine (site_packages.BUILD).
        target_headers_repository(
            name = "xlabind_headers_linux_aarch64",
            build_file = Label("//third_party/python:target_headers.BUILD"),
            lock = Label("//third_party/python:target_headers.lock"),
            # tools/update_lock.py's TARGET_PLATFORMS["Linux aarch64"].
            platforms = [
                "manylinux_2_17_aarch64",
                "manylinux2014_aarch64",
                "manylinux_2_27_aarch64",
                "manylinux_2_28_aarch64",
            ],
        )
    if "xlabind_headers_macos_arm64" not in existing:
        target_headers_repository(
            name = "xlabind_headers_macos_arm64",
            build_file = Label("//third_party/python:target_headers.BUILD"),
            lock = Label("//third_party/python:target_headers.lock"),
            # tools/update_lock.py's TARGET_PLATFORMS["macOS arm64"].
            platforms = ["macosx_11_0_arm64"],
        )
    if "xlabind_zig" not in existing:
        zig_toolchain(name = "xlabind_zig")
    if "xlabind_cuda" not in existing:
        cuda_repository(name = "xlabind_cuda")

def define_dev_repositories(local_repository):
    """The repositories only xlabind's own tests and documentation use (the
    oldest supported jax, the site's Sphinx, the example workspace, the
    CMake example's build tools, the style gates' tools), for
    WORKSPACE and MODULE.bazel's dev extension alike; `local_repository` is
    the native rule in WORKSPACE, @bazel_tools' in a module extension."""
    pip_repository(
        name = "xlabind_pypi_lower_bound",
        build_file = Label("//third_party/python:lower_bound.BUILD"),
        lock = Label("//third_party/python:lower_bound.lock"),
    )
    pip_repository(
        name = "xlabind_cmake_pypi",
        build_file = Label("//third_party/cmake:cmake_build.BUILD"),
        lock = Label("//third_party/cmake:requirements.lock"),
    )
    pip_repository(
        name = "xlabind_lint_pypi",
        build_file = Label("//third_party/lint:lint_tools.BUILD"),
        lock = Label("//third_party/lint:requirements.lock"),
    )

    # buildifier as npm ships it (@bazel/buildifier: one binary per platform).
    http_archive(
        name = "xlabind_buildifier",
        build_file = Label("//third_party/lint:buildifier.BUILD"),
        sha256 = "b96ea9b13003036c801f52bee6f9b0314738f8432e5cb9d814c89f59292604ee",
        strip_prefix = "package",
        urls = ["https://registry.npmjs.org/@bazel/buildifier/-/buildifier-8.2.1.tgz"],
    )
    pip_repository(
        name = "xlabind_docs_pypi",
        build_file = Label("//docs/sphinx:docs_site.BUILD"),
        lock = Label("//docs/sphinx:requirements.lock"),
    )
    local_repository(
        name = "xlabind_example",
        path = "examples/native_op",
    )

def xlabind_register_zig_toolchain():
    """Makes xlabind's zig the C/C++ toolchain of the whole workspace, under
    platform-based toolchain resolution (x86-64 Linux hosts; targets: this
    machine, and through `--platforms` those of @xlabind//tools/platforms).

    Call it after xlabind_dependencies() only to build everything with zig
    (hermetic, glibc 2.17, libc++ linked in) instead of the workspace's own
    toolchain; xlabind's macros work with either.
    """
    native.register_toolchains("@xlabind_zig//:cc_toolchain")

    # The other targets' (MODULE.bazel registers the same, by name).
    native.register_toolchains(*[
        "@xlabind_zig//:cc_toolchain_" + target
        for target in ZIG_TARGETS
        if target != HOST_TARGET
    ])
