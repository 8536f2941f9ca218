"""The platforms xlabind binds functions for, as users may spell them: 'cpu'
and 'cuda' in any case, one name or a sequence of them."""

from __future__ import annotations

from typing import Any

#: Platforms, as jax's lowering rules name them.
PLATFORMS = ("cpu", "cuda")

#: How each is named in XLA's FFI registry (jax.ffi.register_ffi_target).
REGISTRY_NAMES = {"cpu": "cpu", "cuda": "CUDA"}


def platform_name(where: str, platform: Any) -> str:
    """'cpu' or 'cuda' for `platform` in any case; a ValueError naming `where`
    for anything else."""
    if isinstance(platform, str) and platform.lower() in PLATFORMS:
        return platform.lower()
    raise ValueError(f"{where}: unknown platform {platform!r}; use 'cpu' or 'cuda' (any case)")


def platform_names(where: str, platforms: Any) -> tuple[str, ...]:
    """The platforms of a ``platforms=`` argument: one name, or a sequence of
    them (each once, in order)."""
    if isinstance(platforms, str):
        platforms = (platforms,)
    try:
        names = [platform_name(where, p) for p in platforms]
    except TypeError:
        raise TypeError(
            f"{where}: platforms must be 'cpu', 'cuda' or a sequence of them, got {platforms!r}"
        ) from None
    if not names:
        raise ValueError(f"{where}: platforms is empty; give 'cpu' and/or 'cuda'")
    return tuple(dict.fromkeys(names))
