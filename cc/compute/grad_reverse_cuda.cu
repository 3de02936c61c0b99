// CUDA kernel of GradReverseGrad: out[i] = -lambda * in[i].
// TensorFlow-free on purpose (see grad_reverse_launcher.h): it is built and
// checked on GPU machines without TensorFlow through the pybind11 module.
//
// What each thread does is in grad_reverse_cuda_body.h and the launch
// decision in grad_reverse_cuda_plan.h, so that cc/tests/cuda_emulated_grid.cc
// runs the same code on the CPU; this file holds the __global__ wrappers,
// the device query and the launch.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "grad_reverse_cuda_body.h"
#include "grad_reverse_cuda_plan.h"
#include "grad_reverse_launcher.h"

namespace grad_reverse {
namespace {

constexpr int kMaxDevices = 64;

__device__ inline int64_t ThreadIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ inline int64_t GridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

template <typename T>
__global__ void NegScaleVectorized(const T* in, T* out, CudaLaunchPlan plan, float scale) {
  NegScaleVectorizedThread<T>(in, out, plan, scale, ThreadIndex(), GridStride());
}

template <typename T>
__global__ void NegScaleScalar(const T* in, T* out, CudaLaunchPlan plan, float scale) {
  NegScaleScalarThread<T>(in, out, plan, scale, ThreadIndex(), GridStride());
}

template <typename T>
__global__ void NegScaleUnaligned(const unsigned char* in, unsigned char* out, CudaLaunchPlan plan,
                                  float scale) {
  NegScaleUnalignedThread<T>(in, out, plan, scale, ThreadIndex(), GridStride());
}

// Enough resident blocks to fill the device, cached per device ordinal.
int MaxResidentBlocks() {
  static std::atomic<int> cache[kMaxDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 1;
  if (device >= 0 && device < kMaxDevices) {
    const int cached = cache[device].load(std::memory_order_relaxed);
    if (cached > 0) return cached;
  }
  int sms = 1;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  int threads_per_sm = 2048;
  cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device);
  const int blocks = std::max(1, sms * (threads_per_sm / kCudaBlockSize));
  if (device >= 0 && device < kMaxDevices) cache[device].store(blocks);
  return blocks;
}

template <typename T>
cudaError_t Launch(const void* in, void* out, int64_t n, float scale, cudaStream_t stream) {
  const CudaLaunchPlan plan =
      PlanCudaLaunch(reinterpret_cast<uintptr_t>(in), reinterpret_cast<uintptr_t>(out), n,
                     sizeof(T), MaxResidentBlocks());
  switch (plan.path) {
    case CudaPath::kNothing:
      return cudaSuccess;
    case CudaPath::kVectorized:
      NegScaleVectorized<T><<<plan.blocks, kCudaBlockSize, 0, stream>>>(
          static_cast<const T*>(in), static_cast<T*>(out), plan, scale);
      break;
    case CudaPath::kScalar:
      NegScaleScalar<T><<<plan.blocks, kCudaBlockSize, 0, stream>>>(
          static_cast<const T*>(in), static_cast<T*>(out), plan, scale);
      break;
    case CudaPath::kUnaligned:
      NegScaleUnaligned<T><<<plan.blocks, kCudaBlockSize, 0, stream>>>(
          static_cast<const unsigned char*>(in), static_cast<unsigned char*>(out), plan, scale);
      break;
  }
  return cudaGetLastError();
}

}  // namespace

bool CudaCompiledIn() { return true; }

int NegScaleCuda(const void* in, void* out, int64_t n, float lambda, DType dtype,
                 cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const float scale = -lambda;
  switch (dtype) {
    case DType::kHalf:
      return Launch<__half>(in, out, n, scale, stream);
    case DType::kBFloat16:
      return Launch<__nv_bfloat16>(in, out, n, scale, stream);
    case DType::kFloat:
      return Launch<float>(in, out, n, scale, stream);
    case DType::kDouble:
      return Launch<double>(in, out, n, scale, stream);
  }
  return cudaErrorInvalidValue;
}

int CudaDriverVersion() {
  // The runtime is linked statically: this asks the driver library it loads
  // (libcuda), whatever CUDA the TensorFlow install ships.
  int version = 0;
  return cudaDriverGetVersion(&version) == cudaSuccess ? version : -1;
}

const char* CudaErrorString(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

}  // namespace grad_reverse
