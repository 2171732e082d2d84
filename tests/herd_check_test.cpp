// The torture checker's herd check (torture/herd_check.hpp), on made-up
// histories.
#include <gtest/gtest.h>

#include "torture/herd_check.hpp"

namespace dlock::torture {
namespace {

constexpr std::int64_t kBound = 8'000'000;

TEST(HerdCheck, APromptTakeAfterEachReleaseIsFine) {
  HerdHistory h;
  h.waited("h0", 0, 10'000'000);
  h.acquired("h0", 1'000'000);
  h.let_go("h0", 2'000'000);
  h.acquired("h0", 2'050'000);  // 50 ms later: a wake
  h.let_go("h0", 3'000'000);
  h.acquired("h0", 3'900'000);  // 900 ms: the poll
  const HerdCheck c = h.check(kBound, {});
  EXPECT_TRUE(c.stuck.empty());
  EXPECT_EQ(c.handoffs, 2);
  EXPECT_EQ(c.prompt, 1);
}

TEST(HerdCheck, ANameLeftFreeWhileAWaiterWaitedIsALostWake) {
  HerdHistory h;
  h.waited("h1", 0, 20'000'000);
  h.let_go("h1", 1'000'000);
  h.acquired("h1", 11'000'000);
  const HerdCheck c = h.check(kBound, {});
  ASSERT_EQ(c.stuck.size(), 1u);
  EXPECT_NE(c.stuck[0].find("h1 free from 1000000 for 10000 ms"), std::string::npos) << c.stuck[0];
}

TEST(HerdCheck, AGapInAFaultWindowOrWithNobodyWaitingIsExcused) {
  HerdHistory h;
  h.waited("h0", 0, 20'000'000);
  h.let_go("h0", 1'000'000);
  h.acquired("h0", 11'000'000);
  // The server paused from 5 s to 9 s (a window widened by 2 s before it).
  EXPECT_TRUE(h.check(kBound, {{5'000'000, 9'000'000}}).stuck.empty());
  // Nobody waited throughout: the next take came when someone asked.
  HerdHistory quiet;
  quiet.waited("h0", 0, 500'000);
  quiet.let_go("h0", 1'000'000);
  quiet.acquired("h0", 11'000'000);
  EXPECT_TRUE(quiet.check(kBound, {}).stuck.empty());
  EXPECT_EQ(quiet.check(kBound, {}).handoffs, 0);
}

}  // namespace
}  // namespace dlock::torture
