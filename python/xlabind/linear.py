"""`xlabind.linear`: a linear function and its transpose, differentiable to any order.

f(a; u) is linear (jointly) in its differentiable arguments u; the arguments in
``nondiff_argnums`` (a) may enter in any way. Its JVP is f itself applied to
the tangents, its transpose is the user's ``transpose(a; ct)``, and the
transpose's transpose is f again, so ``jax.grad``, ``jax.jacfwd``,
``jax.jacrev``, ``jax.hessian`` and ``jax.linear_transpose`` all work, to any
order.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from xlabind._trees import flat_results_tree, interleave
from xlabind.callback import Callback, ResultSpec, derived_vmap_method
from xlabind.derivative_rules import LinearityRules, derived_batch_axes


def _diff_positions(n: int, nondiff: Sequence[int]) -> list[int]:
    return [i for i in range(n) if i not in nondiff]


class _LinearPair:
    """f and its transpose, each a Callback whose transpose calls the other."""

    def __init__(self, fn, transpose, result_shape_dtypes, transpose_shape_dtypes, nondiff_argnums,
                 in_place, vmap_method, name):
        self.forward = Callback(fn, result_shape_dtypes, in_place=in_place, name=name,
                                vmap_method=vmap_method, nondiff_argnums=nondiff_argnums,
                                rules=LinearityRules(
                                    groups=lambda n: [_diff_positions(n, self.nondiff)],
                                    transposes=[self._call_transpose],
                                    missing_transpose_hint="Pass transpose= to xlabind.linear."))
        self.nondiff = self.forward.nondiff_argnums
        self.transpose_fn = transpose
        self.transpose_shape_dtypes = transpose_shape_dtypes
        self._transposes: dict[Any, Callback] = {}  # by the forward call's result tree

    def transposed(self, forward_out_tree) -> Callback:
        """The transpose as a Callback: (nondiff args..., cotangents...) -> one per diff arg."""
        op = self._transposes.get(forward_out_tree)
        if op is None:
            k = len(self.nondiff)
            fwd = self.forward
            op = Callback(self.transpose_fn, self.transpose_shape_dtypes, in_place=fwd.in_place,
                          name=f"{fwd.name} (transpose)", nondiff_argnums=range(k),
                          vmap_method=derived_vmap_method(fwd, self.transpose_shape_dtypes),
                          rules=LinearityRules(
                              groups=lambda n: [list(range(k, n))],
                              transposes=[lambda *a: self._call_forward(forward_out_tree, *a)]))
            self._transposes[forward_out_tree] = op
        return op

    def _call_transpose(self, callback, outside, cts, group_avals, params):
        n = len(outside) + len(group_avals)
        diff = _diff_positions(n, self.nondiff)
        op = self.transposed(params["out_tree"])
        batch_axes = derived_batch_axes(
            params, [("arg", i) for i in self.nondiff] + [("out", j) for j in range(len(cts))])
        out_batch = derived_batch_axes(params, [("arg", i) for i in diff])
        return op.bind([*outside, *cts], params["static_kwargs"], flat_results_tree(len(diff)),
                       group_avals, batch_axes, out_batch)

    def _call_forward(self, forward_out_tree, callback, outside, cts, group_avals, params):
        # outside: the forward's nondiff args; cts: one per forward diff arg.
        k = len(outside)
        n = k + len(cts)
        operands = interleave(n, self.nondiff, outside, cts)
        batch_axes = derived_batch_axes(
            params, interleave(n, self.nondiff, [("arg", i) for i in range(k)],
                               [("out", j) for j in range(len(cts))]))
        out_batch = derived_batch_axes(params, [("arg", i) for i in range(k, k + len(group_avals))])
        return self.forward.bind(operands, params["static_kwargs"], forward_out_tree, group_avals,
                                 batch_axes, out_batch)


def linear(fn: Callable, transpose: Callable | None,
           result_shape_dtypes: ResultSpec | Callable[..., ResultSpec], *,
           transpose_shape_dtypes: Callable[..., ResultSpec] | None = None,
           nondiff_argnums: Sequence[int] = (), in_place: bool = False,
           vmap_method: str = "sequential", name: str | None = None) -> Callback:
    """Binds a linear function and its transpose as one differentiable JAX operation.

    Args:
      fn: ``fn(*args, **static_kwargs)``, linear (jointly) in every argument
        not in ``nondiff_argnums``. Returns its results like
        :func:`xlabind.callback` (or fills ``out=`` with ``in_place=True``).
      transpose: ``transpose(*nondiff_args, *cotangents, **static_kwargs)``:
        the linear transpose of ``fn`` in its differentiable arguments, with
        one cotangent per result of ``fn`` (flattened), returning one
        cotangent per differentiable argument (a bare array when there is
        one, else a tuple). For complex maps this is the *transpose*, not the
        adjoint: no complex conjugation (JAX's convention). ``None``:
        forward mode only.
      result_shape_dtypes: As in :func:`xlabind.callback`.
      transpose_shape_dtypes: ``(*nondiff_args, *cotangents, **kw)`` ->
        results of ``transpose``. Needed only for ``vmap_method="native"``
        batching of the transpose; without it the transpose is batched
        sequentially.
      nondiff_argnums: Positions of arguments ``fn`` is not linear in; they
        are never differentiated (doing so is an error that names them).
      in_place, vmap_method, name: As in :func:`xlabind.callback`; they apply
        to ``transpose`` as well.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np, xlabind
      >>> A = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
      >>> matvec = xlabind.linear(lambda x: A @ x, lambda ct: A.T @ ct, lambda x: x)
      >>> jax.grad(lambda x: matvec(x).sum())(jnp.ones(2))
      Array([4., 6.], dtype=float32)
    """
    pair = _LinearPair(fn, transpose, result_shape_dtypes, transpose_shape_dtypes,
                       nondiff_argnums, in_place, vmap_method, name)
    if transpose is None:
        pair.forward.rules = LinearityRules(groups=pair.forward.rules.groups,
                                            missing_transpose_hint="Pass transpose= to xlabind.linear.")
    return pair.forward
