"""jax.export of programs over 8 devices that call xlabind.ops and native
targets: exported, serialized, and called in a fresh process, beside jax's
own map_coordinates in the same program, with and without shard_map, the
points split or the call made once, forward and differentiated. jax cannot
serialize custom partitioning (a Python callback), so an exported program's
split is decided at lowering (partitioning.py's _lower_for_export)."""

import os
import subprocess
import sys
import textwrap

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
)

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import xlabind
from xlabind.ops import map_coordinates

jax.config.update("jax_enable_x64", True)

CHECKS = [
    export.DisabledSafetyCheck.custom_call(name)
    for name in (
        "xlabind_map_coordinates",
        "xlabind_map_coordinates_transpose",
        "xlabind_spline_filter",
    )
]
GRID = np.sin(np.arange(20.0))


def _programs():
    """name -> (function of x, the same in jax)."""
    ours = lambda x: map_coordinates(jnp.asarray(GRID), [x], 1, "mirror")
    theirs = lambda x: jax.scipy.ndimage.map_coordinates(jnp.asarray(GRID), [x], 1, "mirror")
    cubic = lambda x: map_coordinates(jnp.asarray(GRID), [x], 3, "mirror")
    mesh = Mesh(np.array(jax.devices()), ("d",))
    blocks = lambda f: jax.shard_map(f, mesh=mesh, in_specs=P("d"), out_specs=P("d"))
    return {
        "order 1": (lambda x: ours(x) + theirs(x), lambda x: 2 * theirs(x)),
        "order 3, odd size": (cubic, None),
        "grad": (
            jax.grad(lambda x: jnp.sum(ours(x) ** 2)),
            jax.grad(lambda x: jnp.sum(theirs(x) ** 2)),
        ),
        "grid grad": (
            lambda x: jax.grad(lambda g: jnp.sum(map_coordinates(g, [x], 1, "mirror") ** 2))(
                jnp.asarray(GRID)
            ),
            lambda x: jax.grad(
                lambda g: jnp.sum(jax.scipy.ndimage.map_coordinates(g, [x], 1, "mirror") ** 2)
            )(jnp.asarray(GRID)),
        ),
        "shard_map": (blocks(ours), blocks(theirs)),
        "vmap": (jax.vmap(ours), jax.vmap(theirs)),
    }


def _input(name, mesh):
    if name == "order 3, odd size":
        # 37 points divide over no device count: one call, on the first device.
        return jax.device_put(jnp.linspace(0.0, 18.0, 37), NamedSharding(mesh, P()))
    if name == "vmap":
        return jax.device_put(
            jnp.linspace(0.0, 18.0, 64).reshape(8, 8), NamedSharding(mesh, P("d", None))
        )
    return jax.device_put(jnp.linspace(0.0, 18.0, 64), NamedSharding(mesh, P("d")))


@pytest.fixture(scope="module")
def mesh():
    assert len(jax.devices()) == 8
    return Mesh(np.array(jax.devices()), ("d",))


@pytest.mark.parametrize("name", list(_programs()))
def test_exported_sharded_program_round_trips_in_this_process(name, mesh):
    f, reference = _programs()[name]
    x = _input(name, mesh)
    exported = export.export(jax.jit(f), disabled_checks=CHECKS)(x)
    assert exported.nr_devices == 8
    back = export.deserialize(exported.serialize())
    got = back.call(x)
    if reference is None:  # order 3: against the program run without export
        want = jax.jit(f)(x)
    else:
        want = reference(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)


def test_an_exported_program_splits_the_points_over_the_devices(mesh):
    # Each device interpolates its own 8 points: the module's calls are on
    # blocks of 8, not on the 64.
    f, _ = _programs()["order 1"]
    text = export.export(jax.jit(f), disabled_checks=CHECKS)(_input("order 1", mesh)).mlir_module()
    assert "CustomSPMDPartitioning" not in text
    calls = [line for line in text.splitlines() if "xlabind_map_coordinates" in line]
    assert calls and all("tensor<8xf64>" in line for line in calls), calls


FRESH = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    import xlabind  # registers the targets the artifact calls
    from jax import export
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()), ("d",))
    back = export.deserialize(bytearray(open(sys.argv[1], "rb").read()))
    x = jax.device_put(jnp.linspace(0.0, 18.0, 64), NamedSharding(mesh, P("d")))
    grid = jnp.sin(jnp.arange(20.0))
    want = 2 * jax.scipy.ndimage.map_coordinates(grid, [x], 1, "mirror")
    got = back.call(x)
    print("max error", float(jnp.max(jnp.abs(got - want))), len(got.sharding.device_set))
    """)


def test_exported_in_one_process_runs_in_a_fresh_one(mesh, tmp_path):
    f, _ = _programs()["order 1"]
    exported = export.export(jax.jit(f), disabled_checks=CHECKS)(_input("order 1", mesh))
    artifact = tmp_path / "program.bin"
    artifact.write_bytes(exported.serialize())
    done = subprocess.run(
        [sys.executable, "-c", FRESH, str(artifact)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    error, devices = done.stdout.split()[-2:]
    assert float(error) < 1e-12 and devices == "8", done.stdout


def test_a_python_function_in_an_exported_sharded_program_is_named(mesh):
    op = xlabind.callback(np.sin, lambda x: x, sharding_rule="n -> n", name="my_sine")
    with pytest.raises(NotImplementedError, match="my_sine"):
        export.export(jax.jit(op))(_input("order 1", mesh))


@pytest.mark.parametrize("name", ["order 1", "order 3, odd size", "grad", "grid grad", "vmap"])
@pytest.mark.parametrize("size", ["8*n", "n"])
def test_a_symbolic_number_of_points_exports_over_several_devices(name, size, mesh):
    """Exported with a symbolic number of points (split over the devices,
    or whole), the artifact is called at two sizes after deserializing."""
    f, reference = _programs()[name]
    example = _input(name, mesh)
    if size == "n":  # jax splits no symbolic size that may not divide
        example = jax.device_put(example, NamedSharding(mesh, P()))
    dims = export.symbolic_shape(", ".join([size, *map(str, example.shape[1:])]))
    spec = jax.ShapeDtypeStruct(dims, example.dtype, sharding=example.sharding)
    exported = export.export(jax.jit(f), disabled_checks=CHECKS)(spec)
    back = export.deserialize(exported.serialize())
    for points in (64, 128):
        x = jnp.linspace(0.0, 18.0, points * example.size // example.shape[0])
        x = jax.device_put(x.reshape(points, *example.shape[1:]), example.sharding)
        want = (reference or jax.jit(f))(x)
        np.testing.assert_allclose(np.asarray(back.call(x)), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("order", [1, 3])
def test_programs_under_an_explicit_mesh_export_with_whole_or_split_points(order):
    """Under jax.set_mesh with Explicit axes, arrays whole (typed so) or the
    points split: values, the grid gradient (order 3: the prefilter's
    transpose, whose cotangent arrives whole) and spline_filter alone export
    and give what jit gives. shard_map under Explicit axes takes the context
    mesh and arrays only as their types place them."""
    mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Explicit,))
    rng = np.random.default_rng(order)
    grid = jnp.asarray(rng.normal(size=(9, 8, 7)), jnp.float32)
    points = jnp.asarray(rng.uniform(-1, 9, (3, 64)), jnp.float32)
    values = lambda g, c: map_coordinates(g, list(c), order, "mirror")
    gradient = jax.grad(lambda g, c: jnp.sum(values(g, c) ** 2))
    prefiltered = lambda g, c: xlabind.ops.spline_filter(g, order=3, mode="mirror")
    checks = [*CHECKS, export.DisabledSafetyCheck.custom_call("xlabind_spline_filter_transpose")]
    for f in (
        values,
        gradient,
        prefiltered,
        jax.grad(lambda g, c: jnp.sum(prefiltered(g, c) ** 2)),
    ):
        want = jax.jit(f)(grid, points)
        for spec in (P(), P(None, "x")):
            with jax.set_mesh(mesh):
                at = jax.ShapeDtypeStruct(
                    points.shape, jnp.float32, sharding=NamedSharding(mesh, spec)
                )
                g = jax.ShapeDtypeStruct(grid.shape, jnp.float32)
                artifact = export.export(jax.jit(f), platforms=("cpu",), disabled_checks=checks)(
                    g, at
                )
                got = artifact.call(grid, jax.device_put(points, NamedSharding(mesh, spec)))
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
