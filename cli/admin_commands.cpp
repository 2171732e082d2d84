#include "admin_commands.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "sql/connection.hpp"
#include "duration.hpp"
#include "exit_codes.hpp"
#include "sql/lock_table.hpp"
#include "sql/semaphore_table.hpp"
#include "semaphore_view.hpp"
#include "rw_view.hpp"
#include "sql/rw_table.hpp"
#include "lock_view.hpp"
#include "core/log_format.hpp"

namespace dlock::cli {

namespace {

std::unique_ptr<details::Connection> connect(const Options& options) {
  return details::Connection::open(details::ConnectionSettings::from(options));
}

// Runs `body`; a missing table becomes an error that says what to do.
template <class Body>
int with_table(const Options& options, Body&& body) {
  try {
    return body();
  } catch (const BackendError& e) {
    if (e.code() == 1146) {
      throw BackendError("lock table " + options.database + "." + options.table +
                             " does not exist; create it with `dlock init`",
                         e.code(), e.sql_state());
    }
    if (e.code() == 1054) {
      throw BackendError("lock table " + options.database + "." + options.table +
                             " was created by an earlier dlock version; upgrade it with `dlock init`",
                         e.code(), e.sql_state());
    }
    throw;
  }
}

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

void print_table(const std::vector<details::LockRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"NAME", "HOLDER", "HOST", "PID", "HELD FOR", "EXPIRES IN", "RENEWAL", "COUNT", "FENCE"});
  const auto ms = [](std::optional<std::int64_t> us) { return Millis(std::max<std::int64_t>(0, us.value_or(0) / 1000)); };
  for (const auto& row : rows) {
    if (!row.held) {
      cells.push_back({readable_name(row.name), "-", "-", "-", "-", "-", "-", "0", std::to_string(row.fence)});
      continue;
    }
    cells.push_back({readable_name(row.name), readable_name(row.machine) + "/" + std::to_string(row.thread),
                     readable_name(row.host), std::to_string(row.pid),
                     row.held_for_us ? format_duration(ms(row.held_for_us)) : "-", format_duration(ms(row.ttl_us)),
                     row.watchdog ? "watchdog" : "fixed", std::to_string(row.state), std::to_string(row.fence)});
  }
  print_cells(cells);
}

// Semaphores with live permits (among `names`, when given). None when the
// semaphore table does not exist (no client has used a semaphore yet).
std::vector<SemaphoreView> semaphore_views(details::Connection& c, const Options& options,
                                           const std::vector<std::string>& names) {
  const details::SemaphoreTable table(options.table);
  try {
    table.check_schema(c);
  } catch (const BackendError& e) {
    if (e.code() == 1146) return {};
    throw;
  }
  auto views = group_permits(table.read_held(c));
  if (!names.empty()) {
    views.erase(std::remove_if(views.begin(), views.end(),
                               [&](const SemaphoreView& v) {
                                 return std::find(names.begin(), names.end(), v.name) == names.end();
                               }),
                views.end());
  }
  return views;
}

// Read-write locks with a live write or live reads (among `names`, when
// given). None when their tables do not exist yet.
std::vector<RwView> rw_views(details::Connection& c, const Options& options, const std::vector<std::string>& names) {
  if (!details::RwTable::names_fit(options.table)) return {};
  const details::RwTable table(options.table);
  try {
    table.check_schema(c);
  } catch (const BackendError& e) {
    if (e.code() == 1146) return {};
    throw;
  }
  auto views = group_rw(table.read_held_heads(c), table.read_held_readers(c));
  if (!names.empty()) {
    views.erase(std::remove_if(views.begin(), views.end(),
                               [&](const RwView& v) {
                                 return std::find(names.begin(), names.end(), v.name) == names.end();
                               }),
                views.end());
  }
  return views;
}

int status_rows(const Options& options, const std::vector<std::string>& names, bool json) {
  auto c = connect(options);
  const details::LockTable table(options.table);
  std::vector<details::LockRow> rows;
  if (names.empty()) {
    rows = table.read_held(*c);
  } else {
    auto found = table.read_many(*c, names);
    for (const auto& name : names) {
      auto it = std::find_if(found.begin(), found.end(), [&](const details::LockRow& r) { return r.name == name; });
      if (it != found.end()) {
        rows.push_back(*it);
      } else {
        details::LockRow never_used;
        never_used.name = name;
        rows.push_back(never_used);
      }
    }
  }
  const auto semaphores = semaphore_views(*c, options, names);
  const auto rwlocks = rw_views(*c, options, names);
  if (json) {
    for (const auto& row : rows) std::cout << row_json(row) << "\n";
    for (const auto& view : semaphores) std::cout << semaphore_json(view) << "\n";
    for (const auto& view : rwlocks) std::cout << rw_json(view) << "\n";
    return kExitOk;
  }
  // A name asked for that only a semaphore or read-write lock uses: no
  // empty lock row for it.
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [&](const details::LockRow& row) {
                              return !row.exists &&
                                     (std::any_of(semaphores.begin(), semaphores.end(),
                                                  [&](const SemaphoreView& v) { return v.name == row.name; }) ||
                                      std::any_of(rwlocks.begin(), rwlocks.end(),
                                                  [&](const RwView& v) { return v.name == row.name; }));
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
  if (!printed) std::cout << "no lock is held in " << options.database << "." << options.table << "\n";
  return kExitOk;
}

int force_release_semaphores(const Options& options, const std::vector<std::string>& names) {
  auto c = connect(options);
  const details::SemaphoreTable table(options.table);
  table.check_schema(*c);
  int rc = kExitOk;
  for (const auto& name : names) {
    const std::size_t freed = table.force_release(*c, name);
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
  auto c = connect(options);
  const details::RwTable table(options.table);
  table.check_schema(*c);
  int rc = kExitOk;
  for (const auto& name : names) {
    bool cleared = false;
    if (writes && table.force_write(*c, name)) {
      std::cout << "cleared the write hold of read-write lock " << readable_name(name) << "\n";
      cleared = true;
    }
    if (reads) {
      if (const std::size_t n = table.force_reads(*c, name); n > 0) {
        std::cout << "cleared " << n << " read hold(s) of read-write lock " << readable_name(name) << "\n";
        cleared = true;
      }
    }
    if (!cleared) {
      std::cerr << "dlock: read-write lock " << readable_name(name) << " had no " << (reads && writes ? "hold" : reads ? "read hold" : "write hold")
                << " to clear\n";
      rc = kExitConflict;
    }
  }
  return rc;
}

int force_unlock_rows(const Options& options, const std::vector<std::string>& names) {
  auto c = connect(options);
  const details::LockTable table(options.table);
  int rc = kExitOk;
  for (const auto& name : names) {
    const details::LockRow before = table.read(*c, name);
    if (before.held && table.force_release(*c, name)) {
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

std::string schema_sql(const std::string& table) {
  std::string sql = details::LockTable(table).create_table_sql() + ";";
  // A lock table name over 60 characters leaves no room for "<table>_sem":
  // such a deployment has no semaphores.
  if (details::SemaphoreTable::name_for_fits(table)) sql += "\n\n" + details::SemaphoreTable(table).create_table_sql() + ";";
  if (details::RwTable::names_fit(table))
    for (const auto& ddl : details::RwTable(table).create_tables_sql()) sql += "\n\n" + ddl + ";";
  return sql;
}

int status_command(const Options& options, const std::vector<std::string>& names, bool json) {
  return with_table(options, [&] { return status_rows(options, names, json); });
}

int force_unlock_command(const Options& options, const std::vector<std::string>& names, ForceTarget target) {
  if (target.semaphores) return force_release_semaphores(options, names);
  if (target.reads || target.writes) return force_release_rw(options, names, target.reads, target.writes);
  return with_table(options, [&] { return force_unlock_rows(options, names); });
}

int init_command(const Options& options) {
  auto c = connect(options);
  details::LockTable(options.table).create_table(*c);
  if (!details::SemaphoreTable::name_for_fits(options.table)) {
    std::cout << "lock table " << options.database << "." << options.table
              << " is ready (created or upgraded as needed); no semaphore table: the lock table's name is over 60 "
                 "characters\n";
    return kExitOk;
  }
  const details::SemaphoreTable semaphores(options.table);
  semaphores.create_table(*c);
  const details::RwTable rw(options.table);
  rw.create_tables(*c);
  std::cout << "lock table " << options.database << "." << options.table << ", semaphore table "
            << options.database << "." << semaphores.table() << " and read-write lock tables " << options.database
            << "." << rw.head_table() << ", " << options.database << "." << rw.reader_table()
            << " are ready (created or upgraded as needed)\n";
  return kExitOk;
}

}  // namespace dlock::cli
