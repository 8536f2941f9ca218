"""The CUDA kernels of xlabind.ops.map_coordinates, their loop bodies run on
the host (ffi/ops/map_coordinates/cuda_point_bodies.h, through
tests/native/cuda_bodies_handlers.cc): the whole op bound to them gives
bit for bit what it gives on the CPU handlers' scalar path, for every order,
mode, dtype, rank (1 to 3 take the interior fast paths; 4 the general kernel),
batch dimensions (vmap) and the domain table's coordinates; the transpose
(the scatter kernel) gives the CPU's grid gradient. So the first GPU run
checks the GPU, not the kernels' arithmetic (tests/gpu/test_gpu_map_coordinates.py)."""

import os
import sys

os.environ["XLABIND_NO_SIMD"] = "1"  # the CPU's scalar path: the same sums as the kernels

import cases
import jax
import jax.numpy as jnp
import native_api_ops
import numpy as np
import pytest
from map_coordinates_table import CVAL, EXTREME, FINITE, GRID, MODES

import xlabind
from xlabind.ops import map_coordinates

jax.config.update("jax_enable_x64", True)
xlabind.register_ffi_targets(native_api_ops)
OP = sys.modules["xlabind.ops.map_coordinates.op"]
MODES_ALL = MODES + ["grid-constant", "grid-wrap", "grid-mirror"]


def _forget_the_binding(fn):
    """`fn` jitted, with the op's bound function and the traces that saw it
    forgotten (jax keeps those of `fn` and of the op's inner jitted function).
    Only those: jax.clear_caches() would drop every program of the process,
    and compiling jnp.asarray's and the conversions' programs again was half
    of this file's 736 lowerings."""
    OP._bound.cache_clear()
    OP._map_coordinates.clear_cache()
    jitted = jax.jit(fn)
    jitted.clear_cache()
    return jitted


@pytest.fixture
def on_cuda_bodies(monkeypatch):
    """Runs `fn` with the op bound to the kernels' bodies, then to the CPU
    handlers (each binding traced afresh); returns both results. With
    `texts`, also appends each run's program text to it."""
    bodies = (
        xlabind.ffi_target("native_api_cuda_gather_bodies", platforms=("cpu",)),
        xlabind.ffi_target("native_api_cuda_scatter_bodies", platforms=("cpu",)),
    )

    def both(fn, *args, texts=None):
        results = []
        for gather, scatter in (bodies, (OP._GATHER, OP._SCATTER)):
            with monkeypatch.context() as patch:
                patch.setattr(OP, "_GATHER", gather)
                patch.setattr(OP, "_SCATTER", scatter)
                jitted = _forget_the_binding(fn)
                results.append(jax.tree_util.tree_map(np.asarray, jitted(*args)))
                if texts is not None:
                    texts.append(jitted.lower(*args).as_text())
        _forget_the_binding(fn)
        return results

    return both


def same(got, want):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(g, w)


def test_the_harness_runs_the_bodies_then_the_cpu_handlers(on_cuda_bodies):
    """Each run's program calls the binding it was given, for the values and
    the transpose, and none leaks into the next run or the next call."""

    def values_and_grid_gradient(g, c):
        y, pullback = jax.vjp(lambda g: map_coordinates(g, [c], 1), g)
        return y, pullback(y)[0]

    texts = []
    for _ in range(2):
        on_cuda_bodies(values_and_grid_gradient, jnp.ones(4), jnp.ones(3), texts=texts)
    bodies = ["native_api_cuda_gather_bodies", "native_api_cuda_scatter_bodies"]
    cpu = ["xlabind_map_coordinates", "xlabind_map_coordinates_transpose"]
    called = [
        [name for name in bodies + cpu if f"stablehlo.custom_call @{name}(" in text]
        for text in texts
    ]
    assert called == [bodies, cpu, bodies, cpu], called
    # Outside the harness, the op is bound to the CPU handlers again.
    text = (
        jax.jit(lambda g, c: map_coordinates(g, [c], 1)).lower(jnp.ones(4), jnp.ones(3)).as_text()
    )
    assert "@xlabind_map_coordinates(" in text and "bodies" not in text


@pytest.mark.parametrize(
    "mode, order, dtype",
    cases.product("domain table", MODES_ALL, range(6), (np.float32, np.float64), sampled=12),
)
def test_values_on_the_domain_table(on_cuda_bodies, mode, order, dtype):
    coords = np.asarray(FINITE + EXTREME, dtype)
    bodies, cpu = on_cuda_bodies(
        lambda g, c: map_coordinates(g, [c], order, mode, cval=CVAL),
        jnp.asarray(GRID, dtype),
        jnp.asarray(coords),
    )
    same(bodies, cpu)


@pytest.mark.parametrize(
    "mode, order, ndim",
    cases.product(
        "every rank",
        ("constant", "mirror", "wrap", "grid-constant"),
        range(6),
        (1, 2, 3, 4),
        sampled=12,
    ),
)
def test_values_and_grid_gradient_in_every_rank(on_cuda_bodies, ndim, order, mode):
    rng = np.random.default_rng(ndim * 10 + order)
    shape = (7, 5, 4, 3)[:ndim]
    grid = jnp.asarray(rng.normal(size=shape))
    # Inside (the fast paths), across the edges and far outside (every node
    # through the boundary mode).
    coords = [
        jnp.asarray(
            np.concatenate(
                [rng.uniform(0.5, s - 1.5, 20), rng.uniform(-3.0, s + 2.0, 20), [-1e6, 1e6, np.nan]]
            )
        )
        for s in shape
    ]

    def values_and_grid_gradient(g, *c):
        f = lambda g: map_coordinates(g, list(c), order, mode, cval=0.5)
        y, pullback = jax.vjp(f, g)
        return y, pullback(jnp.cos(jnp.arange(y.size, dtype=y.dtype)))[0]

    (bodies_values, bodies_grad), (cpu_values, cpu_grad) = on_cuda_bodies(
        values_and_grid_gradient, grid, *coords
    )
    np.testing.assert_array_equal(bodies_values, cpu_values)
    # The scatter adds in the points' order, the CPU's threads in theirs.
    np.testing.assert_allclose(bodies_grad, cpu_grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("order", [1, 3])
def test_batch_dimensions_locate_each_elements_grid(on_cuda_bodies, order):
    # vmap over grids and coordinates: the kernels' Locate (batch offsets).
    rng = np.random.default_rng(order)
    grids = jnp.asarray(rng.normal(size=(3, 6, 5)))
    rows = jnp.asarray(rng.uniform(-1.0, 6.0, (3, 11)))
    columns = jnp.asarray(rng.uniform(-1.0, 5.0, (3, 11)))
    f = jax.vmap(lambda g, r, c: map_coordinates(g, [r, c], order, "mirror"))
    bodies, cpu = on_cuda_bodies(f, grids, rows, columns)
    same(bodies, cpu)
    # And a batch of coordinates on one grid (the grid not batched).
    g = jax.vmap(lambda r, c: map_coordinates(grids[0], [r, c], order, "nearest"))
    bodies, cpu = on_cuda_bodies(g, rows, columns)
    same(bodies, cpu)
