#include "jit/thread_pool.hpp"

#include <cstdlib>
#include <new>

namespace tessera {

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

ThreadPool::ThreadPool(int workers) : scratch_(static_cast<std::size_t>(workers) + 1) {
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
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= job_participants_) continue;
    const auto* job = job_;
    const std::size_t bytes = job_scratch_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*job)(index, scratch_[static_cast<std::size_t>(index)].get(bytes));
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    if (--pending_ == 0) done_.notify_all();
  }
}

void ThreadPool::run(int participants, std::size_t scratch_bytes, const std::function<void(int, void*)>& fn) {
  std::lock_guard region(region_);
  participants = std::max(1, std::min(participants, max_participants()));
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_scratch_ = scratch_bytes;
    job_participants_ = participants;
    pending_ = participants - 1;
    error_ = nullptr;
    ++generation_;
  }
  if (participants > 1) wake_.notify_all();
  std::exception_ptr error;
  try {
    fn(0, scratch_[0].get(scratch_bytes));
  } catch (...) {
    error = std::current_exception();
  }
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  if (!error) error = error_;
  if (error) std::rethrow_exception(error);
}

}  // namespace tessera
