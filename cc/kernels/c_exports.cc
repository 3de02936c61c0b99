// The C functions both op libraries (cc/kernels/, cc/stable/) export to the
// package and its tests, which call them through ctypes by these names: the
// CPU kernel path in use and forcing one (cc/compute/cpu_paths.h), and the
// CUDA driver's version, and the streaming-store choice (cpu_paths.h). Entry points tied to one
// library's registration stay beside it: GradReverseRegisterLateXlaKernels (grad_reverse_xla.cc)
// and the stable library's GradReverseStableRegistrationError and thread limit
// (cc/stable/grad_reverse_stable.cc).
#include <cstdint>
#include <string>

#include "cc/compute/cpu_paths.h"
#include "cc/compute/grad_reverse_launcher.h"
#include "cc/kernels/c_export.h"

GRAD_REVERSE_EXPORT const char* GradReverseCpuPath() {
  return grad_reverse::CpuPathName(grad_reverse::ActiveCpuPath());
}

// Returns 0, or -1 (nothing changed) for an unknown or unsupported path.
GRAD_REVERSE_EXPORT int GradReverseSetCpuPath(const char* name) {
  return name != nullptr && grad_reverse::ForceCpuPath(name) ? 0 : -1;
}

// Which stores large out-of-place passes use and why (StreamingStoresState);
// the text stays valid until this thread's next call.
GRAD_REVERSE_EXPORT const char* GradReverseStreamingStores() {
  static thread_local std::string state;
  state = grad_reverse::StreamingStoresState();
  return state.c_str();
}

// Returns 0, or -1 (nothing changed) for a mode other than auto, on, off.
GRAD_REVERSE_EXPORT int GradReverseSetStreamingStores(const char* mode) {
  return mode != nullptr && grad_reverse::ForceStreamingStores(mode) ? 0 : -1;
}

// The choice for an out-of-place pass of `bytes` bytes: 1 streaming, 0 plain,
// -1 not decided yet (StreamingStoresChoiceAt).
GRAD_REVERSE_EXPORT int GradReverseStreamingStoresAt(int64_t bytes) {
  return grad_reverse::StreamingStoresChoiceAt(bytes);
}

// For tests: how many passes have written with streaming stores so far.
GRAD_REVERSE_EXPORT int64_t GradReverseStreamingStorePasses() {
  return grad_reverse::StreamingStorePasses();
}

// For tests: StreamingStoresWin on `pairs` measured pairs.
GRAD_REVERSE_EXPORT int GradReverseStreamingStoresWin(const double* plain, const double* streaming,
                                                      int pairs) {
  return grad_reverse::StreamingStoresWin(plain, streaming, pairs) ? 1 : 0;
}

// For the package's choice of backward (python/grad_reverse/_native/backward_choice.py):
// the CUDA version of the installed driver as 1000 * major + 10 * minor
// (12040 is 12.4), 0 when no driver is installed, -1 when the library was
// built without CUDA or the query failed. It starts no CUDA context. The
// CUDA kernels need a driver of their toolkit's major version.
GRAD_REVERSE_EXPORT int GradReverseCudaDriverVersion() { return grad_reverse::CudaDriverVersion(); }
