// The table of kinds (base/kinds_table.hpp), no database: the maps read
// from it agree with the numbers stored in the lock table, and the row
// lists it builds for statements pick holds and sweepable rows as the
// schema describes them (sql/schema.sql).
#include <gtest/gtest.h>

#include <set>

#include "base/kinds_table.hpp"

namespace dlock::details {
namespace {

TEST(KindsTable, KindNumbersAndNamesAreTheStoredOnes) {
  EXPECT_EQ(kind_sql(Kind::kLock), "1");
  EXPECT_EQ(kind_sql(Kind::kObserver), "7");
  EXPECT_STREQ(kind_name(Kind::kFair), "fair");
  EXPECT_STREQ(kind_name(Kind::kObserver), "observer");
  EXPECT_STREQ(kind_name(static_cast<Kind>(9)), "unknown");  // a row of a newer version
}

TEST(KindsTable, EveryHoldTypeAndSideNamesOneKindAndBack) {
  std::set<Kind> kinds;
  for (std::size_t t = 0; t < kHoldTypeCount; ++t) {
    const auto type = static_cast<HoldType>(t);
    const auto kind = kind_of(type);
    ASSERT_TRUE(kind.has_value()) << t;
    EXPECT_EQ(info(*kind).hold_type, type);
    EXPECT_TRUE(kinds.insert(*kind).second) << "two hold types on one kind";
  }
  EXPECT_EQ(kind_of(LockSide::kMutex), Kind::kLock);
  EXPECT_EQ(kind_of(LockSide::kRead), Kind::kRead);
  EXPECT_EQ(kind_of(LockSide::kWrite), Kind::kWrite);
  EXPECT_EQ(kind_of(LockSide::kFair), Kind::kFair);
  EXPECT_EQ(metric_kind(Kind::kObserver), MetricKind::kElection);
  EXPECT_FALSE(info(Kind::kObserver).hold_type.has_value()) << "a parked observer is never a hold";
}

TEST(KindsTable, StatementRowListsAreTheSchemas) {
  // Holds: every kind but observers, less waiting writers' marks and fair
  // queue entries.
  EXPECT_EQ(hold_rows_sql(), "kind IN (1, 2, 3, 4, 5, 6) AND NOT (kind IN (3, 5) AND slot > 0)");
  // Swept when stale: read holds, writers' marks, fair queue entries.
  EXPECT_EQ(swept_rows_sql(), "(kind IN (4) OR (kind IN (3, 5) AND slot > 0))");
}

}  // namespace
}  // namespace dlock::details
