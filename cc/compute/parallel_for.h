// Splitting one element-wise pass over a few threads, without TensorFlow.
//
// A pass is cut into blocks of kBlockBytes, which the threads take in turn
// from a shared counter (TakeBlocks) until none is left, so a thread that
// starts late or runs slow (a busy or descheduled vCPU) takes fewer blocks
// instead of holding up the pass.
//
// The C++ op library runs its threads on TensorFlow's intra-op pool;
// TensorFlow's C API gives a kernel no access to that pool, so the stable-ABI
// library (cc/stable/) brings its own: a few threads that the library starts
// on first use and that sleep on a condition variable between calls, so they
// cost nothing while TensorFlow's pools work. The caller takes blocks too; at
// most MaxThreads() threads, the caller included, work on a call.
#ifndef GRAD_REVERSE_CC_COMPUTE_PARALLEL_FOR_H_
#define GRAD_REVERSE_CC_COMPUTE_PARALLEL_FOR_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>

namespace grad_reverse {

// Passes smaller than this stay on the calling thread; larger ones get one
// thread per this many bytes, up to the threads at hand, in both op
// libraries: on a smaller shard, waking a worker costs more than the split
// saves (docs/benchmark.md, "Two threads against one", has the measurements).
constexpr int64_t kMinShardBytes = int64_t{4} << 20;

// The unit the threads of one pass take in turn: a whole number of 64-byte
// lines of every type. Blocks taken in turn from one counter let a thread
// that starts late or runs slow take fewer, where equal halves wait for the
// slower one (docs/benchmark.md, "Blocks taken in turn", has the measurements).
constexpr int64_t kBlockBytes = int64_t{256} << 10;
static_assert(kBlockBytes % 64 == 0, "blocks start on cache lines");

// How many threads a pass over `bytes` bytes is split over: one per
// kMinShardBytes, at least 1, at most `threads`.
constexpr int64_t ShardCount(int64_t bytes, int64_t threads) {
  const int64_t by_size = bytes / kMinShardBytes;
  return by_size < 1 ? 1 : (by_size < threads ? by_size : (threads < 1 ? 1 : threads));
}
static_assert(ShardCount(int64_t{8} << 20, 8) == 2, "8 MiB is split in two");
static_assert(ShardCount((int64_t{8} << 20) - 1, 8) == 1, "a pass under 8 MiB stays on the caller");
static_assert(ShardCount(int64_t{13} << 20, 8) == 3, "one shard per whole 4 MiB");
static_assert(ShardCount(int64_t{64} << 20, 2) == 2, "at most one shard per thread");

// Calls fn(first, last) on the blocks [b * block, min(n, (b + 1) * block))
// whose numbers b it takes from `next` (starting at 0), until none is left.
// Several threads share one counter to split a pass: each block goes to
// exactly one of them.
template <typename Fn>
void TakeBlocks(std::atomic<int64_t>& next, int64_t n, int64_t block, const Fn& fn) {
  const int64_t blocks = (n + block - 1) / block;
  for (int64_t b = next.fetch_add(1, std::memory_order_relaxed); b < blocks;
       b = next.fetch_add(1, std::memory_order_relaxed)) {
    fn(b * block, std::min(n, (b + 1) * block));
  }
}

// Calls fn(first, last) on disjoint ranges covering [0, n), the blocks of
// TakeBlocks (`block` elements each but the last), on one thread per
// `min_shard` elements (a pass under 2 * min_shard stays on the calling
// thread), at most MaxThreads() threads at once. Returns when every range is done.
void ParallelFor(int64_t n, int64_t block, int64_t min_shard,
                 const std::function<void(int64_t, int64_t)>& fn);

// The most threads a call uses, the caller's included: by default the CPUs
// this process may run on; SetMaxThreads(k) (k >= 1) changes it (the package
// passes TensorFlow's intra-op parallelism when one is configured, so the
// library never runs more threads than TensorFlow was told to use).
int MaxThreads();
void SetMaxThreads(int threads);

}  // namespace grad_reverse

#endif  // GRAD_REVERSE_CC_COMPUTE_PARALLEL_FOR_H_
