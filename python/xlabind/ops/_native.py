"""The ops' compiled modules, loaded and registered the way any client's
extension module is (xlabind.register_ffi_targets; examples/native_op/ops.py
does the same): `_xlabind_ops` (the CPU handlers) and `_xlabind_cuda_ops`
(the CUDA kernels), both built by ffi/ops/native_ops.bzl.

The CUDA module links the CUDA runtime (libcudart.so.13, from the wheel's
cuda13 extra). Without it the module does not load, and the ops' CUDA
targets say why when a program needs them (the one hook into xlabind's
runtime: mark_unavailable).
"""

import xlabind
import xlabind._xlabind_ops as _xlabind_ops
from xlabind._runtime.extension import mark_unavailable

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


xlabind.register_ffi_targets(_xlabind_ops)
try:
    import xlabind._xlabind_cuda_ops as _xlabind_cuda_ops
except ImportError as error:
    # The CUDA module holds the CUDA versions of the CPU module's ops.
    mark_unavailable("cuda", _xlabind_ops.registrations()["cpu"], cuda_runtime_missing(error))
else:
    xlabind.register_ffi_targets(_xlabind_cuda_ops)
