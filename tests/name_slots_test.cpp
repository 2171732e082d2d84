// NameSlots, no database: the lowest free slot of a name is handed out
// and reused; once more names than its capacity have entries, a name left
// with no slot in use is dropped (and its rows made sure of again on its
// next use), so a client reading ever new names does not grow for ever.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "base/name_slots.hpp"

namespace dlock::details {
namespace {

TEST(NameSlots, TheLowestFreeSlotIsReusedAndKeepsItsRow) {
  NameSlots slots;
  const auto first = slots.allocate("n");
  EXPECT_EQ(first.index, 0u);
  EXPECT_FALSE(first.known);
  slots.mark_known("n", 0);
  const auto second = slots.allocate("n");
  EXPECT_EQ(second.index, 1u) << "slot 0 is in use";
  slots.release("n", 0);
  const auto again = slots.allocate("n");
  EXPECT_EQ(again.index, 0u);
  EXPECT_TRUE(again.known) << "a released slot's row is reused";
  EXPECT_EQ(slots.in_use(), 2u);
}

TEST(NameSlots, ASlotKeptBusyIsNotReusedUntilItsTimeIsOver) {
  NameSlots slots(1);
  EXPECT_EQ(slots.allocate("n").index, 0u);
  slots.release("n", 0, std::chrono::hours(1));  // kept taken (unlock_at_least)
  EXPECT_EQ(slots.allocate("n").index, 1u) << "a kept slot was handed out again";
  slots.release("n", 1);
  EXPECT_EQ(slots.in_use(), 0u);
  // Past its capacity the name is not dropped while a slot is kept.
  EXPECT_EQ(slots.allocate("m").index, 0u);
  slots.release("m", 0);
  EXPECT_EQ(slots.names(), 1u);
  slots.release("n", 0, std::chrono::hours(1));
  EXPECT_EQ(slots.names(), 1u) << "the name was dropped with a slot still kept";
  EXPECT_EQ(slots.allocate("n").index, 1u) << "slot 1, released plainly, is free again";
}

TEST(NameSlots, PastItsCapacityANameWithNoSlotInUseIsDropped) {
  NameSlots slots(2);
  for (const char* name : {"a", "b"}) {
    (void)slots.allocate(name);
    slots.mark_known(name, 0);
    slots.release(name, 0);
  }
  EXPECT_EQ(slots.names(), 2u) << "within capacity, idle names keep their entries";
  (void)slots.allocate("held");  // in use: never dropped
  (void)slots.allocate("c");
  slots.mark_known("c", 0);
  slots.release("c", 0);
  EXPECT_EQ(slots.names(), 3u) << "c had no slot in use and the names were over capacity";
  EXPECT_FALSE(slots.allocate("c").known) << "a dropped name makes sure of its row again";
  slots.release("held", 0);
  EXPECT_EQ(slots.names(), 3u);
  EXPECT_EQ(slots.in_use(), 1u);
}

}  // namespace
}  // namespace dlock::details
