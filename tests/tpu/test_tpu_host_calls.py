"""The host half of a Python function in a TPU program
(python/xlabind/_runtime/python_on_tpu.py): results handed to XLA's
transfer in one piece and of exactly their dtype, interrupts raised again in
the main thread, error text that XLA's C++ can encode, sub-byte and 8-bit
float arrays carried across the transfer in whole-byte dtypes; the ordered
example of docs/semantics.md wherever the device runs behind Python; and a
jaxbind call in a branch only some devices take.

Off a TPU the TPU lowering rule stands in for the CPU one
(tests/support/tpu_lowering.py), so jax's CPU host callback runs the same
host function. The processes these tests start run on the CPU (one process
at a time may hold a chip); what only a chip shows is marked `chip_only`.
"""

import os
import pathlib
import subprocess
import sys
import textwrap
import types

import doc_blocks
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tpu_lowering
from tpu_lowering import chip_only, tpu_rule_for_cpu_programs

import xlabind
from xlabind._runtime import extension, python_functions, python_on_tpu


@pytest.fixture(autouse=True, scope="module")
def tpu_rule():
    with tpu_rule_for_cpu_programs():
        yield


def aval(shape, dtype):
    """What host_function reads of a result's abstract value (any dtype xlabind
    supports, also those jax.ShapeDtypeStruct refuses)."""
    return types.SimpleNamespace(shape=tuple(shape), dtype=np.dtype(dtype))


def returning_host(fn, results, name="fn"):
    return python_on_tpu.host_function(
        fn,
        name,
        {},
        results,
        in_place=False,
        flatten=lambda returned: [returned],
        check=python_functions.checked_result,
    )


def run_on_the_cpu(code: str, timeout: float = 300, **env) -> subprocess.CompletedProcess:
    """`code` in a fresh Python process on the CPU, with tests/support importable."""
    support = os.path.dirname(os.path.abspath(tpu_lowering.__file__))
    prelude = f"import sys\nsys.path.insert(0, {support!r})\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "JAX_PLATFORMS": "cpu", **env},
    )


# -- results in one piece, of exactly their dtype ------------------------------

VIEWS = {
    "transpose": lambda x: x.transpose(2, 0, 1),
    "strided_slice": lambda x: x[::2],
    "element": lambda x: x[1, 2, 1],  # a NumPy scalar: a 0-d result stays 0-d
}
DTYPES = sorted(extension.SUPPORTED_DTYPES, key=str)


def small_values(shape, dtype):
    """0s and 1s, which every supported dtype holds, in `dtype`."""
    return (np.arange(int(np.prod(shape))) % 2).reshape(shape).astype(dtype)


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_returned_view_is_handed_back_c_contiguous_in_its_dtype(dtype, view):
    # The chip's transfer reinterprets each result's bytes: a strided float32
    # or bfloat16 view failed there with "the last axis must be contiguous".
    x = small_values((4, 3, 2), dtype)
    expected = np.asarray(VIEWS[view](x))
    host = returning_host(VIEWS[view], [aval(expected.shape, dtype)])
    (result,) = host(x)
    assert type(result) is np.ndarray and result.flags.c_contiguous
    assert result.dtype == dtype and result.shape == expected.shape
    assert result.tobytes() == np.ascontiguousarray(expected).tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_in_place_results_are_handed_back_c_contiguous_in_their_dtype(dtype):
    def fill(x, out):
        out[0][...] = x.transpose(2, 0, 1)
        out[1][...] = x[::2]

    x = small_values((4, 3, 2), dtype)
    host = python_on_tpu.host_function(
        fill,
        "fill",
        {},
        [aval((2, 4, 3), dtype), aval((2, 3, 2), dtype)],
        in_place=True,
        check=python_functions.checked_result,
    )
    results = host(x)
    for result, expected in zip(results, (x.transpose(2, 0, 1), x[::2])):
        assert result.flags.c_contiguous and result.dtype == dtype
        assert result.tobytes() == np.ascontiguousarray(expected).tobytes()


@pytest.mark.parametrize("view", ["transpose", "strided_slice"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.int8], ids=str)
def test_a_program_gets_a_returned_view_whole(dtype, view):
    x = jnp.arange(24).reshape(4, 3, 2).astype(dtype)
    fn = VIEWS[view]
    op = xlabind.callback(fn, lambda x: jax.eval_shape(fn, x), name=f"{view}_view")
    np.testing.assert_array_equal(jax.jit(op)(x), fn(np.asarray(x)))


# -- interrupts: raised again in the main thread (the cases a process runs
# through the TPU path: tests/runtime/test_interrupts.py's "tpu" cases) ------


def test_an_interrupt_is_queued_for_the_main_thread_and_the_error_says_so(monkeypatch):
    queued = []
    monkeypatch.setattr(
        python_on_tpu, "_add_pending_call", lambda func, arg: queued.append(arg) or 0
    )
    monkeypatch.setattr(python_on_tpu, "_pending", None)

    def interrupted(x):
        raise SystemExit(4)

    host = returning_host(interrupted, [aval((3,), np.float32)], name="interrupted")
    for _ in range(2):  # the second waits for the first to be raised
        with pytest.raises(python_on_tpu.CallbackError) as caught:
            host(np.ones(3, np.float32))
        assert "xlabind callback 'interrupted' raised SystemExit: 4" in str(caught.value)
        assert "again in the main thread once the computation has failed" in str(caught.value)
    (carrier,) = queued
    assert carrier.interrupt.__traceback__ is None  # the call's frames die with it
    with pytest.raises(SystemExit) as raised:
        bool(carrier)  # what CPython's queue does, in the main thread
    assert raised.value.code == 4 and python_on_tpu._pending is None


@chip_only
@pytest.mark.parametrize("interrupt", [KeyboardInterrupt("stop"), SystemExit(5)], ids=repr)
def test_an_interrupt_on_the_chip_reaches_the_caller(interrupt):
    def interrupted(x):
        raise interrupt

    step = jax.jit(xlabind.callback(interrupted, lambda x: x))
    swallowed = []
    with pytest.raises(type(interrupt)) as caught:
        for _ in range(3):
            try:
                step(jnp.ones(3)).block_until_ready()
            except Exception as e:
                swallowed.append(e)
            for _ in range(10):
                pass
    assert caught.value is interrupt
    assert len(swallowed) <= 1
    np.testing.assert_array_equal(
        jax.jit(xlabind.callback(lambda x: x, lambda x: x))(jnp.ones(2)), 1.0
    )


# -- error text that is not UTF-8 ------------------------------------------------


def test_a_message_with_a_lone_surrogate_is_escaped():
    def undecodable(x):
        raise ValueError("bad \udcff byte")

    host = returning_host(undecodable, [aval((3,), np.float32)], name="undecodable")
    with pytest.raises(python_on_tpu.CallbackError) as caught:
        host(np.ones(3, np.float32))
    error = caught.value
    # What XLA's C++ encodes (str of the error; nanobind formats no cause).
    assert str(error) == "xlabind callback 'undecodable' raised ValueError: bad \\udcff byte"
    str(error).encode("utf-8")
    assert all(isinstance(a, str) and a.encode("utf-8") for a in error.args)
    assert isinstance(error.__cause__, ValueError)  # the original, untouched


def test_a_name_with_a_lone_surrogate_is_escaped():
    def broken(x):
        raise ValueError("plain")

    host = returning_host(broken, [aval((3,), np.float32)], name="op\udcfe")
    with pytest.raises(python_on_tpu.CallbackError) as caught:
        host(np.ones(3, np.float32))
    assert str(caught.value) == "xlabind callback 'op\\udcfe' raised ValueError: plain"


def test_a_program_whose_function_raises_undecodable_text_fails_and_the_process_lives():
    # Through jax's host callback, as on a chip: unescaped, the text crashed
    # the process in C++ (SIGSEGV), on a chip and on the CPU alike.
    done = run_on_the_cpu("""
        import jax, jax.numpy as jnp, numpy as np, xlabind
        from tpu_lowering import tpu_rule_for_cpu_programs
        with tpu_rule_for_cpu_programs():
            def undecodable(x):
                raise ValueError(b"bad \\xff byte".decode("utf-8", "surrogateescape"))
            try:
                jax.jit(xlabind.callback(undecodable, lambda x: x))(jnp.ones(3)).block_until_ready()
            except Exception as e:
                print("FAILED", type(e).__name__)
                print(str(e).encode("utf-8", "backslashreplace").decode("utf-8"))
            ok = jax.jit(xlabind.callback(lambda x: x * 2, lambda x: x))
            print("next call", float(ok(jnp.ones(()))))
    """)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    assert "FAILED" in done.stdout, done.stderr[-3000:]
    assert "xlabind callback 'undecodable' raised ValueError: bad \\udcff byte" in done.stdout
    assert "next call 2.0" in done.stdout


@chip_only
def test_undecodable_text_fails_the_chip_cleanly():
    def undecodable(x):
        raise ValueError("bad \udcff byte")

    with pytest.raises(Exception, match=r"undecodable' raised ValueError: bad \\udcff byte"):
        jax.block_until_ready(jax.jit(xlabind.callback(undecodable, lambda x: x))(jnp.ones(3)))
    np.testing.assert_array_equal(
        jax.jit(xlabind.callback(lambda x: x, lambda x: x))(jnp.ones(2)), 1.0
    )


# -- sub-byte and 8-bit float arrays across the transfer ---------------------------

TWO_BIT = ["int2", "uint2"]
SUB_BYTE = [*TWO_BIT, "int4", "uint4", "float4_e2m1fn"]
ONE_BYTE_FLOATS = [d.name for d in DTYPES if d.name.startswith("float8_")]


def every_value(dtype_name):
    """Every value of the dtype, and the first once more: an odd length."""
    dtype = np.dtype(getattr(ml_dtypes, dtype_name))
    if dtype_name.startswith("float"):  # every bit pattern, one a byte as ml_dtypes keeps them
        values = np.arange(2 ** ml_dtypes.finfo(dtype).bits, dtype=np.uint8).view(dtype)
    else:
        info = ml_dtypes.iinfo(dtype)
        values = np.arange(info.min, info.max + 1).astype(dtype)
    return np.concatenate([values, values[:1]])


def test_wire_dtypes_are_whole_bytes_plain_numpy_knows():
    narrow = set(SUB_BYTE) | set(ONE_BYTE_FLOATS)
    for dtype in DTYPES:
        wire = python_on_tpu.wire_dtype(dtype)
        if dtype.name in narrow:
            assert wire in (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.float32)), dtype
        else:
            assert wire == dtype, dtype


@pytest.mark.parametrize("dtype_name", SUB_BYTE + ONE_BYTE_FLOATS)
def test_every_value_crosses_the_wire_and_back_exactly(dtype_name):
    values = every_value(dtype_name)
    assert len(values) % 2 == 1
    wire = python_on_tpu.to_wire(values, values.dtype)
    assert wire.dtype == python_on_tpu.wire_dtype(values.dtype) and wire.flags.c_contiguous
    if dtype_name in ONE_BYTE_FLOATS:
        assert wire.tobytes() == values.tobytes()  # the bytes themselves, NaNs too
    else:
        np.testing.assert_array_equal(wire.astype(np.float64), values.astype(np.float64))
    back = python_on_tpu.from_wire(wire, values.dtype)
    assert back.dtype == values.dtype and back.tobytes() == values.tobytes()


@pytest.mark.parametrize("dtype_name", SUB_BYTE + ONE_BYTE_FLOATS)
def test_the_function_sees_its_dtype_while_the_transfer_sees_whole_bytes(dtype_name):
    values = every_value(dtype_name)
    dtype = values.dtype
    seen = []

    def identity(x):
        seen.append(x.dtype)
        return x[::-1]  # a strided view, too

    host = returning_host(identity, [aval(values.shape, dtype)], name="identity")
    wired = python_on_tpu.wire_function(
        host, [aval(values.shape, dtype)], [aval(values.shape, dtype)]
    )
    (result,) = wired(python_on_tpu.to_wire(values, dtype))
    assert seen == [dtype]
    assert result.dtype == python_on_tpu.wire_dtype(dtype) and result.flags.c_contiguous
    assert python_on_tpu.from_wire(result, dtype).tobytes() == values[::-1].tobytes()


@pytest.fixture
def emitter_with_wire_dtypes(monkeypatch):
    """The TPU emitter as it is meant to call the host transfer: through
    python_on_tpu.emit_host_call instead of _jax_internals.emit_host_callback
    (python_functions.PythonImplementation._tpu_emitter)."""
    internals = types.SimpleNamespace(**vars(python_functions._jax_internals))
    internals.emit_host_callback = python_on_tpu.emit_host_call
    monkeypatch.setattr(python_functions, "_jax_internals", internals)
    jax.clear_caches()
    yield
    jax.clear_caches()


MLIR_NAMES = {
    "int2": "i2",
    "uint2": "ui2",
    "int4": "i4",
    "uint4": "ui4",
    "float4_e2m1fn": "f4E2M1FN",
    "float8_e4m3fn": "f8E4M3FN",
    "float8_e5m2": "f8E5M2",
}


def transfer_lines(text: str) -> list[str]:
    """The lines of a lowered program that hand arrays to the host and back:
    jax's CPU host callback off a TPU, the sends and receives on a chip."""
    transfers = ("python_cpu_callback", "stablehlo.send", "stablehlo.recv")
    return [line for line in text.splitlines() if any(op in line for op in transfers)]


@pytest.mark.parametrize("dtype_name", sorted(MLIR_NAMES))
@pytest.mark.parametrize("in_place", [False, True])
def test_emit_host_call_carries_narrow_arrays_in_whole_bytes(
    emitter_with_wire_dtypes, dtype_name, in_place
):
    values = every_value(dtype_name)
    if dtype_name in TWO_BIT:
        values = a_shape_xla_converts(values)
    dtype = values.dtype
    seen = []
    if in_place:

        def identity(x, out):
            seen.append(x.dtype)
            out[...] = x[..., ::-1]
    else:

        def identity(x):
            seen.append(x.dtype)
            return x[..., ::-1]

    op = xlabind.callback(identity, lambda x: x, in_place=in_place)
    # The narrow array is made in the program from a whole-byte one: on a
    # v5e, jax's own transfer of an odd-length int4 array to the chip
    # (jnp.asarray) kills the process before any call.
    wide = wide_dtype(dtype_name)
    program = jax.jit(lambda v: op(v.astype(dtype)).astype(wide))
    text = program.lower(values.astype(wide)).as_text()
    transfer = transfer_lines(text)
    narrow = f"x{MLIR_NAMES[dtype_name]}>"
    assert transfer and not any(narrow in line for line in transfer), transfer
    assert narrow in text  # converted in the program, on both sides of the transfer
    # Blocked on: a chip runs the program, and so the call, behind Python.
    result = jax.block_until_ready(program(values.astype(wide)))
    assert seen == [dtype]
    np.testing.assert_array_equal(np.asarray(result), values[..., ::-1].astype(wide))


def a_shape_xla_converts(values):
    """`values` resized to the first shape at which jax's own conversion from
    int8 runs: XLA on a v5e converts 2-bit arrays only at some shapes ("INT2 is
    not supported for rank 1", "... for second minor size 5, expected to be
    greater than or equal to ... (16)"), before any xlabind call is involved."""
    refusals = []
    for shape in [values.shape, (16, values.size), (16, 128), (128, 128)]:
        wide = np.resize(values, shape).astype(np.int8)
        try:
            jax.block_until_ready(jax.jit(lambda v: v.astype(values.dtype))(wide))
        except jax.errors.JaxRuntimeError as error:
            refusals.append(f"{shape}: {str(error).splitlines()[0]}")
            continue
        return np.resize(values, shape)
    pytest.skip(f"jax itself converts no {values.dtype} array here: {refusals}")


def wide_dtype(dtype_name):
    """A whole-byte dtype that holds every value of the narrow one exactly."""
    return np.float32 if dtype_name.startswith("float") else np.int8


# -- docs/semantics.md's ordered example, wherever the device runs behind ---------


def ordered_example():
    (block,) = [
        b
        for b in doc_blocks.blocks(pathlib.Path("docs/semantics.md"))
        if 'effect="ordered"' in b.code and "step(jnp.zeros(3))" in b.code
    ]
    return block


class InputsStillBeingComputed:
    """jax.numpy for the example, except that ones and zeros come from a
    computation that is still running when the example dispatches its step,
    as a TPU runs behind Python: the CPU then runs the step later too."""

    def __init__(self):
        self._matrix = jnp.ones((1000, 1000)) / 1000
        self._later = jax.jit(lambda x, a: x + 0 * (a @ a @ a).sum())

    def __getattr__(self, name):
        return getattr(jnp, name)

    def ones(self, *shape):
        return self._later(jnp.ones(*shape), self._matrix)

    def zeros(self, *shape):
        return self._later(jnp.zeros(*shape), self._matrix)


def test_the_ordered_example_holds_when_the_device_runs_behind():
    block = ordered_example()
    exec(
        block.compiled(),
        {"jax": jax, "jnp": InputsStillBeingComputed(), "np": np, "xlabind": xlabind},
    )


@chip_only
def test_the_ordered_example_holds_on_the_chip():
    block = ordered_example()
    exec(block.compiled(), {"jax": jax, "jnp": jnp, "np": np, "xlabind": xlabind})


# -- jaxbind in a branch that only some devices take ------------------------------


def test_a_jaxbind_call_in_a_branch_only_some_devices_take_finishes():
    # jaxbind's calls took no collective; with the failure exchange the devices
    # that skip the branch never joined it, and XLA aborted the process at 40 s.
    done = run_on_the_cpu(
        """
        import jax, jax.numpy as jnp, numpy as np
        from jax.sharding import PartitionSpec as P
        from xlabind import jaxbind

        def double(out, args, kwargs_dump):
            out[0][...] = 2 * args[0]

        def shapes(x, **kwargs):
            return ((x.shape, x.dtype),)

        linear = jaxbind.get_linear_call(double, double, shapes, shapes)
        nonlinear = jaxbind.get_nonlinear_call(double, (double, double), shapes, shapes)
        mesh = jax.sharding.Mesh(np.array(jax.devices()), ("d",))
        assert len(jax.devices()) == 8
        index = lambda: jax.lax.axis_index("d")
        in_cond = jax.shard_map(
            lambda x: jax.lax.cond(index() == 0, lambda x: linear(x)[0], lambda x: x, x),
            mesh=mesh, in_specs=P("d"), out_specs=P("d"))
        in_switch = jax.shard_map(
            lambda x: jax.lax.switch(jnp.minimum(index(), 2),
                                     [lambda x: x, lambda x: nonlinear(x)[0], lambda x: -x], x),
            mesh=mesh, in_specs=P("d"), out_specs=P("d"))
        print("cond", np.asarray(jax.jit(in_cond)(jnp.ones(8))).tolist())
        print("switch", np.asarray(jax.jit(in_switch)(jnp.ones(8))).tolist())
        """,
        timeout=30,
        XLA_FLAGS=os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cond [2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]" in done.stdout
    assert "switch [1.0, 2.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0]" in done.stdout
