// The worker pool: every task runs exactly once, on at most the participants asked for, whether workers and caller
// spin or sleep between jobs; a task's exception reaches the caller and leaves the pool usable.
#include "jit/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tessera {
namespace {

// Runs `tasks` tasks on `participants` and checks each ran once, with scratch of the size asked for.
void expect_each_task_once(ThreadPool& pool, int participants, std::int64_t tasks) {
  std::vector<std::atomic<int>> runs(static_cast<std::size_t>(tasks));
  std::mutex m;
  std::set<std::thread::id> threads;
  pool.run(participants, tasks, 256, [&](std::int64_t t, void* scratch) {
    ASSERT_NE(scratch, nullptr);
    static_cast<char*>(scratch)[255] = 1;  // the scratch is at least as large as asked (ASan/valgrind would see)
    runs[static_cast<std::size_t>(t)].fetch_add(1);
    std::lock_guard lock(m);
    threads.insert(std::this_thread::get_id());
  });
  for (std::int64_t t = 0; t < tasks; ++t) ASSERT_EQ(runs[static_cast<std::size_t>(t)].load(), 1) << "task " << t;
  EXPECT_LE(static_cast<int>(threads.size()), std::max(1, std::min(participants, pool.max_participants())));
}

TEST(ThreadPool, EachTaskRunsOnce) {
  ThreadPool pool(2);
  EXPECT_EQ(pool.max_participants(), 3);
  for (int participants : {1, 2, 3, 5})
    for (std::int64_t tasks : {0, 1, 2, 3, 7, 64, 1000}) expect_each_task_once(pool, participants, tasks);
}

// With no spinning, every job wakes sleeping workers and, when they finish last, a sleeping caller: a lost wake-up
// would hang here (the test's timeout). Tasks of uneven length make either side finish last.
TEST(ThreadPool, SleepingWorkersAndCallerAreWoken) {
  ThreadPool pool(1, /*spin_us=*/0);
  std::atomic<std::int64_t> sum{0};
  for (int job = 0; job < 2000; ++job) {
    pool.run(2, 2, 0, [&](std::int64_t t, void*) {
      if ((job % 3 == 0) == (t == 1)) std::this_thread::sleep_for(std::chrono::microseconds(50));
      sum.fetch_add(t + 1);
    });
  }
  EXPECT_EQ(sum.load(), 2000 * 3);
}

TEST(ThreadPool, TaskExceptionReachesTheCallerAndThePoolStaysUsable) {
  ThreadPool pool(1);
  for (std::int64_t failing : {0, 5, 9}) {
    EXPECT_THROW(pool.run(2, 10, 0,
                          [&](std::int64_t t, void*) {
                            if (t == failing) throw std::runtime_error("task failed");
                          }),
                 std::runtime_error);
    expect_each_task_once(pool, 2, 100);
  }
}

// try_run runs a job where the pool is free and refuses, running nothing, while another job is in it.
TEST(ThreadPool, TryRunRefusesWhileAJobRuns) {
  ThreadPool pool(1, 0);
  std::atomic<int> count{0};
  EXPECT_TRUE(pool.try_run(2, 8, 0, [&](std::int64_t, void*) { count.fetch_add(1); }));
  EXPECT_EQ(count.load(), 8);
  std::atomic<bool> inside{false}, release{false};
  std::thread holder([&] {
    pool.run(1, 1, 0, [&](std::int64_t, void*) {
      inside = true;
      while (!release.load()) std::this_thread::yield();
    });
  });
  while (!inside.load()) std::this_thread::yield();
  EXPECT_FALSE(pool.try_run(2, 8, 0, [&](std::int64_t, void*) { count.fetch_add(100); }));
  release = true;
  holder.join();
  EXPECT_EQ(count.load(), 8);
  EXPECT_TRUE(pool.try_run(2, 4, 0, [&](std::int64_t, void*) { count.fetch_add(1); }));
  EXPECT_EQ(count.load(), 12);
}

// Jobs submitted from several threads at once run one after another, each complete.
TEST(ThreadPool, ConcurrentCallersAreSerialised) {
  ThreadPool pool(1);
  std::vector<std::thread> callers;
  std::atomic<int> complete{0};
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int job = 0; job < 200; ++job) {
        std::atomic<int> count{0};
        pool.run(2, 16, 64, [&](std::int64_t, void*) { count.fetch_add(1); });
        if (count.load() == 16) complete.fetch_add(1);
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(complete.load(), 3 * 200);
}

}  // namespace
}  // namespace tessera
