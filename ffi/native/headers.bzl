"""The public helper headers, by name: the cc_library here and the copies the
Python package ships under xlabind/include/xlabind/native (python/BUILD.bazel),
one list. tests/native/test_public_headers.py holds it to the folder,
include/xlabind/native."""

# Where the headers are, in this package: the path they are included by.
FOLDER = "include/xlabind/native/"

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

def public_header_paths():
    """Each public header's path in this package."""
    return [FOLDER + name for name in PUBLIC_HEADERS]
