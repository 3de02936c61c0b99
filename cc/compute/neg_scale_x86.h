// The x86 vector kernels behind cpu_paths.h (internal to cc/compute). Each is
// compiled for its instruction set with a target attribute, so the rest of
// the library keeps the compiler's baseline flags; call one only where
// CpuPathSupported says its path runs.
#ifndef GRAD_REVERSE_CC_COMPUTE_NEG_SCALE_X86_H_
#define GRAD_REVERSE_CC_COMPUTE_NEG_SCALE_X86_H_

#include <cstdint>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__)
#define GRAD_REVERSE_X86_PATHS 1
#else
#define GRAD_REVERSE_X86_PATHS 0
#endif

#if GRAD_REVERSE_X86_PATHS
namespace grad_reverse {
namespace x86 {

// What the CPU (and the OS, for the register state) supports.
bool HasAvx2F16c();
bool HasAvx512();      // F, BW and VL
bool HasAvx512Bf16();  // HasAvx512() and AVX512_BF16

// out[i] = scale * in[i]; the NegScaleFn signature of cpu_paths.h.
void HalfAvx2(const void* in, void* out, int64_t n, float scale);
void BFloat16Avx2(const void* in, void* out, int64_t n, float scale);
void FloatAvx2(const void* in, void* out, int64_t n, float scale);
void DoubleAvx2(const void* in, void* out, int64_t n, float scale);

void HalfAvx512(const void* in, void* out, int64_t n, float scale);
void BFloat16Avx512(const void* in, void* out, int64_t n, float scale);
void FloatAvx512(const void* in, void* out, int64_t n, float scale);
void DoubleAvx512(const void* in, void* out, int64_t n, float scale);

void BFloat16Avx512Bf16(const void* in, void* out, int64_t n, float scale);

// The same results, written with non-temporal (streaming) stores: for a large
// output that is not the input.
void HalfAvx2Streaming(const void* in, void* out, int64_t n, float scale);
void BFloat16Avx2Streaming(const void* in, void* out, int64_t n, float scale);
void FloatAvx2Streaming(const void* in, void* out, int64_t n, float scale);
void DoubleAvx2Streaming(const void* in, void* out, int64_t n, float scale);
void HalfAvx512Streaming(const void* in, void* out, int64_t n, float scale);
void BFloat16Avx512Streaming(const void* in, void* out, int64_t n, float scale);
void FloatAvx512Streaming(const void* in, void* out, int64_t n, float scale);
void DoubleAvx512Streaming(const void* in, void* out, int64_t n, float scale);
void BFloat16Avx512Bf16Streaming(const void* in, void* out, int64_t n, float scale);

}  // namespace x86
}  // namespace grad_reverse
#endif  // GRAD_REVERSE_X86_PATHS

#endif  // GRAD_REVERSE_CC_COMPUTE_NEG_SCALE_X86_H_
