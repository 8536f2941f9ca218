"""xlabind's native ops, by extension module: {module: {platform: {FFI target:
handler symbol}}}. ffi/ops/BUILD.bazel builds these modules."""

NATIVE_OP_MODULES = {
    # Loaded always: needs nothing but the C++ runtime.
    "_xlabind_ops": {"cpu": {
        "xlabind_map_coordinates": "XlabindMapCoordinatesCpu",
        "xlabind_map_coordinates_transpose": "XlabindMapCoordinatesTransposeCpu",
        "xlabind_spline_filter": "XlabindSplineFilterCpu",
        "xlabind_spline_filter_transpose": "XlabindSplineFilterTransposeCpu",
    }},
    # Loaded when the CUDA 13 runtime is there (python/xlabind/_runtime/extension.py).
    "_xlabind_cuda_ops": {"cuda": {
        "xlabind_map_coordinates": "XlabindMapCoordinatesCuda",
        "xlabind_map_coordinates_transpose": "XlabindMapCoordinatesTransposeCuda",
        "xlabind_spline_filter": "XlabindSplineFilterCuda",
        "xlabind_spline_filter_transpose": "XlabindSplineFilterTransposeCuda",
    }},
}
