// Splitting one element-wise pass over a few threads, without TensorFlow.
//
// The C++ op library shards its CPU backward on TensorFlow's intra-op pool;
// TensorFlow's C API gives a kernel no access to that pool, so the stable-ABI
// library (cc/stable/) brings its own: a few threads that the library starts
// on first use and that sleep on a condition variable between calls, so they
// cost nothing while TensorFlow's pools work. The caller runs the first shard
// itself; at most MaxThreads() threads, the caller included, work on a call.
#ifndef GRAD_REVERSE_CC_COMPUTE_PARALLEL_FOR_H_
#define GRAD_REVERSE_CC_COMPUTE_PARALLEL_FOR_H_

#include <cstdint>
#include <functional>

namespace grad_reverse {

// Calls fn(first, last) on disjoint ranges covering [0, n), each but the last
// a multiple of `align` elements long, with at least `min_shard` elements per
// range (small passes stay on the calling thread), on up to MaxThreads()
// threads at once. Returns when every range is done.
void ParallelFor(int64_t n, int64_t align, int64_t min_shard,
                 const std::function<void(int64_t, int64_t)>& fn);

// The most threads a call uses, the caller's included: by default the CPUs
// this process may run on; SetMaxThreads(k) (k >= 1) changes it (the package
// passes TensorFlow's intra-op parallelism when one is configured, so the
// library never runs more threads than TensorFlow was told to use).
int MaxThreads();
void SetMaxThreads(int threads);

}  // namespace grad_reverse

#endif  // GRAD_REVERSE_CC_COMPUTE_PARALLEL_FOR_H_
