// HoldRegistry::on_session, no database: which live holds a ring of one
// pooled session's bell has to move to its next bell.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/hold_registry.hpp"

namespace dlock::details {
namespace {

std::vector<std::string> names_on(const HoldRegistry& holds, std::uint64_t session) {
  std::vector<std::string> names;
  for (const auto& h : holds.on_session(session)) names.push_back(h.name);
  std::sort(names.begin(), names.end());
  return names;
}

TEST(HoldRegistry, OnSessionListsTheLiveHoldsOfThatSessionOnly) {
  HoldRegistry holds;
  holds.record_fresh("a", 1, 11, 1, true, {}, 0, 7);
  holds.record_fresh("b", 1, 12, 1, true, {}, 0, 7);
  holds.record_fresh("c", 2, 13, 1, true, {}, 0, 8);
  holds.record_fresh("d", 2, 14, 1, true, {}, 0, 0);  // no bell
  EXPECT_EQ(names_on(holds, 7), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(names_on(holds, 8), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(names_on(holds, 0).empty());
  const auto b = holds.on_session(7);
  const auto it = std::find_if(b.begin(), b.end(), [](const NamedHold& h) { return h.name == "b"; });
  ASSERT_NE(it, b.end());
  EXPECT_EQ(it->hold_id, 12u);
}

TEST(HoldRegistry, OnSessionForgetsReleasedLostAndReplacedHolds) {
  HoldRegistry holds;
  holds.record_fresh("a", 1, 11, 2, true, {}, 0, 7);
  holds.record_fresh("b", 1, 12, 1, true, {}, 0, 7);
  holds.record_fresh("c", 1, 13, 1, true, {}, 0, 7);
  ASSERT_TRUE(holds.take_one("a", 1));  // count 2 -> 1: still held
  EXPECT_EQ(names_on(holds, 7), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_TRUE(holds.take_one("a", 1));  // released
  EXPECT_EQ(names_on(holds, 7), (std::vector<std::string>{"b", "c"}));
  const auto b = holds.find("b", 1);
  ASSERT_TRUE(b);
  ASSERT_TRUE(holds.mark_lost("b", 1, b->generation));  // lost: rung and forgotten
  EXPECT_EQ(names_on(holds, 7), (std::vector<std::string>{"c"}));
  holds.record_fresh("c", 1, 23, 1, true, {}, 0, 9);  // a new hold in its place, on another session
  EXPECT_TRUE(names_on(holds, 7).empty());
  EXPECT_EQ(names_on(holds, 9), (std::vector<std::string>{"c"}));
}

}  // namespace
}  // namespace dlock::details
