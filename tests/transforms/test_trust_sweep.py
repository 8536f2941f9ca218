"""The programs users write, all of them: every public constructor and option
(in_place, effect=, a traceable JVP, linear's jvp) × every way of running
(eager, jit, grad, vmap, shard_map, 8-device jit without and with a sharding
rule, jax.export with a symbolic size) × the op made outside or inside the
traced function × the garbage collector running between trace, compile,
dispatch and read. Each gives jnp's value (and gradient), on 8 virtual CPU
devices, or the error that says why it cannot (REFUSED)."""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
)

import copy
import gc

import cases
import gc_stages
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import xlabind
from xlabind import jaxbind
from xlabind.ops import map_coordinates

jax.config.update("jax_enable_x64", True)

N = 16
WEIGHTS = np.linspace(0.5, 2.0, N)


def _abstract(x):
    return ((x.shape, x.dtype),)


def _jaxbind_scale(out, args, kwargs_dump):
    out[0][...] = 3.0 * args[0]


_GRID = np.sin(np.arange(N + 4.0))
_COORDS = np.linspace(-1.0, N + 0.5, N)


# Each maker: (rule or None) -> (op: x -> y, the same in jnp). Every op is
# differentiable but "callback", elementwise (so "n -> n" is a valid rule).
MAKERS = {
    "callback": lambda rule: (
        xlabind.callback(lambda x: 2.0 * np.asarray(x), lambda x: x, sharding_rule=rule),
        lambda x: 2.0 * x,
    ),
    "linear": lambda rule: (
        xlabind.linear(
            lambda x: 2.0 * np.asarray(x),
            lambda ct: 2.0 * np.asarray(ct),
            lambda x: x,
            sharding_rule=rule,
        ),
        lambda x: 2.0 * x,
    ),
    "multilinear": lambda rule: (
        (lambda op: lambda x: op(x, x))(
            xlabind.multilinear(
                lambda x, y: np.asarray(x) * np.asarray(y),
                (
                    lambda y, ct: np.asarray(y) * np.asarray(ct),
                    lambda x, ct: np.asarray(x) * np.asarray(ct),
                ),
                lambda x, y: x,
                sharding_rule=None if rule is None else "n, n -> n",
            )
        ),
        lambda x: x * x,
    ),
    "nonlinear": lambda rule: (
        xlabind.nonlinear(
            lambda x: np.sin(x),
            lambda x: x,
            jvp=lambda x, t: np.cos(x) * t,
            vjp=lambda x, ct: np.cos(x) * ct,
            sharding_rule=rule,
        ),
        jnp.sin,
    ),
    "traceable": lambda rule: (
        xlabind.nonlinear(
            lambda x: np.sin(x),
            lambda x: x,
            vjp=None,
            jvp=xlabind.traceable(lambda x, t: jnp.cos(x) * t),
            sharding_rule=rule,
        ),
        jnp.sin,
    ),
    "jaxbind": lambda rule: (
        (lambda call: lambda x: call(x)[0])(
            jaxbind.get_linear_call(_jaxbind_scale, _jaxbind_scale, _abstract, _abstract)
        ),
        lambda x: 3.0 * x,
    ),
    "ffi_target": lambda rule: (
        (lambda op: lambda x: op(x, jnp.asarray(_COORDS), order=1, mode=1, derivative=(0,)))(
            xlabind.linear(
                xlabind.ffi_target("xlabind_map_coordinates"),
                xlabind.ffi_target("xlabind_map_coordinates_transpose"),
                lambda g, c, **_: c,
                nondiff_argnums=(1,),
                sharding_rule=None if rule is None else "g, p -> p",
            )
        ),
        lambda x: jax.scipy.ndimage.map_coordinates(x, [jnp.asarray(_COORDS)], 1, "nearest"),
    ),
    "map_coordinates": lambda rule: (
        lambda x: map_coordinates(jnp.asarray(_GRID), [x + 1.5], 1, "mirror"),
        lambda x: jax.scipy.ndimage.map_coordinates(jnp.asarray(_GRID), [x + 1.5], 1, "mirror"),
    ),
}


def _double_into(x, out):
    out[...] = 2.0 * np.asarray(x)


def _scaled(a, x):
    return np.asarray(a) * np.asarray(x)


MAKERS.update(
    {
        "in_place": lambda rule: (
            xlabind.callback(_double_into, lambda x: x, in_place=True, sharding_rule=rule),
            lambda x: 2.0 * x,
        ),
        "in_place_linear": lambda rule: (
            xlabind.linear(
                _double_into, _double_into, lambda x: x, in_place=True, sharding_rule=rule
            ),
            lambda x: 2.0 * x,
        ),
        "unordered": lambda rule: (
            xlabind.linear(
                lambda x: 2.0 * np.asarray(x),
                lambda ct: 2.0 * np.asarray(ct),
                lambda x: x,
                effect="unordered",
                sharding_rule=rule,
            ),
            lambda x: 2.0 * x,
        ),
        "ordered": lambda rule: (
            xlabind.callback(
                lambda x: 2.0 * np.asarray(x), lambda x: x, effect="ordered", sharding_rule=rule
            ),
            lambda x: 2.0 * x,
        ),
        # Linear in x, differentiable in the scale a through a traceable rule.
        "linear_jvp": lambda rule: (
            (lambda op: lambda x: op(jnp.sin(x), x))(
                xlabind.linear(
                    _scaled,
                    lambda a, ct: np.asarray(a) * np.asarray(ct),
                    lambda a, x: x,
                    nondiff_argnums=(0,),
                    jvp=xlabind.traceable(lambda a, x, da: da * x),
                    sharding_rule=None if rule is None else "n, n -> n",
                )
            ),
            lambda x: jnp.sin(x) * x,
        ),
    }
)


def _double_in_place(x, out):
    out *= 2.0  # out *is* x's memory (input_output_aliases): it holds x


MAKERS.update(
    {
        # In place through the alias: the function reads the argument from `out`.
        "in_place_alias": lambda rule: (
            xlabind.callback(
                _double_in_place,
                lambda x: x,
                in_place=True,
                input_output_aliases={0: 0},
                sharding_rule=rule,
            ),
            lambda x: 2.0 * x,
        ),
        "ffi_target_unordered": lambda rule: (
            (lambda op: lambda x: op(x, jnp.asarray(_COORDS), order=1, mode=1, derivative=(0,)))(
                xlabind.linear(
                    xlabind.ffi_target("xlabind_map_coordinates"),
                    xlabind.ffi_target("xlabind_map_coordinates_transpose"),
                    lambda g, c, **_: c,
                    nondiff_argnums=(1,),
                    effect="unordered",
                    sharding_rule=None if rule is None else "g, p -> p",
                )
            ),
            lambda x: jax.scipy.ndimage.map_coordinates(x, [jnp.asarray(_COORDS)], 1, "nearest"),
        ),
        # NaN marks the outside; every point here is inside.
        "map_coordinates_nan_cval": lambda rule: (
            lambda x: map_coordinates(jnp.asarray(_GRID), [x + 1.5], 1, "constant", cval=np.nan),
            lambda x: jax.scipy.ndimage.map_coordinates(
                jnp.asarray(_GRID), [x + 1.5], 1, "constant", cval=np.nan
            ),
        ),
    }
)

DIFFERENTIABLE = set(MAKERS) - {
    "callback",
    "in_place",
    "in_place_alias",
    "unordered",
    "ordered",
    "ffi_target_unordered",
}
# What only native code can be: jax.export serializes it.
EXPORTABLE = {"ffi_target", "ffi_target_unordered", "map_coordinates", "map_coordinates_nan_cval"}

MODES = [
    "eager",
    "jit",
    "grad",
    "vmap",
    "shard_map",
    "shard_map_grad",
    "jit8",
    "jit8_rule",
    "export",
    "export8",
    "deepcopy",
]

# (kind, mode) -> (exception, message): what is refused, and how it says so.
REFUSED = {
    **{
        (kind, mode): (TypeError, r"has no derivative rules")
        for kind in ("callback", "in_place")
        for mode in ("grad", "shard_map_grad")
    },
    **{
        (kind, mode): (TypeError, r"has no derivative rules")
        for kind in ("in_place_alias",)
        for mode in ("grad", "shard_map_grad")
    },
    **{
        (kind, mode): (TypeError, r"has effect='(un)?ordered', so it cannot be differentiated")
        for kind in ("unordered", "ordered", "ffi_target_unordered")
        for mode in ("grad", "shard_map_grad")
    },
    ("ordered", "vmap"): (ValueError, r"has effect='ordered', so it cannot be batched"),
    ("ordered", "jit8_rule"): (ValueError, r"effect='ordered' cannot have a sharding_rule"),
    **{
        (kind, mode): (
            NotImplementedError,
            r"jax.export cannot serialize .*: it calls a "
            r"Python function",
        )
        for kind in set(MAKERS) - EXPORTABLE
        for mode in ("export", "export8")
    },
}
_CHECKS = [
    export.DisabledSafetyCheck.custom_call(name)
    for name in ("xlabind_map_coordinates", "xlabind_map_coordinates_transpose")
]


@pytest.fixture(scope="module")
def mesh():
    assert len(jax.devices()) == 8, "XLA_FLAGS must be set before jax is imported"
    mesh = Mesh(np.array(jax.devices()), ("d",))
    # What exists now (jax, its backend, the mesh) lives for the whole run:
    # out of the collector's sight, a full collection walks only what the
    # cases make (each collection walked jax's whole heap, ~40 ms, some
    # thousand times: half the sweep's time). What a case makes is collected
    # as before.
    gc.freeze()
    yield mesh
    gc.unfreeze()


def _x():
    return jnp.linspace(0.1, 1.7, N)


def _program(mode, make, inside, mesh):
    """(the program as a function of x, its input, the same program in jnp)."""
    rule = "n -> n" if mode == "jit8_rule" else None
    held = None if inside else make(rule)

    def op():
        return make(rule) if inside else held

    def body(x):
        return op()[0](x)

    def reference(x):
        return held[1](x) if held else make(rule)[1](x)

    x = _x()
    if mode == "eager":
        return body, x, reference
    if mode == "jit":
        return jax.jit(body), x, reference
    if mode == "grad":
        return (
            jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(body(x))))),
            x,
            jax.grad(lambda x: jnp.sum(jnp.sin(reference(x)))),
        )
    if mode == "vmap":
        xs = jnp.stack([x, 2 * x])
        return jax.jit(jax.vmap(body)), xs, jax.vmap(reference)
    if mode == "deepcopy":
        # A copy of the op (as a model config holding it is copied), before
        # and after its first call.
        copied = copy.deepcopy(op())
        jax.jit(copied[0])(x)
        again = copy.deepcopy(copied)
        return jax.jit(lambda x: again[0](x)), x, reference
    if mode == "export":
        # Exported for every size n, serialized, then called at this one.
        (n,) = export.symbolic_shape("n")
        exported = export.export(jax.jit(body), disabled_checks=_CHECKS)(
            jax.ShapeDtypeStruct((n,), x.dtype)
        )
        return _Called(export.deserialize(exported.serialize())), x, reference
    sharded = jax.device_put(x, NamedSharding(mesh, P("d")))
    if mode == "export8":
        # Exported over the 8 devices with x split across them.
        exported = export.export(jax.jit(body), disabled_checks=_CHECKS)(sharded)
        return _Called(export.deserialize(exported.serialize())), sharded, reference

    def blockwise(x):  # shard_map's meaning: the function on each device's block
        return jnp.concatenate([reference(block) for block in jnp.split(x, 8)])

    if mode == "shard_map":
        f = jax.shard_map(body, mesh=mesh, in_specs=P("d"), out_specs=P("d"))
        return jax.jit(f), sharded, blockwise
    if mode == "shard_map_grad":
        f = jax.shard_map(body, mesh=mesh, in_specs=P("d"), out_specs=P("d"))
        return (
            jax.jit(jax.grad(lambda x: jnp.sum(f(x) ** 2))),
            sharded,
            jax.grad(lambda x: jnp.sum(blockwise(x) ** 2)),
        )
    return jax.jit(body), sharded, reference  # jit8, jit8_rule


class _Called:
    """An exported artifact as the sweep runs a program: traced, then called."""

    def __init__(self, exported):
        self.exported = exported

    def trace(self, x):
        return _CalledStage(self.exported, x)


class _CalledStage:
    def __init__(self, exported, x):
        del x  # the artifact takes any size
        self.exported = exported

    def lower(self):
        return self

    def compile(self):
        return self.exported.call


@pytest.fixture(autouse=True)
def collections_of_this_tests_objects():
    """Each gc.collect below walks only what the test made (the op, its
    program, their cycles): what jax and the earlier tests left is frozen,
    half the file's time when every collection walked it too."""
    gc.freeze()
    yield
    gc.unfreeze()


def _made(value) -> str:
    return ("made_inside" if value else "made_outside") if isinstance(value, bool) else str(value)


# Every cell in CI (--config=all); in the default loop a seeded sample that
# takes every constructor, every way and both places at least once
# (tests/support/cases.py).
@pytest.mark.parametrize(
    "kind, mode, inside",
    cases.product("sweep", sorted(MAKERS), MODES, (False, True), sampled=60, ids=_made),
)
def test_every_constructor_every_way(kind, mode, inside, mesh):
    make = MAKERS[kind]
    refused = REFUSED.get((kind, mode))
    if refused is not None:
        error, message = refused
        with pytest.raises(error, match=message):
            program, x, _ = _program(mode, make, inside, mesh)
            program.trace(x) if mode != "eager" else program(x)
        return
    assert kind in DIFFERENTIABLE or "grad" not in mode
    program, x, reference = _program(mode, make, inside, mesh)
    want = np.asarray(reference(np.asarray(x) if mode != "vmap" else x))
    if mode == "eager":
        got = program(x)
        gc.collect()
    else:
        # The garbage collector between every stage, and nothing of the op kept
        # but what the program itself holds.
        held = [program]
        del program
        got = gc_stages.run_in_stages(held, x)
    got = np.asarray(got)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_the_plain_jit_path_with_collections_between_dispatch_and_read(kind, mesh):
    make = MAKERS[kind]
    for x in (_x(), jax.device_put(_x(), NamedSharding(mesh, P("d")))):
        y = jax.jit(lambda x: make(None)[0](x) + 1)(x)  # jitted lambda and op dropped at once
        gc.collect()
        np.testing.assert_allclose(
            np.asarray(y), np.asarray(make(None)[1](np.asarray(x))) + 1, rtol=1e-10, atol=1e-12
        )


def test_ordered_calls_with_collections_between_dispatch_and_read(mesh):
    seen = []
    for x in (_x(), jax.device_put(_x(), NamedSharding(mesh, P("d")))):
        for tag in ("a", "b"):
            log = xlabind.callback(
                lambda x, tag=tag: (seen.append(tag), 2.0 * np.asarray(x))[1],
                lambda x: x,
                effect="ordered",
            )
            y = jax.jit(lambda x, log=log: log(x * 3.0) + log(x))(x)  # dropped at once
            gc.collect()
            np.testing.assert_allclose(np.asarray(y), 8.0 * np.asarray(x), rtol=1e-12)
    jax.effects_barrier()
    assert seen == ["a", "a", "b", "b"] * 2
