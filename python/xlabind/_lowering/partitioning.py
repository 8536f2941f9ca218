"""How a call lowers in a program sharded over several devices.

By default a bound function is one opaque call on whole arrays: under
`jax.jit` with sharded inputs it runs once per program, on the first device,
on the gathered arrays (like `jax.pure_callback`), never once per device on
everything. A function with a sharding rule (_primitive/factors.py) runs
once per device on that device's shard instead, through jax's custom
partitioning (a Shardy sharding rule, or GSPMD propagation callbacks without
Shardy); an ordered one runs once, on the first device, inside a shard_map
that carries jax's ordering token. Whichever way it runs, a call that fails
on one device stops every device at that call (status_exchange.py), but in an
exported program (jax.export), whose calls are plain: there the split is
decided at lowering and made by a shard_map, since jax cannot serialize a
custom partitioning.
"""

from __future__ import annotations

import hashlib
import math
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.interpreters import mlir
from jax.sharding import NamedSharding, PartitionSpec

from xlabind import _jax_internals as internals
from xlabind._lowering import status_exchange
from xlabind._primitive import explicit_sharding
from xlabind._primitive import factors as factors_module
from xlabind._primitive.factors import split
from xlabind._primitive.primitive import bind


def lower(ctx, call, operands, emit: Callable) -> Sequence[Any]:
    """Lowers a call with `emit(ctx, *operands) -> results`, placed so that it runs
    once per program, or once per device on its shard; in a program over
    several devices a failure stops every device at this call (status_exchange.py)."""
    if call.reports_status:
        # One of the per-device calls below: their caller checks the status.
        return emit(ctx, *operands)
    exporting = ctx.module_context.lowering_parameters.for_export
    axis_context = ctx.module_context.axis_context
    if isinstance(axis_context, internals.ShardingContext) and axis_context.num_devices > 1:
        return _lower_partitioned(ctx, call, operands, emit)
    axes = internals.manual_axes(axis_context)
    if axes and internals.gspmd_aborts_in_partly_manual(axis_context):
        raise NotImplementedError(
            f"xlabind: '{call.fn.name}' cannot run inside a jax.shard_map that is manual over "
            f"some mesh axes only under GSPMD (jax_use_shardy_partitioner=False) with jax "
            f"{jax.__version__}: XLA's partitioner aborts the process on its custom call. Use "
            f"Shardy (jax's default), jax >= 0.10, or a shard_map manual over every axis."
        )
    if axes and call.fn.effect == "ordered" and internals.partly_manual(axis_context):
        # XLA aborts the process on the ordering token there; jax refuses its
        # own io_callback(ordered=True) alike.
        raise NotImplementedError(
            f"xlabind: '{call.fn.name}' has effect='ordered', which cannot run inside a "
            f"jax.shard_map that is manual over some mesh axes only (axis_names=...): "
            f"XLA aborts on its ordering token there, as for jax's io_callback(ordered=True). "
            f"Make the shard_map manual over every mesh axis, call it outside the shard_map, "
            f"or bind the function with effect='unordered'."
        )
    if axes and exporting:
        # Per device in an exported program: a plain call (_lower_for_export).
        return emit(ctx, *operands)
    if axes and not call.fn.stop_all_devices:
        # Per device, for a function whose failure need not stop the others:
        # a plain call (status_exchange.call_on_every_device). A call once per
        # program (status_exchange.call_on_first_device) always reports its
        # status, and so does not come here.
        return emit(ctx, *operands)
    if axes:
        # Inside shard_map (per-device semantics): once per device.
        processes = status_exchange.row_processes(axis_context.mesh, axes)
        return mlir.lower_fun(
            lambda *xs: status_exchange.call_on_every_device(call, xs, axes, processes),
            multiple_results=True,
        )(ctx, *operands)
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
    failure stops every device at this call (status_exchange.py)."""
    mesh = _program_mesh(ctx.module_context.axis_context)
    axes = tuple(mesh.axis_names)
    processes = status_exchange.row_processes(mesh, axes)
    whole = PartitionSpec()
    exchange = not ctx.module_context.lowering_parameters.for_export
    once = jax.shard_map(
        lambda *xs: tuple(
            status_exchange.call_on_first_device(call, xs, axes, processes, exchange=exchange)
        ),
        mesh=mesh,
        in_specs=(whole,) * len(operands),
        out_specs=(whole,) * len(call.result_avals),
        check_vma=False,
    )

    def whole_once(*xs):
        # Arrays sharded over Explicit mesh axes are gathered first (shard_map
        # takes them only as they are); others XLA gathers by itself.
        return list(once(*(explicit_sharding.gathered(x) for x in xs)))

    detached = internals.detached_ordered_token(ctx)
    results = mlir.lower_fun(whole_once, multiple_results=True)(detached, *operands)
    if detached is not ctx:
        ctx.set_tokens_out(detached.tokens_out)
    return results


def _program_mesh(axis_context) -> jax.sharding.Mesh:
    """The mesh of the program's devices: the one the program's arrays name,
    else the one it is traced under (jax.set_mesh: a shard_map under Explicit
    axes must take that one), or one axis over all its devices."""
    devices = np.asarray(axis_context.device_assignment)
    abstract = axis_context.abstract_mesh
    if abstract is None or not abstract.axis_names:
        abstract = jax.sharding.get_abstract_mesh()
    if abstract is not None and abstract.axis_names and abstract.size == devices.size:
        return jax.sharding.Mesh(
            devices.reshape(abstract.axis_sizes),
            abstract.axis_names,
            axis_types=abstract.axis_types,
        )
    return jax.sharding.Mesh(devices, ("xlabind_devices",))


class _Plan:
    """A call's factors, as its partitioning needs them: each operand's and
    result's factor per dimension (a call without a sharding rule keeps every
    dimension whole), which may be split, and which are summed."""

    def __init__(self, ctx, call):
        factors, out_factors = call.factors, call.out_factors
        if factors is None:  # undeclared: every dimension stays whole
            factors = tuple(
                tuple(f"w{i}_{d}" for d in range(len(x.shape))) for i, x in enumerate(ctx.avals_in)
            )
            out_factors = tuple(
                tuple(f"r{j}_{d}" for d in range(len(a.shape)))
                for j, a in enumerate(call.result_avals)
            )
        self.factors, self.out_factors = factors, out_factors
        self.free = split(call)
        # In order of first appearance: Shardy wants special factors sorted by index.
        self.whole = tuple(
            dict.fromkeys(f for array in factors + out_factors for f in array if f not in self.free)
        )
        in_results = {f for array in out_factors for f in array}
        # Shardy's reduction factors appear in no result; one that is summed into
        # some results only (a VJP's) is the others' independent factor to it.
        self.reductions = tuple(
            dict.fromkeys(
                f for array in factors for f in array if f in call.summed and f not in in_results
            )
        )

    def assignment(self, mesh, shapes, specs) -> dict[str, tuple[str, ...]]:
        """Mesh axes for each independent factor, taken from how the operands are
        sharded (`specs`, a PartitionSpec or None per operand; the first operand
        that shards a factor decides)."""
        chosen: dict[str, tuple[str, ...]] = {}
        used: set[str] = set()
        for shape, spec, array_factors in zip(shapes, specs, self.factors):
            spec = tuple(spec or ())
            spec += (None,) * (len(array_factors) - len(spec))
            for size, factor, axes in zip(shape, array_factors, spec):
                axes = () if axes is None else (axes,) if isinstance(axes, str) else tuple(axes)
                if (
                    factor in self.free
                    and factor not in chosen
                    and axes
                    and not used & set(axes)
                    and _divides(mesh, axes, size)
                ):
                    chosen[factor] = axes
                    used.update(axes)
        return chosen

    def specs(self, chosen, factor_lists) -> tuple[PartitionSpec, ...]:
        return tuple(
            PartitionSpec(*[explicit_sharding.spec_entry(chosen.get(f)) for f in array])
            for array in factor_lists
        )

    def per_device_body(self, call, mesh, chosen, exchange: bool = True) -> Callable:
        """The computation each device runs on its shards (inside a computation
        manual over every mesh axis): the call on its block, its results
        summed over the mesh axes of summed factors they lack; with nothing
        split, the call once on the first device, broadcast to the others.
        `exchange`: whether a failure stops every device (status_exchange.py)."""
        axes = tuple(mesh.axis_names)
        processes = status_exchange.row_processes(mesh, axes)
        if not chosen and not _replicated(call):
            return lambda xs: status_exchange.call_on_first_device(
                call, xs, axes, processes, exchange=exchange
            )
        if not chosen:  # every device on its own copy: nothing to broadcast
            return lambda xs: status_exchange.call_on_every_device(
                call, xs, axes, processes, exchange=exchange
            )
        local = tuple(
            jax.core.ShapedArray(
                tuple(
                    d // math.prod(mesh.shape[a] for a in chosen.get(f, ()))
                    for d, f in zip(aval.shape, array)
                ),
                aval.dtype,
            )
            for aval, array in zip(call.result_avals, self.out_factors)
        )
        # An alias holds where its argument and result are split alike.
        local_call = call.replace(
            result_avals=local,
            aliases=tuple(
                (i, j) for i, j in call.aliases if self.factors[i] == self.out_factors[j]
            ),
        )
        # Each result is summed over the mesh axes of the summed factors it lacks.
        sums = [
            tuple(a for f in call.summed if f not in array for a in chosen.get(f, ()))
            for array in self.out_factors
        ]

        def per_device(xs):
            results = status_exchange.call_on_every_device(
                local_call, xs, axes, processes, exchange=exchange
            )
            return [
                jax.lax.psum(internals.vary_over(r, over), over) if over else r
                for r, over in zip(results, sums)
            ]

        return per_device


def _replicated(call) -> bool:
    """Whether every device runs `call` on whole arrays when nothing is split:
    a pure native target whose failure need not stop the others (xlabind.ops);
    a failure exchange or a Python function runs once, on the first device."""
    fn = call.fn
    return (
        getattr(fn.implementation, "replicable", False)
        and not fn.stop_all_devices
        and fn.effect is None
    )


def _divides(mesh, axes, size) -> bool:
    """Whether `size` splits evenly over the mesh `axes` (a symbolic size does not)."""
    return (
        isinstance(size, (int, np.integer)) and size % math.prod(mesh.shape[a] for a in axes) == 0
    )


def _lower_partitioned(ctx, call, operands, emit: Callable):
    """Custom partitioning: XLA asks, once it knows how the operands are
    sharded, for the per-device computation. Exported, the split is decided
    here instead (_lower_for_export): jax cannot serialize the callback that
    custom partitioning is."""
    plan = _Plan(ctx, call)
    if ctx.module_context.lowering_parameters.for_export:
        symbolic = any(
            not isinstance(d, (int, np.integer))
            for a in (*ctx.avals_in, *ctx.avals_out)
            for d in a.shape
        )
        if symbolic:
            # jax refines an artifact's symbolic shapes when it is called, but
            # not through a shard_map's manual computation (the call's shapes
            # would stay dynamic): a plain call, which XLA runs on whole arrays.
            return emit(ctx, *operands)
        return _lower_for_export(ctx, call, operands, plan)

    def assignment(mesh, arg_shapes):
        # Without Shardy an operand XLA has no sharding for yet comes as None.
        return plan.assignment(
            mesh,
            [s.shape for s in arg_shapes],
            [getattr(s.sharding, "spec", None) for s in arg_shapes],
        )

    def shardings(mesh, chosen, factor_lists):
        return tuple(NamedSharding(mesh, spec) for spec in plan.specs(chosen, factor_lists))

    def partition(mesh, arg_shapes, result_shape):
        chosen = assignment(mesh, arg_shapes)
        lower_fn = _per_device(mesh, plan.per_device_body(call, mesh, chosen))
        return (
            mesh,
            lower_fn,
            shardings(mesh, chosen, plan.out_factors),
            shardings(mesh, chosen, plan.factors),
        )

    def infer_sharding_from_operands(mesh, arg_shapes, result_shape):
        return shardings(mesh, assignment(mesh, arg_shapes), plan.out_factors)

    partitioned = internals.custom_partitioning(lambda *xs: tuple(bind(call, xs)))
    partitioned.def_partition(
        partition,
        infer_sharding_from_operands=infer_sharding_from_operands,
        propagate_user_sharding=lambda mesh, user_shape: jax.tree.map(
            lambda s: s.sharding, user_shape
        ),
        sharding_rule=internals.SdyShardingRule(
            tuple(internals.ArrayMapping(*f) for f in plan.factors),
            tuple(internals.ArrayMapping(*f) for f in plan.out_factors),
            reduction_factors=plan.reductions,
            need_replication_factors=plan.whole,
        ),
    )
    results = mlir.lower_fun(lambda *xs: list(partitioned(*xs)), multiple_results=True)(
        ctx, *operands
    )
    # jax's custom partitioning call is pure to XLA, which would remove it (and
    # the per-device calls it becomes) when its results are unused; and it is
    # named by an object id, new in every process, which would make every
    # process's program a new persistent cache entry. A call is named by what
    # it does instead (a Python function's per-device calls then find the
    # function by its registry key, as unsharded programs do).
    key = _partitioning_key(ctx, call, plan)
    internals.adjust_last_partitioning(ctx, side_effect=call.fn.effect is not None, key=key)
    return results


def _source_digest() -> str:
    """What the partitioning code is: a cached program must not outlive a
    change to how xlabind splits a call (the per-device computation is made
    when XLA compiles, and is not in the program's text)."""
    digest = hashlib.sha256()
    for module in (status_exchange, factors_module, internals):
        digest.update(pathlib.Path(str(module.__file__)).read_bytes())
    digest.update(pathlib.Path(__file__).read_bytes())
    return digest.hexdigest()


_SOURCE_DIGEST = _source_digest()


def _partitioning_key(ctx, call, plan) -> str:
    """A name for the call's partitioning that is the same in every process for
    the same call in the same program placement: what the partitioning
    callbacks depend on (the call, its targets, its operands, the devices,
    the partitioner jax uses, xlabind's partitioning code)."""
    op = call.fn
    targets = sorted(
        (platform, t.name, _attributes_digest(t.attributes), t.takes_token)
        for platform, t in getattr(op.implementation, "targets", {}).items()
    )
    # A Python function by its registry key in this process: functions alike
    # in name, code and call (closures over different values) get different
    # keys here, and each process that defines them in one order the same.
    registry_entry = getattr(op.implementation, "registry_entry", None)
    functions = [
        (platform, registry_entry(platform, op.name, call).key)
        for platform in ctx.module_context.platforms
        if registry_entry is not None and platform in op.implementation.platforms
    ]
    axis_context = ctx.module_context.axis_context
    mesh = _program_mesh(axis_context)
    description = repr(
        (
            _SOURCE_DIGEST,
            functions,
            internals.config_flag("jax_use_shardy_partitioner"),
            repr(call),
            op.effect,
            op.stop_all_devices,
            op.vmap_method,
            targets,
            [(tuple(a.shape), str(a.dtype)) for a in ctx.avals_in],
            # A result's shape need not follow from the operands' (a
            # transpose's grid, a shape from the attributes).
            [(tuple(a.shape), str(a.dtype)) for a in ctx.avals_out],
            plan.factors,
            plan.out_factors,
            call.summed,
            call.whole,
            [(d.platform, d.id) for d in np.asarray(axis_context.device_assignment).flat],
            tuple(mesh.axis_names),
            tuple(mesh.shape.values()),
            tuple(str(t) for t in getattr(mesh, "axis_types", ())),
            tuple(ctx.module_context.platforms),
        )
    )
    return "xlabind-" + hashlib.sha256(description.encode()).hexdigest()


def _attributes_digest(attributes) -> str:
    """A native target's static attributes, every byte of their arrays included
    (NumPy's repr elides long arrays and rounds floats: two targets whose
    arrays differed past it once shared one partitioning, the first's)."""
    digest = hashlib.sha256()
    for name, value in sorted(dict(attributes).items()):
        digest.update(repr(name).encode())
        if isinstance(value, np.ndarray):
            digest.update(repr((value.dtype.str, value.shape)).encode())
            digest.update(np.ascontiguousarray(value).tobytes())
        else:
            digest.update(repr((type(value).__name__, value)).encode())
    return digest.hexdigest()


def _lower_for_export(ctx, call, operands, plan):
    """A call in an exported program over several devices: jax.shard_map with
    the split decided now, from the operands' Explicit shardings, else over
    every device along the first independent dimension they divide (else
    once, on the first device). Its per-device calls are plain calls: the
    status exchange's check is a custom call the artifact would depend on."""
    mesh = _program_mesh(ctx.module_context.axis_context)
    shapes = [tuple(a.shape) for a in ctx.avals_in]
    explicit = [_explicit_spec(a) for a in ctx.avals_in]
    chosen = plan.assignment(mesh, shapes, explicit)
    every = tuple(a for a in mesh.axis_names if mesh.shape[a] > 1)
    if not chosen and every:
        for shape, array in zip(shapes, plan.factors):
            factor = next(
                (
                    f
                    for size, f in zip(shape, array)
                    if f in plan.free and _divides(mesh, every, size)
                ),
                None,
            )
            if factor is not None:
                chosen = {factor: every}
                break
    in_specs = plan.specs(chosen, plan.factors)
    body = plan.per_device_body(call, mesh, chosen, exchange=False)
    per_device = jax.shard_map(
        lambda *xs: tuple(body(xs)),
        mesh=mesh,
        in_specs=in_specs,
        out_specs=plan.specs(chosen, plan.out_factors),
        check_vma=False,
    )

    def placed(*xs):
        # Arrays typed on Explicit axes (whole ones too) otherwise than the
        # split are resharded: shard_map takes them only as their type says.
        # XLA moves the others itself.
        return list(
            per_device(
                *(
                    jax.sharding.reshard(x, NamedSharding(mesh, spec))
                    if _typed_otherwise(x, spec, mesh)
                    else x
                    for x, spec in zip(xs, in_specs)
                )
            )
        )

    return mlir.lower_fun(placed, multiple_results=True)(ctx, *operands)


def _typed_otherwise(x, spec: PartitionSpec, mesh) -> bool:
    """Whether shard_map over `mesh` would see x placed otherwise than
    `spec`: with every axis Explicit it reads x's place from x's type (whole
    where the type names none); with some Auto it takes x as it comes."""
    types = tuple(getattr(mesh, "axis_types", ()))
    if not types or any(t != jax.sharding.AxisType.Explicit for t in types):
        return False
    typ = jax.typeof(x)
    now = tuple(getattr(getattr(typ, "sharding", None), "spec", None) or ())
    padded = lambda p: tuple(p) + (None,) * (typ.ndim - len(p))
    return padded(now) != padded(spec)


def _explicit_spec(aval):
    """The PartitionSpec of an aval split over Explicit mesh axes, else None."""
    axes = explicit_sharding.explicit_axes(aval)
    return None if axes is None else PartitionSpec(*(explicit_sharding.spec_entry(a) for a in axes))


def _per_device(mesh, body):
    """The per-device computation of a custom partitioning: `body(operands)`,
    told that it runs per device (Manual axes), which keeps jax from annotating
    the arrays made there with the mesh's shardings: from jax 0.11 it does so
    under Explicit axes, and XLA cannot compile that in this body."""
    axes = tuple(mesh.axis_names)
    manual = jax.sharding.AbstractMesh(
        tuple(mesh.shape.values()), axes, axis_types=(jax.sharding.AxisType.Manual,) * len(axes)
    )

    def lower_fn(*xs):
        with jax.sharding.use_abstract_mesh(manual):
            return tuple(body(xs))

    return lower_fn
