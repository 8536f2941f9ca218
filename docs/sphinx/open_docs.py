"""Serves the documentation site (//docs/sphinx:html) on http://127.0.0.1 until
interrupted, and prints the address to open. Over http, as a browser needs it
for search to show snippets (it fetches the pages it found; a file:// page
may not).

    tools/bazel run //docs/sphinx:open [-- --port 8000] [-- --into DIR]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import pathlib
import shutil
import sys
import tempfile
import zipfile

SITE = pathlib.Path(__file__).resolve().parent / "html.zip"


def unpack(folder: pathlib.Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    with zipfile.ZipFile(SITE) as archive:
        archive.extractall(folder)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per request is noise here
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000, help="0: any free port")
    parser.add_argument("--into", help="where to unpack the site (default: a temporary folder)")
    args = parser.parse_args(argv)
    folder = pathlib.Path(args.into or tempfile.mkdtemp(prefix="xlabind-docs-")).resolve()
    unpack(folder)
    handler = functools.partial(_QuietHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler) as server:
        print(
            f"xlabind's documentation: http://127.0.0.1:{server.server_address[1]}/ "
            f"(from {folder}; Ctrl-C stops)",
            flush=True,
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
