// Moved: the helpers are included as "xlabind/native/state.h" (the file is
// ffi/native/include/xlabind/native/state.h), no longer by this repository path.
#error \
    "xlabind: include \"xlabind/native/state.h\", not \"ffi/native/state.h\" (moved in xlabind 0.5.0; Bazel: deps = [\"@xlabind//ffi/native:helpers\"]; elsewhere: the include path python -m xlabind --includes prints)"
