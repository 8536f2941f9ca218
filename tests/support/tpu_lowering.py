"""The TPU test files' one switch (tests/tpu/): off a TPU, CPU programs lower
xlabind's calls as the platform table's TPU record says (_platforms.py: host
transfers for Python functions, which jax lowers on a CPU too; the ops'
formulations for TPUs) and the Pallas kernels run interpreted, so the TPU
path's host half and the ops' formulations run under the assertions the
chip runs them under."""

import contextlib

import jax
import pytest

from xlabind import _platforms
from xlabind.ops.map_coordinates import tpu_kernels

ON_TPU = jax.default_backend() == "tpu"

#: What only the chip shows (tools/device_check.py runs these files there).
chip_only = pytest.mark.skipif(
    not ON_TPU, reason="needs a TPU chip (tools/device_check.py runs it on one)"
)

#: jax.export's safety checks off for every target xlabind.ops calls.
EXPORT_CHECKS = [
    jax.export.DisabledSafetyCheck.custom_call(name)
    for name in (
        "xlabind_map_coordinates",
        "xlabind_map_coordinates_transpose",
        "xlabind_spline_filter",
        "xlabind_spline_filter_transpose",
    )
]


@contextlib.contextmanager
def tpu_rule_for_cpu_programs():
    """CPU programs lowered as TPU programs while it is open (nothing on a TPU)."""
    if ON_TPU:
        yield
        return
    cpu = _platforms.PLATFORMS["cpu"]
    _platforms.PLATFORMS["cpu"] = _platforms.PLATFORMS["tpu"]
    tpu_kernels.INTERPRET = True
    jax.clear_caches()
    try:
        yield
    finally:
        tpu_kernels.INTERPRET = False
        _platforms.PLATFORMS["cpu"] = cpu
        jax.clear_caches()
