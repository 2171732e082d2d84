// The lock table: the shipped schema matches what the library creates, a
// table of another dlock version is refused with both versions named (an
// older one is migrated by `dlock init`, holds and fences kept), and a
// freed row of every kind keeps its last hold's columns without showing a
// holder.
#include <dlock/dlock.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "api/tools.hpp"
#include "test_env.hpp"

namespace dlock {
namespace {

std::string file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Schema, ShippedSqlMatchesTheLibrary) {
  const std::string shipped = file(DLOCK_SOURCE_DIR "/sql/schema.sql");
  ASSERT_FALSE(shipped.empty());
  const std::string expected = details::schema_sql("distributed_lock") + "\n";
  EXPECT_NE(shipped.find(expected), std::string::npos)
      << "sql/schema.sql is out of date; it must contain the CREATE TABLE verbatim:\n"
      << expected;
}

TEST(Schema, CreateTableIsIdempotentAndCustomTablesWork) {
  const Options options = test::fresh_options();
  { DatabaseDistributedLock a(options); }
  DatabaseDistributedLock b(options);  // table exists already
  b.lock("s");
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + options.table + "` WHERE kind = 1"), "1");
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

// dlock 0.2's four tables, with a lock, a permit, a write and a read in them.
void create_v2_tables(const std::string& table) {
  std::string ddl = file(DLOCK_SOURCE_DIR "/tests/support/schema_v2.sql");
  const std::string from = "distributed_lock";
  for (std::size_t at = ddl.find(from); at != std::string::npos; at = ddl.find(from, at + table.size()))
    ddl.replace(at, from.size(), table);
  std::size_t start = 0;
  while (true) {
    const std::size_t end = ddl.find(";\n", start);
    if (end == std::string::npos) break;
    test::execute_sql(ddl.substr(start, end - start));
    start = end + 1;
  }
  const std::string t = "`" + table;
  test::execute_sql("INSERT INTO " + t + "` (lock_name, machine_id, thread_id, hold_id, state, is_locked, expire_time,"
                    " fence) VALUES ('free', 'm', 1, 5, 0, 0, UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, 7),"
                    " ('held', 'm', 1, 6, 2, 1, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 3)");
  test::execute_sql("INSERT INTO " + t + "_sem` (sem_name, slot, permits, hold_id, expire_time, fence) VALUES"
                    " ('sem', 0, 2, 9, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 4), ('sem', 1, 2, NULL, NULL, 11)");
  test::execute_sql("INSERT INTO " + t + "_rw` (rw_name, hold_id, state, expire_time, fence) VALUES"
                    " ('rw', NULL, 0, NULL, 20)");
  test::execute_sql("INSERT INTO " + t + "_rw` (rw_name, fence, readers, read_expire, read_epoch) VALUES"
                    " ('rd', 4, 1, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 2)");
  test::execute_sql("INSERT INTO " + t + "_rwr` (rw_name, client_key, slot, hold_id, state, expire_time, fence, epoch)"
                    " VALUES ('rd', 77, 0, 8, 1, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 5, 2)");
}

TEST(Schema, TablesOfAnEarlierVersionAreRefusedNamingBothVersions) {
  for (const bool create : {false, true}) {
    Options options = test::fresh_options();
    create_v2_tables(options.table);
    options.create_table = create;
    try {
      DatabaseDistributedLock client(options);
      FAIL() << "tables of dlock 0.2 were used as they are";
    } catch (const BackendError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("schema 2 (dlock 0.2)"), std::string::npos) << what;
      EXPECT_NE(what.find("schema 3"), std::string::npos) << what;
      EXPECT_NE(what.find("dlock init"), std::string::npos) << what;
    }
  }
}

TEST(Schema, ATableOfANewerVersionIsRefused) {
  const Options options = test::fresh_options();
  { DatabaseDistributedLock made(options); }
  test::execute_sql("ALTER TABLE `" + options.table + "` COMMENT = 'dlock schema 4: from the future'");
  try {
    DatabaseDistributedLock client(options);
    FAIL() << "a newer table was used";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("schema 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("upgrade this client"), std::string::npos) << e.what();
  }
}

TEST(Schema, InitMigratesAnEarlierVersionKeepingHoldsAndFences) {
  Options options = test::fresh_options();
  create_v2_tables(options.table);
  const std::string said = details::init_tables(options);
  EXPECT_NE(said.find("migrated from schema 2"), std::string::npos) << said;
  EXPECT_NE(details::init_tables(options).find("ready"), std::string::npos) << "init is idempotent";
  DatabaseDistributedLock client(options);
  // A free lock continues its fence; a held one stays held.
  client.lock("free");
  EXPECT_EQ(client.fencing_token("free"), 8u);
  client.unlock("free");
  EXPECT_TRUE(client.is_locked("held"));
  EXPECT_FALSE(client.try_lock("held"));
  // The live permit still counts against the bound.
  Semaphore sem = client.get_semaphore("sem", 2);
  EXPECT_EQ(sem.available_permits(), 1u);
  auto p = sem.try_acquire();
  ASSERT_TRUE(p);
  EXPECT_FALSE(sem.try_acquire()) << "the migrated permit was not counted";
  EXPECT_EQ(p->fencing_token(), 12u) << "slot 1's fence continues";
  // Write tokens continue, and the live read still keeps writers out.
  ReadWriteLock rw = client.get_read_write_lock("rw");
  rw.lock();
  EXPECT_EQ(rw.write_lock().fencing_token(), 22u);
  rw.unlock();
  EXPECT_FALSE(client.get_read_write_lock("rd").try_lock()) << "a migrated read hold was dropped";
  // A 0.2 client finds a view where its semaphore table was: its
  // statements fail instead of sharing rows nobody else reads.
  EXPECT_THROW(test::execute_sql("UPDATE `" + options.table + "_sem` SET hold_id = NULL WHERE sem_name = 'sem'"),
               std::exception);
  EXPECT_THROW(test::execute_sql("UPDATE `" + options.table + "` SET is_locked = 0 WHERE lock_name = 'held'"),
               std::exception);
}

// A release moves the lease into the past and leaves every other column of
// the hold as it was: a NULL has no length, so NULLing the holder's columns
// made the release, and the next take that fills them again, rewrite the
// whole record instead of updating it in place. Reads must still show a
// free row with no holder. One rule for every kind.
TEST(Schema, AReleaseOfEveryKindLeavesTheColumnsAndReadsShowNoHolder) {
  const Options options = test::fresh_options();
  DatabaseDistributedLock client(options);
  client.lock("kept");
  const std::uint64_t fence = client.fencing_token("kept");
  client.unlock("kept");
  { Permit p = client.get_semaphore("kept", 1).acquire(); }
  ReadWriteLock rw = client.get_read_write_lock("kept");
  rw.lock();
  rw.unlock();
  rw.lock_shared();
  rw.unlock_shared();
  for (int kind : {1, 2, 3}) {
    EXPECT_EQ(test::query_scalar("SELECT CONCAT_WS(' ', state, watchdog, machine_id <> '', owner_id <> 0, hold_id <> 0,"
                                 " holder_host <> '', holder_pid <> 0, expire_time <= NOW(6)) FROM `" +
                                 options.table + "` WHERE kind = " + std::to_string(kind) +
                                 " AND lock_name = 'kept' AND slot = 0"),
              "0 0 1 1 1 1 1 1")
        << "kind " << kind;
  }
  EXPECT_EQ(test::query_scalar("SELECT COUNT(*) FROM `" + options.table + "` WHERE lock_name = 'kept' AND"
                               " (machine_id IS NULL OR acquired_at IS NULL OR expire_time IS NULL OR bell IS NULL)"),
            "0")
      << "a NULL in a hold column";
  for (const auto& row : details::list_rows(options, {"kept"})) {
    EXPECT_TRUE(row.exists);
    EXPECT_FALSE(row.live);
    EXPECT_EQ(row.machine, "");
    EXPECT_EQ(row.owner, 0u);
    EXPECT_EQ(row.hold_id, 0u);
    EXPECT_FALSE(row.ttl_us.has_value());
  }
  EXPECT_FALSE(client.is_locked("kept"));
  EXPECT_FALSE(client.remaining_ttl("kept").has_value());
  // The kept columns are not a hold: another client takes the row at once.
  DatabaseDistributedLock other(test::same_table(options));
  ASSERT_TRUE(other.try_lock("kept"));
  EXPECT_EQ(other.fencing_token("kept"), fence + 1);
  other.unlock("kept");
}

}  // namespace
}  // namespace dlock
