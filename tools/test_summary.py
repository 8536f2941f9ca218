#!/usr/bin/env python3
"""Sums the pytest results of the last `bazel test` run, one line per target.

Prints 'N passed, N failed, N skipped' last; exits 1 if any test failed or a
target's log has no pytest summary (a target that ran nothing).
"""

import pathlib
import re
import sys

COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def main() -> int:
    logs = sorted(pathlib.Path("bazel-testlogs").resolve().glob("**/test.log"))
    # A sharded target's results are its shards' logs (shard_1_of_2/...); a
    # log beside them is left from before it was sharded.
    logs = [log for log in logs if not any(log.parent.glob("shard_*_of_*"))]
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    silent = []
    for log in logs:
        summary = [
            line
            for line in log.read_text(errors="replace").splitlines()
            if re.search(r"\d+ (passed|failed|skipped)", line) and " in " in line
        ]
        target = str(log.parent.relative_to(pathlib.Path("bazel-testlogs").resolve()))
        if not summary:
            # Not a pytest target (e.g. the demo): counted by its exit status.
            status = "passed" if "demo OK" in log.read_text(errors="replace") else "no summary"
            if status == "passed":
                totals["passed"] += 1
            else:
                silent.append(target)
            print(f"  //{target}: {status}")
            continue
        counts = {kind: int(n) for n, kind in COUNT.findall(summary[-1])}
        for kind in ("failed", "errors", "error"):
            totals["failed"] += counts.get(kind, 0)
        totals["passed"] += counts.get("passed", 0)
        totals["skipped"] += counts.get("skipped", 0)
        print(f"  //{target}: {summary[-1].strip('= ')}")
    if silent:
        print(f"targets without a result: {', '.join(silent)}")
        totals["failed"] += len(silent)
    print(
        f"tests: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped"
    )
    return 1 if totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
