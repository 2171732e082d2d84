// The shipped schema matches what the library creates, and a missing table
// is reported rather than papered over.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

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

}  // namespace
}  // namespace dlock
