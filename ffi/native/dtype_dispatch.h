// Moved: the helpers are included as "xlabind/native/dtype_dispatch.h" (the file is
// ffi/native/include/xlabind/native/dtype_dispatch.h), no longer by this repository path.
#error \
    "xlabind: include \"xlabind/native/dtype_dispatch.h\", not \"ffi/native/dtype_dispatch.h\" (moved in xlabind 0.5.0; Bazel: deps = [\"@xlabind//ffi/native:helpers\"]; elsewhere: the include path python -m xlabind --includes prints)"
