// Statement text and kind rules that need no database: one list of hold
// columns that every take assigns once, one way to free a row (in place,
// nothing set to NULL), caller data always bound, nothing one server
// dialect alone understands, the versioned table definition, and the rule
// each kind of hold declares.
#include <gtest/gtest.h>

#include <spdlog/spdlog.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "primitives/kinds.hpp"
#include "primitives/read_write_lock/read_write_rows.hpp"
#include "sql/bells.hpp"
#include "sql/guard_statement.hpp"
#include "sql/hold_rows.hpp"
#include "sql/schema.hpp"

namespace dlock::details {
namespace {

// How often `needle` occurs in `text`.
std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

// Every statement text the read-write lock runs, and the table's DDL.
std::vector<std::string> statement_texts() {
  const HoldRows rows("t$1", spdlog::default_logger());
  const ReadWriteRows rw(rows);
  std::vector<std::string> texts = {rw.take_write, rw.hand_over_write, rw.intend, rw.withdraw, rw.take_read, rw.head,
                                    rw.poll + "?)"};
  texts.push_back(Schema("t$1").create_sql());
  return texts;
}

TEST(Statements, ATakeAssignsEveryHoldColumnExactlyOnce) {
  const std::string take = fragments::take_assignments("r.", "h.fence + 1");
  for (const char* column : {"fence", "state", "watchdog", "owner_id", "hold_id", "machine_id", "holder_host",
                             "holder_pid", "acquired_at", "expire_time", "bell", "waiters"}) {
    EXPECT_EQ(count(take, std::string("r.") + column + " = "), 1u) << column << " in: " << take;
  }
  EXPECT_EQ(count(take, "?"), 9u) << "bind_hold binds nine values";
}

TEST(Statements, TheRowColumnsAreAsManyAsReadersOfThemSkip) {
  // Statements that select more after the row's columns find theirs past
  // kRowColumns; a column added without it would shift them.
  const std::string columns = fragments::row_columns("h.");
  int depth = 0;
  int commas = 0;
  for (const char ch : columns) {
    depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
    if (ch == ',' && depth == 0) ++commas;
  }
  EXPECT_EQ(commas + 1, fragments::kRowColumns) << columns;
}

TEST(Statements, AFreedRowKeepsItsColumnsAndMovesItsLeaseIntoThePast) {
  const std::string free = fragments::free_assignments("");
  EXPECT_EQ(free.find("NULL"), std::string::npos) << "a release updates in place: " << free;
  EXPECT_NE(free.find("state = 0"), std::string::npos);
  EXPECT_NE(free.find("watchdog = 0"), std::string::npos);
  EXPECT_NE(free.find("expire_time = acquired_at + INTERVAL ? MICROSECOND"), std::string::npos);
  EXPECT_EQ(free.find("hold_id"), std::string::npos) << "the last holder stays readable";
  EXPECT_EQ(fragments::live("r."), "r.expire_time > NOW(6)") << "live is decided by the server's clock alone";
}

TEST(Statements, CallerDataIsAlwaysBoundNeverWrittenIntoTheText) {
  for (const auto& text : statement_texts()) {
    // The only literals: empty strings and the fixed formats and comments
    // of the library itself, never a name or a value a caller passed.
    const std::string without_fixed = std::regex_replace(
        text, std::regex("''|'%Y-%m-%dT%H:%i:%s\\.%f'|COMMENT[ =]*'[^']*'|DEFAULT '[^']*'"), "");
    EXPECT_EQ(without_fixed.find('\''), std::string::npos) << text;
  }
  EXPECT_NE(Schema("t$1").create_sql().find("`t$1`"), std::string::npos) << "the table name is quoted";
}

TEST(Statements, NothingOnlyOneServerDialectUnderstands) {
  const std::vector<std::string> banned = {"RETURNING", "PROCEDURE", "TRIGGER", "CREATE EVENT", "CREATE OR REPLACE",
                                           "SEQUENCE", " WAIT ", "JSON_TABLE", "::"};
  std::vector<std::string> texts = statement_texts();
  texts.push_back(kRingTerm);
  for (const auto& text : texts)
    for (const auto& word : banned) EXPECT_EQ(text.find(word), std::string::npos) << word << " in: " << text;
}

TEST(Statements, TheTableCarriesItsSchemaVersionAndOneKeyForEveryKind) {
  const std::string ddl = Schema("locks").create_sql();
  EXPECT_NE(ddl.find("dlock schema " + std::to_string(Schema::kVersion)), std::string::npos) << ddl;
  EXPECT_NE(ddl.find("PRIMARY KEY (kind, lock_name, slot)"), std::string::npos) << ddl;
  EXPECT_NE(ddl.find("CREATE TABLE IF NOT EXISTS `locks`"), std::string::npos) << ddl;
  // sql/schema.sql ships the same definition for DBAs who apply it by hand.
  std::ifstream shipped(DLOCK_SOURCE_DIR "/sql/schema.sql");
  ASSERT_TRUE(shipped.good());
  std::stringstream text;
  text << shipped.rdbuf();
  EXPECT_NE(text.str().find(Schema("distributed_lock").create_sql()), std::string::npos)
      << "sql/schema.sql differs from the library's table";
}

// The guard statement has values written in (it is handed to other
// connectors and the mysql client): names only as hex literals, identifiers
// quoted, one row per hold, and no literal a server could read otherwise.
TEST(Statements, TheGuardStatementWritesNamesAsHexAndQuotesIdentifiers) {
  const std::string sql = guard_statement("my`db", "locks", {{Kind::kLock, "it's", 0, 42}, {Kind::kRead, "", 7, 43}});
  EXPECT_NE(sql.find("`my``db`.`locks`"), std::string::npos) << sql;
  EXPECT_NE(sql.find("X'69742773'"), std::string::npos) << "it's, in hex: " << sql;
  EXPECT_NE(sql.find("X''"), std::string::npos) << sql;
  EXPECT_EQ(sql.find("it's"), std::string::npos) << sql;
  EXPECT_EQ(count(sql, "UNION ALL SELECT"), 2u) << "two holds, and the failing subquery: " << sql;
  EXPECT_NE(sql.find("4 AS kind, X'' AS lock_name, 7 AS slot, 43 AS hold_id"), std::string::npos) << sql;
  const std::string without_hex = std::regex_replace(sql, std::regex("X'[0-9A-F]*'"), "");
  EXPECT_EQ(without_hex.find('\''), std::string::npos) << sql;
  EXPECT_EQ(without_hex.find('"'), std::string::npos) << sql;
  EXPECT_EQ(without_hex.find(';'), std::string::npos) << sql;
  for (const char* word : {"RETURNING", "PROCEDURE", "SIGNAL", "::", "||"})
    EXPECT_EQ(sql.find(word), std::string::npos) << word << " in: " << sql;
  EXPECT_EQ(hex_literal(std::string("\x00\xff", 2)), "X'00FF'");
}

TEST(KindRules, EachKindDeclaresWhoMayHaveIt) {
  const HoldRows rows("t", spdlog::default_logger());
  const auto lock = make_lock_kind(rows);
  EXPECT_EQ(lock->traits.kind, Kind::kLock);
  EXPECT_TRUE(lock->traits.reentrant);
  EXPECT_TRUE(lock->traits.single_holder);
  EXPECT_EQ(lock->traits.blocked_by, std::vector<Kind>{Kind::kLock});

  const auto semaphore = make_semaphore_kind(rows);
  EXPECT_FALSE(semaphore->traits.reentrant) << "each acquire is a permit of its own";
  EXPECT_FALSE(semaphore->traits.single_holder);
  EXPECT_FALSE(semaphore->traits.reports_fence);

  const auto rw = make_read_write_kinds(rows);
  EXPECT_TRUE(rw.write->traits.single_holder);
  EXPECT_FALSE(rw.read->traits.single_holder);
  EXPECT_EQ(rw.write->traits.blocked_by, (std::vector<Kind>{Kind::kWrite, Kind::kRead}));
  EXPECT_EQ(rw.read->traits.blocked_by, std::vector<Kind>{Kind::kWrite});
  EXPECT_EQ(rw.write->traits.fence_step, 2) << "a read's token sits between two writes'";
  EXPECT_EQ(rw.read->traits.serial, Kind::kWrite) << "both sides count on the head row's fence";
  EXPECT_TRUE(rw.read->traits.shared) << "a bell rung for the read side wakes every reader";
  EXPECT_FALSE(rw.write->traits.shared);
  EXPECT_EQ(rw.read->traits.other_side, Kind::kWrite);
  EXPECT_EQ(rw.write->traits.other_side, Kind::kRead);
  EXPECT_TRUE(rw.read->traits.frees_alone) << "a read's release also uncounts it on the head row";
  for (const auto* other : {lock.get(), semaphore.get(), rw.write.get()}) {
    EXPECT_FALSE(other->traits.frees_alone) << kind_name(other->traits.kind);
    EXPECT_FALSE(other->traits.shared && other != rw.read.get()) << kind_name(other->traits.kind);
  }
  EXPECT_FALSE(lock->traits.other_side);
  EXPECT_FALSE(semaphore->traits.other_side);
}

}  // namespace
}  // namespace dlock::details
