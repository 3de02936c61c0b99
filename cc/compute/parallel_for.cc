#include "parallel_for.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace grad_reverse {
namespace {

int CpusAvailable() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::atomic<int> max_threads{0};  // 0: not set yet (CpusAvailable())

// Workers that take shards from one queue, started on demand: never more than
// the largest MaxThreads() - 1 a call has asked for.
class Pool {
 public:
  void Run(std::vector<std::function<void()>>& tasks) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (workers_.size() < tasks.size()) {
        workers_.emplace_back([this] { Work(); });
      }
      for (auto& task : tasks) queue_.push_back(&task);
    }
    wake_.notify_all();
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return !queue_.empty(); });
      std::function<void()>* task = queue_.front();
      queue_.pop_front();
      lock.unlock();
      (*task)();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>*> queue_;
  std::vector<std::thread> workers_;
};

// Never destroyed: TensorFlow never unloads an op library, and a destructor
// run by exit() would join threads that may be waiting on this very pool.
Pool& ThePool() {
  static Pool* pool = new Pool();
  return *pool;
}

}  // namespace

int MaxThreads() {
  const int set = max_threads.load(std::memory_order_relaxed);
  return set > 0 ? set : CpusAvailable();
}

void SetMaxThreads(int threads) {
  max_threads.store(std::max(1, threads), std::memory_order_relaxed);
}

void ParallelFor(int64_t n, int64_t align, int64_t min_shard,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_shard));
  const int shards = static_cast<int>(std::min<int64_t>(MaxThreads(), by_size));
  if (shards <= 1) {
    fn(0, n);
    return;
  }
  // Equal shards rounded up to `align` elements (cache lines stay whole).
  int64_t shard = (n + shards - 1) / shards;
  shard = (shard + align - 1) / align * align;
  std::mutex mutex;
  std::condition_variable done;
  int pending = 0;
  std::vector<std::function<void()>> tasks;
  for (int64_t first = shard; first < n; first += shard) {
    const int64_t last = std::min(n, first + shard);
    ++pending;
    tasks.emplace_back([&, first, last] {
      fn(first, last);
      std::lock_guard<std::mutex> lock(mutex);
      if (--pending == 0) done.notify_one();
    });
  }
  ThePool().Run(tasks);
  fn(0, std::min(n, shard));
  std::unique_lock<std::mutex> lock(mutex);
  done.wait(lock, [&] { return pending == 0; });
}

}  // namespace grad_reverse
