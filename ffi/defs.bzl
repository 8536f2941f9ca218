"""Macros for XLA FFI handlers, in this workspace and any other that depends on
xlabind (see repositories.bzl):

    load("@xlabind//ffi:defs.bzl", "xlabind_extension", "xlabind_ffi_library")

    xlabind_ffi_library(
        name = "my_handlers",
        srcs = ["my_handlers.cc"],          # XLA FFI handlers (C++)
        cuda_srcs = ["my_kernels.cu"],      # optional: kernels + extern "C" launchers
        hdrs = ["my_kernels.h"],
    )

    xlabind_extension(
        name = "my_ops",                    # import my_ops
        handlers = {"cpu": {"my_op": "MyOpCpu"}, "cuda": {"my_op": "MyOpCuda"}},
        deps = [":my_handlers"],
    )

Python then registers what the module hands out and binds it:

    import my_ops, xlabind
    xlabind.register_ffi_targets(my_ops)
    op = xlabind.linear(xlabind.ffi_target("my_op", platforms=("cpu", "cuda")), ...)
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library")
load(
    "//ffi:extension_module.bzl",
    "extension_module_substitutions",
    "handler",
    "module_handlers",
    "module_state_types",
)
load("//third_party/cuda:nvcc.bzl", "nvcc_objects")

# What XLA's FFI headers and xlabind's need of any C++ compiler, whatever the
# toolchain defaults to (Bazel 4's auto-configured gcc says -std=c++0x): C++17,
# and symbols kept inside the module. A library's own `copts` come after these,
# so `copts = ["-std=c++20"]` picks a newer standard.
XLABIND_COPTS = ["-std=c++17", "-fvisibility=hidden"]

# @xlabind_cuda's folder in a runfiles tree: its canonical name, which bzlmod
# prefixes with the module and extension that define it.
_CUDA_RUNFILES = Label("@xlabind_cuda//:BUILD.bazel").workspace_name

def _absolute(label):
    """`label` as a string that names its repository, for a select() key
    (Bazel 4's select() in a macro takes no Label keys) or a $(location): the
    string is read in the BUILD file that calls the macro. Bazel 4 writes the
    main repository's labels without a name ("//tools/..."), which a BUILD
    file of another repository would read as its own; "@xlabind" is that
    repository wherever it is not the main one, and the main one's own name in
    xlabind's workspace (WORKSPACE: workspace(name = "xlabind"))."""
    label = str(label)
    return label if label.startswith("@") else "@xlabind" + label

# A build for macOS (ELF-only link options left out).
_MACOS = _absolute(Label("//tools/platforms:macos_target"))

# A build for the one machine the pinned nvcc and CUDA runtime exist for
# (x86-64 Linux). Elsewhere (tools/platforms: Linux aarch64, macOS arm64) the
# macros leave CUDA out: no `cuda_srcs` compiled or linked, no "cuda" handlers
# or state types in a module.
_CUDA = _absolute(Label("//tools/platforms:linux_x86_64_target"))

# For a build without CUDA, of a library whose CUDA handlers sit beside its
# CPU ones in one source (examples/native_op/table_handlers.cc): each function
# in a section of its own, so that the module's link drops those no handler
# table names (the CUDA handlers, and with them their calls into the kernels'
# launchers, which nvcc did not compile for this machine).
_UNUSED_DROPPED_COPTS = ["-ffunction-sections", "-fdata-sections"]

def _with(deps, extra):
    """`deps` plus the labels in `extra` it does not name already."""
    named = [str(d).split("//")[-1] for d in deps]
    return deps + [e for e in extra if str(e).split("//")[-1] not in named]

def xlabind_ffi_library(
        name,
        srcs = [],
        hdrs = [],
        cuda_srcs = [],
        deps = [],
        copts = [],
        cuda_warnings_as_errors = False,
        **kwargs):
    """XLA FFI handlers as a static cc_library.

    Args:
      name: the library's name; an `xlabind_extension` lists it in `deps`.
      srcs: C++ sources, compiled by the C/C++ toolchain against the pinned XLA
        FFI headers and xlabind's helper headers (ffi/native: errors, shape
        checks, dtype dispatch, parallel loops).
      hdrs: headers of `srcs` and `cuda_srcs`.
      cuda_srcs: CUDA sources (.cu), compiled by the pinned nvcc (PTX for
        compute_80 by default, which any newer GPU compiles at load;
        `--@xlabind//third_party/cuda:gencode=release`: SASS for sm_80 and
        sm_90 besides, as xlabind's wheel ships), linking the pinned CUDA
        runtime. They should hold the kernels and `extern "C"` launchers that
        `srcs` call (CUDA's headers do not build with every C++ toolchain).
        A build for a machine the pinned CUDA is not for (Linux aarch64,
        macOS arm64: tools/platforms) leaves them out, with the functions of
        `srcs` that only "cuda" handlers reach (see xlabind_extension).
      deps: other cc_librarys the sources use.
      copts: compiler flags after xlabind's (C++17, hidden visibility).
      cuda_warnings_as_errors: nvcc's warnings fail the build, and in release
        builds a register spill too (xlabind's own kernels set it).
      **kwargs: the rest of cc_library's attributes.
    """
    cuda_deps = []
    extra_copts = []
    if cuda_srcs:
        nvcc_objects(
            name = name + "_cuda_objects",
            srcs = cuda_srcs,
            hdrs = hdrs,
            deps = _with(deps, [Label("//ffi/native:helpers")]),
            warnings_as_errors = cuda_warnings_as_errors,
        )
        cc_library(
            name = name + "_cuda",
            srcs = [":" + name + "_cuda_objects"],
            deps = [Label("@xlabind_cuda//:cudart")],
            linkstatic = True,
        )
        cuda_deps = [":" + name + "_cuda"]
        extra_copts = select({_CUDA: [], "//conditions:default": _UNUSED_DROPPED_COPTS})

    # (In this order: the x86-64 build's deps, and so its cache keys, as
    # before other machines existed.)
    helpers = _with(deps, [
        Label("//ffi/native:helpers"),
        Label("@xlabind_pypi//:xla_ffi_headers"),
    ])[len(deps):]
    cc_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        copts = XLABIND_COPTS + copts + extra_copts,
        linkstatic = True,
        deps = deps + select({_CUDA: cuda_deps, "//conditions:default": []}) + helpers,
        **kwargs
    )

def _extension_source_impl(ctx):
    ctx.actions.expand_template(
        template = ctx.file._template,
        output = ctx.outputs.out,
        substitutions = ctx.attr.substitutions,
    )

# The module's C++ source: ffi/extension_module.cc.tmpl with the text
# extension_module_substitutions made in the macro (which checked the
# handlers), so that no table travels as an encoded string.
_extension_source = rule(
    implementation = _extension_source_impl,
    attrs = {
        "substitutions": attr.string_dict(
            mandatory = True,
            doc = "{placeholder of the template: its text} (extension_module.bzl)",
        ),
        "out": attr.output(mandatory = True),
        "_template": attr.label(
            default = Label("//ffi:extension_module.cc.tmpl"),
            allow_single_file = True,
        ),
    },
)

def xlabind_handler(
        execute,
        instantiate = None,
        prepare = None,
        initialize = None,
        command_buffer = False):
    """One FFI target's handler with more than an execute stage, for `handlers`
    of xlabind_extension.

    Each argument is the C symbol of the handler XLA calls in that stage of a
    run (XLA_FFI_DEFINE_HANDLER_SYMBOL); a target with an execute stage only
    is just its symbol, `"MyOp"`. A misspelt argument fails where the table is
    written, and a wrong value with the argument's name. For example,
    `{"cpu": {"my_op": xlabind_handler(instantiate = "MyOpBuild", execute = "MyOp")}}`.

    Args:
      execute: the handler XLA calls on every run (required).
      instantiate: the handler XLA calls once per executable, before its first
        run: where a per-executable state is built (xlabind/native/state.h).
      prepare: CUDA only: XLA's prepare stage, before each run's initialize.
      initialize: CUDA only: XLA's initialize stage, before each run's
        execute.
      command_buffer: CUDA only: whether XLA may capture the execute stage into
        a command buffer (a CUDA graph) and replay it: for a handler that
        launches the same kernels every run and allocates nothing.
    """
    return handler(execute, instantiate, prepare, initialize, command_buffer)

def xlabind_extension(
        name,
        handlers,
        deps = [],
        state_types = {},
        load_from = None,
        extra_runpaths = [],
        **kwargs):
    """A Python extension module `name` (the file `name`.so) handing out FFI handlers.

    Args:
      name: the module's name (`import name`).
      handlers: {platform: {FFI target name: handler}}; platform "cpu" or
        "cuda", in any case. A handler is the C symbol of its execute stage,
        e.g. {"cpu": {"my_op": "MyOpCpu"}}, or xlabind_handler(...) for one
        with more stages or one XLA may capture into a CUDA graph. A build for
        a machine without the pinned CUDA leaves the "cuda" handlers (and
        state types) out of the module.
      deps: the libraries that define the symbols (xlabind_ffi_library).
      state_types: {platform: [symbol, ...]}: the per-executable state types
        the handlers' instantiate stages build, each exported with
        XLABIND_DEFINE_STATE_TYPE(symbol, Type) (xlabind/native/state.h). The
        module's state_types() hands them out; xlabind.register_ffi_targets
        registers them before the targets.
      load_from: the package-relative folder Python will load the module from,
        if it is copied elsewhere (default: this package). The module finds the
        pinned CUDA runtime from there, through its RUNPATH.
      extra_runpaths: more RUNPATH entries (e.g. where a wheel puts libcudart).
    """
    checked_handlers = module_handlers(name, handlers)
    checked_state_types = module_state_types(name, state_types)
    substitutions = extension_module_substitutions(name, checked_handlers, checked_state_types)
    has_cuda = "CUDA" in checked_handlers or "CUDA" in checked_state_types
    if has_cuda:
        # Without CUDA (see _CUDA), the module hands out its CPU handlers alone.
        substitutions = select({
            _CUDA: substitutions,
            "//conditions:default": extension_module_substitutions(
                name,
                {p: t for p, t in checked_handlers.items() if p != "CUDA"},
                {p: t for p, t in checked_state_types.items() if p != "CUDA"},
            ),
        })
    _extension_source(
        name = name + "_source",
        substitutions = substitutions,
        out = name + "_module.cc",
    )
    folder = native.package_name() if load_from == None else load_from
    depth = len([part for part in folder.split("/") if part]) + 1  # up to the runfiles root
    runpaths = ["$$ORIGIN/" + "../" * depth + _CUDA_RUNFILES + "/site/nvidia/cu13/lib"] + extra_runpaths
    version_script = "-Wl,--version-script=$(location %s)" % _absolute(Label("//ffi:module_exports.lds"))
    cc_binary(
        name = name + ".so",
        copts = XLABIND_COPTS + kwargs.pop("copts", []),
        srcs = [name + "_module.cc"],
        deps = _with(deps, [Label("//ffi/native:helpers")]) + [Label("@xlabind_python//:headers")],
        linkshared = True,
        additional_linker_inputs = [Label("//ffi:module_exports.lds")],
        linkopts = select({
            # Mach-O (tools/platforms:macos_arm64): no version script, no
            # $ORIGIN; the module names itself as dyld finds it.
            _MACOS: ["-Wl,-install_name,@rpath/%s.so" % name] +
                    (["-Wl,-dead_strip"] if has_cuda else []),
            _CUDA: [version_script] + ["-Wl,-rpath," + path for path in runpaths],
            # ELF without CUDA: the CUDA handlers left out of the module's
            # table are dropped (see _UNUSED_DROPPED_COPTS), and no RUNPATH
            # into the CUDA runtime.
            "//conditions:default": [version_script] +
                                    ["-Wl,-rpath," + path for path in extra_runpaths] +
                                    (["-Wl,--gc-sections"] if has_cuda else []),
        }),
        **kwargs
    )
