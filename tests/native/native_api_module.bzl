"""The handlers of tests/native/native_api_handlers.cc and
cuda_bodies_handlers.cc, by platform, for xlabind_extension
(tests/native/BUILD.bazel)."""

load("//ffi:defs.bzl", "xlabind_handler")

NATIVE_API_HANDLERS = {
    "cpu": {
        "native_api_counter": xlabind_handler(
            instantiate = "NativeApiCounterInstantiate",
            execute = "NativeApiCounterExecute",
        ),
        "native_api_pool": "NativeApiPool",
        "native_api_scratch": "NativeApiScratch",
        "native_api_scale": "NativeApiScale",
        "native_api_ticket": "NativeApiTicket",
        # cuda_bodies_handlers.cc: the CUDA kernels' loop bodies, on the host.
        "native_api_cuda_gather_bodies": "NativeApiCudaGatherBodies",
        "native_api_cuda_scatter_bodies": "NativeApiCudaScatterBodies",
    },
    "cuda": {
        "native_api_nothing": "NativeApiNothingCuda",
        "native_api_nothing_cb": xlabind_handler(
            execute = "NativeApiNothingCuda",
            command_buffer = True,
        ),
    },
}

NATIVE_API_STATE_TYPES = {"cpu": ["NativeApiCounter"]}
