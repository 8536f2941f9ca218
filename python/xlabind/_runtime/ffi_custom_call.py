"""The custom call of an FFI target, as every implementation emits it: the
operands, the static attributes, the options (aliases, has_side_effect), and
for a function with effect="ordered" jax's ordering token, threaded through
the call as its first operand and first result, as io_callback threads it
(xlabind's handlers skip it; a native target declares it: FfiTarget.token).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jax.ffi import build_ffi_lowering_function

from xlabind import _jax_internals as internals


def emit(
    target: str,
    ctx: Any,
    operands: Sequence[Any],
    attributes: dict[str, Any],
    options: dict[str, Any],
    token: Any = None,
) -> tuple[list[Any], Any]:
    """(results, token out): the call of `target`, taking `token` first when it
    is not None (then the token it returns comes back; else None)."""
    if token is None:
        lowering = build_ffi_lowering_function(target, **options)
        return list(lowering(ctx, *operands, **attributes).results), None
    aliases = options.get("operand_output_aliases")
    if aliases:  # counted without the token, which comes first on both sides
        options = {**options, "operand_output_aliases": {i + 1: j + 1 for i, j in aliases.items()}}
    lowering = build_ffi_lowering_function(target, **options)
    ctx = ctx.replace(
        avals_in=[internals.abstract_token, *ctx.avals_in],
        avals_out=[internals.abstract_token, *ctx.avals_out],
    )
    token, *results = lowering(ctx, token, *operands, **attributes).results
    return results, token
