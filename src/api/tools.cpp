#include "api/tools.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <algorithm>

#include "base/validation.hpp"
#include "sql/schema.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

namespace {
std::unique_ptr<Connection> connect(const Options& options) {
  validate_options(options);
  return Connection::open(ConnectionSettings::from(options));
}
}  // namespace

std::vector<HoldRow> list_rows(const Options& options, const std::vector<std::string>& names) {
  auto c = connect(options);
  CallBudget budget(options.io_timeout);
  Schema(options.table).prepare(*c, false);
  const HoldRows rows(options.table, nullptr);
  if (names.empty()) return rows.read_live(*c, {});
  std::vector<HoldRow> out;
  for (const auto& name : names) {
    validate_name(name);
    for (Kind kind : {Kind::kLock, Kind::kSemaphore, Kind::kWrite, Kind::kRead, Kind::kFair, Kind::kElection}) {
      auto found = rows.read_name(*c, kind, name);
      out.insert(out.end(), std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()));
    }
  }
  return out;
}

std::size_t force_unlock(const Options& options, Kind kind, std::string_view name) {
  validate_name(name);
  auto c = connect(options);
  CallBudget budget(options.io_timeout);
  Schema(options.table).prepare(*c, false);
  const HoldRows rows(options.table, nullptr);
  // The write side: the head alone, never a waiting writer's intent row.
  if (kind != Kind::kRead && kind != Kind::kFair) return rows.force(*c, kind, name, kind == Kind::kWrite);
  // The read side (every read hold and the count with them) and the fair
  // lock (granted to the first waiter, as a release would), as the
  // engine's kinds do it.
  Options quiet = options;
  quiet.create_table = false;
  DatabaseDistributedLock client(quiet);
  return EngineAccess::of(client).force_release(NameKeyView{kind, name});
}

std::string init_tables(const Options& options) {
  auto c = connect(options);
  CallBudget budget(std::max(options.io_timeout, Millis(60'000)));
  return Schema(options.table).migrate(*c);
}

std::string schema_sql(const std::string& table) { return Schema(table).create_sql() + ";"; }

}  // namespace dlock::details
