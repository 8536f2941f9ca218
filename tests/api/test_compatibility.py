"""The versions xlabind works with: one table for the wheel's lower bounds and
the import check, whose lower bound is the lower-bound lock and which holds
the pinned lock's versions. Only what is known to fail refuses (jaxlib below
the FFI API floor, NumPy 1); an untested newer release warns once and works."""

import os
import pathlib
import re
import subprocess
import sys

import jax
import pytest

from xlabind import _compatibility

LOCKS = pathlib.Path(__file__).parents[2] / "third_party" / "python"


def pins(name: str) -> dict[str, str]:
    text = (LOCKS / name).read_text()
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, flags=re.M))


def test_the_lower_bounds_are_the_lower_bound_lock():
    lowest = pins("lower_bound.in")
    for name, (low, _) in _compatibility.TESTED.items():
        assert (_compatibility.version_tuple(low) + (0, 0))[:3] == (
            _compatibility.version_tuple(lowest[name]) + (0, 0)
        )[:3], name


def test_the_upper_bounds_follow_the_newest_lock():
    """CI runs the whole suite on newest.lock (tools/check_newest.sh): the
    first untested version is the next minor release after it."""
    newest = pins("newest.in")
    for name, (_, high) in _compatibility.TESTED.items():
        major, minor = _compatibility.version_tuple(newest[name])[:2]
        assert _compatibility.version_tuple(high) == (major, minor + 1), (name, high)


def test_the_pinned_versions_are_tested_and_above_every_floor():
    pinned = pins("requirements.in")
    for name in _compatibility.TESTED:
        assert _compatibility.is_tested(name, pinned[name]), (name, pinned[name])
    for name, (floor, _) in _compatibility.FLOORS.items():
        assert _compatibility.is_tested(name, floor) or _compatibility.version_tuple(
            floor
        ) < _compatibility.version_tuple(_compatibility.TESTED[name][0]), name


@pytest.mark.parametrize(
    "version, tested",
    [
        ("0.9.0.1", False),
        ("0.9.1", True),
        ("0.10.2", True),
        ("0.12.0.1", True),
        ("0.12.9.dev20270101", True),
        ("0.13.0", False),
        ("0.13.0rc1", False),
        ("1.0", False),
    ],
)
def test_versions_compare_by_their_release_numbers(version, tested):
    assert _compatibility.is_tested("jax", version) is tested


def test_the_requirements_are_lower_bounds_without_caps():
    for name, (low, _) in _compatibility.TESTED.items():
        assert _compatibility.requirement(name) == f"{name}>={low}"


def test_what_fails_says_why_and_the_way_out():
    message = _compatibility.failing_message(
        {"jax": "0.8.0", "jaxlib": "0.8.0", "numpy": "2.4.6", "ml_dtypes": None}
    )
    assert "jaxlib 0.8.0 is older than 0.9.1: XLA refuses xlabind's handlers" in message
    assert "numpy" not in message
    assert "pip install 'jax>=0.9.1' 'jaxlib>=0.9.1'" in message
    assert _compatibility.OVERRIDE in message
    assert "NumPy 2's C API" in _compatibility.failing_message({"numpy": "1.26.4"})
    assert _compatibility.failing_message(_compatibility.installed_versions()) is None
    # Untested but above every floor: no failure.
    assert (
        _compatibility.failing_message({"jax": "0.14.0", "ml_dtypes": "0.9.0", "numpy": "3.0.0"})
        is None
    )


def run_import(versions: dict[str, str], **env) -> subprocess.CompletedProcess:
    """Imports xlabind in a new process where the installed packages say `versions`."""
    script = (
        "import importlib.metadata as m\n"
        "real = m.version\n"
        f"fake = {versions!r}\n"
        "m.version = lambda name: fake.get(name) or real(name)\n"
        "import xlabind, jax.numpy as jnp\n"
        "op = xlabind.callback(lambda x: 2 * x, lambda x: x)\n"
        "print('imported', xlabind.__version__, op(jnp.ones(2)).tolist())\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )


def test_a_jaxlib_below_the_floor_is_an_error_saying_why():
    done = run_import({"jax": "0.8.0", "jaxlib": "0.8.0"})
    assert done.returncode != 0
    assert re.search(
        r"ImportError: xlabind cannot work here: jax 0\.8\.0 is older than 0\.9\.1.*"
        r"jaxlib 0\.8\.0 is older than 0\.9\.1: XLA refuses",
        done.stderr,
    ), done.stderr[-2000:]


@pytest.mark.parametrize(
    "versions", [{"ml_dtypes": "0.9.0"}, {"numpy": "2.7.0"}, {"jax": "0.14.0", "jaxlib": "0.14.0"}]
)
def test_an_untested_newer_release_warns_once_and_works(versions):
    done = run_import(versions)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "imported" in done.stdout and "[2.0, 2.0]" in done.stdout
    warnings = re.findall(
        r"UntestedVersionWarning: xlabind's tests have not run beside "
        r"([^(]*) \(",
        done.stderr,
    )
    assert len(warnings) == 1, done.stderr
    for name, version in versions.items():
        assert f"{name} {version}" in warnings[0]


def test_the_override_turns_the_error_into_a_warning():
    done = run_import({"jax": "0.8.0", "jaxlib": "0.8.0"}, **{_compatibility.OVERRIDE: "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "imported" in done.stdout and "RuntimeWarning: xlabind cannot work here" in done.stderr


def test_this_environment_imports_without_a_warning():
    for name, version in _compatibility.installed_versions().items():
        assert _compatibility.is_tested(name, version), (name, version)
    assert jax.__version__ == _compatibility.installed_versions()["jax"]
