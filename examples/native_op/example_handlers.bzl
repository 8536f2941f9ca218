"""The handlers of example_ops, for xlabind_extension in BUILD.bazel: {platform:
{FFI target name: the C symbol of its handler, or xlabind_handler(...) of its
stages}}. Plain literals and xlabind_handler calls only, so that a build
without Bazel reads it too (xlabind_add_extension in CMake)."""

load("@xlabind//ffi:defs.bzl", "xlabind_handler")

EXAMPLE_HANDLERS = {
    "cpu": {
        # [scale_cpu]
        "example_scale": "ExampleScaleCpu",
        # [scale_cpu]
        "example_square": "ExampleSquareCpu",
        "example_square_jvp": "ExampleSquareJvpCpu",
        # [table_cpu]
        # A table built once per executable (table_handlers.cc).
        "example_table": xlabind_handler(
            instantiate = "ExampleTableBuildCpu",
            execute = "ExampleTableCpu",
        ),
        "example_table_jvp": xlabind_handler(
            instantiate = "ExampleTableBuildCpu",
            execute = "ExampleTableJvpCpu",
        ),
        # [table_cpu]
        "example_tables_built": "ExampleTablesBuilt",
    },
    "cuda": {
        # [scale_cuda]
        "example_scale": "ExampleScaleCuda",
        # [scale_cuda]
        # [table_cuda]
        "example_table": xlabind_handler(
            instantiate = "ExampleTableBuildCuda",
            execute = "ExampleTableCuda",
        ),
        # One kernel, the same every call, no scratch: a CUDA graph may capture it.
        "example_table_jvp": xlabind_handler(
            instantiate = "ExampleTableBuildCuda",
            execute = "ExampleTableJvpCuda",
            command_buffer = True,
        ),
        # [table_cuda]
    },
}

# [state_types]
EXAMPLE_STATE_TYPES = {"cpu": ["ExampleTableCpu"], "cuda": ["ExampleTableCuda"]}
# [state_types]
