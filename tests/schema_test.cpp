// The shipped schema matches what the library creates, and a missing table
// is reported rather than papered over.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "lock_table.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

TEST(Schema, ShippedSqlMatchesTheLibrary) {
  std::ifstream in(DLOCK_SOURCE_DIR "/sql/schema.sql");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string expected = details::LockTable("distributed_lock").create_table_sql() + ";\n";
  EXPECT_NE(text.str().find(expected), std::string::npos)
      << "sql/schema.sql is out of date; it must contain LockTable::create_table_sql() verbatim:\n"
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
  DatabaseDistributedLock client(options);
  try {
    client.try_lock("x");
    FAIL() << "no error for a missing table";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.code(), 1146) << e.what();
    EXPECT_EQ(e.sql_state(), "42S02");
  }
}

}  // namespace
}  // namespace dlock
