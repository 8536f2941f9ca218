"""What a bound function is: its name, its results' shapes, how it behaves
under vmap, and (for the differentiable kinds) how it is linear.

Two objects: the :class:`Definition`, which the `xlabind_call` primitive's
parameter holds (so every traced program that calls the function owns it),
and the :class:`BoundFunction` users hold and call, a thin handle on it.
How it runs is a separate object again, its *implementation*
(_runtime/python_functions.py: a Python function per platform;
_lowering/rule.py asks it for the custom call). Calling a :class:`BoundFunction` binds the
`xlabind_call` primitive (primitive.py).
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from xlabind import _jax_internals as internals
from xlabind._platforms import Platform
from xlabind._primitive import signatures as _signatures
from xlabind._primitive.factors import Rule, parse_rule
from xlabind._primitive.primitive import BatchAxes, Call, bind

#: The shapes and dtypes of a function's results: a pytree (a tuple, list or
#: dict, nested too) of objects with ``.shape`` and ``.dtype``, such as
#: ``jax.ShapeDtypeStruct`` or the arguments themselves.
ResultSpec = Any

#: How a bound function behaves under ``jax.vmap``.
#:
#: * ``"sequential"``: one call per batch element (``lax.map``); always works.
#: * ``"expand_dims"``: one call; batched arguments get their batch axis in
#:   front, unbatched ones a new axis of size 1; results must carry the batch
#:   axis in front.
#: * ``"broadcast_all"``: like ``"expand_dims"`` but every argument is
#:   broadcast to the full batch size.
#: * ``"native"``: one call on the arrays as vmap laid them out; the function
#:   and the result-shape function receive ``batch_axes`` (docs/guides/tutorial.md) and the
#:   result-shape function reports each result's batch axis with
#:   :class:`BatchedResult`.
VMAP_METHODS = ("sequential", "expand_dims", "broadcast_all", "native")

#: A bound function's ``effect``: what it does besides computing its results.
#:
#: * ``None`` (the default): nothing; a call whose results are unused may be
#:   removed, and calls may run in any order the data allows.
#: * ``"unordered"``: a side effect (it writes a file, appends to a list): every
#:   call runs, once per execution, even if its results are unused; calls run
#:   in any order the data allows. Allowed under vmap; not differentiable.
#: * ``"ordered"``: as ``"unordered"``, and the calls run in program order, also
#:   across consecutive jitted calls (like ``jax.experimental.io_callback(...,
#:   ordered=True)``), through jax's ordering token. Not under vmap, not
#:   differentiable, no sharding rule; in a program over several devices it
#:   runs once, on the first. A native target takes the token
#:   (``ffi_target(name, takes_token=True)``).
EFFECTS = (None, "unordered", "ordered")


class BatchedResult(NamedTuple):
    """A result's shape and dtype plus the position of its newest batch axis.

    Returned (as leaves) by the result-shape function of a ``vmap_method="native"``
    bound function when it is called with ``batch_axes`` other than ``None``:
    ``shape`` includes every batch axis, and removing ``batch_axis`` from it
    must give the result's shape one vmap level down.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np, xlabind
      >>> def shape(x, *, batch_axes):
      ...     if batch_axes is None:
      ...         return jax.ShapeDtypeStruct(x.shape, x.dtype)
      ...     return xlabind.BatchedResult(x.shape, x.dtype, batch_axes[0][-1])
      >>> def sin(x, *, batch_axes):  # elementwise: any layout works as it comes
      ...     return np.sin(x)
      >>> op = xlabind.callback(sin, shape, vmap_method="native")
      >>> jax.vmap(op, in_axes=1)(jnp.zeros((3, 2))).shape
      (2, 3)
    """

    shape: tuple[int, ...]
    dtype: Any
    batch_axis: int | None = None


class _SameWhenCopied:
    """copy.copy and copy.deepcopy give the object itself: immutable to its
    users, and holding what cannot be copied (locks, compiled executables), as
    a jitted function's compiled programs are shared by its copies."""

    __slots__ = ()

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


class Implementation(Protocol):
    """How a bound function runs, as the primitive's rules ask it: Python
    functions by platform (_runtime/python_functions.py) or native FFI targets
    (_runtime/native_targets.py). The runtime layer implements it; this layer
    only calls it."""

    @property
    def exportable(self) -> bool:
        """Whether jax.export can serialize a program that calls it."""
        ...

    @property
    def in_place(self) -> bool:
        """Whether its functions write their results into an ``out`` argument."""
        ...

    @property
    def replicable(self) -> bool:
        """Whether every device may run it on its own copy of arrays none splits."""
        ...

    @property
    def platforms(self) -> tuple[str, ...]:
        """The platforms it has an implementation for."""
        ...

    @property
    def synchronize(self) -> bool:
        """CUDA: whether each call waits for XLA's stream and then for the device."""
        ...

    @property
    def primary_function(self) -> Any:
        """The CPU function (else the first): a Python function, or an
        FfiTarget (a runtime type this layer does not import)."""
        ...

    def export_error(self, name: str) -> Exception:
        """What jax.export of a program calling the function `name` raises."""
        ...

    def check_dtype(self, name: str, what: str, dtype: Any) -> None:
        """Raises a TypeError naming `what` unless it can take `dtype`."""
        ...

    @property
    def lowering_cacheable(self) -> bool:
        """Whether alike calls may share one lowering on every platform (which
        primitive its calls bind: primitive.py)."""
        ...

    def placed_on(self, platform: Platform) -> bool:
        """Whether a sharding rule may place its call per device on `platform`."""
        ...

    def emitter(
        self, platform: Platform, op: Definition, call: Call
    ) -> tuple[Callable[..., Any], Any]:
        """(how to emit the call into a lowering on `platform`'s record, what the
        program must keep alive)."""
        ...


class Definition(_SameWhenCopied):
    """What a bound function is: everything the `xlabind_call` primitive's rules
    need. Every traced program that calls the function holds its definition
    (strongly), so a program can be lowered, transformed and compiled after the
    user dropped the :class:`BoundFunction` (an op made inside a traced
    function is the everyday case); nothing in it refers back to the
    BoundFunction, so jax's caches, which key on the BoundFunction weakly,
    never keep it alive."""

    def __init__(
        self,
        implementation: Implementation,
        result_shape_dtypes: ResultSpec | Callable[..., ResultSpec] | None,
        *,
        name: str,
        vmap_method: str = "sequential",
        nondiff_argnums: Sequence[int] = (),
        rules: Any = None,
        aligned_pairs: Sequence[tuple[int, int]] = (),
        sharding_rule: Rule | None = None,
        input_output_aliases: Mapping[int, int] | None = None,
        effect: str | None = None,
        stop_all_devices: bool = True,
    ):
        if vmap_method not in VMAP_METHODS:
            raise ValueError(
                f"xlabind: vmap_method must be one of {VMAP_METHODS}, got {vmap_method!r}"
            )
        if effect not in EFFECTS:
            raise ValueError(f"{name}: effect must be one of {EFFECTS}, got {effect!r}")
        if not isinstance(stop_all_devices, (bool, np.bool_)):
            raise TypeError(
                f"{name}: stop_all_devices must be True or False, got {stop_all_devices!r}"
            )
        if effect == "ordered" and sharding_rule is not None:
            raise ValueError(
                f"{name}: effect='ordered' cannot have a sharding_rule: its calls "
                f"would run once per device, in no one order. Use "
                f"effect='unordered', or drop the sharding rule."
            )
        self.name = name
        #: How it runs (Implementation).
        self.implementation = implementation
        self.result_shape_dtypes = result_shape_dtypes
        self.vmap_method = vmap_method
        self.nondiff_argnums = tuple(sorted({int(i) for i in nondiff_argnums}))
        #: Derivative rules (derivatives.LinearityRules) or None: not differentiable.
        self.rules = rules
        #: (i, k): under native vmap operand k is laid out exactly like operand i
        #: (a JVP's tangent and its primal); the batching rule broadcasts to keep it so.
        self.aligned_pairs = tuple(aligned_pairs)
        #: Whether its transposes sum a cotangent over the batch axes where a
        #: linear argument has size 1 (broadcast against the other arguments'
        #: batch): then under vmap_method="expand_dims" an unbatched linear
        #: argument gets a size-1 axis, as the others do, rather than a copy
        #: per batch element.
        self.linear_broadcasts = False
        #: How its dimensions may be split across devices (factors.py), or None.
        self.sharding_rule = sharding_rule
        #: ((argument, result), ...): pairs XLA may give one buffer.
        self.input_output_aliases = _checked_aliases(name, input_output_aliases)
        #: One of EFFECTS.
        self.effect = effect
        #: Whether a failure in one device's call stops every device of a
        #: sharded program (_lowering/status_exchange.py): one small collective
        #: per call. Without it a failure ends its own device's run only.
        self.stop_all_devices = bool(stop_all_devices)
        #: The words its errors use for its API's parameters, where the API
        #: that bound it names them otherwise (xlabind.jaxbind: its
        #: "first_n_args_fixed" for nondiff_argnums); derived functions share them.
        self.terms: dict[str, str] = {}
        #: What the programs compiled for eager calls name it by (weakly).
        self.weak = WeakDefinition(self)
        self._eager: dict[Call, Callable] = {}
        self._arities: set[tuple[int, tuple[str, ...]]] = set()

    def __repr__(self) -> str:
        return self.name

    def get(self) -> Definition:
        """Itself: a Call names its function by the definition or by a WeakDefinition."""
        return self

    @property
    def fn(self) -> Callable:
        """The Python function (the CPU one when there are several)."""
        return self.implementation.primary_function

    @property
    def in_place(self) -> bool:
        return self.implementation.in_place

    @property
    def has_shape_function(self) -> bool:
        """Whether result shapes come from a function (not a fixed pytree, not None)."""
        return self.shape_function is not None

    @property
    def shape_function(self) -> Callable[..., ResultSpec] | None:
        """The function result shapes come from, or None (a fixed pytree, or none)."""
        spec = self.result_shape_dtypes
        return spec if callable(spec) and not hasattr(spec, "shape") else None

    # -- calling -----------------------------------------------------------
    def call(self, args: Sequence[Any], static_kwargs: dict) -> Any:
        """The results (a pytree) of calling the function on `args` (arrays) with
        `static_kwargs`: what calling the BoundFunction does."""
        kwargs = self.check_kwargs(static_kwargs)
        self._check_arity(len(args), tuple(static_kwargs))
        operands = [self._as_operand(i, x) for i, x in enumerate(args)]
        self._check_nondiff_argnums(len(operands))
        result_avals, out_tree, _ = self.result_avals(operands, kwargs)
        factors = out_factors = None
        summed: tuple[str, ...] = ()
        if self.sharding_rule is not None:
            factors, out_factors, summed = parse_rule(
                self.name, self.sharding_rule, operands, kwargs.as_dict(), result_avals
            )
        self._check_aliases(operands, result_avals)
        results = self.bind(
            operands,
            kwargs,
            out_tree,
            result_avals,
            factors=factors,
            out_factors=out_factors,
            summed=summed,
            aliases=self.input_output_aliases,
        )
        return jax.tree_util.tree_unflatten(out_tree, results)

    def _check_aliases(self, operands, result_avals) -> None:
        for i, j in self.input_output_aliases:
            if i >= len(operands):
                raise ValueError(
                    f"{self.name}: input_output_aliases maps argument {i} to result "
                    f"{j}, but the call has {len(operands)} arguments"
                )
            if j >= len(result_avals):
                raise ValueError(
                    f"{self.name}: input_output_aliases maps argument {i} to result "
                    f"{j}, but the function has {len(result_avals)} results"
                )
            x, r = operands[i], result_avals[j]
            if tuple(x.shape) != tuple(r.shape) or np.dtype(x.dtype) != np.dtype(r.dtype):
                raise ValueError(
                    f"{self.name}: input_output_aliases maps argument {i} to result {j}, which "
                    f"must have one shape and dtype: argument {i} has shape {tuple(x.shape)} "
                    f"and dtype {x.dtype}, result {j} has shape {tuple(r.shape)} and dtype "
                    f"{r.dtype}"
                )

    def bind(
        self,
        operands: Sequence[Any],
        kwargs,
        out_tree,
        result_avals,
        batch_axes: BatchAxes | None = None,
        out_batch_axes: BatchAxes | None = None,
        factors=None,
        out_factors=None,
        summed: tuple[str, ...] = (),
        whole: tuple[str, ...] = (),
        aligned: tuple[tuple[int, int], ...] = (),
        aliases: tuple[tuple[int, int], ...] = (),
    ) -> list:
        """Binds the primitive on flat operands; returns the flat results."""
        call = Call(
            self,
            kwargs,
            out_tree,
            tuple(result_avals),
            batch_axes,
            out_batch_axes,
            factors,
            out_factors,
            summed,
            whole,
            aligned,
            aliases=tuple(aliases),
        )
        return bind(call, operands)

    def check_kwargs(self, static_kwargs: dict):
        from xlabind._primitive.static_kwargs import StaticKwargs

        for reserved in (("out",) if self.in_place else ()) + (
            ("batch_axes",) if self.vmap_method == "native" else ()
        ):
            if reserved in static_kwargs:
                raise TypeError(
                    f"{self.name}: keyword argument '{reserved}' is reserved by "
                    f"xlabind for this function; rename it"
                )
        return StaticKwargs.from_call(self.name, static_kwargs)

    def _check_arity(self, num_args: int, keywords: tuple[str, ...]) -> None:
        """The function, and the result-shape function, can take this call's
        arguments (each signature checked once per arity and keywords)."""
        key = (num_args, keywords)
        if key in self._arities:
            return
        extra = ("batch_axes",) if self.vmap_method == "native" else ()
        if self.shape_function is not None:
            _signatures.check_takes(
                self.name,
                "result_shape_dtypes function",
                self.shape_function,
                num_args,
                keywords,
                extra,
            )
        own = extra + (("out",) if self.in_place else ())
        for fn in _signatures.callable_functions(getattr(self.implementation, "functions", None)):
            _signatures.check_takes(self.name, "function", fn, num_args, keywords, own)
        self._arities.add(key)

    def _as_operand(self, index: int, x: Any) -> jax.Array:
        if x is None or isinstance(x, dict):
            # jnp.asarray's own errors for these name neither the function nor
            # the argument ("entry not a 2- or 3- tuple").
            raise TypeError(
                f"{self.name}: argument {index} must be an array, got {type(x).__name__} "
                f"(positional arguments are arrays; static values are keyword arguments)"
            )
        try:
            array = jnp.asarray(x)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"{self.name}: argument {index} must be an array, got {type(x).__name__} ({e})"
            ) from None
        self.implementation.check_dtype(self.name, f"argument {index}", array.dtype)
        return array

    def _check_nondiff_argnums(self, n: int) -> None:
        bad = [i for i in self.nondiff_argnums if not 0 <= i < n]
        if bad:
            raise ValueError(
                f"{self.name}: nondiff_argnums {bad} out of range for a call with "
                f"{n} positional arguments"
            )

    def eager_executable(self, call: Call) -> Callable:
        """A jitted function of the operands for an eager call, cached here. Its
        program names this definition weakly: jax's caches hold that program for
        as long as the jitted function lives, which is as long as this
        definition, so a strong name there would keep both alive for good."""
        jitted = self._eager.get(call)
        if jitted is None:
            weak_call = call.replace(op=self.weak)
            jitted = jax.jit(lambda *operands: bind(weak_call, operands))
            self._eager[call] = jitted
        return jitted

    # -- result shapes -----------------------------------------------------
    def result_avals(self, operands, kwargs, batch_axes: BatchAxes | None = None):
        """(flat result avals, result tree, each result's batch axis or None)."""
        spec = self.result_shape_dtypes
        shape_function = self.shape_function
        if shape_function is not None:
            structs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in operands]
            extra = {"batch_axes": batch_axes} if self.vmap_method == "native" else {}
            try:
                spec = shape_function(*structs, **kwargs.as_dict(), **extra)
            except internals.InconclusiveDimensionOperation as error:
                if not self.implementation.exportable:  # what matters more
                    raise self.implementation.export_error(self.name) from None
                symbolic = [
                    tuple(s.shape)
                    for s in structs
                    if any(internals.is_symbolic_dim(d) for d in s.shape)
                ]
                raise TypeError(
                    f"{self.name}: its result_shape_dtypes function needs concrete sizes, but "
                    f"the arguments have symbolic shapes {symbolic} (jax.export with "
                    f"symbolic dimensions): {str(error).splitlines()[0]}. Compute the result "
                    f"shapes with arithmetic on the dimensions (x.shape[0] * 2), which "
                    f"symbolic dimensions support, or export with concrete shapes."
                ) from None
        leaves, out_tree = jax.tree_util.tree_flatten(
            spec, is_leaf=lambda x: isinstance(x, BatchedResult)
        )
        avals, axes = [], []
        for i, leaf in enumerate(leaves):
            if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
                raise TypeError(
                    f"{self.name}: result_shape_dtypes must be a pytree of objects "
                    f"with .shape and .dtype (e.g. jax.ShapeDtypeStruct); leaf {i} "
                    f"is {type(leaf).__name__}"
                )
            shape = _checked_shape(self.name, i, leaf.shape)
            # Like every jax array: float64 is float32 while jax_enable_x64 is off,
            # eagerly and under jit alike.
            dtype = jax.dtypes.canonicalize_dtype(np.dtype(leaf.dtype))
            self.implementation.check_dtype(self.name, f"result {i}", dtype)
            avals.append(jax.core.ShapedArray(shape, dtype))
            axes.append(getattr(leaf, "batch_axis", None))
        return tuple(avals), out_tree, tuple(axes)


def _checked_shape(name: str, index: int, shape) -> tuple:
    """Result `index`'s shape: ints, or jax.export's symbolic dimensions (the
    result's shape then follows from the arguments' at every size)."""
    dims = []
    try:
        for d in shape:
            dims.append(d if internals.is_symbolic_dim(d) else operator.index(d))
    except TypeError:
        raise TypeError(
            f"{name}: result {index} has shape {shape!r}; a shape is a tuple of "
            f"ints (or of jax.export's symbolic dimensions)"
        ) from None
    for d in dims:
        try:
            negative = d < 0
        except internals.InconclusiveDimensionOperation:
            negative = False  # e.g. n - 2: jax.export checks it for the sizes it is run with
        if negative:
            raise ValueError(
                f"{name}: result {index} has shape {tuple(dims)}, with a negative "
                f"dimension; check result_shape_dtypes"
            )
    return tuple(dims)


def _checked_aliases(name: str, aliases) -> tuple[tuple[int, int], ...]:
    """`input_output_aliases` ({argument: result}) as sorted pairs, checked
    for what needs no call: non-negative ints, each result aliased once."""
    if aliases is None:
        return ()
    if not isinstance(aliases, Mapping):
        raise TypeError(
            f"{name}: input_output_aliases must be a dict {{argument index: result "
            f"index}}, got {type(aliases).__name__}"
        )
    pairs = []
    for i, j in aliases.items():
        for what, k in (("argument", i), ("result", j)):
            if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 0:
                raise TypeError(
                    f"{name}: input_output_aliases maps {i!r} to {j!r}; the "
                    f"{what} index must be a non-negative int"
                )
        pairs.append((int(i), int(j)))
    results = [j for _, j in pairs]
    twice = sorted({j for j in results if results.count(j) > 1})
    if twice:
        raise ValueError(
            f"{name}: input_output_aliases aliases result {twice[0]} to several "
            f"arguments ({sorted(i for i, j in pairs if j == twice[0])}); a result "
            f"can share the buffer of one argument only"
        )
    return tuple(sorted(pairs))


class WeakDefinition(_SameWhenCopied):
    """Names a Definition without keeping it alive (for eager calls' programs)."""

    __slots__ = ("_ref", "name", "__weakref__")

    def __init__(self, definition: Definition):
        self._ref = weakref.ref(definition)
        self.name = definition.name

    def get(self) -> Definition:
        definition = self._ref()
        if definition is None:  # pragma: no cover - its program dies with it
            raise ReferenceError(f"xlabind: '{self.name}' is gone")
        return definition

    def __repr__(self) -> str:
        return self.name


class BoundFunction(_SameWhenCopied):
    """A function bound as a JAX operation. Create one with :func:`xlabind.callback`
    (no derivatives), :func:`xlabind.linear`, :func:`xlabind.multilinear` or
    :func:`xlabind.nonlinear`; call it with arrays as positional arguments and
    static Python values as keyword arguments.

    It may be created anywhere, also inside a function being traced or
    jitted, and dropped at any time: the programs that call it keep what they
    need (its :class:`Definition`) themselves.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np, xlabind
      >>> op = xlabind.callback(np.cos, lambda x: x, name="cos")
      >>> isinstance(op, xlabind.BoundFunction), op.name, op.vmap_method
      (True, 'cos', 'sequential')
      >>> float(jax.jit(op)(jnp.zeros(())))
      1.0
    """

    __slots__ = ("definition", "__weakref__")

    def __init__(self, definition: Definition):
        #: What it is (shapes, vmap method, derivative rules, how it runs).
        self.definition = definition

    def __call__(self, *args: Any, **static_kwargs: Any) -> Any:
        """Calls the function on `args` (arrays); keyword arguments are static."""
        return self.definition.call(args, static_kwargs)

    def __repr__(self) -> str:
        return f"xlabind.BoundFunction({self.definition.name})"

    @property
    def name(self) -> str:
        """The name used in error messages."""
        return self.definition.name

    @property
    def fn(self) -> Callable:
        """The Python function (the CPU one when there are several), or the FfiTarget."""
        return self.definition.fn

    @property
    def in_place(self) -> bool:
        """Whether the function writes its results into ``out``."""
        return self.definition.in_place

    @property
    def vmap_method(self) -> str:
        """How it is batched under ``jax.vmap`` (one of :data:`VMAP_METHODS`)."""
        return self.definition.vmap_method

    @property
    def nondiff_argnums(self) -> tuple[int, ...]:
        """The positions of the arguments that are never differentiated."""
        return self.definition.nondiff_argnums

    @property
    def input_output_aliases(self) -> dict[int, int]:
        """``{argument: result}``: the results that may reuse an argument's buffer."""
        return dict(self.definition.input_output_aliases)

    @property
    def effect(self) -> str | None:
        """What it does besides computing its results (one of :data:`EFFECTS`)."""
        return self.definition.effect


def derived_vmap_method(parent: Definition, shape_function) -> str:
    """The vmap method of a function derived from `parent` (a transpose, a JVP):
    the parent's, except that native batching needs a result-shape function."""
    if parent.vmap_method == "native" and not callable(shape_function):
        return "sequential"
    return parent.vmap_method
