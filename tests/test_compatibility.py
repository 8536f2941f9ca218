"""The supported versions: one table for the wheel's ranges and the import
check, whose lower bound is the lower-bound lock and which holds the pinned
lock; a jax outside it fails the import with a message naming the range."""

import pathlib
import re
import subprocess
import sys

import jax
import pytest

from xlabind import _compatibility

LOCKS = pathlib.Path(__file__).parent.parent / "third_party" / "python"


def pins(name: str) -> dict[str, str]:
    text = (LOCKS / name).read_text()
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, flags=re.M))


def test_the_lower_bounds_are_the_lower_bound_lock():
    lowest = pins("lower_bound.in")
    for name, (low, _) in _compatibility.SUPPORTED.items():
        assert (_compatibility.version_tuple(low) + (0, 0))[:3] == \
            (_compatibility.version_tuple(lowest[name]) + (0, 0))[:3], name


def test_the_pinned_versions_are_supported():
    for name, version in pins("requirements.in").items():
        if name in _compatibility.SUPPORTED:
            assert _compatibility.is_supported(name, version), (name, version)


@pytest.mark.parametrize("version, supported", [
    ("0.9.0.1", False), ("0.9.1", True), ("0.10.2", True), ("0.12.0.1", True),
    ("0.12.9.dev20270101", True), ("0.13.0", False), ("0.13.0rc1", False), ("1.0", False)])
def test_versions_compare_by_their_release_numbers(version, supported):
    assert _compatibility.is_supported("jax", version) is supported


def test_the_message_names_the_range_what_was_found_and_the_way_out():
    message = _compatibility.unsupported_message(
        {"jax": "0.8.0", "jaxlib": "0.8.0", "numpy": "2.4.6", "ml_dtypes": None})
    assert "jax>=0.9.1,<0.13" in message and "found jax 0.8.0, jaxlib 0.8.0" in message
    assert "numpy 2.4.6" not in message.split("found")[1]
    assert "pip install 'jax>=0.9.1,<0.13' 'jaxlib>=0.9.1,<0.13'" in message
    assert _compatibility.OVERRIDE in message
    assert _compatibility.unsupported_message(_compatibility.installed_versions()) is None


def run_import(jax_version: str, **env) -> subprocess.CompletedProcess:
    """Imports xlabind in a new process where the installed jax says `jax_version`."""
    script = (
        "import importlib.metadata as m\n"
        "real = m.version\n"
        f"m.version = lambda name: {jax_version!r} if name in ('jax', 'jaxlib') else real(name)\n"
        "import xlabind\n"
        "print('imported', xlabind.__version__)\n")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**__import__("os").environ, **env})


def test_importing_beside_an_unsupported_jax_is_an_error_naming_the_range():
    done = run_import("0.8.0")
    assert done.returncode != 0
    assert re.search(r"ImportError: xlabind supports jax>=0\.9\.1,<0\.13, jaxlib>=0\.9\.1,<0\.13"
                     r".*found jax 0\.8\.0, jaxlib 0\.8\.0", done.stderr), done.stderr[-2000:]


def test_the_override_turns_the_error_into_a_warning():
    done = run_import("0.13.0", **{_compatibility.OVERRIDE: "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "imported" in done.stdout and "RuntimeWarning: xlabind supports" in done.stderr


def test_this_jax_imports_cleanly():
    assert _compatibility.is_supported("jax", jax.__version__)
