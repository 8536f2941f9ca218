"""Runs the pytest file named on the command line; exits non-zero on any failure.

XLA compiles the tests' programs without LLVM's optimizations (a quarter of
the suite's time went to compiling small programs that then run once), in
one piece rather than split across threads (the split's threads cost more
than they save on programs this small, with two test processes on two cores:
a sixth of the compile time of the map_coordinates and sharding files) and
with its older elemental emitters for fusions (jax's gathers and scatters,
the references the ops are held to, compile in about half the time); what
runs is xlabind's own code, built by the C++ toolchain as always, and jax's
around it computing the same values. The emitter flag exists in the jaxlibs
of the lower-bound and pinned locks (0.9.1, 0.10.2), not in the newest
lock's (0.12, which has only the new emitters: an unknown flag stops XLA);
this runner runs only under Bazel, on those. A test's own XLA_FLAGS add to
these."""

import importlib.metadata
import os
import pathlib
import sys

_OLD_EMITTERS = tuple(int(p) for p in importlib.metadata.version("jaxlib").split(".")[:2]) < (0, 11)
os.environ["XLA_FLAGS"] = (
    "--xla_backend_optimization_level=0 "
    "--xla_llvm_disable_expensive_passes=true "
    "--xla_cpu_parallel_codegen_split_count=1 "
    + ("--xla_cpu_use_fusion_emitters=false " if _OLD_EMITTERS else "")
    + os.environ.get("XLA_FLAGS", "")
)
# Only the plugins this runner names: pytest would otherwise load every plugin
# installed beside the interpreter Bazel runs, which the suite never declared
# (pyenv's here has hypothesis and pytest-benchmark: 0.8 s of every test
# process), and one that reorders tests would reorder the shards' split.
# Inherited by the pytest processes the tests start themselves.
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"

import pytest


class _Shard:
    """Bazel's test sharding (a target's shard_count): this shard runs every
    TEST_TOTAL_SHARDS-th test from TEST_SHARD_INDEX on, in collection order."""

    def __init__(self, index: int, total: int):
        self.index, self.total = index, total

    def pytest_collection_modifyitems(self, config, items):
        kept = items[self.index :: self.total]
        ids = {id(item) for item in kept}
        config.hook.pytest_deselected(items=[i for i in items if id(i) not in ids])
        items[:] = kept


if __name__ == "__main__":
    plugins = []
    if "TEST_TOTAL_SHARDS" in os.environ:
        plugins.append(
            _Shard(int(os.environ["TEST_SHARD_INDEX"]), int(os.environ["TEST_TOTAL_SHARDS"]))
        )
        if "TEST_SHARD_STATUS_FILE" in os.environ:  # this runner shards
            pathlib.Path(os.environ["TEST_SHARD_STATUS_FILE"]).touch()
    # Which cases of the sampled products run (tests/support/cases.py): in the
    # log, for whoever compares a failure in the loop with one in CI.
    print(f"cases: {os.environ.get('XLABIND_TEST_CASES', 'all')}", flush=True)
    # No cache folder: runfiles are read-only. -rs lists every skip with its reason.
    code = int(pytest.main(["-p", "no:cacheprovider", "-q", "-rs", *sys.argv[1:]], plugins=plugins))
    if plugins and code == pytest.ExitCode.NO_TESTS_COLLECTED:
        code = 0  # a shard that got none of a file's few tests
    # Out without the interpreter's teardown: jax's exit handler clears every
    # cache and backend the tests filled, a second or two a process for
    # nothing the test reports (what it found is in `code` and the log).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
