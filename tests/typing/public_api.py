"""A user's script, for a type checker: tools/check_wheel.py runs mypy on it
against the installed wheel (whose py.typed makes its hints count), with
--warn-unused-ignores. Every call below must type-check; every line marked
`type: ignore[...]` must be an error, or mypy reports the ignore as unused —
so hints that decayed to Any would fail the check too."""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import xlabind
import xlabind.cuda
from xlabind.ops import map_coordinates


def double(x: np.ndarray) -> np.ndarray:
    return 2 * x


def same(x: Any) -> Any:
    return x


linear_op: xlabind.BoundFunction = xlabind.linear(double, double, same, vmap_method="native")
plain: xlabind.BoundFunction = xlabind.callback(np.sin, same, name="sin")
sine: xlabind.BoundFunction = xlabind.nonlinear(
    np.sin, same, jvp=xlabind.traceable(lambda x, t: jnp.cos(x) * t)
)
products: xlabind.BoundFunction = xlabind.multilinear(
    lambda a, b: a * b, (lambda a, b, ct: ct * b, lambda a, b, ct: a * ct), same
)
native: xlabind.FfiTarget = xlabind.ffi_target("xlabind_noop", platforms=("cpu",))
any_case: xlabind.FfiTarget = xlabind.ffi_target("xlabind_noop", platforms="CPU")
per_platform = xlabind.callback({"cpu": np.sin, "cuda": np.sin}, same, synchronize=True)
captured = xlabind.callback(
    lambda x, *, out: None, same, in_place=True, platforms=("cuda",), command_buffer_compatible=True
)
xlabind.register_ffi_targets({})
methods: tuple[str, ...] = tuple(xlabind.VMAP_METHODS)
dtypes: frozenset[np.dtype] = xlabind.SUPPORTED_DTYPES
stream: int = xlabind.cuda.current_stream()
capturing: bool = xlabind.cuda.is_capturing()
values: jax.Array = map_coordinates(
    jnp.ones((3, 3)), [jnp.ones(2), jnp.ones(2)], order=1, mode="nearest", cval=0.0
)

contraction = xlabind.ShardingRule("i n, n j -> i j", summed=("n",))
one_name = xlabind.ShardingRule("i n -> i", summed="n")
matmul: xlabind.BoundFunction = xlabind.callback(
    lambda a, b: a @ b,
    lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype),
    sharding_rule=contraction,
)
by_shape = xlabind.linear(double, double, same, sharding_rule=lambda x: "n -> n")
xlabind.check_sharding(matmul, jnp.ones((2, 3)), jnp.ones((3, 2)), rtol=1e-6)

xlabind.ffi_target(3)  # type: ignore[arg-type]
xlabind.ShardingRule(3)  # type: ignore[arg-type]
map_coordinates(jnp.ones(3), [jnp.ones(2)], order="1")  # type: ignore[arg-type]
xlabind.callback(np.sin, same, in_place="yes")  # type: ignore[arg-type]
xlabind.linear(double, double, same, nondiff_argnums=0)  # type: ignore[arg-type]
