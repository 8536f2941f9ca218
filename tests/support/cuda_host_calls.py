"""Calls of a Python function as the CUDA callback handler makes them, with no
XLA frame and no GPU (`xlabind.testing.time_cuda_host_calls`: buffers that are
only addresses), for the tests of its host path (runtime/test_python_on_cuda.py,
test_threads.py, test_fake_driver.py)."""

import xlabind.testing as xlabind_testing

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
    callback = xlabind_testing.cuda_host_callback(style, fn, capturable=capturable, name="f")
    specs = [
        (data, list(shape), xlabind_testing.element_type_code(dtype))
        for data, shape, dtype in buffers
    ]
    return xlabind_testing.time_cuda_host_calls(
        callback, specs, 1, calls, XLA_STREAM, device, foreign_thread=foreign_thread
    )
