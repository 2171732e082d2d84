#include "admin_commands.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <dlock/introspection.hpp>

#include "activity_view.hpp"
#include "api/tools.hpp"
#include "duration.hpp"
#include "exit_codes.hpp"
#include "names.hpp"

namespace dlock::cli {

namespace {

// Where the snapshot was read, and whether the session was encrypted.
std::string connection_line(const Activity& activity) {
  return "connection: " + activity.server +
         (activity.tls_cipher.empty() ? ", not encrypted" : ", encrypted (TLS, " + activity.tls_cipher + ")");
}

int status_rows(const Options& options, const std::vector<std::string>& names, bool json) {
  ActivityQuery query;
  query.names = names;
  const Activity activity = inspect(options, query);
  // A name asked for with no hold and no waiter of any kind.
  std::vector<std::string> free_names;
  for (const auto& name : names) {
    const bool seen =
        std::any_of(activity.holds.begin(), activity.holds.end(), [&](const HoldInfo& h) { return h.name == name; }) ||
        std::any_of(activity.waiters.begin(), activity.waiters.end(), [&](const WaiterInfo& w) { return w.name == name; });
    if (!seen && std::find(free_names.begin(), free_names.end(), name) == free_names.end()) free_names.push_back(name);
  }
  if (json) {
    for (const auto& h : activity.holds) std::cout << hold_json(h) << "\n";
    for (const auto& w : activity.waiters) std::cout << waiter_json(w) << "\n";
    for (const auto& name : free_names) std::cout << free_name_json(name) << "\n";
    return kExitOk;
  }
  if (activity.holds.empty() && activity.waiters.empty() && free_names.empty()) {
    std::cout << "no lock is held in " << options.database << "." << options.table << "\n";
  } else {
    if (!activity.holds.empty() || !free_names.empty()) std::cout << format_cells(hold_cells(activity.holds, free_names));
    if (!activity.waiters.empty()) {
      if (!activity.holds.empty() || !free_names.empty()) std::cout << "\n";
      std::cout << format_cells(waiter_cells(activity.waiters));
    }
  }
  std::cout << connection_line(activity) << "\n";
  return kExitOk;
}

int force_release_semaphores(const Options& options, const std::vector<std::string>& names) {
  int rc = kExitOk;
  for (const auto& name : names) {
    const std::size_t freed = details::force_unlock(options, details::Kind::kSemaphore, name);
    if (freed > 0) {
      std::cout << "freed " << freed << " permit(s) of semaphore " << readable_name(name) << "\n";
    } else {
      std::cerr << "dlock: semaphore " << readable_name(name) << " had no live permit\n";
      rc = kExitConflict;
    }
  }
  return rc;
}

int force_release_rw(const Options& options, const std::vector<std::string>& names, bool reads, bool writes) {
  int rc = kExitOk;
  for (const auto& name : names) {
    bool cleared = false;
    if (writes && details::force_unlock(options, details::Kind::kWrite, name) > 0) {
      std::cout << "cleared the write hold of read-write lock " << readable_name(name) << "\n";
      cleared = true;
    }
    if (reads) {
      if (const std::size_t n = details::force_unlock(options, details::Kind::kRead, name); n > 0) {
        std::cout << "cleared " << n << " read hold(s) of read-write lock " << readable_name(name) << "\n";
        cleared = true;
      }
    }
    if (!cleared) {
      std::cerr << "dlock: read-write lock " << readable_name(name) << " had no "
                << (reads && writes ? "hold" : reads ? "read hold" : "write hold") << " to clear\n";
      rc = kExitConflict;
    }
  }
  return rc;
}

// The one hold of a lock, a fair lock or an election (`noun` names the kind
// in what is printed, "" for a lock).
int force_unlock_rows(const Options& options, const std::vector<std::string>& names, HoldType type,
                      details::Kind kind, const std::string& noun) {
  int rc = kExitOk;
  for (const auto& name : names) {
    ActivityQuery query;
    query.names = {name};
    query.types = {type};
    const Activity before = inspect(options, query);
    if (!before.holds.empty() && details::force_unlock(options, kind, name) > 0) {
      const HoldInfo& h = before.holds.front();
      std::cout << "cleared " << noun << readable_name(name) << " (it was held by " << holder_summary(h) << ", count "
                << h.count << ")\n";
    } else {
      std::cerr << "dlock: " << noun << readable_name(name) << " was not held\n";
      rc = kExitConflict;
    }
  }
  return rc;
}

}  // namespace

std::string schema_sql(const std::string& table) { return details::schema_sql(table); }

int status_command(const Options& options, const std::vector<std::string>& names, bool json) {
  return status_rows(options, names, json);
}

int force_unlock_command(const Options& options, const std::vector<std::string>& names, ForceTarget target) {
  if (target.semaphores) return force_release_semaphores(options, names);
  if (target.reads || target.writes) return force_release_rw(options, names, target.reads, target.writes);
  if (target.fair) return force_unlock_rows(options, names, HoldType::kFairLock, details::Kind::kFair, "fair lock ");
  if (target.elections)
    return force_unlock_rows(options, names, HoldType::kElection, details::Kind::kElection, "election ");
  return force_unlock_rows(options, names, HoldType::kLock, details::Kind::kLock, "");
}

int init_command(const Options& options) {
  std::cout << details::init_tables(options) << "\n";
  return kExitOk;
}

}  // namespace dlock::cli
