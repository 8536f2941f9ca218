"""The example's native ops, bound as JAX operations."""

import jax
import jax.numpy as jnp

# [scale]
import example_ops  # the module xlabind_extension built (BUILD.bazel)
import xlabind

xlabind.register_ffi_targets(example_ops)
SCALE = xlabind.ffi_target("example_scale", platforms=("cpu", "cuda"))
scale = xlabind.linear(SCALE, SCALE, lambda x, **_: x, vmap_method="expand_dims")
# [scale]

# [square]
# y = x * x. Its JVP, 2 x t, is linear in t and its own transpose, so the same
# target is the VJP.
SQUARE_JVP = xlabind.ffi_target("example_square_jvp")
square = xlabind.nonlinear(
    xlabind.ffi_target("example_square"),
    lambda x: x,
    jvp=SQUARE_JVP,
    vjp=SQUARE_JVP,
    vmap_method="expand_dims",
    name="example_square",
)
# [square]

# [table]
# A tabulated function, built once per executable by the targets' instantiate
# stage from a nested attribute; the JVP, dy = f'(x) t, is diagonal in t, so
# it is its own transpose: the VJP too.
TABLE_JVP = xlabind.ffi_target("example_table_jvp", platforms=("cpu", "cuda"))
table = xlabind.nonlinear(
    xlabind.ffi_target("example_table", platforms=("cpu", "cuda")),
    lambda x, **_: x,
    jvp=TABLE_JVP,
    vjp=TABLE_JVP,
    vmap_method="broadcast_all",
    name="example_table",
)
tables_built = xlabind.callback(
    xlabind.ffi_target("example_tables_built"),
    lambda x: jax.ShapeDtypeStruct((), jnp.int32),
)
SIN = {"function": "sin", "size": 4097, "range": {"lo": -4.0, "hi": 4.0}}
# [table]
