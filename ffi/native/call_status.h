// Moved: the helpers are included as "xlabind/native/call_status.h" (the file is
// ffi/native/include/xlabind/native/call_status.h), no longer by this repository path.
#error \
    "xlabind: include \"xlabind/native/call_status.h\", not \"ffi/native/call_status.h\" (moved in xlabind 0.5.0; Bazel: deps = [\"@xlabind//ffi/native:helpers\"]; elsewhere: the include path python -m xlabind --includes prints)"
