# What the TensorFlow found by TensorFlowFromPython.cmake lets this library
# build, decided by probing its headers (through cc/kernels/tf_compat.h, the one
# header that knows where things moved between releases), not by version
# numbers. A feature that a release cannot have is left out of the build and
# explained in the build record, which `python -m grad_reverse info` prints.
#
#   grad_reverse_check_tensorflow_version(PYTHON VERSION)
#       stops the configure with the supported range when VERSION is older
#       than it (build_tools/tensorflow_requirement.py holds the range; the
#       environment variable it names allows building anyway); sets
#       TF_NEWER_THAN_TESTED (ON/OFF) with a warning for a newer release.
#   grad_reverse_probe_tensorflow_features()
#       sets TF_HAS_XLA_HEADERS and TF_HAS_STREAM_HEADER (ON/OFF), and
#       TF_XLA_HEADERS_NOTE (why not, when the headers are there but unusable).
#   grad_reverse_check_cuda_versions(NVCC_VERSION TF_CUDA_VERSION OUT_NOTE)
#       warns when the CUDA toolkit's major version differs from the one
#       TensorFlow was built with, and returns the note for the build record.
include_guard(GLOBAL)
include(CheckCXXSourceCompiles)

set(_grad_reverse_features_dir ${CMAKE_CURRENT_LIST_DIR})

function(grad_reverse_check_tensorflow_version python version)
  execute_process(
    COMMAND ${python} ${_grad_reverse_features_dir}/../build_tools/tensorflow_requirement.py
            check-version ${version}
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE result
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
  set(TF_NEWER_THAN_TESTED OFF PARENT_SCOPE)
  if(result EQUAL 2)
    message(FATAL_ERROR "${err}")
  elseif(result EQUAL 3)
    set(TF_NEWER_THAN_TESTED ON PARENT_SCOPE)
  elseif(NOT result EQUAL 0)
    message(FATAL_ERROR "grad_reverse: cannot check the TensorFlow version (${result}): ${err}")
  endif()
  if(out)
    message(WARNING "${out}")
  endif()
endfunction()

# Compiles a program that includes only tf_compat.h and fails unless MACRO is
# 1: quick (no TensorFlow header is parsed), and re-run at every configure so
# a build folder reused with another TensorFlow gets a fresh answer.
function(_grad_reverse_probe macro result_var)
  set(CMAKE_REQUIRED_INCLUDES ${TF_INCLUDE_DIR} ${_grad_reverse_features_dir}/..)
  set(CMAKE_REQUIRED_QUIET ON)
  unset(${result_var} CACHE)
  check_cxx_source_compiles("
#include \"cc/kernels/tf_compat.h\"
#if !${macro}
#error not available
#endif
int main() { return 0; }" ${result_var})
  if(${result_var})
    set(${result_var} ON PARENT_SCOPE)
  else()
    set(${result_var} OFF PARENT_SCOPE)
  endif()
endfunction()

# Runs only the preprocessor (-M: the list of included files) over a source
# that includes tf_compat.h and then HEADER, with TensorFlow's flags: a
# release whose headers include files its wheel does not ship fails here in
# seconds (TensorFlow 2.19's tf2xla headers reach llvm/ADT/ArrayRef.h, which
# no 2.19 wheel has), instead of failing the build a minute later.
function(_grad_reverse_header_closure header result_var note_var)
  set(dir ${CMAKE_BINARY_DIR}/tensorflow-probes)
  string(MAKE_C_IDENTIFIER "${header}" name)
  file(WRITE ${dir}/${name}.cc "#include \"cc/kernels/tf_compat.h\"\n#include ${header}\n")
  set(defines "")
  foreach(define IN LISTS TF_DEFINES)
    list(APPEND defines "-D${define}")
  endforeach()
  execute_process(
    COMMAND ${CMAKE_CXX_COMPILER} -std=c++17 -M -MF ${dir}/${name}.d ${defines}
            -I${_grad_reverse_features_dir}/.. -isystem ${TF_INCLUDE_DIR}
            -isystem ${TF_INCLUDE_DIR}/external/highwayhash
            -isystem ${TF_INCLUDE_DIR}/external/farmhash_archive/src
            ${dir}/${name}.cc
    RESULT_VARIABLE result OUTPUT_QUIET ERROR_VARIABLE error)
  if(result EQUAL 0)
    set(${result_var} ON PARENT_SCOPE)
    set(${note_var} "" PARENT_SCOPE)
  else()
    set(${result_var} OFF PARENT_SCOPE)
    if(error MATCHES "fatal error: ([^:\n]+): No such file")
      set(${note_var} "its headers include ${CMAKE_MATCH_1}, which this TensorFlow does not ship" PARENT_SCOPE)
    else()
      string(REGEX MATCH "error: [^\n]*" first_error "${error}")
      set(${note_var} "its headers do not preprocess: ${first_error}" PARENT_SCOPE)
    endif()
  endif()
endfunction()

function(grad_reverse_probe_tensorflow_features)
  _grad_reverse_probe(GRAD_REVERSE_TF_HAS_XLA_HEADERS _xla)
  _grad_reverse_probe(GRAD_REVERSE_TF_HAS_STREAM_HEADER _stream)
  set(xla_note "")
  if(_xla)
    _grad_reverse_header_closure("\"tensorflow/compiler/tf2xla/xla_op_kernel.h\"" _xla_closure xla_note)
    if(NOT _xla_closure)
      set(_xla OFF)
      set(xla_note "TensorFlow ${TF_VERSION}'s tf2xla API cannot be compiled against: ${xla_note}")
    endif()
  endif()
  set(TF_HAS_XLA_HEADERS ${_xla} PARENT_SCOPE)
  set(TF_XLA_HEADERS_NOTE "${xla_note}" PARENT_SCOPE)
  set(TF_HAS_STREAM_HEADER ${_stream} PARENT_SCOPE)
endfunction()

function(grad_reverse_check_cuda_versions nvcc_version tf_cuda_version out_note)
  set(note "")
  if(tf_cuda_version STREQUAL "unknown")
    # TensorFlow 2.22's build info has no cuda_version (tensorflow_cuda.py).
    set(note "built with CUDA ${nvcc_version} (static runtime); this TensorFlow does not say which CUDA it was built with, so whether the driver it needs suffices for the GPU kernel is unchecked")
    message(STATUS "grad_reverse: ${note}")
  elseif(tf_cuda_version AND nvcc_version)
    string(REGEX MATCH "^[0-9]+" nvcc_major "${nvcc_version}")
    string(REGEX MATCH "^[0-9]+" tf_major "${tf_cuda_version}")
    if(NOT nvcc_major STREQUAL tf_major)
      set(note "built with CUDA ${nvcc_version} (static runtime) for a TensorFlow built with CUDA ${tf_cuda_version}: the GPU kernel needs an NVIDIA driver that supports CUDA ${nvcc_major}")
      message(WARNING
        "grad_reverse: nvcc is CUDA ${nvcc_version}, but this TensorFlow was built with "
        "CUDA ${tf_cuda_version}. The library will link CUDA ${nvcc_version}'s static runtime, "
        "so its GPU kernel runs only under an NVIDIA driver that supports CUDA ${nvcc_major}; "
        "under an older driver (enough for TensorFlow's CUDA ${tf_major}) GradReverseGrad "
        "fails on the GPU with an error naming the driver. To match TensorFlow, point the "
        "build at a CUDA ${tf_major} toolkit (CUDACXX=<cuda-${tf_major}>/bin/nvcc), or build "
        "without CUDA (pip install . -C cmake.define.GRAD_REVERSE_CUDA=OFF; GradReverseGrad "
        "then runs on the CPU unless XLA compiles it).")
    endif()
  endif()
  set(${out_note} "${note}" PARENT_SCOPE)
endfunction()
