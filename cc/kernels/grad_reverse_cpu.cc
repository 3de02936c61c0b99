// Single-threaded CPU version of the framework-free kernel, for the pybind11
// module (tests and benchmarks without TensorFlow). TensorFlow's CPU OpKernel
// uses Eigen on the intra-op thread pool instead; both round identically.
#include <cstdint>

#include "grad_reverse_launcher.h"
#include "half_bits.h"

namespace grad_reverse {
namespace {

template <typename T>
void NegScaleNative(const T* in, T* out, int64_t n, T scale) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * scale;
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void NegScale16(const uint16_t* in, uint16_t* out, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) out[i] = FromFloat(ToFloat(in[i]) * scale);
}

}  // namespace

int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
    case DType::kBFloat16:
      return 2;
    case DType::kFloat:
      return 4;
    case DType::kDouble:
      return 8;
  }
  return 0;
}

void NegScaleCpu(const void* in, void* out, int64_t n, float lambda,
                 DType dtype) {
  const float scale = -lambda;
  switch (dtype) {
    case DType::kHalf:
      NegScale16<HalfToFloat, FloatToHalf>(static_cast<const uint16_t*>(in),
                                           static_cast<uint16_t*>(out), n,
                                           scale);
      break;
    case DType::kBFloat16:
      NegScale16<BFloat16ToFloat, FloatToBFloat16>(
          static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), n,
          scale);
      break;
    case DType::kFloat:
      NegScaleNative(static_cast<const float*>(in), static_cast<float*>(out),
                     n, scale);
      break;
    case DType::kDouble:
      NegScaleNative(static_cast<const double*>(in), static_cast<double*>(out),
                     n, static_cast<double>(scale));
      break;
  }
}

}  // namespace grad_reverse
