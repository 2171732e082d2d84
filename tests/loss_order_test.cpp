// The torture checker's loss-order check (torture/loss_order.hpp), on
// made-up histories.
#include <gtest/gtest.h>

#include <limits>

#include "torture/loss_order.hpp"

namespace dlock::torture {
namespace {

HoldEvent event(const std::string& line) {
  HoldEvent e;
  EXPECT_TRUE(parse_hold_event(line, e)) << line;
  return e;
}

TEST(LossOrder, AHoldLetGoOrToldLostBeforeTheNextGrantIsFine) {
  const std::vector<HoldEvent> events = {
      event("held r0 1 x w1-1:0 100"),  event("letgo r0 1 w1-1:0 200"),
      event("held r0 2 x w2-1:0 300"),  event("lost r0 2 w2-1 400"),
      event("held r0 3 x w1-1:0 500"),
  };
  const auto r = check_loss_order(events, {});
  EXPECT_EQ(r.violations, 0) << (r.examples.empty() ? "" : r.examples[0]);
  EXPECT_EQ(r.holds, 3);
  EXPECT_EQ(r.told_lost, 1);
}

TEST(LossOrder, AGrantWhileTheEarlierOwnerStillCountedItsHoldIsAViolation) {
  const std::vector<HoldEvent> events = {
      event("held r0 1 x w1-1:0 100"),
      event("held r0 2 x w2-1:0 300"),
      event("lost r0 1 w1-1 5000"),  // told after the other owner had it
  };
  const auto r = check_loss_order(events, {});
  ASSERT_EQ(r.violations, 1);
  EXPECT_NE(r.examples[0].find("told it was lost"), std::string::npos) << r.examples[0];
}

TEST(LossOrder, ReadsShareWritesDoNot) {
  const std::vector<HoldEvent> reads = {event("held rw 5 s w1-1:0 100"),
                                        event("held rw 5 s w2-1:1 150")};
  EXPECT_EQ(check_loss_order(reads, {}).violations, 0);
  std::vector<HoldEvent> write = reads;
  write.push_back(event("held rw 7 x w3-1:0 200"));
  EXPECT_EQ(check_loss_order(write, {}).violations, 2);
}

TEST(LossOrder, APermitsLossNamesTheSemaphoreAndEndsThatProcessesPermits) {
  const std::vector<HoldEvent> events = {
      event("held s0 4 x w1-1:0 100"),
      event("lost sem 0 w1-1 200"),
      event("held s0 5 x w2-1:0 300"),
  };
  EXPECT_EQ(check_loss_order(events, {}).violations, 0);
}

TEST(LossOrder, AStoppedOrKilledEarlierHolderIsExcusedOnlyWhileItCannotRun) {
  const std::vector<HoldEvent> events = {
      event("held r0 1 x w1-1:0 100"),
      event("held r0 2 x w2-1:0 300000"),
      event("lost r0 1 w1-1 400000"),
  };
  EXPECT_EQ(check_loss_order(events, {{"w1-1", 250000, 390000}}).violations, 0) << "stopped at the grant";
  EXPECT_EQ(check_loss_order(events, {{"w1-1", 1000, 2000}}).violations, 1) << "it ran again long before the grant";
  EXPECT_EQ(check_loss_order(events, {{"w1-1", 200000, std::numeric_limits<std::int64_t>::max()}}).violations, 0)
      << "killed";
}

}  // namespace
}  // namespace dlock::torture
