# CMake toolchain file of the portable wheel: the host compilers (g++, nvcc)
# against the sysroot that build_tools/sysroot.py makes (Debian bullseye:
# glibc 2.31, libstdc++ 10), so that no library we build needs a symbol
# version newer than TensorFlow's own wheels do (GLIBC_2.27, GLIBCXX_3.4.22).
#
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/portable_toolchain.cmake \
#         -DGRAD_REVERSE_SYSROOT=<sysroot.py's output> \
#         [-DGRAD_REVERSE_TARGET_CPU=aarch64] ...
#
# build_pip_pkg.sh passes them. GRAD_REVERSE_TARGET_CPU=aarch64 cross-compiles
# for Linux aarch64 with Debian's aarch64-linux-gnu-g++ against the sysroot
# of `sysroot.py --arch aarch64` (no CUDA: no cross CUDA toolkit is used), and
# runs what CMake must run (none of our targets) under qemu-aarch64-static. The compiler's own C++ headers and library
# are replaced by the sysroot's (-nostdinc++, -L): libstdc++ 10's
# headers only reference symbols that libstdc++ 10 has. (g++ 12 has no
# -nostdlib++; the sysroot's folders come first on the library path instead.)
if(NOT GRAD_REVERSE_SYSROOT)
  set(GRAD_REVERSE_SYSROOT "$ENV{GRAD_REVERSE_SYSROOT}")
endif()
if(NOT GRAD_REVERSE_SYSROOT OR NOT EXISTS "${GRAD_REVERSE_SYSROOT}/.grad-reverse-sysroot.json")
  message(FATAL_ERROR "portable_toolchain.cmake: GRAD_REVERSE_SYSROOT (\"${GRAD_REVERSE_SYSROOT}\") is not a "
                      "sysroot made by build_tools/sysroot.py")
endif()
# Try-compiles (feature probes) and the CMake processes that check_language
# starts read this file again: they must find the same sysroot.
if(NOT GRAD_REVERSE_TARGET_CPU)
  set(GRAD_REVERSE_TARGET_CPU "$ENV{GRAD_REVERSE_TARGET_CPU}")
endif()
if(NOT GRAD_REVERSE_TARGET_CPU)
  set(GRAD_REVERSE_TARGET_CPU x86_64)
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES GRAD_REVERSE_SYSROOT GRAD_REVERSE_TARGET_CPU)
set(ENV{GRAD_REVERSE_SYSROOT} "${GRAD_REVERSE_SYSROOT}")
set(ENV{GRAD_REVERSE_TARGET_CPU} "${GRAD_REVERSE_TARGET_CPU}")

set(_root "${GRAD_REVERSE_SYSROOT}")
if(GRAD_REVERSE_TARGET_CPU STREQUAL "x86_64")
  set(_triple x86_64-linux-gnu)
elseif(GRAD_REVERSE_TARGET_CPU STREQUAL "aarch64")
  set(_triple aarch64-linux-gnu)
  set(CMAKE_SYSTEM_NAME Linux)
  set(CMAKE_SYSTEM_PROCESSOR aarch64)
  find_program(_cross_cxx aarch64-linux-gnu-g++)
  if(NOT _cross_cxx)
    message(FATAL_ERROR "portable_toolchain.cmake: aarch64-linux-gnu-g++ not found (apt-get install g++-aarch64-linux-gnu)")
  endif()
  set(CMAKE_CXX_COMPILER "${_cross_cxx}")
  find_program(_qemu qemu-aarch64-static)
  if(_qemu)
    set(CMAKE_CROSSCOMPILING_EMULATOR "${_qemu};-L;${_root}")
  endif()
else()
  message(FATAL_ERROR "portable_toolchain.cmake: GRAD_REVERSE_TARGET_CPU is \"${GRAD_REVERSE_TARGET_CPU}\"; "
                      "accepted: x86_64, aarch64")
endif()
if(NOT EXISTS "${_root}/usr/lib/${_triple}")
  message(FATAL_ERROR "portable_toolchain.cmake: the sysroot ${_root} is not one for ${GRAD_REVERSE_TARGET_CPU} "
                      "(no usr/lib/${_triple}); make it with build_tools/sysroot.py --arch ${GRAD_REVERSE_TARGET_CPU}")
endif()
set(_cxx_version 10)
set(CMAKE_SYSROOT "${_root}")
# find_* keeps its default (the sysroot first, then the host): Python's and
# the CUDA toolkit's headers and libraries are found on the host.

set(_cxx_flags
  -nostdinc++
  -isystem${_root}/usr/include/c++/${_cxx_version}
  -isystem${_root}/usr/include/${_triple}/c++/${_cxx_version}
  -isystem${_root}/usr/include/c++/${_cxx_version}/backward)
list(JOIN _cxx_flags " " CMAKE_CXX_FLAGS_INIT)
# The driver's own library folders (gcc's prefix, not the sysroot) would give
# the host's libc and libstdc++: these come first. The g++ driver adds
# -lstdc++ itself and finds the sysroot's libstdc++ 10 here.
# --sysroot again: CMake leaves it off the links that nvcc's objects need.
set(_link_flags
  --sysroot=${_root}
  -L${_root}/usr/lib/gcc/${_triple}/${_cxx_version}
  -L${_root}/usr/lib/${_triple}
  -L${_root}/lib/${_triple})
list(JOIN _link_flags " " _link_flags)
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_link_flags}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_link_flags}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_link_flags}")

# nvcc compiles host code with its default host compiler (g++ on PATH, as
# CMake's C++ compiler) and the same sysroot and headers.
list(JOIN _cxx_flags "," _cxx_flags_nvcc)
set(CMAKE_CUDA_FLAGS_INIT "-Xcompiler=--sysroot=${_root},${_cxx_flags_nvcc}")
