"""`python -m xlabind`: the installation report that the troubleshooting page
starts from — versions against the tested ranges and the floors, devices, what is
registered, what is unavailable and why."""

import os
import subprocess
import sys

import jax


def run_report(prelude: str = "", **env) -> subprocess.CompletedProcess:
    script = prelude + "import runpy; runpy.run_module('xlabind', run_name='__main__')\n"
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ, **env}
    )


def test_the_report_of_a_working_installation():
    done = run_report()
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"jax {jax.__version__}: tested (xlabind's tests ran on >=" in out
    assert "xlabind 0." in out and "jax devices: cpu:" in out
    assert "Python callbacks: CPU and CUDA handlers registered (CUDA, cpu)" in out
    assert "native CUDA kernels (xlabind.ops on GPUs): " in out
    assert "no GPU visible to jax" in out  # JAX_PLATFORMS=cpu in the tests


def test_versions_outside_the_tested_ranges_are_named_with_the_range():
    newer = (
        "import importlib.metadata as m\nreal = m.version\n"
        "m.version = lambda n: '0.13.0' if n in ('jax', 'jaxlib') else real(n)\n"
    )
    # Newer than tested: a working report that says so.
    done = run_report(newer)
    assert done.returncode == 0, done.stderr
    assert "jax 0.13.0: untested, should work (xlabind's tests ran on >=0.9.1,<0.13)" in done.stdout
    assert "jax devices: cpu:" in done.stdout  # and the rest of the report
    older = newer.replace("'0.13.0'", "'0.8.0'")
    # Known to fail: xlabind does not import, and its ImportError is the report.
    done = run_report(older)
    assert done.returncode == 1
    assert "ImportError: xlabind cannot work here: jax 0.8.0 is older than 0.9.1" in done.stderr
    done = run_report(older, XLABIND_ALLOW_UNSUPPORTED_VERSIONS="1")
    assert done.returncode == 1, done.stderr
    assert "jax 0.8.0: TOO OLD (xlabind's tests ran on >=0.9.1,<0.13)" in done.stdout


def test_the_report_mentions_the_persistent_cache_when_one_is_set(tmp_path):
    done = run_report(JAX_COMPILATION_CACHE_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (
        f"persistent compilation cache at {tmp_path}: programs that call Python functions "
        f"are written once and found by other processes"
    ) in done.stdout
