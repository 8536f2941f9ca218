"""Which implementation runs a user's function, and the Definition that binds
it: what every constructor (callback, linear, multilinear, nonlinear) and
every derived function (a transpose, a JVP, a VJP) is made with."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from xlabind._primitive.definition import (
    Definition,
    Implementation,
    ResultSpec,
    derived_vmap_method,
)
from xlabind._primitive.factors import Rule
from xlabind._runtime.native_targets import (
    FfiTarget,
    NativeImplementation,
    check_targets,
    is_native,
    targets_by_platform,
)
from xlabind._runtime.python_functions import (
    PythonImplementation,
    check_command_buffer_compatible,
    function_name,
    functions_by_platform,
)

#: What a bound function runs: a Python function, one per platform, or a
#: native FFI target (xlabind.ffi_target), one per platform.
Function = (
    Callable[..., Any] | Mapping[str, Callable[..., Any]] | FfiTarget | Mapping[str, FfiTarget]
)


def make_definition(
    fn: Function,
    result_shape_dtypes: ResultSpec | Callable[..., ResultSpec] | None,
    *,
    in_place: bool,
    platforms: Sequence[str],
    vmap_method: str,
    name: str | None,
    nondiff_argnums: Sequence[int] = (),
    rules: Any = None,
    aligned_pairs: Sequence[tuple[int, int]] = (),
    unwrap_one_tuple: bool = False,
    sharding_rule: Rule | None = None,
    synchronize: bool = False,
    input_output_aliases: Mapping[int, int] | None = None,
    effect: str | None = None,
    command_buffer_compatible: bool = False,
    stop_all_devices: bool = True,
) -> Definition:
    """The Definition of a bound function that runs `fn`: Python functions (one,
    or one per platform), or native FFI targets."""
    name = name or function_name(fn)
    implementation: Implementation
    if is_native(fn):
        if command_buffer_compatible:
            raise ValueError(
                f"xlabind: {name}: command_buffer_compatible is for Python "
                f"functions; a native handler declares it in its stages "
                f"(xlabind_handler(..., command_buffer = True) in its Bazel table)"
            )
        targets = targets_by_platform(fn)
        check_targets(name, targets, vmap_method, effect)
        implementation = NativeImplementation(targets)
    else:
        python_fn = cast(
            Callable[..., Any] | Mapping[str, Callable[..., Any]], fn
        )  # not native: Python
        functions = functions_by_platform(name, python_fn, platforms)
        if command_buffer_compatible:
            check_command_buffer_compatible(
                name, functions, in_place=in_place, synchronize=synchronize
            )
        implementation = PythonImplementation(
            functions,
            in_place=in_place,
            unwrap_one_tuple=unwrap_one_tuple,
            synchronize=synchronize,
            command_buffer_compatible=command_buffer_compatible,
        )
    return Definition(
        implementation,
        result_shape_dtypes,
        name=name,
        vmap_method=vmap_method,
        nondiff_argnums=nondiff_argnums,
        rules=rules,
        aligned_pairs=aligned_pairs,
        sharding_rule=sharding_rule,
        input_output_aliases=input_output_aliases,
        effect=effect,
        stop_all_devices=stop_all_devices,
    )


def derived_function(
    parent: Definition,
    platforms: Sequence[str],
    fn: Function,
    result_shape_dtypes: ResultSpec | Callable[..., ResultSpec] | None,
    suffix: str,
    **options: Any,
) -> Definition:
    """A function derived from `parent` (a transpose, a JVP, a VJP): it runs like
    its parent (in place or not, on the same platforms, synchronized or not)
    and is batched natively when its parent is and it has a shape function.
    It has no aliases (its operands are other arrays than its parent's) and
    no effect (an effectful function has no derivatives: _primitive/derivatives.py)."""
    derived = make_definition(
        fn,
        result_shape_dtypes,
        in_place=options.pop("in_place", parent.in_place),
        platforms=platforms,
        vmap_method=derived_vmap_method(parent, result_shape_dtypes),
        name=f"{parent.name} ({suffix})",
        unwrap_one_tuple=True,
        synchronize=parent.implementation.synchronize,
        stop_all_devices=parent.stop_all_devices,
        **options,
    )
    derived.terms = parent.terms  # one vocabulary for the family
    return derived
