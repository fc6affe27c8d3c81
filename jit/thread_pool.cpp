#include "jit/thread_pool.hpp"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <new>

namespace tessera {

namespace {

using Clock = std::chrono::steady_clock;

// Spins until done() or the time runs out; true if done() became true. It yields now and then: when the
// scheduler has put the thread it waits for on the same core, spinning alone would only delay it.
template <class Done>
bool spin_until(Done done, int spin_us) {
  const auto deadline = Clock::now() + std::chrono::microseconds(spin_us);
  for (int i = 1;; ++i) {
    if (done()) return true;
    _mm_pause();
    if (i % 64 == 0) {
      if (Clock::now() > deadline) return false;
      sched_yield();
    }
  }
}

// The CPUs this process may run on.
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  return cpus;
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

ThreadPool::ThreadPool(int workers, int spin_us, bool pin)
    : scratch_(static_cast<std::size_t>(workers) + 1),
      spin_us_(spin_us),
      pin_(pin),
      cpus_(allowed_cpus()),
      pinned_(static_cast<std::size_t>(workers) + 1, -1),
      shares_(static_cast<std::size_t>(workers) + 1) {
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

void ThreadPool::work(int participant, void* scratch) {
  try {
    for (int q = 0; q < participants_; ++q) {
      Share& share = shares_[static_cast<std::size_t>((participant + q) % participants_)];
      for (std::int64_t i = share.next.fetch_add(1); i < share.end; i = share.next.fetch_add(1)) (*task_)(i, scratch);
    }
  } catch (...) {
    for (int q = 0; q < participants_; ++q) shares_[static_cast<std::size_t>(q)].next = tasks_;  // hand out no more
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
    failed_ = true;
  }
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
    seen = generation_.load();
    // Join only a job that is still open; the caller closes it before it waits for active_ to drain.
    ++active_;
    if (open_.load() && index < participants_)
      work(index, scratch_[static_cast<std::size_t>(index)].get(scratch_bytes_));
    // Sequentially consistent, as the caller's store to caller_asleep_ and its load of active_: either the caller
    // sees 0 before it sleeps, or this sees it asleep and wakes it under the mutex it waits with.
    if (--active_ == 0 && caller_asleep_.load()) {
      std::lock_guard lock(mutex_);
      done_.notify_all();
    }
  }
}

void ThreadPool::place_workers() {
  if (cpus_.size() < 2) return;
  const int caller = sched_getcpu();
  std::size_t next = 0;
  for (int w = 1; w < participants_; ++w) {
    if (cpus_[next % cpus_.size()] == caller) ++next;
    const int cpu = cpus_[next++ % cpus_.size()];
    if (pinned_[static_cast<std::size_t>(w)] == cpu) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (pthread_setaffinity_np(threads_[static_cast<std::size_t>(w - 1)].native_handle(), sizeof one, &one) == 0)
      pinned_[static_cast<std::size_t>(w)] = cpu;
  }
}

void ThreadPool::run(int participants, std::int64_t tasks, std::size_t scratch_bytes, const Task& task) {
  std::lock_guard region(region_);
  run_locked(participants, tasks, scratch_bytes, task);
}

bool ThreadPool::try_run(int participants, std::int64_t tasks, std::size_t scratch_bytes, const Task& task) {
  std::unique_lock region(region_, std::try_to_lock);
  if (!region) return false;
  run_locked(participants, tasks, scratch_bytes, task);
  return true;
}

void ThreadPool::run_locked(int participants, std::int64_t tasks, std::size_t scratch_bytes, const Task& task) {
  error_ = nullptr;
  failed_ = false;
  task_ = &task;
  tasks_ = tasks;
  scratch_bytes_ = scratch_bytes;
  participants_ = std::max(1, std::min(participants, max_participants()));
  for (int p = 0; p < participants_; ++p) {
    Share& share = shares_[static_cast<std::size_t>(p)];
    share.end = tasks * (p + 1) / participants_;
    share.next = tasks * p / participants_;
  }
  if (participants_ > 1) {
    if (pin_) place_workers();
    open_ = true;
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) {
      std::lock_guard lock(mutex_);
      wake_.notify_all();
    }
  }
  work(0, scratch_[0].get(scratch_bytes));
  if (participants_ > 1) {
    open_ = false;
    if (!spin_until([&] { return active_.load() == 0; }, spin_us_)) {
      std::unique_lock lock(mutex_);
      caller_asleep_ = true;
      done_.wait(lock, [&] { return active_.load() == 0; });
      caller_asleep_ = false;
    }
  }
  if (failed_.load()) {
    std::lock_guard lock(mutex_);
    std::rethrow_exception(error_);
  }
}

}  // namespace tessera
