"""The Python half of CUDA callbacks, checked on the CPU with stand-ins for the
GPU: XLA's stream becomes CuPy's and PyTorch's current stream (and stops being
it after the call), returned arrays are checked before any copy,
synchronize=True waits where it says; and the handler's views are reused
across calls without ever showing a stale address."""

import sys
import textwrap
import types

import numpy as np
import pytest
from cuda_host_calls import XLA_STREAM, host_calls

import xlabind.testing as xlabind_testing
from xlabind import _xlabind
from xlabind._runtime import extension, python_on_cuda

DEVICE = 3


def device_array(dtype="float32", shape=(4,), readonly=False, data=0x20000):
    return _xlabind.DeviceArray._for_testing(
        data, list(shape), xlabind_testing.element_type_code(dtype), readonly, XLA_STREAM, DEVICE
    )


class FakeStream:
    def __init__(self, ptr, log, current, device_id=-1):
        self.ptr, self.log, self.current, self.device_id = ptr, log, current, device_id

    def __enter__(self):
        self.log.append(("stream", self.ptr, self.device_id))
        self.current.append(self.ptr)

    def __exit__(self, *exc):
        self.log.append(("stream done", self.ptr))
        self.current.pop()


# What blocks the host: the calls the common path must never make.
BLOCKING = ("sync", "device sync")


def blocking(log):
    return [entry for entry in log if isinstance(entry, tuple) and entry[0] in BLOCKING]


@pytest.fixture
def fake_gpu(monkeypatch):
    """A running CUDA call on XLA_STREAM, a fake CuPy, and a record of driver calls."""
    log = []
    current = [0]  # CuPy's current stream (0: the legacy default stream)
    cupy = types.SimpleNamespace(
        current=current,
        cuda=types.SimpleNamespace(
            ExternalStream=lambda ptr, device_id: FakeStream(ptr, log, current, device_id),
            # The handler makes the device current (C++); a device context here
            # would be a cudaSetDevice per call.
            Device=lambda d: pytest.fail("a CuPy device context was entered"),
            get_current_stream=lambda device=None: types.SimpleNamespace(ptr=current[-1]),
        ),
    )
    # The fake CuPy and no PyTorch, as the benchmark installs its stand-ins;
    # each test watches PyTorch's initialization afresh.
    monkeypatch.setattr(python_on_cuda, "_watched_torch", None)
    undo = xlabind_testing.use_cuda_libraries(cupy, None)
    # Then the driver: calls logged (use_cuda_libraries made the copy a no-op).
    monkeypatch.setattr(extension, "cuda_current_call", lambda: (XLA_STREAM, DEVICE))
    monkeypatch.setattr(extension, "cuda_synchronize_stream", lambda s: log.append(("sync", s)))
    monkeypatch.setattr(
        extension, "cuda_synchronize_device", lambda s: log.append(("device sync", s))
    )
    monkeypatch.setattr(extension, "cuda_copy", lambda *a: log.append(("copy", *a)))
    yield log
    undo()


def test_xlas_stream_is_cupys_during_the_call(fake_gpu):
    inside = []
    result = python_on_cuda.call_on_xla_stream(
        lambda x: inside.append(list(fake_gpu)) or x * 2, (21,), {}, synchronize=False
    )
    assert result == 42
    assert inside[0] == [("stream", XLA_STREAM, DEVICE)]
    assert fake_gpu[-1] == ("stream done", XLA_STREAM)  # and no longer after it
    python_on_cuda.call_on_xla_stream(lambda: None, (), {}, synchronize=False)
    made = [entry for entry in fake_gpu if entry[0] == "stream"]
    assert len(made) == 2 and len(python_on_cuda._streams) == 1  # one CuPy stream, made once


def test_cupy_14_gets_xlas_stream_through_the_stream_protocol(fake_gpu):
    # CuPy 14 deprecates ExternalStream (a DeprecationWarning: an error under
    # -W error) for Stream.from_external(an object with __cuda_stream__).
    cupy = python_on_cuda._cupy_module
    current = cupy.current

    def from_external(obj):
        version, ptr = obj.__cuda_stream__()
        assert version == 0
        return FakeStream(ptr, fake_gpu, current)

    cupy.cuda.Stream = types.SimpleNamespace(from_external=from_external)
    cupy.cuda.ExternalStream = lambda *a, **k: pytest.fail("ExternalStream was used")
    inside = []
    python_on_cuda.call_on_xla_stream(lambda: inside.append(current[-1]), (), {}, synchronize=False)
    assert inside == [XLA_STREAM]
    assert fake_gpu[0] == ("stream", XLA_STREAM, -1)


def test_cupy_memory_asked_for_during_a_capture_is_refused(fake_gpu, monkeypatch):
    # A block from CuPy's (warm) pool would be recorded into the graph and
    # returned to the pool after the call: replays would write another array's
    # memory. During a capture CuPy's allocator (thread-local) refuses instead.
    cupy = python_on_cuda._cupy_module
    allocator = [lambda size: ("pool block", size)]

    class using_allocator:  # cupy.cuda.using_allocator: this thread's allocator, for a while
        def __init__(self, new):
            self.new = new

        def __enter__(self):
            allocator.append(self.new)

        def __exit__(self, *exc):
            allocator.pop()

    cupy.cuda.using_allocator = using_allocator

    def makes_a_temporary(x, *, out):
        return allocator[-1](4096) and None

    run = python_on_cuda.in_place_function(makes_a_temporary, False, capturable=True, name="scale")
    monkeypatch.setattr(extension, "cuda_call_is_capturing", lambda: True)
    with (
        pytest.raises(
            RuntimeError,
            match=r"xlabind: scale asked CuPy for 4096 bytes of "
            r"device memory while XLA captured it",
        ) as raised,
        pytest.warns(RuntimeWarning, match="xlabind: scale failed while XLA captured it"),
    ):
        run(None, out=None)
    assert python_on_cuda.CAPTURE_NOTE in raised.value.__notes__
    assert len(allocator) == 1  # CuPy's own allocator again after the call
    # Outside a capture (the call before one, say) CuPy allocates as usual.
    monkeypatch.setattr(extension, "cuda_call_is_capturing", lambda: False)
    assert run(None, out=None) is None and len(allocator) == 1


class FakeTorch:
    """PyTorch's stream entry points as xlabind uses them: torch._C's by id,
    CUDA initialized or not (then _lazy_call queues until it is)."""

    DEFAULT = (0, DEVICE, 1)

    def __init__(self, initialized=True, private_api=True):
        self.current = {DEVICE: self.DEFAULT}
        self.initialized, self.queued, self.sets = initialized, [], []
        torch = self

        class Stream:
            def __init__(self, stream_id=0, device_index=DEVICE, device_type=1):
                self.stream_id, self.device_index, self.device_type = (
                    stream_id,
                    device_index,
                    device_type,
                )
                self.cuda_stream = stream_id

        class ExternalStream(Stream):
            def __init__(self, ptr, device=None):
                super().__init__(ptr, device[1], 1)

        def set_stream(stream_id, device_index, device_type):
            torch.sets.append(stream_id)
            torch.current[device_index] = (stream_id, device_index, device_type)

        def lazy_call(fn):
            self.queued.append(fn)

        self.device = lambda kind, index: (kind, index)
        self._C = types.SimpleNamespace()
        if private_api:
            self._C._cuda_getCurrentStream = lambda device: self.current[device]
            self._C._cuda_setStream = set_stream
        self.cuda = types.SimpleNamespace(
            is_initialized=lambda: self.initialized,
            _lazy_call=lazy_call,
            ExternalStream=ExternalStream,
            Stream=Stream,
            current_stream=lambda device=None: Stream(*self.current[DEVICE]),
            set_stream=lambda s: set_stream(s.stream_id, s.device_index, s.device_type),
        )

    def initialize(self):
        """What torch.cuda._lazy_init does: runs the queued calls, and only then
        calls itself initialized."""
        for fn in self.queued:
            fn()
        self.queued.clear()
        self.initialized = True

    def stream_id(self):
        return self.current[DEVICE][0]


@pytest.mark.parametrize("private_api", [True, False], ids=["torch._C", "public API"])
def test_pytorchs_current_stream_is_xlas_during_the_call_and_restored_after(
    fake_gpu, monkeypatch, private_api
):
    torch = FakeTorch(private_api=private_api)
    monkeypatch.setitem(sys.modules, "torch", torch)
    seen = []
    python_on_cuda.call_on_xla_stream(
        lambda: seen.append(torch.stream_id()), (), {}, synchronize=False
    )
    assert seen == [XLA_STREAM]
    assert torch.current[DEVICE] == FakeTorch.DEFAULT


def test_pytorch_without_cuda_yet_gets_xlas_stream_when_it_initializes_in_a_call(
    fake_gpu, monkeypatch
):
    torch = FakeTorch(initialized=False)
    monkeypatch.setitem(sys.modules, "torch", torch)
    seen = []

    def first_use_of_cuda():
        seen.append(torch.stream_id())  # not initialized: nothing is set
        torch.initialize()  # e.g. torch.as_tensor(x, device="cuda")
        seen.append(torch.stream_id())

    python_on_cuda.call_on_xla_stream(first_use_of_cuda, (), {}, synchronize=False)
    assert seen == [0, XLA_STREAM]
    assert torch.current[DEVICE] == FakeTorch.DEFAULT  # restored at the end of the call
    for _ in range(3):  # asked once, not once per call
        python_on_cuda.call_on_xla_stream(lambda: None, (), {}, synchronize=False)
    assert torch.sets.count(XLA_STREAM) == 4


def test_nested_calls_restore_each_others_streams(fake_gpu, monkeypatch):
    torch = FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    other = 0x9100
    seen = []

    def inner():
        seen.append(
            ("inner", torch.stream_id(), python_on_cuda.consumers_use_stream(other, DEVICE))
        )

    def outer():
        monkeypatch.setattr(extension, "cuda_current_call", lambda: (other, DEVICE))
        python_on_cuda.call_on_xla_stream(inner, (), {}, synchronize=False)
        monkeypatch.setattr(extension, "cuda_current_call", lambda: (XLA_STREAM, DEVICE))
        seen.append(
            ("outer", torch.stream_id(), python_on_cuda.consumers_use_stream(XLA_STREAM, DEVICE))
        )

    python_on_cuda.call_on_xla_stream(outer, (), {}, synchronize=False)
    assert seen == [("inner", other, True), ("outer", XLA_STREAM, True)]
    assert torch.current[DEVICE] == FakeTorch.DEFAULT and python_on_cuda._active.calls == []


def test_a_function_that_raises_leaves_no_stream_installed(fake_gpu, monkeypatch):
    torch = FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    with pytest.raises(ZeroDivisionError):
        python_on_cuda.call_on_xla_stream(lambda: 1 / 0, (), {}, synchronize=False)
    assert torch.current[DEVICE] == FakeTorch.DEFAULT
    assert fake_gpu[-1] == ("stream done", XLA_STREAM) and python_on_cuda._active.calls == []


def test_synchronize_waits_for_xlas_stream_before_and_the_device_after(fake_gpu):
    python_on_cuda.call_on_xla_stream(lambda: fake_gpu.append("call"), (), {}, synchronize=True)
    order = [entry for entry in fake_gpu if entry == "call" or entry[0] in BLOCKING]
    assert order == [("sync", XLA_STREAM), "call", ("device sync", XLA_STREAM)]


def test_synchronize_waits_for_the_device_after_a_function_that_raised(fake_gpu):
    def fails():
        fake_gpu.append("call")
        raise ValueError("failed after launching work")

    with pytest.raises(ValueError, match="failed after launching work"):
        python_on_cuda.call_on_xla_stream(fails, (), {}, synchronize=True)
    # Its work may still use XLA's buffers, which the failed run frees.
    assert blocking(fake_gpu)[-1] == ("device sync", XLA_STREAM)


class Returned:
    """A device array from another library, by its CUDA array interface."""

    def __init__(self, shape=(4,), typestr="<f4", ptr=0x90000, stream=XLA_STREAM, strides=None):
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (ptr, False),
            "version": 3,
            "strides": strides,
            "stream": stream,
        }


def test_a_returned_array_is_copied_on_xlas_stream(fake_gpu):
    out = device_array()
    assert python_on_cuda.store_result("f", 0, Returned(), out) is False
    assert fake_gpu[-1] == ("copy", 0x20000, 0x90000, 16, XLA_STREAM, None)


def test_an_array_from_another_stream_is_waited_for(fake_gpu):
    adapter = python_on_cuda.returning_adapter(
        lambda x: Returned(stream=0x8888), "f", {}, None, False, False, lambda returned: [returned]
    )
    adapter((device_array(readonly=True),), (device_array(),))
    copy = next(entry for entry in fake_gpu if entry[0] == "copy")
    assert copy[-1] == 0x8888  # XLA's stream waits for the producer's work
    assert fake_gpu[-1] == ("sync", XLA_STREAM)  # before the source may be freed


@pytest.mark.parametrize(
    "value, error",
    [
        (
            None,
            r"f returned None for result 0; expected a device array of dtype float32 and shape "
            r"\(4,\).*in_place=True",
        ),
        (
            np.zeros(4, np.float32),
            r"result 0 is a ndarray on DLPack device type 1, not a CUDA "
            r"device array",
        ),
        (
            Returned(typestr="<f8"),
            r"result 0 has dtype float64, expected a device array of dtype "
            r"float32",
        ),
        (Returned(shape=(5,)), r"result 0 has shape \(5,\), expected"),
        (Returned(shape=(2, 2), strides=(4, 8)), r"is not C-contiguous"),
    ],
)
def test_returned_values_are_checked_before_any_copy(fake_gpu, value, error):
    out = device_array(shape=(2, 2) if error == r"is not C-contiguous" else (4,))
    with pytest.raises((TypeError, ValueError), match=error):
        python_on_cuda.store_result("f", 0, value, out)
    assert not any(entry[0] == "copy" for entry in fake_gpu if isinstance(entry, tuple))


def test_ml_dtypes_results_travel_as_raw_bytes(fake_gpu):
    out = device_array("bfloat16")
    assert python_on_cuda.store_result("f", 0, Returned(typestr="<V2"), out) is False
    assert fake_gpu[-1][:4] == ("copy", 0x20000, 0x90000, 8)


# -- no host-blocking call on the common path; ordering from the stream alone --
class CupyLike:
    """A device array made on the current stream, as CuPy reports it: its CUDA
    array interface names the stream current when it is read."""

    def __init__(self, current, shape=(4,), typestr="<f4", ptr=0x90000):
        self.current, self.shape, self.typestr, self.ptr = current, shape, typestr, ptr

    @property
    def __cuda_array_interface__(self):
        return {
            "shape": self.shape,
            "typestr": self.typestr,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None,
            "stream": self.current(),
        }


def _current(fake_gpu):
    return lambda: python_on_cuda._cupy_module.cuda.get_current_stream().ptr


def test_the_arguments_interface_exports_no_stream_while_xlas_stream_is_current(fake_gpu):
    x = device_array(readonly=True)
    assert x.__cuda_array_interface__["stream"] == XLA_STREAM  # outside the call's streams
    seen = []
    python_on_cuda.call_on_xla_stream(
        lambda: seen.append(x.__cuda_array_interface__["stream"]), (), {}, synchronize=False
    )
    # Ordered for the current stream already: a consumer has nothing to wait for
    # (CuPy would synchronize the host on a stream it was given).
    assert seen == [None]

    def switches_streams():
        with FakeStream(0x5555, fake_gpu, python_on_cuda._cupy_module.current):  # `with Stream():`
            seen.append(x.__cuda_array_interface__["stream"])

    python_on_cuda.call_on_xla_stream(switches_streams, (), {}, synchronize=False)
    assert seen == [None, XLA_STREAM]


def test_the_interface_is_a_fresh_dict_each_read(fake_gpu):
    x = device_array(readonly=True)
    first = x.__cuda_array_interface__
    first["data"] = (0, False)  # a consumer that edits what it was given
    assert x.__cuda_array_interface__["data"] == (0x20000, True)
    assert x.shape == (4,) and x.shape is x.shape  # built once


def test_a_returned_array_made_on_xlas_stream_costs_no_host_sync(fake_gpu):
    adapter = python_on_cuda.returning_adapter(
        lambda x: CupyLike(_current(fake_gpu)),
        "f",
        {},
        None,
        False,
        False,
        lambda returned: [returned],
    )
    adapter((device_array(readonly=True),), (device_array(),))
    copies = [entry for entry in fake_gpu if entry[0] == "copy"]
    assert copies == [("copy", 0x20000, 0x90000, 16, XLA_STREAM, None)]
    assert blocking(fake_gpu) == []


def test_in_place_calls_cost_no_host_sync(fake_gpu):
    run = python_on_cuda.in_place_function(lambda x, *, out: None, synchronize=False)
    for _ in range(3):
        run(device_array(readonly=True), out=device_array())
    assert blocking(fake_gpu) == []


class DlpackLike:
    """A returned device array offering DLPack (like PyTorch's), whose CUDA
    array interface would mislabel bfloat16 as float16."""

    def __init__(self, array):
        self.array, self.asked = array, []
        self.__cuda_array_interface__ = {
            "shape": array.shape,
            "typestr": "<f2",
            "data": (array.ptr, False),
            "version": 2,
        }

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None):
        self.asked.append(stream)
        return self.array.__dlpack__(stream=stream, max_version=max_version)


def test_results_are_read_through_dlpack_on_xlas_stream(fake_gpu):
    source = DlpackLike(
        _xlabind.DeviceArray._for_testing(
            0x90000, [4], xlabind_testing.element_type_code("bfloat16"), False, XLA_STREAM, DEVICE
        )
    )
    out = device_array("bfloat16")
    adapter = python_on_cuda.returning_adapter(
        lambda x: source, "f", {}, None, False, False, lambda returned: [returned]
    )
    adapter((device_array(readonly=True),), (out,))
    assert source.asked == [XLA_STREAM]  # the producer orders its work before XLA's stream
    assert [entry for entry in fake_gpu if entry[0] == "copy"] == [
        ("copy", 0x20000, 0x90000, 8, XLA_STREAM, None)
    ]
    assert blocking(fake_gpu) == []


def test_a_dlpack_result_of_the_wrong_kind_is_refused_before_any_copy(fake_gpu):
    source = DlpackLike(
        _xlabind.DeviceArray._for_testing(
            0x90000, [4], xlabind_testing.element_type_code("float16"), False, XLA_STREAM, DEVICE
        )
    )
    with pytest.raises(
        TypeError,
        match=r"f: result 0 has dtype float16, expected a device array "
        r"of dtype bfloat16",
    ):
        python_on_cuda.store_result("f", 0, source, device_array("bfloat16"))
    assert not any(entry[0] == "copy" for entry in fake_gpu if isinstance(entry, tuple))


def test_dlpack_refuses_stream_zero():
    with pytest.raises(BufferError, match=r"__dlpack__\(stream=0\) is not allowed for CUDA"):
        device_array().__dlpack__(stream=0)


def test_pytorch_imported_during_a_call_runs_on_xlas_stream(fake_gpu, monkeypatch, tmp_path):
    entered = []
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent("""
        import types
        class _Stream:
            def __init__(self, ptr, device=None):
                self.stream_id, self.device_index, self.device_type = ptr, device[1], 1
        def device(kind, index):
            return (kind, index)
        entered = []
        def _set(stream_id, device_index, device_type):
            entered.append(stream_id)
        _C = types.SimpleNamespace(_cuda_getCurrentStream=lambda d: (0, d, 1),
                                   _cuda_setStream=_set)
        class cuda:
            ExternalStream = _Stream
            @staticmethod
            def is_initialized():  # CUDA in use by the time the code runs
                return True
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    watcher = python_on_cuda._TorchImport()
    monkeypatch.setattr(
        sys,
        "meta_path",
        [watcher, *(finder for finder in sys.meta_path if type(finder) is not type(watcher))],
    )

    def uses_torch_first_time():
        import torch  # noqa: F401  (the first import of the program)

        entered.extend(sys.modules["torch"].entered)

    try:
        python_on_cuda.call_on_xla_stream(uses_torch_first_time, (), {}, synchronize=False)
    finally:
        sys.modules.pop("torch", None)
    assert entered == [XLA_STREAM]  # before the code after the import ran
    assert watcher not in sys.meta_path


# -- the handler's views, reused across calls ------------------------------------
def _host_calls(fn, buffers, calls=1):
    """`calls` calls of fn(operands, results) as the CUDA handler makes them
    (no XLA frame, no driver); the first buffer is the operand."""
    return host_calls(fn, buffers, calls, device=DEVICE)


def test_reused_views_show_each_calls_own_buffers(monkeypatch):
    monkeypatch.setattr(python_on_cuda, "_cupy_module", None)
    monkeypatch.setattr(python_on_cuda, "_cupy_checked", True)
    seen = []

    def record(operands, results):
        for view in (*operands, *results):
            interface = view.__cuda_array_interface__
            seen.append(
                (
                    id(view),
                    interface["data"],
                    interface["shape"],
                    view.shape,
                    view.readonly,
                    str(view.dtype),
                )
            )

    wide = tuple(range(1, 11))  # past the shapes kept in place
    _host_calls(record, [(0x1000, (4,), "float32"), (0x2000, (2, 3), "int8")])
    _host_calls(record, [(0x3000, wide, "float64"), (0x4000, (), "bfloat16")])
    assert [entry[1:] for entry in seen] == [
        ((0x1000, True), (4,), (4,), True, "float32"),
        ((0x2000, False), (2, 3), (2, 3), False, "int8"),
        ((0x3000, True), wide, wide, True, "float64"),
        ((0x4000, False), (), (), False, "bfloat16"),
    ]
    # The second call's views are the first call's objects, filled anew.
    assert {seen[2][0], seen[3][0]} == {seen[0][0], seen[1][0]}


def test_a_kept_view_is_released_and_never_handed_out_again(monkeypatch):
    monkeypatch.setattr(python_on_cuda, "_cupy_module", None)
    monkeypatch.setattr(python_on_cuda, "_cupy_checked", True)
    kept, ids = [], []

    def keeps(operands, results):
        ids.append({id(view) for view in (*operands, *results)})
        if not kept:
            kept.append(operands[0])

    with pytest.raises(RuntimeError, match=r"callback 'f' kept a reference to an operand"):
        _host_calls(keeps, [(0x1000, (4,), "float32"), (0x2000, (4,), "float32")])
    with pytest.raises(BufferError, match="kept past the call"):
        _ = kept[0].ptr
    _host_calls(keeps, [(0x5000, (4,), "float32"), (0x6000, (4,), "float32")], calls=3)
    assert all(id(kept[0]) not in later for later in ids[1:])
    assert "released" in repr(kept[0])
