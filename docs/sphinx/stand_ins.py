"""Stand-ins for xlabind's compiled modules, so that the documentation site
builds without compiling C++ or CUDA (`tools/bazel build //docs/sphinx:html_quick`).

What the site reads of the compiled modules is kept in compiled_modules.json:
each module's names, DeviceArray's docstrings and members (the API page of
xlabind.cuda), the element types behind xlabind.SUPPORTED_DTYPES, the size of
a call's status. The stand-ins hand those out and do nothing else: their
registries are empty, and any other function raises if called. The snapshot
is taken from the real modules,

    tools/bazel run //docs/sphinx:snapshot_compiled_modules -- --write

and tests/docs/test_quick_site.py holds it equal to the modules the build
compiles, and the quick site equal to the full site, file for file.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import pathlib
import sys
import types
from typing import Any

SNAPSHOT = pathlib.Path(__file__).resolve().parent / "compiled_modules.json"
MODULES = ("_xlabind", "_xlabind_ops", "_xlabind_cuda_ops")
# What every class has, which the snapshot leaves out.
_CLASS_PLUMBING = {"__module__", "__doc__", "__new__", "__init__", "__dict__", "__weakref__"}
# Functions that hand out registries: empty in the stand-ins (jax refuses to
# register anything but the compiled handlers' capsules).
_REGISTRIES = ("registrations", "status_registrations", "state_types", "callback_registrations")
# What xlabind's atexit functions call (python/xlabind/_runtime/extension.py).
_AT_EXIT = ("stop_forwarding_interrupts", "close_calls", "wait_for_held_threads", "keep_until_exit")


def _member_kind(value: Any) -> str:
    if isinstance(value, property):
        return "property"
    return "method" if callable(value) else "value"


def _class_entry(cls: type) -> dict[str, Any]:
    return {
        "module": cls.__module__,
        "doc": cls.__doc__,
        "members": [
            [name, _member_kind(value), getattr(value, "__doc__", None)]
            for name, value in vars(cls).items()
            if name not in _CLASS_PLUMBING
        ],
    }


def snapshot() -> dict[str, Any]:
    """What the site reads of the compiled modules, from the real ones."""
    taken: dict[str, Any] = {}
    for name in MODULES:
        module = importlib.import_module(f"xlabind.{name}")
        names = sorted(n for n in vars(module) if not n.startswith("__"))
        entry: dict[str, Any] = {
            "names": names,
            "classes": {
                n: _class_entry(getattr(module, n))
                for n in names
                if inspect.isclass(getattr(module, n))
            },
        }
        if name == "_xlabind":
            entry["status_bytes"] = module.status_bytes()
            # In the module's order: SUPPORTED_DTYPES is built in it.
            entry["element_type_names"] = [
                [code, dtype] for code, dtype in module.element_type_names().items()
            ]
        taken[name] = entry
    return taken


def _function(module: str, name: str, entry: dict[str, Any]) -> Any:
    if name in _REGISTRIES:
        return lambda *args, **kwargs: {}
    if name == "status_bytes":
        return lambda: entry["status_bytes"]
    if name == "element_type_names":
        return lambda: dict(entry["element_type_names"])
    if name in ("install_dtypes", "cuda_set_stream_probe", "set_checks_unwritten_results"):
        return lambda *args, **kwargs: None
    if name in _AT_EXIT:  # no call ever ran: nothing to wait for
        return lambda *args, **kwargs: 0

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"xlabind.{module}.{name}: the documentation build's stand-in "
            "(docs/sphinx/stand_ins.py) cannot run it"
        )

    return refuse


def _member(kind: str, doc: str | None) -> Any:
    if kind == "property":
        return property(doc=doc)
    if kind == "method":

        def method(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the documentation build's stand-in cannot run it")

        method.__doc__ = doc
        return method
    return doc


def _class(name: str, entry: dict[str, Any]) -> type:
    namespace: dict[str, Any] = {"__module__": entry["module"], "__doc__": entry["doc"]}
    for member, kind, doc in entry["members"]:
        namespace[member] = _member(kind, doc)
    return type(name, (), namespace)


def install(path: pathlib.Path = SNAPSHOT) -> None:
    """Puts the stand-ins where `import xlabind` finds its compiled modules;
    call it before anything imports xlabind."""
    taken = json.loads(path.read_text())
    for module_name, entry in taken.items():
        module = types.ModuleType(f"xlabind.{module_name}")
        module.__doc__ = f"A stand-in for {module_name} (docs/sphinx/stand_ins.py)."
        for name in entry["names"]:
            if name in entry["classes"]:
                value = _class(name, entry["classes"][name])
            else:
                value = _function(module_name, name, entry)
            setattr(module, name, value)
        sys.modules[module.__name__] = module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the snapshot")
    args = parser.parse_args(argv)
    text = json.dumps(snapshot(), indent=1, sort_keys=False) + "\n"
    if args.write:
        # Under `bazel run`, into the checkout (not the runfiles' copy).
        checkout = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
        path = pathlib.Path(checkout, "docs", "sphinx", SNAPSHOT.name) if checkout else SNAPSHOT
        path.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
