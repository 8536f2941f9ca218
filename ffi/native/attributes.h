// Moved: the helpers are included as "xlabind/native/attributes.h" (the file is
// ffi/native/include/xlabind/native/attributes.h), no longer by this repository path.
#error \
    "xlabind: include \"xlabind/native/attributes.h\", not \"ffi/native/attributes.h\" (moved in xlabind 0.5.0; Bazel: deps = [\"@xlabind//ffi/native:helpers\"]; elsewhere: the include path python -m xlabind --includes prints)"
