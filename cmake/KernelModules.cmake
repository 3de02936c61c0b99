# The pybind11 kernel module for other Pythons than the build's own.
#
#   grad_reverse_add_kernel_module(PYTHON)
#
# adds _kernels for PYTHON: the same source and the same compiled kernels
# (grad_reverse_compute, CUDA included, compiled once), with PYTHON's headers
# and file suffix (_kernels.cpython-312-x86_64-linux-gnu.so), built into
# <build>/python3.12/ and installed beside the build's own module. Python's
# import picks the file of its own version by that suffix, so one wheel can
# hold the module for every Python (build_pip_pkg.sh lists them in
# GRAD_REVERSE_EXTRA_PYTHONS). pybind11_add_module serves one Python per
# project (FindPython), hence this small twin of it: header-only pybind11,
# hidden symbols, no libpython.
#
# Debian's Pythons (the aarch64 build's emulated one among them) keep their
# pyconfig.h in a multiarch folder beside the headers
# (<aarch64-linux-gnu/python3.11/pyconfig.h>): the parent of the include
# folder is searched last, after the sysroot's headers, so nothing there
# shadows the sysroot's C library.
#
# An emulated interpreter (the aarch64 build's, build_tools/aarch64_python.sh)
# names its headers as it sees them, inside its root: GRAD_REVERSE_PYTHON_ROOT
# is that root, put before the folder it names.
include_guard(GLOBAL)
set(GRAD_REVERSE_PYTHON_ROOT "" CACHE PATH
    "The root that the emulated interpreters of GRAD_REVERSE_EXTRA_PYTHONS see as / (cross builds)")

function(grad_reverse_add_kernel_module python)
  execute_process(
    COMMAND ${python} -c "import sys, sysconfig; print('%d.%d' % sys.version_info[:2]); print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))"
    OUTPUT_VARIABLE answer RESULT_VARIABLE result OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "grad_reverse: cannot ask ${python} for its version, headers and module suffix")
  endif()
  string(REPLACE "\n" ";" answer "${answer}")
  list(GET answer 0 version)
  list(GET answer 1 include_dir)
  list(GET answer 2 suffix)
  set(include_dir "${GRAD_REVERSE_PYTHON_ROOT}${include_dir}")
  if(NOT EXISTS "${include_dir}/Python.h")
    message(FATAL_ERROR "grad_reverse: ${python} (Python ${version}) has no headers at ${include_dir}")
  endif()
  set(target _kernels_python${version})
  add_library(${target} MODULE cc/pybind/kernels_module.cc)
  target_include_directories(${target} SYSTEM PRIVATE ${include_dir})
  target_compile_options(${target} PRIVATE "-idirafter${include_dir}/..")
  target_link_libraries(${target} PRIVATE pybind11::headers grad_reverse_compute)
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME _kernels SUFFIX "${suffix}"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/python${version})
  install(TARGETS ${target} LIBRARY DESTINATION ${PACKAGE_DIR})
  message(STATUS "grad_reverse: kernel module for Python ${version} (${suffix})")
endfunction()
