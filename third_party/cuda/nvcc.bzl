"""nvcc_objects: where nvcc runs. Compiles .cu files with the pinned nvcc into
position-independent objects, for the GPUs the `gencode` flag says:

  --//third_party/cuda:gencode=ptx      (the default) PTX for compute_80,
                                        which the driver compiles, once, for
                                        any GPU from Ampere on: one pass of
                                        nvcc, for development and tests;
  --//third_party/cuda:gencode=release  SASS for sm_80 and sm_90 and PTX for
                                        newer GPUs: what a wheel ships
                                        (`--config=release`, .bazelrc).

(From another workspace: --@xlabind//third_party/cuda:gencode=release.)

nvcc's host compiler (-ccbin) is the resolved C/C++ toolchain's compiler when
that is a gcc or clang (a consumer's own toolchain), and the machine's g++
when it is xlabind's zig: CUDA's headers refuse zig's libc++ (see
docs/development/hermetic.md). So .cu files hold device code and `extern "C"` launchers
only; the C++ that includes XLA's FFI headers is compiled by the C++
toolchain and calls the launchers (ffi/defs.bzl).
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

# Release: SASS for Ampere and Hopper; PTX of the newest, which the driver
# compiles for any later GPU.
CUDA_ARCHITECTURES = ["80", "90"]

GencodeInfo = provider(
    doc = "Which code nvcc writes for the GPUs: PTX only, or SASS and PTX.",
    fields = {"value": "ptx or release"},
)

def _gencode_setting_impl(ctx):
    if ctx.build_setting_value not in ("ptx", "release"):
        fail("--%s must be ptx or release, got %r" % (ctx.label, ctx.build_setting_value))
    return [GencodeInfo(value = ctx.build_setting_value)]

gencode_setting = rule(
    implementation = _gencode_setting_impl,
    build_setting = config.string(flag = True),
)

def _gencode_flags(gencode):
    if gencode == "ptx":
        oldest = CUDA_ARCHITECTURES[0]
        return ["-gencode", "arch=compute_%s,code=compute_%s" % (oldest, oldest)]
    flags = []
    for arch in CUDA_ARCHITECTURES:
        flags += ["-gencode", "arch=compute_%s,code=sm_%s" % (arch, arch)]
    newest = CUDA_ARCHITECTURES[-1]
    flags += ["-gencode", "arch=compute_%s,code=compute_%s" % (newest, newest)]
    return flags

# Compilers nvcc accepts as its host compiler (the toolchain's `compiler` field).
_HOST_COMPILERS = ["gcc", "clang"]

def _host_compiler(ctx):
    """The -ccbin for nvcc: the C++ toolchain's compiler where nvcc can use it."""
    if ctx.attr.host_compiler:
        return ctx.attr.host_compiler
    toolchain = find_cpp_toolchain(ctx)
    executable = toolchain.compiler_executable
    if toolchain.compiler in _HOST_COMPILERS and executable.startswith("/"):
        return executable
    return "g++"

def _nvcc_objects_impl(ctx):
    compilation = [dep[CcInfo].compilation_context for dep in ctx.attr.deps if CcInfo in dep]
    includes = depset(transitive = [c.includes for c in compilation] +
                                   [c.quote_includes for c in compilation] +
                                   [c.system_includes for c in compilation])
    headers = depset(ctx.files.hdrs, transitive = [c.headers for c in compilation])
    defines = depset(transitive = [c.defines for c in compilation])
    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_nvcc/%s/%s.o" % (ctx.label.name, src.basename[:-len(".cu")]))
        args = ctx.actions.args()
        args.add_all(["-ccbin", _host_compiler(ctx), "-std=c++17", "-O3", "-c"])
        args.add_all(["-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden"])
        args.add_all(_gencode_flags(ctx.attr._gencode[GencodeInfo].value))
        args.add("-I.")
        args.add_all(includes, format_each = "-I%s")
        args.add_all(defines, format_each = "-D%s")
        if ctx.attr.warnings_as_errors:
            args.add_all(["-Werror", "all-warnings"])
            if ctx.attr._gencode[GencodeInfo].value == "release":  # ptxas runs only then
                args.add_all(["-Xptxas", "-warn-spills", "-Xptxas", "-Werror"])
        args.add_all(ctx.attr.copts)
        args.add(src)
        args.add("-o", obj)
        ctx.actions.run(
            executable = ctx.executable._nvcc,
            arguments = [args],
            inputs = depset([src], transitive = [headers]),
            outputs = [obj],
            mnemonic = "Nvcc",
            progress_message = "nvcc %s" % src.short_path,
            # nvcc finds the host compiler (and g++ its tools) on PATH.
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin"},
        )
        objects.append(obj)
    return [DefaultInfo(files = depset(objects))]

nvcc_objects = rule(
    implementation = _nvcc_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"], doc = "CUDA sources"),
        "hdrs": attr.label_list(allow_files = True, doc = "headers they include"),
        "deps": attr.label_list(providers = [CcInfo], doc = "cc_libraries whose headers they use"),
        "copts": attr.string_list(doc = "more nvcc flags"),
        "warnings_as_errors": attr.bool(
            doc = "nvcc's warnings are errors, and with SASS (release) so is a register " +
                  "spill (ptxas -warn-spills): xlabind's own kernels",
        ),
        "host_compiler": attr.string(
            doc = "nvcc's -ccbin; default: the C++ toolchain's gcc or clang, else g++",
        ),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
        "_gencode": attr.label(default = Label("//third_party/cuda:gencode")),
        "_nvcc": attr.label(
            default = Label("@xlabind_cuda//:nvcc"),
            executable = True,
            cfg = "exec",
            allow_single_file = True,
        ),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
)
