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
    xlabind.register_ffi_targets(my_ops.registrations())
    op = xlabind.linear(xlabind.ffi_target("my_op", platforms=("cpu", "cuda")), ...)
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library")
load("//third_party/cuda:nvcc.bzl", "nvcc_objects")

# What XLA's FFI headers and xlabind's need of any C++ compiler, whatever the
# toolchain defaults to (Bazel 4's auto-configured gcc says -std=c++0x): C++17,
# and symbols kept inside the module. A library's own `copts` come after these,
# so `copts = ["-std=c++20"]` picks a newer standard.
XLABIND_COPTS = ["-std=c++17", "-fvisibility=hidden"]

# Platform keys of `handlers`, in any case, and the name each is registered
# under (jax's platform names for XLA's FFI registry).
_PLATFORMS = {"cpu": "cpu", "cuda": "CUDA"}

def _with(deps, extra):
    """`deps` plus the labels in `extra` it does not name already."""
    named = [str(d).split("//")[-1] for d in deps]
    return deps + [e for e in extra if str(e).split("//")[-1] not in named]

def xlabind_ffi_library(name, srcs = [], hdrs = [], cuda_srcs = [], deps = [], copts = [],
                        **kwargs):
    """XLA FFI handlers as a static cc_library.

    `srcs` are compiled by the C/C++ toolchain against the pinned XLA FFI headers
    and xlabind's helper headers (ffi/native: errors, shape checks, dtype
    dispatch, parallel loops). `cuda_srcs` (.cu) are compiled by the pinned nvcc
    for sm_80 and sm_90 with PTX for newer GPUs, and link the pinned CUDA
    runtime; they should hold the kernels and `extern "C"` launchers that
    `srcs` call (CUDA's headers do not build with every C++ toolchain).
    """
    cuda_deps = []
    if cuda_srcs:
        nvcc_objects(
            name = name + "_cuda_objects",
            srcs = cuda_srcs,
            hdrs = hdrs,
            deps = _with(deps, [Label("//ffi:native_helpers")]),
        )
        cc_library(
            name = name + "_cuda",
            srcs = [":" + name + "_cuda_objects"],
            deps = ["@xlabind_cuda//:cudart"],
            linkstatic = True,
        )
        cuda_deps = [":" + name + "_cuda"]
    cc_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        copts = XLABIND_COPTS + copts,
        linkstatic = True,
        deps = _with(deps + cuda_deps, [
            Label("//ffi:native_helpers"),
            "@xlabind_pypi//:xla_ffi_headers",
        ]),
        **kwargs
    )

# The execution stages a target may have (XLA's order), by their key in
# xlabind_extension's `handlers`.
_STAGES = ["instantiate", "prepare", "initialize", "execute"]

def _extension_source_impl(ctx):
    declared, declarations, wrappers, entries = {}, [], [], []
    for spec in ctx.attr.handlers:
        parts = spec.split(" ")
        platform, target, command_buffer, symbols = parts[0], parts[1], parts[2] == "1", parts[3:]
        pointers = []
        for symbol in symbols:
            if symbol == "-":
                pointers.append("nullptr")
                continue
            if symbol not in declared:
                declared[symbol] = True
                declarations.append("struct XLA_FFI_Error* %s(struct XLA_FFI_CallFrame*);" % symbol)
            pointers.append("&" + symbol)
        if command_buffer:
            execute = symbols[-1]
            wrapper = execute + "_command_buffer"
            if wrapper not in declared:
                declared[wrapper] = True
                wrappers.append(
                    "XLA_FFI_Error* %s(XLA_FFI_CallFrame* frame) {\n" % wrapper +
                    "  return xlabind::native::CallWithTraits(\n" +
                    "      &%s, XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE, frame);\n}" %
                    execute)
            pointers[-1] = "&" + wrapper
        entries.append('  if (!Add(platforms, "%s", "%s", {%s})) return Fail(platforms);' %
                       (platform, target, ", ".join(pointers)))
    type_entries = []
    for spec in ctx.attr.state_types:
        platform, symbol = spec.split(" ")
        declarations.append("XLA_FFI_TypeId* %s_type_id(void);" % symbol)
        declarations.append("const XLA_FFI_TypeInfo* %s_type_info(void);" % symbol)
        type_entries.append(
            '  if (!AddType(types, "%s", "%s.%s", %s_type_id(), %s_type_info())) return Fail(types);' %
            (platform, ctx.attr.module, symbol, symbol, symbol))
    ctx.actions.expand_template(
        template = ctx.file._template,
        output = ctx.outputs.out,
        substitutions = {
            "%{module}": ctx.attr.module,
            "%{declarations}": "\n".join(sorted(declarations)),
            "%{wrappers}": "\n\n".join(wrappers),
            "%{entries}": "\n".join(entries),
            "%{type_entries}": "\n".join(type_entries),
        },
    )

_extension_source = rule(
    implementation = _extension_source_impl,
    attrs = {
        "module": attr.string(mandatory = True),
        "handlers": attr.string_list(
            doc = '"platform target command_buffer(0|1) instantiate prepare initialize execute" ' +
                  'entries, "-" for a stage the target does not have',
        ),
        "state_types": attr.string_list(doc = '"platform symbol" entries'),
        "out": attr.output(mandatory = True),
        "_template": attr.label(
            default = Label("//ffi:extension_module.cc.tmpl"),
            allow_single_file = True,
        ),
    },
)

def _registered_platform(name, platform, argument):
    """The name jax registers `platform` under ("cpu", "CUDA"); fails the build
    for a platform xlabind_extension does not know."""
    registered = _PLATFORMS.get(platform.lower())
    if registered == None:
        fail("xlabind_extension(%s): unknown platform %r in %s; use %s (any case)" %
             (name, platform, argument, " or ".join(['"%s"' % p for p in _PLATFORMS])))
    return registered

def _handler_spec(name, platform, registered, target, handler):
    """The `handlers` entry of _extension_source for one target."""
    if type(handler) == type(""):
        handler = {"execute": handler}
    if type(handler) != type({}):
        fail("xlabind_extension(%s): handlers[%r][%r] must be the execute handler's C symbol " %
             (name, platform, target) + "(a string) or a dict of stages, got %r" % (handler,))
    for key in handler:
        if key not in _STAGES and key != "command_buffer":
            fail("xlabind_extension(%s): handlers[%r][%r] has an unknown key %r; use %s or " %
                 (name, platform, target, key, ", ".join(_STAGES)) + "command_buffer")
    if "execute" not in handler:
        fail("xlabind_extension(%s): handlers[%r][%r] names no \"execute\" handler" %
             (name, platform, target))
    command_buffer = handler.get("command_buffer", False)
    if command_buffer and registered != "CUDA":
        fail("xlabind_extension(%s): handlers[%r][%r] asks for command_buffer, which only " %
             (name, platform, target) + "CUDA handlers can be (XLA's command buffers are CUDA graphs)")
    if registered == "cpu" and ("prepare" in handler or "initialize" in handler):
        fail("xlabind_extension(%s): handlers[%r][%r] has a prepare or initialize stage, which " %
             (name, platform, target) + "XLA's CPU runtime never runs (it runs instantiate and " +
             "execute only)")
    symbols = [handler.get(stage, "-") for stage in _STAGES]
    return "%s %s %s %s" % (registered, target, "1" if command_buffer else "0", " ".join(symbols))

def xlabind_extension(name, handlers, deps = [], state_types = {}, load_from = None,
                      extra_runpaths = [], **kwargs):
    """A Python extension module `name` (the file `name`.so) handing out FFI handlers.

    Args:
      name: the module's name (`import name`).
      handlers: {platform: {FFI target name: handler}}; platform "cpu" or
        "cuda", in any case. A handler is the C symbol of its execute stage,
        e.g. {"cpu": {"my_op": "MyOpCpu"}}, or a dict of stages:
        {"instantiate": "MyOpInstantiate", "execute": "MyOp"} ("prepare" and
        "initialize" too on CUDA), plus "command_buffer": True for a CUDA
        handler XLA may capture into a command buffer (CUDA graph).
      deps: the libraries that define the symbols (xlabind_ffi_library).
      state_types: {platform: [symbol, ...]}: the per-executable state types
        the handlers' instantiate stages build, each exported with
        XLABIND_DEFINE_STATE_TYPE(symbol, Type) (ffi/native/state.h). The
        module's state_types() hands them out; xlabind.register_ffi_targets
        registers them before the targets.
      load_from: the package-relative folder Python will load the module from,
        if it is copied elsewhere (default: this package). The module finds the
        pinned CUDA runtime from there, through its RUNPATH.
      extra_runpaths: more RUNPATH entries (e.g. where a wheel puts libcudart).
    """
    specs = []
    for platform, targets in handlers.items():
        registered = _registered_platform(name, platform, "handlers")
        for target, handler in targets.items():
            specs.append(_handler_spec(name, platform, registered, target, handler))
    type_specs = []
    for platform, symbols in state_types.items():
        registered = _registered_platform(name, platform, "state_types")
        for symbol in symbols:
            type_specs.append("%s %s" % (registered, symbol))
    _extension_source(name = name + "_source", module = name, handlers = specs,
                      state_types = type_specs, out = name + "_module.cc")
    folder = native.package_name() if load_from == None else load_from
    depth = len([part for part in folder.split("/") if part]) + 1  # up to the runfiles root
    runpaths = ["$$ORIGIN/" + "../" * depth + "xlabind_cuda/site/nvidia/cu13/lib"] + extra_runpaths
    cc_binary(
        name = name + ".so",
        copts = XLABIND_COPTS + kwargs.pop("copts", []),
        srcs = [name + "_module.cc"],
        deps = _with(deps, [Label("//ffi:native_helpers")]) + ["@xlabind_python//:headers"],
        linkshared = True,
        additional_linker_inputs = [Label("//ffi:module_exports.lds")],
        linkopts = ["-Wl,--version-script=$(location %s)" % Label("//ffi:module_exports.lds")] +
                   ["-Wl,-rpath," + path for path in runpaths],
        **kwargs
    )
