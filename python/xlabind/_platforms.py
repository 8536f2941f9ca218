"""The platforms xlabind binds functions for, as users may spell them: 'cpu',
'cuda' and 'tpu' in any case, one name or a sequence of them. A TPU runs a
Python function on the host (the CPU function, unless one is given for
'tpu'); it runs no native FFI handler."""

from __future__ import annotations

from typing import Any

#: Platforms, as jax's lowering rules name them.
PLATFORMS = ("cpu", "cuda", "tpu")

#: How each is named in XLA's FFI registry (jax.ffi.register_ffi_target).
REGISTRY_NAMES = {"cpu": "cpu", "cuda": "CUDA"}


def platform_name(where: str, platform: Any) -> str:
    """'cpu', 'cuda' or 'tpu' for `platform` in any case; a ValueError naming
    `where` for anything else."""
    if isinstance(platform, str) and platform.lower() in PLATFORMS:
        return platform.lower()
    raise ValueError(
        f"{where}: unknown platform {platform!r}; use 'cpu' or 'cuda' (any case), or 'tpu' "
        f"for a Python function"
    )


def platform_names(where: str, platforms: Any) -> tuple[str, ...]:
    """The platforms of a ``platforms=`` argument: one name, or a sequence of
    them (each once, in order)."""
    if isinstance(platforms, str):
        platforms = (platforms,)
    try:
        names = [platform_name(where, p) for p in platforms]
    except TypeError:
        raise TypeError(
            f"{where}: platforms must be 'cpu', 'cuda', 'tpu' or a sequence of them, "
            f"got {platforms!r}"
        ) from None
    if not names:
        raise ValueError(f"{where}: platforms is empty; give 'cpu', 'cuda' and/or 'tpu'")
    return tuple(dict.fromkeys(names))
