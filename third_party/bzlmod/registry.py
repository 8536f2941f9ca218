#!/usr/bin/env python3
"""Writes a Bazel module registry that serves bzlmod offline (tools/bazel7).

Bazel 7's own `bazel_tools` module depends on modules it would fetch from
the Bazel Central Registry. Debian's bazel-bootstrap ships the sources of
most of them under /usr/share/bazel; this registry points at those
(`local_path` sources) and adds empty stand-ins for the few Debian lacks
and nothing here builds with (protobuf, zlib, apple_support, buildozer).

    python3 registry.py DIR [--share /usr/share/bazel]

Each module version is DIR/modules/NAME/VERSION/{MODULE.bazel,source.json},
beside DIR/bazel_registry.json: Bazel's documented registry layout.
"""

from __future__ import annotations

import argparse
import json
import pathlib

# name -> (versions, the folder under the share that holds its source).
DEBIAN = {
    "rules_cc": (("0.0.9", "0.0.11"), "rules/cc"),
    "rules_java": (("7.6.5",), "rules/java"),
    "rules_license": (("0.0.3", "0.0.7"), "rules/license"),
    "rules_proto": (("4.0.0", "6.0.0"), "rules/proto"),
    "rules_python": (("0.22.1",), "rules/python"),
    "platforms": (("0.0.9", "0.0.10"), "tools/platforms"),
    "bazel_skylib": (("1.6.1", "1.9.1"), "tools/skylib"),
    "bazel_features": (("1.11.0",), "tools/features"),
}

# name -> (versions, extra files): modules with nothing in them, for the
# dependencies of bazel_tools that no target here loads.
STAND_INS = {
    "protobuf": (("3.19.6", "21.7"), {}),
    "zlib": (("1.3.1.bcr.3",), {}),
    "apple_support": (("1.23.1",), {}),
    "buildozer": (
        ("7.1.2",),
        {
            "buildozer_binary.bzl": (
                '"""A stand-in: an empty buildozer_binary repository."""\n\n'
                "def _repository(ctx):\n"
                '    ctx.file("BUILD.bazel", "")\n\n'
                "_empty = repository_rule(implementation = _repository)\n\n"
                "def _extension(ctx):\n"
                '    _empty(name = "buildozer_binary")\n\n'
                "buildozer_binary = module_extension(implementation = _extension)\n"
            ),
        },
    ),
}


def _module_file(name: str, version: str, source: pathlib.Path | None) -> str:
    """The registry's MODULE.bazel: the source's own, at this version."""
    header = f'module(name = "{name}", version = "{version}")\n'
    if source is None or not (source / "MODULE.bazel").is_file():
        return header
    lines = (source / "MODULE.bazel").read_text().splitlines(keepends=True)
    body, depth, skipping = [], 0, False
    for line in lines:  # drop the source's module(...) call, keep the rest
        if not skipping and line.lstrip().startswith("module("):
            skipping = True
        if skipping:
            depth += line.count("(") - line.count(")")
            if depth <= 0:
                skipping = False
            continue
        body.append(line)
    return header + "".join(body)


def write(registry: pathlib.Path, share: pathlib.Path) -> None:
    registry.mkdir(parents=True, exist_ok=True)
    (registry / "bazel_registry.json").write_text(
        json.dumps({"mirrors": [], "module_base_path": "/"})
    )
    for name, (versions, folder) in DEBIAN.items():
        source = share / folder
        for version in versions:
            entry = registry / "modules" / name / version
            entry.mkdir(parents=True, exist_ok=True)
            (entry / "MODULE.bazel").write_text(_module_file(name, version, source))
            (entry / "source.json").write_text(
                json.dumps({"type": "local_path", "path": str(source)})
            )
    for name, (versions, files) in STAND_INS.items():
        for version in versions:
            entry = registry / "modules" / name / version
            content = registry / "stand_ins" / name / version
            content.mkdir(parents=True, exist_ok=True)
            entry.mkdir(parents=True, exist_ok=True)
            module = (
                f'module(name = "{name}", version = "{version}"'
                + (', repo_name = "com_google_protobuf"' if name == "protobuf" else "")
                + ")\n"
            )
            (content / "MODULE.bazel").write_text(module)
            (content / "BUILD.bazel").write_text("")
            for filename, text in files.items():
                (content / filename).write_text(text)
            (entry / "MODULE.bazel").write_text(module)
            (entry / "source.json").write_text(
                json.dumps({"type": "local_path", "path": str(content)})
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("registry", type=pathlib.Path)
    parser.add_argument("--share", type=pathlib.Path, default=pathlib.Path("/usr/share/bazel"))
    args = parser.parse_args()
    write(args.registry, args.share)


if __name__ == "__main__":
    main()
