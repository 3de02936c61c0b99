// Stands in for grad_reverse_cuda.cu when the library is built without CUDA.
#include "grad_reverse_launcher.h"

namespace grad_reverse {

bool CudaCompiledIn() { return false; }

int NegScaleCuda(const void*, void*, int64_t, float, DType, cudaStream_t) { return -1; }

int CudaDriverVersion() { return -1; }

const char* CudaErrorString(int error) {
  return error == -1 ? "grad_reverse was built without CUDA support" : "unknown CUDA error";
}

}  // namespace grad_reverse
