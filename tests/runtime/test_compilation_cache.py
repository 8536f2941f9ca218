"""jax's persistent compilation cache: programs are written once and found by
other processes, those that call Python functions too (the HLO names a
function by a registry key derived from what it is, the same in every
process that lowers the program; the executable calls what the loading
process registered under it). (That jit dispatch costs the same with the
cache on is measured by tools/benchmarks's no-op line.)"""

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

    # Functions alike in name, code and call, made twice: two keys in one
    # process, each program calling its own, in whatever order the
    # processes compile them (argv[2]).
    def scaled(k):
        return xlabind.callback(lambda x: x * k, lambda x: x, name="scaled")
    by = {k: jax.jit(lambda x, f=scaled(k): f(x) + 0) for k in (2.0, 3.0)}
    for k in (sorted(by) if sys.argv[2] == "up" else sorted(by, reverse=True)):
        print("scaled", k, by[k](jnp.ones(2)).tolist())
    """)


def run(cache, order="up") -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(cache), order],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def entries(cache) -> list[str]:
    return sorted(name for name in os.listdir(cache) if "lambda" in name)


def results(output: str) -> list[str]:
    return sorted(output.splitlines())


def test_programs_are_written_once_and_hit_python_ones_too(tmp_path):
    first = run(tmp_path)
    assert "python [0.0, 0.0, 0.0]" in first and "native [1.5, 3.5]" in first
    assert "scaled 2.0 [2.0, 2.0]" in first and "scaled 3.0 [3.0, 3.0]" in first
    written = entries(tmp_path)
    assert len(written) == 4, written  # python, native and the two scaled
    for order in ("up", "down", "up"):
        # Hit, not rewritten, whichever scaled program a process compiles
        # first: each still calls its own function.
        assert results(run(tmp_path, order)) == results(first)
        assert entries(tmp_path) == written


SHARDED = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import xlabind
    from xlabind.ops import map_coordinates
    mesh = Mesh(np.array(jax.devices()), ("d",))
    grid = jnp.sin(jnp.arange(20.0))
    x = jax.device_put(jnp.linspace(0.0, 18.0, 64), NamedSharding(mesh, P("d")))

    def sharded_jax(x):
        return jax.scipy.ndimage.map_coordinates(grid, [x], 1, "mirror") * 2

    def sharded_xlabind(x):
        return map_coordinates(grid, [x], 1, "mirror") * 2

    def doubled(x):
        x = np.asarray(x)
        if (x < 0).any():
            raise ValueError(f"a negative point, {x.min()}")
        return 2 * x

    op = xlabind.callback(doubled, lambda x: x, sharding_rule="n -> n")

    def sharded_python(x):
        return op(x) + 1

    for f in (sharded_jax, sharded_xlabind, sharded_python):
        print(f.__name__, jax.jit(f)(x)[:4].tolist())
    try:  # a failure on one device, from a program another process compiled
        jax.jit(sharded_python)(x.at[40].set(-1.0)).block_until_ready()
    except Exception as e:
        print(str(e).splitlines()[0].split("ValueError: ")[-1])
    """)


def test_sharded_programs_hit_from_other_processes(tmp_path):
    # Over 8 devices the points are split by a custom partitioning, named
    # alike in every process: the second and third processes find the first's
    # entries, as for jax's own map_coordinates in the same program; a Python
    # function's too (it was named by an object id, new in every process: a
    # new entry each run), its failure on one device still reported. One
    # cache for the three, each program's entries told apart by its name.
    kinds = ("sharded_jax", "sharded_xlabind", "sharded_python")
    outputs, counts = [], []
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", SHARDED, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append(done.stdout)
        names = os.listdir(tmp_path)
        counts.append({kind: sum(kind in name for name in names) for kind in kinds})
        counts[-1]["all"] = len(names)  # and nothing else new in a later process
    assert outputs[0] == outputs[1] == outputs[2], outputs
    for kind in kinds:
        assert f"{kind} [" in outputs[0], outputs[0]
        assert counts[0][kind] > 0, counts  # written by the first process
    # The anchor, jax's own program, hits; and so does every other.
    assert counts[0]["sharded_jax"] == counts[2]["sharded_jax"], counts
    assert counts[0] == counts[1] == counts[2], counts
    assert "a negative point, -1.0" in outputs[2], outputs[2]
