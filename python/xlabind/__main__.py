"""`python -m xlabind`: what this installation can do, and why not where it
cannot — the first thing to run when something does not work
(docs/troubleshooting.md). Prints a report; exits 1 when a version is known
not to work (below its floor). (When xlabind cannot be imported at all, the ImportError
it raises instead is the report: it says what is wrong.) With --includes or
--cmake-dir it prints what a build of native handlers needs instead
(python/xlabind/native_build.py)."""

from __future__ import annotations

import sys


def report() -> tuple[list[str], bool]:
    """The report's lines, and whether every version is supported."""
    from xlabind import _compatibility

    lines = [
        f"Python {sys.version.split()[0]} (cp{sys.version_info.major}"
        f"{sys.version_info.minor}) at {sys.executable}"
    ]
    versions = _compatibility.installed_versions()
    for name, version in versions.items():
        low, high = _compatibility.TESTED[name]
        verdict = (
            "not installed"
            if version is None
            else (
                "tested"
                if _compatibility.is_tested(name, version)
                else "untested, should work"
                if _compatibility.works(name, version)
                else "TOO OLD"
            )
        )
        lines.append(f"{name} {version or ''}: {verdict} (xlabind's tests ran on >={low},<{high})")
    message = _compatibility.failing_message(versions)
    for text in (message, _compatibility.untested_message(versions)):
        if text:
            lines.append(text)
    import xlabind
    from xlabind import _jax_internals
    from xlabind._runtime import extension as _extension

    lines.append(f"xlabind {xlabind.__version__} at {xlabind.__file__}")

    import jax

    platforms: dict[str, list[str]] = {}
    for device in jax.devices():
        platforms.setdefault(device.platform, []).append(device.device_kind)
    lines.append(
        "jax devices: " + "; ".join(f"{p}: {len(d)} x {d[0]}" for p, d in platforms.items())
    )
    lines.append(
        "Python callbacks: CPU and CUDA handlers registered "
        f"({', '.join(sorted(_extension.REGISTRATIONS))})"
    )
    cpu_missing = [r for (p, _), r in _extension.UNAVAILABLE.items() if p == "cpu"]
    if cpu_missing:
        lines.append(f"native ops (xlabind.ops): unavailable — {cpu_missing[0]}")
    elif _extension.UNAVAILABLE:
        reason = next(iter(_extension.UNAVAILABLE.values()))
        lines.append(f"native CUDA kernels (xlabind.ops on GPUs): unavailable — {reason}")
    else:
        lines.append("native CUDA kernels (xlabind.ops on GPUs): available")
    if "gpu" not in platforms:
        lines.append(
            "no GPU visible to jax: CUDA callbacks and kernels lower, but run only "
            "where jax sees a CUDA device (pip install 'jax[cuda13]')"
        )
    lines.extend(platform_lines(platforms))
    cache = _jax_internals.config_flag("jax_compilation_cache_dir")
    if cache:
        lines.append(
            f"persistent compilation cache at {cache}: programs that call Python "
            "functions are written once and found by other processes, as native "
            "ones (a function is named by a key derived from what it is)"
        )
    return lines, message is None


def platform_lines(platforms: dict[str, list[str]]) -> list[str]:
    """What runs on each platform of the platform table (_platforms.py), for
    the devices jax sees (`platforms`: jax's device platform -> device kinds)."""
    from xlabind._platforms import PLATFORMS, USER_PLATFORMS

    how_python = {
        "buffers": "Python functions run on XLA's own buffers (no copies)",
        "host_transfers": (
            "Python functions run on the host through XLA's host callbacks (copies in and "
            "out, as jax.pure_callback)"
        ),
    }
    lines = []
    for name in USER_PLATFORMS:
        record = PLATFORMS[name]
        label = name.upper()
        if record.runs_handlers:
            native = "native FFI targets run as custom calls"
        else:
            native = (
                f"native FFI targets cannot run there (XLA on {label}s runs no user FFI "
                f"handlers) but through a JAX formulation for it, as xlabind.ops runs there "
                f"as JAX and Pallas kernels"
            )
        python = how_python.get(record.python_calls or "", "Python functions cannot run there")
        what = f"{python}; {native}"
        # jax names CUDA devices' platform "gpu".
        kinds = platforms.get(name) or (platforms.get("gpu") if name == "cuda" else None)
        if kinds:
            lines.append(f"{label} ({len(kinds)} x {kinds[0]}): {what}")
        else:
            lines.append(f"no {label} visible to jax; on a {label} machine, {what}")
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m xlabind",
        description="Without options: what this installation can do (a report).",
    )
    parser.add_argument(
        "--includes",
        action="store_true",
        help="print the -I flags a handler library needs: xlabind's headers and jax's FFI headers",
    )
    parser.add_argument(
        "--cmake-dir",
        action="store_true",
        help="print the folder of xlabindConfig.cmake (xlabind_DIR)",
    )
    args = parser.parse_args(argv)
    if args.includes or args.cmake_dir:
        from xlabind import native_build

        if args.includes:
            import jax.ffi

            print(f"-I{native_build.include_dir()} -I{jax.ffi.include_dir()}")
        if args.cmake_dir:
            print(native_build.cmake_dir())
        return 0
    lines, works = report()
    print("\n".join(lines))
    return 0 if works else 1


if __name__ == "__main__":
    sys.exit(main())
