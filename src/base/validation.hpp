// Input checks that run before any SQL. Each throws std::invalid_argument
// with a message that names the offending input.
#pragma once

#include <string_view>

#include "dlock/options.hpp"

namespace dlock::details {

inline constexpr std::size_t kMaxNameBytes = 255;
inline constexpr std::size_t kMaxMachineIdBytes = 64;
inline constexpr std::size_t kMaxFailoverServers = 15;
// The most names one MultiLock takes together.
inline constexpr std::size_t kMaxSetNames = 64;
inline constexpr Millis kMaxLease = std::chrono::hours(24 * 365);

// Lock names: 1..255 bytes, no NUL. Any other byte is allowed and compared
// exactly.
void validate_name(std::string_view name);
// Leases: > 0 and <= 365 days.
void validate_lease(Millis lease);
// unlock_at_least's bound: >= 0 (0: a plain unlock) and <= 365 days.
void validate_held_for(Millis held_for);
// Every field of Options (table identifier, durations, pool size, ...).
void validate_options(const Options& options);
// Lock-table identifiers: [A-Za-z0-9_$]{1,64}.
void validate_table_name(std::string_view table);

}  // namespace dlock::details
