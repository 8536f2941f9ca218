"""jax.export with symbolic shapes: every bound function whose result shapes
follow from its arguments' exports at every size (native targets, and
xlabind.ops, as jax.scipy.ndimage.map_coordinates does), and calls of the
exported artifact give what the function gives; a Python shape function that
needs concrete sizes, and Python functions themselves, are clear errors."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import xlabind
from xlabind.ops import map_coordinates, spline_filter

CHECKS = [
    export.DisabledSafetyCheck.custom_call(name)
    for name in (
        "xlabind_noop",
        "xlabind_map_coordinates",
        "xlabind_map_coordinates_transpose",
        "xlabind_spline_filter",
        "xlabind_spline_filter_transpose",
    )
]
F32 = jnp.float32


def exported(fn, *shapes):
    """`fn` exported for these (symbolic) ShapeDtypeStructs, checked to keep
    the symbolic result shapes."""
    return export.export(jax.jit(fn), disabled_checks=CHECKS)(*shapes)


def specs(*shapes: str):
    """ShapeDtypeStructs of these shapes, their symbols from one scope (one
    `n` in each)."""
    scope = export.SymbolicScope()
    return [
        jax.ShapeDtypeStruct(export.symbolic_shape(shape, scope=scope), F32) for shape in shapes
    ]


def test_a_native_target_at_every_size():
    double = xlabind.linear(
        xlabind.ffi_target("xlabind_noop"),
        None,
        lambda x: jax.ShapeDtypeStruct((x.shape[0], *x.shape[1:]), x.dtype),
    )
    artifact = exported(double, *specs("n, 3"))
    assert str(artifact.out_avals[0].shape) == "(n, 3)"
    for n in (1, 4, 7):
        assert artifact.call(jnp.ones((n, 3))).shape == (n, 3)
    # Under vmap, with a batch of symbolic size too.
    batched = exported(jax.vmap(double), *specs("b, n, 3"))
    assert batched.call(jnp.ones((2, 5, 3))).shape == (2, 5, 3)


@pytest.mark.parametrize("order", [0, 1, 3, 5])
@pytest.mark.parametrize("mode", ["constant", "nearest", "mirror", "wrap"])
def test_map_coordinates_with_symbolic_grid_and_points(order, mode):
    def interpolate(grid, rows, columns):
        return map_coordinates(grid, [rows, columns], order, mode=mode, cval=0.5)

    artifact = exported(interpolate, *specs("h, w", "n", "n"))
    assert str(artifact.out_avals[0].shape) == "(n,)"
    rng = np.random.default_rng(order)
    for h, w, n in ((5, 7, 3), (9, 4, 11)):
        grid = jnp.asarray(rng.normal(size=(h, w)), F32)
        rows = jnp.asarray(rng.uniform(-1, h, n), F32)
        columns = jnp.asarray(rng.uniform(-1, w, n), F32)
        np.testing.assert_allclose(
            artifact.call(grid, rows, columns),
            interpolate(grid, rows, columns),
            rtol=1e-6,
            atol=1e-6,
        )


@pytest.mark.parametrize("order", [1, 3])
def test_map_coordinates_gradients_export(order):
    def loss(grid, rows, columns):
        return (map_coordinates(grid, [rows, columns], order, mode="mirror") ** 2).sum()

    gradient = jax.grad(loss, argnums=(0, 1, 2))
    artifact = exported(gradient, *specs("h, w", "n", "n"))
    grid = jnp.arange(30.0, dtype=F32).reshape(5, 6) ** 0.5
    rows, columns = jnp.array([0.5, 3.2, 1.1], F32), jnp.array([4.4, 0.3, 2.5], F32)
    for got, want in zip(artifact.call(grid, rows, columns), gradient(grid, rows, columns)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_map_coordinates_with_symbolic_rows_of_points():
    """Image-shaped coordinates (2, rows, n) with both counts symbolic: values
    and both gradients, as jax's own at two sizes."""

    def loss(grid, coordinates):
        return (map_coordinates(grid, list(coordinates), 1, mode="wrap") ** 2).sum()

    def theirs(grid, coordinates):
        return (
            jax.scipy.ndimage.map_coordinates(grid, list(coordinates), 1, mode="wrap") ** 2
        ).sum()

    values = exported(
        lambda g, c: map_coordinates(g, list(c), 1, mode="wrap"), *specs("6, 5", "2, r, n")
    )
    assert str(values.out_avals[0].shape) == "(r, n)"
    gradient = exported(jax.grad(loss, argnums=(0, 1)), *specs("6, 5", "2, r, n"))
    rng = np.random.default_rng(8)
    grid = jnp.asarray(rng.normal(size=(6, 5)), F32)
    for r, n in ((1, 3), (4, 7)):
        coordinates = jnp.asarray(rng.uniform(-2, 8, (2, r, n)), F32)
        want = jax.scipy.ndimage.map_coordinates(grid, list(coordinates), 1, mode="wrap")
        np.testing.assert_allclose(values.call(grid, coordinates), want, rtol=1e-5, atol=1e-5)
        got = gradient.call(grid, coordinates)
        for g, w in zip(got, jax.grad(theirs, argnums=(0, 1))(grid, coordinates)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_spline_filter_exports():
    artifact = exported(lambda x: spline_filter(x, order=3), *specs("h, w"))
    x = jnp.arange(20.0, dtype=F32).reshape(4, 5) ** 2
    np.testing.assert_allclose(artifact.call(x), spline_filter(x, order=3), rtol=1e-6)


# A process that has not run the function: it imports xlabind (which registers
# the ops' targets, as the semantics page says) and calls the artifact at two
# sizes, printing each result's largest difference from jax's own gradient.
FRESH = textwrap.dedent("""
    import sys
    import jax, jax.numpy as jnp, numpy as np
    from jax import export
    import xlabind
    back = export.deserialize(bytearray(open(sys.argv[1], "rb").read()))
    print("symbolic", back.in_avals[0].shape, back.in_avals[1].shape)
    def loss(grid, rows, columns):
        return (jax.scipy.ndimage.map_coordinates(grid, [rows, columns], 1, mode="mirror")
                ** 2).sum()
    for h, w, n in ((5, 6, 3), (8, 3, 17)):
        rng = np.random.default_rng(n)
        grid = jnp.asarray(rng.normal(size=(h, w)), jnp.float32)
        rows = jnp.asarray(rng.uniform(0, h - 1, n), jnp.float32)
        columns = jnp.asarray(rng.uniform(0, w - 1, n), jnp.float32)
        got = back.call(grid, rows, columns)
        want = jax.grad(loss, argnums=(0, 1, 2))(grid, rows, columns)
        print("size", h, w, n, max(float(jnp.max(jnp.abs(g - t))) for g, t in zip(got, want)))
    """)


def test_a_serialized_symbolic_artifact_runs_in_a_fresh_process(tmp_path):
    def loss(grid, rows, columns):
        return (map_coordinates(grid, [rows, columns], 1, mode="mirror") ** 2).sum()

    artifact = exported(jax.grad(loss, argnums=(0, 1, 2)), *specs("h, w", "n", "n"))
    path = tmp_path / "gradient.bin"
    path.write_bytes(artifact.serialize())
    done = subprocess.run(
        [sys.executable, "-c", FRESH, str(path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "symbolic (h, w) (n,)", lines
    errors = [float(line.split()[-1]) for line in lines if line.startswith("size")]
    assert len(errors) == 2 and max(errors) < 1e-5, lines


def test_a_shape_function_that_needs_concrete_sizes_says_so():
    concrete = xlabind.callback(
        xlabind.ffi_target("xlabind_noop"),
        lambda x: jax.ShapeDtypeStruct((int(x.shape[0]),), x.dtype),
        name="concrete",
    )
    with pytest.raises(
        TypeError,
        match=r"concrete: its result_shape_dtypes function needs "
        r"concrete sizes, but the arguments have symbolic "
        r"shapes \[\(n,\)\]",
    ):
        exported(concrete, *specs("n"))


def test_a_python_function_is_refused_with_why():
    python = xlabind.callback(np.sin, lambda x: x, name="sine")
    with pytest.raises(
        NotImplementedError,
        match=r"jax.export cannot serialize 'sine': it "
        r"calls a Python function",
    ):
        exported(python, *specs("n"))
