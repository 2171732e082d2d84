// The lock table: its definition, its schema version, and the migration from
// the tables of earlier dlock versions.
//
// One table holds the rows of every primitive, keyed by (kind, lock_name,
// slot) (base/keys.hpp), with one set of hold columns for all of them. Its
// COMMENT carries the schema version ("dlock schema 3"): a client checks it
// at startup and refuses a table of any other version with an error naming
// both, so clients that would read each other's rows differently never
// share them. The tables of dlock 0.1 and 0.2 (a lock table, "<table>_sem",
// "<table>_rw", "<table>_rwr") carry no version; they are recognised by
// their columns and migrated by `dlock init` (Schema::migrate).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sql/connection.hpp"

namespace spdlog {
class logger;
}

namespace dlock::details {

class Schema {
 public:
  static constexpr int kVersion = 3;

  Schema(std::string table, std::shared_ptr<spdlog::logger> logger = nullptr);

  const std::string& table() const { return table_; }
  // CREATE TABLE IF NOT EXISTS for the table (sql/schema.sql holds it verbatim).
  std::string create_sql() const;

  // The schema version of the table in the connection's database: 0 when
  // there is none; 1 for dlock 0.1's lock table, 2 for dlock 0.2's; 3 for
  // this version's; a newer version's number. Throws BackendError for a
  // table of that name that is not dlock's.
  int found_version(Connection& c) const;
  // At client construction: with `create`, creates the table if it does
  // not exist; then checks its version. Throws BackendError when the table
  // is missing (without `create`) or of another version, naming what to do.
  void prepare(Connection& c, bool create) const;
  // `dlock init`: creates the table, or migrates the tables of dlock 0.1 or
  // 0.2 into it (holds, fences, counts and all), leaving in place of each
  // old semaphore and read-write lock table a view that makes an old client
  // fail loudly instead of using a table nobody else reads. Every client of
  // the old version must be stopped first. Returns a sentence saying what
  // was done. Throws BackendError.
  std::string migrate(Connection& c) const;

 private:
  std::string create_sql_for(const std::string& name) const;
  std::vector<std::string> migration_sql(Connection& c, int from, const std::string& into) const;

  std::string table_;
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace dlock::details
