"""The versions of jax, jaxlib, NumPy and ml_dtypes this xlabind works with.

One table feeds both the wheel's ``Requires-Dist`` (tools/build_wheel.py) and
the check at import, so the two cannot disagree. Each range is what the test
suite ran against: the lower bound is the locked version of
third_party/python/lower_bound.in, the upper bound the first minor version no
test has run on.

Why jaxlib 0.9.1: xlabind's handlers are compiled against the XLA FFI headers
of the build's jaxlib (API version 0.3), and XLA refuses to register a
handler built for a newer API than its own; jaxlib 0.9.1 is the first with
API 0.3. This module imports nothing heavy: it runs before anything else.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import warnings

#: {distribution: (lowest supported version, first unsupported version)}
SUPPORTED: dict[str, tuple[str, str]] = {
    "jax": ("0.9.1", "0.13"),
    "jaxlib": ("0.9.1", "0.13"),
    "numpy": ("2.1", "3"),
    "ml_dtypes": ("0.5", "0.7"),
}

#: Set to 1 to import beside versions outside SUPPORTED (a warning, not an error).
OVERRIDE = "XLABIND_ALLOW_UNSUPPORTED_VERSIONS"


def requirement(name: str) -> str:
    """A PEP 508 requirement, e.g. ``jax>=0.9.1,<0.13``."""
    low, high = SUPPORTED[name]
    return f"{name}>={low},<{high}"


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


def is_supported(name: str, version: str) -> bool:
    low, high = SUPPORTED[name]
    return version_tuple(low) <= version_tuple(version) < version_tuple(high)


def installed_versions() -> dict[str, str | None]:
    """The installed version of each package in SUPPORTED (None if not found)."""
    found: dict[str, str | None] = {}
    for name in SUPPORTED:
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


def unsupported_message(versions: dict[str, str | None]) -> str | None:
    """What is wrong with `versions`, or None when every one is supported."""
    wrong = {name: version for name, version in versions.items()
             if version is not None and not is_supported(name, version)}
    if not wrong:
        return None
    found = ", ".join(f"{name} {version}" for name, version in wrong.items())
    wanted = " ".join(f"'{requirement(name)}'" for name in wrong)
    return (f"xlabind supports {', '.join(requirement(n) for n in SUPPORTED)}; found {found}. "
            f"Install supported versions (pip install {wanted}) or an xlabind built for "
            f"yours; or set {OVERRIDE}=1 to try anyway (jaxlib before 0.9.1 refuses "
            f"xlabind's handlers: they use XLA FFI API 0.3).")


def check() -> None:
    """Raises ImportError when an installed version is outside SUPPORTED."""
    message = unsupported_message(installed_versions())
    if message is None:
        return
    if os.environ.get(OVERRIDE) == "1":
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        return
    raise ImportError(message)
