# find_package(xlabind CONFIG): xlabind's native API for handler libraries
# built with CMake. The folder is `python -m xlabind --cmake-dir` of the
# Python environment that will load the result (docs/native/cmake.md).
#
#   xlabind::native             INTERFACE target: xlabind's headers
#                               (xlabind/native/*.h), XLA's FFI headers from
#                               jax.ffi.include_dir(), C++17 (and CUDA C++17
#                               where CUDA is enabled first).
#   xlabind_add_extension(NAME HANDLERS FILE[:VARIABLE]
#                         [STATE_TYPES FILE:VARIABLE] SOURCES ...
#                         [CUDA_SOURCES ...])
#                               the Python module NAME handing out the
#                               handlers' capsules to
#                               xlabind.register_ffi_targets, as Bazel's
#                               xlabind_extension makes it.
#
# Variables: xlabind_INCLUDE_DIR, xlabind_XLA_FFI_INCLUDE_DIR,
# xlabind_PYTHON (the interpreter asked for jax's headers: Python_EXECUTABLE
# where the project found one, as scikit-build-core's builds do).
cmake_minimum_required(VERSION 3.18)
include_guard(GLOBAL)

get_filename_component(xlabind_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../include" ABSOLUTE)

if(DEFINED Python_EXECUTABLE)
  set(xlabind_PYTHON "${Python_EXECUTABLE}")
elseif(DEFINED Python3_EXECUTABLE)
  set(xlabind_PYTHON "${Python3_EXECUTABLE}")
else()
  find_package(Python 3.11 REQUIRED COMPONENTS Interpreter)
  set(xlabind_PYTHON "${Python_EXECUTABLE}")
endif()

if(NOT xlabind_XLA_FFI_INCLUDE_DIR)
  execute_process(
    COMMAND "${xlabind_PYTHON}" -c "import jax.ffi; print(jax.ffi.include_dir())"
    OUTPUT_VARIABLE _xlabind_ffi_include
    ERROR_VARIABLE _xlabind_ffi_error
    RESULT_VARIABLE _xlabind_ffi_status
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _xlabind_ffi_status EQUAL 0)
    set(${CMAKE_FIND_PACKAGE_NAME}_FOUND FALSE)
    set(${CMAKE_FIND_PACKAGE_NAME}_NOT_FOUND_MESSAGE
        "xlabind needs jax's FFI headers, but ${xlabind_PYTHON} cannot import jax.ffi "
        "(install jax there, or set Python_EXECUTABLE to the interpreter that has it): "
        "${_xlabind_ffi_error}")
    return()
  endif()
  set(xlabind_XLA_FFI_INCLUDE_DIR "${_xlabind_ffi_include}" CACHE PATH
      "XLA's FFI headers (jax.ffi.include_dir())")
endif()

if(NOT TARGET xlabind::native)
  add_library(xlabind::native INTERFACE IMPORTED)
  target_include_directories(xlabind::native INTERFACE
    "${xlabind_INCLUDE_DIR}" "${xlabind_XLA_FFI_INCLUDE_DIR}")
  target_compile_features(xlabind::native INTERFACE cxx_std_17)
  # The CUDA-language variant: .cu files that include the headers (such as
  # xlabind/native/host_device.h) get C++17 too, where the project has
  # enabled CUDA before find_package.
  get_property(_xlabind_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CUDA" IN_LIST _xlabind_languages)
    target_compile_features(xlabind::native INTERFACE cuda_std_17)
  endif()
endif()

function(xlabind_add_extension name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "HANDLERS;STATE_TYPES"
                        "SOURCES;CUDA_SOURCES")
  if(NOT arg_HANDLERS)
    message(FATAL_ERROR "xlabind_add_extension(${name}): HANDLERS is required "
                        "(FILE.json or FILE:VARIABLE)")
  endif()
  # Only the platforms this build compiles: without CUDA the module hands
  # out the CPU handlers alone.
  set(platforms cpu)
  if(arg_CUDA_SOURCES)
    list(APPEND platforms cuda)
  endif()
  list(JOIN platforms "," platform_list)
  set(source "${CMAKE_CURRENT_BINARY_DIR}/${name}_module.cc")
  set(command "${xlabind_PYTHON}" -m xlabind._generate_extension --module "${name}"
      --handlers "${arg_HANDLERS}" --platforms "${platform_list}" --out "${source}")
  set(depends "")
  foreach(spec IN ITEMS "${arg_HANDLERS}" "${arg_STATE_TYPES}")
    if(spec)
      string(REGEX REPLACE ":[A-Za-z_][A-Za-z0-9_]*$" "" file "${spec}")
      list(APPEND depends "${file}")
    endif()
  endforeach()
  if(arg_STATE_TYPES)
    list(APPEND command --state-types "${arg_STATE_TYPES}")
  endif()
  add_custom_command(OUTPUT "${source}" COMMAND ${command}
                     DEPENDS ${depends} "${CMAKE_CURRENT_LIST_FILE}"
                     COMMENT "xlabind: the extension module ${name}'s source"
                     VERBATIM)
  if(NOT COMMAND Python_add_library)
    find_package(Python 3.11 REQUIRED COMPONENTS Interpreter Development.Module)
  endif()
  Python_add_library(${name} MODULE WITH_SOABI "${source}" ${arg_SOURCES} ${arg_CUDA_SOURCES})
  target_link_libraries(${name} PRIVATE xlabind::native)
  # Python finds the module by PyInit_<name>; nothing else need be seen.
  set_target_properties(${name} PROPERTIES CXX_VISIBILITY_PRESET hidden
                        CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  if(arg_CUDA_SOURCES)
    find_package(CUDAToolkit REQUIRED)
    target_link_libraries(${name} PRIVATE CUDA::cudart_static)
    set_target_properties(${name} PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  endif()
endfunction()
