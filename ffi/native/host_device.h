// Moved: the helpers are included as "xlabind/native/host_device.h" (the file is
// ffi/native/include/xlabind/native/host_device.h), no longer by this repository path.
#error \
    "xlabind: include \"xlabind/native/host_device.h\", not \"ffi/native/host_device.h\" (moved in xlabind 0.5.0; Bazel: deps = [\"@xlabind//ffi/native:helpers\"]; elsewhere: the include path python -m xlabind --includes prints)"
