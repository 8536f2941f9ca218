"""The checkout's files as Bazel inputs, for the tests that check the sources
themselves (tests/style; tests/packaging/test_comment_paths.py): each
package's `checkout_files` filegroup (checkout_files() below), gathered by
`checkout_manifest` in //tests/support:checkout, which lists each file with
its path in the checkout. Declared, the files make those tests cacheable: they
run again when a file changes, not on every `bazel test`.

glob() stops at a package's subpackages, so every package is named in
CHECKOUT_PACKAGES; tests/support/checkout.py fails a test when the checkout
holds a file that is not among the inputs (a package or folder left out).
Under Bazel 7 and later each package's checkout_files() checks that its
subpackages are listed; and the manifest lists the root's folders, so that a
new one there runs those tests again, to find its files missing."""

# Every package of this workspace but the root, each with a `checkout_files`
# target: checkout_files() below, or (in the shims, which are also
# repositories of their own and cannot load this file) a filegroup of its own.
# examples/native_op is a workspace of its own (.bazelignore):
# @xlabind_example//:sources.
CHECKOUT_PACKAGES = [
    "docs",
    "docs/sphinx",
    "examples/native_op_cmake",
    "examples/python_ops",
    "ffi",
    "ffi/common",
    "ffi/cpu",
    "ffi/cuda",
    "ffi/native",
    "ffi/ops",
    "python",
    "tests",
    "tests/api",
    "tests/benchmarks",
    "tests/docs",
    "tests/gpu",
    "tests/native",
    "tests/ops",
    "tests/packaging",
    "tests/runtime",
    "tests/sharding",
    "tests/style",
    "tests/support",
    "tests/tpu",
    "tests/transforms",
    "third_party/cmake",
    "third_party/cuda",
    "third_party/lint",
    "third_party/python",
    "third_party/shims",
    "third_party/shims/platforms",
    "third_party/shims/platforms/cpu",
    "third_party/shims/platforms/os",
    "third_party/shims/remote_coverage_tools",
    "third_party/shims/rules_cc",
    "third_party/shims/rules_cc/cc",
    "third_party/shims/rules_java",
    "third_party/shims/rules_java/java",
    "third_party/shims/rules_python",
    "third_party/shims/rules_python/python",
    "third_party/toolchains/zig",
    "tools",
    "tools/platforms",
]

# What a package folder can hold that is no source (.gitignore's patterns):
# Python's caches, the compiled modules copied beside the package, the tools'
# caches. tests/support/checkout.py leaves out the same.
NOT_SOURCES = [
    "**/__pycache__/**",
    "**/*.pyc",
    "**/*.so",
    "**/.mypy_cache/**",
    "**/.pytest_cache/**",
    "**/.ruff_cache/**",
]

# Folders at the root that hold no sources and need no BUILD file (as
# tests/support/checkout.py's NOT_SOURCE_FOLDERS and TOP_NOT_SOURCE_FOLDERS):
# Python's cache, which .ci/run's Python 3.14 step leaves there (the root's
# __init__.py, imported as xlabind), and the wheel's folder. Listed among the
# root's folders, either one ran the checkout's tests again after a CI run.
ROOT_NOT_SOURCE_FOLDERS = ["__pycache__", "dist"]

CheckoutFoldersInfo = provider(
    doc = "The folders of the workspace's root, for checkout_manifest.",
    fields = {"folders": "their names"},
)

def _root_files_impl(ctx):
    return [
        DefaultInfo(files = depset(ctx.files.srcs)),
        CheckoutFoldersInfo(folders = ctx.attr.folders),
    ]

_root_files = rule(
    implementation = _root_files_impl,
    attrs = {
        "folders": attr.string_list(),
        "srcs": attr.label_list(allow_files = True),
    },
)

def checkout_files(srcs = None, folders = None):
    """`checkout_files`: every file of this package; or, at the workspace's
    root, where a glob of everything would follow Bazel's output links, the
    files `srcs` and the names of the root's `folders` (that a new folder
    changes the manifest)."""
    if folders == None:
        native.filegroup(
            name = "checkout_files",
            srcs = native.glob(["**"], exclude = NOT_SOURCES) if srcs == None else srcs,
            visibility = ["//tests/support:__pkg__"],
        )
    else:
        _root_files(
            name = "checkout_files",
            srcs = srcs,
            folders = folders,
            visibility = ["//tests/support:__pkg__"],
        )

    # Bazel 7 and later list a package's subpackages: one missing from
    # CHECKOUT_PACKAGES stops the build here instead of leaving its files out.
    # At the root, not under Bazel's output links (bazel-*, whose runfiles
    # hold BUILD files): in its folders, and at the top (where bazel-<name>,
    # the execution root, has the root's BUILD file).
    if hasattr(native, "subpackages"):
        package = native.package_name()
        include = ["**"] if folders == None else ["*"] + [f + "/**" for f in folders]
        for subpackage in native.subpackages(include = include, allow_empty = True):
            path = package + "/" + subpackage if package else subpackage
            if _outside(path):
                continue
            if path not in CHECKOUT_PACKAGES:
                fail("//%s is not in CHECKOUT_PACKAGES (tools/checkout.bzl): " % path +
                     "tests/style and tests/packaging would not see its files")

# Folders .bazelignore keeps out of this workspace (workspaces of their own).
IGNORED_FOLDERS = ["examples/native_op"]

def _outside(path):
    """Whether a subpackage path is no package of this workspace: under a
    folder .bazelignore names (Bazel 7 lists those too), or under Bazel's
    output links (bazel-*, whose runfiles hold BUILD files), at the root or
    in an ignored workspace that has been built."""
    if any([part.startswith("bazel-") for part in path.split("/")]):
        return True
    return any([path == f or path.startswith(f + "/") for f in IGNORED_FOLDERS])

def _checkout_manifest_impl(ctx):
    paths = {}
    folders = []
    files = []
    sources = [(target, "") for target in ctx.attr.srcs] + ctx.attr.repositories.items()
    for target, folder in sources:
        if CheckoutFoldersInfo in target:
            folders += target[CheckoutFoldersInfo].folders
        for file in target.files.to_list():
            if not file.is_source:
                fail("%s: %s is built, not a file of the checkout" % (target.label, file.path))
            path = file.short_path
            if path.startswith("../"):  # another repository's: ../<repository>/<path>
                if not folder:
                    fail("%s: %s is another repository's; name its folder in `repositories`" % (target.label, path))
                path = path.split("/", 2)[2]
            elif folder:
                fail("%s: %s is this repository's; list it in `srcs`" % (target.label, path))
            paths[folder + "/" + path if folder else path] = file.short_path
            files.append(file)
    manifest = ctx.actions.declare_file(ctx.label.name + ".json")
    ctx.actions.write(manifest, json.encode_indent(
        {"files": paths, "root_folders": sorted(folders)},
    ) + "\n")
    return [DefaultInfo(
        files = depset([manifest]),
        runfiles = ctx.runfiles(files = [manifest] + files),
    )]

checkout_manifest = rule(
    implementation = _checkout_manifest_impl,
    doc = """`<name>.json`: {"files": {each file's path in the checkout: its
    path in the runfiles, from the main repository's folder}, "root_folders":
    the folders of the workspace's root that are no package}; the files come
    with it in the runfiles.""",
    attrs = {
        "repositories": attr.label_keyed_string_dict(
            allow_files = True,
            doc = "other repositories' files: {files: their folder in this checkout}",
        ),
        "srcs": attr.label_list(allow_files = True, doc = "this repository's files"),
    },
)
