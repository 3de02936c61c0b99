# The stable-ABI op library (cc/stable/): one library on TensorFlow's C API
# for every TensorFlow from the oldest supported release on, newer ones
# included, installed into grad_reverse/_libs/stable/ with its build record.
#
#   grad_reverse_add_stable_library(PYTHON)
#
# compiles against the C headers of PYTHON's TensorFlow (the portable wheel
# passes its oldest release's: an API that only grows is then met by every
# later one) and links libtensorflow_framework.so.2, which exports the C
# functions. Only the library's own C entry points are exported; what it
# imports is checked by build_tools/check_wheel.py (TF_ functions, libc, libm,
# libstdc++, libgcc: no C++ name of TensorFlow or Abseil).
#
# Needs the grad_reverse_cpu_compute target and PACKAGE_DIR from the top level.
include_guard(GLOBAL)

function(grad_reverse_add_stable_library python)
  grad_reverse_find_tensorflow(${python})
  message(STATUS "grad_reverse: stable-ABI library against the C headers of TensorFlow ${TF_VERSION}")
  set(folder stable)
  # The CUDA stub answers GradReverseCudaDriverVersion (c_exports.cc): -1, no
  # CUDA in this library.
  add_library(_grad_reverse_ops_stable SHARED
    cc/stable/grad_reverse_stable.cc cc/kernels/c_exports.cc
    cc/compute/grad_reverse_cuda_stub.cc)
  set_target_properties(_grad_reverse_ops_stable PROPERTIES
    PREFIX "" OUTPUT_NAME _grad_reverse_ops
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/${folder}
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    BUILD_RPATH "${TF_LIB_DIR}"
    INSTALL_RPATH "$ORIGIN/../../../tensorflow")
  # Only the C headers: none of TensorFlow's C++ flags (its ABI macro, Eigen's
  # alignment) matter to code that passes no C++ type across the boundary.
  target_include_directories(_grad_reverse_ops_stable SYSTEM PRIVATE ${TF_INCLUDE_DIR})
  # libstdc++ before TensorFlow's library on the link line: that library
  # exports some std:: functions too (std::string's, unversioned), and a
  # reference the linker binds there would tie us to what one release exports.
  target_link_libraries(_grad_reverse_ops_stable PRIVATE grad_reverse_cpu_compute
    stdc++ ${TF_LIB_DIR}/libtensorflow_framework.so.2)
  # Our static kernels' C++ symbols stay private to the library.
  target_link_options(_grad_reverse_ops_stable PRIVATE "LINKER:--exclude-libs,ALL")
  install(TARGETS _grad_reverse_ops_stable LIBRARY DESTINATION ${PACKAGE_DIR}/_libs/${folder})

  # What it was built against, for the loader and `info`: the portable wheel
  # builds it against its oldest release, so that it binds nothing a later
  # release added (a C function, or the symbol version `tensorflow` that 2.22
  # put on all its exports, which a library linked against 2.22 then needs);
  # a source build against the running release, so it is for that release
  # and newer ones only.
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" oldest "${TF_VERSION}")
  if("$ENV{GRAD_REVERSE_PORTABLE_WHEEL}" STREQUAL "" OR "$ENV{GRAD_REVERSE_PORTABLE_WHEEL}" STREQUAL "0")
    set(built_for "source build")
    set(headers_note "a source build: built against the running TensorFlow ${TF_VERSION}, so it loads into ${oldest} and newer releases only")
  else()
    set(built_for "portable wheel")
    set(headers_note "built against TensorFlow ${TF_VERSION}, the oldest release of the wheel, so it loads into every release from ${oldest} on")
  endif()
  # The loader reads it as it reads a per-release library's (_native/loader.py).
  set(build_info "{
  \"abi\": \"stable\",
  \"tensorflow_version\": \"${TF_VERSION}\",
  \"oldest_tensorflow\": \"${oldest}\",
  \"built_for\": \"${built_for}\",
  \"headers_note\": \"${headers_note}\",
  \"cuda\": false,
  \"cuda_note\": \"the stable-ABI library has no CUDA backward kernel (TensorFlow's C API gives a kernel no stream on its own GPU device): on a GPU the stock-op backward runs; the forward has a GPU kernel\",
  \"cuda_architectures\": \"\",
  \"gpu_forward\": true,
  \"xla\": false,
  \"xla_note\": \"XLA kernels need TensorFlow's C++ API, which the stable-ABI library does not use\"
}
")
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/${folder}/_build_info.json CONTENT "${build_info}")
  install(FILES ${CMAKE_BINARY_DIR}/${folder}/_build_info.json DESTINATION ${PACKAGE_DIR}/_libs/${folder})
endfunction()
