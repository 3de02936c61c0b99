// The C functions both op libraries (cc/kernels/, cc/stable/) export to the
// package and its tests, which call them through ctypes by these names: the
// CPU kernel path in use and forcing one (cc/compute/cpu_paths.h), and the
// CUDA driver's version. Entry points tied to one library's registration stay
// beside it: GradReverseRegisterLateXlaKernels (grad_reverse_xla.cc) and the
// stable library's GradReverseStableRegistrationError and thread limit
// (cc/stable/grad_reverse_stable.cc).
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

// For the package's choice of backward (python/grad_reverse/_backward.py):
// the CUDA version of the installed driver as 1000 * major + 10 * minor
// (12040 is 12.4), 0 when no driver is installed, -1 when the library was
// built without CUDA or the query failed. It starts no CUDA context. The
// CUDA kernels need a driver of their toolkit's major version.
GRAD_REVERSE_EXPORT int GradReverseCudaDriverVersion() { return grad_reverse::CudaDriverVersion(); }
