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

void ParallelFor(int64_t n, int64_t block, int64_t min_shard,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_shard));
  const int threads = static_cast<int>(std::min<int64_t>(MaxThreads(), by_size));
  if (threads <= 1) {
    fn(0, n);
    return;
  }
  // The caller and threads - 1 workers take blocks from one counter; the
  // caller returns once every worker is done (a late one finds none left).
  std::atomic<int64_t> next{0};
  std::mutex mutex;
  std::condition_variable done;
  int pending = threads - 1;
  std::vector<std::function<void()>> tasks(threads - 1, [&] {
    TakeBlocks(next, n, block, fn);
    std::lock_guard<std::mutex> lock(mutex);
    if (--pending == 0) done.notify_one();
  });
  ThePool().Run(tasks);
  TakeBlocks(next, n, block, fn);
  std::unique_lock<std::mutex> lock(mutex);
  done.wait(lock, [&] { return pending == 0; });
}

}  // namespace grad_reverse
