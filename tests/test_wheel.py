"""The wheel from tools/build_wheel.py installs with pip and works on its own."""

import importlib.util
import os
import pathlib
import subprocess
import sys
import zipfile

import jax

TOOLS = pathlib.Path(__file__).parent.parent / "tools" / "build_wheel.py"


def load_builder():
    spec = importlib.util.spec_from_file_location("build_wheel", TOOLS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wheel_contents_and_reproducibility(tmp_path):
    builder = load_builder()
    first = builder.build(tmp_path / "a")
    second = builder.build(tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()  # fixed time stamps, sorted entries
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert first.name.endswith(f"-{tag}-{tag}-manylinux_2_17_x86_64.whl")
    names = zipfile.ZipFile(first).namelist()
    assert "xlabind/_xlabind.so" in names and "xlabind/callback.py" in names
    metadata = zipfile.ZipFile(first).read(
        next(n for n in names if n.endswith("/METADATA"))).decode()
    assert f"Requires-Dist: jax=={jax.__version__}" in metadata


def test_pip_installs_it_and_it_runs(tmp_path):
    wheel = load_builder().build(tmp_path / "dist")
    target = tmp_path / "site"
    env = {**os.environ, "PIP_BREAK_SYSTEM_PACKAGES": "1"}
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--target", str(target), str(wheel)],
                   check=True, env=env)
    # Only the installed wheel and the pinned dependencies on the path.
    dependencies = pathlib.Path(jax.__file__).parent.parent
    script = (
        "import jax, jax.numpy as jnp, numpy as np, xlabind\n"
        f"assert xlabind.__file__.startswith({str(target)!r}), xlabind.__file__\n"
        "op = xlabind.linear(lambda x: 2 * x, lambda ct: 2 * ct, lambda x: x)\n"
        "assert float(jax.grad(lambda x: op(x).sum())(jnp.ones(3))[0]) == 2.0\n"
        "print('wheel OK')\n")
    result = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path[:0] = "
                             f"[{str(target)!r}, {str(dependencies)!r}]\n" + script],
                            capture_output=True, text=True, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "wheel OK" in result.stdout
