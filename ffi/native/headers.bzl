"""The public helper headers, by name: the cc_library here and the copies the
Python package ships under xlabind/include/xlabind/native (python/BUILD.bazel),
one list. tests/native/test_public_headers.py holds it to the folder."""

PUBLIC_HEADERS = [
    "attributes.h",
    "broadcast.h",
    "call_status.h",
    "cpu_features.h",
    "dtype_dispatch.h",
    "dtype_names.h",
    "errors.h",
    "handler_traits.h",
    "host_device.h",
    "parallel_for.h",
    "scratch.h",
    "shapes.h",
    "state.h",
]
