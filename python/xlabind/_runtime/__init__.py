"""Layer 2 of xlabind: the compiled modules and how a call runs.

  extension.py         the only module that loads the compiled modules, and
                       registers their FFI handlers with jax
  python_functions.py  a Python function per platform: the registry entries
                       and adapters the C++ handler calls
  python_on_cuda.py    the Python half of a CUDA callback (XLA's stream made
                       CuPy's and PyTorch's, returned device arrays copied)
  native_targets.py    native FFI targets (xlabind.ffi_target)
  ffi_custom_call.py   the custom call each implementation emits
  make_definition.py   which implementation runs a user's function

Where the GIL is taken, views are made and kept views detached is C++:
ffi/common/python_call.h.
"""
