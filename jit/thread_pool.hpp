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

class ThreadPool {
 public:
  // `workers` threads besides the caller. After a job, workers spin for `spin_us` before they sleep, so that
  // back-to-back small kernels do not pay a futex wake-up each (tens of microseconds on a VM).
  explicit ThreadPool(int workers, int spin_us = 200);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int max_participants() const { return static_cast<int>(threads_.size()) + 1; }

  // Runs fn(participant, scratch) on `participants` threads (the caller is participant 0) and returns when all
  // are done; the first exception thrown is rethrown. Calls from several threads run one after another.
  void run(int participants, std::size_t scratch_bytes, const std::function<void(int, void*)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> threads_;
  std::vector<Scratch> scratch_;
  const int spin_us_;
  std::mutex region_;  // one parallel region at a time
  std::mutex mutex_;   // guards sleeping and error_
  std::condition_variable wake_, done_;
  // The job, published by the release increment of generation_.
  const std::function<void(int, void*)>* job_ = nullptr;
  std::size_t job_scratch_ = 0;
  int job_participants_ = 0;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
};

}  // namespace tessera
