// HoldRegistry::on_session, no database: which live holds a ring of one
// pooled session's bell has to move to its next bell.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/holds.hpp"

namespace dlock::details {
namespace {

// A lock's key: the registry keeps every kind alike.
NameKey K(std::string_view name) { return NameKey(Kind::kLock, name); }

void record(HoldRegistry& holds, const std::string& name, std::uint64_t owner, std::uint64_t hold_id, unsigned count,
            bool watchdog, SteadyTime deadline, std::uint64_t fence, std::uint64_t session, Kind kind = Kind::kLock) {
  Hold h;
  h.hold_id = hold_id;
  h.count = count;
  h.watchdog = watchdog;
  h.deadline = deadline;
  h.fence = fence;
  h.bell_session = session;
  holds.record_fresh(NameKey(kind, name), owner, h);
}

std::vector<std::string> names_on(const HoldRegistry& holds, std::uint64_t session) {
  std::vector<std::string> names;
  for (const auto& h : holds.on_session(session)) names.push_back(h.key.name);
  std::sort(names.begin(), names.end());
  return names;
}

TEST(HoldRegistry, OnSessionListsTheLiveHoldsOfThatSessionOnly) {
  HoldRegistry holds;
  record(holds, "a", 1, 11, 1, true, {}, 0, 7);
  record(holds, "b", 1, 12, 1, true, {}, 0, 7);
  record(holds, "c", 2, 13, 1, true, {}, 0, 8);
  record(holds, "d", 2, 14, 1, true, {}, 0, 0);  // no bell
  EXPECT_EQ(names_on(holds, 7), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(names_on(holds, 8), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(names_on(holds, 0).empty());
  const auto b = holds.on_session(7);
  const auto it = std::find_if(b.begin(), b.end(), [](const HeldRow& h) { return h.key.name == "b"; });
  ASSERT_NE(it, b.end());
  EXPECT_EQ(it->hold_id, 12u);
}

TEST(HoldRegistry, OnSessionForgetsReleasedLostAndReplacedHolds) {
  HoldRegistry holds;
  record(holds, "a", 1, 11, 2, true, {}, 0, 7);
  record(holds, "b", 1, 12, 1, true, {}, 0, 7);
  record(holds, "c", 1, 13, 1, true, {}, 0, 7);
  ASSERT_TRUE(holds.take_one(K("a"), 1));  // count 2 -> 1: still held
  EXPECT_EQ(names_on(holds, 7), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_TRUE(holds.take_one(K("a"), 1));  // released
  EXPECT_EQ(names_on(holds, 7), (std::vector<std::string>{"b", "c"}));
  const auto b = holds.find(K("b"), 1);
  ASSERT_TRUE(b);
  ASSERT_TRUE(holds.mark_lost(K("b"), 1, b->generation));  // lost: rung and forgotten
  EXPECT_EQ(names_on(holds, 7), (std::vector<std::string>{"c"}));
  record(holds, "c", 1, 23, 1, true, {}, 0, 9);  // a new hold in its place, on another session
  EXPECT_TRUE(names_on(holds, 7).empty());
  EXPECT_EQ(names_on(holds, 9), (std::vector<std::string>{"c"}));
}

TEST(HoldRegistry, ManyNamesComingAndGoingLeaveOnlyTheLiveHolds) {
  // Names whose last hold ended are kept for a while and then swept; the
  // session index points into the name entries, so it must survive both
  // the sweeps and the rehashing of thousands of names.
  HoldRegistry holds;
  record(holds, "kept", 1, 1, 1, true, {}, 0, 7);
  for (std::uint64_t i = 0; i < 5000; ++i) {
    const std::string name = "churn-" + std::to_string(i);
    record(holds, name, 2, 100 + i, 1, true, {}, 0, 7);
    if (i % 3 == 0) record(holds, name, 3, 20000 + i, 1, false, {}, 0, 8);
    ASSERT_TRUE(holds.take_one(K(name), 2));
    if (i % 3 == 0) {
      ASSERT_TRUE(holds.take_one(K(name), 3));
    }
  }
  EXPECT_EQ(holds.size(), 1u);
  EXPECT_EQ(names_on(holds, 7), (std::vector<std::string>{"kept"}));
  EXPECT_TRUE(names_on(holds, 8).empty());
  ASSERT_EQ(holds.live().size(), 1u);
  EXPECT_EQ(holds.live()[0].key.name, "kept");
  ASSERT_EQ(holds.watchdog_holds().size(), 1u);
  EXPECT_FALSE(holds.find(K("churn-3"), 2));
  // A name taken again after its entry was swept is a new hold.
  record(holds, "churn-0", 2, 9, 1, true, {}, 0, 7);
  EXPECT_EQ(names_on(holds, 7), (std::vector<std::string>{"churn-0", "kept"}));
  EXPECT_EQ(holds.size(), 2u);
}

TEST(HoldRegistry, TheLiveDeadlineIsThatOfTheHoldRecordedLast) {
  const auto later = std::chrono::steady_clock::now() + std::chrono::hours(1);
  HoldRegistry holds;
  record(holds, "n", 1, 11, 1, true, later, 0, 0);
  record(holds, "n", 2, 12, 1, true, later + std::chrono::minutes(1), 0, 0);
  ASSERT_TRUE(holds.live_deadline(K("n")));
  EXPECT_EQ(*holds.live_deadline(K("n")), later + std::chrono::minutes(1));
  const auto view = holds.view(K("n"), 1);
  ASSERT_TRUE(view.own);
  EXPECT_EQ(view.own->hold_id, 11u);
  // The first owner's release leaves the last-recorded hold live.
  ASSERT_TRUE(holds.take_one(K("n"), 1));
  EXPECT_TRUE(holds.live_deadline(K("n")));
  EXPECT_FALSE(holds.view(K("n"), 1).own);
  ASSERT_TRUE(holds.take_one(K("n"), 2));
  EXPECT_FALSE(holds.live_deadline(K("n")));
  EXPECT_FALSE(holds.take_one(K("n"), 2));
  // A lost hold is no live hold, but stays registered.
  record(holds, "n", 3, 13, 1, true, later, 0, 0);
  const auto h = holds.find(K("n"), 3);
  ASSERT_TRUE(h);
  ASSERT_TRUE(holds.mark_lost(K("n"), 3, h->generation));
  EXPECT_FALSE(holds.live_deadline(K("n")));
  EXPECT_TRUE(holds.find(K("n"), 3));
  EXPECT_EQ(holds.size(), 1u);
}

TEST(HoldRegistry, KindsOfOneNameAreKeptApart) {
  // The lock, the semaphore and both sides of the read-write lock "n" are
  // four holds: each kind is a namespace of its own.
  HoldRegistry holds;
  record(holds, "n", 1, 11, 1, true, {}, 0, 7, Kind::kLock);
  record(holds, "n", 1, 12, 1, true, {}, 0, 7, Kind::kWrite);
  record(holds, "n", 1, 13, 1, true, {}, 0, 7, Kind::kRead);
  EXPECT_EQ(holds.find(NameKey(Kind::kWrite, "n"), 1)->hold_id, 12u);
  EXPECT_FALSE(holds.find(NameKey(Kind::kSemaphore, "n"), 1));
  ASSERT_TRUE(holds.take_one(NameKey(Kind::kRead, "n"), 1));
  EXPECT_TRUE(holds.find(NameKey(Kind::kLock, "n"), 1));
  EXPECT_TRUE(holds.find(NameKey(Kind::kWrite, "n"), 1));
  EXPECT_EQ(holds.size(), 2u);
  for (const auto& h : holds.live()) EXPECT_NE(h.key.kind, Kind::kRead);
}

}  // namespace
}  // namespace dlock::details

namespace dlock::details {
namespace {

// The deadline index the client's clock counts losses by, and the rule that
// a hold past its deadline is never extended again.
TEST(HoldRegistryDeadlines, DueHoldsComeInDeadlineOrderAndTheEarliestIsTold) {
  HoldRegistry holds;
  std::vector<SteadyTime> told;
  holds.on_earlier_deadline([&](SteadyTime t) { told.push_back(t); });
  const auto now = std::chrono::steady_clock::now();
  record(holds, "late", 1, 11, 1, true, now + std::chrono::hours(1), 0, 0);
  record(holds, "soon", 2, 12, 1, false, now - std::chrono::milliseconds(1), 0, 0);
  EXPECT_EQ(holds.next_deadline(), now - std::chrono::milliseconds(1));
  ASSERT_EQ(told.size(), 2u);
  const auto due = holds.due(now);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].key.name, "soon");
  // Lost: out of the index; released: too.
  ASSERT_TRUE(holds.mark_lost(K("soon"), 2, due[0].generation).has_value());
  EXPECT_TRUE(holds.due(now).empty());
  EXPECT_EQ(holds.next_deadline(), now + std::chrono::hours(1));
  ASSERT_TRUE(holds.take_one(K("late"), 1).has_value());
  EXPECT_EQ(holds.next_deadline(), SteadyTime::max());
}

TEST(HoldRegistryDeadlines, AHoldPastItsDeadlineIsNeverExtendedOrReentered) {
  HoldRegistry holds;
  const auto now = std::chrono::steady_clock::now();
  record(holds, "n", 1, 11, 1, true, now - std::chrono::milliseconds(5), 0, 0);
  const auto refs = holds.watchdog_holds();
  ASSERT_EQ(refs.size(), 1u);
  // A renewal whose answer came after the deadline.
  holds.extend(refs, now + std::chrono::seconds(30));
  EXPECT_EQ(holds.find(K("n"), 1)->deadline, now - std::chrono::milliseconds(5)) << "brought back";
  EXPECT_FALSE(holds.record_reentrant(K("n"), 1, refs[0].generation, 2, true, now + std::chrono::seconds(30)));
  EXPECT_EQ(holds.due(std::chrono::steady_clock::now()).size(), 1u) << "still due: the clock counts it lost";
  // One still within its deadline is extended.
  record(holds, "m", 1, 12, 1, true, now + std::chrono::seconds(5), 0, 0);
  std::vector<HoldRef> m;
  for (const auto& r : holds.watchdog_holds())
    if (r.key.name == "m") m.push_back(r);
  holds.extend(m, now + std::chrono::seconds(30));
  EXPECT_EQ(holds.find(K("m"), 1)->deadline, now + std::chrono::seconds(30));
  EXPECT_EQ(holds.next_deadline(), now - std::chrono::milliseconds(5));
}

// A fence read that comes back after the hold was counted lost: the loss
// was told without a fence, so no token may be handed out for it now.
TEST(HoldRegistry, AFenceReadBackAfterTheLossIsNotLearned) {
  HoldRegistry holds;
  const auto now = std::chrono::steady_clock::now();
  record(holds, "n", 1, 11, 1, true, now + std::chrono::seconds(30), 0, 0);
  const auto h = holds.find(K("n"), 1);
  ASSERT_TRUE(h.has_value());
  ASSERT_TRUE(holds.mark_lost(K("n"), 1, h->generation).has_value());
  EXPECT_FALSE(holds.learn(K("n"), 1, h->generation, 42, 0));
  EXPECT_EQ(holds.find(K("n"), 1)->fence, 0u);
  // A live one learns it.
  record(holds, "m", 1, 12, 1, true, now + std::chrono::seconds(30), 0, 0);
  const auto m = holds.find(K("m"), 1);
  EXPECT_TRUE(holds.learn(K("m"), 1, m->generation, 43, 0));
  EXPECT_EQ(holds.find(K("m"), 1)->fence, 43u);
  // Another generation's read (a hold taken again since) is not learned.
  EXPECT_FALSE(holds.learn(K("m"), 1, m->generation + 1, 44, 0));
}

}  // namespace
}  // namespace dlock::details
