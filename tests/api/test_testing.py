"""xlabind.testing, the runtime's entry points for xlabind's own benchmarks
and build checks (tools/ imports nothing else of the package's insides): each
does what its callers rely on, and `import xlabind` leaves it out."""

import gc
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlabind
import xlabind.testing as xlabind_testing


def test_import_xlabind_leaves_it_out():
    done = subprocess.run(
        [sys.executable, "-c", "import sys, xlabind; print('xlabind.testing' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stdout + done.stderr


def test_the_noop_target_is_registered_and_runs():
    assert xlabind_testing.NOOP_TARGET in xlabind_testing.registered_targets()["cpu"]
    x = jnp.arange(4.0)
    like = jax.ShapeDtypeStruct(x.shape, x.dtype)
    call = jax.ffi.ffi_call(xlabind_testing.NOOP_TARGET, like, input_output_aliases={0: 0})
    np.testing.assert_array_equal(jax.jit(call)(x), x)


def test_the_copy_target_is_registered_and_copies():
    assert xlabind_testing.COPY_TARGET in xlabind_testing.registered_targets()["cpu"]
    x = jnp.arange(5.0) * 1.5
    like = jax.ShapeDtypeStruct(x.shape, x.dtype)
    np.testing.assert_array_equal(
        jax.jit(jax.ffi.ffi_call(xlabind_testing.COPY_TARGET, like))(x), x
    )


def test_unwritten_result_checks_turn_off_and_on():
    def nothing(x, *, out):
        pass

    op = jax.jit(xlabind.callback(nothing, lambda x: x, in_place=True))
    x = jnp.arange(4.0)
    with pytest.raises(Exception, match="nothing wrote nothing into `out`"):
        op(x).block_until_ready()
    xlabind_testing.set_unwritten_result_checks(False)
    try:
        op(x).block_until_ready()  # XLA's memory, unchecked: what a benchmark times
    finally:
        xlabind_testing.set_unwritten_result_checks(True)
    with pytest.raises(Exception, match="nothing wrote nothing into `out`"):
        op(x).block_until_ready()


def test_released_callbacks_are_counted_and_collected():
    # What earlier tests released is collected first: collected between the
    # two counts, it would hide ours (CI: "assert 2 > 2").
    jax.clear_caches()
    gc.collect()
    xlabind_testing.collect_released_callbacks()
    before = xlabind_testing.live_callback_data_count()
    op = xlabind.callback(lambda x: x * 2, lambda x: x)
    jax.jit(op)(jnp.ones(3)).block_until_ready()
    during = xlabind_testing.live_callback_data_count()
    assert during > before
    del op
    jax.clear_caches()
    gc.collect()
    xlabind_testing.collect_released_callbacks()
    # Ours is gone (and any an earlier test left behind).
    assert xlabind_testing.live_callback_data_count() <= during - 1


def test_compiled_modules_load_by_name_only():
    core = xlabind_testing.load_compiled_module("_xlabind")
    assert core.__name__ == "xlabind._xlabind"
    with pytest.raises(ValueError, match="load_compiled_module: name must be one of"):
        xlabind_testing.load_compiled_module("os")


def test_element_type_codes_are_xla_s():
    codes = {name: xlabind_testing.element_type_code(name) for name in ("float32", "float64")}
    assert len(set(codes.values())) == 2 and all(c > 0 for c in codes.values()), codes
    with pytest.raises(ValueError, match=r"element_type_code: name must be .*got 'float7'"):
        xlabind_testing.element_type_code("float7")


def test_the_cuda_host_path_runs_a_registered_callback():
    calls = []

    def record(x, *, out):
        calls.append(x.shape)

    callback = xlabind_testing.cuda_host_callback("in_place", record)
    float32 = xlabind_testing.element_type_code("float32")
    undo = xlabind_testing.use_cuda_libraries(None, None)
    try:
        seconds = xlabind_testing.time_cuda_host_calls(
            callback, [(0x100000, [4], float32), (0x200000, [4], float32)], 1, 3, 0x7000, 0
        )
    finally:
        undo()
    assert seconds > 0 and calls == [(4,)] * 3, calls
    with pytest.raises(ValueError, match="style must be"):
        xlabind_testing.cuda_host_callback("sideways", record)
