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

// Empty, or why the CPU kernels' environment cannot be honoured: an invalid
// GRAD_REVERSE_CPU_PATH (while no path is forced with ForceCpuPath), or an
// invalid GRAD_REVERSE_STREAMING_STORES (while no choice is forced with
// ForceStreamingStores). The kernels fail with it rather than guess.
std::string CpuPathError();

// Uses the path named `name` ("auto": the environment's choice again) from now
// on in this library. Returns false, changing nothing, for an unknown or
// unsupported name.
bool ForceCpuPath(const std::string& name);

// The kernel of the active path for `dtype`; with `streaming_stores`, its
// variant that writes with non-temporal stores (the portable path has none).
NegScaleFn NegScaleCpuFunction(DType dtype, bool streaming_stores = false);

// Outputs at least this large may go to memory with streaming stores: they
// do not fit the caches a shard's core shares, so the stores need not read
// the output's cache lines first (a third of the bytes a regular pass moves).
// Whether that wins depends on the machine: where a fresh output's pages are
// faulted in (zeroed by the kernel, so already in cache) plain stores can be
// faster. So by default each process measures (see StorePass).
constexpr int64_t kStreamingStoresMinBytes = int64_t{16} << 20;

// The streaming-store choice for passes of kStreamingStoresMinBytes or more,
// out of place (a pass in place, or a smaller one, always uses plain stores).
// GRAD_REVERSE_STREAMING_STORES (read once, at the first use): `auto` or
// unset measures, `on` and `off` force; ForceStreamingStores overrides it at
// run time. `auto` measures each size class (StreamingSizeClass) on its own:
// it times the first 2 * kStreamingCalibrationPairs eligible passes of the
// class, plain and streaming stores alternately, and keeps
// StreamingStoresWin's verdict for that class for the rest of the process.
// Per class, because one machine can want streaming stores at one size and
// plain ones at another (docs/benchmark.md has the measurements).
constexpr int kStreamingCalibrationPairs = 15;
// Size classes of outputs: class k holds outputs of kStreamingStoresMinBytes
// << k bytes up to twice that; the last class holds every larger one too.
constexpr int kStreamingSizeClasses = 6;  // 16, 32, 64, 128, 256, and 512 MiB or more
// The class of an output of `bytes` bytes; -1 below kStreamingStoresMinBytes.
constexpr int StreamingSizeClass(int64_t bytes) {
  int size_class = bytes < kStreamingStoresMinBytes ? -1 : 0;
  while (size_class >= 0 && size_class + 1 < kStreamingSizeClasses &&
         bytes >= (kStreamingStoresMinBytes << (size_class + 1))) {
    ++size_class;
  }
  return size_class;
}
static_assert(StreamingSizeClass(kStreamingStoresMinBytes - 1) == -1, "too small to stream");
static_assert(StreamingSizeClass(kStreamingStoresMinBytes) == 0, "16 MiB is the first class");
static_assert(StreamingSizeClass(2 * kStreamingStoresMinBytes - 1) == 0,
              "a class spans a doubling");
static_assert(StreamingSizeClass(2 * kStreamingStoresMinBytes) == 1, "32 MiB starts the next");
static_assert(StreamingSizeClass(int64_t{1} << 40) == kStreamingSizeClasses - 1,
              "the last is open");

// Streaming stores must be faster than plain ones by more than this fraction
// (the fastest plain pass over the fastest streaming pass above 1 + margin):
// on a tie, plain stores, which never lose much where pages are faulted in.
constexpr double kStreamingStoresMargin = 0.03;

// The calibration's decision from its measurements, a pure function:
// `plain[i]` and `streaming[i]` are the seconds per byte of pair i's two
// passes. True when the fastest plain pass over the fastest streaming pass is
// above 1 + kStreamingStoresMargin: load on a shared machine only slows a
// pass, so each kind's fastest is what it does at the quietest moment the
// pairs met, where a median of the pairs' ratios follows the load
// (docs/benchmark.md). False for pairs < 1 or a non-positive time.
bool StreamingStoresWin(const double* plain, const double* streaming, int pairs);

// "auto", "on" or "off" from now on in this library ("auto": the
// environment's choice again; a finished calibration is kept). Returns false,
// changing nothing, for another name.
bool ForceStreamingStores(const std::string& mode);

// Which stores a large out-of-place pass uses now and why, e.g. "auto,
// measured per output size: 16-32 MiB off (...); 256-512 MiB on (...); other
// sizes not decided yet" or "on (forced: GRAD_REVERSE_STREAMING_STORES=on)";
// for an invalid variable, "error: " and what CpuPathError says.
std::string StreamingStoresState();
// The choice for an out-of-place pass writing `bytes` bytes: 1 streaming
// stores, 0 plain ones, -1 not decided yet (`auto` still measuring that size).
int StreamingStoresChoiceAt(int64_t bytes);

// Whether a pass that writes `bytes` bytes from `in` to `out` would use
// streaming stores now (no calibration sample is taken: while `auto` is still
// measuring, false).
bool UseStreamingStores(const void* in, const void* out, int64_t bytes);

// How many passes (StorePass objects) in this library have been given
// streaming stores so far: what tests read to see a choice honoured.
int64_t StreamingStorePasses();

// One pass's stores: construct it before the pass (over every shard), read
// streaming(), and let it go out of scope when the pass is done. While `auto`
// is measuring, an eligible pass is a calibration sample: it is given plain or
// streaming stores in turn and timed from construction to destruction.
class StorePass {
 public:
  StorePass(const void* in, const void* out, int64_t bytes);
  ~StorePass();
  StorePass(const StorePass&) = delete;
  StorePass& operator=(const StorePass&) = delete;
  bool streaming() const { return streaming_; }

 private:
  bool streaming_ = false;
  int sample_ = -1;  // the calibration slot this pass fills, or -1
  int64_t bytes_ = 0;
  int64_t start_ns_ = 0;
};

}  // namespace grad_reverse

#endif  // GRAD_REVERSE_CC_COMPUTE_CPU_PATHS_H_
