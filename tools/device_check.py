#!/usr/bin/env python3
"""The device runbook: a wheel on a machine with a GPU or a TPU (no Bazel, no
network there), checked as its users get it.

    python3 tools/device_check.py --wheel dist/xlabind-*.whl [--modules DIR]
        [--tests | --benchmarks] [--cases CASE ...] [--quick] [--cpu-tests]
        [--platform NAME] [--deadline S] [--out DIR] [PYTEST_ARG ...]

What it runs comes from the platform table's `device_check` records
(python/xlabind/_platforms.py): adding a platform is adding a record.

1. Installs the wheel as a user would: `pip install --no-index --no-deps
   --target OUT/site` (unpacked where this Python has no pip), OUT/site on
   PYTHONPATH after the machine's own packages, so the machine's jax stays
   first; --no-install uses the xlabind this Python imports. Then, in a
   process of its own: the installation's report (`python -m xlabind`), the
   devices jax sees (the platform, unless --platform names it), xlabind
   imported from OUT/site, and the platform's native ops loaded with their
   runtime library from a Python package (the wheel's extra; on the device
   machine jax's plugin brought it), never a system toolkit users may not
   have. The runtime found in the machine's packages is linked into OUT/site
   where the extra would have put it.
2. --tests: the record's test folder (or PYTEST_ARGs) on the device in one
   pytest process (one program at a time may hold a TPU), then the tests
   the record's `isolated` -k expression selects in a process of their own,
   and, if a test killed it, each of them alone: the test is named, and the
   rest still run.
   With --cpu-tests, the suite's core (tools/check_wheel.py's CORE_TESTS) on
   the CPU against the installed wheel too. The tests' own compiled module
   (examples/native_op's) comes from --modules DIR, built by Bazel on the
   build machine for the device machine's Python, as the wheel is
   (docs/development/commands.md says how).
3. --benchmarks: the record's benchmark rows (tools/benchmarks/cuda_rows.py,
   tpu_ops.py), --cases and --quick passed on.
Both by default. Every Markdown line goes to stdout and, as it comes, to
OUT/device_check.md (OUT: --out, else $OUT, else .); pytest's output to
OUT/logs/. One deadline (--deadline, default 570 s: a 10-minute command less
the machine's start) bounds the run: each step gets what is left, one that
runs out is stopped with its process group, its output so far kept, and
reported; steps with no time left are reported as not run; the summary comes
whatever failed. Exits 1 when a step failed, a test failed or timed out, or
no test passed on the device.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import re
import signal
import site
import subprocess
import sys
import sysconfig
import threading
import time
import zipfile

REPO = pathlib.Path(__file__).resolve().parent.parent


def _load(name: str, path: pathlib.Path):
    """A module of this checkout by its path: the platform table without
    importing xlabind (and jax, which would take the device from the steps)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolves its annotations here
    spec.loader.exec_module(module)
    return module


PLATFORMS = _load("xlabind_platforms", REPO / "python" / "xlabind" / "_platforms.py").PLATFORMS
#: Seconds kept at the end of the run for the summary.
SUMMARY_RESERVE = 10.0
#: What the main test run leaves the isolated tests' run at the least (on a
#: v5e, 14 of them together take about 30 s), and what that run (or one of
#: them, run again alone) may take at the most (a TPU program opens the chip
#: in 6-15 s).
ISOLATED_FLOOR, ISOLATED_CAP = 60.0, 120.0
COUNTS = re.compile(r"(\d+) (passed|failed|skipped|errors?)\b")

# Run in a process of its own with the installed wheel: what it imports from
# where, the report, the native modules' runtime libraries (read before jax
# opens a device, whose plugin may load a copy of its own), then which of the
# named platforms jax sees.
PROBE = """
import json, os, sys
import xlabind, xlabind.testing
facts = {"xlabind": xlabind.__file__, "loaded": {}, "load_errors": {}}
for module, library in json.loads(sys.argv[1]).items():
    try:
        xlabind.testing.load_compiled_module(module)
    except ImportError as error:
        facts["load_errors"][module] = str(error)
        continue
    maps = open("/proc/self/maps").read().splitlines()
    paths = {line.split()[-1] for line in maps if library in line}
    facts["loaded"][module] = sorted(os.path.realpath(p) for p in paths)
import jax
from xlabind import __main__ as report
facts["report"] = report.report()[0]
facts["platforms"] = []
for name in json.loads(sys.argv[2]):
    try:
        if jax.devices(name):
            facts["platforms"].append(name)
    except RuntimeError:
        pass
print(json.dumps(facts))
"""


class Log:
    """Markdown lines to stdout and to a file, each flushed as it comes."""

    def __init__(self, path: pathlib.Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("a")

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.file.write(line + "\n")
        self.file.flush()


def run_streamed(command: list[str], env: dict, seconds: float, sink) -> dict:
    """Runs `command` in a process group of its own, each output line to
    `sink` as it comes; stops the whole group (a benchmark's workers too)
    after `seconds`."""
    start = time.perf_counter()
    process = subprocess.Popen(
        command,
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
                process.wait(timeout=5)
                return
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue

    timer = threading.Timer(max(1.0, seconds), stop)
    timer.start()
    lines = []
    try:
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            sink(lines[-1])
        process.wait()
    finally:
        timer.cancel()
    return {
        "returncode": process.returncode,
        "timed_out": timed_out.is_set(),
        "seconds": round(time.perf_counter() - start, 1),
        "lines": lines,
    }


def machine_site_dirs() -> list[pathlib.Path]:
    """Where this Python finds installed packages: its own site-packages (a
    venv's, when it runs in one) and those beneath it."""
    paths = sysconfig.get_paths()
    dirs = [*site.getsitepackages(), paths.get("purelib", ""), paths.get("platlib", "")]
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [pathlib.Path(d) for d in dict.fromkeys(dirs) if d and os.path.isdir(d)]


def install(wheel: pathlib.Path, target: pathlib.Path) -> str:
    """Installs `wheel` into `target` as the TPU machine's recipe does (no index,
    no dependencies, no bytecode); returns how it went in."""
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--isolated", "-q", "--no-index", "--no-deps"]
        + ["--no-compile", "--no-cache-dir", "--upgrade", "--target", str(target), str(wheel)],
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
        capture_output=True,
        text=True,
    )
    if pip.returncode == 0:
        return "pip --target"
    with zipfile.ZipFile(wheel) as archive:  # a wheel is its files, laid out for site-packages
        archive.extractall(target)
    for module in target.glob("**/*.so"):
        module.chmod(0o755)
    return f"unpacked (pip: {pip.stderr.strip().splitlines()[-1:] or pip.returncode})"


def link_runtime(target: pathlib.Path, library: str, sites: list[pathlib.Path]) -> str:
    """Where the wheel's extra would have installed `library` (a package folder
    beside xlabind, where the modules' RUNPATH looks): linked from the first of
    `sites` that has it, when `target` has none."""
    for base in sites:
        for found in sorted(base.glob(f"*/*/lib/{library}.so*")):
            folder = found.parent.relative_to(base)
            if (target / folder).exists():
                return f"{library} installed beside xlabind"
            (target / folder).parent.mkdir(parents=True, exist_ok=True)
            (target / folder).symlink_to(found.parent)
            return f"{library} linked from {found.parent} (the extra's package)"
    return f"no package with {library} found for the RUNPATH"


def installation_errors(facts: dict, check, sites: list[pathlib.Path]) -> list[str]:
    """What is wrong with the installation the probe saw, for one platform."""
    errors = []
    if check.native_module in facts["load_errors"]:
        errors.append(f"{check.native_module} does not load: {facts['load_errors']}")
    loaded = facts["loaded"].get(check.native_module, [])
    if check.native_module and check.native_module not in facts["load_errors"] and not loaded:
        errors.append(f"{check.native_module} loaded no {check.runtime_library}")
    outside = [p for p in loaded if not any(pathlib.Path(p).is_relative_to(s) for s in sites)]
    if outside:
        errors.append(
            f"{check.native_module} loaded {check.runtime_library} from {outside}, not from "
            "a Python package (the wheel's extra): users without a toolkit would have none"
        )
    return errors


class Runbook:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.out = pathlib.Path(args.out or os.environ.get("OUT") or ".").resolve()
        self.log = Log(self.out / "device_check.md")
        self.end = time.perf_counter() + args.deadline
        self.rows: list[list] = []  # the summary: step, passed, failed, skipped, seconds, note
        self.failed = False
        self.platform, self.report = "", []  # once the probe has seen the device

    def left(self, later: float = 0.0) -> float:
        return self.end - time.perf_counter() - SUMMARY_RESERVE - later

    def fail(self, step: str, note: str) -> None:
        self.rows.append([step, "", "", "", "", note])
        self.log(f"\n**{step} failed:** {note}")
        self.failed = True

    def pytest(
        self, name: str, selection: list[str], env: dict, cap: float, verbose: bool = False
    ) -> dict | None:
        """One pytest process, time-boxed; its counts join the summary.
        `verbose`: its log names each test as it starts (one that kills the
        process is the last named)."""
        seconds = min(cap, self.left())
        if seconds <= 0:
            self.rows.append([name, "", "", "", "", "not run: no time left"])
            return None
        logs = self.out / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^\w.-]+", "_", name)[:120]
        command = [sys.executable, "-m", "pytest", "-v" if verbose else "-q", "-rs"]
        command += ["-p", "no:cacheprovider"]
        command += [f"--junitxml={self.out / 'junit' / safe}.xml", *selection]
        with open(logs / f"{safe}.log", "w") as sink:
            done = run_streamed(command, env, seconds, lambda line: print(line, file=sink))
        counts = dict.fromkeys(("passed", "failed", "skipped"), 0)
        summary = [line for line in done["lines"] if COUNTS.search(line)]
        for number, kind in COUNTS.findall(summary[-1] if summary else ""):
            counts["failed" if kind.startswith("error") else kind] += int(number)
        note = ""
        if done["timed_out"]:
            counts["failed"] += 1
            note = f"timed out after {done['seconds']} s"
            if summary:  # every test had run: the process did not exit in time
                note += ", after pytest's summary"
        elif done["returncode"] not in (0, 5) and counts["failed"] == 0:
            counts["failed"] = 1  # it died before pytest could count
            note = f"exit status {done['returncode']}: " + " ".join(done["lines"][-1:])[:200]
        row = [name, *counts.values(), done["seconds"], note]
        self.log("| " + " | ".join(map(str, row)) + " |")
        self.rows.append(row)
        self.failed |= counts["failed"] > 0
        # Died: stopped before pytest's summary, or ended as pytest does not
        # (a process stopped after its summary had run every test).
        died = not summary or (not done["timed_out"] and done["returncode"] not in (0, 1, 5))
        return {**counts, "lines": done["lines"], "died": died}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=pathlib.Path, help="the wheel to install and check")
    parser.add_argument(
        "--no-install", action="store_true", help="check the xlabind this Python imports"
    )
    parser.add_argument(
        "--modules", type=pathlib.Path, help="the tests' own compiled modules (Bazel-built)"
    )
    steps = parser.add_mutually_exclusive_group()
    steps.add_argument("--tests", action="store_true", help="the tests only")
    steps.add_argument("--benchmarks", action="store_true", help="the benchmark rows only")
    parser.add_argument(
        "--cases", nargs="+", default=[], help="the benchmark's groups or cases, as it names them"
    )
    parser.add_argument("--quick", action="store_true", help="the benchmark's quick rows")
    parser.add_argument(
        "--cpu-tests", action="store_true", help="the suite's core on the CPU as well"
    )
    devices = [name for name, record in PLATFORMS.items() if record.device_check]
    parser.add_argument(
        "--platform", choices=devices, help="the device (default: the one jax sees)"
    )
    parser.add_argument("--deadline", type=float, default=570.0, help="seconds for the run")
    parser.add_argument("--out", help="where the log, pytest's logs and the JSON go")
    parser.add_argument("pytest_args", nargs="*", help="tests to run instead of the folder")
    args = parser.parse_args(argv)
    if bool(args.wheel) == args.no_install:
        parser.error("give --wheel FILE or --no-install")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    book = Runbook(args)
    log = book.log
    log(f"# Device check ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    env = dict(os.environ)
    sites = machine_site_dirs()
    path = [env.get("PYTHONPATH", "")]
    if args.wheel:
        target = book.out / "site"
        how = install(args.wheel.resolve(), target)
        sites.append(target)
        checks = [r.device_check for r in PLATFORMS.values() if r.device_check]
        for library in {c.runtime_library for c in checks if c.runtime_library}:
            how += "; " + link_runtime(target, library, sites)
        path.append(str(target))  # after the machine's packages: its jax stays first
        log(f"\n{args.wheel.name}: {how}")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    names = (
        [args.platform] if args.platform else [n for n, r in PLATFORMS.items() if r.device_check]
    )
    native = {
        c.native_module: c.runtime_library
        for c in (PLATFORMS[n].device_check for n in names)
        if c and c.native_module
    }
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(native), json.dumps(names)],
        env=env,
        cwd=book.out,
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        book.fail("install", "xlabind does not import:\n" + probe.stderr[-3000:])
        return finish(book)
    facts = json.loads(probe.stdout.strip().splitlines()[-1])
    log("\n## python -m xlabind\n")
    for line in facts["report"]:
        log(f"    {line}")
    if args.wheel and not pathlib.Path(facts["xlabind"]).is_relative_to(book.out / "site"):
        book.fail("install", f"the tests would import {facts['xlabind']}, not the wheel")
    if not facts["platforms"]:
        book.fail("device", f"no {' or '.join(names)} device visible to jax: nothing to check")
        return finish(book)
    platform = book.platform = facts["platforms"][0]
    book.report = facts["report"]
    check = PLATFORMS[platform].device_check
    for error in installation_errors(facts, check, sites):
        book.fail("install", error)
    (book.out / "device_check.json").write_text(json.dumps(facts, indent=1))

    path = [str(REPO / "tests" / "support"), *([str(args.modules)] if args.modules else [])]
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], *path])
    if not args.benchmarks:
        run_tests(book, check, platform, env)
    if not args.tests:
        run_benchmark(book, check, {k: v for k, v in env.items() if k != "JAX_PLATFORMS"})
    return finish(book)


def run_tests(book: Runbook, check, platform: str, env: dict) -> None:
    """The device's tests: the main run, then the isolated ones in a process
    of their own (one by one if that process died, to name the test that
    killed it), then (--cpu-tests) the suite's core on the CPU."""
    args, log = book.args, book.log
    selection = args.pytest_args or [str(REPO / check.tests)]
    # Test ids are relative to pytest's rootdir: named here, so they can be run.
    root = REPO if args.pytest_args else REPO / check.tests
    isolated: list[str] = []
    if check.isolated:
        # Collected on the CPU: the parametrization does not depend on the
        # device, and a collection must not hold the chip.
        listed = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
            + [f"--rootdir={root}", "-k", check.isolated, *selection],
            env={**env, "JAX_PLATFORMS": "cpu"},
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        isolated = [line for line in listed.stdout.splitlines() if "::" in line]
        if listed.returncode != 0 or not isolated:
            # A rename would otherwise leave them to the main run, to die with it.
            book.fail("collect", f"-k {check.isolated}: " + listed.stdout[-2000:])
        selection = [*selection, "-k", f"not ({check.isolated})"]
    log(f"\n## Tests on the {platform} device\n")
    if check.isolated:
        log(
            f"{len(isolated)} tests (-k {check.isolated}) run in a process of their own "
            "after the rest; one by one if it dies.\n"
        )
    log("| run | passed | failed | skipped | seconds | note |")
    log("| --- | --- | --- | --- | --- | --- |")
    device_env = {k: v for k, v in env.items() if k != "JAX_PLATFORMS"}
    # Part of a GPU's memory for jax, the rest for the libraries the tests
    # hand its buffers to (CuPy, PyTorch); jax reads it on GPUs only.
    device_env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.4")
    later = (ISOLATED_FLOOR if isolated else 0.0) + (60.0 if args.cpu_tests else 0.0)
    main_run = book.pytest(check.tests, selection, device_env, book.left(later))
    if main_run is None or main_run["passed"] == 0:
        book.failed = True
        log(f"\nno test passed on the {platform} device (see {book.out / 'logs'})")
    if isolated:
        together = book.pytest(
            f"{len(isolated)} tests -k {check.isolated}, together",
            [str(root / test) for test in isolated],
            device_env,
            ISOLATED_CAP,
            verbose=True,
        )
        if together is not None and together["died"]:  # killed by a test or the clock
            for test in isolated:
                book.pytest(test, [str(root / test)], device_env, ISOLATED_CAP)
    if args.cpu_tests:
        core = _load("check_wheel", REPO / "tools" / "check_wheel.py").CORE_TESTS
        for test in core:
            book.pytest(f"{test} (CPU)", [str(REPO / test)], {**env, "JAX_PLATFORMS": "cpu"}, 300)


def run_benchmark(book: Runbook, check, env: dict) -> None:
    """The record's benchmark rows, streamed; their tables ({"title",
    "header", "rows"} each) also go to OUT/benchmark.json with the machine's
    report, which docs/figure_data/ keeps as device_<platform>.json for the
    measuring page."""
    book.log(f"\n## Benchmark rows ({check.benchmark})")
    command = [sys.executable, str(REPO / check.benchmark)]
    command += (["--cases", *book.args.cases] if book.args.cases else []) + (
        ["--quick"] if book.args.quick else []
    )
    if book.left() <= 0:
        book.rows.append(["benchmark", "", "", "", "", "not run: no time left"])
        return
    done = run_streamed(command, env, book.left(), book.log)
    tables, title = [], ""
    for line in done["lines"]:
        if line.startswith("#"):
            title = line.lstrip("# ")
        elif line.startswith("|") and not line.startswith("| ---"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if tables and tables[-1]["title"] == title and tables[-1]["header"]:
                tables[-1]["rows"].append(cells)
            else:
                tables.append({"title": title, "header": cells, "rows": []})
    record = {"platform": book.platform, "date": time.strftime("%Y-%m-%d"), "tables": tables}
    record["report"] = book.report  # the machine: Python, versions, devices
    (book.out / "benchmark.json").write_text(json.dumps(record, indent=1))
    note = f"timed out after {done['seconds']} s" if done["timed_out"] else ""
    if done["returncode"] not in (0, None) and not note:
        note = f"exit status {done['returncode']}"
    book.rows.append(["benchmark", "", "", "", done["seconds"], note])
    book.failed |= bool(note)


def finish(book: Runbook) -> int:
    """The summary, whatever ran."""
    book.log("\n## Summary\n")
    book.log("| step | passed | failed | skipped | seconds | note |")
    book.log("| --- | --- | --- | --- | --- | --- |")
    for row in book.rows:
        book.log("| " + " | ".join(map(str, row)) + " |")
    book.log(f"\n{'FAILED' if book.failed else 'passed'}")
    return 1 if book.failed else 0


if __name__ == "__main__":
    sys.exit(main())
