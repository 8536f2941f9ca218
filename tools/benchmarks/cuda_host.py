"""The host half of a CUDA callback, timed on the CPU (``--cuda-host``).

What xlabind does on the host around a CUDA Python call, without a GPU: the
C++ handler's work (the GIL, a DeviceArray view per buffer, the call, the
escape check) through ``xlabind.testing.time_cuda_host_calls``, which makes each call
as the handler does but on buffers that are only addresses, with no XLA frame
to decode and no driver; and the Python work in between (XLA's stream made
CuPy's and PyTorch's current one, array interfaces read, results stored).

CuPy and PyTorch are stand-ins here (this module's ``StandInCupy`` and
``StandInTorch``): Python objects with the entry points xlabind calls and
little work behind them, so a row shows xlabind's own host work, not CuPy's or
PyTorch's. The floor row is the handler alone: a view per buffer, one call of
a no-op, the escape check (``buffer_callback``'s host work is of that kind;
tools/benchmarks/cuda_rows.py measures it). On the GPU (tools/benchmarks/cuda_rows.py)
the driver and the real libraries add their own costs on top of these.

    tools/bazel run //tools:benchmark -- --cuda-host
"""

from __future__ import annotations

import statistics
import types

import harness  # noqa: F401  (first: it sets JAX_PLATFORMS before jax loads)

import xlabind.testing as xlabind_testing

XLA_STREAM, DEVICE = 0x7000, 0
FLOAT32 = xlabind_testing.element_type_code("float32")


# -- stand-ins ------------------------------------------------------------------
class StandInStream:
    """cupy.cuda.ExternalStream: made current by `with`, per device."""

    def __init__(self, ptr, device_id=-1):
        self.ptr, self.device_id = ptr, device_id

    def __enter__(self):
        StandInCupy.stack.append(self)
        return self

    def __exit__(self, *exc):
        StandInCupy.stack.pop()


class StandInCupy:
    """What xlabind asks of CuPy: its external streams and its current stream."""

    stack: list = [StandInStream(0)]

    def __init__(self):
        self.cuda = types.SimpleNamespace(
            ExternalStream=StandInStream,
            get_current_stream=lambda device_id=-1: StandInCupy.stack[-1],
        )


class StandInTorch:
    """What xlabind asks of PyTorch with CUDA initialized: its current stream
    by id (torch._C's entry points), and an external stream's id."""

    def __init__(self):
        current = {DEVICE: (1, DEVICE, 1)}

        class ExternalStream:
            def __init__(self, ptr, device=None):
                self.stream_id, self.device_index, self.device_type = ptr, DEVICE, 1

        def set_stream_by_id(stream_id, device_index, device_type):
            current[device_index] = (stream_id, device_index, device_type)

        self.device = lambda kind, index=None: (kind, index)
        self._C = types.SimpleNamespace(
            _cuda_getCurrentStream=lambda device: current[device], _cuda_setStream=set_stream_by_id
        )
        self.cuda = types.SimpleNamespace(
            is_initialized=lambda: True, ExternalStream=ExternalStream
        )


class CupyLikeResult:
    """A device array as CuPy returns one: DLPack first (the path xlabind takes
    for a real CuPy array), made here by the operand's own view; its CUDA
    array interface names the stream current when it is read."""

    def __init__(self, operand):
        self.operand, self.shape = operand, operand.shape

    def __dlpack_device__(self):
        return self.operand.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.operand.__dlpack__(**kwargs)

    @property
    def __cuda_array_interface__(self):
        return {
            "shape": self.shape,
            "typestr": "<f4",
            "data": (0x900000, False),
            "version": 3,
            "strides": None,
            "stream": StandInCupy.stack[-1].ptr,
        }


def _with_libraries(cupy: bool, torch: bool):
    """Installs the stand-ins in xlabind's view of the world; returns the undo."""
    return xlabind_testing.use_cuda_libraries(
        StandInCupy() if cupy else None, StandInTorch() if torch else None
    )


# -- the cases --------------------------------------------------------------------
def _noop_into(x, *, out):
    del x, out


def _reads_interfaces(x, *, out):
    # What cupy.asarray(x) and cupy.asarray(out) read: each interface twice.
    for array in (x, out, x, out):
        array.__cuda_array_interface__  # noqa: B018


def _returns_cupy_like(x):
    return CupyLikeResult(x)


CASES = (
    # name, label, style, function, CuPy stand-in, PyTorch stand-in
    (
        "floor",
        "floor: the handler alone (views, one call of a no-op, escape check)",
        "floor",
        lambda operands, results: None,
        False,
        False,
    ),
    ("in_place", "in place no-op, no CuPy", "in_place", _noop_into, False, False),
    ("in_place_cupy", "in place no-op, CuPy imported", "in_place", _noop_into, True, False),
    (
        "in_place_cupy_torch",
        "in place no-op, CuPy and PyTorch (CUDA initialized)",
        "in_place",
        _noop_into,
        True,
        True,
    ),
    (
        "in_place_interfaces",
        "in place, both interfaces read twice (cupy.asarray), CuPy",
        "in_place",
        _reads_interfaces,
        True,
        False,
    ),
    (
        "in_place_interfaces_torch",
        "the same, CuPy and PyTorch",
        "in_place",
        _reads_interfaces,
        True,
        True,
    ),
    (
        "returning",
        "returning a CuPy array (DLPack, checked, copied), CuPy",
        "returning",
        _returns_cupy_like,
        True,
        False,
    ),
)


# The cases measured again on a thread Python did not start, as XLA's own
# threads (the CUDA handler always runs on one): what taking the GIL there costs.
FOREIGN_THREAD = ("floor", "in_place_cupy_torch")


def measure(rounds: int, calls: int, n: int = 1) -> list[dict]:
    """µs per call of each case (p10, p50, p90 over `rounds` rounds of `calls`),
    the cases interleaved round by round."""
    buffers = [(0x100000, [n], FLOAT32), (0x200000, [n], FLOAT32)]
    prepared = []
    for name, label, style, fn, cupy, torch in CASES:
        prepared.append(
            (name, label, xlabind_testing.cuda_host_callback(style, fn), cupy, torch, False)
        )
    for name, label, style, fn, cupy, torch in CASES:
        if name in FOREIGN_THREAD:
            prepared.append(
                (
                    name + "_foreign_thread",
                    label + " [XLA-like thread]",
                    xlabind_testing.cuda_host_callback(style, fn),
                    cupy,
                    torch,
                    True,
                )
            )
    samples: dict[str, list[float]] = {name: [] for name, *_ in prepared}
    for _ in range(rounds + 1):  # the first round warms up
        for name, _label, callback, cupy, torch, foreign in prepared:
            undo = _with_libraries(cupy, torch)
            try:
                seconds = xlabind_testing.time_cuda_host_calls(
                    callback, buffers, 1, calls, XLA_STREAM, DEVICE, foreign_thread=foreign
                )
            finally:
                undo()
            samples[name].append(seconds / calls * 1e6)
    rows = []
    for name, label, *_ in prepared:
        s = samples[name][1:]
        q = statistics.quantiles(s, n=10) if len(s) > 1 else [s[0]] * 9
        rows.append(
            {
                "name": name,
                "label": label,
                "p10_us": q[0],
                "p50_us": statistics.median(s),
                "p90_us": q[-1],
            }
        )
    floor = rows[0]["p50_us"]
    for row in rows:
        row["vs_floor"] = row["p50_us"] / floor
        row["added_us"] = row["p50_us"] - floor
    return rows


def print_table(rows: list[dict]) -> None:
    print("CUDA callbacks' host work on the CPU (stand-in CuPy and PyTorch; no driver):")
    print(f"{'case':<88} {'p10':>7} {'p50':>7} {'p90':>7} {'added':>7} {'x floor':>8}")
    for row in rows:
        print(
            f"{row['label']:<88} {row['p10_us']:7.2f} {row['p50_us']:7.2f} "
            f"{row['p90_us']:7.2f} {row['added_us']:7.2f} {row['vs_floor']:8.2f}"
        )
    print("(µs per call; added: over the floor)")


def cuda_host_main(args) -> dict:
    rounds = 5 if args.quick else 30
    calls = 2000 if args.quick else 20000
    rows = measure(rounds, calls)
    print_table(rows)
    return {"cuda_host": rows, "rounds": rounds, "calls_per_round": calls}


if __name__ == "__main__":  # a quick look without the benchmark's driver
    print_table(measure(5, 5000))
