"""Native XLA FFI targets bound like Python functions: attributes from static
keyword arguments, every kind and vmap method, export; and the CUDA runtime
the native CUDA kernels load is the pinned one."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlabind
import xlabind.ops  # registers the ops' targets, which these tests bind directly
from xlabind import native_build
from xlabind._runtime import extension as _extension

jax.config.update("jax_enable_x64", True)

GATHER = xlabind.ffi_target("xlabind_map_coordinates", platforms=("cpu", "cuda"))
SCATTER = xlabind.ffi_target("xlabind_map_coordinates_transpose", platforms=("cpu", "cuda"))


def values_shape(grid, coords, **_):
    return jax.ShapeDtypeStruct(coords.shape, grid.dtype)


def test_a_native_target_as_a_linear_function():
    # The 1-D linear interpolation kernel, linear in the grid, transposed by the
    # native scatter: bound with no Python in the loop.
    op = xlabind.linear(GATHER, SCATTER, values_shape, nondiff_argnums=(1,), name="interp")
    grid = jnp.arange(5.0) ** 2
    coords = jnp.array([0.5, 2.25, 3.0])
    kw = dict(order=1, mode=0, derivative=(0,))
    np.testing.assert_allclose(op(grid, coords, **kw), np.interp(coords, np.arange(5.0), grid))
    ct = jnp.array([1.0, 2.0, 3.0])
    (g,) = jax.linear_transpose(lambda g: op(g, coords, **kw), grid)(ct)
    np.testing.assert_allclose(g, [0.5, 0.5, 1.5, 3.5, 0.0])
    np.testing.assert_allclose(
        jax.grad(lambda g: op(g, coords, **kw).sum())(grid), [0.5, 0.5, 0.75, 1.25, 0.0]
    )
    assert isinstance(op.fn, xlabind.FfiTarget)


def test_static_kwargs_become_ffi_attributes():
    op = xlabind.callback(GATHER, values_shape)
    text = (
        jax.jit(lambda g, c: op(g, c, order=1, mode=2, derivative=(1,)))
        .lower(jnp.ones(4), jnp.ones(3))
        .as_text()
    )
    assert "derivative = dense<1> : tensor<1xi64>" in text and "mode = 2 : i64" in text
    with pytest.raises(
        TypeError,
        match=r"keyword argument 'mode' is a frozenset, which cannot "
        r"be an FFI attribute",
    ):
        jax.jit(lambda g, c: op(g, c, order=1, mode=frozenset([2]), derivative=(1,))).lower(
            jnp.ones(4), jnp.ones(3)
        )


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_every_vmap_method(method):
    op = xlabind.callback(GATHER, values_shape, vmap_method=method)
    grids = jnp.arange(15.0).reshape(3, 5)
    coords = jnp.array([0.5, 3.5])
    got = jax.vmap(lambda g: op(g, coords, order=1, mode=1, derivative=(0,)))(grids)
    want = jax.vmap(lambda g: jnp.interp(coords, jnp.arange(5.0), g))(grids)
    np.testing.assert_allclose(got, want)


def test_native_vmap_hands_the_target_its_batch_axes():
    def shapes(grid, coords, *, batch_axes=None, **_):
        if batch_axes is None:
            return values_shape(grid, coords)
        return xlabind.BatchedResult((3, 2), grid.dtype, 0)

    op = xlabind.callback(GATHER, shapes, vmap_method="native")
    text = (
        jax.jit(jax.vmap(lambda g: op(g, jnp.ones(2), order=1, mode=1, derivative=(0,))))
        .lower(jnp.ones((3, 5)))
        .as_text()
    )
    assert "batch_axes = dense<[0, -1]> : tensor<2xi64>" in text  # operand 1 is not batched


def test_native_targets_can_be_exported():
    # Unlike a Python callback, a native target travels as a named custom call;
    # jax asks the exporter to vouch for its stability.
    from xlabind.ops import map_coordinates

    f = jax.jit(lambda g, c: map_coordinates(g, [c], 1))
    args = (jnp.arange(4.0), jnp.array([0.5, 2.5]))
    exported = jax.export.export(
        f, disabled_checks=[jax.export.DisabledSafetyCheck.custom_call("xlabind_map_coordinates")]
    )(*args)
    assert "xlabind_map_coordinates" in exported.mlir_module()
    np.testing.assert_allclose(exported.call(*args), [0.5, 2.5])


def test_register_ffi_targets_takes_an_extension_modules_table():
    from xlabind import _xlabind_ops

    table = _xlabind_ops.registrations()
    # The module's targets only; each CPU handler's status-reporting variant
    # (xlabind/native/call_status.h) comes from status_registrations(), which
    # register_ffi_targets(module) registers too.
    assert set(table["cpu"]) == {
        "xlabind_map_coordinates",
        "xlabind_map_coordinates_transpose",
        "xlabind_spline_filter",
        "xlabind_spline_filter_transpose",
    }
    # What xlabind.ops marks unavailable where this module is not installed.
    assert set(xlabind.ops._native.TARGET_NAMES) == set(table["cpu"])
    assert set(_xlabind_ops.status_registrations()["cpu"]) == {
        name + ".xlabind_status" for name in table["cpu"]
    }
    xlabind.register_ffi_targets(table)  # registering again is harmless
    xlabind.register_ffi_targets(_xlabind_ops)


def test_an_unavailable_cuda_kernel_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(
        _extension.UNAVAILABLE, ("cuda", "xlabind_map_coordinates"), "no CUDA runtime here"
    )
    op = xlabind.callback(GATHER, values_shape, name="gather")
    with pytest.raises(NotImplementedError, match=r"'gather' cannot run on CUDA: no CUDA runtime"):
        jax.jit(lambda g, c: op(g, c, order=1, mode=0, derivative=(0,))).trace(
            jnp.ones(3), jnp.ones(2)
        ).lower(lowering_platforms=("cuda",))


def test_the_cuda_kernels_load_the_pinned_cuda_runtime():
    # /usr/local/cuda has the same libcudart.so.13 and is in ldconfig: only the
    # RUNPATH makes the pinned copy the one that loads.
    assert not _extension.UNAVAILABLE, _extension.UNAVAILABLE
    loaded = {
        line.split()[-1]
        for line in pathlib.Path("/proc/self/maps").read_text().splitlines()
        if "libcudart.so" in line
    }
    assert len(loaded) == 1, loaded
    (path,) = loaded
    assert "xlabind_cuda/site/nvidia/cu13/lib/libcudart.so.13" in path, path


def test_attributes_are_typed_as_jax_ffi_types_them():
    op = xlabind.callback(xlabind.ffi_target("xlabind_noop"), lambda x, **_: x)
    text = (
        jax.jit(
            lambda x: op(
                x, a=np.uint64(2**64 - 1), b=np.float32(0.5), c=np.int32(-3), d=3, e=2.5, f=True
            )
        )
        .lower(jnp.ones(2))
        .as_text()
    )
    for attribute in (
        "a = 18446744073709551615 : ui64",
        "b = 5.000000e-01 : f32",
        "c = -3 : i32",
        "d = 3 : i64",
        "e = 2.500000e+00 : f64",
        "f = true",
    ):
        assert attribute in text, (attribute, text)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_an_int_beyond_i64_names_the_target_and_argument(value):
    with pytest.raises(
        TypeError,
        match=r"xlabind.ffi_target\('xlabind_noop'\): keyword argument "
        r"'big' is -?\d+, which does not fit an i64 FFI "
        r"attribute; pass np.uint64",
    ):
        xlabind.ffi_target("xlabind_noop", big=value)
    op = xlabind.callback(xlabind.ffi_target("xlabind_noop"), lambda x, **_: x, name="noop")
    with pytest.raises(
        TypeError,
        match=r"noop: keyword argument 'big' is -?\d+, which does not "
        r"fit an i64",
    ):
        jax.jit(lambda x: op(x, big=value)).lower(jnp.ones(2))


def test_object_arrays_and_bad_names_are_refused_at_once():
    with pytest.raises(
        TypeError,
        match=r"keyword argument 'table' is an array of object, which "
        r"cannot be an FFI attribute",
    ):
        xlabind.ffi_target("xlabind_noop", table=np.array([object()]))
    for name in (None, "", 3):
        with pytest.raises(
            TypeError,
            match=r"xlabind.ffi_target: name must be the registered "
            r"target's name \(a non-empty str\)",
        ):
            xlabind.ffi_target(name)


def test_a_static_batch_axes_attribute_is_refused_under_native_vmap():
    target = xlabind.ffi_target("xlabind_noop", batch_axes=(1,))
    with pytest.raises(
        TypeError,
        match=r"noop: the FFI target 'xlabind_noop' has a static "
        r"attribute 'batch_axes', which xlabind passes itself",
    ):
        xlabind.callback(target, lambda x, **_: x, vmap_method="native", name="noop")
    xlabind.callback(target, lambda x, **_: x)  # fine where xlabind passes none


def test_platforms_in_any_case_and_a_clear_error_for_others():
    assert xlabind.ffi_target("xlabind_noop", platforms=("CPU", "Cuda")).platforms == (
        "cpu",
        "cuda",
    )
    assert xlabind.ffi_target("xlabind_noop", platforms="cpu").platforms == ("cpu",)
    double = xlabind.callback({"CPU": lambda x: 2 * x}, lambda x: x)
    np.testing.assert_allclose(double(jnp.ones(2)), [2.0, 2.0])
    np.testing.assert_allclose(
        xlabind.callback(lambda x: 2 * x, lambda x: x, platforms=("Cpu",))(jnp.ones(1)), [2.0]
    )
    # ("tpu",) is accepted, and refused when lowered (tests/tpu/test_tpu.py).
    for bad in (("metal",), ("cpu", "rocm"), ()):
        with pytest.raises(
            ValueError,
            match=r"xlabind.ffi_target\('xlabind_noop'\): "
            r"(unknown platform|platforms is empty)",
        ):
            xlabind.ffi_target("xlabind_noop", platforms=bad)
    with pytest.raises(ValueError, match=r"unknown platform 'gpu'; use 'cpu' or 'cuda'"):
        xlabind.callback({"gpu": np.sin}, lambda x: x)
    # A module's registrations() table, keyed in any case.
    from xlabind import _xlabind_ops

    xlabind.register_ffi_targets({"CPU": _xlabind_ops.registrations()["cpu"]})
    with pytest.raises(ValueError, match=r"register_ffi_targets: unknown platform 'METAL'"):
        xlabind.register_ffi_targets({"METAL": {}})


def _generated(tmp_path, table: str) -> str:
    """The module source `python -m xlabind._generate_extension` makes of a
    handler table written as a Bazel workspace writes it."""
    (tmp_path / "handlers.bzl").write_text(
        'load("@xlabind//ffi:defs.bzl", "xlabind_handler")\n\nHANDLERS = ' + table + "\n"
    )
    out = tmp_path / "module.cc"
    native_build.main(
        ["--module", "m", "--handlers", f"{tmp_path}/handlers.bzl:HANDLERS", "--out", str(out)]
    )
    return out.read_text()


def test_xlabind_handler_names_every_stage_and_the_graph_trait(tmp_path):
    source = _generated(
        tmp_path,
        '{"cuda": {"t": xlabind_handler(instantiate = "Build", execute = "Run", '
        'command_buffer = True)}, "cpu": {"u": xlabind_handler(execute = "RunCpu")}}',
    )
    assert 'Add(platforms, "CUDA", "t", {&Build, nullptr, nullptr, &Run_command_buffer})' in source
    assert 'Add(platforms, "cpu", "u", {nullptr, nullptr, nullptr, &RunCpu})' in source


@pytest.mark.parametrize(
    "table,error,message",
    [
        # A misspelt stage fails where the table is written.
        (
            '{"cpu": {"t": xlabind_handler(instanciate = "B", execute = "R")}}',
            TypeError,
            "instanciate",
        ),
        ('{"cpu": {"t": xlabind_handler(instantiate = "B")}}', TypeError, "execute"),
        (
            '{"cpu": {"t": xlabind_handler(execute = 3)}}',
            ValueError,
            "execute must be the C symbol",
        ),
        (
            '{"cpu": {"t": xlabind_handler(execute = "R", command_buffer = "yes")}}',
            ValueError,
            "command_buffer must be True or False",
        ),
        # A table of stages written by hand names what to write instead.
        ('{"cpu": {"t": {"instanciate": "B", "execute": "R"}}}', ValueError, "xlabind_handler"),
        # The stage and trait checks of xlabind_extension hold for xlabind_handler.
        (
            '{"cpu": {"t": xlabind_handler(execute = "R", command_buffer = True)}}',
            ValueError,
            "only CUDA handlers",
        ),
        (
            '{"cpu": {"t": xlabind_handler(prepare = "P", execute = "R")}}',
            ValueError,
            "never runs",
        ),
    ],
)
def test_a_wrong_handler_fails_naming_what_is_wrong(tmp_path, table, error, message):
    with pytest.raises(error, match=message):
        _generated(tmp_path, table)
