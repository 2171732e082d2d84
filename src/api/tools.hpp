// The one internal header the library's own tools include (the dlock
// command, the benchmark, the tests): what they need beyond the public API.
// Not installed; not for users, and not stable.
//
// - EngineAccess::of: the engine behind a client, for an interruptible
//   wait (`dlock run` ends its wait on a signal), test hooks and counters;
//   EngineAccess::elections: its elections, for the same in `dlock elect`
//   and `dlock leader --watch`; EngineAccess::keep_reader_rows_for: the
//   read-write lock's test knob.
// - The operator functions behind `dlock force-unlock` and `init`: each
//   opens one connection of its own (no watchdog, no poller).
// - The input checks the public API runs before any SQL (base/validation.hpp),
//   how names are shown in messages (base/printable.hpp), and the table of
//   kinds (base/kinds_table.hpp: which kind a Lock side names).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/keys.hpp"
#include "base/kinds_table.hpp"
#include "base/printable.hpp"
#include "base/validation.hpp"
#include "dlock/distributed_lock.hpp"
#include "engine/engine.hpp"
#include "primitives/kinds.hpp"
#include "primitives/primitives.hpp"
#include "sql/hold_rows.hpp"

namespace dlock::details {

struct EngineAccess {
  static Engine& of(DatabaseDistributedLock& client) { return *client.engine_; }
  static Elections& elections(DatabaseDistributedLock& client) { return client.primitives_->elections; }
  static void keep_reader_rows_for(DatabaseDistributedLock& client, Millis kept) {
    details::keep_reader_rows_for(*client.engine_, kept);
  }
};

// Every live row (`names` empty), else every row of those names, of every
// kind; by kind, name and slot.
std::vector<HoldRow> list_rows(const Options& options, const std::vector<std::string>& names);
// Frees every hold of (kind, name), any client's; how many. Waiters in
// other clients notice at their poll.
std::size_t force_unlock(const Options& options, Kind kind, std::string_view name);
// `dlock init`: creates the table, or migrates an older version's tables.
// Returns what was done.
std::string init_tables(const Options& options);
// The table's DDL, as sql/schema.sql holds it.
std::string schema_sql(const std::string& table);

}  // namespace dlock::details
