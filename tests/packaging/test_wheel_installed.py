"""pip installs the wheel into a fresh environment that has jax — the pinned one
or the oldest supported — without installing anything else, and there the
demo, tests and mypy pass (tools/check_wheel.py). tests/BUILD.bazel makes one
target per lock (`-k pinned`, `-k lower_bound`), which run side by side.

On the oldest jax every file of check_wheel.CORE_TESTS runs. On the pinned one,
where the main suite has just run every test with the same compiled modules,
check_wheel.INSTALL_TESTS run: what only an installed wheel can get wrong
(imports, package data, the modules' RUNPATH, the README's examples)."""

import pytest
from wheel_tools import RUNFILES, SITES, build_wheel, load_tool

TESTS = {"pinned": "INSTALL_TESTS", "lower_bound": "CORE_TESTS"}


@pytest.mark.parametrize("lock", sorted(SITES))
def test_a_fresh_environment_with_jax_installs_only_xlabind_and_runs(lock, tmp_path):
    """pip adds only xlabind (--no-index: anything else would fail the install),
    then the demo, the lock's test files and mypy pass there."""
    site = SITES[lock]
    assert (site / "jax").is_dir(), site
    check_wheel = load_tool("check_wheel")
    tests = getattr(check_wheel, TESTS[lock])
    wheel = build_wheel(tmp_path / "dist")
    result = check_wheel.check(wheel, site, tmp_path / "check", root=RUNFILES, tests=tests)
    # The environment's jax is the lock's, untouched.
    (dist_info,) = site.glob("jax-*.dist-info")
    assert dist_info.name == f"jax-{result['versions']['jax']}.dist-info"
    assert set(result["tests"]) == set(tests) | {"mypy tests/typing/public_api.py"}
    assert all(" passed" in result["tests"][name] for name in tests), result["tests"]
    assert result["tests"]["mypy tests/typing/public_api.py"].startswith("Success"), result
