// How `dlock status` shows read-write locks: one entry per read-write lock
// with a live write or live reads: the writer, and each reader.
#pragma once

#include <string>
#include <vector>

#include "sql/rw_table.hpp"

namespace dlock::cli {

struct RwView {
  std::string name;
  details::LockRow writer;                 // held == false when no one writes
  std::vector<details::LockRow> readers;   // live read holds, oldest first
};

// Groups head rows and live read holds (both ordered by name) per name.
std::vector<RwView> group_rw(const std::vector<details::RwHead>& heads, const std::vector<details::ReaderRow>& reads);
// One JSON object: {"kind": "rwlock", "name", ["name_hex",] "readers_count",
// "writer": null or {"machine_id", "host", "pid", "thread", "count", "fence",
// "acquired_at", "held_for_ms", "expires_in_ms", "watchdog"}, "readers":
// [the same fields per read hold]}.
std::string rw_json(const RwView& view);
// Rows for the text table (one per hold): name, side, holder, host, pid,
// held for, expires in, renewal, count, fence.
std::vector<std::vector<std::string>> rw_cells(const std::vector<RwView>& views);
// "2 reader(s)" / "writer web01 (...)" for `dlock run`'s refusal message.
std::string rw_summary(const RwView& view);

}  // namespace dlock::cli
