"""What the GPU test files share: whether there is a CUDA device, the skip
marker that says why not, and putting arrays on it."""

import jax
import pytest


def has_gpu() -> bool:
    try:
        return any(d.platform == "gpu" for d in jax.devices())
    except RuntimeError:
        return False


requires_gpu = pytest.mark.skipif(
    not has_gpu(),
    reason="no CUDA device here (JAX_PLATFORMS=cpu or a CPU-only jaxlib); "
    "tools/device_check.py runs these on a GPU",
)


def on_gpu(x):
    return jax.device_put(x, jax.devices("gpu")[0])


def on_cpu(x):
    return jax.device_put(x, jax.devices("cpu")[0])
