// `dlock status`, `dlock force-unlock`, `dlock init`: operator commands that
// read or change lock rows directly, on one connection, with no watchdog.
#pragma once

#include <dlock/options.hpp>

#include <string>
#include <vector>

namespace dlock::cli {

// Held rows (no names) or the named rows, free or not. Returns an exit code.
int status_command(const Options& options, const std::vector<std::string>& names, bool json);
// Clears each name's holder; exit 1 if any name was not held.
// `semaphores`: the names are semaphores; every live permit of each is freed.
int force_unlock_command(const Options& options, const std::vector<std::string>& names, bool semaphores);
// Creates the table (idempotent).
int init_command(const Options& options);
// The CREATE TABLE statement for `table`.
std::string schema_sql(const std::string& table);

}  // namespace dlock::cli
