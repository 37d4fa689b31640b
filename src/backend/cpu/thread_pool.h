// The CPU backend's worker threads. Unlike OpenMP's default (libgomp spins for ~300,000
// iterations after every region, and keeps spinning between the requests of a server), idle
// workers here spin only for a short while (kSpinMicros) and then sleep on a futex
// (std::atomic::wait), so an idle engine takes no CPU from the server, the tests or anything
// else on the machine. The calling thread takes part in every parallel_for.
#pragma once
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace ninfer::cpu {

class ThreadPool {
 public:
  // Spin this long for the next job before sleeping: the regions of one forward follow each
  // other within microseconds, so they are caught spinning; an idle engine sleeps.
  static constexpr int kSpinMicros = 200;

  explicit ThreadPool(int n_threads);  // total threads, the caller included; <= 0: all cores
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls fn(task, thread) for every task in [0, n_tasks), spread over the threads (tasks are
  // taken in order from a shared counter); returns when all have finished. thread is in
  // [0, size()). Not reentrant: fn must not call parallel_for.
  template <class F>
  void parallel_for(int n_tasks, F&& fn) {
    if (n_tasks <= 0) return;
    if (n_tasks == 1 || workers_.empty()) {
      for (int t = 0; t < n_tasks; ++t) fn(t, 0);
      return;
    }
    run(n_tasks, [](void* ctx, int task, int thread) { (*static_cast<F*>(ctx))(task, thread); }, &fn);
  }

 private:
  using TaskFn = void (*)(void* ctx, int task, int thread);
  void run(int n_tasks, TaskFn fn, void* ctx);
  void worker(int index);
  void drain(int thread);

  std::vector<std::thread> workers_;
  std::atomic<uint32_t> generation_{0};  // bumped for every job (and at shutdown)
  std::atomic<int> next_{0};             // next task index of the current job
  std::atomic<int> busy_{0};             // workers still inside the current job
  std::atomic<bool> stop_{false};
  int n_tasks_ = 0;
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
};

}  // namespace ninfer::cpu
