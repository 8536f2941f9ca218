"""Calls of a Python function as the CUDA callback handler makes them, with no
XLA frame and no GPU (`_xlabind._time_cuda_host_calls`: buffers that are only
addresses), for the tests of its host path (runtime/test_python_on_cuda.py,
test_threads.py, test_fake_driver.py)."""

import jax

from xlabind import _xlabind
from xlabind._runtime import extension
from xlabind._runtime.python_functions import PythonImplementation

CODES = {name: code for code, name in _xlabind.element_type_names().items()}
XLA_STREAM = 0x7000
#: One float32 operand and one result, at made-up addresses.
FLOAT32_PAIR = [(0x100000, [1], "float32"), (0x200000, [1], "float32")]


def host_calls(
    fn,
    buffers=FLOAT32_PAIR,
    calls=1,
    *,
    style="floor",
    capturable=False,
    device=0,
    foreign_thread=False,
) -> float:
    """Seconds for `calls` calls of `fn` on `buffers` [(address, shape, dtype
    name)], the first the operand. style "floor": fn(operands, results) as
    the handler calls a registered entry; "in_place": fn(x, *, out=...) as
    xlabind binds a CUDA function (`capturable`: command_buffer_compatible).
    `foreign_thread`: on a new thread Python did not start, as XLA's."""
    if style == "floor":
        entry = extension.CallbackEntry(fn, "f")
    else:
        implementation = PythonImplementation(
            {"cuda": fn}, in_place=True, command_buffer_compatible=capturable
        )
        entry = implementation._make_entry(
            "cuda", fn, fn.__name__, {}, jax.tree_util.tree_structure(0)
        )
    specs = [(data, list(shape), CODES[dtype]) for data, shape, dtype in buffers]
    return _xlabind._time_cuda_host_calls(
        entry.key, specs, 1, calls, XLA_STREAM, device, foreign_thread=foreign_thread
    )
