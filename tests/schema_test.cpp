// The shipped schema matches what the library creates, a missing table is
// reported rather than papered over, and a freed row keeps its last hold's
// columns without showing a holder.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/client_access.hpp"
#include "sql/lock_table.hpp"
#include "sql/rw_table.hpp"
#include "sql/semaphore_table.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

TEST(Schema, ShippedSqlMatchesTheLibrary) {
  std::ifstream in(DLOCK_SOURCE_DIR "/sql/schema.sql");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  std::string expected = details::LockTable("distributed_lock").create_table_sql() + ";\n\n" +
                         details::SemaphoreTable("distributed_lock").create_table_sql() + ";";
  for (const auto& ddl : details::RwTable("distributed_lock").create_tables_sql()) expected += "\n\n" + ddl + ";";
  expected += "\n";
  EXPECT_NE(text.str().find(expected), std::string::npos)
      << "sql/schema.sql is out of date; it must contain every table's CREATE TABLE verbatim:\n"
      << expected;
}

TEST(Schema, CreateTableIsIdempotentAndCustomTablesWork) {
  const Options options = test::fresh_options();
  { DatabaseDistributedLock a(options); }
  DatabaseDistributedLock b(options);  // table exists already
  b.lock("s");
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + options.table + "`"), "1");
  b.unlock("s");
}

TEST(Schema, MissingTableWithCreateTableOffIsABackendError) {
  Options options = test::fresh_options();
  options.create_table = false;
  try {
    DatabaseDistributedLock client(options);
    FAIL() << "no error for a missing table";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.code(), 1146) << e.what();
    EXPECT_EQ(e.sql_state(), "42S02");
    EXPECT_NE(std::string(e.what()).find("dlock init"), std::string::npos) << e.what();
  }
}

// The lock table as version 0.1.0 created it (no hold_id column).
void create_old_table(const std::string& table) {
  test::execute_sql("CREATE TABLE `" + table +
                    "` (lock_name VARBINARY(255) NOT NULL, machine_id VARBINARY(64) NULL, thread_id BIGINT UNSIGNED "
                    "NULL, state INT UNSIGNED NOT NULL DEFAULT 0, is_locked TINYINT(1) NOT NULL DEFAULT 0, watchdog "
                    "TINYINT(1) NOT NULL DEFAULT 0, expire_time DATETIME(6) NULL, fence BIGINT UNSIGNED NOT NULL "
                    "DEFAULT 0, gmt_create DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), gmt_modified "
                    "DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), PRIMARY KEY "
                    "(lock_name)) ENGINE=InnoDB");
  test::execute_sql("INSERT INTO `" + table +
                    "` (lock_name, machine_id, thread_id, state, is_locked, expire_time, fence) VALUES ('old', 'm', 1, "
                    "1, 1, UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, 7)");
}

TEST(Schema, TableOfAnEarlierVersionIsNamedForUpgradeWhenCreateTableIsOff) {
  Options options = test::fresh_options();
  create_old_table(options.table);
  options.create_table = false;
  try {
    DatabaseDistributedLock client(options);
    FAIL() << "an old table was used as it is";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("dlock init"), std::string::npos) << e.what();
  }
}

TEST(Schema, TableOfAnEarlierVersionIsUpgradedInPlaceKeepingItsFences) {
  Options options = test::fresh_options();
  create_old_table(options.table);
  DatabaseDistributedLock client(options);  // create_table on: upgrades
  client.lock("old");
  EXPECT_EQ(client.fencing_token("old"), 8u);  // the old row's fence continues
  client.unlock("old");
}

// A release sets is_locked = 0 and state = 0 and leaves every other column
// of the hold as it was: a NULL has no length, so NULLing the holder's
// columns made the release, and the next take that fills them again,
// rewrite the whole record instead of updating it in place (40 % more redo
// per statement). Reads must still show a free row with no holder.
TEST(Schema, AReleaseLeavesTheLastHoldsColumnsAndReadsShowNoHolder) {
  const Options options = test::fresh_options();
  DatabaseDistributedLock client(options);
  client.lock("kept");
  const std::uint64_t fence = client.fencing_token("kept");
  client.unlock("kept");
  EXPECT_EQ(test::query_scalar("SELECT CONCAT_WS(' ', is_locked, state, machine_id IS NOT NULL, thread_id IS NOT NULL,"
                               " hold_id IS NOT NULL, holder_host IS NOT NULL, holder_pid IS NOT NULL,"
                               " acquired_at IS NOT NULL, expire_time > NOW(6)) FROM `" +
                               options.table + "` WHERE lock_name = 'kept'"),
            "0 0 1 1 1 1 1 1 1");
  const details::LockRow row = details::ClientAccess::of(client).inspect("kept");
  EXPECT_TRUE(row.exists);
  EXPECT_FALSE(row.held);
  EXPECT_EQ(row.machine, "");
  EXPECT_EQ(row.thread, 0u);
  EXPECT_EQ(row.hold_id, 0u);
  EXPECT_EQ(row.host, "");
  EXPECT_EQ(row.pid, 0u);
  EXPECT_FALSE(row.ttl_us.has_value());
  EXPECT_FALSE(row.watchdog);
  EXPECT_EQ(row.state, 0u);
  EXPECT_EQ(row.fence, fence);
  EXPECT_FALSE(client.is_locked("kept"));
  EXPECT_FALSE(client.remaining_ttl("kept").has_value());
  // The kept lease is not a hold: another client takes the row at once.
  DatabaseDistributedLock other(test::same_table(options));
  ASSERT_TRUE(other.try_lock("kept"));
  EXPECT_EQ(other.fencing_token("kept"), fence + 1);
  other.unlock("kept");
}

}  // namespace
}  // namespace dlock
