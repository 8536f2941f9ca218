"""The handlers of consumer_ops, for xlabind_extension in BUILD.bazel: a plain
dict literal, so that xlabind's tools/gpu_check.py can build this module on a
GPU machine without Bazel."""

CONSUMER_HANDLERS = {
    "cpu": {
        "consumer_scale": "ConsumerScaleCpu",
        "consumer_square": "ConsumerSquareCpu",
        "consumer_square_jvp": "ConsumerSquareJvpCpu",
        # A table built once per executable (table_handlers.cc).
        "consumer_table": {
            "instantiate": "ConsumerTableBuildCpu",
            "execute": "ConsumerTableCpu",
        },
        "consumer_table_jvp": {
            "instantiate": "ConsumerTableBuildCpu",
            "execute": "ConsumerTableJvpCpu",
        },
        "consumer_tables_built": "ConsumerTablesBuilt",
    },
    "cuda": {
        "consumer_scale": "ConsumerScaleCuda",
        "consumer_table": {
            "instantiate": "ConsumerTableBuildCuda",
            "execute": "ConsumerTableCuda",
        },
        # One kernel, the same every call, no scratch: a CUDA graph may capture it.
        "consumer_table_jvp": {
            "instantiate": "ConsumerTableBuildCuda",
            "execute": "ConsumerTableJvpCuda",
            "command_buffer": True,
        },
    },
}

CONSUMER_STATE_TYPES = {"cpu": ["ConsumerTableCpu"], "cuda": ["ConsumerTableCuda"]}
