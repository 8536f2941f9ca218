"""What the wheel's tests share: the runfiles root, each lock's installed
packages, and tools/build_wheel.py and tools/check_wheel.py as modules."""

import importlib.util
import pathlib

import jax
import runfiles_repos

RUNFILES = pathlib.Path(__file__).parents[2]
# Each lock's site-packages folder: the pinned jax, and the oldest supported.
SITES = {
    "pinned": pathlib.Path(jax.__file__).parent.parent,
    "lower_bound": (
        runfiles_repos.repository("xlabind_pypi_lower_bound")
        or RUNFILES.parent / "xlabind_pypi_lower_bound"
    )
    / "site",
}


def load_tool(name: str):
    """tools/<name>.py, imported from the runfiles."""
    spec = importlib.util.spec_from_file_location(name, RUNFILES / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_wheel(out: pathlib.Path) -> pathlib.Path:
    return load_tool("build_wheel").build(out)
