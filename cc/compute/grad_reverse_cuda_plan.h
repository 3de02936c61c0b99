// The launch decision of the CUDA kernel (grad_reverse_cuda.cu): which path,
// how the elements split into a scalar head, 16-byte vectors and a scalar
// tail, and how many blocks. Plain C++ on addresses and counts (no CUDA
// header, no memory touched), so that the launcher and the emulated grid of
// cc/tests/cuda_emulated_grid.cc take the same decision, and the test can
// plan tensors past 2^31 elements without allocating them.
#ifndef GRAD_REVERSE_CC_COMPUTE_GRAD_REVERSE_CUDA_PLAN_H_
#define GRAD_REVERSE_CC_COMPUTE_GRAD_REVERSE_CUDA_PLAN_H_

#include <algorithm>
#include <cstdint>

namespace grad_reverse {

constexpr int kCudaBlockSize = 256;   // threads per block
constexpr int kCudaVectorBytes = 16;  // one uint4 load or store per thread and step

enum class CudaPath : int {
  kNothing = 0,     // n <= 0: no launch
  kVectorized = 1,  // in and out equally offset from 16 bytes, element-aligned
  kScalar = 2,      // element-aligned, offsets differ: one element per thread and step
  kUnaligned = 3,   // a pointer not aligned to its element: bytewise loads and stores
};

// Every count is in elements except `vectors` (16-byte vectors). For
// kVectorized, in + head and out + head are 16-byte aligned (when vectors > 0),
// head and tail are below the elements per vector, and
// head + vectors * (16 / element size) + tail == n.
struct CudaLaunchPlan {
  CudaPath path = CudaPath::kNothing;
  int64_t n = 0;
  int64_t head = 0;
  int64_t vectors = 0;
  int64_t tail = 0;
  int blocks = 0;  // grid size, in blocks of kCudaBlockSize threads
};

// Blocks for `work_items` items of one thread each: never more than the
// device holds at once (`resident_blocks`; the grid-stride loops do the
// rest), never fewer than one.
inline int CudaGridFor(int64_t work_items, int resident_blocks) {
  const int64_t needed = (work_items + kCudaBlockSize - 1) / kCudaBlockSize;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(needed, resident_blocks)));
}

// The plan for out[i] = scale * in[i], i < n, with `in` and `out` at these
// addresses (equal: in place), elements of `element_size` bytes (2, 4 or 8)
// and a device of `resident_blocks` resident blocks.
inline CudaLaunchPlan PlanCudaLaunch(uintptr_t in, uintptr_t out, int64_t n, int64_t element_size,
                                     int resident_blocks) {
  CudaLaunchPlan plan;
  plan.n = n;
  if (n <= 0) return plan;
  const uintptr_t in_offset = in % kCudaVectorBytes;
  const uintptr_t out_offset = out % kCudaVectorBytes;
  const bool element_aligned = in % element_size == 0 && out % element_size == 0;
  if (!element_aligned) {
    plan.path = CudaPath::kUnaligned;
    plan.blocks = CudaGridFor(n, resident_blocks);
  } else if (in_offset != out_offset) {
    plan.path = CudaPath::kScalar;
    plan.blocks = CudaGridFor(n, resident_blocks);
  } else {
    const int64_t per_vector = kCudaVectorBytes / element_size;
    const int64_t to_aligned =
        in_offset == 0 ? 0 : (kCudaVectorBytes - static_cast<int64_t>(in_offset)) / element_size;
    plan.path = CudaPath::kVectorized;
    plan.head = std::min<int64_t>(n, to_aligned);
    plan.vectors = (n - plan.head) / per_vector;
    plan.tail = n - plan.head - plan.vectors * per_vector;
    // head and tail are below per_vector, so a grid of at least per_vector
    // threads covers them in its one pass.
    plan.blocks = CudaGridFor(std::max<int64_t>(plan.vectors, per_vector), resident_blocks);
  }
  return plan;
}

}  // namespace grad_reverse

#endif  // GRAD_REVERSE_CC_COMPUTE_GRAD_REVERSE_CUDA_PLAN_H_
