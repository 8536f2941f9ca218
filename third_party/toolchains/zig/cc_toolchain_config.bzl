"""C/C++ toolchain configuration for zig c++ (clang 19 + hermetic libc++), one
per target platform (tools/platforms), all from the one pinned zig."""

load("@bazel_tools//tools/build_defs/cc:action_names.bzl", "ACTION_NAMES")
load(
    "@bazel_tools//tools/cpp:cc_toolchain_config_lib.bzl",
    "feature",
    "flag_group",
    "flag_set",
    "tool_path",
    "variable_with_value",
)

_COMPILE_ACTIONS = [
    ACTION_NAMES.c_compile,
    ACTION_NAMES.cpp_compile,
    ACTION_NAMES.cpp_header_parsing,
    ACTION_NAMES.cpp_module_compile,
    ACTION_NAMES.assemble,
    ACTION_NAMES.preprocess_assemble,
]
_CXX_ACTIONS = [
    ACTION_NAMES.cpp_compile,
    ACTION_NAMES.cpp_header_parsing,
    ACTION_NAMES.cpp_module_compile,
]
_LINK_ACTIONS = [
    ACTION_NAMES.cpp_link_executable,
    ACTION_NAMES.cpp_link_dynamic_library,
    ACTION_NAMES.cpp_link_nodeps_dynamic_library,
]

# Each target xlabind builds for: its platform's constraints (the name is the
# platform's, in tools/platforms), zig's target triple and what Bazel's C++
# rules are told of it. glibc 2.17 is the oldest manylinux2014 baseline, so
# the modules load on any Linux machine jaxlib itself supports.
ZIG_TARGETS = {
    "linux_x86_64": struct(
        triple = "x86_64-linux-gnu.2.17",
        cpu = "x86_64",
        os = "linux",
        bazel_cpu = "k8",
        system_name = "x86_64-unknown-linux-gnu",
        libc = "glibc_2.17",
        macho = False,
    ),
    "linux_aarch64": struct(
        triple = "aarch64-linux-gnu.2.17",
        cpu = "aarch64",
        os = "linux",
        bazel_cpu = "aarch64",
        system_name = "aarch64-unknown-linux-gnu",
        libc = "glibc_2.17",
        macho = False,
    ),
    # macOS 11 (the first on Apple silicon): Mach-O, libSystem only.
    "macos_arm64": struct(
        triple = "aarch64-macos.11.0",
        cpu = "aarch64",
        os = "macos",
        bazel_cpu = "darwin_arm64",
        system_name = "arm64-apple-macosx11.0",
        libc = "macosx",
        macho = True,
    ),
}

# A Mach-O module leaves CPython's symbols to the interpreter that loads it
# (macOS links an extension module against no libpython).
_MACHO_LINK_FLAGS = ["-Wl,-undefined,dynamic_lookup"]

# With target_libc "macosx" Bazel passes libtool's flags to the archiver,
# which `zig ar` (GNU ar's) rejects: these are the flags it passes on Linux.
_MACHO_FEATURES = [feature(
    name = "archiver_flags",
    enabled = True,
    flag_sets = [flag_set(
        actions = [ACTION_NAMES.cpp_link_static_library],
        flag_groups = [
            flag_group(flags = ["rcsD", "%{output_execpath}"]),
            flag_group(
                iterate_over = "libraries_to_link",
                flag_groups = [
                    flag_group(
                        flags = ["%{libraries_to_link.name}"],
                        expand_if_equal = variable_with_value(
                            name = "libraries_to_link.type",
                            value = "object_file",
                        ),
                    ),
                    flag_group(
                        flags = ["%{libraries_to_link.object_files}"],
                        iterate_over = "libraries_to_link.object_files",
                        expand_if_equal = variable_with_value(
                            name = "libraries_to_link.type",
                            value = "object_file_group",
                        ),
                    ),
                ],
                expand_if_available = "libraries_to_link",
            ),
        ],
    )],
)]

# The target of the machine Bazel runs on: its toolchain's names (`config`,
# `cc-compiler-k8`, the `zig-cc` wrapper) are the ones every earlier build
# used, so its actions and their cache keys stay as they were.
HOST_TARGET = "linux_x86_64"

def wrapper_name(target):
    """The compiler wrapper the repository writes for `target`."""
    return "zig-cc" if target == HOST_TARGET else "zig-cc-" + target

def _impl(ctx):
    target = ZIG_TARGETS[ctx.attr.target]
    features = [
        feature(name = "supports_pic", enabled = True),
        feature(name = "supports_dynamic_linker", enabled = True),
        feature(
            name = "default_compile_flags",
            enabled = True,
            flag_sets = [
                flag_set(
                    actions = _COMPILE_ACTIONS,
                    flag_groups = [flag_group(flags = [
                        "-O2",
                        "-fPIC",
                        "-fno-omit-frame-pointer",
                        "-Wall",
                        "-no-canonical-prefixes",
                        # Reproducible outputs: no time stamps in objects.
                        "-Wno-builtin-macro-redefined",
                        "-D__DATE__=\"redacted\"",
                        "-D__TIMESTAMP__=\"redacted\"",
                        "-D__TIME__=\"redacted\"",
                    ])],
                ),
                flag_set(
                    actions = _CXX_ACTIONS,
                    flag_groups = [flag_group(flags = ["-std=c++17"])],
                ),
            ],
        ),
        feature(
            name = "dependency_file",
            enabled = True,
            flag_sets = [flag_set(
                actions = _COMPILE_ACTIONS,
                flag_groups = [flag_group(
                    flags = ["-MD", "-MF", "%{dependency_file}"],
                    expand_if_available = "dependency_file",
                )],
            )],
        ),
        feature(
            name = "default_link_flags",
            enabled = True,
            flag_sets = [flag_set(
                actions = _LINK_ACTIONS,
                flag_groups = [flag_group(flags = _MACHO_LINK_FLAGS if target.macho else [
                    "-Wl,--build-id=none",
                ])],
            )],
        ),
    ] + (_MACHO_FEATURES if target.macho else [])
    tool_paths = [
        tool_path(name = "gcc", path = wrapper_name(ctx.attr.target)),
        tool_path(name = "ld", path = wrapper_name(ctx.attr.target)),
        tool_path(name = "cpp", path = wrapper_name(ctx.attr.target)),
        tool_path(name = "ar", path = "zig-ar"),
        # Not used by any xlabind target; Bazel insists they be named.
        tool_path(name = "gcov", path = "/bin/false"),
        tool_path(name = "nm", path = "/bin/false"),
        tool_path(name = "objdump", path = "/bin/false"),
        tool_path(name = "strip", path = "/bin/false"),
    ]
    return cc_common.create_cc_toolchain_config_info(
        ctx = ctx,
        features = features,
        cxx_builtin_include_directories = [ctx.attr.zig_lib],
        toolchain_identifier = "zig-" + target.triple.split(".")[0],
        host_system_name = "x86_64-unknown-linux-gnu",
        target_system_name = target.system_name,
        target_cpu = target.bazel_cpu,
        target_libc = target.libc,
        compiler = "zig",
        abi_version = "local",
        abi_libc_version = "local",
        tool_paths = tool_paths,
    )

zig_cc_toolchain_config = rule(
    implementation = _impl,
    attrs = {
        "zig_lib": attr.string(mandatory = True),
        "target": attr.string(
            default = HOST_TARGET,
            values = ZIG_TARGETS.keys(),
            doc = "the platform's name in ZIG_TARGETS",
        ),
    },
    provides = [CcToolchainConfigInfo],
)
