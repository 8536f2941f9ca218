"""The versions of jax, jaxlib, NumPy and ml_dtypes this xlabind works with.

Two tables, one rule: only what is known to fail refuses.

* ``TESTED``: what the test suite ran against. The lower bound is the locked
  version of third_party/python/lower_bound.in, the upper bound the minor
  version after third_party/python/newest.in's (CI runs the whole suite on
  the pinned and the newest lock, tools/check_newest.sh for the latter, and
  the suite's core on the lower bound). Outside it (newer, or older but above
  the floor) xlabind imports with one ``UntestedVersionWarning``: newer
  releases of these keep what xlabind uses (XLA's FFI api_version 1 is
  ABI-stable across jaxlib releases, NumPy's C API across 2.x, ml_dtypes'
  types are looked up by name), and a refusal would only stop a user from
  finding out.
* ``FLOORS``: what is known to fail below it, and why. There the import is
  an ImportError that says so (``XLABIND_ALLOW_UNSUPPORTED_VERSIONS=1``
  turns it into a warning).

The wheel's ``Requires-Dist`` is the tested lower bound with no upper cap
(tools/build_wheel.py), by the same rule: pip may install a newer release
beside xlabind, and the import says it is untested. This module imports
nothing heavy: it runs before anything else.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import warnings

#: {distribution: (lowest version tested, first version no test has run on)}
TESTED: dict[str, tuple[str, str]] = {
    "jax": ("0.9.1", "0.13"),
    "jaxlib": ("0.9.1", "0.13"),
    "numpy": ("2.1", "2.6"),
    "ml_dtypes": ("0.5", "0.8"),
}

#: {distribution: (first version that works, why an older one cannot)}
FLOORS: dict[str, tuple[str, str]] = {
    "jaxlib": (
        "0.9.1",
        "XLA refuses xlabind's handlers: they are built for XLA FFI API 0.3, "
        "which jaxlib 0.9.1 introduced",
    ),
    "jax": (
        "0.9.1",
        "it comes with a jaxlib older than 0.9.1, whose XLA refuses xlabind's "
        "handlers (XLA FFI API 0.3)",
    ),
    "numpy": ("2.0", "xlabind's compiled modules use NumPy 2's C API"),
}

#: Set to 1 to import beside versions below FLOORS (a warning, not an error).
OVERRIDE = "XLABIND_ALLOW_UNSUPPORTED_VERSIONS"


class UntestedVersionWarning(UserWarning):
    """xlabind imported beside a version of jax, jaxlib, NumPy or ml_dtypes
    that its tests have not run against: it should work, and says so once.

    It comes while ``import xlabind`` runs, before the class can be named: a
    filter silences it by its message.

    Example:
      >>> import warnings
      >>> warnings.filterwarnings("ignore", message="xlabind's tests have not run")
      >>> import xlabind
      >>> issubclass(xlabind.UntestedVersionWarning, UserWarning)
      True
    """


def requirement(name: str) -> str:
    """The wheel's PEP 508 requirement, e.g. ``jax>=0.9.1``: the tested lower
    bound, no upper cap."""
    return f"{name}>={TESTED[name][0]}"


def version_tuple(version: str) -> tuple[int, ...]:
    """The leading release numbers: '0.10.2.dev20260101' -> (0, 10, 2)."""
    numbers = []
    for part in version.split("."):
        match = re.match(r"\d+", part)
        if match is None:
            break
        numbers.append(int(match.group()))
        if match.end() != len(part):  # '2rc1': a pre-release of 2
            break
    return tuple(numbers)


def is_tested(name: str, version: str) -> bool:
    low, high = TESTED[name]
    return version_tuple(low) <= version_tuple(version) < version_tuple(high)


def works(name: str, version: str) -> bool:
    """Whether `version` is at or above the floor of what is known to work."""
    floor = FLOORS.get(name)
    return floor is None or version_tuple(version) >= version_tuple(floor[0])


def installed_versions() -> dict[str, str | None]:
    """The installed version of each package in TESTED (None if not found)."""
    found: dict[str, str | None] = {}
    for name in TESTED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    if found["jax"] is None or found["jaxlib"] is None:
        # Installed without metadata (a source tree on sys.path): ask the modules.
        import jax
        import jaxlib.version

        found["jax"] = found["jax"] or jax.__version__
        found["jaxlib"] = found["jaxlib"] or jaxlib.version.__version__
    return found


def failing_message(versions: dict[str, str | None]) -> str | None:
    """Why `versions` cannot work (some are below their FLOORS), or None."""
    below = {
        name: version
        for name, version in versions.items()
        if version is not None and not works(name, version)
    }
    if not below:
        return None
    reasons = "; ".join(
        f"{name} {version} is older than {FLOORS[name][0]}: {FLOORS[name][1]}"
        for name, version in below.items()
    )
    wanted = " ".join(f"'{name}>={FLOORS[name][0]}'" for name in below)
    return (
        f"xlabind cannot work here: {reasons}. Install newer versions (pip install "
        f"{wanted}), or set {OVERRIDE}=1 to try anyway."
    )


def untested_message(versions: dict[str, str | None]) -> str | None:
    """Which of `versions` (that work) the tests have not run against, or None."""
    untested = {
        name: version
        for name, version in versions.items()
        if version is not None and works(name, version) and not is_tested(name, version)
    }
    if not untested:
        return None
    found = ", ".join(f"{name} {version}" for name, version in untested.items())
    ranges = ", ".join(f"{name} >={TESTED[name][0]},<{TESTED[name][1]}" for name in untested)
    return (
        f"xlabind's tests have not run beside {found} (they ran on {ranges}); it should "
        f"work, since newer releases keep what xlabind uses. Please report what does not: "
        f"`python -m xlabind` prints what this installation can do."
    )


def check() -> None:
    """Raises ImportError where an installed version is known to fail; warns
    once where one is untested."""
    versions = installed_versions()
    failing = failing_message(versions)
    if failing is not None:
        if os.environ.get(OVERRIDE) != "1":
            raise ImportError(failing)
        warnings.warn(failing, RuntimeWarning, stacklevel=3)
    untested = untested_message(versions)
    if untested is not None:
        warnings.warn(untested, UntestedVersionWarning, stacklevel=3)
