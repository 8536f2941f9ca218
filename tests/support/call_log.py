"""What the sharding tests count about calls, in one process (test_sharding)
and in each of two (multiprocess_worker): the shapes every call of a bound
function saw, and a matrix product whose calls and transposes record them."""

import threading

import jax
import numpy as np

import xlabind


class Calls:
    """The shapes each call saw, one tuple per call (callbacks may run on
    several threads at once)."""

    def __init__(self):
        self.shapes = []
        self._lock = threading.Lock()

    def record(self, *arrays):
        with self._lock:
            self.shapes.append(tuple(a.shape for a in arrays))

    def take(self):
        shapes, self.shapes = self.shapes, []
        return shapes


def recorded_matmul(calls: Calls) -> xlabind.BoundFunction:
    """`a @ b`, bilinear, summed over the inner factor `n`, each call (the
    product and both transposes) recorded in `calls`."""

    def matmul(a, b):
        calls.record(a, b)
        return np.asarray(a) @ np.asarray(b)

    def matmul_t_a(b, ct):
        calls.record(b, ct)
        return np.asarray(ct) @ np.asarray(b).T

    def matmul_t_b(a, ct):
        calls.record(a, ct)
        return np.asarray(a).T @ np.asarray(ct)

    return xlabind.multilinear(
        matmul,
        (matmul_t_a, matmul_t_b),
        lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype),
        sharding_rule=xlabind.ShardingRule("i n, n j -> i j", summed=("n",)),
    )
