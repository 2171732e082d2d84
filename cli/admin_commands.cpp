#include "admin_commands.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "api/tools.hpp"
#include "duration.hpp"
#include "exit_codes.hpp"
#include "fair_view.hpp"
#include "lock_view.hpp"
#include "rw_view.hpp"
#include "semaphore_view.hpp"

namespace dlock::cli {

namespace {

void print_cells(const std::vector<std::vector<std::string>>& cells) {
  // Column widths in characters, not bytes (UTF-8 continuation bytes take no column).
  const auto columns = [](const std::string& text) {
    return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xc0) != 0x80;
    }));
  };
  std::vector<std::size_t> width(cells.front().size(), 0);
  for (const auto& r : cells)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], columns(r[i]));
  for (const auto& r : cells) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - columns(r[i]) + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

void print_table(const std::vector<details::HoldRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"NAME", "HOLDER", "HOST", "PID", "HELD FOR", "EXPIRES IN", "RENEWAL", "COUNT", "FENCE"});
  const auto ms = [](std::optional<std::int64_t> us) { return Millis(std::max<std::int64_t>(0, us.value_or(0) / 1000)); };
  for (const auto& row : rows) {
    if (!row.live) {
      cells.push_back({readable_name(row.key.name), "-", "-", "-", "-", "-", "-", "0", std::to_string(row.fence)});
      continue;
    }
    cells.push_back({readable_name(row.key.name), readable_name(row.machine) + "/" + std::to_string(row.owner),
                     readable_name(row.host), std::to_string(row.pid),
                     row.held_for_us ? format_duration(ms(row.held_for_us)) : "-", format_duration(ms(row.ttl_us)),
                     row.state == 0 ? "kept" : row.watchdog ? "watchdog" : "fixed", std::to_string(row.state), std::to_string(row.fence)});
  }
  print_cells(cells);
}

// Elections with a leader now: who leads, since when, the term (`dlock
// leader NAME` adds the value).
void print_elections(const std::vector<details::HoldRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"ELECTION", "LEADER", "HOST", "PID", "LEADS FOR", "EXPIRES IN", "TERM"});
  const auto ms = [](std::optional<std::int64_t> us) { return Millis(std::max<std::int64_t>(0, us.value_or(0) / 1000)); };
  for (const auto& row : rows)
    cells.push_back({readable_name(row.key.name), readable_name(row.machine) + "/" + std::to_string(row.owner),
                     readable_name(row.host), std::to_string(row.pid),
                     row.held_for_us ? format_duration(ms(row.held_for_us)) : "-", format_duration(ms(row.ttl_us)),
                     std::to_string(row.fence)});
  print_cells(cells);
}

int status_rows(const Options& options, const std::vector<std::string>& names, bool json) {
  const std::vector<details::HoldRow> all = details::list_rows(options, names);
  std::vector<details::HoldRow> rows;
  for (const auto& row : all)
    if (row.key.kind == details::Kind::kLock && (row.live || !names.empty())) rows.push_back(row);
  if (!names.empty()) {
    // A name asked for and never used as a lock: an empty row for it.
    for (const auto& name : names) {
      if (std::any_of(rows.begin(), rows.end(), [&](const details::HoldRow& r) { return r.key.name == name; })) continue;
      details::HoldRow never_used;
      never_used.key = details::RowKey{details::Kind::kLock, name, 0};
      rows.push_back(never_used);
    }
    std::stable_sort(rows.begin(), rows.end(), [&](const details::HoldRow& a, const details::HoldRow& b) {
      return std::find(names.begin(), names.end(), a.key.name) < std::find(names.begin(), names.end(), b.key.name);
    });
  }
  const auto semaphores = group_permits(all);
  const auto rwlocks = group_rw(all);
  const auto fair = group_fair(all, details::fair_queues(options, names));
  std::vector<details::HoldRow> elections;
  for (const auto& row : all)
    if (row.key.kind == details::Kind::kElection && row.live) elections.push_back(row);
  if (json) {
    for (const auto& row : rows) std::cout << row_json(row) << "\n";
    for (const auto& view : semaphores) std::cout << semaphore_json(view) << "\n";
    for (const auto& view : rwlocks) std::cout << rw_json(view) << "\n";
    for (const auto& view : fair) std::cout << fair_json(view) << "\n";
    for (const auto& row : elections) {
      // The lock row's fields (fence: the term), marked as an election's.
      std::string line = row_json(row);
      std::cout << "{\"kind\":\"election\"," << line.substr(1) << "\n";
    }
    return kExitOk;
  }
  // A name asked for that only a semaphore or read-write lock uses: no
  // empty lock row for it.
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [&](const details::HoldRow& row) {
                              return !row.exists &&
                                     (std::any_of(semaphores.begin(), semaphores.end(),
                                                  [&](const SemaphoreView& v) { return v.name == row.key.name; }) ||
                                      std::any_of(rwlocks.begin(), rwlocks.end(),
                                                  [&](const RwView& v) { return v.name == row.key.name; }) ||
                                      std::any_of(fair.begin(), fair.end(),
                                                  [&](const FairView& v) { return v.name == row.key.name; }) ||
                                      std::any_of(elections.begin(), elections.end(),
                                                  [&](const details::HoldRow& e) { return e.key.name == row.key.name; }));
                            }),
             rows.end());
  bool printed = false;
  if (!rows.empty()) {
    print_table(rows);
    printed = true;
  }
  if (!semaphores.empty()) {
    if (printed) std::cout << "\n";
    print_cells(semaphore_cells(semaphores));
    printed = true;
  }
  if (!rwlocks.empty()) {
    if (printed) std::cout << "\n";
    print_cells(rw_cells(rwlocks));
    printed = true;
  }
  if (!fair.empty()) {
    if (printed) std::cout << "\n";
    print_cells(fair_cells(fair));
    printed = true;
  }
  if (!elections.empty()) {
    if (printed) std::cout << "\n";
    print_elections(elections);
    printed = true;
  }
  if (!printed) std::cout << "no lock is held in " << options.database << "." << options.table << "\n";
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

int force_unlock_rows(const Options& options, const std::vector<std::string>& names) {
  int rc = kExitOk;
  for (const auto& name : names) {
    details::HoldRow before;
    for (const auto& row : details::list_rows(options, {name}))
      if (row.key.kind == details::Kind::kLock) before = row;
    if (before.live && details::force_unlock(options, details::Kind::kLock, name) > 0) {
      std::cout << "cleared " << readable_name(name) << " (it was held by " << holder_summary(before) << ", count "
                << before.state << ")\n";
    } else {
      std::cerr << "dlock: " << readable_name(name) << " was not held\n";
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
  return force_unlock_rows(options, names);
}

int init_command(const Options& options) {
  std::cout << details::init_tables(options) << "\n";
  return kExitOk;
}

}  // namespace dlock::cli
