"""Every kind of bound function, under every transformation, lowers for CUDA
(checked on the CPU): the HLO names xlabind's CUDA target with a live
registry key, the right operands and results, for an entry made for CUDA."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from layouts import elementwise, elementwise_shape, single_result_shape

import xlabind
from xlabind import _xlabind, jaxbind
from xlabind._runtime import extension as _extension

BOTH = ("cpu", "cuda")
CALL = re.compile(r"stablehlo\.custom_call @(\w+)\((.*?)\) \{(.*?)\} : \((.*?)\) -> (.*)")


# The last lowering: it keeps its registry entries alive while a test looks at them.
LOWERED = []


def cuda_calls(fn, *args):
    """(target, registered name, operand types, result types) of each custom call
    in fn's CUDA lowering."""
    lowered = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
    LOWERED[:] = [lowered]
    text = lowered.as_text()
    calls = []
    for target, _, attributes, operand_types, result_types in CALL.findall(text):
        key = re.search(r"callback_key = (\d+) : ui64", attributes)
        name = _xlabind.registered_name(int(key.group(1))) if key else None
        calls.append((target, name, operand_types, result_types.strip()))
    assert calls, text
    for target, name, _, _ in calls:
        assert target == _extension.PYTHON_CALLBACK_TARGET
        assert name, "the key in the HLO names no live registry entry"
    return calls


def names(calls):
    return sorted(name for _, name, _, _ in calls)


def made_for_cuda(op):
    return any(key[0] == "cuda" for key in op.definition.implementation._entries.keys())


def test_callback_under_jit_with_kwargs():
    op = xlabind.callback(
        lambda x, y, *, k: x + y * k, lambda x, y, **_: x, platforms=BOTH, name="cb"
    )
    calls = cuda_calls(lambda x, y: op(x, y, k=2.0), jnp.ones((2, 3)), jnp.ones((2, 3)))
    assert calls == [
        ("xlabind_python_callback", "cb", "tensor<2x3xf32>, tensor<2x3xf32>", "tensor<2x3xf32>")
    ]
    assert made_for_cuda(op)


def test_in_place_and_nested_results():
    def f(x, *, out):
        out["a"][...] = x

    op = xlabind.callback(
        f, lambda x: {"a": x, "b": (x, x)}, in_place=True, platforms=BOTH, name="tree"
    )
    calls = cuda_calls(op, jnp.ones(4, jnp.int32))
    assert calls[0][2:] == ("tensor<4xi32>", "(tensor<4xi32>, tensor<4xi32>, tensor<4xi32>)")


@pytest.mark.parametrize(
    "method, operand_shapes",
    [
        ("sequential", "tensor<3xf32>"),
        ("expand_dims", "tensor<5x3xf32>"),
        ("broadcast_all", "tensor<5x3xf32>"),
        ("native", "tensor<5x3xf32>"),
    ],
)
def test_every_vmap_method(method, operand_shapes):
    fn, shape = (
        (elementwise(np.sin), elementwise_shape) if method == "native" else (np.sin, lambda x: x)
    )
    op = xlabind.callback(fn, shape, vmap_method=method, platforms=BOTH, name=f"v_{method}")
    calls = cuda_calls(jax.vmap(op), jnp.ones((5, 3)))
    assert calls[0][1] == f"v_{method}" and calls[0][2] == operand_shapes


def linear_op():
    return xlabind.linear(
        lambda x: 2 * x, lambda ct: 2 * ct, lambda x: x, platforms=BOTH, name="lin"
    )


@pytest.mark.parametrize(
    "transform, expected",
    [
        (lambda f: f, ["lin"]),
        (lambda f: lambda x: jax.jvp(f, (x,), (x,))[1], ["lin"]),
        (lambda f: jax.grad(lambda x: jnp.sum(f(x) ** 2)), ["lin", "lin (transpose)"]),
        (lambda f: lambda x: jax.linear_transpose(f, x)(x)[0], ["lin (transpose)"]),
        (lambda f: jax.hessian(lambda x: jnp.sum(jnp.sin(f(x)))), None),
        (lambda f: jax.vmap(jax.grad(lambda x: jnp.sum(f(x) ** 2))), ["lin", "lin (transpose)"]),
    ],
)
def test_linear_under_every_transformation(transform, expected):
    op = linear_op()
    calls = cuda_calls(transform(op), jnp.linspace(0.1, 1.0, 3))
    if expected is None:  # the hessian: both, several times
        assert set(names(calls)) == {"lin", "lin (transpose)"} and len(calls) >= 3
    else:
        assert names(calls) == sorted(expected)
    assert made_for_cuda(op) == ("lin" in names(calls))


def test_multilinear_grad_and_hessian():
    op = xlabind.multilinear(
        lambda x, y: x * y,
        (lambda y, ct: y * ct, lambda x, ct: x * ct),
        lambda x, y: x,
        platforms=BOTH,
        name="mul",
    )
    f = lambda x: jnp.sum(op(x, x) ** 2)
    assert "mul (transpose 0)" in names(cuda_calls(jax.grad(f), jnp.ones(3)))
    assert "mul (transpose 1)" in names(cuda_calls(jax.hessian(f), jnp.ones(3)))


def test_nonlinear_to_second_order():
    cos_times = xlabind.nonlinear(
        lambda x, t: np.cos(x) * t,
        lambda x, t: x,
        jvp=lambda x, t, dx, dt: -np.sin(x) * t * dx + np.cos(x) * dt,
        vjp=lambda x, t, ct: (-np.sin(x) * t * ct, np.cos(x) * ct),
        platforms=BOTH,
        name="cos_t",
    )
    sin = xlabind.nonlinear(
        np.sin, lambda x: x, jvp=cos_times, vjp=cos_times, platforms=BOTH, name="sin"
    )
    x = jnp.linspace(0.1, 1.0, 3)
    assert names(cuda_calls(jax.grad(lambda x: sin(x).sum()), x)) == ["sin (vjp)"]
    assert names(cuda_calls(jax.jacfwd(sin), x)) == ["sin (jvp)"]
    hessian_calls = names(cuda_calls(jax.hessian(lambda x: sin(x).sum()), x))
    assert "cos_t (jvp)" in hessian_calls or "cos_t (vjp)" in hessian_calls


def test_native_vmap_of_a_jvp():
    op = xlabind.nonlinear(
        elementwise(np.sin),
        elementwise_shape,
        jvp=elementwise(lambda x, t: np.cos(x) * t),
        vjp=elementwise(lambda x, ct: np.cos(x) * ct),
        vjp_shape_dtypes=single_result_shape(0),
        vmap_method="native",
        platforms=BOTH,
        name="nsin",
    )
    calls = cuda_calls(jax.jacfwd(op), jnp.linspace(0.1, 1.0, 4))
    jvp = [c for c in calls if c[1] == "nsin (jvp)"]
    assert jvp and jvp[0][2] == "tensor<4x4xf32>, tensor<4x4xf32>"  # primal laid out as tangent


def test_jaxbind_layer_lowers_for_cuda():
    def f(out, args, kwargs_dump):
        out[0][()] = args[0]

    op = jaxbind.get_linear_call(
        f, f, lambda x, **kw: ((x.shape, x.dtype),), lambda x, **kw: ((x.shape, x.dtype),)
    )
    calls = cuda_calls(jax.grad(lambda x: jnp.sum(op(x)[0] ** 2)), jnp.ones(3))
    assert len(calls) == 2


def test_one_lowering_for_both_platforms():
    op = xlabind.callback({"cpu": np.negative, "cuda": lambda x: x}, lambda x: x, name="split")
    text = jax.jit(op).trace(jnp.ones(2)).lower(lowering_platforms=("cpu", "cuda")).as_text()
    assert text.count("@xlabind_python_callback") == 2
    assert {key[0] for key in op.definition.implementation._entries.keys()} == {"cpu", "cuda"}
    np.testing.assert_array_equal(jax.jit(op)(jnp.ones(2)), [-1.0, -1.0])  # here: the CPU one


def test_a_cpu_only_function_in_a_cuda_computation_says_so():
    op = xlabind.callback(np.sin, lambda x: x, name="numpy_only")
    with pytest.raises(
        NotImplementedError,
        match=r"'numpy_only' has no CUDA implementation .*"
        r"platforms=\('cpu', 'cuda'\)",
    ):
        cuda_calls(op, jnp.ones(2))


def test_packed_dtypes_are_refused_on_cuda():
    op = xlabind.callback(lambda x: x, lambda x: x, platforms=BOTH, name="packed")
    with pytest.raises(
        TypeError,
        match=r"packed: argument 0 has dtype int4, which CUDA callbacks "
        r"cannot receive",
    ):
        cuda_calls(op, jnp.ones(4, jnp.int4))


def test_unknown_platforms_are_refused():
    # 'tpu' is known since TPUs run Python functions (tests/tpu/test_tpu.py).
    with pytest.raises(ValueError, match=r"unknown platform 'metal'"):
        xlabind.callback(np.sin, lambda x: x, platforms=("metal",))


# -- CUDA graphs: command_buffer_compatible -------------------------------------
def test_a_capturable_callback_lowers_to_the_graph_target_and_a_plain_one_does_not():
    def double(x, *, out):
        del x, out

    captured = xlabind.callback(
        double,
        lambda x: x,
        in_place=True,
        platforms=BOTH,
        command_buffer_compatible=True,
        name="captured",
    )
    plain = xlabind.callback(double, lambda x: x, in_place=True, platforms=BOTH, name="plain")
    lowered = (
        jax.jit(lambda x: plain(captured(x))).trace(jnp.ones(3)).lower(lowering_platforms=("cuda",))
    )
    targets = [target for target, *_ in CALL.findall(lowered.as_text())]
    assert targets == [_extension.PYTHON_CALLBACK_GRAPH_TARGET, _extension.PYTHON_CALLBACK_TARGET]
    cpu = jax.jit(captured).trace(jnp.ones(3)).lower(lowering_platforms=("cpu",)).as_text()
    assert [target for target, *_ in CALL.findall(cpu)] == [_extension.PYTHON_CALLBACK_TARGET]


def test_only_the_graph_target_has_the_command_buffer_trait():
    targets = _xlabind.callback_registrations()["CUDA"]["targets"]
    traits = {
        name: _extension.handler_metadata(stages["execute"])["traits"]
        for name, stages in targets.items()
    }
    assert traits == {
        _extension.PYTHON_CALLBACK_TARGET: 0,
        _extension.PYTHON_CALLBACK_STATUS_TARGET: 0,
        _extension.PYTHON_CALLBACK_GRAPH_TARGET: 1,
    }
    assert (
        _extension.PYTHON_CALLBACK_GRAPH_TARGET
        not in (_xlabind.callback_registrations()["cpu"]["targets"])
    )


@pytest.mark.parametrize(
    "options, error",
    [
        (
            dict(in_place=False),
            r"f: command_buffer_compatible=True needs in_place=True: a function "
            r"that returns its results allocates them",
        ),
        (dict(in_place=True, synchronize=True), r"cannot be combined with synchronize=True"),
        (
            dict(in_place=True, platforms=("cpu",)),
            r"is for CUDA functions \(CUDA graphs\); this one "
            r"runs on cpu only",
        ),
    ],
)
def test_what_a_graph_cannot_replay_is_refused_when_binding(options, error):
    options = {"platforms": BOTH, **options}
    with pytest.raises(ValueError, match=error):
        xlabind.callback(
            lambda x, *, out=None: None,
            lambda x: x,
            name="f",
            command_buffer_compatible=True,
            **options,
        )


def test_a_native_target_declares_its_trait_itself():
    with pytest.raises(
        ValueError,
        match=r"a native handler declares it in its stages "
        r"\(xlabind_handler\(\.\.\., command_buffer = True\) in its Bazel table\)",
    ):
        xlabind.callback(
            xlabind.ffi_target(_extension.NOOP_TARGET), lambda x: x, command_buffer_compatible=True
        )


def test_a_failure_during_a_capture_says_what_a_capture_allows(monkeypatch):
    from xlabind._runtime import python_on_cuda

    monkeypatch.setattr(python_on_cuda, "_cupy_module", None)
    monkeypatch.setattr(python_on_cuda, "_cupy_checked", True)
    monkeypatch.setattr(_extension, "cuda_current_call", lambda: (0x7000, 0))

    def reads_on_the_host(x, *, out):
        raise RuntimeError("cudaErrorStreamCaptureUnsupported")

    run = python_on_cuda.in_place_function(
        reads_on_the_host, False, capturable=True, name="reads_on_the_host"
    )
    for capturing in (True, False):
        monkeypatch.setattr(
            _extension, "cuda_call_is_capturing", lambda capturing=capturing: capturing
        )
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            with pytest.raises(RuntimeError) as raised:
                run(None, out=None)
        notes = getattr(raised.value, "__notes__", [])
        assert (python_on_cuda.CAPTURE_NOTE in notes) == capturing
        # Also a warning: XLA may report an invalidated capture in place of the
        # call's own error.
        messages = [str(w.message) for w in warned if w.category is RuntimeWarning]
        if capturing:
            assert len(messages) == 1 and messages[0].startswith(
                "xlabind: reads_on_the_host failed while XLA captured it into a CUDA graph "
                "(RuntimeError: cudaErrorStreamCaptureUnsupported); XLA may report this only "
                "as CUDA_ERROR_STREAM_CAPTURE_INVALIDATED."
            ), messages
        else:
            assert messages == []
    assert "write into `out` with out=" in python_on_cuda.CAPTURE_NOTE
