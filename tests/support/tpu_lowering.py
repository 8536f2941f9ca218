"""The TPU test files' one switch (tests/tpu/): off a TPU, CPU programs lower
xlabind's calls with the TPU rule (jax lowers the same host callback on a
CPU) and the Pallas kernels run interpreted, so the TPU path's host half and
the ops' formulations run under the assertions the chip runs them under."""

import contextlib

import jax
from jax.interpreters import mlir

from xlabind._lowering import rule
from xlabind._primitive.primitive import xlabind_call_p
from xlabind.ops import tpu_kernels

ON_TPU = jax.default_backend() == "tpu"


@contextlib.contextmanager
def tpu_rule_for_cpu_programs():
    """The TPU rule for CPU programs while it is open (nothing on a TPU)."""
    if ON_TPU:
        yield
        return
    mlir.register_lowering(xlabind_call_p, rule._tpu_rule, platform="cpu", cacheable=False)
    tpu_kernels.INTERPRET = True
    jax.clear_caches()
    try:
        yield
    finally:
        tpu_kernels.INTERPRET = False
        mlir.register_lowering(xlabind_call_p, rule._lowering_for("cpu"), platform="cpu")
        jax.clear_caches()
