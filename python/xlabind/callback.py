"""`xlabind.callback`: a Python function on XLA's buffers, as a JAX operation
with jit and vmap (no derivatives: see linear.py, multilinear.py, nonlinear.py).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from xlabind._primitive.definition import BoundFunction, ResultSpec
from xlabind._primitive.factors import Rule
from xlabind._runtime.binding import Function, make_definition

def callback(fn: Function, result_shape_dtypes: ResultSpec | Callable[..., ResultSpec], *,
             in_place: bool = False, vmap_method: str = "sequential",
             platforms: Sequence[str] = ("cpu",),
             sharding_rule: Rule | None = None, synchronize: bool = False,
             input_output_aliases: Mapping[int, int] | None = None,
             effect: str | None = None, name: str | None = None) -> BoundFunction:
    """Binds a Python function so that JAX can call it, eagerly, under ``jax.jit``
    and ``jax.vmap``. It has no derivatives: see :func:`xlabind.linear`,
    :func:`xlabind.multilinear` and :func:`xlabind.nonlinear` for those.

    Inside a compiled computation XLA hands the function its buffers without
    copying, operands read-only and results writable: on the CPU as NumPy
    arrays, on a CUDA device as :class:`xlabind.cuda.DeviceArray` objects
    (``__cuda_array_interface__`` and DLPack, for CuPy, PyTorch, Numba),
    with XLA's stream as CuPy's (and an imported PyTorch's) current stream.

    Args:
      fn: The function. ``fn(*arrays, **static_kwargs)`` returns the results
        (a pytree matching ``result_shape_dtypes``), which xlabind checks and
        copies into XLA's buffers. With ``in_place=True`` it is called as
        ``fn(*arrays, out=results, **static_kwargs)``, writes into ``out``
        (the same pytree, of writable arrays) and returns ``None``: no copy.
        It must not keep any of the arrays after it returns. A mapping
        ``{platform: function}`` gives one function per platform; a native
        FFI target (:func:`xlabind.ffi_target`) runs without Python.
      result_shape_dtypes: The results' shapes and dtypes: a pytree of
        ``jax.ShapeDtypeStruct`` (anything with ``.shape`` and ``.dtype``), or
        a function ``(*input_structs, **static_kwargs) -> pytree`` computing it
        from the inputs' shapes and dtypes.
      in_place: Whether ``fn`` writes its results into ``out`` itself.
      vmap_method: One of :data:`VMAP_METHODS`; ``"sequential"`` by default.
      platforms: The platforms a plain function ``fn`` runs on: ``("cpu",)``
        by default; ``("cpu", "cuda")`` for one function that works on both
        (e.g. written against the array API). Names in any case; one name
        alone works too.
      sharding_rule: How the function may be split across devices under a
        sharded ``jax.jit``: an einsum-like string naming each dimension of
        each operand and result, e.g. ``"b n, b -> b n"``. Dimensions named
        by a factor that every result has are computed independently, so
        each device calls ``fn`` once on its shard of them; the others stay
        whole. An :class:`xlabind.ShardingRule` also declares *summed*
        factors (a contraction: ``"i n, n j -> i j"`` summed over ``n``),
        split too, with the devices' partial results added up. A function of
        the input shapes (and static kwargs) returning either also works.
        Without a rule, the function runs once per program, on one device.
      synchronize: CUDA only: wait for XLA's stream before each call and for
        the whole device after it, for functions that launch work on streams
        of their own (not needed for CuPy or PyTorch on the current stream).
      input_output_aliases: ``{argument index: result index}``, as in
        ``jax.ffi.ffi_call``: each such result may be written into that
        argument's buffer, with no copy where the argument is not used again
        (e.g. donated: ``jax.jit(..., donate_argnums=...)``); otherwise XLA
        copies the argument first. An aliased argument and result have one
        shape and dtype; a result is aliased to one argument at most. With
        ``in_place=True`` the result's ``out`` array *is* the argument's
        memory: once the function writes ``out``, reading the argument shows
        the new values. Under vmap a pair stays aliased while the batched
        argument and result still have one shape (``"sequential"``: always;
        ``"expand_dims"``: where the argument is batched; ``"native"``: where
        their batch axes are in the same places); otherwise it is dropped,
        never an error. Transposes, VJPs and JVP functions are other calls,
        not aliased (a linear function's JVP is the function itself on the
        tangents, aliases included); a per-device call with a sharding rule
        is where the argument and result are split alike.
      effect: What the function does besides computing its results, one of
        :data:`EFFECTS`: ``None`` (pure, the default), ``"unordered"`` (it
        runs on every execution even if its results are unused) or
        ``"ordered"`` (also in program order, like
        ``jax.experimental.io_callback(..., ordered=True)``). An effectful
        function has no derivatives (they would run the effect again); an
        ordered one also refuses ``jax.vmap`` and sharding rules. Like jax's
        own callbacks, effectful functions cannot run inside
        ``jax.checkpoint``.
      name: The name used in error messages; defaults to ``fn.__qualname__``.

    Returns:
      A :class:`BoundFunction`. Call it with arrays as positional arguments and
      static Python values (hashable) as keyword arguments.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np, xlabind
      >>> cumsum = xlabind.callback(np.cumsum, lambda x: x)
      >>> jax.jit(cumsum)(jnp.arange(4.0))
      Array([0., 1., 3., 6.], dtype=float32)

      Writing into the argument's buffer (donated, so nothing is copied), and
      a call that runs although its result is unused:

      >>> def double(x, out):
      ...     out[...] = 2 * x
      >>> twice = xlabind.callback(double, lambda x: x, in_place=True,
      ...                          input_output_aliases={0: 0})
      >>> jax.jit(twice, donate_argnums=0)(jnp.arange(3.0))
      Array([0., 2., 4.], dtype=float32)
      >>> seen = []
      >>> log = xlabind.callback(lambda x: (seen.append(float(x.sum())), x)[1], lambda x: x,
      ...                        effect="ordered")
      >>> _ = jax.jit(lambda x: (log(x), x + 1)[1])(jnp.ones(3)); seen
      [3.0]
    """
    return BoundFunction(make_definition(
        fn, result_shape_dtypes, in_place=in_place, platforms=platforms, vmap_method=vmap_method,
        name=name, sharding_rule=sharding_rule, synchronize=synchronize,
        input_output_aliases=input_output_aliases, effect=effect))
