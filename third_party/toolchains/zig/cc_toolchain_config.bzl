"""C/C++ toolchain configuration for zig c++ (clang 19 + hermetic libc++)."""

load("@bazel_tools//tools/build_defs/cc:action_names.bzl", "ACTION_NAMES")
load(
    "@bazel_tools//tools/cpp:cc_toolchain_config_lib.bzl",
    "feature",
    "flag_group",
    "flag_set",
    "tool_path",
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

def _impl(ctx):
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
                flag_groups = [flag_group(flags = ["-Wl,--build-id=none"])],
            )],
        ),
    ]
    tool_paths = [
        tool_path(name = "gcc", path = "zig-cc"),
        tool_path(name = "ld", path = "zig-cc"),
        tool_path(name = "cpp", path = "zig-cc"),
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
        toolchain_identifier = "zig-x86_64-linux-gnu",
        host_system_name = "x86_64-unknown-linux-gnu",
        target_system_name = "x86_64-unknown-linux-gnu",
        target_cpu = "k8",
        target_libc = "glibc_2.17",
        compiler = "zig",
        abi_version = "local",
        abi_libc_version = "local",
        tool_paths = tool_paths,
    )

zig_cc_toolchain_config = rule(
    implementation = _impl,
    attrs = {"zig_lib": attr.string(mandatory = True)},
    provides = [CcToolchainConfigInfo],
)
