// What one thread of the CUDA kernel does (grad_reverse_cuda.cu), as
// __host__ __device__ functions of the thread's index, the grid stride and
// the launch plan (grad_reverse_cuda_plan.h). On the GPU thin __global__
// wrappers call them; cc/tests/cuda_emulated_grid.cc calls them on the CPU
// for every thread of the planned grid. Needs only the CUDA headers (no
// runtime, no device), so the host compiler builds it with -I<cuda>/include.
//
// Bandwidth-bound, so each thread moves 16 bytes per access (uint4 loads and
// stores) over a grid-stride loop; a scalar head brings the pointers to
// 16-byte alignment and a scalar tail finishes. No __restrict__: in == out
// (in place) is a supported call. Indices are 64-bit: tensors past 2^31
// elements exist.
#ifndef GRAD_REVERSE_CC_COMPUTE_GRAD_REVERSE_CUDA_BODY_H_
#define GRAD_REVERSE_CC_COMPUTE_GRAD_REVERSE_CUDA_BODY_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_types.h>

#include <cstdint>
#include <cstring>

#include "grad_reverse_cuda_plan.h"

// nvcc's device pass unrolls as asked; host compilers do not know the pragma.
#if defined(__CUDA_ARCH__)
#define GRAD_REVERSE_UNROLL _Pragma("unroll")
#else
#define GRAD_REVERSE_UNROLL
#endif

namespace grad_reverse {

// Element traits: how one element and one 16-byte vector are scaled.
// half and bfloat16 are computed in float and rounded once (round to nearest
// even), matching the CPU and XLA kernels bit for bit.
template <typename T>
struct Scaler;

template <>
struct Scaler<float> {
  __host__ __device__ static float One(float x, float s) { return x * s; }
  __host__ __device__ static uint4 Vector(uint4 v, float s) {
    float4 f = *reinterpret_cast<float4*>(&v);
    f.x *= s;
    f.y *= s;
    f.z *= s;
    f.w *= s;
    return *reinterpret_cast<uint4*>(&f);
  }
};

template <>
struct Scaler<double> {
  __host__ __device__ static double One(double x, float s) { return x * static_cast<double>(s); }
  __host__ __device__ static uint4 Vector(uint4 v, float s) {
    double2 d = *reinterpret_cast<double2*>(&v);
    const double ds = static_cast<double>(s);
    d.x *= ds;
    d.y *= ds;
    return *reinterpret_cast<uint4*>(&d);
  }
};

template <>
struct Scaler<__half> {
  __host__ __device__ static __half One(__half x, float s) {
    return __float2half_rn(__half2float(x) * s);
  }
  __host__ __device__ static uint4 Vector(uint4 v, float s) {
    __half2* h = reinterpret_cast<__half2*>(&v);
    GRAD_REVERSE_UNROLL
    for (int i = 0; i < 4; ++i) {
      float2 f = __half22float2(h[i]);
      f.x *= s;
      f.y *= s;
      h[i] = __float22half2_rn(f);
    }
    return v;
  }
};

template <>
struct Scaler<__nv_bfloat16> {
  __host__ __device__ static __nv_bfloat16 One(__nv_bfloat16 x, float s) {
    return __float2bfloat16_rn(__bfloat162float(x) * s);
  }
  __host__ __device__ static uint4 Vector(uint4 v, float s) {
    __nv_bfloat162* b = reinterpret_cast<__nv_bfloat162*>(&v);
    GRAD_REVERSE_UNROLL
    for (int i = 0; i < 4; ++i) {
      float2 f = __bfloat1622float2(b[i]);
      f.x *= s;
      f.y *= s;
      b[i] = __float22bfloat162_rn(f);
    }
    return v;
  }
};

// CudaPath::kVectorized: `head` scalar elements, then `vectors` 16-byte
// vectors, then `tail` scalar elements; in + head and out + head are 16-byte
// aligned. Thread `tid` of a grid of `stride` threads.
template <typename T>
__host__ __device__ inline void NegScaleVectorizedThread(const T* in, T* out,
                                                         const CudaLaunchPlan& plan, float scale,
                                                         int64_t tid, int64_t stride) {
  constexpr int64_t kPerVector = kCudaVectorBytes / sizeof(T);
  if (tid < plan.head) out[tid] = Scaler<T>::One(in[tid], scale);
  const uint4* vin = reinterpret_cast<const uint4*>(in + plan.head);
  uint4* vout = reinterpret_cast<uint4*>(out + plan.head);
  for (int64_t i = tid; i < plan.vectors; i += stride) {
    vout[i] = Scaler<T>::Vector(vin[i], scale);
  }
  const int64_t tail_start = plan.head + plan.vectors * kPerVector;
  if (tid < plan.tail) {
    out[tail_start + tid] = Scaler<T>::One(in[tail_start + tid], scale);
  }
}

// CudaPath::kScalar: any element-aligned pointers, one element per thread and step.
template <typename T>
__host__ __device__ inline void NegScaleScalarThread(const T* in, T* out,
                                                     const CudaLaunchPlan& plan, float scale,
                                                     int64_t tid, int64_t stride) {
  for (int64_t i = tid; i < plan.n; i += stride) {
    out[i] = Scaler<T>::One(in[i], scale);
  }
}

// CudaPath::kUnaligned: a pointer off its element alignment (possible through
// __cuda_array_interface__, never from TensorFlow). A T access there faults
// on the GPU, so each element is copied bytewise.
template <typename T>
__host__ __device__ inline void NegScaleUnalignedThread(const unsigned char* in, unsigned char* out,
                                                        const CudaLaunchPlan& plan, float scale,
                                                        int64_t tid, int64_t stride) {
  for (int64_t i = tid; i < plan.n; i += stride) {
    T x;
    memcpy(&x, in + i * sizeof(T), sizeof(T));
    const T y = Scaler<T>::One(x, scale);
    memcpy(out + i * sizeof(T), &y, sizeof(T));
  }
}

}  // namespace grad_reverse

#endif  // GRAD_REVERSE_CC_COMPUTE_GRAD_REVERSE_CUDA_BODY_H_
