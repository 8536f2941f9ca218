"""tests/run_pytest.py, the runner of every pytest target, under Bazel's test
sharding (a target's shard_count, tests/pytest.bzl): the shards run each
test once between them, and each says it shards; and the sampled products
of tests/support/cases.py in the default loop and under --config=all."""

import os
import pathlib
import re
import subprocess
import sys

import cases

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


def run_cases(tests: pathlib.Path, which: str):
    """The runner over `tests` with XLABIND_TEST_CASES=`which`: the ids it ran."""
    support = pathlib.Path(cases.__file__).parent
    env = {
        **os.environ,
        "XLABIND_TEST_CASES": which,
        "PYTHONPATH": os.pathsep.join([str(support), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(tests), "-vv"],  # past the runner's -q
        env=env,
        cwd=tests.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"cases: {which}" in done.stdout
    return re.findall(r"::test_case\[([^\]]+)\] PASSED", done.stdout)


def test_the_loop_runs_a_seeded_sample_holding_every_value_and_ci_all(tmp_path):
    # tests/support/cases.py under the default loop's and --config=all's setting.
    tests = tmp_path / "test_product.py"
    tests.write_text(
        "import cases, pytest\n"
        "@pytest.mark.parametrize('order, mode, rank', cases.product(\n"
        "    'probe', range(6), ['constant', 'wrap', 'mirror'], (1, 2, 3), sampled=8))\n"
        "def test_case(order, mode, rank):\n"
        "    pass\n"
    )
    every = run_cases(tests, "all")
    assert len(every) == 6 * 3 * 3 == len(set(every))
    sample = run_cases(tests, "sampled")
    assert 8 <= len(sample) < len(every) and set(sample) <= set(every)
    values = [case.split("-") for case in sample]
    for axis, wanted in enumerate([range(6), ["constant", "wrap", "mirror"], (1, 2, 3)]):
        assert {v[axis] for v in values} == {str(w) for w in wanted}, axis
    assert run_cases(tests, "sampled") == sample  # the same cases every run


def test_listed_cases_are_sampled_in_the_loop_in_their_order_and_all_in_ci(tmp_path):
    tests = tmp_path / "test_listed.py"
    tests.write_text(
        "import cases, pytest\n"
        "@pytest.mark.parametrize('case', cases.some(\n"
        "    'probe', ['a', 'b', 'c', 'd', 'e', 'f', 'g'], sampled=3))\n"
        "def test_case(case):\n"
        "    pass\n"
    )
    assert run_cases(tests, "all") == list("abcdefg")
    sample = run_cases(tests, "sampled")
    assert len(sample) == 3 and sample == sorted(sample) and set(sample) < set("abcdefg")
    assert run_cases(tests, "sampled") == sample
