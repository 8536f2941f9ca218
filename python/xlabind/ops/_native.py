"""The ops' compiled modules, loaded and registered the way any client's
extension module is (xlabind.register_ffi_targets; examples/native_op/ops.py
does the same): `_xlabind_ops` (the CPU handlers) and `_xlabind_cuda_ops`
(the CUDA kernels), both built by ffi/ops/native_ops.bzl.

The CUDA module links the CUDA runtime (libcudart.so.13, from the wheel's
cuda13 extra). Without it the module does not load, and the ops' CUDA
targets say why when a program needs them (the one hook into xlabind's
runtime: mark_unavailable). The wheels for machines other than x86_64 Linux
(aarch64 Linux) hold no CUDA module at all, and say that instead. Where the
CPU module is not installed at all (a Bazel target on
@xlabind//python:xlabind_core), every op says that instead.
"""

from platform import machine as host_machine

from xlabind._runtime.extension import mark_unavailable, register_ffi_targets

#: The FFI targets xlabind.ops calls: what the CPU module registers
#: (tests/native/test_native_targets.py holds the two equal).
TARGET_NAMES = (
    "xlabind_map_coordinates",
    "xlabind_map_coordinates_transpose",
    "xlabind_spline_filter",
    "xlabind_spline_filter_transpose",
)

#: The platforms whose compiled modules run the ops' targets (the CPU
#: module and the CUDA one); the others run the targets' formulations.
NATIVE_PLATFORMS = ("cpu", "cuda")

#: Why the ops cannot run where their CPU module is not installed.
OPS_MODULE_MISSING = (
    "this installation of xlabind has no compiled module for xlabind.ops "
    "(xlabind/_xlabind_ops.so). A Bazel target that depends on "
    "@xlabind//python:xlabind_core leaves it out: depend on @xlabind//python:xlabind "
    "for xlabind.ops. Elsewhere, reinstall xlabind."
)

#: What the wheel's cuda13 extra installs: the CUDA runtime the CUDA module
#: loads (tools/build_wheel.py derives the extra's requirement from the CUDA
#: lock; tests/packaging/test_wheel.py holds the two equal).
CUDA_RUNTIME_REQUIREMENT = "nvidia-cuda-runtime>=13.0.96,<14"


def cuda_runtime_missing(error: Exception) -> str:
    """Why the CUDA ops are unavailable when the CUDA module failed to load."""
    return (
        f"xlabind's CUDA kernels need the CUDA 13 runtime (libcudart.so.13), which did "
        f'not load ({error}). Install it with `pip install "{CUDA_RUNTIME_REQUIREMENT}"` '
        f"(what xlabind's cuda13 extra installs)."
    )


def cuda_module_missing(machine: str) -> str:
    """Why the CUDA ops are unavailable where the package has no CUDA module:
    xlabind builds its CUDA kernels for x86_64 Linux alone so far (the nvcc and
    CUDA runtime it pins are x86_64 packages)."""
    return (
        f"xlabind's wheels for {machine} carry no native CUDA kernels yet "
        "(xlabind/_xlabind_cuda_ops.so is built for x86_64 Linux alone): xlabind.ops "
        "run on the CPU here. Python functions bound with xlabind still run on GPUs, "
        "through jax's own CUDA support."
    )


try:
    import xlabind._xlabind_ops as _xlabind_ops
except ModuleNotFoundError as error:
    if error.name != "xlabind._xlabind_ops":
        raise
    # The rest of xlabind works without it; the ops say why they cannot run.
    for platform in NATIVE_PLATFORMS:
        mark_unavailable(platform, TARGET_NAMES, OPS_MODULE_MISSING)
else:
    register_ffi_targets(_xlabind_ops)
    try:
        import xlabind._xlabind_cuda_ops as _xlabind_cuda_ops
    except ModuleNotFoundError as error:
        if error.name != "xlabind._xlabind_cuda_ops":
            raise
        # Not installed at all (not a runtime that failed to load).
        mark_unavailable("cuda", TARGET_NAMES, cuda_module_missing(host_machine()))
    except ImportError as error:
        # The CUDA module holds the CUDA versions of the CPU module's ops.
        mark_unavailable("cuda", TARGET_NAMES, cuda_runtime_missing(error))
    else:
        register_ffi_targets(_xlabind_cuda_ops)
