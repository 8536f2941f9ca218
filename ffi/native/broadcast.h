// Moved: the helpers are included as "xlabind/native/broadcast.h" (the file is
// ffi/native/include/xlabind/native/broadcast.h), no longer by this repository path.
#error \
    "xlabind: include \"xlabind/native/broadcast.h\", not \"ffi/native/broadcast.h\" (moved in xlabind 0.5.0; Bazel: deps = [\"@xlabind//ffi/native:helpers\"]; elsewhere: the include path python -m xlabind --includes prints)"
