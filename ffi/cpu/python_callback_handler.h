// Moved: this handler's header is included as
// "xlabind/cpu/python_callback_handler.h" (the file is
// ffi/cpu/include/xlabind/cpu/python_callback_handler.h), no longer by this
// repository path.
#error \
    "xlabind: include \"xlabind/cpu/python_callback_handler.h\", not \"ffi/cpu/python_callback_handler.h\" (moved in xlabind 0.5.0; deps = [\"@xlabind//ffi/cpu:python_callback_handler\"])"
