// WorkerThreads, no database: the workers run every job, including jobs
// posted by jobs while joining; a job posted while a worker spins is taken
// without waking another; and a poster is done with the queue once its job
// can have run, so the owner may destroy the queue then (the client's
// shutdown does, while a bell thread may still be returning from post);
// jobs deferred in a scope run on its worker when the scope closes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/worker_threads.hpp"

namespace dlock::details {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(WorkerThreads, JoinRunsEveryJobIncludingOnesPostedByJobs) {
  std::atomic<int> ran{0};
  WorkerThreads workers(3, 300us);
  for (int i = 0; i < 100; ++i) {
    workers.post([&] {
      ++ran;
      workers.post([&] { ++ran; });
    });
  }
  workers.join();
  EXPECT_EQ(ran.load(), 200);
}

TEST(WorkerThreads, MoveOnlyJobs) {
  WorkerThreads workers(1, 0us);
  std::promise<int> p;
  auto f = p.get_future();
  auto value = std::make_unique<int>(7);
  workers.post([value = std::move(value), &p] { p.set_value(*value); });
  EXPECT_EQ(f.get(), 7);
}

template <class Condition>
bool eventually(Condition condition) {
  const auto deadline = Clock::now() + 10s;
  while (!condition()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(WorkerThreads, AJobPostedWhileAWorkerSpinsRunsThereAndWakesNobody) {
  WorkerThreads workers(4, std::chrono::microseconds(2'000'000));
  ASSERT_TRUE(eventually([&] { return workers.sleeping() == 4; }));
  std::promise<std::thread::id> first;
  workers.post([&] { first.set_value(std::this_thread::get_id()); });
  const auto ran_first = first.get_future().get();
  EXPECT_EQ(workers.wakeups(), 1u);
  // The worker that ran it spins now; the other three sleep.
  ASSERT_TRUE(eventually([&] { return workers.spinning() && workers.sleeping() == 3; }));
  std::promise<std::thread::id> second;
  workers.post([&] { second.set_value(std::this_thread::get_id()); });
  EXPECT_EQ(second.get_future().get(), ran_first);
  EXPECT_EQ(workers.wakeups(), 1u) << "a sleeping worker was woken though one was spinning";
}

TEST(WorkerThreads, WithoutASpinnerAPostWakesASleepingWorker) {
  WorkerThreads workers(2, 0us);
  ASSERT_TRUE(eventually([&] { return workers.sleeping() == 2; }));
  std::promise<void> ran;
  workers.post([&] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_EQ(workers.wakeups(), 1u);
}

TEST(WorkerThreads, APosterIsDoneWithTheQueueOnceItsJobCanHaveRun) {
  // The client's shutdown waits for the last operation to end, then joins
  // and destroys the workers; the job that ends it may have been posted by
  // a thread that is not a worker (a bell thread waking a parked wait),
  // which must not touch the queue after the job could have run. A miss is
  // a race between post()'s notify and the condition variable's destructor
  // (ThreadSanitizer reports it; scripts/test.sh --sanitize thread).
  for (int round = 0; round < 200; ++round) {
    auto workers = std::make_unique<WorkerThreads>(1, 0us);
    ASSERT_TRUE(eventually([&] { return workers->sleeping() == 1; }));
    WorkerThreads* queue = workers.get();
    std::promise<void> ran;
    std::thread poster([queue, &ran] { queue->post([&ran] { ran.set_value(); }); });
    ran.get_future().wait();
    workers.reset();  // joins, then destroys the mutex and condition variable
    poster.join();
  }
}

// defer() inside a Deferring scope: the deferred jobs run on the same
// worker when the scope closes, in order, without waking a sleeping worker;
// outside a scope, and from the deferred jobs themselves (the scope is
// closed while they run), defer() declines.
TEST(WorkerThreads, JobsDeferredInAScopeRunOnTheSameWorkerWhenItCloses) {
  WorkerThreads workers(2, 0us);
  ASSERT_TRUE(eventually([&] { return workers.sleeping() == 2; }));
  std::mutex m;
  std::vector<std::pair<std::string, std::thread::id>> ran;
  const auto note = [&](const char* what) {
    std::lock_guard<std::mutex> g(m);
    ran.emplace_back(what, std::this_thread::get_id());
  };
  std::promise<void> done;
  workers.post([&] {
    note("job");
    EXPECT_FALSE(workers.defer([] {})) << "deferred without a scope";
    {
      WorkerThreads::Deferring scope;
      EXPECT_TRUE(workers.defer([&] { note("deferred"); }));
      EXPECT_TRUE(workers.defer([&] {
        note("deferred 2");
        EXPECT_FALSE(workers.defer([] {})) << "deferred from a deferred job";
      }));
      note("scope open");
      scope.close();
      note("scope closed");
      EXPECT_FALSE(workers.defer([] {})) << "deferred after the scope closed";
    }
    done.set_value();
  });
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  workers.join();
  ASSERT_EQ(ran.size(), 5u);
  EXPECT_EQ(ran[0].first, "job");
  EXPECT_EQ(ran[1].first, "scope open");
  EXPECT_EQ(ran[2].first, "deferred");
  EXPECT_EQ(ran[3].first, "deferred 2");
  EXPECT_EQ(ran[4].first, "scope closed");
  for (const auto& [what, thread] : ran) EXPECT_EQ(thread, ran[0].second) << what << " ran on another thread";
  EXPECT_EQ(workers.wakeups(), 1u) << "a deferred job woke a sleeping worker";
}

TEST(WorkerThreads, OnlyTheirOwnWorkersDefer) {
  WorkerThreads workers(1, 0us);
  WorkerThreads others(1, 0us);
  bool ran = false;
  {
    WorkerThreads::Deferring scope;  // not a worker at all: a no-op
    EXPECT_FALSE(workers.defer([&] { ran = true; }));
  }
  std::promise<bool> deferred_by_another;
  others.post([&] {
    WorkerThreads::Deferring scope;
    deferred_by_another.set_value(workers.defer([&] { ran = true; }));
  });
  EXPECT_FALSE(deferred_by_another.get_future().get());
  others.join();
  workers.join();
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace dlock::details
