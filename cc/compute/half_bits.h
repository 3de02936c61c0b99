// Portable float <-> binary16 / bfloat16 conversions on raw bits, rounding to
// nearest even, for the CPU path of the framework-free kernels (the CUDA path
// uses the cuda_fp16 / cuda_bf16 intrinsics, which round the same way).
// NaN becomes the quiet NaN of the same sign.
#ifndef GRAD_REVERSE_CC_COMPUTE_HALF_BITS_H_
#define GRAD_REVERSE_CC_COMPUTE_HALF_BITS_H_

#include <cstdint>
#include <cstring>

namespace grad_reverse {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Element i of an array at any alignment (numpy arrays need not be aligned;
// a plain pointer access there is undefined behaviour). Compiles to one move.
template <typename T>
inline T LoadAt(const void* base, int64_t i) {
  T value;
  std::memcpy(&value, static_cast<const unsigned char*>(base) + i * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
inline void StoreAt(void* base, int64_t i, T value) {
  std::memcpy(static_cast<unsigned char*>(base) + i * sizeof(T), &value, sizeof(T));
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return BitsFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return BitsFloat(sign | FloatBits(magnitude));
  }
  return BitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline uint16_t FloatToHalf(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520: Inf
  if (magnitude < 0x38800000u) {
    // Below the smallest normal half (2^-14): adding 0.5f aligns the half's
    // subnormal bits at the bottom of the float mantissa, and the FPU rounds
    // to nearest even for us.
    const float aligned = BitsFloat(magnitude) + 0.5f;
    return sign | static_cast<uint16_t>(FloatBits(aligned) - 0x3f000000u);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to
  // nearest even; a carry correctly bumps the exponent.
  const uint32_t odd = (magnitude >> 13) & 1u;
  magnitude += 0xc8000fffu + odd;
  return sign | static_cast<uint16_t>(magnitude >> 13);
}

inline float BFloat16ToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBFloat16(float f) {
  const uint32_t bits = FloatBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  }
  const uint32_t odd = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + odd) >> 16);
}

}  // namespace grad_reverse

#endif  // GRAD_REVERSE_CC_COMPUTE_HALF_BITS_H_
