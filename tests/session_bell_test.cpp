// SessionBell: the names a pooled session's bell goes by (no database).
#include <gtest/gtest.h>

#include "sql/session_bell.hpp"

namespace dlock {
namespace {

using details::SessionBell;

TEST(SessionBell, PrefixIsFixedLengthHexAndDependsOnTheRandomValue) {
  EXPECT_EQ(SessionBell::prefix_for(0x0123456789abcdefULL), "dlock-s:0123456789abcdef:");
  EXPECT_EQ(SessionBell::prefix_for(0).size(), SessionBell::prefix_for(~0ULL).size());
  EXPECT_NE(SessionBell::prefix_for(1), SessionBell::prefix_for(2));
}

TEST(SessionBell, HasNoneUntilTakenAndAdvancesOneGenerationPerRing) {
  SessionBell bell;
  EXPECT_FALSE(bell.tried());
  EXPECT_EQ(bell.current(), "");
  bell.taken(SessionBell::prefix_for(7), true);
  EXPECT_TRUE(bell.tried());
  EXPECT_EQ(bell.current(), "dlock-s:0000000000000007:0");
  EXPECT_EQ(bell.next(), "dlock-s:0000000000000007:1");
  bell.advanced();
  EXPECT_EQ(bell.current(), "dlock-s:0000000000000007:1");
  EXPECT_EQ(bell.next(), "dlock-s:0000000000000007:2");
  // MySQL's limit on user-level lock names, even after 2^64 - 1 rings.
  EXPECT_LE((SessionBell::prefix_for(~0ULL) + std::to_string(~0ULL)).size(), 64u);
}

TEST(SessionBell, AFailedTakeOrRingLeavesNone) {
  SessionBell failed;
  failed.taken(SessionBell::prefix_for(1), false);
  EXPECT_TRUE(failed.tried());
  EXPECT_EQ(failed.current(), "");
  SessionBell rung;
  rung.taken(SessionBell::prefix_for(1), true);
  rung.lost();
  EXPECT_TRUE(rung.tried());
  EXPECT_EQ(rung.current(), "");
}

}  // namespace
}  // namespace dlock
