"""xlabind.ops called eagerly, as NumPy functions are: one executable per
static configuration and shapes, compiled once and then dispatched once a
call, as jax's own map_coordinates is (not a dozen jnp operations one by one:
tools/benchmarks's "eager map_coordinates" line measures the cost)."""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xlabind.ops import map_coordinates, spline_filter


class Compiles(logging.Handler):
    """The programs jax compiles while it is installed (jax.log_compiles)."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Compiling "):
            self.names.append(message.split()[1])

    def __enter__(self):
        self._log = jax.log_compiles(True)
        self._log.__enter__()
        logging.getLogger("jax").addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger("jax").removeHandler(self)
        self._log.__exit__(*exc)


@pytest.mark.parametrize(
    "call",
    [
        lambda g, c: map_coordinates(g, [c, c], 1, "nearest"),
        lambda g, c: map_coordinates(g, [c, c], 3, "mirror"),
        lambda g, c: map_coordinates(g, [c, c], 5, "constant", cval=0.5),
        lambda g, c: spline_filter(g, order=3, axes=[0, 1]),
    ],
    ids=["order1", "order3", "order5_cval", "spline_filter"],
)
def test_one_executable_per_configuration_and_shape(call):
    for n in (3, 7):
        grid = jnp.asarray(np.arange(5.0 * n).reshape(5, n))
        points = jnp.linspace(0.0, 2.0, n)
        with Compiles() as new_shape:
            first = call(grid, points)
        jax.block_until_ready(first)
        assert len(new_shape.names) == 1, new_shape.names
        with Compiles() as again:
            second = call(grid, points)
        assert again.names == [], again.names
        np.testing.assert_array_equal(first, second)
