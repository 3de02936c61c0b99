// C entry points of both op libraries (cc/ops/ and cc/stable/), for tests
// and benchmarks through ctypes on the loaded library (see cpu_paths.h): the
// CPU kernel path in use, and forcing one.
#include "c_export.h"
#include "cpu_paths.h"

GRAD_REVERSE_EXPORT const char* GradReverseCpuPath() {
  return grad_reverse::CpuPathName(grad_reverse::ActiveCpuPath());
}

// Returns 0, or -1 (nothing changed) for an unknown or unsupported path.
GRAD_REVERSE_EXPORT int GradReverseSetCpuPath(const char* name) {
  return name != nullptr && grad_reverse::ForceCpuPath(name) ? 0 : -1;
}
