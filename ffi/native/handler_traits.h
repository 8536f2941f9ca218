// Moved: the helpers are included as "xlabind/native/handler_traits.h" (the file is
// ffi/native/include/xlabind/native/handler_traits.h), no longer by this repository path.
#error \
    "xlabind: include \"xlabind/native/handler_traits.h\", not \"ffi/native/handler_traits.h\" (moved in xlabind 0.5.0; Bazel: deps = [\"@xlabind//ffi/native:helpers\"]; elsewhere: the include path python -m xlabind --includes prints)"
