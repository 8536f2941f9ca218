"""Unpacks the documentation site (//tools/docs:html) into a folder and prints
the address to open in a browser.

    tools/bazel run //tools/docs:open [-- --into DIR]   # default /tmp/xlabind-docs
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import zipfile

SITE = pathlib.Path(__file__).resolve().parent / "html.zip"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--into", default="/tmp/xlabind-docs")
    folder = pathlib.Path(parser.parse_args(argv).into).resolve()
    shutil.rmtree(folder, ignore_errors=True)
    with zipfile.ZipFile(SITE) as archive:
        archive.extractall(folder)
    print(f"xlabind's documentation: file://{folder / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
