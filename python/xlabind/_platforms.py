"""The platform table: one record per platform a program can be lowered for,
saying how a bound function's call lowers there. The lowering rule
(_lowering/rule.py), the implementations (_runtime/), the FFI registry
(_runtime/extension.py), `python -m xlabind` and the tests read it; adding a
platform is adding a record.

Users spell platforms 'cpu', 'cuda' and 'tpu' in any case, one name or a
sequence of them. A TPU runs a Python function on the host (the CPU
function, unless one is given for 'tpu') and a native target through its
JAX formulation for 'tpu', if it has one; it runs no native FFI handler.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

#: How a Python function's call runs on a platform: "buffers", a custom call
#: of xlabind's callback handler on XLA's own buffers; "host_transfers",
#: XLA's send/recv host transfers around a host callback (as jax's own
#: callbacks run on a TPU); None, refused.
PythonCalls = Literal["buffers", "host_transfers"] | None


@dataclasses.dataclass(frozen=True)
class DeviceCheck:
    """The repository's checks of one platform's device, for the device runbook
    (tools/device_check.py); paths are relative to the repository."""

    #: The test folder whose files need the device.
    tests: str
    #: The script that prints the device's benchmark rows as Markdown.
    benchmark: str
    #: A pytest -k expression of tests in `tests` that may kill their process
    #: on the device: they run in a pytest process of their own after the
    #: rest, each alone if one kills it.
    isolated: str | None = None
    #: The compiled module of the platform's native ops, and the runtime
    #: library it must load from a Python package (the wheel's extra), not a
    #: system toolkit users may not have.
    native_module: str | None = None
    runtime_library: str | None = None


@dataclasses.dataclass(frozen=True)
class Platform:
    """How a call lowers on one platform."""

    #: As jax's lowering rules name it.
    name: str
    #: Its name in XLA's FFI registry (jax.ffi.register_ffi_target), or None
    #: where XLA runs no user FFI handlers: there a native target lowers as
    #: its JAX formulation for this platform, or is refused.
    registry_name: str | None
    python_calls: PythonCalls
    #: The platform whose Python function runs here when none is given for
    #: this one (a TPU runs the CPU function on host copies).
    python_fallback: str | None = None
    #: Why nothing runs here, for the refusal (None: something does).
    refusal: str | None = None
    #: What tools/device_check.py runs on a machine with this platform's
    #: device (None: nothing, no device to check). Not installed code's
    #: concern, but kept here so that adding a platform is adding a record.
    device_check: DeviceCheck | None = None

    @property
    def host_transfers(self) -> bool:
        return self.python_calls == "host_transfers"

    @property
    def runs_handlers(self) -> bool:
        return self.registry_name is not None

    @property
    def places_python_calls(self) -> bool:
        """Whether a Python function's call may be placed per device by its
        sharding rule (partitioning.py). Host transfers run once per program,
        on the first device, as jax.pure_callback's do: XLA partitions no
        host transfer."""
        return self.python_calls == "buffers"

    @property
    def python_lowering_cacheable(self) -> bool:
        """Whether two alike Python calls may share one lowering: each host
        transfer needs a channel of its own (jax lowers its own callbacks
        uncached for this)."""
        return not self.host_transfers


#: Every platform jax can lower for that xlabind knows, by jax's name.
PLATFORMS: dict[str, Platform] = {
    p.name: p
    for p in (
        Platform("cpu", registry_name="cpu", python_calls="buffers"),
        Platform(
            "cuda",
            registry_name="CUDA",
            python_calls="buffers",
            device_check=DeviceCheck(
                tests="tests/gpu",
                benchmark="tools/benchmarks/cuda_rows.py",
                native_module="_xlabind_cuda_ops",
                runtime_library="libcudart",
            ),
        ),
        Platform(
            "tpu",
            registry_name=None,
            python_calls="host_transfers",
            python_fallback="cpu",
            device_check=DeviceCheck(
                tests="tests/tpu",
                benchmark="tools/benchmarks/tpu_ops.py",
                # Sub-byte and 8-bit float arrays through host transfers.
                isolated="narrow",
            ),
        ),
        Platform(
            "rocm",
            registry_name=None,
            python_calls=None,
            refusal="xlabind runs on CPU, CUDA and TPU devices only",
        ),
    )
}

#: The platforms users may name in ``platforms=``: those where something runs.
USER_PLATFORMS = tuple(name for name, p in PLATFORMS.items() if p.refusal is None)

#: How each platform that runs FFI handlers names itself in XLA's registry.
REGISTRY_NAMES = {p.name: p.registry_name for p in PLATFORMS.values() if p.registry_name}

#: Whether every platform lets alike Python calls share a lowering (jax's
#: lowering cache is per primitive, not per platform).
PYTHON_LOWERING_CACHEABLE = all(p.python_lowering_cacheable for p in PLATFORMS.values())


def platform_record(name: str) -> Platform:
    """The record of the platform a program is lowered for; one that xlabind
    does not know is refused by name."""
    record = PLATFORMS.get(name)
    if record is None:
        return Platform(
            name,
            registry_name=None,
            python_calls=None,
            refusal=f"xlabind knows no platform {name!r} (it runs on {', '.join(USER_PLATFORMS)})",
        )
    return record


def platform_name(where: str, platform: Any) -> str:
    """'cpu', 'cuda' or 'tpu' for `platform` in any case; a ValueError naming
    `where` for anything else."""
    if isinstance(platform, str) and platform.lower() in USER_PLATFORMS:
        return platform.lower()
    raise ValueError(
        f"{where}: unknown platform {platform!r}; use 'cpu' or 'cuda' (any case), or 'tpu' "
        f"for a Python function or a JAX formulation"
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
