"""The CUDA callback handler's host path with a stand-in for NVIDIA's driver
(fake_libcuda.c, loaded as libcuda.so.1 through LD_LIBRARY_PATH in a process
of its own): the context of XLA's stream is made current for the call and
no longer after it, whatever the call does; a context already current is not
pushed again; `xlabind.cuda.is_capturing()` says what the driver says; a
capturable function's CuPy allocation is refused during a capture, through
the handler; and one that launched nothing while captured is an error. No
GPU: the calls run on buffers that are only addresses
(`_xlabind._time_cuda_host_calls`, which makes each call as the handler does)."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

FAKE = pathlib.Path("tests/runtime/libcuda.so.1").resolve()  # in this test's runfiles

PRELUDE = textwrap.dedent("""
    import ctypes, json, sys, threading
    from cuda_host_calls import host_calls

    driver = ctypes.CDLL("libcuda.so.1")  # the one the handler loaded
    driver.fake_cuda_count.restype = ctypes.c_int64
    count = lambda name: driver.fake_cuda_count(name.encode())
    FLOATS = [(0x100000, [4], "float32"), (0x200000, [4], "float32")]

    def calls(fn, n=1, **options):
        return host_calls(fn, FLOATS, n, **options)

    def outcomes(cases, **options):  # per (fn, capture status): "ran", or the error
        said = []
        for fn, status in cases:
            driver.fake_cuda_set_capture_status(status)
            try:
                calls(fn, **options)
                said.append("ran")
            except RuntimeError as error:
                said.append(str(error))
        return said
""")


def run(body: str) -> dict:
    assert FAKE.exists(), FAKE
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": f"{FAKE.parent}:{os.environ.get('LD_LIBRARY_PATH', '')}",
        "JAX_PLATFORMS": "cpu",
    }
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_handler_loads_the_stand_in():
    report = run("""
        calls(lambda operands, results: None)
        print(json.dumps({"init": count("cuInit"), "unknown": count("cuNothing")}))
    """)
    assert report == {"init": 1, "unknown": -1}


def test_xlas_context_is_current_during_the_call_and_popped_on_every_exit():
    report = run("""
        inside = []

        def look(operands, results):
            inside.append(driver.fake_cuda_context_depth())

        def fail(operands, results):
            inside.append(driver.fake_cuda_context_depth())
            raise ValueError("the function failed")

        calls(look, 3)
        failed = ""
        try:
            calls(fail, 1)
        except RuntimeError as error:
            failed = str(error)
        print(json.dumps({"inside": inside, "after": driver.fake_cuda_context_depth(),
                          "pushed": count("cuCtxPushCurrent"),
                          "popped": count("cuCtxPopCurrent"), "failed": failed}))
    """)
    assert report["inside"] == [1, 1, 1, 1]  # pushed for each call, the failing one too
    assert report["after"] == 0
    assert report["pushed"] == report["popped"] == 4
    assert "the function failed" in report["failed"]


def test_a_context_already_current_is_not_pushed_again():
    # A callback that makes another CUDA call (here: the handler's own path,
    # nested) finds XLA's context current already.
    report = run("""
        depths = []

        def inner(operands, results):
            depths.append(("inner", driver.fake_cuda_context_depth()))

        def outer(operands, results):
            depths.append(("outer", driver.fake_cuda_context_depth()))
            calls(inner)

        calls(outer)
        print(json.dumps({"depths": depths, "pushed": count("cuCtxPushCurrent"),
                          "popped": count("cuCtxPopCurrent"),
                          "after": driver.fake_cuda_context_depth()}))
    """)
    assert report["depths"] == [["outer", 1], ["inner", 1]]
    assert report["pushed"] == report["popped"] == 1 and report["after"] == 0


def test_on_a_thread_python_did_not_start_too():
    report = run("""
        seen = []

        def look(operands, results):
            seen.append((threading.current_thread() is threading.main_thread(),
                         driver.fake_cuda_context_depth()))

        calls(look, 3, foreign_thread=True)
        print(json.dumps({"seen": seen, "pushed": count("cuCtxPushCurrent"),
                          "popped": count("cuCtxPopCurrent")}))
    """)
    assert report["seen"] == [[False, 1]] * 3
    assert report["pushed"] == report["popped"] == 3


def test_is_capturing_says_what_the_driver_says():
    report = run("""
        import xlabind.cuda
        seen = []

        def look(x, *, out):
            seen.append(xlabind.cuda.is_capturing())
            driver.fake_cuda_launch()  # work for the graph

        calls(look, style="in_place")
        driver.fake_cuda_set_capture_status(1)
        calls(look, style="in_place")
        driver.fake_cuda_set_capture_status(0)
        seen.append(xlabind.cuda.is_capturing())  # outside any call
        print(json.dumps({"seen": seen, "asked": count("cuStreamIsCapturing")}))
    """)
    assert report["seen"] == [False, True, False]
    assert report["asked"] == 2


def test_a_cupy_allocation_during_a_capture_fails_with_xlabinds_message():
    # CuPy stands in as the entry points xlabind uses; its allocator is the
    # thread-local one cupy.cuda.using_allocator sets.
    report = run("""
        import types, contextlib
        allocator = [lambda size: "pool block"]

        @contextlib.contextmanager
        def using_allocator(new):
            allocator.append(new)
            try:
                yield
            finally:
                allocator.pop()

        class Stream:
            def __init__(self, ptr):
                self.ptr = ptr
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                pass
            @classmethod
            def from_external(cls, obj):
                return cls(obj.__cuda_stream__()[1])

        current = Stream(0x7000)
        cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(
            Stream=Stream, using_allocator=using_allocator,
            get_current_stream=lambda device=None: current))
        sys.modules["cupy"] = cupy

        def scale(x, *, out):
            allocator[-1](4096)  # a temporary

        said = outcomes([(scale, 0), (scale, 1)], style="in_place", capturable=True)
        print(json.dumps({"outcomes": said, "allocators": len(allocator)}))
    """)
    ran, refused = report["outcomes"]
    assert ran == "ran"
    assert (
        "xlabind: scale asked CuPy for 4096 bytes of device memory while XLA captured it" in refused
    ), refused
    assert report["allocators"] == 1


def test_a_captured_call_that_launched_nothing_is_an_error():
    # Newer XLA refuses an empty graph in its own words ("Traced CUDA graph is
    # empty"); xlabind says which function and why.
    report = run("""
        def idle(x, *, out):
            pass

        def launches(x, *, out):
            driver.fake_cuda_launch()

        said = outcomes([(idle, 0), (launches, 1), (idle, 1)], style="in_place",
                        capturable=True)
        print(json.dumps({"outcomes": said, "asked": count("cuGraphGetNodes")}))
    """)
    outside, launched, idle = report["outcomes"]
    assert outside == "ran" and launched == "ran"  # not captured; captured with work
    assert idle.startswith(
        "xlabind callback 'idle' launched no work on XLA's stream while "
        "XLA captured it into a CUDA graph"
    ), idle
    assert report["asked"] == 4  # before and after each captured call
