"""The implementations of xlabind.ops that one contract suite holds alike
(tests/ops/test_map_coordinates.py), each run where it can be here, as jax's
FFI examples' tests skip by device:

- "cpu": the CPU kernels, on the CPU device;
- "tpu": the TPU formulation: on a TPU chip when there is one, else on the
  CPU with the TPU lowering rule standing in for the CPU one and its Pallas
  kernels interpreted (tests/support/tpu_lowering.py);
- "gpu": the CUDA kernels, on a GPU; without one its cases are a single
  skip a test, with the reason.

`params` gives a test its cases over the implementations present (each a
seeded sample of its product in the default loop: tests/support/cases.py);
`switch_to` sets up the lowering rule the next case needs (a test file's
autouse fixture calls it), so that the cases of one implementation run
together without a cache flush each."""

import contextlib

import cases
import gpu_devices
import jax
import numpy as np
import pytest
import tpu_lowering

NAMES = ("cpu", "tpu", "gpu")
# A TPU computes in float32 (the formulation is written for it).
DTYPES = {"cpu": (np.float32, np.float64), "tpu": (np.float32,), "gpu": (np.float32, np.float64)}


def absent(name: str):
    """Why `name` cannot run here, or None."""
    if name == "gpu" and not gpu_devices.has_gpu():
        return "no CUDA device here; the GPU machine's runbook runs these cases on one"
    return None


def device(name: str):
    if name == "gpu":
        return jax.devices("gpu")[0]
    if name == "tpu" and tpu_lowering.ON_TPU:
        return jax.devices("tpu")[0]
    return jax.devices("cpu")[0]


def put(name: str, x):
    """`x` (an array or a list of them) on `name`'s device."""
    if isinstance(x, (list, tuple)):
        return [put(name, v) for v in x]
    return jax.device_put(np.asarray(x), device(name))


def params(test: str, *axes, sampled: int, keep=None, dtype_axis=None):
    """pytest parameters (implementation, *case) for every implementation
    present: each its product of `axes` (filtered by `keep(name, *case)`;
    `dtype_axis`: the index of the axis of dtypes, cut to the ones the
    implementation computes in), sampled per implementation in the default
    loop. An absent implementation is one skipped parameter."""
    out = []
    for name in NAMES:
        its = [
            tuple(v for v in axis if v in DTYPES[name]) if i == dtype_axis else axis
            for i, axis in enumerate(axes)
        ]
        why = absent(name)
        if why:
            first = tuple(axis[0] for axis in its)
            out.append(pytest.param(name, *first, id=name, marks=pytest.mark.skip(reason=why)))
            continue
        for p in cases.product(
            f"{test} {name}",
            *its,
            sampled=sampled,
            keep=keep and (lambda *case, _n=name: keep(_n, *case)),
        ):
            out.append(pytest.param(name, *p.values, id=f"{name}-{p.id}"))
    return out


_active = {"name": "cpu", "exit": None}


def switch_to(name: str):
    """The lowering rule `name` needs, for the cases that follow."""
    wanted = "tpu" if name == "tpu" else "cpu"
    if _active["name"] == wanted:
        return
    if _active["exit"] is not None:
        _active["exit"].close()
        _active["exit"] = None
    if wanted == "tpu":
        stack = contextlib.ExitStack()
        stack.enter_context(tpu_lowering.tpu_rule_for_cpu_programs())
        _active["exit"] = stack
    _active["name"] = wanted
