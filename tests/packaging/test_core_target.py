"""//python:xlabind_core, what examples/native_op depends on: xlabind without
the compiled modules of its own ops, so that a workspace binding only its own
code need not compile them. The rest of xlabind works there; `xlabind.ops`
imports, and calling an op raises, naming the target that has it."""

import importlib.util
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlabind


def test_only_the_ops_modules_are_left_out():
    assert importlib.util.find_spec("xlabind._xlabind") is not None
    for name in ("_xlabind_ops", "_xlabind_cuda_ops"):
        assert importlib.util.find_spec(f"xlabind.{name}") is None, name


def test_a_python_function_runs_under_jit_grad_and_vmap():
    softplus = xlabind.nonlinear(
        lambda x: np.logaddexp(0, x),
        lambda x: x,
        jvp=lambda x, t: t / (1 + np.exp(-x)),
        vjp=lambda x, ct: ct / (1 + np.exp(-x)),
        name="softplus",
    )
    x = jnp.linspace(-3.0, 3.0, 7)
    np.testing.assert_allclose(jax.jit(softplus)(x), jax.nn.softplus(x), rtol=1e-6)
    np.testing.assert_allclose(
        jax.grad(lambda x: softplus(x).sum())(x), jax.nn.sigmoid(x), rtol=1e-6
    )
    assert jax.vmap(softplus)(jnp.stack([x, -x])).shape == (2, 7)


@pytest.mark.parametrize(
    "call",
    [
        lambda g: xlabind.ops.map_coordinates(g, [jnp.ones(3), jnp.ones(3)], order=1),
        lambda g: xlabind.ops.spline_filter(g, order=3),
    ],
    ids=["map_coordinates", "spline_filter"],
)
def test_an_op_says_which_target_has_it(call):
    grid = jnp.ones((4, 4))
    with pytest.raises(NotImplementedError) as raised:
        jax.jit(call)(grid)
    message = str(raised.value)
    assert "cannot run on CPU" in message, message
    assert "@xlabind//python:xlabind for xlabind.ops" in message, message


def test_the_diagnostics_say_the_ops_are_left_out():
    done = subprocess.run(
        [sys.executable, "-m", "xlabind"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("native ops (xlabind.ops)")]
    assert "unavailable" in line and "xlabind_core" in line, line
