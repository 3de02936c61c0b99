# The TensorFlow op library of one TensorFlow release.
#
#   grad_reverse_add_op_library(PYTHON)
#
# asks PYTHON for its TensorFlow (TensorFlowFromPython.cmake), checks the
# release is supported, probes what its headers allow (TensorFlowFeatures.cmake)
# and adds the target _grad_reverse_ops_tf<M>_<m>: the library
# _grad_reverse_ops.so and its build record _build_info.json, built into
# <build>/tf<M>.<m>/ and installed into grad_reverse/_libs/tf<M>.<m>/. The
# loader picks the folder of the running TensorFlow's minor release: a custom
# op is bound to the C++ ABI of one minor release, not to its patch level.
#
# Needs the grad_reverse_compute target and GRAD_REVERSE_WITH_CUDA,
# GRAD_REVERSE_CUDA, GRAD_REVERSE_XLA and PACKAGE_DIR from the top level.
include_guard(GLOBAL)

function(grad_reverse_add_op_library python)
  grad_reverse_find_tensorflow(${python})
  message(STATUS "grad_reverse: TensorFlow ${TF_VERSION} at ${TF_LIB_DIR}")
  grad_reverse_check_tensorflow_version(${python} ${TF_VERSION})
  grad_reverse_probe_tensorflow_features()
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" series "${TF_VERSION}")
  set(folder "tf${series}")
  string(REPLACE "." "_" target "_grad_reverse_ops_${folder}")
  if(TARGET ${target})
    message(FATAL_ERROR "grad_reverse: two interpreters in GRAD_REVERSE_TENSORFLOW_PYTHONS have "
                        "TensorFlow ${series}; list one per minor release")
  endif()

  # XLA kernels: the tf2xla headers (tf_compat.h finds the builder wherever
  # the release keeps it) and libtensorflow_cc, which holds the XLA symbols.
  set(xla_note "")
  if(GRAD_REVERSE_XLA STREQUAL "OFF")
    set(with_xla OFF)
    set(xla_note "turned off (GRAD_REVERSE_XLA=OFF)")
  elseif(TF_HAS_XLA_HEADERS AND EXISTS ${TF_LIB_DIR}/libtensorflow_cc.so.2)
    set(with_xla ON)
  else()
    set(with_xla OFF)
    if(TF_XLA_HEADERS_NOTE)
      set(xla_note "${TF_XLA_HEADERS_NOTE}")
    elseif(NOT TF_HAS_XLA_HEADERS)
      set(xla_note "TensorFlow ${TF_VERSION} ships no tf2xla/XLA builder headers")
    else()
      set(xla_note "TensorFlow ${TF_VERSION} has no libtensorflow_cc.so.2")
    endif()
    if(GRAD_REVERSE_XLA STREQUAL "ON")
      message(FATAL_ERROR "GRAD_REVERSE_XLA=ON, but ${xla_note}")
    endif()
    message(STATUS "grad_reverse: building without XLA kernels: ${xla_note}; "
                   "inside XLA the package uses its pure-Python version")
  endif()

  # The GPU OpKernel needs StreamExecutor's Stream header to reach its stream.
  set(cuda_note "")
  set(ops_cuda ${GRAD_REVERSE_WITH_CUDA})
  if(NOT GRAD_REVERSE_WITH_CUDA)
    if(GRAD_REVERSE_CUDA STREQUAL "OFF")
      set(cuda_note "turned off (GRAD_REVERSE_CUDA=OFF)")
    else()
      set(cuda_note "no CUDA toolkit (nvcc) found at build time")
    endif()
  elseif(NOT TF_HAS_STREAM_HEADER)
    set(ops_cuda OFF)
    set(cuda_note "TensorFlow ${TF_VERSION} ships no StreamExecutor stream header")
    message(STATUS "grad_reverse: no GPU kernel in the op library: ${cuda_note}")
  else()
    grad_reverse_check_cuda_versions("${CMAKE_CUDA_COMPILER_VERSION}" "${TF_CUDA_VERSION}" cuda_note)
  endif()

  # A release newer than the tested range: the stable-ABI library serves it
  # (StableLibrary.cmake), so this one is a best effort that cannot fail the
  # build (built at install time; a compiler error becomes a warning).
  set(best_effort ${TF_NEWER_THAN_TESTED})
  if(best_effort)
    set(exclude EXCLUDE_FROM_ALL)
  else()
    set(exclude "")
  endif()
  add_library(${target} SHARED ${exclude} cc/ops/grad_reverse_ops.cc
    cc/kernels/grad_reverse_kernels.cc cc/kernels/c_exports.cc)
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME _grad_reverse_ops
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/${folder})
  target_include_directories(${target} SYSTEM PRIVATE ${TF_INCLUDE_DIR})
  target_compile_definitions(${target} PRIVATE ${TF_DEFINES})
  if(ops_cuda)
    # The backward's GPU OpKernel (host code; the CUDA kernel itself is in
    # grad_reverse_compute).
    target_sources(${target} PRIVATE cc/kernels/grad_reverse_kernels_gpu.cc)
  endif()
  target_link_libraries(${target} PRIVATE grad_reverse_compute)
  if(GRAD_REVERSE_WITH_CUDA)
    # The static CUDA runtime comes before TensorFlow's libraries on the link
    # line: the `tensorflow` package's libtensorflow_framework.so.2 exports the
    # CUDA runtime API too, and a library listed first would satisfy our
    # kernels' __cudaRegisterFatBinary, cudaLaunchKernel, ... with TensorFlow's
    # runtime (another CUDA version) instead of the one nvcc compiled them for.
    # Its symbols stay private to our library (--exclude-libs), so neither
    # TensorFlow nor another library resolves against our copy.
    target_link_libraries(${target} PRIVATE CUDA::cudart_static)
    target_link_options(${target} PRIVATE "LINKER:--exclude-libs,libcudart_static.a")
  endif()
  target_link_libraries(${target} PRIVATE ${TF_LIB_DIR}/libtensorflow_framework.so.2)
  if(with_xla)
    target_sources(${target} PRIVATE cc/kernels/grad_reverse_xla.cc)
    target_include_directories(${target} SYSTEM PRIVATE
      ${TF_INCLUDE_DIR}/external/highwayhash
      ${TF_INCLUDE_DIR}/external/farmhash_archive/src)
    # The tf2xla and XLA builder symbols live in libtensorflow_cc.
    target_link_libraries(${target} PRIVATE ${TF_LIB_DIR}/libtensorflow_cc.so.2)
  endif()
  # Both TensorFlow libraries are loaded by `import tensorflow` before ours;
  # the RPATH lets tools that load the library directly find them too
  # (site-packages/grad_reverse/_libs/tf2.X/ -> site-packages/tensorflow/).
  set_target_properties(${target} PROPERTIES
    BUILD_RPATH "${TF_LIB_DIR}"
    INSTALL_RPATH "$ORIGIN/../../../tensorflow")
  if(best_effort)
    # Copied by install(CODE) below, which rewrites no RPATH.
    set_target_properties(${target} PROPERTIES BUILD_WITH_INSTALL_RPATH ON)
  else()
    install(TARGETS ${target} LIBRARY DESTINATION ${PACKAGE_DIR}/_libs/${folder})
  endif()

  # Recorded next to the library: the loader compares the TensorFlow release
  # before calling tf.load_op_library (an ABI mismatch can crash the process).
  # Also what was left out and why (notes are empty when nothing was).
  # The CUDA architectures the kernels were built for ("75-real;80-real;90":
  # SASS for 7.5 and 8.0, SASS and PTX for 9.0): a GPU none of them covers gets
  # "no kernel image" at the first launch, so auto uses stock ops there.
  set(architectures "")
  if(ops_cuda)
    set(architectures "${CMAKE_CUDA_ARCHITECTURES}")
  endif()
  set(build_info "{
  \"tensorflow_version\": \"${TF_VERSION}\",
  \"tensorflow_cuda_version\": \"${TF_CUDA_VERSION}\",
  \"cuda\": $<IF:$<BOOL:${ops_cuda}>,true,false>,
  \"cuda_toolkit_version\": \"${CMAKE_CUDA_COMPILER_VERSION}\",
  \"cuda_note\": \"${cuda_note}\",
  \"cuda_architectures\": \"${architectures}\",
  \"xla\": $<IF:$<BOOL:${with_xla}>,true,false>,
  \"xla_note\": \"${xla_note}\"
}
")
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/${folder}/_build_info.json CONTENT "${build_info}")
  if(best_effort)
    install(CODE "
      execute_process(COMMAND \${CMAKE_COMMAND} --build \"${CMAKE_BINARY_DIR}\" --target ${target}
                      RESULT_VARIABLE built)
      if(built EQUAL 0)
        file(INSTALL \"${CMAKE_BINARY_DIR}/${folder}/_grad_reverse_ops.so\" \"${CMAKE_BINARY_DIR}/${folder}/_build_info.json\"
             DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${PACKAGE_DIR}/_libs/${folder}\")
      else()
        message(WARNING \"grad_reverse: the C++ op library for TensorFlow ${TF_VERSION} did not compile; \"
                        \"the stable-ABI library (_libs/stable/) will serve this TensorFlow\")
      endif()")
  else()
    install(FILES ${CMAKE_BINARY_DIR}/${folder}/_build_info.json DESTINATION ${PACKAGE_DIR}/_libs/${folder})
  endif()
endfunction()
