"""examples/native_op's scale op from the library build_plain.sh compiles
(no extension module): its handler's symbol, loaded with ctypes, registered
and bound with xlabind."""

import ctypes
import pathlib

import jax

import xlabind

# [bind]
library = ctypes.cdll.LoadLibrary(
    str(pathlib.Path(__file__).with_name("libexample_scale.so"))
)
xlabind.register_ffi_targets(
    {"cpu": {"example_scale": jax.ffi.pycapsule(library.ExampleScaleCpu)}}
)
SCALE = xlabind.ffi_target("example_scale")
scale = xlabind.linear(SCALE, SCALE, lambda x, **_: x, vmap_method="expand_dims")
# [bind]
