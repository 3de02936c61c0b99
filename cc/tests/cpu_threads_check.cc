// Drives the framework-free CPU kernels from many threads at once, the way
// TensorFlow's OpKernel does (shards of one tensor on its intra-op pool), for
// scripts/tsan.sh, which builds this and the kernels with ThreadSanitizer.
// Every result is also checked against the portable path's bits, so a run
// that passes says "no race reported and every value exact".
//
// Phases, in this order (the first must come first: it races the lazy read
// of GRAD_REVERSE_CPU_PATH, which happens once per process):
//   first-read  threads call the kernel and the path queries at the same
//               moment, before anything has read the environment variable;
//   shards      every dtype, in place and out of place, small and large
//               enough for streaming stores, one tensor split over threads;
//   switch      one thread forces path after path while the others run
//               kernels on their own tensors;
//   pool        callers on several threads at once split their own tensors
//               with ParallelFor (the stable-ABI library's own pool, whose
//               workers they share), the thread cap changing between rounds.
//
// Exit status 0 when every value was exact; ThreadSanitizer's reports make
// the process exit non-zero on their own (halt_on_error / exitcode).
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cc/compute/cpu_paths.h"
#include "cc/compute/grad_reverse_launcher.h"
#include "cc/compute/parallel_for.h"

namespace {

using grad_reverse::DType;

constexpr int kThreads = 4;
constexpr DType kDTypes[] = {DType::kHalf, DType::kBFloat16, DType::kFloat, DType::kDouble};
constexpr const char* kDTypeNames[] = {"half", "bfloat16", "float", "double"};

int failures = 0;  // written by the main thread only, after joins

// Bytes of `n` elements of `dtype` with varied values: patterns of the raw
// bits, so half and bfloat16 get NaNs, infinities and subnormals too.
std::vector<unsigned char> Input(DType dtype, int64_t n, uint32_t seed) {
  std::vector<unsigned char> bytes(static_cast<size_t>(n * grad_reverse::DTypeSize(dtype)));
  uint32_t state = seed * 2654435761u + 1;
  for (unsigned char& b : bytes) {
    state = state * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(state >> 24);
  }
  if (dtype == DType::kFloat || dtype == DType::kDouble) {  // finite, moderate numbers
    for (int64_t i = 0; i < n; ++i) {
      if (dtype == DType::kFloat) {
        reinterpret_cast<float*>(bytes.data())[i] = static_cast<float>((i % 2001) - 1000) / 7.0f;
      } else {
        reinterpret_cast<double*>(bytes.data())[i] = static_cast<double>((i % 3001) - 1500) / 9.0;
      }
    }
  }
  return bytes;
}

// The portable path's output, the oracle every path must equal bit for bit.
std::vector<unsigned char> Portable(DType dtype, const std::vector<unsigned char>& in, int64_t n,
                                    float lambda) {
  std::vector<unsigned char> out(in.size());
  grad_reverse::ForceCpuPath("portable");
  grad_reverse::NegScaleCpu(in.data(), out.data(), n, lambda, dtype);
  grad_reverse::ForceCpuPath("auto");
  return out;
}

void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "cpu_threads_check: FAIL: %s\n", what.c_str());
    ++failures;
  }
}

// Splits [0, n) into kThreads ranges and runs the kernel on each from its
// own thread, all on one output buffer (TensorFlow's Shard does this).
void Sharded(DType dtype, const void* in, void* out, int64_t n, float lambda) {
  const int size = grad_reverse::DTypeSize(dtype);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    const int64_t begin = n * t / kThreads, end = n * (t + 1) / kThreads;
    threads.emplace_back([=] {
      grad_reverse::NegScaleCpu(static_cast<const char*>(in) + begin * size,
                                static_cast<char*>(out) + begin * size, end - begin, lambda, dtype);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

void FirstRead() {
  std::barrier start(kThreads);
  std::vector<std::string> paths(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
      start.arrive_and_wait();
      grad_reverse::NegScaleCpu(in, out, 8, 0.5f, DType::kFloat);  // reads the variable
      paths[t] = std::string(grad_reverse::CpuPathName(grad_reverse::ActiveCpuPath())) + " " +
                 grad_reverse::CpuPathError();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 1; t < kThreads; ++t)
    Expect(paths[t] == paths[0], "threads disagree on the first read");
  std::printf("first-read: %d threads agree: %s\n", kThreads, paths[0].c_str());
}

void Shards() {
  int cases = 0, streamed = 0;
  grad_reverse::ForceStreamingStores("on");
  for (int d = 0; d < 4; ++d) {
    const DType dtype = kDTypes[d];
    // The last length gives every thread's shard more than
    // kStreamingStoresMinBytes, so out of place, with streaming stores forced
    // on (Shards() does), they write with them (in place never does).
    const int64_t streaming =
        kThreads * grad_reverse::kStreamingStoresMinBytes / grad_reverse::DTypeSize(dtype);
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{4099}, streaming + 33}) {
      const std::vector<unsigned char> in = Input(dtype, n, static_cast<uint32_t>(n + d));
      const std::vector<unsigned char> want = Portable(dtype, in, n, 0.75f);
      std::vector<unsigned char> out(in.size()), in_place = in;
      Sharded(dtype, in.data(), out.data(), n, 0.75f);
      Sharded(dtype, in_place.data(), in_place.data(), n, 0.75f);
      const std::string name = std::string(kDTypeNames[d]) + "[" + std::to_string(n) + "]";
      Expect(out == want, name + " out of place differs from the portable path");
      Expect(in_place == want, name + " in place differs from the portable path");
      cases += 2;
      streamed += grad_reverse::UseStreamingStores(in.data(), out.data(),
                                                   n / kThreads * grad_reverse::DTypeSize(dtype));
    }
  }
  grad_reverse::ForceStreamingStores("auto");
  Expect(streamed == 4, "the largest cases did not reach the streaming stores");
  std::printf("shards: %d cases (%d with streaming stores) over %d threads, path %s, exact\n",
              cases, streamed, kThreads, grad_reverse::CpuPathName(grad_reverse::ActiveCpuPath()));
}

void Switch() {
  std::vector<std::string> names = grad_reverse::SupportedCpuPathNames();
  names.push_back("auto");
  const int64_t n = 70001;
  std::vector<std::vector<unsigned char>> inputs, wants;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(Input(kDTypes[t % 4], n, 100 + t));
    wants.push_back(Portable(kDTypes[t % 4], inputs.back(), n, -1.5f));
  }
  std::barrier start(kThreads + 1);
  std::atomic<bool> running{true};
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<unsigned char> out(inputs[t].size());
      start.arrive_and_wait();
      for (int call = 0; call < 60; ++call) {
        grad_reverse::NegScaleCpu(inputs[t].data(), out.data(), n, -1.5f, kDTypes[t % 4]);
        wrong[t] += out != wants[t];
      }
    });
  }
  int switches = 0;
  std::thread switcher([&] {
    start.arrive_and_wait();
    while (running.load()) grad_reverse::ForceCpuPath(names[switches++ % names.size()]);
  });
  for (std::thread& worker : workers) worker.join();
  running.store(false);
  switcher.join();
  grad_reverse::ForceCpuPath("auto");
  for (int t = 0; t < kThreads; ++t)
    Expect(wrong[t] == 0, "a result differed while paths switched");
  std::printf("switch: %d path switches over %zu paths while %d threads ran 60 calls each, exact\n",
              switches, names.size(), kThreads);
}

void Pool() {
  const int64_t n = 300007;  // many blocks per call, the last one short
  std::vector<std::vector<unsigned char>> inputs, wants;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(Input(kDTypes[t % 4], n, 200 + t));
    wants.push_back(Portable(kDTypes[t % 4], inputs.back(), n, 0.25f));
  }
  std::vector<int> wrong(kThreads, 0);
  int calls = 0;
  for (int cap : {3, 1, 5}) {
    grad_reverse::SetMaxThreads(cap);
    std::barrier start(kThreads);
    std::vector<std::thread> callers;
    for (int t = 0; t < kThreads; ++t) {
      callers.emplace_back([&, t] {
        const DType dtype = kDTypes[t % 4];
        const int size = grad_reverse::DTypeSize(dtype);
        std::vector<unsigned char> out(inputs[t].size());
        start.arrive_and_wait();
        for (int call = 0; call < 20; ++call) {
          std::fill(out.begin(), out.end(), 0);
          // Blocks of 2,048 elements: 147 per call, over as many threads as the cap.
          grad_reverse::ParallelFor(n, 2048, 4096, [&](int64_t first, int64_t last) {
            grad_reverse::NegScaleCpu(inputs[t].data() + first * size, out.data() + first * size,
                                      last - first, 0.25f, dtype);
          });
          wrong[t] += out != wants[t];
        }
      });
    }
    for (std::thread& caller : callers) caller.join();
    calls += kThreads * 20;
  }
  for (int t = 0; t < kThreads; ++t) Expect(wrong[t] == 0, "a ParallelFor result differed");
  std::printf("pool: %d ParallelFor calls from %d threads at once, caps 3, 1, 5, exact\n", calls,
              kThreads);
}

}  // namespace

int main() {
  FirstRead();
  Shards();
  Switch();
  Pool();
  if (failures) {
    std::fprintf(stderr, "cpu_threads_check: %d failure(s)\n", failures);
    return 1;
  }
  std::printf("cpu_threads_check: OK\n");
  return 0;
}
