// `dlock status`, `dlock force-unlock`, `dlock init`: operator commands on
// the library's operator functions (api/tools.hpp), one connection each.
#pragma once

#include <dlock/options.hpp>

#include <string>
#include <vector>

namespace dlock::cli {

// Held rows (no names) or the named rows, free or not. Returns an exit code.
int status_command(const Options& options, const std::vector<std::string>& names, bool json);
// What `force-unlock` clears: lock holders, semaphore permits, or the
// read and/or write holds of read-write locks.
struct ForceTarget {
  bool semaphores = false;
  bool reads = false;      // read-write locks: every read hold
  bool writes = false;     // read-write locks: the write hold
  bool fair = false;       // fair locks: the holder (the queue stays)
  bool elections = false;  // elections: the leader
};
// Clears each name's holder(s); exit 1 if any name had none.
int force_unlock_command(const Options& options, const std::vector<std::string>& names, ForceTarget target);
// Creates the table, or migrates an older dlock version's tables (idempotent).
int init_command(const Options& options);
// The CREATE TABLE statement for `table`.
std::string schema_sql(const std::string& table);

}  // namespace dlock::cli
