"""The host-call cases: what a call through xlabind costs next to a native FFI
call and jax's own callbacks (the main table and its ratio lines)."""

from __future__ import annotations

from harness import Case, jax, jnp, like, np, vector, xlabind, xlabind_testing

try:
    from jax.experimental.buffer_callback import buffer_callback
except ImportError:  # older jax: the case is reported as missing
    buffer_callback = None

SMALL = 1
LARGE = 10**6
BATCH = 64
VECTOR = 1000


# -- the cases ---------------------------------------------------------------
def jit_floor(n: int) -> Case:
    return Case("jit_copy", "jax.jit(jnp.copy) (dispatch floor)", jax.jit(jnp.copy), vector(n))


def native_noop(n: int) -> Case:
    def f(x):
        # The handler writes nothing: the result is whatever XLA allocated.
        return jax.ffi.ffi_call(xlabind_testing.NOOP_TARGET, like(x))(x)

    return Case(f"native_noop_{n}", "native no-op (jax.ffi.ffi_call)", jax.jit(f), vector(n))


def pure_callback_noop(n: int) -> Case:
    def f(x):
        return jax.pure_callback(lambda a: np.asarray(a), like(x), x)

    x = vector(n)
    return Case(f"pure_callback_{n}", "jax.pure_callback no-op", jax.jit(f), x, np.asarray(x))


def buffer_callback_noop(n: int) -> Case | None:
    if buffer_callback is None:
        return None

    def f(x):
        # Like xlabind's in-place no-op: the callback leaves `out` unwritten.
        return buffer_callback(lambda ctx, out, a: None, like(x))(x)

    return Case(f"buffer_callback_{n}", "jax buffer_callback no-op", jax.jit(f), vector(n))


def noop_into(x, *, out):
    del x, out


def xlabind_in_place(n: int) -> Case:
    op = xlabind.callback(noop_into, lambda x: x, in_place=True)
    return Case(
        f"xlabind_in_place_{n}",
        "xlabind.callback no-op, in place (unchecked)",
        jax.jit(op),
        vector(n),
        checks_unwritten=False,
    )


def xlabind_returning(n: int) -> Case:
    op = xlabind.callback(lambda x: x, lambda x: x)
    x = vector(n)
    return Case(
        f"xlabind_returning_{n}",
        "xlabind.callback no-op, returning (1 copy)",
        jax.jit(op),
        x,
        np.asarray(x),
    )


def xlabind_linear(n: int) -> Case:
    op = xlabind.linear(noop_into, noop_into, lambda x: x, in_place=True)
    return Case(
        f"xlabind_linear_{n}",
        "xlabind.linear no-op, in place (primal, unchecked)",
        jax.jit(op),
        vector(n),
        checks_unwritten=False,
    )


def _copy_into(x, *, out):
    out[...] = x


def xlabind_in_place_copy(n: int, checked: bool = True) -> Case:
    # The jaxbind drop-in's like-for-like baseline: it must write its result.
    # Unchecked: what the unwritten-result check costs.
    op = xlabind.callback(_copy_into, lambda x: x, in_place=True)
    x = vector(n)
    suffix = "" if checked else "_unchecked"
    return Case(
        f"xlabind_in_place_copy{suffix}_{n}",
        "xlabind.callback in place, out[...] = x" + ("" if checked else " (unchecked)"),
        jax.jit(op),
        x,
        np.asarray(x),
        checks_unwritten=checked,
    )


def native_copy(n: int) -> Case:
    def f(x):
        return jax.ffi.ffi_call(xlabind_testing.COPY_TARGET, like(x))(x)

    x = vector(n)
    return Case(
        f"native_copy_{n}", "native copy (memcpy, jax.ffi.ffi_call)", jax.jit(f), x, np.asarray(x)
    )


def native_copy_and_write(n: int) -> Case:
    """The native copy, then the in-place callback's own NumPy write on arrays
    of the same size, in one timed call: what the in-place copy would cost if
    calling Python from XLA were free."""
    native = jax.jit(lambda x: jax.ffi.ffi_call(xlabind_testing.COPY_TARGET, like(x))(x))
    x = vector(n)
    source, target = np.asarray(x).copy(), np.empty(n)

    def f(x):
        result = native(x)
        _copy_into(source, out=target)
        return result

    return Case(
        f"native_copy_and_write_{n}", "native copy, then the same NumPy write", f, x, np.asarray(x)
    )


def _jaxbind_copy(out, args, kwargs_dump):
    del kwargs_dump
    out[0][...] = args[0]  # jaxbind callbacks must write their results (one element here)


def jaxbind_noop(n: int) -> Case:
    from xlabind import jaxbind

    def abstract(x):
        return ((x.shape, x.dtype),)

    op = jaxbind.get_linear_call(_jaxbind_copy, _jaxbind_copy, abstract, abstract)
    x = vector(n)
    return Case(
        f"jaxbind_{n}",
        "xlabind.jaxbind get_linear_call, out[0][...] = args[0]",
        jax.jit(lambda x: op(x)[0]),
        x,
        np.asarray(x),
    )


def _sin_native(x, *, out, batch_axes):
    del batch_axes  # elementwise: the layout of x is the layout of out
    np.sin(x, out=out)


def _sin_native_spec(x, *, batch_axes):
    if batch_axes is None:
        return x
    # The result keeps the operand's layout, so its newest batch axis too.
    return xlabind.BatchedResult(x.shape, x.dtype, batch_axes[0][-1])


def _sin_into(x, *, out):
    np.sin(x, out=out)


def _batch() -> jax.Array:
    return jnp.asarray(np.random.default_rng(BATCH).random((BATCH, VECTOR)))


def vmap_native() -> Case:
    op = xlabind.callback(_sin_native, _sin_native_spec, in_place=True, vmap_method="native")
    x = _batch()
    return Case(
        "vmap_native",
        "vmap(np.sin), vmap_method='native'",
        jax.jit(jax.vmap(op)),
        x,
        np.sin(np.asarray(x)),
    )


def vmap_sequential() -> Case:
    op = xlabind.callback(_sin_into, lambda x: x, in_place=True, vmap_method="sequential")
    x = _batch()
    return Case(
        "vmap_sequential",
        "vmap(np.sin), vmap_method='sequential'",
        jax.jit(jax.vmap(op)),
        x,
        np.sin(np.asarray(x)),
    )


def eager_map_coordinates(who: str) -> Case:
    """One eager call (no jax.jit around it) on a few points: what dispatch costs
    when xlabind.ops are called like NumPy functions."""
    from jax.scipy.ndimage import map_coordinates as jax_map

    from xlabind.ops import map_coordinates as ours

    grid = jnp.asarray(np.sin(np.arange(64.0)))
    f = ours if who == "xlabind" else jax_map
    x = jnp.asarray(np.linspace(0.5, 60.5, 8))
    return Case(
        f"eager_map_coordinates_{who}",
        f"eager map_coordinates, 8 points, {who}",
        lambda c: f(grid, [c], 1, "mirror"),
        x,
        np.asarray(jax_map(grid, [x], 1, "mirror")),
    )


def all_cases() -> tuple[list[Case], list[str]]:
    """The cases in table order, and notes on those this jax cannot run."""
    makers = [
        lambda: jit_floor(SMALL),
        lambda: native_noop(SMALL),
        lambda: native_noop(LARGE),
        lambda: pure_callback_noop(SMALL),
        lambda: pure_callback_noop(LARGE),
        lambda: buffer_callback_noop(SMALL),
        lambda: buffer_callback_noop(LARGE),
        lambda: xlabind_in_place(SMALL),
        lambda: xlabind_in_place(LARGE),
        lambda: xlabind_returning(LARGE),
        lambda: xlabind_linear(SMALL),
        lambda: native_copy(SMALL),
        lambda: native_copy(LARGE),
        lambda: native_copy_and_write(SMALL),
        lambda: xlabind_in_place_copy(SMALL),
        lambda: xlabind_in_place_copy(SMALL, checked=False),
        lambda: xlabind_in_place_copy(LARGE),
        lambda: xlabind_in_place_copy(LARGE, checked=False),
        lambda: jaxbind_noop(SMALL),
        vmap_native,
        vmap_sequential,
        lambda: eager_map_coordinates("xlabind"),
        lambda: eager_map_coordinates("jax"),
    ]
    cases = [c for c in (make() for make in makers) if c is not None]
    notes = (
        []
        if buffer_callback is not None
        else [
            f"jax {jax.__version__} has no jax.experimental.buffer_callback: its cases are skipped"
        ]
    )
    return cases, notes
