# Asks a Python interpreter for its TensorFlow: the library must be compiled
# against exactly the TensorFlow it will be loaded into.
#
#   grad_reverse_find_tensorflow(PYTHON_EXECUTABLE)
#
# sets TF_VERSION, TF_INCLUDE_DIR, TF_LIB_DIR, TF_DEFINES (the -D flags of
# tf.sysconfig.get_compile_flags(), without the -D) and TF_CUDA_VERSION (the
# CUDA a GPU build of TensorFlow was built with; empty for CPU builds) in the
# caller's scope ("unknown" for a GPU build that does not say which).
#
# Where the TensorFlow comes from: the interpreter's own environment as the
# build sees it (pip's isolated build environment, when pip put a TensorFlow
# there), else the same interpreter with -E, which ignores the PYTHONPATH and
# PYTHONNOUSERSITE that pip's isolation sets: the environment the package is
# being installed into. build_tools/tensorflow_requirement.py asks pip for a
# TensorFlow in the build environment only when that one has none, so a
# reinstall builds against the TensorFlow it will run with, without
# installing a second copy of it first.
set(_grad_reverse_build_tools ${CMAKE_CURRENT_LIST_DIR}/../build_tools)

function(grad_reverse_find_tensorflow python)
  # The CUDA version: build_tools/tensorflow_cuda.py (2.22's build info no
  # longer gives it; "unknown" for a GPU build that says nowhere).
  set(query "import sys; sys.path.insert(0, r'${_grad_reverse_build_tools}'); import tensorflow as tf; from tensorflow_cuda import tensorflow_cuda_version; print(tf.__version__); print(tf.sysconfig.get_include()); print(tf.sysconfig.get_lib()); print(','.join(tf.sysconfig.get_compile_flags())); print('cuda=' + tensorflow_cuda_version())")
  execute_process(COMMAND ${python} -c "${query}"
    OUTPUT_VARIABLE info ERROR_VARIABLE error RESULT_VARIABLE result
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT result EQUAL 0)
    execute_process(COMMAND ${python} -E -c "${query}"
      OUTPUT_VARIABLE info ERROR_VARIABLE error_target RESULT_VARIABLE result
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    string(APPEND error "\nWith -E (the target environment):\n${error_target}")
  endif()
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "grad_reverse: cannot import tensorflow with ${python}:\n${error}\n"
                        "Install TensorFlow first, or build only the kernel module with -DGRAD_REVERSE_KERNELS_ONLY=ON.")
  endif()
  string(REPLACE "\n" ";" info "${info}")
  # The last five lines: TensorFlow may print warnings before them.
  list(GET info -5 version)
  list(GET info -4 include_dir)
  list(GET info -3 lib_dir)
  list(GET info -2 flags)
  list(GET info -1 cuda_version)
  string(REGEX REPLACE "^cuda=" "" cuda_version "${cuda_version}")
  string(REPLACE "," ";" flags "${flags}")
  set(defines "")
  foreach(flag IN LISTS flags)
    if(flag MATCHES "^-D(.+)$")
      list(APPEND defines ${CMAKE_MATCH_1})
    endif()
  endforeach()
  set(TF_VERSION ${version} PARENT_SCOPE)
  set(TF_INCLUDE_DIR ${include_dir} PARENT_SCOPE)
  set(TF_LIB_DIR ${lib_dir} PARENT_SCOPE)
  set(TF_DEFINES ${defines} PARENT_SCOPE)
  set(TF_CUDA_VERSION "${cuda_version}" PARENT_SCOPE)
endfunction()

