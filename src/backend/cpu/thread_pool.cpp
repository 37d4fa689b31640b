#include "backend/cpu/thread_pool.h"

#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ninfer::cpu {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Waits until `a` differs from `old`: spins for ThreadPool::kSpinMicros, then sleeps.
template <class T>
void wait_change(const std::atomic<T>& a, T old) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (a.load(std::memory_order_acquire) != old) return;
    cpu_relax();
    if ((i & 63) == 63 &&
        std::chrono::steady_clock::now() - t0 > std::chrono::microseconds(ThreadPool::kSpinMicros))
      break;
  }
  while (a.load(std::memory_order_acquire) == old) a.wait(old, std::memory_order_acquire);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::drain(int thread) {
  for (int t; (t = next_.fetch_add(1, std::memory_order_relaxed)) < n_tasks_;) fn_(ctx_, t, thread);
}

void ThreadPool::run(int n_tasks, TaskFn fn, void* ctx) {
  n_tasks_ = n_tasks;
  fn_ = fn;
  ctx_ = ctx;
  next_.store(0, std::memory_order_relaxed);
  busy_.store(int(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);  // publishes the job
  generation_.notify_all();
  drain(0);
  for (int b; (b = busy_.load(std::memory_order_acquire)) != 0;) wait_change(busy_, b);
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  for (;;) {
    wait_change(generation_, seen);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    drain(index);
    if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) busy_.notify_one();
  }
}

}  // namespace ninfer::cpu
