// Runtime choice of the CPU kernel's instruction set ("path").
//
// The library is compiled with no -m flags, so it runs on every CPU that
// TensorFlow's wheels run on; the x86 paths are compiled per function with
// target attributes and chosen at run time from the CPU's features. Every
// path gives the same bits as the portable one (compute in float, round once
// to nearest even; a NaN becomes a quiet NaN: sign|0x7e00 in half, the
// float's upper 16 bits with the quiet bit set in bfloat16), which the
// tests check exhaustively on each path the machine has.
//
// Paths, from slowest to fastest:
//   portable    plain C++ (the only path off x86, e.g. aarch64)
//   avx2        AVX2 + F16C (8 floats per instruction)
//   avx512      AVX-512F + BW (16 floats per instruction)
//   avx512bf16  avx512 with AVX-512 BF16 (hardware float -> bfloat16)
//
// The environment variable GRAD_REVERSE_CPU_PATH (read once, at the first
// use) forces a path: `auto` or unset picks the fastest the CPU supports;
// a name the CPU or the build does not support is an error (CpuPathError).
// ForceCpuPath overrides both at run time (tests and benchmarks).
#ifndef GRAD_REVERSE_CC_COMPUTE_CPU_PATHS_H_
#define GRAD_REVERSE_CC_COMPUTE_CPU_PATHS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "grad_reverse_launcher.h"

namespace grad_reverse {

enum class CpuPath : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3 };
constexpr int kNumCpuPaths = 4;

// out[i] = scale * in[i] for i < n, on the calling thread (`in` may equal
// `out`; any alignment). half and bfloat16 are computed in float.
using NegScaleFn = void (*)(const void* in, void* out, int64_t n, float scale);

const char* CpuPathName(CpuPath path);

// Whether this build and this CPU can run `path`.
bool CpuPathSupported(CpuPath path);

// The supported paths' names, slowest first.
std::vector<std::string> SupportedCpuPathNames();

// The path in use: ForceCpuPath's, else GRAD_REVERSE_CPU_PATH's, else the
// fastest supported (also when GRAD_REVERSE_CPU_PATH is invalid).
CpuPath ActiveCpuPath();

// Empty, or why GRAD_REVERSE_CPU_PATH cannot be honoured (while no path is
// forced with ForceCpuPath).
std::string CpuPathError();

// Uses the path named `name` ("auto": the environment's choice again) from now
// on in this library. Returns false, changing nothing, for an unknown or
// unsupported name.
bool ForceCpuPath(const std::string& name);

// The kernel of the active path for `dtype`; with `streaming_stores`, its
// variant that writes with non-temporal stores (the portable path has none).
NegScaleFn NegScaleCpuFunction(DType dtype, bool streaming_stores = false);

// Outputs at least this large go to memory with streaming stores: they do not
// fit the caches a shard's core shares, so the stores need not read the
// output's cache lines first (a third of the bytes a regular pass moves).
constexpr int64_t kStreamingStoresMinBytes = int64_t{16} << 20;

// Whether the kernel should write `bytes` bytes to `out` with streaming
// stores: out of place and at least kStreamingStoresMinBytes.
bool UseStreamingStores(const void* in, const void* out, int64_t bytes);

}  // namespace grad_reverse

#endif  // GRAD_REVERSE_CC_COMPUTE_CPU_PATHS_H_
