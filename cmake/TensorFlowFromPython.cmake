# Asks a Python interpreter for its TensorFlow: the library must be compiled
# against exactly the TensorFlow it will be loaded into.
#
#   grad_reverse_find_tensorflow(PYTHON_EXECUTABLE)
#
# sets TF_VERSION, TF_INCLUDE_DIR, TF_LIB_DIR and TF_DEFINES (the -D flags of
# tf.sysconfig.get_compile_flags(), without the -D) in the caller's scope.
function(grad_reverse_find_tensorflow python)
  execute_process(
    COMMAND ${python} -c
      "import tensorflow as tf; print(tf.__version__); print(tf.sysconfig.get_include()); print(tf.sysconfig.get_lib()); print(','.join(tf.sysconfig.get_compile_flags()))"
    OUTPUT_VARIABLE info
    ERROR_VARIABLE error
    RESULT_VARIABLE result
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "grad_reverse: cannot import tensorflow with ${python}:\n${error}\n"
                        "Install TensorFlow first, or build only the kernel module with -DGRAD_REVERSE_KERNELS_ONLY=ON.")
  endif()
  string(REPLACE "\n" ";" info "${info}")
  # The last four lines: TensorFlow may print warnings before them.
  list(GET info -4 version)
  list(GET info -3 include_dir)
  list(GET info -2 lib_dir)
  list(GET info -1 flags)
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
endfunction()
