"""How a failure in one device's call stops every device of a sharded program
at the same point, instead of leaving the others waiting in a collective for
the device that failed (XLA aborts the process after 40 s of that on the CPU,
and waits for ever on GPUs).

In a program over several devices, each device runs its own copy of the
program, and a call that fails ends only its own device's run. So the
per-device calls xlabind makes (once per program on the first device, once
per device with a sharding rule, once per device inside ``jax.shard_map``)
do not fail: they report their status (ffi/native/call_status.h) as one more
result, which travels with the program's data, through a collective, to
every device; then a check on every device (the ``xlabind_check_status``
target) fails them all with the failed call's message, before anything uses
the call's results.

* Once per program: the status is summed with the results from the first
  device to the others (one collective, as before, a few KiB larger).
* Once per device: the statuses are gathered from every device (one more
  collective per call: ``tools/benchmark.py`` measures it).
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.ffi import build_ffi_lowering_function
from jax.interpreters import mlir

from xlabind import _extension
from xlabind import _jax_internals as internals
from xlabind.primitive import Call, bind

xlabind_check_p = Primitive("xlabind_check_status")
xlabind_check_p.multiple_results = True


@xlabind_check_p.def_abstract_eval
def _check_abstract_eval(statuses, *values):
    del statuses
    return list(values)


def _lower_check(ctx, statuses, *values):
    # The values pass through aliased: the check copies nothing.
    lowering = build_ffi_lowering_function(
        _extension.CHECK_STATUS_TARGET,
        operand_output_aliases={i + 1: i for i in range(len(values))})
    return lowering(ctx, statuses, *values).results


for _platform in ("cpu", "cuda"):
    mlir.register_lowering(xlabind_check_p, _lower_check, platform=_platform)


def checked(statuses, values: Sequence) -> list:
    """`values`, once the check has found no failure among `statuses`."""
    return xlabind_check_p.bind(statuses, *values)


def call_on_every_device(call: Call, operands: Sequence, axes: tuple) -> list:
    """The call on each device's operands (inside a computation that is manual
    over `axes`, the program's mesh axes): if it fails on any device, every
    device fails at this point with its message."""
    *results, status = bind(call.replace(reports_status=True), operands)
    status = internals.vary_over(status, axes)
    return checked(jax.lax.all_gather(status, axes), results)


def call_on_first_device(call: Call, operands: Sequence, axes: tuple) -> list:
    """The call on the first device only (inside a computation that is manual
    over `axes`), its results (and status) broadcast to every device; if it
    fails, every device fails at this point with its message."""
    first = jax.lax.axis_index(axes) == 0
    avals = (*call.result_avals, jax.core.ShapedArray((_extension.STATUS_BYTES,), np.uint8))
    outs = jax.lax.cond(first, lambda: tuple(bind(call.replace(reports_status=True), operands)),
                        lambda: tuple(jnp.zeros(a.shape, a.dtype) for a in avals))
    *results, status = [_from_first(x, axes) for x in outs]
    return checked(status, results)


def _from_first(x, axes):
    """`x` of the first device on every device, given zeros on the others: a sum
    (exact: one term is not zero) over the bits, which works for every dtype."""
    dtype = np.dtype(x.dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return jax.lax.psum(x, axes)
    if dtype == np.bool_:
        return jax.lax.psum(x.astype(np.uint8), axes).astype(np.bool_)
    if dtype.name in ("int2", "uint2", "int4", "uint4", "float4_e2m1fn"):  # packed by XLA
        return jax.lax.psum(x.astype(np.float32), axes).astype(dtype)
    bits = np.dtype(f"uint{dtype.itemsize * 8}")
    summed = jax.lax.psum(jax.lax.bitcast_convert_type(x, bits), axes)
    return jax.lax.bitcast_convert_type(summed, dtype)
