"""xlabind's native API outside Bazel: the headers and the CMake package this
installation holds, and the generator of an extension module's source.

A C++ or CUDA handler library written against ``xlabind/native/*.h`` builds
with any build system given two include folders: :func:`include_dir` and
``jax.ffi.include_dir()`` (XLA's header-only FFI API). With CMake::

    find_package(xlabind CONFIG REQUIRED)   # -Dxlabind_DIR=$(python -m xlabind --cmake-dir)
    xlabind_add_extension(my_ops HANDLERS handlers.json SOURCES my_op.cc)

gives the Python module ``my_ops`` that :func:`xlabind.register_ffi_targets`
takes (docs/native/cmake.md). From a shell: ``python -m xlabind --includes``
prints the compiler flags, ``python -m xlabind --cmake-dir`` the folder.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

# Not resolved: in Bazel's runfiles the headers lie beside this file's link, not
# beside the source it links to.
_PACKAGE = pathlib.Path(os.path.abspath(__file__)).parent


def include_dir() -> str:
    """The folder that holds ``xlabind/native/*.h``: pass it with ``-I``,
    beside ``jax.ffi.include_dir()``.

    Example:
      >>> import pathlib, xlabind
      >>> (pathlib.Path(xlabind.include_dir()) / "xlabind/native/errors.h").is_file()
      True
    """
    return str(_PACKAGE / "include")


def cmake_dir() -> str:
    """The folder of ``xlabindConfig.cmake``: give it to CMake as
    ``xlabind_DIR`` (or on ``CMAKE_PREFIX_PATH``) for
    ``find_package(xlabind CONFIG)``.

    Example:
      >>> import pathlib, xlabind
      >>> (pathlib.Path(xlabind.cmake_dir()) / "xlabindConfig.cmake").is_file()
      True
    """
    return str(_PACKAGE / "cmake")


def _generator() -> dict[str, Any]:
    """The names extension_module.bzl defines: the one generator of a module's
    source, written in the part of Starlark that is also Python (the
    xlabind_extension Bazel macro runs the same file)."""

    def fail(message: str) -> NoReturn:
        raise ValueError(message)

    namespace: dict[str, Any] = {"fail": fail}
    exec((_PACKAGE / "cmake" / "extension_module.bzl").read_text(), namespace)
    return namespace


def extension_source(
    module: str,
    handlers: Mapping[str, Mapping[str, Any]],
    state_types: Mapping[str, Sequence[str]] | None = None,
    platforms: Sequence[str] | None = None,
) -> str:
    """The C++ source of the Python extension module `module`, as Bazel's
    ``xlabind_extension`` makes it: ``handlers`` is ``{platform: {FFI target:
    C symbol or {stage: C symbol}}}``, ``state_types`` ``{platform: [symbol,
    ...]}`` (xlabind/native/state.h). With ``platforms``, only those platforms'
    entries (a CPU-only build leaves "cuda" out)."""
    generator = _generator()
    if platforms is not None:
        keep = {p.lower() for p in platforms}
        handlers = {p: t for p, t in handlers.items() if p.lower() in keep}
        state_types = {p: t for p, t in (state_types or {}).items() if p.lower() in keep}
    substitutions = generator["extension_module_substitutions"](
        module,
        generator["module_handlers"](module, dict(handlers)),
        generator["module_state_types"](module, dict(state_types or {})),
    )
    text = (_PACKAGE / "cmake" / "extension_module.cc.tmpl").read_text()
    for placeholder, value in substitutions.items():
        text = text.replace(placeholder, value)
    return text


def _load(spec: str, option: str) -> Any:
    """A dict from FILE.json, or from the variable VAR of FILE:VAR (a .bzl or
    .py file of plain literals and xlabind_handler calls, such as a Bazel
    workspace's handler table; its load() statements do nothing here)."""
    path, _, variable = spec.partition(":")
    text = pathlib.Path(path).read_text()
    if not variable:
        return json.loads(text)
    namespace: dict[str, Any] = {
        "load": lambda *_: None,
        "xlabind_handler": _generator()["handler"],
    }
    exec(compile(text, path, "exec"), namespace)
    if variable not in namespace:
        raise SystemExit(
            f"xlabind._generate_extension: {option} {spec}: {path} defines no {variable}"
        )
    return namespace[variable]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m xlabind._generate_extension --module NAME --handlers
    FILE[:VAR] [--state-types FILE:VAR] [--platforms cpu,cuda] --out
    SOURCE.cc``: writes the module's source (what ``xlabind_add_extension``
    runs)."""
    parser = argparse.ArgumentParser(
        prog="python -m xlabind._generate_extension", description=main.__doc__
    )
    parser.add_argument("--module", required=True)
    parser.add_argument(
        "--handlers", required=True, help="FILE.json, or FILE:VARIABLE of a .bzl/.py file"
    )
    parser.add_argument("--state-types", help="FILE.json or FILE:VARIABLE")
    parser.add_argument("--platforms", help="comma-separated: only these (default: all)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    handlers = _load(args.handlers, "--handlers")
    if isinstance(handlers, dict) and "handlers" in handlers and not args.state_types:
        # One JSON file: {"handlers": {...}, "state_types": {...}}.
        handlers, state_types = handlers["handlers"], handlers.get("state_types")
    else:
        state_types = _load(args.state_types, "--state-types") if args.state_types else None
    platforms = args.platforms.split(",") if args.platforms else None
    source = extension_source(args.module, handlers, state_types, platforms)
    out = pathlib.Path(args.out)
    if not out.exists() or out.read_text() != source:  # unchanged: no rebuild
        out.write_text(source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
