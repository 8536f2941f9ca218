"""How a failure in one device's call stops every device of a sharded program
at the same point, instead of leaving the others waiting in a collective for
the device that failed (XLA aborts the process after 40 s of that on the CPU,
and waits for ever on GPUs).

In a program over several devices, each device runs its own copy of the
program, and a call that fails ends only its own device's run. So the
per-device calls xlabind makes (once per program on the first device, once
per device with a sharding rule, once per device inside ``jax.shard_map``)
do not fail: they report their status (xlabind/native/call_status.h) as one more
result, which travels with the program's data, through a collective, to
every device; then a check on every device (the ``xlabind_check_status``
target) fails them all with the failed call's message, before anything uses
the call's results.

* Once per program: the status is summed with the results from the first
  device to the others (one collective, as before, a few KiB larger).
* Once per device: whether any call failed is summed across devices (one
  more, small all-reduce per call: ``tools/benchmarks`` measures it); the
  statuses themselves travel only when one failed.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.ffi import build_ffi_lowering_function
from jax.interpreters import mlir

from xlabind import _jax_internals as internals
from xlabind._platforms import PLATFORMS
from xlabind._primitive.primitive import Call, bind, status_aval
from xlabind._runtime import extension as _extension

xlabind_check_p = Primitive("xlabind_check_status")
xlabind_check_p.multiple_results = True


@xlabind_check_p.def_abstract_eval
def _check_abstract_eval(statuses, *values, processes):
    del statuses, processes
    return list(values)


def _lower_check(ctx, statuses, *values, processes: tuple[int, ...]):
    # The values pass through aliased: the check copies nothing.
    lowering = build_ffi_lowering_function(
        _extension.CHECK_STATUS_TARGET,
        operand_output_aliases={i + 1: i for i in range(len(values))},
    )
    return lowering(ctx, statuses, *values, processes=np.asarray(processes, np.int64)).results


def _lower_passing(ctx, statuses, *values, processes: tuple[int, ...]):
    # Where no handler runs (a TPU), no call reports a failure: a JAX
    # formulation cannot fail, and host transfers run once per program.
    del ctx, statuses, processes
    return list(values)


for _record in PLATFORMS.values():
    mlir.register_lowering(
        xlabind_check_p,
        _lower_check if _record.runs_handlers else _lower_passing,
        platform=_record.name,
    )


def checked(statuses, values: Sequence, processes: tuple[int, ...] = ()) -> list:
    """`values`, once the check has found no failure among `statuses`; with
    `processes` (one per status row) its message names the failed process."""
    return xlabind_check_p.bind(statuses, *values, processes=tuple(processes))


def row_processes(mesh, axes: tuple) -> tuple[int, ...]:
    """The process of each status row a collective over `axes` of `mesh` makes, in a
    program over several processes (jax.distributed); () otherwise, or where
    the rows are not the mesh's devices in order."""
    if jax.process_count() == 1:
        return ()
    try:
        devices = mesh.devices
    except (AttributeError, ValueError):
        # No devices: an abstract mesh (a shard_map over the context's
        # abstract mesh, lowered with no concrete mesh set) raises ValueError.
        return ()
    spread = tuple(a for a in mesh.axis_names if mesh.shape[a] > 1)
    if tuple(a for a in axes if mesh.shape[a] > 1) != spread:
        return ()
    return tuple(int(d.process_index) for d in np.asarray(devices).flat)


#: Whether per-device calls exchange their status (always, but for
#: tools/benchmarks, which measures what the exchange costs).
_EXCHANGE_STATUS = True


def call_on_every_device(
    call: Call,
    operands: Sequence,
    axes: tuple,
    processes: tuple[int, ...] = (),
    exchange: bool = True,
) -> list:
    """The call on each device's operands (inside a computation that is manual
    over `axes`, the program's mesh axes): if it fails on any device, every
    device fails at this point with its message (naming the device's process
    from `processes`, see row_processes). What travels when all went well is
    one byte per device; the messages only when one failed. Without
    `exchange` (an exported program, or a function bound with
    stop_all_devices=False) a plain call, failing its own device."""
    if not exchange or not call.fn.stop_all_devices:
        return list(bind(call, operands))
    *results, status = bind(call.replace(reports_status=True), operands)
    if not _EXCHANGE_STATUS:
        return results
    status = internals.vary_over(status, axes)
    # All-reduces only: XLA's GSPMD partitioner cannot compile an all-gather
    # inside a shard_map that is manual over some of the mesh's axes.
    failed = jax.lax.psum((status[0] != 0).astype(np.int32), axes) > 0

    def stop():
        # Every device's status in its own row: the gather, as a sum of rows
        # that are zero but one's (exact for bytes), run only when one failed.
        rows = jnp.zeros((_axes_size(axes), status.size), np.int32)
        rows = rows.at[jax.lax.axis_index(axes)].set(status.astype(np.int32))
        rows = jax.lax.psum(rows, axes).astype(np.uint8)
        return tuple(checked(rows, results, processes))

    # Every device takes the same branch: `failed` is the same everywhere.
    return list(jax.lax.cond(failed, stop, lambda: tuple(results)))


def _axes_size(axes: tuple) -> int:
    return int(np.prod([jax.lax.axis_size(a) for a in axes]))


def call_on_first_device(
    call: Call,
    operands: Sequence,
    axes: tuple,
    processes: tuple[int, ...] = (),
    exchange: bool = True,
) -> list:
    """The call on the first device only (inside a computation that is manual
    over `axes`), its results and status broadcast to every device in one
    collective; if it fails, every device fails at this point with its message.
    Without `exchange` (an exported program) a plain call, results only. A
    function bound with stop_all_devices=False keeps the exchange here: its
    status rides in the collective the results need anyway, and without it a
    failure on the first device would strand the others in that collective."""
    made = call.replace(reports_status=True) if exchange else call
    exchange = exchange and _EXCHANGE_STATUS
    first = jax.lax.axis_index(axes) == 0
    avals = (*call.result_avals, status_aval())
    if not exchange:
        avals = avals[:-1]
    outs = jax.lax.cond(
        first,
        lambda: tuple(bind(made, operands))[: len(avals)],
        lambda: tuple(jnp.zeros(a.shape, a.dtype) for a in avals),
    )
    outs = _from_first(outs, axes, first)
    return checked(outs[-1], outs[:-1], processes[:1]) if exchange else outs


def _from_first(xs: Sequence, axes, first) -> list:
    """`xs` of the first device (where `first`) on every device: the bytes of
    all of them summed in one collective, the others' bytes zeroed first
    (exact: one term is not zero), which works for every dtype — even one
    whose zeros are not zero bytes (float8_e8m0fnu has no zero)."""
    pieces = [jnp.where(first, _as_bytes(x), np.uint8(0)) for x in xs]
    if not pieces:
        return []
    summed = jax.lax.psum(jnp.concatenate(pieces) if len(pieces) > 1 else pieces[0], axes)
    out, start = [], 0
    for x, piece in zip(xs, pieces):
        out.append(_from_bytes(summed[start : start + piece.size], x))
        start += piece.size
    return out


# XLA packs these several to a byte: they travel as a wider type.
_PACKED = {
    "int2": np.int8,
    "int4": np.int8,
    "uint2": np.uint8,
    "uint4": np.uint8,
    "float4_e2m1fn": np.float32,
}


def _wire_type(x):
    """The dtype `x` travels as, and whether it is a complex split in two."""
    dtype = np.dtype(x.dtype)
    if dtype == np.bool_:
        return np.dtype(np.uint8), False
    if dtype.name in _PACKED:
        return np.dtype(_PACKED[dtype.name]), False
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return np.dtype(np.float32 if dtype == np.complex64 else np.float64), True
    return dtype, False


def _as_bytes(x):
    wire, complex_ = _wire_type(x)
    if complex_:
        x = jnp.stack([jnp.real(x), jnp.imag(x)])
    elif wire != x.dtype:
        x = x.astype(wire)
    if wire.itemsize > 1 or wire != np.uint8:
        x = jax.lax.bitcast_convert_type(x, np.uint8)
    return x.reshape(-1)


def _from_bytes(raw, like):
    dtype = np.dtype(like.dtype)
    wire, complex_ = _wire_type(like)
    shape = ((2,) if complex_ else ()) + tuple(like.shape)
    if wire.itemsize > 1:
        x = jax.lax.bitcast_convert_type(raw.reshape(*shape, wire.itemsize), wire)
    elif wire != np.uint8:
        x = jax.lax.bitcast_convert_type(raw.reshape(shape), wire)
    else:
        x = raw.reshape(shape)
    if complex_:
        return jax.lax.complex(x[0], x[1]).astype(dtype)
    if dtype == np.bool_:
        return x != 0
    return x if x.dtype == dtype else x.astype(dtype)
