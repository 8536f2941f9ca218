// Moved: the helpers are included as "xlabind/native/parallel_for.h" (the file is
// ffi/native/include/xlabind/native/parallel_for.h), no longer by this repository path.
#error \
    "xlabind: include \"xlabind/native/parallel_for.h\", not \"ffi/native/parallel_for.h\" (moved in xlabind 0.5.0; Bazel: deps = [\"@xlabind//ffi/native:helpers\"]; elsewhere: the include path python -m xlabind --includes prints)"
