"""Ctrl-C, SystemExit and SIGINT inside a callback are not swallowed by the
caller's `except Exception:`; they are raised again in the main thread and
the process stays usable. On each path a Python function takes: the CPU
handler ("cpu") and the TPU's host transfer ("tpu": off a TPU the TPU
lowering rule stands in for the CPU one, tests/support/tpu_lowering.py;
what only a chip shows is in tests/tpu/test_tpu_host_calls.py).

Each case is a fresh Python process on the CPU: an interrupt ends or marks
the process that receives it."""

import os
import subprocess
import sys
import textwrap

import pytest
import tpu_lowering

PRELUDE = """
import os, signal, time
import jax, jax.numpy as jnp, numpy as np, xlabind
if PATH == "tpu":
    from tpu_lowering import tpu_rule_for_cpu_programs
    tpu_rule = tpu_rule_for_cpu_programs()  # held: the rule lasts while it is open
    tpu_rule.__enter__()
ok = jax.jit(xlabind.callback(lambda x: x * 2, lambda x: x))

def training_loop(step, rounds=3, make_input=lambda: jnp.ones(3)):
    # The habit that used to swallow Ctrl-C: JaxRuntimeError is an Exception.
    for _ in range(rounds):
        try:
            step(make_input()).block_until_ready()
        except Exception as e:
            print("swallowed", type(e).__name__)
"""

PATHS = ["cpu", "tpu"]


def run(path: str, body: str) -> subprocess.CompletedProcess:
    """`body` after the prelude, on `path`, in a fresh process on the CPU
    with tests/support importable."""
    support = os.path.dirname(os.path.abspath(tpu_lowering.__file__))
    head = f"import sys\nsys.path.insert(0, {support!r})\nPATH = {path!r}\n"
    return subprocess.run(
        [sys.executable, "-c", head + PRELUDE + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )


# How a Ctrl-C reaches a function: (its source, the steps' input, what the
# interrupt says).
INTERRUPTS = {
    "raised": (
        """
        def interrupted(x):
            raise KeyboardInterrupt
        """,
        "lambda: jnp.ones(3)",
        "",
    ),
    # As on a chip, where XLA runs host callbacks on threads of its own: an
    # input still being computed makes the CPU run the program on one too.
    "raised on another thread": (
        """
        import threading
        def interrupted(x):
            print("called on", "main" if threading.current_thread() is
                  threading.main_thread() else "another", "thread")
            raise KeyboardInterrupt("stop")
        a = jnp.ones((1000, 1000)) / 1000
        later = jax.jit(lambda a: (a @ a @ a).sum(axis=0)[:3])
        """,
        "lambda: later(a)",
        "stop",
    ),
    "SIGINT": (
        """
        def interrupted(x):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # Python delivers the signal here, in the callback
            return x
        """,
        "lambda: jnp.ones(3)",
        "",
    ),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("how", sorted(INTERRUPTS))
def test_keyboard_interrupt_reaches_the_caller(path, how):
    function, make_input, says = INTERRUPTS[how]
    done = run(
        path,
        textwrap.dedent(function)
        + textwrap.dedent(f"""
        step = jax.jit(xlabind.callback(interrupted, lambda x: x))
        try:
            training_loop(step, make_input={make_input})
        except KeyboardInterrupt as e:
            print("caught KeyboardInterrupt", repr(str(e)))
        assert float(ok(jnp.ones(()))) == 2.0
        print("usable")
        """),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"caught KeyboardInterrupt {says!r}" in done.stdout and "usable" in done.stdout
    # The loop saw the failed computation at most once before the interrupt arrived.
    assert done.stdout.count("swallowed") <= 1


@pytest.mark.parametrize("path", PATHS)
def test_system_exit_reaches_the_caller_with_its_code(path):
    done = run(
        path,
        """
        def exits(x):
            raise SystemExit(3)
        step = jax.jit(xlabind.callback(exits, lambda x: x))
        try:
            training_loop(step)
        except SystemExit as e:
            print("caught SystemExit", e.code)
        assert float(ok(jnp.ones(()))) == 2.0
        training_loop(jax.jit(xlabind.callback(exits, lambda x: x)), rounds=1)
        print("unreachable")
        """,
    )
    assert "caught SystemExit 3" in done.stdout, done.stderr[-3000:]
    assert "unreachable" not in done.stdout
    assert done.returncode == 3  # the second SystemExit ends the process, as it should


@pytest.mark.parametrize("path", PATHS)
def test_the_error_message_says_what_happens(path):
    done = run(
        path,
        """
        def interrupted(x):
            raise KeyboardInterrupt("stop")
        caught = None
        try:
            try:
                jax.jit(xlabind.callback(interrupted, lambda x: x))(jnp.ones(3)).block_until_ready()
            except Exception as e:
                caught = e  # no call here: the interrupt waits for the next one
            for _ in range(10):
                pass
        except KeyboardInterrupt as e:
            # Usually jax's own error handling already runs Python code, and the
            # interrupt replaces the JaxRuntimeError there (which becomes its context).
            failure = caught if caught is not None else e.__context__
            print("MESSAGE", type(failure).__name__, str(failure).replace(chr(10), " "))
            print("then", type(e).__name__, e)
        """,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MESSAGE JaxRuntimeError" in done.stdout
    assert "xlabind callback 'interrupted' raised KeyboardInterrupt: stop" in done.stdout
    assert "again in the main thread once the computation has failed" in done.stdout
    assert "then KeyboardInterrupt stop" in done.stdout
