// Pure logic of waiting in turn (wakeup/wake_policy.hpp) and the names of
// the user locks it waits on (sql/bells.hpp).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "sql/bells.hpp"
#include "wakeup/wake_policy.hpp"

namespace dlock::details {
namespace {

TEST(ChainTarget, ShortQueuesWaitEntryBehindEntry) {
  for (std::size_t place = 1; place < 8; ++place) EXPECT_EQ(chain_target(place), place - 1);
}

TEST(ChainTarget, LongQueuesWaitAPowerOfEightAhead) {
  EXPECT_EQ(chain_target(8), 0u);
  EXPECT_EQ(chain_target(63), 55u);
  EXPECT_EQ(chain_target(64), 0u);
  EXPECT_EQ(chain_target(99), 35u);
  EXPECT_EQ(chain_target(512), 0u);
}

TEST(ChainTarget, NoChainReachesTheServersDeadlockSearchDepth) {
  // MariaDB and MySQL report a chain of 32 lock waits as a deadlock; the
  // holder's bell and the first entry's own wait come on top.
  for (std::size_t place = 0; place < 512; ++place) EXPECT_LE(chain_length(place), 21u) << place;
  EXPECT_EQ(chain_length(99), 1u + 4u + 3u);  // 99 = 0143 in base 8
}

TEST(ChainTarget, EachEntryIsWaitedOnByOnePlacePerPowerOfEight) {
  // While nobody moves: who waits behind entry 0 (the first).
  std::size_t behind_first = 0;
  for (std::size_t place = 1; place < 4096; ++place)
    if (chain_target(place) == 0) ++behind_first;
  EXPECT_EQ(behind_first, 4u);  // 1, 8, 64, 512
}

TEST(TurnLocks, NamesFitAUserLockAndTellNamesApart) {
  std::set<std::string> seen;
  for (const std::string& name : {std::string("a"), std::string("b"), std::string("jobs"), std::string(255, 'x'), std::string("\0z", 2)}) {
    const std::string line = line_lock_name("db", "dlock_locks", 1, name);
    EXPECT_LE(line.size(), 64u);
    EXPECT_EQ(line.rfind("dlock-l:", 0), 0u);
    EXPECT_EQ(line, line_lock_name("db", "dlock_locks", 1, name)) << "not stable";
    EXPECT_TRUE(seen.insert(line).second) << "two names share a line";
  }
  EXPECT_NE(line_lock_name("db", "dlock_locks", 1, "a"), line_lock_name("db2", "dlock_locks", 1, "a"));
  EXPECT_NE(line_lock_name("db", "dlock_locks", 1, "a"), line_lock_name("db", "other", 1, "a"));
  EXPECT_NE(line_lock_name("db", "dlock_locks", 1, "a"), line_lock_name("db", "dlock_locks", 5, "a"));
  EXPECT_EQ(entry_lock_name(0xabcdefULL).rfind("dlock-e:", 0), 0u);
  EXPECT_NE(entry_lock_name(1), entry_lock_name(2));
}

}  // namespace
}  // namespace dlock::details
