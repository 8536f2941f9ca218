// Moved: the helpers are included as "xlabind/native/cpu_features.h" (the file is
// ffi/native/include/xlabind/native/cpu_features.h), no longer by this repository path.
#error \
    "xlabind: include \"xlabind/native/cpu_features.h\", not \"ffi/native/cpu_features.h\" (moved in xlabind 0.5.0; Bazel: deps = [\"@xlabind//ffi/native:helpers\"]; elsewhere: the include path python -m xlabind --includes prints)"
