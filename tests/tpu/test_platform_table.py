"""The platform table (python/xlabind/_platforms.py) as the lowering reads it:
every platform's record decides how a call lowers there, a program lowered
for several platforms gets each one's lowering, and nothing outside the
table branches on a platform's name. Runs on a CPU: lowering for a TPU needs
no chip (the formulation, and the refusals)."""

import ast
import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import xlabind
from xlabind import _platforms
from xlabind.ops import map_coordinates
from xlabind.ops.map_coordinates import tpu_kernels

PACKAGE = pathlib.Path(xlabind.__file__).parent
TARGETS = ("xlabind_map_coordinates", "xlabind_map_coordinates_transpose")
CHECKS = [export.DisabledSafetyCheck.custom_call(t) for t in TARGETS]


@pytest.fixture(autouse=True)
def fresh_lowerings():
    jax.clear_caches()
    yield
    jax.clear_caches()


def on_cpu(x):
    """`x` on the CPU, so that a program on it lowers for the CPU on a TPU machine too."""
    return jax.device_put(x, jax.devices("cpu")[0])


def warp(grid, coords):
    return map_coordinates(grid, list(coords), order=1, mode="wrap")


def test_a_program_for_cpu_and_tpu_at_once_exports_after_a_tpu_lowering():
    """Issue 72, item 6: lowering a program for a TPU first once made every
    later multi-platform export fail inside jax."""
    grid, coords = jnp.arange(64.0).reshape(8, 8), jnp.linspace(-3, 11, 32).reshape(2, 16)
    f = jax.jit(warp)
    f.trace(grid, coords).lower(lowering_platforms=("tpu",))
    exported = export.export(f, platforms=("cpu", "tpu"), disabled_checks=CHECKS)(grid, coords)
    assert exported.platforms == ("cpu", "tpu")
    np.testing.assert_allclose(exported.call(grid, coords), f(grid, coords), rtol=1e-6)
    # And its gradient in the grid, whose transpose is the other target.
    grad = jax.jit(jax.grad(lambda g, c: warp(g, c).sum()))
    exported = export.export(grad, platforms=("cpu", "tpu"), disabled_checks=CHECKS)(grid, coords)
    np.testing.assert_allclose(exported.call(grid, coords), grad(grid, coords), rtol=1e-6)


def test_each_platform_of_a_multi_platform_program_gets_its_own_lowering():
    grid, coords = jnp.ones((8, 8)), jnp.ones((2, 16))
    text = jax.jit(warp).trace(grid, coords).lower(lowering_platforms=("cpu", "tpu")).as_text()
    assert "@xlabind_map_coordinates" in text  # the CPU branch: the native kernel
    assert "stablehlo.case" in text  # and a TPU branch beside it
    assert text.count("stablehlo.custom_call @xlabind_map_coordinates(") == 1


def test_the_tpu_formulation_takes_the_chips_kernels_whatever_machine_lowers_it():
    """The TPU version is chosen by the platform the program is lowered for:
    the same program on this CPU machine lowers the Pallas kernels for a TPU."""
    grid, coords = jnp.ones((16, 16)), jnp.ones((2, 4096))
    text = jax.jit(warp).trace(grid, coords).lower(lowering_platforms=("tpu",)).as_text()
    assert "tpu_custom_call" in text
    assert "xlabind_map_coordinates" not in text.replace("xlabind_map_coordinates_", "")
    assert not tpu_kernels.INTERPRET


def test_a_python_function_for_several_platforms_with_a_tpu_is_refused_by_name():
    op = xlabind.callback(np.sin, lambda x: x, name="numpy_sine")
    with pytest.raises(NotImplementedError, match=r"'numpy_sine' is a Python function.*several"):
        jax.jit(op).trace(jnp.ones(3)).lower(lowering_platforms=("cpu", "tpu"))


@pytest.mark.skipif(jax.default_backend() == "tpu", reason="lowers for a TPU off a TPU")
def test_a_python_function_lowered_for_a_tpu_off_a_tpu_names_the_function():
    op = xlabind.callback(np.sin, lambda x: x, name="numpy_sine")
    with pytest.raises(
        NotImplementedError, match=r"'numpy_sine' is a Python function.*host transfers"
    ):
        jax.jit(op).trace(jnp.ones(3)).lower(lowering_platforms=("tpu",))


def test_a_platform_whose_record_refuses_names_the_function_and_the_reason(monkeypatch):
    refusing = dataclasses.replace(
        _platforms.PLATFORMS["cpu"], python_calls=None, refusal="nothing runs here"
    )
    monkeypatch.setitem(_platforms.PLATFORMS, "cpu", refusing)
    op = xlabind.callback(np.sin, lambda x: x, name="numpy_sine")
    with pytest.raises(
        NotImplementedError, match=r"'numpy_sine' cannot run inside a CPU .*nothing runs here"
    ):
        jax.jit(op)(on_cpu(jnp.ones(3)))


def test_a_record_decides_how_python_runs_there(monkeypatch):
    """Adding a platform is adding a record: the CPU given the TPU's way of
    running Python (host transfers) runs the same function through them."""
    transfers = dataclasses.replace(_platforms.PLATFORMS["tpu"], name="cpu")
    op = xlabind.callback(np.sin, lambda x: x, name="numpy_sine")
    x = on_cpu(jnp.linspace(0, 1, 5))
    monkeypatch.setitem(_platforms.PLATFORMS, "cpu", transfers)
    text = jax.jit(op).trace(x).lower().as_text()
    assert "xlabind_python_callback" not in text
    assert "xla_python_cpu_callback" in text or "callback" in text
    np.testing.assert_allclose(jax.jit(op)(x), np.sin(x), rtol=1e-6)


def test_a_formulation_runs_where_its_record_runs_no_handlers(monkeypatch):
    def doubled(x, *, result_avals):
        return [2 * x]

    target = xlabind.ffi_target("xlabind_noop", formulations={"cpu": doubled})
    op = xlabind.callback(target, lambda x: x, name="doubled")
    monkeypatch.setitem(
        _platforms.PLATFORMS,
        "cpu",
        dataclasses.replace(_platforms.PLATFORMS["cpu"], registry_name=None),
    )
    np.testing.assert_array_equal(jax.jit(op)(on_cpu(jnp.arange(3.0))), [0.0, 2.0, 4.0])


def test_formulations_are_checked_when_declared():
    with pytest.raises(TypeError, match=r"formulations\['tpu'\] must be callable"):
        xlabind.ffi_target("xlabind_noop", formulations={"tpu": 1})
    with pytest.raises(ValueError, match=r"unknown platform 'metal'"):
        xlabind.ffi_target("xlabind_noop", formulations={"metal": lambda x, **_: [x]})
    with pytest.raises(TypeError, match=r"formulations must be a dict"):
        xlabind.ffi_target("xlabind_noop", formulations=[lambda x, **_: [x]])


def _platform_comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing something by == or != with the name of a platform
    that runs no FFI handlers ('tpu', 'rocm'): what those run is the table's
    to say. (CPU and CUDA handlers differ in what Python receives, NumPy
    views or device arrays on a stream: python_on_cuda.py's own branch.)"""
    names = {name for name, p in _platforms.PLATFORMS.items() if not p.runs_handlers}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops
        ):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value in names for o in operands):
                lines.append(node.lineno)
    return lines


def test_nothing_outside_the_table_branches_on_a_platforms_name():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_platforms.py":
            continue
        lines = _platform_comparisons(ast.parse(path.read_text()))
        if lines:
            found[str(path.relative_to(PACKAGE))] = lines
    assert found == {}


def test_the_comparison_finder_finds_one():
    assert _platform_comparisons(ast.parse('if platform == "tpu":\n    pass\n')) == [1]
