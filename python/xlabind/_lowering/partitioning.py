"""How a call lowers in a program sharded over several devices.

By default a bound function is one opaque call on whole arrays: under
`jax.jit` with sharded inputs it runs once per program, on the first device,
on the gathered arrays (like `jax.pure_callback`), never once per device on
everything. A function with a sharding rule (_primitive/factors.py) runs
once per device on that device's shard instead, through jax's custom
partitioning (a Shardy sharding rule, or GSPMD propagation callbacks without
Shardy); an ordered one runs once, on the first device, inside a shard_map
that carries jax's ordering token. Whichever way it runs, a call that fails
on one device stops every device at that call (call_status.py).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax.interpreters import mlir
from jax.sharding import NamedSharding, PartitionSpec

from xlabind import _jax_internals as internals
from xlabind._lowering import call_status
from xlabind._primitive.factors import split
from xlabind._primitive.primitive import bind


def lower(ctx, call, operands, emit: Callable) -> Sequence[Any]:
    """Lowers a call with `emit(ctx, *operands) -> results`, placed so that it runs
    once per program, or once per device on its shard; in a program over
    several devices a failure stops every device at this call (call_status.py)."""
    if call.reports_status:
        # One of the per-device calls below: their caller checks the status.
        return emit(ctx, *operands)
    axis_context = ctx.module_context.axis_context
    if isinstance(axis_context, internals.ShardingContext) and axis_context.num_devices > 1:
        return _lower_partitioned(ctx, call, operands)
    axes = internals.manual_axes(axis_context)
    if axes and internals.gspmd_aborts_in_partly_manual(axis_context):
        raise NotImplementedError(
            f"xlabind: '{call.fn.name}' cannot run inside a jax.shard_map that is manual over "
            f"some mesh axes only under GSPMD (jax_use_shardy_partitioner=False) with jax "
            f"{jax.__version__}: XLA's partitioner aborts the process on its custom call. Use "
            f"Shardy (jax's default), jax >= 0.10, or a shard_map manual over every axis.")
    if axes:
        # Inside shard_map (per-device semantics): once per device.
        processes = call_status.row_processes(axis_context.mesh, axes)
        return mlir.lower_fun(
            lambda *xs: call_status.call_on_every_device(call, xs, axes, processes),
            multiple_results=True)(ctx, *operands)
    return emit(ctx, *operands)


def spans_devices(ctx) -> bool:
    """Whether the call is lowered into a program over several devices, whose
    arrays XLA partitions (not inside jax.shard_map, where each device runs
    its own copy of the program)."""
    axis_context = ctx.module_context.axis_context
    return isinstance(axis_context, internals.ShardingContext) and axis_context.num_devices > 1


def lower_on_first_device(ctx, call, operands) -> Sequence[Any]:
    """An ordered call in a program over several devices: once, on the first
    device, on whole arrays, in a ``jax.shard_map`` over all the program's
    devices, which (unlike a custom partitioning) threads jax's ordering
    token through to the call, as it does for io_callback(ordered=True); a
    failure stops every device at this call (call_status.py)."""
    mesh = _program_mesh(ctx.module_context.axis_context)
    axes = tuple(mesh.axis_names)
    processes = call_status.row_processes(mesh, axes)
    whole = PartitionSpec()
    once = jax.shard_map(
        lambda *xs: tuple(call_status.call_on_first_device(call, xs, axes, processes)),
        mesh=mesh, in_specs=(whole,) * len(operands),
        out_specs=(whole,) * len(call.result_avals), check_vma=False)

    def gathered(*xs):
        # Arrays sharded over Explicit mesh axes are gathered first (shard_map
        # takes them only as they are); others XLA gathers by itself.
        xs = [jax.sharding.reshard(x, NamedSharding(mesh, whole)) if _explicitly_sharded(x)
              else x for x in xs]
        return list(once(*xs))

    return mlir.lower_fun(gathered, multiple_results=True)(ctx, *operands)


def _program_mesh(axis_context) -> jax.sharding.Mesh:
    """The mesh of the program's devices: the one the program's arrays name,
    or one axis over all its devices."""
    devices = np.asarray(axis_context.device_assignment)
    abstract = axis_context.abstract_mesh
    if abstract is not None and abstract.axis_names and abstract.size == devices.size:
        return jax.sharding.Mesh(devices.reshape(abstract.axis_sizes), abstract.axis_names,
                                 axis_types=abstract.axis_types)
    return jax.sharding.Mesh(devices, ("xlabind_devices",))


def _explicitly_sharded(x) -> bool:
    sharding = getattr(jax.typeof(x), "sharding", None)
    spec = getattr(sharding, "spec", None)
    return bool(spec) and any(s is not None for s in spec)


def _lower_partitioned(ctx, call, operands):
    """Custom partitioning: XLA asks, once it knows how the operands are
    sharded, for the per-device computation."""
    factors, out_factors = call.factors, call.out_factors
    if factors is None:  # undeclared: every dimension stays whole
        factors = tuple(tuple(f"w{i}_{d}" for d in range(len(x.shape)))
                        for i, x in enumerate(ctx.avals_in))
        out_factors = tuple(tuple(f"r{j}_{d}" for d in range(len(a.shape)))
                            for j, a in enumerate(call.result_avals))
    free = split(call)
    # In order of first appearance: Shardy wants special factors sorted by index.
    whole = tuple(dict.fromkeys(f for array in factors + out_factors for f in array
                                if f not in free))
    in_results = {f for array in out_factors for f in array}
    # Shardy's reduction factors appear in no result; one that is summed into
    # some results only (a VJP's) is the others' independent factor to it.
    reductions = tuple(dict.fromkeys(f for array in factors for f in array
                                     if f in call.summed and f not in in_results))

    def assignment(mesh, arg_shapes) -> dict[str, tuple[str, ...]]:
        """Mesh axes for each independent factor, taken from how the operands are
        sharded (the first operand that shards a factor decides)."""
        chosen: dict[str, tuple[str, ...]] = {}
        used: set[str] = set()
        for shape, array_factors in zip(arg_shapes, factors):
            # Without Shardy an operand XLA has no sharding for yet comes as None.
            spec = tuple(getattr(shape.sharding, "spec", None) or ())
            spec += (None,) * (len(array_factors) - len(spec))
            for size, factor, axes in zip(shape.shape, array_factors, spec):
                axes = () if axes is None else (axes,) if isinstance(axes, str) else tuple(axes)
                if (factor in free and factor not in chosen and axes and not used & set(axes)
                        and size % math.prod(mesh.shape[a] for a in axes) == 0):
                    chosen[factor] = axes
                    used.update(axes)
        return chosen

    def shardings(mesh, chosen, factor_lists):
        return tuple(NamedSharding(mesh, PartitionSpec(*[_spec(chosen.get(f)) for f in array]))
                     for array in factor_lists)

    def partition(mesh, arg_shapes, result_shape):
        chosen = assignment(mesh, arg_shapes)
        axes = tuple(mesh.axis_names)
        processes = call_status.row_processes(mesh, axes)
        if not chosen:
            # Nothing to split: one call, on the first device, broadcast to the others.
            lower_fn = _per_device(mesh, lambda xs: call_status.call_on_first_device(
                call, xs, axes, processes))
        else:
            local = tuple(
                jax.core.ShapedArray(tuple(d // math.prod(mesh.shape[a] for a in chosen.get(f, ()))
                                           for d, f in zip(aval.shape, array)), aval.dtype)
                for aval, array in zip(call.result_avals, out_factors))
            # An alias holds where its argument and result are split alike.
            local_call = call.replace(result_avals=local, aliases=tuple(
                (i, j) for i, j in call.aliases if factors[i] == out_factors[j]))
            # Each result is summed over the mesh axes of the summed factors it lacks.
            sums = [tuple(a for f in call.summed if f not in array for a in chosen.get(f, ()))
                    for array in out_factors]

            def per_device(xs):
                results = call_status.call_on_every_device(local_call, xs, axes, processes)
                return [jax.lax.psum(internals.vary_over(r, over), over) if over else r
                        for r, over in zip(results, sums)]

            lower_fn = _per_device(mesh, per_device)
        return (mesh, lower_fn, shardings(mesh, chosen, out_factors),
                shardings(mesh, chosen, factors))

    def infer_sharding_from_operands(mesh, arg_shapes, result_shape):
        return shardings(mesh, assignment(mesh, arg_shapes), out_factors)

    partitioned = internals.custom_partitioning(lambda *xs: tuple(bind(call, xs)))
    partitioned.def_partition(
        partition, infer_sharding_from_operands=infer_sharding_from_operands,
        propagate_user_sharding=lambda mesh, user_shape: jax.tree.map(lambda s: s.sharding,
                                                                      user_shape),
        sharding_rule=internals.SdyShardingRule(
            tuple(internals.ArrayMapping(*f) for f in factors),
            tuple(internals.ArrayMapping(*f) for f in out_factors),
            reduction_factors=reductions, need_replication_factors=whole))
    results = mlir.lower_fun(lambda *xs: list(partitioned(*xs)), multiple_results=True)(
        ctx, *operands)
    if call.fn.effect is not None:
        # jax's custom partitioning call is pure to XLA, which would remove it
        # (and the per-device calls it becomes) when its results are unused.
        internals.mark_last_partitioning_side_effecting()
    return results


def _per_device(mesh, body):
    """The per-device computation of a custom partitioning: `body(operands)`,
    told that it runs per device (Manual axes), which keeps jax from annotating
    the arrays made there with the mesh's shardings: from jax 0.11 it does so
    under Explicit axes, and XLA cannot compile that in this body."""
    axes = tuple(mesh.axis_names)
    manual = jax.sharding.AbstractMesh(tuple(mesh.shape.values()), axes,
                                       axis_types=(jax.sharding.AxisType.Manual,) * len(axes))

    def lower_fn(*xs):
        with jax.sharding.use_abstract_mesh(manual):
            return tuple(body(xs))

    return lower_fn


def _spec(axes):
    if not axes:
        return None
    return axes[0] if len(axes) == 1 else axes
