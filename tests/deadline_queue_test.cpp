// DeadlineQueue, no database: entries expire in deadline order on the
// queue's thread, a waiter's new entry replaces its old one, remove() drops
// only the entry it names, stop() drops everything at once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/deadline_queue.hpp"

namespace dlock::details {
namespace {

using namespace std::chrono_literals;
using Clock = DeadlineQueue::Clock;

struct Recorder final : DeadlineQueue::Waiter {
  Recorder(int id_, std::vector<std::pair<int, std::uint64_t>>& log_, std::mutex& m_) : id(id_), log(log_), m(m_) {}
  void expired(std::uint64_t seq) override {
    std::lock_guard<std::mutex> g(m);
    log.emplace_back(id, seq);
  }
  int id;
  std::vector<std::pair<int, std::uint64_t>>& log;
  std::mutex& m;
};

struct DeadlineQueueTest : ::testing::Test {
  DeadlineQueue queue;
  std::vector<std::pair<int, std::uint64_t>> log;
  std::mutex m;
  std::shared_ptr<Recorder> make(int id) { return std::make_shared<Recorder>(id, log, m); }
  std::vector<std::pair<int, std::uint64_t>> wait_for(std::size_t n, std::chrono::milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    for (;;) {
      {
        std::lock_guard<std::mutex> g(m);
        if (log.size() >= n || Clock::now() >= end) return log;
      }
      std::this_thread::sleep_for(1ms);
    }
  }
  ~DeadlineQueueTest() override { queue.stop(); }
};

TEST_F(DeadlineQueueTest, EntriesExpireInDeadlineOrder) {
  const auto now = Clock::now();
  queue.add(make(3), 1, now + 60ms);
  queue.add(make(1), 1, now + 20ms);
  queue.add(make(2), 1, now + 40ms);
  const auto got = wait_for(3, 5s);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].first, 1);
  EXPECT_EQ(got[1].first, 2);
  EXPECT_EQ(got[2].first, 3);
}

TEST_F(DeadlineQueueTest, ANewEntryReplacesTheWaitersOldOne) {
  auto w = make(1);
  queue.add(w, 1, Clock::now() + 20ms);
  queue.add(w, 2, Clock::now() + 40ms);
  const auto got = wait_for(2, 300ms);
  ASSERT_EQ(got.size(), 1u) << "the replaced entry fired too";
  EXPECT_EQ(got[0].second, 2u);
}

TEST_F(DeadlineQueueTest, RemoveDropsOnlyTheEntryItNames) {
  auto a = make(1);
  auto b = make(2);
  queue.add(a, 5, Clock::now() + 30ms);
  queue.add(b, 7, Clock::now() + 30ms);
  queue.remove(a, 5);
  queue.remove(b, 6);  // an older park's number: not this entry
  const auto got = wait_for(2, 300ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], std::make_pair(2, std::uint64_t{7}));
}

TEST_F(DeadlineQueueTest, AnEarlierEntryRearmsTheTimer) {
  queue.add(make(1), 1, Clock::now() + 10s);
  const auto t0 = Clock::now();
  queue.add(make(2), 1, t0 + 20ms);
  const auto got = wait_for(1, 5s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, 2);
  EXPECT_LT(Clock::now() - t0, 3s);
}

TEST(DeadlineQueue, StopDropsPendingEntriesAtOnce) {
  DeadlineQueue queue;
  std::vector<std::pair<int, std::uint64_t>> log;
  std::mutex m;
  auto w = std::make_shared<Recorder>(1, log, m);
  queue.add(w, 1, Clock::now() + 1h);
  const auto t0 = Clock::now();
  queue.stop();
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(w.use_count(), 1) << "the queue still holds its entry's waiter";
}

}  // namespace
}  // namespace dlock::details
