"""`python -m xlabind`: the installation report that README's troubleshooting
starts from — versions against the supported ranges, devices, what is
registered, what is unavailable and why."""

import os
import subprocess
import sys

import jax


def run_report(prelude: str = "", **env) -> subprocess.CompletedProcess:
    script = prelude + "import runpy; runpy.run_module('xlabind', run_name='__main__')\n"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, **env})


def test_the_report_of_a_working_installation():
    done = run_report()
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"jax {jax.__version__}: supported (xlabind supports jax>=" in out
    assert "xlabind 0." in out and "jax devices: cpu:" in out
    assert "Python callbacks: CPU and CUDA handlers registered (CUDA, cpu)" in out
    assert "native CUDA kernels (xlabind.ops on GPUs): " in out
    assert "no GPU visible to jax" in out  # JAX_PLATFORMS=cpu in the tests


def test_versions_outside_the_ranges_are_named_with_the_range():
    fake = ("import importlib.metadata as m\nreal = m.version\n"
            "m.version = lambda n: '0.13.0' if n in ('jax', 'jaxlib') else real(n)\n")
    # Without the override xlabind does not import: its ImportError is the report.
    done = run_report(fake)
    assert done.returncode == 1 and "ImportError: xlabind supports jax>=0.9.1,<0.13" in done.stderr
    done = run_report(fake, XLABIND_ALLOW_UNSUPPORTED_VERSIONS="1")
    assert done.returncode == 1, done.stderr
    assert "jax 0.13.0: NOT SUPPORTED (xlabind supports jax>=0.9.1,<0.13)" in done.stdout
    assert "jax devices: cpu:" in done.stdout  # and the rest of the report


def test_the_report_mentions_the_persistent_cache_when_one_is_set(tmp_path):
    done = run_report(JAX_COMPILATION_CACHE_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"persistent compilation cache at {tmp_path}: programs that call Python" in done.stdout
