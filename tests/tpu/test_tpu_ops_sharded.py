"""xlabind.ops' TPU formulation in programs over several devices (8
virtual CPU devices; off a TPU the TPU rule stands in for the CPU one and
the kernels run interpreted, as in test_tpu_ops.py): inside jax.shard_map
with check_vma=True and on Explicit mesh axes. What a TPU lowers is
checked by exporting for one (Pallas lowers its kernels on a CPU too)."""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
)

import cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from tpu_lowering import EXPORT_CHECKS, tpu_rule_for_cpu_programs

from xlabind.ops import map_coordinates
from xlabind.ops.map_coordinates import tpu_kernels

#: The mesh's devices: the 8 virtual CPU devices off a chip, every chip on a
#: TPU machine (one on a v5e-1, where the programs run whole on the chip).
DEVICES = min(8, len(jax.devices()))


@pytest.fixture(autouse=True, scope="module")
def tpu_rule():
    with tpu_rule_for_cpu_programs():
        yield


def exported_for_a_tpu(f, *args):
    """The StableHLO text of jit(f) exported for a TPU (the kernels the chip's)."""
    previous = tpu_kernels.INTERPRET
    tpu_kernels.INTERPRET = False
    jax.clear_caches()
    try:
        exported = jax.export.export(jax.jit(f), platforms=("tpu",), disabled_checks=EXPORT_CHECKS)
        return exported(*args).mlir_module()
    finally:
        tpu_kernels.INTERPRET = previous
        jax.clear_caches()


def interpolate(order):
    return lambda g, c: map_coordinates(g, list(c), order, "mirror")


def grid_gradient(order):
    return jax.grad(lambda g, c: (interpolate(order)(g, c) ** 2).sum())


@pytest.mark.parametrize(
    "order, what", cases.product("vma", (1, 3), ("values", "grid gradient"), sampled=2)
)
def test_kernels_inside_a_shard_map_that_checks_vma_lower_for_a_tpu(order, what):
    """Each device's points through the kernels: Pallas asks the kernels'
    results how they vary across the mesh (check_vma=True), and the grid's
    cotangent is pulled back as varying as its points."""
    mesh = jax.make_mesh((DEVICES,), ("x",), axis_types=(AxisType.Auto,))
    f, out = (interpolate(order), P("x")) if what == "values" else (grid_gradient(order), P())
    in_specs = (P(), P(None, "x"))
    mapped = jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out, check_vma=True)
    if what == "grid gradient":  # each device's part of the gradient, summed
        mapped = jax.shard_map(
            lambda g, c: jax.lax.psum(f(g, c), "x"),
            mesh=mesh,
            in_specs=in_specs,
            out_specs=P(),
            check_vma=True,
        )
    text = exported_for_a_tpu(
        mapped,
        jax.ShapeDtypeStruct((9, 8, 7), jnp.float32),
        jax.ShapeDtypeStruct((3, 512), jnp.float32),
    )
    assert "tpu_custom_call" in text


SPLITS = [
    ((3, 512), ("x",), (DEVICES,), (None, "x")),
    ((3, 16, 32), ("x",), (DEVICES,), (None, "x", None)),
    ((3, 16, 32), ("x",), (DEVICES,), (None, None, "x")),
    ((3, 16, 32), ("a", "b"), (min(4, DEVICES), max(1, DEVICES // 4)), (None, "a", "b")),
]


@pytest.mark.parametrize("order, split", cases.product("splits", (1, 3), SPLITS, sampled=4))
def test_coordinates_split_on_explicit_axes(order, split):
    """Coordinates placed with a NamedSharding on Explicit mesh axes: each
    device interpolates its points (a kernel cannot index a ref split
    across devices by a scalar, and a TPU lowers kernels only inside a
    shard_map), the values split as the points, the grid gradient summed
    over the devices; the same numbers as unsplit, and the program lowers
    for a TPU."""
    shape, names, sizes, spec = split
    rng = np.random.default_rng(order)
    grid = rng.normal(size=(9, 8, 7)).astype(np.float32)
    coords = rng.uniform(-2, 9, shape).astype(np.float32)
    f, gradient = interpolate(order), grid_gradient(order)
    want, want_gradient = jax.jit(f)(grid, coords), jax.jit(gradient)(grid, coords)
    mesh = jax.make_mesh(sizes, names, axis_types=(AxisType.Explicit,) * len(names))
    with jax.set_mesh(mesh):
        split = jax.device_put(coords, NamedSharding(mesh, P(*spec)))
        got, got_gradient = jax.jit(f)(grid, split), jax.jit(gradient)(grid, split)
        assert jax.typeof(got).sharding.spec == P(*spec[1:])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got_gradient, want_gradient, rtol=1e-5, atol=1e-5)
        for program in (f, gradient):
            text = exported_for_a_tpu(
                program,
                jax.ShapeDtypeStruct(grid.shape, jnp.float32),
                jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*spec))),
            )
            assert "tpu_custom_call" in text


def test_a_batch_of_grids_split_on_an_explicit_axis():
    """vmap over grids and their points, both split along the batch: each
    device its grids, their gradients as unsplit."""
    rng = np.random.default_rng(0)
    grids = rng.normal(size=(8, 6, 7)).astype(np.float32)
    coords = rng.uniform(-2, 7, (8, 2, 64)).astype(np.float32)
    f = jax.vmap(lambda g, c: map_coordinates(g, list(c), 1, "wrap"))
    gradient = jax.grad(lambda g, c: (f(g, c) ** 2).sum())
    want, want_gradient = jax.jit(f)(grids, coords), jax.jit(gradient)(grids, coords)
    mesh = jax.make_mesh((DEVICES,), ("x",), axis_types=(AxisType.Explicit,))
    with jax.set_mesh(mesh):
        g = jax.device_put(grids, NamedSharding(mesh, P("x")))
        c = jax.device_put(coords, NamedSharding(mesh, P("x")))
        got, got_gradient = jax.jit(f)(g, c), jax.jit(gradient)(g, c)
        assert jax.typeof(got_gradient).sharding.spec == P("x", None, None)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got_gradient, want_gradient, rtol=1e-5, atol=1e-5)
