"""Ctrl-C, SystemExit and SIGINT inside a callback are not swallowed by the
caller's `except Exception:`; the process stays usable."""

import subprocess
import sys
import textwrap

PRELUDE = textwrap.dedent("""
    import os, signal, time
    import jax, jax.numpy as jnp, numpy as np, xlabind
    ok = jax.jit(xlabind.callback(lambda x: x * 2, lambda x: x))

    def training_loop(step, rounds=3):
        # The habit that used to swallow Ctrl-C: JaxRuntimeError is an Exception.
        for _ in range(rounds):
            try:
                step(jnp.ones(3)).block_until_ready()
            except Exception as e:
                print("swallowed", type(e).__name__)
""")


def run(body: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_keyboard_interrupt_reaches_the_caller():
    done = run("""
        def interrupted(x):
            raise KeyboardInterrupt
        step = jax.jit(xlabind.callback(interrupted, lambda x: x))
        try:
            training_loop(step)
        except KeyboardInterrupt:
            print("caught KeyboardInterrupt")
        assert float(ok(jnp.ones(())) ) == 2.0
        print("usable")
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "caught KeyboardInterrupt" in done.stdout and "usable" in done.stdout
    # The loop saw the failed computation at most once before the interrupt arrived.
    assert done.stdout.count("swallowed") <= 1


def test_system_exit_reaches_the_caller_with_its_code():
    done = run("""
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
    """)
    assert "caught SystemExit 3" in done.stdout, done.stderr[-3000:]
    assert "unreachable" not in done.stdout
    assert done.returncode == 3  # the second SystemExit ends the process, as it should


def test_sigint_during_a_callback_is_a_keyboard_interrupt():
    done = run("""
        def signalled(x):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # Python delivers the signal here, in the callback
            return x
        step = jax.jit(xlabind.callback(signalled, lambda x: x))
        try:
            training_loop(step)
        except KeyboardInterrupt:
            print("caught KeyboardInterrupt")
        assert float(ok(jnp.ones(()))) == 2.0
        print("usable")
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "caught KeyboardInterrupt" in done.stdout and "usable" in done.stdout


def test_the_error_message_says_what_happens():
    done = run("""
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
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MESSAGE JaxRuntimeError" in done.stdout
    assert "KeyboardInterrupt: stop" in done.stdout
    assert "again in the main thread once the computation has failed" in done.stdout
    assert "then KeyboardInterrupt stop" in done.stdout
