#!/usr/bin/env python3
"""The TPU check, for the TPU machine (one chip; no Bazel, no network there).

    PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index \\
        --no-deps --no-compile --no-cache-dir --target /tmp/site xlabind-*-cp311-*.whl
    PYTHONPATH=$PYTHONPATH:/tmp/site python3 tools/tpu_check.py [TEST_FILE ...]

In one process (one program at a time may hold the chip): the installation's
report (`python -m xlabind`), the TPU test files on the chip
(tests/tpu/, or the files named), then the benchmark's TPU rows (tools/benchmarks/tpu_calls.py,
tpu_ops.py). Every line goes to stdout and, as it comes,
to $OUT/tpu_check.md (else ./tpu_check.md), so a time box loses nothing
already measured. Exits 1 when a test failed. About 6 minutes on a v5e
(2026-12-05), start-up of the chip included.
"""

from __future__ import annotations

import os
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
TPU_TESTS = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests" / "tpu").glob("test_*.py"))


class Log:
    def __init__(self, path: pathlib.Path):
        self.file = path.open("a")

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.file.write(line + "\n")
        self.file.flush()


def main() -> int:
    log = Log(pathlib.Path(os.environ.get("OUT", ".")) / "tpu_check.md")
    start = time.perf_counter()
    import jax

    import xlabind
    from xlabind import __main__ as report

    log(f"# TPU check: xlabind {xlabind.__version__} from {xlabind.__file__}")
    log(f"jax {jax.__version__}, devices {jax.devices()}")
    if jax.default_backend() != "tpu":
        log("no TPU visible to jax: nothing to check here")
        return 1
    lines, _ = report.report()
    log("\n## python -m xlabind\n")
    for line in lines:
        log(f"    {line}")

    import pytest

    log("\n## Tests on the chip\n")
    os.chdir(REPO)
    sys.path.insert(0, str(REPO / "tests" / "support"))  # what the TPU tests share
    out = pathlib.Path(os.environ.get("OUT", "."))
    failed = pytest.main(
        [
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            f"--junitxml={out.resolve() / 'tpu_tests.xml'}",  # each test's outcome
            *(sys.argv[1:] or TPU_TESTS),
        ]
    )
    log(f"pytest exit status {int(failed)} after {time.perf_counter() - start:.0f} s")

    sys.path.insert(0, str(REPO / "tools" / "benchmarks"))  # its modules import each other
    import tpu_calls
    import tpu_ops

    log("\n## Cost of a call (medians)\n")
    for line in tpu_calls.table_lines():
        log(line)
    log("\n## xlabind.ops on the chip (medians)\n")
    for line in tpu_ops.table_lines():
        log(line)
    log(f"\ndone in {time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
