"""CUDA callbacks on a real GPU: CuPy and DLPack (PyTorch) code on XLA's own
buffers and stream, every transformation, the escape and error rules of the
CPU. Skipped without a CUDA device; tools/device_check.py runs this file on the
GPU machine."""

import gc
import pathlib

import doc_blocks
import docstring_examples
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gpu_devices import has_gpu, on_gpu, requires_gpu

import xlabind
import xlabind.cuda

pytestmark = requires_gpu

cp = pytest.importorskip("cupy") if has_gpu() else None
GPU = ("cuda",)


def test_cupy_in_place_and_returning():
    def double_in_place(x, *, out):
        cp.multiply(cp.asarray(x), 2, out=cp.asarray(out))

    x = on_gpu(jnp.arange(1000, dtype=jnp.float32))
    in_place = xlabind.callback(double_in_place, lambda x: x, in_place=True, platforms=GPU)
    returning = xlabind.callback(lambda x: cp.asarray(x) * 3, lambda x: x, platforms=GPU)
    np.testing.assert_array_equal(jax.jit(in_place)(x), 2 * np.arange(1000))
    np.testing.assert_array_equal(jax.jit(returning)(x), 3 * np.arange(1000))
    np.testing.assert_array_equal(in_place(x), 2 * np.arange(1000))  # eagerly too


def test_device_arrays_are_zero_copy_read_only_views_on_xlas_stream():
    seen = {}

    def look(x, *, out):
        seen.update(
            ptr=x.ptr,
            readonly=x.readonly,
            out_readonly=out.readonly,
            stream=x.stream,
            current=xlabind.cuda.current_stream(),
            cupy=cp.cuda.get_current_stream().ptr,
            device=xlabind.cuda.current_device(),
        )
        cp.asarray(out)[...] = cp.asarray(x)

    x = on_gpu(jnp.ones(16))
    jax.jit(xlabind.callback(look, lambda x: x, in_place=True, platforms=GPU))(x)
    assert seen["ptr"] == x.unsafe_buffer_pointer()
    assert seen["readonly"] and not seen["out_readonly"]
    assert seen["stream"] == seen["current"] == seen["cupy"] != 0
    assert seen["device"] == x.devices().pop().local_hardware_id


def test_dlpack_with_pytorch():
    torch = pytest.importorskip("torch")

    def add_one(x, *, out):
        torch.from_dlpack(out).copy_(torch.from_dlpack(x) + 1)

    op = xlabind.callback(add_one, lambda x: x, in_place=True, platforms=GPU)
    np.testing.assert_array_equal(jax.jit(op)(on_gpu(jnp.zeros(8))), np.ones(8))
    returning = xlabind.callback(lambda x: torch.from_dlpack(x) * 2, lambda x: x, platforms=GPU)
    np.testing.assert_array_equal(jax.jit(returning)(on_gpu(jnp.ones(8))), 2 * np.ones(8))


def test_one_function_per_platform():
    op = xlabind.callback({"cpu": np.sin, "cuda": lambda x: cp.sin(cp.asarray(x))}, lambda x: x)
    x = np.linspace(0, 1, 10, dtype=np.float32)
    np.testing.assert_allclose(jax.jit(op)(on_gpu(x)), np.sin(x), rtol=1e-6)
    cpu = jax.device_put(x, jax.devices("cpu")[0])
    np.testing.assert_allclose(jax.jit(op)(cpu), np.sin(x), rtol=1e-6)


def test_grad_of_a_linear_cupy_function_matches_the_cpu():
    A = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    A_gpu = cp.asarray(A)
    op = xlabind.linear(
        {"cpu": lambda x: A @ x, "cuda": lambda x: A_gpu @ cp.asarray(x)},
        {"cpu": lambda ct: A.T @ ct, "cuda": lambda ct: A_gpu.T @ cp.asarray(ct)},
        lambda x: jax.ShapeDtypeStruct((5,), x.dtype),
    )
    loss = jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(op(x)))))
    x = np.linspace(0, 1, 3, dtype=np.float32)
    on_cpu = loss(jax.device_put(x, jax.devices("cpu")[0]))
    on_cuda = loss(on_gpu(x))
    np.testing.assert_allclose(on_cuda, on_cpu, rtol=1e-5)
    np.testing.assert_allclose(on_cpu, A.T @ np.cos(A @ x), rtol=1e-5)


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_vmap_methods(method):
    op = xlabind.callback(
        lambda x: cp.sin(cp.asarray(x)), lambda x: x, vmap_method=method, platforms=GPU
    )
    xs = on_gpu(jnp.linspace(0, 1, 12, dtype=jnp.float32).reshape(3, 4))
    np.testing.assert_allclose(jax.jit(jax.vmap(op))(xs), np.sin(np.asarray(xs)), rtol=1e-6)


def test_hessian_of_a_nonlinear_cupy_function():
    def arr(x):
        return cp.asarray(x)

    cos_times = xlabind.nonlinear(
        lambda x, t: cp.cos(arr(x)) * arr(t),
        lambda x, t: x,
        jvp=lambda x, t, dx, dt: -cp.sin(arr(x)) * arr(t) * arr(dx) + cp.cos(arr(x)) * arr(dt),
        vjp=lambda x, t, ct: (-cp.sin(arr(x)) * arr(t) * arr(ct), cp.cos(arr(x)) * arr(ct)),
        platforms=GPU,
    )
    sin = xlabind.nonlinear(
        lambda x: cp.sin(arr(x)), lambda x: x, jvp=cos_times, vjp=cos_times, platforms=GPU
    )
    x = on_gpu(jnp.linspace(0.1, 1.0, 4, dtype=jnp.float32))
    np.testing.assert_allclose(
        jax.hessian(lambda x: sin(x).sum())(x),
        np.diag(-np.sin(np.asarray(x))),
        rtol=1e-5,
        atol=1e-6,
    )


def test_work_on_xlas_stream_is_ordered_with_xlas_own():
    # A long XLA computation feeds the callback; the callback's CuPy reduction
    # must see its finished result without any synchronisation of its own.
    op = xlabind.callback(
        lambda x: cp.asarray(x).sum(keepdims=True),
        lambda x: jax.ShapeDtypeStruct((1,), x.dtype),
        platforms=GPU,
    )

    @jax.jit
    def program(x):
        for _ in range(20):
            x = jnp.sin(x) + 1.0
        return op(x), jnp.sum(x, keepdims=True)

    got, want = program(on_gpu(jnp.ones(4_000_000, jnp.float32)))
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_synchronize_for_code_on_its_own_stream():
    def on_own_stream(x, *, out):
        with cp.cuda.Stream(non_blocking=True):
            cp.asarray(out)[...] = cp.asarray(x) * 2

    op = xlabind.callback(
        on_own_stream, lambda x: x, in_place=True, platforms=GPU, synchronize=True
    )
    x = on_gpu(jnp.arange(1_000_000, dtype=jnp.float32))
    np.testing.assert_array_equal(jax.jit(op)(x), 2 * np.arange(1_000_000, dtype=np.float32))


def test_results_are_checked():
    op = xlabind.callback(
        lambda x: cp.zeros(3, cp.float64), lambda x: x, platforms=GPU, name="wrong"
    )
    with pytest.raises(
        Exception,
        match=r"wrong: result 0 has dtype float64, expected a device "
        r"array of dtype float32 and shape \(4,\)",
    ):
        jax.jit(op)(on_gpu(jnp.ones(4, jnp.float32))).block_until_ready()
    host = xlabind.callback(
        lambda x: np.zeros(4, np.float32), lambda x: x, platforms=GPU, name="host"
    )
    with pytest.raises(
        Exception,
        match=r"host: result 0 is a ndarray on DLPack device type 1, "
        r"not a CUDA device array",
    ):
        jax.jit(host)(on_gpu(jnp.ones(4, jnp.float32))).block_until_ready()


def test_exceptions_reach_the_caller_and_the_next_call_works():
    state = {"fail": True}

    def sometimes(x):
        if state["fail"]:
            raise ValueError("gpu says no")
        return cp.asarray(x) + 1

    op = jax.jit(xlabind.callback(sometimes, lambda x: x, platforms=GPU))
    with pytest.raises(Exception, match=r"ValueError: gpu says no"):
        op(on_gpu(jnp.zeros(2))).block_until_ready()
    state["fail"] = False
    np.testing.assert_array_equal(op(on_gpu(jnp.zeros(2))), [1.0, 1.0])


def test_a_kept_device_array_is_released():
    kept = []

    def keeps(x, *, out):
        kept.append(x)
        cp.asarray(out)[...] = cp.asarray(x)

    op = xlabind.callback(keeps, lambda x: x, in_place=True, platforms=GPU)
    with pytest.raises(Exception, match=r"kept a reference .* released the kept device arrays"):
        jax.jit(op)(on_gpu(jnp.ones(3))).block_until_ready()
    with pytest.raises(BufferError, match=r"kept past the call"):
        _ = kept[0].__cuda_array_interface__


DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def test_the_documentations_gpu_blocks():
    """Every page's blocks marked `gpu` (tests/support/doc_blocks.py), each
    page's in order in one namespace, as a reader runs them."""
    pages = [
        page
        for page in sorted(DOCS.rglob("*.md"))
        if any(block.place == "gpu" for block in doc_blocks.blocks(page))
    ]
    assert DOCS / "guides" / "gpu.md" in pages
    for page in pages:
        doc_blocks.run(page, place="gpu")


@pytest.mark.parametrize("name", ["xlabind.cuda", "xlabind.cuda.DeviceArray"])
def test_docstring_examples_on_the_gpu(name):
    """The docstring lines marked `# doctest: +GPU`, which the CPU run leaves out."""
    assert docstring_examples.gpu_examples(name) > 0
    result = docstring_examples.run(name, gpu=True)
    assert result.failed == 0


# -- lifetime on the GPU (tests/runtime/test_lifetime.py's twins) ------------------------
def _doubled_with_cupy(x):
    return cp.asarray(x) * 2


def test_a_live_function_runs_under_asynchronous_dispatch_on_the_gpu():
    op = xlabind.callback(_doubled_with_cupy, lambda x: x, platforms=GPU)
    x = on_gpu(jnp.full((512, 512), 0.001))
    heavy = lambda x: jnp.tanh(x @ x) @ x
    y = jax.jit(lambda x: op(heavy(x)) + 1)(x)  # the jitted lambda is dropped at once
    gc.collect()
    np.testing.assert_allclose(np.asarray(y), 2 * np.asarray(jax.jit(heavy)(x)) + 1, rtol=1e-5)


def test_a_function_made_inside_the_traced_function_runs_on_the_gpu():
    f = jax.jit(lambda x: xlabind.callback(_doubled_with_cupy, lambda x: x, platforms=GPU)(x) + 1)
    traced = f.trace(on_gpu(jnp.ones(4)))
    del f
    gc.collect()
    compiled = traced.lower().compile()
    del traced
    gc.collect()
    np.testing.assert_array_equal(np.asarray(compiled(on_gpu(jnp.ones(4)))), 3.0)


def test_ordered_calls_keep_program_order_against_data_dependencies():
    # The twin of tests/transforms/test_effects.py's CPU test: XLA:GPU may run a call on a
    # parameter before one on a computed operand; the token orders them.
    seen = []

    def log(x, *, tag):
        seen.append(tag)
        return cp.asarray(x) + 0

    ordered = xlabind.callback(log, lambda x, **_: x, effect="ordered", platforms=GPU)

    def program(x, y):
        ordered(jnp.sin(y) @ jnp.cos(y).T, tag="first")
        ordered(x, tag="second")
        ordered(y.sum(), tag="third")
        return x

    for _ in range(3):
        jax.jit(program)(on_gpu(jnp.ones(2)), on_gpu(jnp.ones((256, 256))))
    jax.effects_barrier()
    assert seen == ["first", "second", "third"] * 3


def test_an_unwritten_in_place_result_is_not_checked_on_cuda():
    # Documented: a check would copy to the host and synchronize every call.
    op = xlabind.callback(lambda x, *, out: None, lambda x: x, in_place=True, platforms=GPU)
    assert jax.jit(op)(on_gpu(jnp.ones(4))).shape == (4,)
