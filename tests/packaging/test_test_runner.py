"""tests/run_pytest.py, the runner of every pytest target, under Bazel's test
sharding (a target's shard_count, tests/pytest.bzl): the shards run each
test once between them, and each says it shards."""

import os
import pathlib
import re
import subprocess
import sys

RUNNER = pathlib.Path(__file__).parents[1] / "run_pytest.py"


def run_shard(tests: pathlib.Path, index: int, total: int, status: pathlib.Path):
    shard = {
        "TEST_TOTAL_SHARDS": str(total),
        "TEST_SHARD_INDEX": str(index),
        "TEST_SHARD_STATUS_FILE": str(status),
    }
    return subprocess.run(
        [sys.executable, str(RUNNER), str(tests), "-s"],
        env={**os.environ, **shard},
        cwd=tests.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_shards_run_each_test_once_between_them(tmp_path):
    tests = tmp_path / "test_five.py"
    tests.write_text("".join(f"def test_{i}():\n    print('ran {i}')\n" for i in range(5)))
    for total in (2, 7):  # 7: more shards than tests, some with none
        ran = []
        for index in range(total):
            status = tmp_path / f"status_{total}_{index}"
            done = run_shard(tests, index, total, status)
            assert done.returncode == 0, done.stdout + done.stderr
            assert status.exists(), "the shard did not tell Bazel it shards"
            ran += re.findall(r"ran (\d)", done.stdout)
        assert sorted(ran) == list("01234"), (total, ran)


def test_a_failing_test_fails_its_shard(tmp_path):
    tests = tmp_path / "test_two.py"
    tests.write_text("def test_0():\n    pass\n\n\ndef test_1():\n    assert False\n")
    codes = [run_shard(tests, i, 2, tmp_path / f"s{i}").returncode for i in range(2)]
    assert codes[0] == 0 and codes[1] != 0, codes


def test_plugins_installed_beside_the_interpreter_stay_out(tmp_path):
    # A pytest plugin as pip installs one: a module and its pytest11 entry point.
    site = tmp_path / "site"
    info = site / "stray_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: stray-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nstray = stray_plugin\n")
    loaded = tmp_path / "loaded"
    (site / "stray_plugin.py").write_text(f"open({str(loaded)!r}, 'w').close()\n")
    tests = tmp_path / "test_one.py"
    tests.write_text("def test_0():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])

    def run(*command):
        done = subprocess.run(
            [sys.executable, *command, "-p", "no:cacheprovider", str(tests)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    run("-m", "pytest")  # pytest on its own loads it: the plugin is a real one
    assert loaded.exists()
    loaded.unlink()
    run(str(RUNNER))
    assert not loaded.exists(), "the runner loaded a plugin installed beside the interpreter"
