"""platform_modules: the compiled modules of the xlabind package as another
machine's build makes them (tools/platforms), inside this build: for the
wheel packer (//tools:build_wheel) and the tests that read them from their
bytes (tests/packaging/test_platform_modules.py)."""

load("//third_party/toolchains/zig:cc_toolchain_config.bzl", "ZIG_TARGETS")

def _for_platform_impl(_settings, attr):
    return {
        "//command_line_option:platforms": [str(Label("//tools/platforms:" + attr.platform))],
        # The name of the outputs' folder, as the platform's --config sets it
        # (.bazelrc).
        "//command_line_option:cpu": ZIG_TARGETS[attr.platform].bazel_cpu,
    }

_for_platform = transition(
    implementation = _for_platform_impl,
    inputs = [],
    outputs = [
        "//command_line_option:platforms",
        "//command_line_option:cpu",
    ],
)

def _platform_modules_impl(ctx):
    # A Starlark transition on an attribute makes it a list (Bazel 4), or not
    # (later releases, for a transition to one configuration).
    packages = ctx.attr.package if type(ctx.attr.package) == "list" else [ctx.attr.package]
    modules = {}
    for package in packages:
        info = package[DefaultInfo]

        # A module itself (a cc_binary's .so), or a py_library's modules: the
        # .so files of its runfiles' xlabind folder.
        own = [f for f in info.files.to_list() if f.extension == "so"]
        for f in own or info.default_runfiles.files.to_list():
            if f.extension == "so" and (own or f.dirname.endswith("/xlabind")):
                modules[f.basename] = f
    outputs = []
    for name in sorted(modules):
        module = modules[name]
        output = ctx.actions.declare_file(ctx.label.name + "/" + name)
        ctx.actions.symlink(output = output, target_file = module)
        outputs.append(output)
    return [DefaultInfo(
        files = depset(outputs),
        runfiles = ctx.runfiles(files = outputs),
    )]

platform_modules = rule(
    implementation = _platform_modules_impl,
    doc = "The .so files of `package` (a module, or a py_library's xlabind folder), " +
          "built for `platform`, as <name>/<file>.",
    attrs = {
        "package": attr.label(
            default = Label("//python:xlabind"),
            cfg = _for_platform,
            doc = "the py_library whose runfiles hold the modules, or one module",
        ),
        "platform": attr.string(
            mandatory = True,
            values = ZIG_TARGETS.keys(),
            doc = "the platform's name in tools/platforms",
        ),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)
