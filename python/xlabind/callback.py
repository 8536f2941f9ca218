"""`xlabind.callback`: a Python function on XLA's buffers, as a JAX operation
with jit and vmap (no derivatives: see linear.py, multilinear.py, nonlinear.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from xlabind._primitive.definition import BoundFunction, ResultSpec
from xlabind._primitive.factors import Rule
from xlabind._runtime.make_definition import Function, make_definition


def callback(
    fn: Function,
    result_shape_dtypes: ResultSpec | Callable[..., ResultSpec],
    *,
    in_place: bool = False,
    vmap_method: str = "sequential",
    platforms: Sequence[str] = ("cpu",),
    sharding_rule: Rule | None = None,
    synchronize: bool = False,
    input_output_aliases: Mapping[int, int] | None = None,
    effect: str | None = None,
    stop_all_devices: bool = True,
    name: str | None = None,
    command_buffer_compatible: bool = False,
) -> BoundFunction:
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
      in_place: Whether ``fn`` writes its results into ``out=`` and returns
        ``None``: no copy (:param:`in_place`).
      vmap_method: How a ``jax.vmap`` batch reaches ``fn``: one of
        :data:`~xlabind.VMAP_METHODS` (:param:`vmap_method`).
      platforms: The platforms a plain ``fn`` runs on; ``("cpu",)`` by default
        (:param:`platforms`).
      sharding_rule: How a call may be split across devices under a sharded
        ``jax.jit`` (:param:`sharding_rule`).
      synchronize: CUDA: wait for XLA's stream before each call and for the
        device after it (:param:`synchronize`).
      input_output_aliases: ``{argument index: result index}``: results written
        into arguments' buffers (:param:`input_output_aliases`).
      effect: ``None`` (pure), ``"unordered"`` or ``"ordered"``
        (:param:`effect`).
      stop_all_devices: Whether a failure in one device's call stops every
        device of a sharded program, as it does by default; ``False`` spares
        the calls made once per device the small collective that takes
        (:param:`stop_all_devices`).
      name: The name error messages use; ``fn.__qualname__`` by default
        (:param:`name`).
      command_buffer_compatible: CUDA, in place: XLA may capture the call
        into a CUDA graph and replay what it launched without calling ``fn``
        again (:param:`command_buffer_compatible`).

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
    return BoundFunction(
        make_definition(
            fn,
            result_shape_dtypes,
            in_place=in_place,
            platforms=platforms,
            vmap_method=vmap_method,
            name=name,
            sharding_rule=sharding_rule,
            synchronize=synchronize,
            input_output_aliases=input_output_aliases,
            effect=effect,
            command_buffer_compatible=command_buffer_compatible,
            stop_all_devices=stop_all_devices,
        )
    )
