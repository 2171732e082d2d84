// Semaphore pieces that need no database: the permit registry, the keys
// that keep semaphore waits and doorbells apart from locks', and the table's
// name and DDL.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>

#include "core/client.hpp"
#include "core/permit_registry.hpp"
#include "sql/semaphore_table.hpp"

namespace dlock::details {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

TEST(PermitRegistry, ALostPermitIsReportedOnceAndForgottenAtRelease) {
  PermitRegistry permits;
  const auto t = Clock::now() + 10s;
  permits.add(7, HeldPermit{"sem", true, false, t, 42});
  permits.add(8, HeldPermit{"sem", false, false, t, 0});
  ASSERT_EQ(permits.watchdog_permits().size(), 1u) << "only watchdog-mode permits are renewed";
  EXPECT_EQ(permits.watchdog_permits()[0].id, 7u);
  const auto lost = permits.mark_lost(7);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->name, "sem");
  EXPECT_EQ(lost->doorbell_session, 42u) << "the caller gives the doorbell back";
  EXPECT_FALSE(permits.mark_lost(7)) << "reported once";
  EXPECT_TRUE(permits.watchdog_permits().empty()) << "a lost permit is not renewed";
  EXPECT_EQ(permits.live_ids(), std::vector<std::uint64_t>{8});
  const auto released = permits.remove(7);
  ASSERT_TRUE(released);
  EXPECT_TRUE(released->lost);
  EXPECT_EQ(released->doorbell_session, 0u);
  EXPECT_FALSE(permits.remove(7)) << "a second release finds nothing";
  EXPECT_TRUE(permits.contains(8));
}

TEST(PermitRegistry, ExtendMovesOnlyLivePermits) {
  PermitRegistry permits;
  const auto t = Clock::now();
  permits.add(1, HeldPermit{"a", true, false, t, 0});
  permits.add(2, HeldPermit{"a", true, false, t, 0});
  (void)permits.mark_lost(2);
  permits.add(4, HeldPermit{"a", false, false, t, 0});
  permits.extend({1, 2, 3, 4}, t + 1h);
  for (const auto& watched : permits.watchdog_permits()) {
    EXPECT_EQ(watched.id, 1u);
    EXPECT_EQ(watched.deadline, t + 1h);
  }
  // A fixed lease is never extended (not even when a watchdog tick that
  // saw the id under its earlier holder, before a handoff, extends it).
  EXPECT_EQ(permits.remove(4)->deadline, t);
}

TEST(PermitRegistry, APermitHandedOverUnderItsIdIsNotMarkedLostForItsEarlierHolder) {
  // A release hands the permit to a local waiter under the same id: the
  // registry entry is removed and added again. A watchdog tick working from
  // a snapshot taken before must not mark the new holder's permit lost.
  PermitRegistry permits;
  const auto t = Clock::now();
  permits.add(9, HeldPermit{"a", true, false, t, 5});
  const auto seen = permits.watchdog_permits();
  ASSERT_EQ(seen.size(), 1u);
  ASSERT_TRUE(permits.remove(9));
  permits.add(9, HeldPermit{"a", true, false, t + 1h, 5});
  EXPECT_FALSE(permits.mark_lost(9, seen[0].generation)) << "the snapshot's permit is gone";
  EXPECT_FALSE(permits.remove(9)->lost);
  permits.add(9, HeldPermit{"a", true, false, t, 5});
  const auto now_seen = permits.watchdog_permits();
  EXPECT_TRUE(permits.mark_lost(9, now_seen[0].generation)) << "the very permit the snapshot saw";
}

TEST(SemaphoreKeys, WaitsAndDoorbellsNeverMeetALockName) {
  // Lock names cannot contain NUL; every semaphore key starts with one.
  const std::string key = Client::semaphore_key("jobs");
  EXPECT_TRUE(Client::is_semaphore_key(key));
  EXPECT_FALSE(Client::is_semaphore_key("jobs"));
  EXPECT_NE(key, "jobs");
  const std::string bell = Client::permit_bell_key("jobs", 0x0123456789abcdefULL);
  EXPECT_EQ(bell.size(), 2u + 16u + 4u);
  EXPECT_EQ(bell.substr(2, 16), "0123456789abcdef");
  EXPECT_EQ(Client::waiter_key_of_bell(bell), key) << "a permit's doorbell rings the semaphore's waiters";
  EXPECT_EQ(Client::waiter_key_of_bell("jobs"), "jobs") << "a lock's doorbell rings the lock's waiters";
  EXPECT_NE(Client::permit_bell_key("jobs", 1), Client::permit_bell_key("jobs", 2));
  // A name that itself looks like a key part stays apart.
  EXPECT_EQ(Client::waiter_key_of_bell(Client::permit_bell_key(std::string("p\0x", 3), 5)),
            Client::semaphore_key(std::string("p\0x", 3)));
}

TEST(SemaphoreTable, NameAndSchema) {
  EXPECT_EQ(SemaphoreTable::name_for("distributed_lock"), "distributed_lock_sem");
  EXPECT_TRUE(SemaphoreTable::name_for_fits(std::string(60, 'a')));
  EXPECT_FALSE(SemaphoreTable::name_for_fits(std::string(61, 'a')));
  EXPECT_THROW(SemaphoreTable::name_for(std::string(61, 'a')), std::invalid_argument);
  const std::string ddl = SemaphoreTable("locks").create_table_sql();
  EXPECT_NE(ddl.find("CREATE TABLE IF NOT EXISTS `locks_sem`"), std::string::npos);
  EXPECT_NE(ddl.find("PRIMARY KEY (sem_name, slot)"), std::string::npos) << "one permit per slot";
  EXPECT_NE(ddl.find("UNIQUE KEY uk_hold_id (hold_id)"), std::string::npos) << "a re-run take cannot take twice";
}

}  // namespace
}  // namespace dlock::details
