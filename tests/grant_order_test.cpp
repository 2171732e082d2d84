// The torture's fair-lock grant-order check (tests/torture/grant_order.hpp),
// on made-up histories: no database.
#include <gtest/gtest.h>

#include "torture/grant_order.hpp"

namespace dlock::torture {
namespace {

QueueSnapshot snap(std::uint64_t fence, std::vector<std::uint64_t> queue) { return {"f0", fence, std::move(queue)}; }
RecordedGrant grant(std::uint64_t fence, std::uint64_t hold) { return {"f0", fence, hold}; }

TEST(GrantOrder, GrantsInQueueOrderPass) {
  const auto r = check_grant_order({snap(10, {101, 102, 103}), snap(11, {102, 103, 104})},
                                   {grant(11, 101), grant(12, 102), grant(13, 103), grant(14, 104)});
  EXPECT_EQ(r.violations, 0);
  EXPECT_EQ(r.holds_checked, 4);
}

TEST(GrantOrder, ALaterJoinerGrantedFirstIsAViolation) {
  // 104 joined after the snapshot that shows 101 and 102 waiting.
  const auto r = check_grant_order({snap(10, {101, 102})}, {grant(11, 101), grant(12, 104), grant(13, 102)});
  EXPECT_EQ(r.violations, 1);
  ASSERT_EQ(r.examples.size(), 1u);
  EXPECT_NE(r.examples[0].find("fence 12 went to hold 104"), std::string::npos) << r.examples[0];
}

TEST(GrantOrder, ReorderedQueueIsAViolation) {
  const auto r = check_grant_order({snap(10, {101, 102, 103})}, {grant(11, 103), grant(12, 101), grant(13, 102)});
  // 103 overtook both 101 and 102.
  EXPECT_EQ(r.violations, 2);
}

TEST(GrantOrder, ATakeThatNeverQueuedIsBarging) {
  // Fence 11 went to a hold no snapshot shows (a take past the queue).
  const auto r = check_grant_order({snap(10, {101})}, {grant(11, 900), grant(12, 101)});
  EXPECT_EQ(r.violations, 1);
}

TEST(GrantOrder, FencesNotRecordedAndHoldsNeverGrantedAreNoViolation) {
  // Fence 11 went to a waiter that gave up (or died) before recording it;
  // 102 left the queue (timed out) and was never granted.
  const auto r = check_grant_order({snap(10, {101, 102, 103})}, {grant(12, 101), grant(13, 103)});
  EXPECT_EQ(r.violations, 0);
  EXPECT_EQ(r.holds_checked, 2);
}

TEST(GrantOrder, AGrantBeforeTheSnapshotThatShowsItQueuedIsAViolation) {
  const auto r = check_grant_order({snap(12, {101})}, {grant(11, 101)});
  EXPECT_EQ(r.violations, 1);
}

TEST(GrantOrder, NamesAreCheckedApart) {
  const auto r = check_grant_order({snap(10, {101, 102}), {"f1", 10, {201}}},
                                   {grant(11, 101), grant(12, 102), {"f1", 11, 201}, {"f1", 12, 202}});
  EXPECT_EQ(r.violations, 0);
  EXPECT_EQ(r.holds_checked, 3);
}

TEST(GrantOrder, RepeatedSnapshotsCountAViolationOnce) {
  const auto r = check_grant_order({snap(10, {101, 102}), snap(10, {101, 102})}, {grant(11, 102), grant(12, 101)});
  EXPECT_EQ(r.violations, 1);
}

TEST(GrantOrder, ExamplesAreCapped) {
  std::vector<QueueSnapshot> snaps;
  std::vector<RecordedGrant> grants;
  for (std::uint64_t i = 0; i < 10; ++i) {
    snaps.push_back(snap(100 + 2 * i, {1000 + i, 2000 + i}));
    grants.push_back(grant(101 + 2 * i, 2000 + i));
    grants.push_back(grant(102 + 2 * i, 1000 + i));
  }
  const auto r = check_grant_order(snaps, grants, 3);
  EXPECT_EQ(r.violations, 10);
  EXPECT_EQ(r.examples.size(), 3u);
}

}  // namespace
}  // namespace dlock::torture
