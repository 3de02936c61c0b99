// CUDA kernel of GradReverseGrad: out[i] = -lambda * in[i].
// TensorFlow-free on purpose (see grad_reverse_launcher.h): it is built and
// checked on GPU machines without TensorFlow through the pybind11 module.
//
// Bandwidth-bound, so each thread moves 16 bytes per access (uint4 loads and
// stores) over a grid-stride loop sized from the device; a scalar head brings
// the pointers to 16-byte alignment and a scalar tail finishes. When `in` and
// `out` are misaligned relative to each other, a scalar grid-stride loop
// handles everything. Indices are 64-bit: tensors past 2^31 elements exist.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "grad_reverse_launcher.h"

namespace grad_reverse {
namespace {

constexpr int kBlockSize = 256;
constexpr int kVectorBytes = 16;
constexpr int kMaxDevices = 64;

// Element traits: how one element and one 16-byte vector are scaled.
// half and bfloat16 are computed in float and rounded once (round to nearest
// even), matching the CPU and XLA kernels bit for bit.
template <typename T>
struct Scaler;

template <>
struct Scaler<float> {
  __device__ static float One(float x, float s) { return x * s; }
  __device__ static uint4 Vector(uint4 v, float s) {
    float4 f = *reinterpret_cast<float4*>(&v);
    f.x *= s; f.y *= s; f.z *= s; f.w *= s;
    return *reinterpret_cast<uint4*>(&f);
  }
};

template <>
struct Scaler<double> {
  __device__ static double One(double x, float s) {
    return x * static_cast<double>(s);
  }
  __device__ static uint4 Vector(uint4 v, float s) {
    double2 d = *reinterpret_cast<double2*>(&v);
    const double ds = static_cast<double>(s);
    d.x *= ds; d.y *= ds;
    return *reinterpret_cast<uint4*>(&d);
  }
};

template <>
struct Scaler<__half> {
  __device__ static __half One(__half x, float s) {
    return __float2half_rn(__half2float(x) * s);
  }
  __device__ static uint4 Vector(uint4 v, float s) {
    __half2* h = reinterpret_cast<__half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 f = __half22float2(h[i]);
      f.x *= s; f.y *= s;
      h[i] = __float22half2_rn(f);
    }
    return v;
  }
};

template <>
struct Scaler<__nv_bfloat16> {
  __device__ static __nv_bfloat16 One(__nv_bfloat16 x, float s) {
    return __float2bfloat16_rn(__bfloat162float(x) * s);
  }
  __device__ static uint4 Vector(uint4 v, float s) {
    __nv_bfloat162* b = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 f = __bfloat1622float2(b[i]);
      f.x *= s; f.y *= s;
      b[i] = __float22bfloat162_rn(f);
    }
    return v;
  }
};

// `head` scalar elements, then `vectors` 16-byte vectors, then `tail` scalar
// elements. in + head and out + head are 16-byte aligned. No __restrict__:
// in == out (in place) is a supported call.
template <typename T>
__global__ void NegScaleVectorized(const T* in, T* out, int64_t head,
                                   int64_t vectors, int64_t tail, float scale) {
  constexpr int64_t kPerVector = kVectorBytes / sizeof(T);
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if (tid < head) out[tid] = Scaler<T>::One(in[tid], scale);
  const uint4* vin = reinterpret_cast<const uint4*>(in + head);
  uint4* vout = reinterpret_cast<uint4*>(out + head);
  for (int64_t i = tid; i < vectors; i += stride) {
    vout[i] = Scaler<T>::Vector(vin[i], scale);
  }
  const int64_t tail_start = head + vectors * kPerVector;
  if (tid < tail) {
    out[tail_start + tid] = Scaler<T>::One(in[tail_start + tid], scale);
  }
}

// Any alignment: one element per thread per step.
template <typename T>
__global__ void NegScaleScalar(const T* in, T* out, int64_t n, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    out[i] = Scaler<T>::One(in[i], scale);
  }
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
  cudaDeviceGetAttribute(&threads_per_sm,
                         cudaDevAttrMaxThreadsPerMultiProcessor, device);
  const int blocks = std::max(1, sms * (threads_per_sm / kBlockSize));
  if (device >= 0 && device < kMaxDevices) cache[device].store(blocks);
  return blocks;
}

int GridFor(int64_t work_items) {
  const int64_t needed = (work_items + kBlockSize - 1) / kBlockSize;
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(needed, MaxResidentBlocks())));
}

template <typename T>
cudaError_t Launch(const void* in_ptr, void* out_ptr, int64_t n, float scale,
                   cudaStream_t stream) {
  const T* in = static_cast<const T*>(in_ptr);
  T* out = static_cast<T*>(out_ptr);
  constexpr int64_t kPerVector = kVectorBytes / sizeof(T);
  const uintptr_t in_offset = reinterpret_cast<uintptr_t>(in) % kVectorBytes;
  const uintptr_t out_offset = reinterpret_cast<uintptr_t>(out) % kVectorBytes;
  if (in_offset == out_offset && in_offset % sizeof(T) == 0) {
    const int64_t to_aligned =
        in_offset == 0 ? 0 : (kVectorBytes - in_offset) / sizeof(T);
    const int64_t head = std::min<int64_t>(n, to_aligned);
    const int64_t vectors = (n - head) / kPerVector;
    const int64_t tail = n - head - vectors * kPerVector;
    // head and tail are < kPerVector, so one grid covers them as well.
    const int64_t work = std::max<int64_t>(vectors, kPerVector);
    NegScaleVectorized<T><<<GridFor(work), kBlockSize, 0, stream>>>(
        in, out, head, vectors, tail, scale);
  } else {
    NegScaleScalar<T><<<GridFor(n), kBlockSize, 0, stream>>>(in, out, n, scale);
  }
  return cudaGetLastError();
}

}  // namespace

bool CudaCompiledIn() { return true; }

int NegScaleCuda(const void* in, void* out, int64_t n, float lambda,
                 DType dtype, cudaStream_t stream) {
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
