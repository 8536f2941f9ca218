"""The `xlabind_callback` primitive: abstract evaluation, lowering, and the
registration of its JVP, transpose (derivative_rules.py) and vmap
(batching_rules.py) rules.

One primitive serves every bound function. Its parameters are the bound
`Callback` (hashed by identity), the static keyword arguments, the result tree
and avals, and under native batching the batch axes of operands and results;
everything a rule needs is derived from those.
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np
from jax._src import dispatch  # apply_primitive: eager calls compile the primitive once
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from xlabind import _native, batching_rules, derivative_rules

callback_p = Primitive("xlabind_callback")
callback_p.multiple_results = True
callback_p.def_impl(partial(dispatch.apply_primitive, callback_p))


@callback_p.def_abstract_eval
def _abstract_eval(*operand_avals, result_avals, **params):
    del operand_avals, params
    return list(result_avals)


_ffi_call_python = jax.ffi.ffi_lowering(_native.PYTHON_CALLBACK_TARGET)


def _cpu_lowering(ctx, *operands, callback, static_kwargs, out_tree, batch_axes, **params):
    del params
    entry = callback.registry_entry(static_kwargs, out_tree, batch_axes)
    # The executable keeps the entry (and so the Python callable) alive for as
    # long as it can run, even after the user dropped every reference.
    ctx.module_context.add_keepalive(entry)
    return _ffi_call_python(ctx, *operands, callback_key=np.uint64(entry.key))


def _gpu_lowering(ctx, *operands, callback, **params):
    del ctx, operands, params
    raise NotImplementedError(
        f"xlabind: '{callback.name}' is a Python callback on the CPU; it cannot run inside a "
        f"GPU computation in this version of xlabind. Place its inputs on the CPU "
        f"(jax.device_put(x, jax.devices('cpu')[0])) or run the program on the CPU.")


mlir.register_lowering(callback_p, _cpu_lowering, platform="cpu")
for _platform in ("cuda", "rocm"):
    mlir.register_lowering(callback_p, _gpu_lowering, platform=_platform)

ad.primitive_jvps[callback_p] = derivative_rules.jvp_rule
ad.primitive_transposes[callback_p] = derivative_rules.transpose_rule
batching.primitive_batchers[callback_p] = batching_rules.batch_rule
