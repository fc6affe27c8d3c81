#include "jit/thread_pool.hpp"

#include <immintrin.h>

#include <chrono>
#include <cstdlib>
#include <new>

namespace tessera {

namespace {

using Clock = std::chrono::steady_clock;

// Spins until done() or the time runs out; true if done() became true.
template <class Done>
bool spin_until(Done done, int spin_us) {
  const auto deadline = Clock::now() + std::chrono::microseconds(spin_us);
  for (int i = 1;; ++i) {
    if (done()) return true;
    _mm_pause();
    if (i % 128 == 0 && Clock::now() > deadline) return false;
  }
}

}  // namespace

Scratch::~Scratch() { std::free(data_); }

void* Scratch::get(std::size_t bytes) {
  if (bytes > size_) {
    std::free(data_);
    size_ = (bytes + 63) / 64 * 64;
    data_ = std::aligned_alloc(64, size_);
    if (!data_) {
      size_ = 0;
      throw std::bad_alloc();
    }
  }
  return data_;
}

ThreadPool::ThreadPool(int workers, int spin_us) : scratch_(static_cast<std::size_t>(workers) + 1), spin_us_(spin_us) {
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { worker_loop(i + 1); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker_loop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    const auto changed = [&] { return stop_.load() || generation_.load() != seen; };
    if (!spin_until(changed, spin_us_)) {
      std::unique_lock lock(mutex_);
      ++sleepers_;
      wake_.wait(lock, changed);
      --sleepers_;
    }
    if (stop_) return;
    seen = generation_.load(std::memory_order_acquire);
    if (index >= job_participants_) continue;
    try {
      (*job_)(index, scratch_[static_cast<std::size_t>(index)].get(job_scratch_));
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1) == 1) {
      std::lock_guard lock(mutex_);
      done_.notify_all();
    }
  }
}

void ThreadPool::run(int participants, std::size_t scratch_bytes, const std::function<void(int, void*)>& fn) {
  std::lock_guard region(region_);
  participants = std::max(1, std::min(participants, max_participants()));
  error_ = nullptr;
  if (participants > 1) {
    job_ = &fn;
    job_scratch_ = scratch_bytes;
    job_participants_ = participants;
    pending_ = participants - 1;
    generation_.fetch_add(1);  // publishes the job (sequentially consistent, paired with sleepers_ below)
    if (sleepers_.load() > 0) {
      std::lock_guard lock(mutex_);
      wake_.notify_all();
    }
  }
  std::exception_ptr error;
  try {
    fn(0, scratch_[0].get(scratch_bytes));
  } catch (...) {
    error = std::current_exception();
  }
  if (participants > 1 && !spin_until([&] { return pending_.load() == 0; }, spin_us_)) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_.load() == 0; });
  }
  std::lock_guard lock(mutex_);
  if (!error) error = error_;
  if (error) std::rethrow_exception(error);
}

}  // namespace tessera
