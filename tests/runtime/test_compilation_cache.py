"""jax's persistent compilation cache: a program that calls a Python function
is never written (the function lives in its process: an entry could only be
missed, one per program per process, as jax skips its own host callbacks);
programs of native targets only are written once and hit from other
processes. (That jit dispatch costs the same with the host callback
registered is measured by tools/benchmarks's no-op line.)"""

import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import sys
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import xlabind
    from xlabind.ops import map_coordinates

    python = jax.jit(lambda x: xlabind.callback(np.sin, lambda x: x)(x) * 2)
    native = jax.jit(lambda g, c: map_coordinates(g, [c], 1) + 1)
    print("python", python(jnp.zeros(3)).tolist())
    print("native", native(jnp.arange(4.0), jnp.array([0.5, 2.5])).tolist())
    """)


def run(cache) -> str:
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(cache)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def entries(cache) -> list[str]:
    return sorted(name for name in os.listdir(cache) if "lambda" in name)


def test_python_programs_are_not_written_native_ones_hit(tmp_path):
    first = run(tmp_path)
    assert "python [0.0, 0.0, 0.0]" in first and "native [1.5, 3.5]" in first
    written = entries(tmp_path)
    # The native program's entry only: the Python one has none.
    assert len(written) == 1, written
    for _ in range(2):
        assert run(tmp_path) == first
        assert entries(tmp_path) == written  # hit, not rewritten; still no Python entry
