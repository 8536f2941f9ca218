"""MODULE.bazel's module extensions: the repositories of repositories.bzl."""

load("@bazel_tools//tools/build_defs/repo:local.bzl", "local_repository")
load("//:repositories.bzl", "define_dev_repositories", "define_repositories")

xlabind = module_extension(
    implementation = lambda ctx: define_repositories(),
    doc = "xlabind's repositories: @xlabind_pypi, @xlabind_python, @xlabind_zig, " +
          "@xlabind_cuda, @xlabind_headers_linux_aarch64, @xlabind_headers_macos_arm64.",
)

xlabind_dev = module_extension(
    implementation = lambda ctx: define_dev_repositories(local_repository = local_repository),
    doc = "What only xlabind's own tests and documentation use.",
)
