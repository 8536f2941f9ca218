"""tools/device_check.py, the device runbook, on the CPU: what it runs comes
from the platform table's records, the tests that may kill their process run
one by one after the rest, its tables reach the log as they come (a time box
loses none), and without the device it says so and runs nothing. Its install
step (the wheel, the runtime library) is in test_wheel.py."""

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import pytest
from wheel_tools import load_tool

REPO = pathlib.Path(".").resolve()  # the runfiles' copy of this workspace
runbook = load_tool("device_check")
platforms = sys.modules["xlabind_platforms"]

FAKE_TESTS = """
import os, pytest

def test_on_the_device():
    pass

def test_only_elsewhere():
    pytest.skip("a reason of its own")

def test_crash_that_kills_its_process():
    os.abort()

def test_crash_that_does_not():
    pass
"""

FAKE_BENCHMARK = """
import argparse, time
parser = argparse.ArgumentParser()
parser.add_argument("--cases", nargs="+", default=["rows"])
cases = parser.parse_args().cases
print("## Rows of the fake device", flush=True)
print("| case | ms |", flush=True)
print("| --- | --- |", flush=True)
print("| copy | 1.5 |", flush=True)
if "hang" in cases:
    time.sleep(600)
print("| no-op | 0.5 |", flush=True)
"""


@pytest.fixture
def fake_device(tmp_path, monkeypatch):
    """The CPU as a device whose record names a test folder and a benchmark
    written here."""
    folder = tmp_path / "device_tests"
    folder.mkdir()
    (folder / "test_fake_device.py").write_text(FAKE_TESTS)
    (tmp_path / "bench.py").write_text(FAKE_BENCHMARK)
    check = platforms.DeviceCheck(
        tests=str(folder), benchmark=str(tmp_path / "bench.py"), isolated="crash"
    )
    cpu = dataclasses.replace(platforms.PLATFORMS["cpu"], device_check=check)
    monkeypatch.setattr(runbook, "PLATFORMS", {"cpu": cpu})
    return tmp_path


def run(out, *flags):
    code = runbook.main(["--no-install", "--platform", "cpu", "--out", str(out), *flags])
    return code, (out / "device_check.md").read_text()


def summary_row(log: str, step: str) -> list[str]:
    """The cells of the summary's row whose step ends with `step`."""
    summary = log[log.index("## Summary") :].splitlines()
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in summary]
    return next(row for row in rows if row[0].endswith(step))


def test_every_device_record_names_tests_and_a_benchmark_that_exist():
    records = {n: r.device_check for n, r in runbook.PLATFORMS.items() if r.device_check}
    assert {"cuda", "tpu"} <= set(records)
    for name, check in records.items():
        assert list((REPO / check.tests).glob("test_*.py")), name
        assert (REPO / check.benchmark).is_file(), name


def test_the_isolated_expression_selects_tests_of_the_tpu_folder():
    # A renamed test would otherwise leave the main run to die with it.
    check = runbook.PLATFORMS["tpu"].device_check
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-k", check.isolated, str(REPO / check.tests)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert sum("::" in line for line in listed.stdout.splitlines()) >= 2, listed.stdout


def test_a_run_isolates_the_tests_that_may_kill_their_process(fake_device):
    out = fake_device / "out"
    code, log = run(out, "--tests")
    assert code == 1, log  # one test killed its process
    main = summary_row(log, "device_tests")
    assert main[1:4] == ["1", "0", "1"], main  # passed, failed, skipped
    together = summary_row(log, "-k crash, together")  # died, so run again one by one
    assert together[2] == "1" and "exit status" in together[5], together
    together_log = next(p for p in (out / "logs").iterdir() if "together" in p.name)
    assert "::test_crash_that_kills_its_process" in together_log.read_text()  # named as it started
    killed = summary_row(log, "::test_crash_that_kills_its_process")
    assert killed[1:3] == ["0", "1"] and "exit status" in killed[5], killed
    survivor = summary_row(log, "::test_crash_that_does_not")
    assert survivor[1:3] == ["1", "0"], survivor  # run after the crash
    assert "## Benchmark rows" not in log  # --tests: the tests only
    assert (
        "a reason of its own"
        in (out / "logs")
        .joinpath(next(p.name for p in (out / "logs").iterdir() if "device_tests" in p.name))
        .read_text()
    )


def test_isolated_tests_that_pass_together_are_not_run_again(fake_device):
    tests = fake_device / "device_tests" / "test_fake_device.py"
    tests.write_text(FAKE_TESTS.replace("os.abort()", "pass"))  # nothing dies
    code, log = run(fake_device / "out", "--tests")
    assert code == 0, log
    assert summary_row(log, "-k crash, together")[1:3] == ["2", "0"], log
    assert "::test_crash_that_does_not |" not in log  # one process for them


def test_a_run_that_does_not_exit_after_its_summary_says_so(tmp_path):
    # A TPU test process that ran every test, then hung in its exit.
    (tmp_path / "test_exit.py").write_text(
        "import atexit, time\natexit.register(time.sleep, 600)\ndef test_ok(): pass\n"
    )
    args = runbook.parse_args(["--no-install", "--out", str(tmp_path / "out")])
    book = runbook.Runbook(args)
    done = book.pytest("exit", [str(tmp_path / "test_exit.py")], dict(os.environ), 4.0)
    assert done["passed"] == 1 and not done["died"], done["lines"]  # every test ran
    assert book.rows[-1][5].endswith("after pytest's summary"), book.rows


def test_a_benchmark_that_outlives_the_deadline_keeps_what_it_printed(fake_device, monkeypatch):
    out = fake_device / "out"
    # 3 s for the benchmark, which prints its first row at once, then hangs.
    monkeypatch.setattr(runbook, "SUMMARY_RESERVE", 2.0)
    code, log = run(out, "--benchmarks", "--cases", "hang", "--deadline", "5")
    assert code == 1
    assert "| copy | 1.5 |" in log and "no-op" not in log
    assert "timed out after" in summary_row(log, "benchmark")[5]
    assert "## Tests on" not in log  # --benchmarks: the rows only
    record = json.loads((out / "benchmark.json").read_text())
    assert record["tables"] == [
        {"title": "Rows of the fake device", "header": ["case", "ms"], "rows": [["copy", "1.5"]]}
    ]
    assert record["platform"] == "cpu" and any(
        "jax devices: cpu" in line for line in record["report"]
    )


def test_tests_to_isolate_that_cannot_be_collected_fail_the_run(fake_device):
    # Else the main run would deselect them and nothing would run them.
    (fake_device / "device_tests" / "test_broken.py").write_text("import no_such_module\n")
    code, log = run(fake_device / "out", "--tests")
    assert code == 1 and "**collect failed:** -k crash" in log, log


def test_without_the_device_it_says_so_and_runs_nothing(tmp_path):
    code = runbook.main(["--no-install", "--platform", "tpu", "--out", str(tmp_path)])
    log = (tmp_path / "device_check.md").read_text()
    assert code == 1 and "no tpu device visible to jax" in log, log
    assert "## Tests on" not in log and "## Benchmark rows" not in log


@pytest.mark.parametrize(
    "flags",
    [[], ["--no-install", "--wheel", "x.whl"], ["--no-install", "--tests", "--benchmarks"]],
    ids=["nothing to check", "both sources", "both halves"],
)
def test_contradictory_or_missing_arguments_are_refused(flags, capsys):
    with pytest.raises(SystemExit) as refused:
        runbook.parse_args(flags)
    assert refused.value.code == 2 and "error:" in capsys.readouterr().err


def test_a_streamed_line_reaches_the_sink_before_the_process_ends():
    seen = []
    code = "import time; print('first', flush=True); time.sleep(600)"
    done = runbook.run_streamed([sys.executable, "-c", code], {}, 1.5, seen.append)
    assert seen == ["first"] and done["timed_out"] and done["seconds"] < 60


def test_installation_errors_name_a_runtime_library_from_outside_the_packages(tmp_path):
    check = runbook.PLATFORMS["cuda"].device_check
    package = tmp_path / "site" / "nvidia" / "lib" / "libcudart.so.13"
    toolkit = "/usr/local/cuda/lib64/libcudart.so.13"
    facts = {"load_errors": {}, "loaded": {check.native_module: [str(package)]}}
    assert runbook.installation_errors(facts, check, [tmp_path / "site"]) == []
    facts["loaded"][check.native_module].append(toolkit)
    (error,) = runbook.installation_errors(facts, check, [tmp_path / "site"])
    assert toolkit in error and "not from a Python package" in error
    facts = {"load_errors": {check.native_module: "no libcudart"}, "loaded": {}}
    assert "does not load" in runbook.installation_errors(facts, check, [])[0]
