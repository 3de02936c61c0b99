// x86 vector kernels of out = scale * in (see neg_scale_x86.h, cpu_paths.h).
//
// Bit-for-bit the portable kernels' results (half_bits.h): the product is one
// float (or double) multiply in either, so only the conversions need care:
//   - half -> float (F16C / AVX-512F vcvtph2ps) and bfloat16 -> float (a
//     16-bit shift) are exact;
//   - float -> half (vcvtps2ph, immediate round-to-nearest-even) rounds like
//     FloatToHalf, except that it keeps a NaN's payload: NaN lanes are set to
//     the sign | 0x7e00 that FloatToHalf gives;
//   - float -> bfloat16 is FloatToBFloat16's integer rounding, vectorized; the
//     AVX-512 BF16 instruction (vcvtneps2bf16) matches it except on float
//     subnormals, which it flushes to zero, so vectors holding one take the
//     integer rounding.
// The remainder of an array is done with masked loads and stores (AVX-512) or
// with half_bits.h one element at a time (AVX2).
#include "neg_scale_x86.h"

#if GRAD_REVERSE_X86_PATHS

// GCC 12's AVX-512 intrinsics start some results from _mm512_undefined_*()
// (a deliberately uninitialized register), and at -O2 and up with -Wall,
// -Wmaybe-uninitialized then fires inside the header once per inlined use
// (GCC bug 105593; the Bazel build's -Wall shows 36 per compilation). The
// values are never read uninitialized; silence that one warning for the
// header's code only, here where it is included.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <cstdint>

#include "half_bits.h"

#define GRAD_REVERSE_AVX2 __attribute__((target("avx2,f16c")))
#define GRAD_REVERSE_AVX512 __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512vl")))
#define GRAD_REVERSE_AVX512_BF16 \
  __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512vl,avx512bf16")))

namespace grad_reverse {
namespace x86 {

bool HasAvx2F16c() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}

bool HasAvx512() {
  __builtin_cpu_init();
  return HasAvx2F16c() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

bool HasAvx512Bf16() {
  __builtin_cpu_init();
  return HasAvx512() && __builtin_cpu_supports("avx512bf16");
}

namespace {

// ------------------------------------------------------------------ AVX2 ----

GRAD_REVERSE_AVX2 inline __m128i FloatsToHalvesAvx2(__m256 f) {
  const __m128i rounded = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
  const __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
  const __m128i nan16 =
      _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
  const __m128i quiet_nan = _mm_or_si128(
      _mm_and_si128(rounded, _mm_set1_epi16(static_cast<int16_t>(0x8000))), _mm_set1_epi16(0x7e00));
  return _mm_blendv_epi8(rounded, quiet_nan, nan16);
}

// FloatToBFloat16 on 8 lanes, as 32-bit integers holding the 16-bit results.
GRAD_REVERSE_AVX2 inline __m256i FloatsToBFloat16sAvx2(__m256 f) {
  const __m256i bits = _mm256_castps_si256(f);
  const __m256i high = _mm256_srli_epi32(bits, 16);
  const __m256i odd = _mm256_and_si256(high, _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd), 16);
  const __m256i quiet_nan = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded, quiet_nan, nan);
}

}  // namespace

GRAD_REVERSE_AVX2 void HalfAvx2(const void* in_v, void* out_v, int64_t n, float scale) {
  const auto* in = static_cast<const uint16_t*>(in_v);
  auto* out = static_cast<uint16_t*>(out_v);
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 8));
    const __m128i ra = FloatsToHalvesAvx2(_mm256_mul_ps(_mm256_cvtph_ps(a), s));
    const __m128i rb = FloatsToHalvesAvx2(_mm256_mul_ps(_mm256_cvtph_ps(b), s));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), ra);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 8), rb);
  }
  for (; i < n; ++i)
    StoreAt<uint16_t>(out, i, FloatToHalf(HalfToFloat(LoadAt<uint16_t>(in, i)) * scale));
}

GRAD_REVERSE_AVX2 void BFloat16Avx2(const void* in_v, void* out_v, int64_t n, float scale) {
  const auto* in = static_cast<const uint16_t*>(in_v);
  auto* out = static_cast<uint16_t*>(out_v);
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    // Each bfloat16 is the top half of its float: interleave under zeros.
    const __m256i zero = _mm256_setzero_si256();
    const __m256 lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, packed));
    const __m256 hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, packed));
    const __m256i rlo = FloatsToBFloat16sAvx2(_mm256_mul_ps(lo, s));
    const __m256i rhi = FloatsToBFloat16sAvx2(_mm256_mul_ps(hi, s));
    // packus works within 128-bit lanes, undoing the unpacks' lane order.
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_packus_epi32(rlo, rhi));
  }
  for (; i < n; ++i) {
    StoreAt<uint16_t>(out, i, FloatToBFloat16(BFloat16ToFloat(LoadAt<uint16_t>(in, i)) * scale));
  }
}

GRAD_REVERSE_AVX2 void FloatAvx2(const void* in_v, void* out_v, int64_t n, float scale) {
  const auto* in = static_cast<const float*>(in_v);
  auto* out = static_cast<float*>(out_v);
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 a = _mm256_loadu_ps(in + i), b = _mm256_loadu_ps(in + i + 8);
    const __m256 c = _mm256_loadu_ps(in + i + 16), d = _mm256_loadu_ps(in + i + 24);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(a, s));
    _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(b, s));
    _mm256_storeu_ps(out + i + 16, _mm256_mul_ps(c, s));
    _mm256_storeu_ps(out + i + 24, _mm256_mul_ps(d, s));
  }
  for (; i < n; ++i) StoreAt<float>(out, i, LoadAt<float>(in, i) * scale);
}

GRAD_REVERSE_AVX2 void DoubleAvx2(const void* in_v, void* out_v, int64_t n, float scale) {
  const auto* in = static_cast<const double*>(in_v);
  auto* out = static_cast<double*>(out_v);
  const double scale_d = static_cast<double>(scale);
  const __m256d s = _mm256_set1_pd(scale_d);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256d a = _mm256_loadu_pd(in + i), b = _mm256_loadu_pd(in + i + 4);
    const __m256d c = _mm256_loadu_pd(in + i + 8), d = _mm256_loadu_pd(in + i + 12);
    _mm256_storeu_pd(out + i, _mm256_mul_pd(a, s));
    _mm256_storeu_pd(out + i + 4, _mm256_mul_pd(b, s));
    _mm256_storeu_pd(out + i + 8, _mm256_mul_pd(c, s));
    _mm256_storeu_pd(out + i + 12, _mm256_mul_pd(d, s));
  }
  for (; i < n; ++i) StoreAt<double>(out, i, LoadAt<double>(in, i) * scale_d);
}

// --------------------------------------------------------------- AVX-512 ----

namespace {

GRAD_REVERSE_AVX512 inline __m256i FloatsToHalvesAvx512(__m512 f) {
  const __m256i rounded = _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
  const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
  const __m256i quiet_nan =
      _mm256_or_si256(_mm256_and_si256(rounded, _mm256_set1_epi16(static_cast<int16_t>(0x8000))),
                      _mm256_set1_epi16(0x7e00));
  return _mm256_mask_mov_epi16(rounded, nan, quiet_nan);
}

GRAD_REVERSE_AVX512 inline __m512 BFloat16sToFloatsAvx512(__m256i b) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
}

GRAD_REVERSE_AVX512 inline __m256i FloatsToBFloat16sAvx512(__m512 f) {
  const __m512i bits = _mm512_castps_si512(f);
  const __m512i high = _mm512_srli_epi32(bits, 16);
  const __m512i odd = _mm512_and_si512(high, _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), odd), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
  rounded = _mm512_mask_or_epi32(rounded, nan, high, _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(rounded);
}

// out = from_floats(scale * to_floats(in)) on 16-bit elements, 32 per step,
// the remainder under a mask. A macro, not one template: a function cannot
// inline helpers compiled for more instruction-set features than its own.
#define GRAD_REVERSE_DEFINE_MAP16(Name, Target)                                                   \
  template <typename ToFloats, typename FromFloats>                                               \
  Target inline void Name(const uint16_t* in, uint16_t* out, int64_t n, float scale,              \
                          ToFloats to_floats, FromFloats from_floats) {                           \
    const __m512 s = _mm512_set1_ps(scale);                                                       \
    int64_t i = 0;                                                                                \
    for (; i + 32 <= n; i += 32) {                                                                \
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));             \
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 16));        \
      const __m256i ra = from_floats(_mm512_mul_ps(to_floats(a), s));                             \
      const __m256i rb = from_floats(_mm512_mul_ps(to_floats(b), s));                             \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), ra);                               \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 16), rb);                          \
    }                                                                                             \
    for (; i < n; i += 16) {                                                                      \
      const int64_t left = n - i;                                                                 \
      const __mmask16 mask =                                                                      \
          left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1); \
      const __m256i a = _mm256_maskz_loadu_epi16(mask, in + i);                                   \
      _mm256_mask_storeu_epi16(out + i, mask, from_floats(_mm512_mul_ps(to_floats(a), s)));       \
    }                                                                                             \
  }

GRAD_REVERSE_DEFINE_MAP16(Map16BitAvx512, GRAD_REVERSE_AVX512)
GRAD_REVERSE_DEFINE_MAP16(Map16BitAvx512Bf16, GRAD_REVERSE_AVX512_BF16)

struct HalvesToFloats {
  GRAD_REVERSE_AVX512 __m512 operator()(__m256i h) const { return _mm512_cvtph_ps(h); }
};
struct FloatsToHalves {
  GRAD_REVERSE_AVX512 __m256i operator()(__m512 f) const { return FloatsToHalvesAvx512(f); }
};
struct BFloat16sToFloats {
  GRAD_REVERSE_AVX512 __m512 operator()(__m256i b) const { return BFloat16sToFloatsAvx512(b); }
};
struct FloatsToBFloat16s {
  GRAD_REVERSE_AVX512 __m256i operator()(__m512 f) const { return FloatsToBFloat16sAvx512(f); }
};

}  // namespace

GRAD_REVERSE_AVX512 void HalfAvx512(const void* in, void* out, int64_t n, float scale) {
  Map16BitAvx512(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), n, scale,
                 HalvesToFloats(), FloatsToHalves());
}

GRAD_REVERSE_AVX512 void BFloat16Avx512(const void* in, void* out, int64_t n, float scale) {
  Map16BitAvx512(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), n, scale,
                 BFloat16sToFloats(), FloatsToBFloat16s());
}

GRAD_REVERSE_AVX512 void FloatAvx512(const void* in_v, void* out_v, int64_t n, float scale) {
  const auto* in = static_cast<const float*>(in_v);
  auto* out = static_cast<float*>(out_v);
  const __m512 s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(in + i), b = _mm512_loadu_ps(in + i + 16);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(a, s));
    _mm512_storeu_ps(out + i + 16, _mm512_mul_ps(b, s));
  }
  for (; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 mask =
        left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
    _mm512_mask_storeu_ps(out + i, mask, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, in + i), s));
  }
}

GRAD_REVERSE_AVX512 void DoubleAvx512(const void* in_v, void* out_v, int64_t n, float scale) {
  const auto* in = static_cast<const double*>(in_v);
  auto* out = static_cast<double*>(out_v);
  const __m512d s = _mm512_set1_pd(static_cast<double>(scale));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512d a = _mm512_loadu_pd(in + i), b = _mm512_loadu_pd(in + i + 8);
    _mm512_storeu_pd(out + i, _mm512_mul_pd(a, s));
    _mm512_storeu_pd(out + i + 8, _mm512_mul_pd(b, s));
  }
  for (; i < n; i += 8) {
    const int64_t left = n - i;
    const __mmask8 mask =
        left >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << left) - 1);
    _mm512_mask_storeu_pd(out + i, mask, _mm512_mul_pd(_mm512_maskz_loadu_pd(mask, in + i), s));
  }
}

// ----------------------------------------------------------- AVX-512 BF16 ----

namespace {

struct FloatsToBFloat16sBf16 {
  GRAD_REVERSE_AVX512_BF16 __m256i operator()(__m512 f) const {
    const __m512i bits = _mm512_castps_si512(f);
    // Subnormal lanes: exponent 0 and a nonzero mantissa.
    const __mmask16 subnormal = _mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7f800000)) &
                                _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0x007fffff));
    if (__builtin_expect(subnormal != 0, 0)) return FloatsToBFloat16sAvx512(f);
    return (__m256i)_mm512_cvtneps_pbh(f);  // same 32 bytes, another vector type
  }
};

}  // namespace

GRAD_REVERSE_AVX512_BF16 void BFloat16Avx512Bf16(const void* in, void* out, int64_t n,
                                                 float scale) {
  Map16BitAvx512Bf16(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), n, scale,
                     BFloat16sToFloats(), FloatsToBFloat16sBf16());
}

// ------------------------------------------------------ streaming stores ----
//
// For a large output written out of place: the kernel computes each 4 KiB
// block into a scratch buffer that stays in L1, and the block goes to memory
// with non-temporal stores. A regular store first reads the output's cache
// line from memory (read for ownership); a non-temporal one does not, so the
// pass moves two thirds of the bytes, and the output does not evict the
// caches' contents (it would not fit in them anyway).

namespace {

constexpr int64_t kScratchBytes = 4096;

using Kernel = void (*)(const void*, void*, int64_t, float);

template <typename CopyBlock>
inline void Streaming(Kernel kernel, int element_size, const void* in_v, void* out_v, int64_t n,
                      float scale, int alignment, CopyBlock copy_block) {
  // Non-temporal stores need `alignment`-byte aligned addresses.
  const auto* in = static_cast<const unsigned char*>(in_v);
  auto* out = static_cast<unsigned char*>(out_v);
  const uintptr_t address = reinterpret_cast<uintptr_t>(out);
  if (address % element_size != 0) {  // cannot reach an aligned element
    kernel(in, out, n, scale);
    return;
  }
  const int64_t misalignment = static_cast<int64_t>(address % alignment);
  const int64_t head = misalignment == 0 ? 0 : (alignment - misalignment) / element_size;
  if (head >= n) {
    kernel(in, out, n, scale);
    return;
  }
  kernel(in, out, head, scale);
  const int64_t block = kScratchBytes / element_size;
  alignas(64) unsigned char scratch[kScratchBytes];
  int64_t i = head;
  for (; i + block <= n; i += block) {
    kernel(in + i * element_size, scratch, block, scale);
    copy_block(scratch, out + i * element_size);
  }
  kernel(in + i * element_size, out + i * element_size, n - i, scale);
}

struct CopyBlockAvx2 {
  GRAD_REVERSE_AVX2 void operator()(const unsigned char* scratch, unsigned char* out) const {
    for (int64_t b = 0; b < kScratchBytes; b += 32) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(out + b),
                          _mm256_load_si256(reinterpret_cast<const __m256i*>(scratch + b)));
    }
  }
};

struct CopyBlockAvx512 {
  GRAD_REVERSE_AVX512 void operator()(const unsigned char* scratch, unsigned char* out) const {
    for (int64_t b = 0; b < kScratchBytes; b += 64) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out + b),
                          _mm512_load_si512(reinterpret_cast<const void*>(scratch + b)));
    }
  }
};

}  // namespace

// The streaming variants of the kernels above. The fence orders the
// non-temporal stores before whatever the caller does next (e.g. tell another
// thread the output is ready).
#define GRAD_REVERSE_STREAMING(Name, Target, CopyBlock, ElementSize)               \
  Target void Name##Streaming(const void* in, void* out, int64_t n, float scale) { \
    Streaming(Name, ElementSize, in, out, n, scale, 64, CopyBlock());              \
    _mm_sfence();                                                                  \
  }

GRAD_REVERSE_STREAMING(HalfAvx2, GRAD_REVERSE_AVX2, CopyBlockAvx2, 2)
GRAD_REVERSE_STREAMING(BFloat16Avx2, GRAD_REVERSE_AVX2, CopyBlockAvx2, 2)
GRAD_REVERSE_STREAMING(FloatAvx2, GRAD_REVERSE_AVX2, CopyBlockAvx2, 4)
GRAD_REVERSE_STREAMING(DoubleAvx2, GRAD_REVERSE_AVX2, CopyBlockAvx2, 8)
GRAD_REVERSE_STREAMING(HalfAvx512, GRAD_REVERSE_AVX512, CopyBlockAvx512, 2)
GRAD_REVERSE_STREAMING(BFloat16Avx512, GRAD_REVERSE_AVX512, CopyBlockAvx512, 2)
GRAD_REVERSE_STREAMING(FloatAvx512, GRAD_REVERSE_AVX512, CopyBlockAvx512, 4)
GRAD_REVERSE_STREAMING(DoubleAvx512, GRAD_REVERSE_AVX512, CopyBlockAvx512, 8)
GRAD_REVERSE_STREAMING(BFloat16Avx512Bf16, GRAD_REVERSE_AVX512_BF16, CopyBlockAvx512, 2)
#undef GRAD_REVERSE_STREAMING

}  // namespace x86
}  // namespace grad_reverse

#endif  // GRAD_REVERSE_X86_PATHS
