#!/bin/sh
# examples/native_op's CPU op (scale.cc) with no build system at all: one
# compiler command, given the include flags of the installed xlabind and jax.
#   PYTHON=/path/to/env/python ./build_plain.sh   ->  libexample_scale.so
set -e
cd "$(dirname "$0")"
# [build]
${CXX:-c++} -std=c++17 -O2 -shared -fPIC $(${PYTHON:-python3} -m xlabind --includes) \
    ../native_op/scale.cc -o libexample_scale.so
# [build]
