#include "admin_commands.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "connection.hpp"
#include "duration.hpp"
#include "exit_codes.hpp"
#include "lock_table.hpp"
#include "log_format.hpp"

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

// JSON string: every byte outside printable ASCII is written as \u00XX, so
// any lock name (bytes, not necessarily UTF-8) gives valid JSON and the exact
// bytes can be recovered.
std::string json_string(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    }
  }
  return out + "\"";
}

std::string holder_of(const details::LockRow& row) {
  return row.held ? row.machine + "/" + std::to_string(row.thread) : "-";
}

std::string expires_in(const details::LockRow& row) {
  return row.held ? format_duration(Millis(std::max<std::int64_t>(0, row.ttl_us.value_or(0) / 1000))) : "-";
}

void print_json(const details::LockRow& row) {
  std::ostringstream line;
  line << "{\"name\":" << json_string(row.name) << ",\"held\":" << (row.held ? "true" : "false");
  if (row.held) {
    line << ",\"machine_id\":" << json_string(row.machine) << ",\"thread\":" << row.thread
         << ",\"count\":" << row.state << ",\"fence\":" << row.fence
         << ",\"expires_in_ms\":" << std::max<std::int64_t>(0, row.ttl_us.value_or(0) / 1000)
         << ",\"watchdog\":" << (row.watchdog ? "true" : "false");
  } else {
    line << ",\"machine_id\":null,\"thread\":null,\"count\":0,\"fence\":" << row.fence
         << ",\"expires_in_ms\":null,\"watchdog\":false";
  }
  line << "}";
  std::cout << line.str() << "\n";
}

void print_table(const std::vector<details::LockRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"NAME", "HOLDER (MACHINE/THREAD)", "COUNT", "FENCE", "EXPIRES IN"});
  for (const auto& row : rows) {
    cells.push_back({details::printable(row.name), holder_of(row), row.held ? std::to_string(row.state) : "0",
                     std::to_string(row.fence), expires_in(row)});
  }
  std::vector<std::size_t> width(5, 0);
  for (const auto& r : cells)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  for (const auto& r : cells) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
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
  if (json) {
    for (const auto& row : rows) print_json(row);
  } else if (rows.empty()) {
    std::cout << "no lock is held in " << options.database << "." << options.table << "\n";
  } else {
    print_table(rows);
  }
  return kExitOk;
}

int force_unlock_rows(const Options& options, const std::vector<std::string>& names) {
  auto c = connect(options);
  const details::LockTable table(options.table);
  int rc = kExitOk;
  for (const auto& name : names) {
    const details::LockRow before = table.read(*c, name);
    if (before.held && table.force_release(*c, name)) {
      std::cout << "cleared " << details::printable(name) << " (holder " << holder_of(before) << ", count "
                << before.state << ", fence " << before.fence << ")\n";
    } else {
      std::cerr << "dlock: " << details::printable(name) << " was not held\n";
      rc = kExitConflict;
    }
  }
  return rc;
}

}  // namespace

std::string schema_sql(const std::string& table) { return details::LockTable(table).create_table_sql() + ";"; }

int status_command(const Options& options, const std::vector<std::string>& names, bool json) {
  return with_table(options, [&] { return status_rows(options, names, json); });
}

int force_unlock_command(const Options& options, const std::vector<std::string>& names) {
  return with_table(options, [&] { return force_unlock_rows(options, names); });
}

int init_command(const Options& options) {
  auto c = connect(options);
  details::LockTable(options.table).create_table(*c);
  std::cout << "lock table " << options.database << "." << options.table << " is ready (created or upgraded as needed)\n";
  return kExitOk;
}

}  // namespace dlock::cli
