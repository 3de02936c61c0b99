// Marks a function the op libraries export to the package's ctypes calls.
// The stable-ABI library hides every other symbol (cmake/StableLibrary.cmake).
#ifndef GRAD_REVERSE_CC_KERNELS_C_EXPORT_H_
#define GRAD_REVERSE_CC_KERNELS_C_EXPORT_H_

#define GRAD_REVERSE_EXPORT extern "C" __attribute__((visibility("default")))

#endif  // GRAD_REVERSE_CC_KERNELS_C_EXPORT_H_
