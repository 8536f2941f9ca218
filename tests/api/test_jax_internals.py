"""xlabind._jax_internals.PRIVATE_NAMES against the jax this runs beside: CI
runs it beside each release of KNOWN_JAX (the lower-bound lock through
tools/check_wheel.py's core tests, the pinned lock in the main suite, the
newest lock in tools/check_newest.sh), so each entry's releases are ones a
test imported the name from."""

import ast
import importlib
from pathlib import Path

import jax
import pytest

from xlabind import _jax_internals

SOURCE = Path(_jax_internals.__file__)


def resolve(name: str):
    module, attribute = name.split(":")
    return getattr(importlib.import_module(module), attribute)


def private_names_used() -> set[str]:
    """Every "module:attribute" of jax._src that _jax_internals.py imports or
    reads (or getattr's) from a jax._src module it imported, anywhere in the file."""
    tree = ast.parse(SOURCE.read_text())
    modules, used = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jax._src"):
            for alias in node.names:
                try:
                    importlib.import_module(f"{node.module}.{alias.name}")
                except ImportError:
                    used.add(f"{node.module}:{alias.name}")
                else:
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            used.add(f"{modules[node.value.id]}:{node.attr}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in modules
            and isinstance(node.args[1], ast.Constant)
        ):
            used.add(f"{modules[node.args[0].id]}:{node.args[1].value}")
    return used


def test_this_jax_is_one_the_table_is_known_for():
    assert jax.__version__ in _jax_internals.KNOWN_JAX, (
        f"jax {jax.__version__} is not in xlabind._jax_internals.KNOWN_JAX "
        f"{_jax_internals.KNOWN_JAX}: run this test beside it and add it to the "
        "releases of each name it imports"
    )


@pytest.mark.parametrize("name", sorted(_jax_internals.PRIVATE_NAMES))
def test_each_private_name_exists_exactly_where_the_table_says(name):
    known = _jax_internals.PRIVATE_NAMES[name]
    assert set(known) <= set(_jax_internals.KNOWN_JAX), (name, known)
    if jax.__version__ in known:
        resolve(name)
    else:
        with pytest.raises((ImportError, AttributeError)):
            resolve(name)
            pytest.fail(f"{name} exists in jax {jax.__version__}: add the release to its entry")


def test_every_private_name_used_is_in_the_table():
    used = private_names_used()
    assert "jax._src.callback:_IOEffect" in used  # the scan sees module aliases
    assert "jax._src.custom_partitioning:custom_partitioning" in used  # and direct imports
    assert used <= set(_jax_internals.PRIVATE_NAMES), sorted(
        used - set(_jax_internals.PRIVATE_NAMES)
    )
    assert set(_jax_internals.PRIVATE_NAMES) <= used, sorted(
        set(_jax_internals.PRIVATE_NAMES) - used
    )


def test_no_other_module_imports_private_jax():
    package = SOURCE.parent
    for path in package.rglob("*.py"):
        if path == SOURCE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            assert not any(n.startswith("jax._src") for n in names), (
                f"{path.relative_to(package)} imports {names}: private jax APIs go "
                "through xlabind/_jax_internals.py"
            )
