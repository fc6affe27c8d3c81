// The one worker pool a Runtime owns: runs a CPU kernel's grid of macro-tiles on several threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

// Per-participant scratch memory, 64-byte aligned, kept between calls.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch();
  void* get(std::size_t bytes);

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// Each participant owns a contiguous share of the tasks, so that repeated calls touch the same memory from the same
// core; one that runs out steals from the others' shares, so a late worker (its core taken by the hypervisor or
// another process) delays nothing. The caller takes part.
class ThreadPool {
 public:
  using Task = std::function<void(std::int64_t task, void* scratch)>;

  // `workers` threads besides the caller. After a job, workers spin for `spin_us` before they sleep, so that
  // back-to-back small kernels do not pay a futex wake-up each (tens of microseconds on a VM).
  // pin: place workers on CPUs other than the caller's for each job (see place_workers).
  explicit ThreadPool(int workers, int spin_us = 200, bool pin = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int max_participants() const { return static_cast<int>(threads_.size()) + 1; }

  // Runs task(i, scratch) for i in [0, tasks) on up to `participants` threads (the caller is one) and returns when
  // all are done; the first exception thrown is rethrown. Calls from several threads run one after another.
  void run(int participants, std::int64_t tasks, std::size_t scratch_bytes, const Task& task);
  // The same where no other call is running; false (and nothing run) where one is.
  bool try_run(int participants, std::int64_t tasks, std::size_t scratch_bytes, const Task& task);

 private:
  void run_locked(int participants, std::int64_t tasks, std::size_t scratch_bytes, const Task& task);
  void worker_loop(int index);
  // Pins the workers of this job to CPUs other than the caller's. Unpinned, a worker woken after a pause is placed
  // on the waker's CPU and shares it with the caller until the load balancer moves it, which on this kind of VM
  // can take a whole benchmark sample (128³ on 2 threads ran at the 1-thread speed for 20 ms at a time).
  void place_workers();
  void work(int participant, void* scratch);  // runs its share, then steals until no task is left

  std::vector<std::thread> threads_;
  std::vector<Scratch> scratch_;
  const int spin_us_;
  const bool pin_;
  const std::vector<int> cpus_;  // the CPUs the process may use
  std::vector<int> pinned_;      // CPU each worker is pinned to (-1: not yet)
  std::mutex region_;            // one parallel region at a time
  std::mutex mutex_;             // guards sleeping and error_
  std::condition_variable wake_, done_;
  // The open job; its fields are published by open_ (sequentially consistent).
  const Task* task_ = nullptr;
  std::int64_t tasks_ = 0;
  std::size_t scratch_bytes_ = 0;
  int participants_ = 0;
  // Each on its own cache line: a claim counter is written on every task, the others are spun on.
  struct alignas(64) Share {
    std::atomic<std::int64_t> next{0};
    std::int64_t end = 0;
  };
  std::vector<Share> shares_;
  alignas(64) std::atomic<bool> open_{false};
  alignas(64) std::atomic<int> active_{0};  // workers inside the open job
  alignas(64) std::atomic<std::uint64_t> generation_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  // The caller is asleep on done_ (it spun past spin_us): only then does the last worker out take the mutex to
  // wake it. Taking it on every job raced the spinning caller, which saw active_ reach 0, locked the mutex for
  // error_ while the worker still held it, and slept in the kernel until woken.
  alignas(64) std::atomic<bool> caller_asleep_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};  // error_ is set; read without the mutex on the way out of run()
  std::exception_ptr error_;
};

}  // namespace tessera
