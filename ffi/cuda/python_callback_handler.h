// Moved: this handler's header is included as
// "xlabind/cuda/python_callback_handler.h" (the file is
// ffi/cuda/include/xlabind/cuda/python_callback_handler.h), no longer by this
// repository path.
#error \
    "xlabind: include \"xlabind/cuda/python_callback_handler.h\", not \"ffi/cuda/python_callback_handler.h\" (moved in xlabind 0.5.0; deps = [\"@xlabind//ffi/cuda:python_callback_handler\"])"
