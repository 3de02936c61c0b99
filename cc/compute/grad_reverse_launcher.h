// Framework-free entry points of the GradReverseGrad compute: out = -lambda * in.
// No TensorFlow (and no CUDA) header is needed to include this file, so the
// TensorFlow OpKernels, the pybind11 module and a GPU machine without
// TensorFlow all call the same code.
#ifndef GRAD_REVERSE_CC_COMPUTE_GRAD_REVERSE_LAUNCHER_H_
#define GRAD_REVERSE_CC_COMPUTE_GRAD_REVERSE_LAUNCHER_H_

#include <cstdint>

// Same declaration as in <cuda_runtime_api.h>; repeating it is legal C++.
typedef struct CUstream_st* cudaStream_t;

namespace grad_reverse {

// Element types. half and bfloat16 have the bit layout of IEEE binary16 and
// of the top half of a float (Eigen::half == __half, Eigen::bfloat16 ==
// __nv_bfloat16); they are computed in float and rounded once.
enum class DType : int { kHalf = 0, kBFloat16 = 1, kFloat = 2, kDouble = 3 };

// Bytes per element of `dtype`, or 0 for an unknown value.
int DTypeSize(DType dtype);

// The CPU kernel on the calling thread: out[i] = -lambda * in[i] for i < n,
// on the path cpu_paths.h chooses. `in` may equal `out`. Used by the pybind11
// module on numpy arrays.
void NegScaleCpu(const void* in, void* out, int64_t n, float lambda, DType dtype);

// Whether this build contains the CUDA kernel.
bool CudaCompiledIn();

// Enqueues out[i] = -lambda * in[i] for i < n on `stream` (device pointers;
// `in` may equal `out`; any alignment). Returns 0 (cudaSuccess) or the
// cudaError_t of the launch. Without CUDA support, returns -1.
int NegScaleCuda(const void* in, void* out, int64_t n, float lambda, DType dtype,
                 cudaStream_t stream);

// The CUDA version the installed driver supports, as 1000 * major + 10 *
// minor; 0 when no driver is installed; -1 without CUDA support or on error.
int CudaDriverVersion();

// Message for a value returned by NegScaleCuda.
const char* CudaErrorString(int error);

}  // namespace grad_reverse

#endif  // GRAD_REVERSE_CC_COMPUTE_GRAD_REVERSE_LAUNCHER_H_
