// Mutual exclusion under load: threads and clients in one process, and a
// stampede on a brand-new name.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "test_env.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::fresh_options;
using test::same_table;

TEST(Concurrency, ThreadsAndClientsIncrementingANonAtomicCounterLoseNothing) {
  const Options options = fresh_options();
  constexpr int kClients = 3;
  constexpr int kThreadsPerClient = 4;
  constexpr int kRounds = 20;
  std::vector<std::unique_ptr<DatabaseDistributedLock>> clients;
  for (int c = 0; c < kClients; ++c) clients.push_back(std::make_unique<DatabaseDistributedLock>(same_table(options)));
  long counter = 0;  // deliberately not atomic: the lock is the only guard
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    for (int t = 0; t < kThreadsPerClient; ++t) {
      threads.emplace_back([&, c] {
        Lock lock = clients[c]->get_lock("counter");
        for (int i = 0; i < kRounds; ++i) {
          std::lock_guard<Lock> guard(lock);
          if (inside.fetch_add(1) != 0) overlap = true;
          const long seen = counter;
          std::this_thread::yield();
          counter = seen + 1;
          inside.fetch_sub(1);
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(counter, kClients * kThreadsPerClient * kRounds);
}

TEST(Concurrency, ThirtyThreadsRacingForABrandNewNameYieldOneWinner) {
  const Options options = fresh_options();
  constexpr int kThreads = 30;
  std::vector<std::unique_ptr<DatabaseDistributedLock>> clients;
  for (int c = 0; c < 3; ++c) clients.push_back(std::make_unique<DatabaseDistributedLock>(same_table(options)));
  for (int round = 0; round < 3; ++round) {
    const std::string name = "brand-new-" + std::to_string(round);
    std::barrier start(kThreads);
    std::atomic<int> winners{0};
    std::atomic<std::uint64_t> fence{0};
    std::atomic<int> errors{0};
    std::atomic<int> tried{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto& client = *clients[t % clients.size()];
        start.arrive_and_wait();
        try {
          const bool got = client.try_lock(name);
          ++tried;
          if (got) {
            ++winners;
            fence = client.fencing_token(name);
            // Hold until every thread has tried.
            EXPECT_TRUE(test::wait_until([&] { return tried.load() == kThreads; }, 60s));
            client.unlock(name);
          }
        } catch (const std::exception&) {
          ++tried;
          ++errors;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(winners.load(), 1) << name;
    EXPECT_EQ(fence.load(), 1u) << "first hold of a new name has token 1";
  }
}

TEST(Concurrency, BlockingWaitersAcrossClientsAllComplete) {
  const Options options = fresh_options();
  std::vector<std::unique_ptr<DatabaseDistributedLock>> clients;
  for (int c = 0; c < 2; ++c) clients.push_back(std::make_unique<DatabaseDistributedLock>(same_table(options)));
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::set<std::uint64_t> fences;
  std::mutex fences_mutex;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto& client = *clients[t % 2];
      for (int i = 0; i < 5; ++i) {
        client.lock("handoff");
        if (inside.fetch_add(1) != 0) overlap = true;
        {
          std::lock_guard<std::mutex> guard(fences_mutex);
          fences.insert(client.fencing_token("handoff"));
        }
        inside.fetch_sub(1);
        client.unlock("handoff");
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(fences.size(), 40u) << "every hold from free gets its own token";
}

}  // namespace
}  // namespace dlock
