// The CUDA kernel's own code on the CPU, under an emulated grid: for each
// case, the launch plan of grad_reverse_cuda_plan.h (the function the
// launcher calls) is checked against its definition, then every (block,
// thread) of the planned grid runs the kernel body of grad_reverse_cuda_body.h
// (the code the __global__ wrappers call) sequentially, on a "device" of 1 to
// 3 resident blocks so that the grid-stride loops iterate, and every output
// is compared bitwise with the CPU kernel (NegScaleCpu). A NaN matches a NaN
// of any payload: the CPU kernel defines its NaN outputs as NaN of the
// input's sign with the quiet bit set, the CUDA conversions as the canonical
// NaN; the driver counts those differences and prints them.
//
// Built with the host compiler against the CUDA headers only (no runtime, no
// driver, no GPU): cc/tests/CMakeLists.txt. Guard bytes around every buffer
// catch a write out of bounds in any build; under AddressSanitizer they are
// poisoned too, so a read out of bounds fails as well (scripts/sanitize.sh).
//
// Exit status 0 when every case passed; 1 with the first failures printed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "cc/compute/grad_reverse_cuda_body.h"
#include "cc/compute/grad_reverse_cuda_plan.h"
#include "cc/compute/grad_reverse_launcher.h"
#include "cc/tests/emulated_grid_cases.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace {

using grad_reverse::CudaLaunchPlan;
using grad_reverse::CudaPath;
using grad_reverse::DType;
using grad_reverse::kCudaBlockSize;

constexpr int kPaths = 4;  // CudaPath values
constexpr const char* kPathNames[kPaths] = {"nothing", "vectorized", "scalar", "unaligned"};
constexpr int kGuardBytes = 64;
constexpr unsigned char kGuardByte = 0xA5;

// What ran, per dtype (printed for the record) and how many cases failed.
struct Tally {
  int64_t cases[kPaths] = {};
  int64_t elements[kPaths] = {};
  int64_t in_place = 0;
  int64_t plan_only = 0;
  int64_t nan_payloads_differing = 0;
};
Tally tallies[4];
int failures = 0;

void Fail(const std::string& what) {
  if (++failures <= 12) std::printf("FAIL %s\n", what.c_str());
}

// `bytes` bytes that start `offset` bytes past a 16-byte boundary, between
// guard zones (kGuardBytes before the boundary plus the offset, and after).
class GuardedBuffer {
 public:
  GuardedBuffer(int64_t bytes, int offset)
      : bytes_(bytes),
        offset_(offset),
        size_(kGuardBytes + offset + bytes + kGuardBytes),
        base_(static_cast<unsigned char*>(::operator new(size_, std::align_val_t(64)))) {
    std::memset(base_, kGuardByte, size_);
    POISON(base_, kGuardBytes + offset_);
    POISON(data() + bytes_, kGuardBytes);
  }
  ~GuardedBuffer() {
    UNPOISON(base_, size_);
    ::operator delete(base_, std::align_val_t(64));
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  unsigned char* data() { return base_ + kGuardBytes + offset_; }
  // Whether every guard byte still holds its pattern.
  bool GuardsIntact() {
    UNPOISON(base_, size_);
    bool intact = true;
    for (int64_t i = 0; i < size_; ++i) {
      const bool guard = i < kGuardBytes + offset_ || i >= kGuardBytes + offset_ + bytes_;
      if (guard && base_[i] != kGuardByte) intact = false;
    }
    POISON(base_, kGuardBytes + offset_);
    POISON(data() + bytes_, kGuardBytes);
    return intact;
  }

 private:
  int64_t bytes_;
  int offset_;
  int64_t size_;
  unsigned char* base_;
};

// The plan, checked against what it must be, written out independently of
// PlanCudaLaunch: the path from the pointers' offsets; for the vector path
// the smallest head that reaches 16-byte alignment, as many whole vectors as
// fit, and the rest as tail; a grid that covers the work up to the device's
// resident blocks.
std::string PlanError(const CudaLaunchPlan& p, uintptr_t in, uintptr_t out, int64_t n, int64_t size,
                      int resident) {
  CudaPath path = CudaPath::kVectorized;
  if (n <= 0)
    path = CudaPath::kNothing;
  else if (in % size != 0 || out % size != 0)
    path = CudaPath::kUnaligned;
  else if (in % 16 != out % 16)
    path = CudaPath::kScalar;
  if (p.path != path)
    return "path " + std::to_string(int(p.path)) + " != " + std::to_string(int(path));
  if (p.n != n) return "n";
  if (path == CudaPath::kNothing) return p.blocks == 0 ? "" : "blocks for nothing";
  int64_t work = n;
  if (path == CudaPath::kVectorized) {
    const int64_t per_vector = 16 / size;
    int64_t head = 0;
    while (head < n && (in + head * size) % 16 != 0) ++head;
    if (p.head != head) return "head " + std::to_string(p.head) + " != " + std::to_string(head);
    if (p.tail < 0 || p.tail >= per_vector) return "tail " + std::to_string(p.tail);
    if (p.vectors < 0 || p.head + p.vectors * per_vector + p.tail != n)
      return "head + vectors + tail != n";
    if (p.vectors > 0 && ((in + head * size) % 16 != 0 || (out + head * size) % 16 != 0)) {
      return "vectors not 16-byte aligned";
    }
    work = std::max(p.vectors, per_vector);
    if (int64_t{p.blocks} * kCudaBlockSize < std::max(p.head, p.tail))
      return "grid misses head or tail";
  } else if (p.head != 0 || p.vectors != 0 || p.tail != 0) {
    return "head/vectors/tail set off the vector path";
  }
  const int64_t cover = (work + kCudaBlockSize - 1) / kCudaBlockSize;
  const int64_t blocks = std::min<int64_t>(resident, std::max<int64_t>(1, cover));
  if (p.blocks != blocks)
    return "blocks " + std::to_string(p.blocks) + " != " + std::to_string(blocks);
  return "";
}

// Every (block, thread) of the plan's grid, one after another.
template <typename T>
void RunGrid(const CudaLaunchPlan& plan, unsigned char* in, unsigned char* out, float scale) {
  const int64_t stride = int64_t{plan.blocks} * kCudaBlockSize;
  const T* tin = reinterpret_cast<const T*>(in);
  T* tout = reinterpret_cast<T*>(out);
  for (int64_t block = 0; block < plan.blocks; ++block) {
    for (int64_t thread = 0; thread < kCudaBlockSize; ++thread) {
      const int64_t tid = block * kCudaBlockSize + thread;
      switch (plan.path) {
        case CudaPath::kNothing:
          return;
        case CudaPath::kVectorized:
          grad_reverse::NegScaleVectorizedThread<T>(tin, tout, plan, scale, tid, stride);
          break;
        case CudaPath::kScalar:
          grad_reverse::NegScaleScalarThread<T>(tin, tout, plan, scale, tid, stride);
          break;
        case CudaPath::kUnaligned:
          grad_reverse::NegScaleUnalignedThread<T>(in, out, plan, scale, tid, stride);
          break;
      }
    }
  }
}

using emulated::Case;

std::string Describe(const Case& c) {
  char text[200];
  std::snprintf(text, sizeof(text), "%s n=%lld in+%d out+%d %s lambda=%g resident=%d",
                emulated::DTypeName(c.dtype), static_cast<long long>(c.n), c.in_offset,
                c.out_offset, c.in_place ? "in place" : "out of place", c.lambda, c.resident);
  return text;
}

template <typename T>
void RunCase(const Case& c, const std::vector<unsigned char>& pool) {
  const int64_t size = sizeof(T);
  const int64_t bytes = c.n * size;
  GuardedBuffer in(bytes, c.in_offset);
  GuardedBuffer out_buffer(c.in_place ? 0 : bytes, c.out_offset);
  unsigned char* out = c.in_place ? in.data() : out_buffer.data();
  const int64_t pool_elements = static_cast<int64_t>(pool.size()) / size;
  for (int64_t i = 0; i < c.n; ++i) {
    std::memcpy(in.data() + i * size, &pool[((c.value_start + i) % pool_elements) * size], size);
  }
  const std::vector<unsigned char> input(in.data(), in.data() + bytes);
  std::vector<unsigned char> want(bytes);
  grad_reverse::NegScaleCpu(input.data(), want.data(), c.n, c.lambda, c.dtype);

  const uintptr_t in_address = reinterpret_cast<uintptr_t>(in.data());
  const uintptr_t out_address = reinterpret_cast<uintptr_t>(out);
  const CudaLaunchPlan plan =
      grad_reverse::PlanCudaLaunch(in_address, out_address, c.n, size, c.resident);
  Tally& tally = tallies[static_cast<int>(c.dtype)];
  const int path = static_cast<int>(plan.path);
  tally.cases[path] += 1;
  tally.elements[path] += c.n;
  tally.in_place += c.in_place;
  const std::string plan_error = PlanError(plan, in_address, out_address, c.n, size, c.resident);
  if (!plan_error.empty()) {
    Fail(Describe(c) + ": plan: " + plan_error);
    return;  // a wrong plan can send the bodies out of bounds
  }
  RunGrid<T>(plan, in.data(), out, -c.lambda);

  for (int64_t i = 0; i < c.n; ++i) {
    const uint64_t got = emulated::ElementBits(out + i * size, size);
    const uint64_t expected = emulated::ElementBits(want.data() + i * size, size);
    if (got == expected) continue;
    if (emulated::IsNan(got, c.dtype) && emulated::IsNan(expected, c.dtype)) {
      tally.nan_payloads_differing += 1;
      continue;
    }
    char text[120];
    std::snprintf(
        text, sizeof(text), ": element %lld: 0x%llx, CPU kernel 0x%llx (input 0x%llx)",
        static_cast<long long>(i), static_cast<unsigned long long>(got),
        static_cast<unsigned long long>(expected),
        static_cast<unsigned long long>(emulated::ElementBits(input.data() + i * size, size)));
    Fail(Describe(c) + text);
    return;
  }
  if (!in.GuardsIntact() || (!c.in_place && !out_buffer.GuardsIntact())) {
    Fail(Describe(c) + ": a write outside the buffers");
  }
  if (!c.in_place && bytes > 0 && std::memcmp(in.data(), input.data(), bytes) != 0) {
    Fail(Describe(c) + ": the input changed");
  }
}

void Run(const Case& c, const emulated::ValuePools& pools) {
  const std::vector<unsigned char>& pool = pools.of(c.dtype);
  switch (c.dtype) {
    case DType::kHalf:
      return RunCase<__half>(c, pool);
    case DType::kBFloat16:
      return RunCase<__nv_bfloat16>(c, pool);
    case DType::kFloat:
      return RunCase<float>(c, pool);
    case DType::kDouble:
      return RunCase<double>(c, pool);
  }
}

// Plans past 2^31 elements (index arithmetic only: nothing is allocated).
void PlanHugeSizes() {
  const int64_t sizes[] = {(int64_t{1} << 31) - 1, int64_t{1} << 31,       (int64_t{1} << 31) + 13,
                           int64_t{3000000000},    (int64_t{1} << 40) + 7, (int64_t{1} << 60) + 5};
  const int residents[] = {1, 3, 132 * 8};  // an H100's 132 SMs of 8 blocks
  for (DType dtype : emulated::kDTypes) {
    const int64_t size = grad_reverse::DTypeSize(dtype);
    for (int64_t n : sizes) {
      for (int resident : residents) {
        for (int in_offset = 0; in_offset < 16; ++in_offset) {
          for (int out_offset : {in_offset, (in_offset + int(size)) % 16}) {
            const uintptr_t in = (uintptr_t{1} << 44) + in_offset;  // addresses only
            const uintptr_t out = (uintptr_t{3} << 44) + out_offset;
            const CudaLaunchPlan plan = grad_reverse::PlanCudaLaunch(in, out, n, size, resident);
            tallies[static_cast<int>(dtype)].plan_only += 1;
            const std::string error = PlanError(plan, in, out, n, size, resident);
            if (!error.empty()) {
              Fail(std::string(emulated::DTypeName(dtype)) + " plan only n=" + std::to_string(n) +
                   " in+" + std::to_string(in_offset) + " out+" + std::to_string(out_offset) +
                   ": " + error);
            }
          }
        }
      }
    }
  }
}

void PrintTallies() {
  std::printf("%-9s %11s %11s %11s %8s %9s %9s %11s\n", "dtype", "vectorized", "scalar",
              "unaligned", "empty", "in-place", "plan-only", "NaN-payload");
  for (DType dtype : emulated::kDTypes) {
    const Tally& t = tallies[static_cast<int>(dtype)];
    std::printf("%-9s %11lld %11lld %11lld %8lld %9lld %9lld %11lld\n", emulated::DTypeName(dtype),
                static_cast<long long>(t.cases[1]), static_cast<long long>(t.cases[2]),
                static_cast<long long>(t.cases[3]), static_cast<long long>(t.cases[0]),
                static_cast<long long>(t.in_place), static_cast<long long>(t.plan_only),
                static_cast<long long>(t.nan_payloads_differing));
  }
  std::printf("elements:");
  for (DType dtype : emulated::kDTypes) {
    const Tally& t = tallies[static_cast<int>(dtype)];
    std::printf(" %s %lld/%lld/%lld", emulated::DTypeName(dtype),
                static_cast<long long>(t.elements[1]), static_cast<long long>(t.elements[2]),
                static_cast<long long>(t.elements[3]));
  }
  std::printf(" (vectorized/scalar/unaligned)\n");
}

}  // namespace

int main() {
  const emulated::ValuePools pools;
  for (const Case& c : emulated::AllCases()) Run(c, pools);
  PlanHugeSizes();
  PrintTallies();
  if (failures > 0) {
    std::printf("emulated grid: %d cases FAILED\n", failures);
    return 1;
  }
  std::printf("emulated grid: every case equals the CPU kernel\n");
  return 0;
}
