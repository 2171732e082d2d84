#include "base/validation.hpp"

#include "base/tls.hpp"

#include <stdexcept>
#include <string>

namespace dlock::details {

namespace {

[[noreturn]] void reject(const std::string& what) { throw std::invalid_argument("dlock: " + what); }

void require_positive(Millis value, const char* field) {
  if (value <= Millis::zero()) reject(std::string("Options::") + field + " must be greater than zero");
}

}  // namespace

void validate_name(std::string_view name) {
  if (name.empty()) reject("lock name is empty");
  if (name.size() > kMaxNameBytes)
    reject("lock name is " + std::to_string(name.size()) + " bytes; the limit is " + std::to_string(kMaxNameBytes));
  if (name.find('\0') != std::string_view::npos) reject("lock name contains a NUL byte");
}

void validate_lease(Millis lease) {
  if (lease <= Millis::zero()) reject("lease must be greater than zero, got " + std::to_string(lease.count()) + " ms");
  if (lease > kMaxLease) reject("lease must be at most 365 days, got " + std::to_string(lease.count()) + " ms");
}

void validate_held_for(Millis held_for) {
  if (held_for < Millis::zero())
    reject("unlock_at_least: held_for must not be negative, got " + std::to_string(held_for.count()) + " ms");
  if (held_for > kMaxLease)
    reject("unlock_at_least: held_for must be at most 365 days, got " + std::to_string(held_for.count()) + " ms");
}

void validate_table_name(std::string_view table) {
  if (table.empty() || table.size() > 64) reject("Options::table must be 1..64 characters");
  for (char c : table) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
    if (!ok) reject("Options::table may hold only letters, digits, '_' and '$': \"" + std::string(table) + "\"");
  }
}

void validate_options(const Options& options) {
  if (options.host.empty()) reject("Options::host is empty");
  if (options.port == 0 || options.port > 65535) reject("Options::port must be 1..65535");
  if (options.failover_servers.size() > kMaxFailoverServers)
    reject("Options::failover_servers holds at most " + std::to_string(kMaxFailoverServers) + " servers");
  for (const auto& server : options.failover_servers) {
    if (server.host.empty()) reject("Options::failover_servers has an empty host");
    if (server.port == 0 || server.port > 65535)
      reject("Options::failover_servers: port of " + server.host + " must be 1..65535");
  }
  if (options.database.empty()) reject("Options::database is empty; the lock table needs a schema");
  validate_table_name(options.table);
  if (options.watchdog_timeout < Millis(3)) reject("Options::watchdog_timeout must be at least 3 ms");
  if (options.watchdog_timeout > kMaxLease) reject("Options::watchdog_timeout must be at most 365 days");
  require_positive(options.poll_interval, "poll_interval");
  require_positive(options.connect_timeout, "connect_timeout");
  require_positive(options.io_timeout, "io_timeout");
  if (options.pool_size == 0) reject("Options::pool_size must be at least 1");
  if (options.pool_size > 10'000) reject("Options::pool_size must be at most 10000");
  if (options.wakeup_connections == 0 || options.wakeup_connections > 256)
    reject("Options::wakeup_connections must be 1..256");
  if (options.machine_id.size() > kMaxMachineIdBytes)
    reject("Options::machine_id must be at most " + std::to_string(kMaxMachineIdBytes) + " bytes");
  if (options.machine_id.find('\0') != std::string::npos) reject("Options::machine_id contains a NUL byte");
  validate_tls(options);
}

}  // namespace dlock::details
