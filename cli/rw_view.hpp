// How `dlock status` shows read-write locks: one entry per read-write lock
// with a live write or live reads: the writer, and each reader.
#pragma once

#include <string>
#include <vector>

#include "api/tools.hpp"

namespace dlock::cli {

struct RwView {
  std::string name;
  details::HoldRow writer;                 // live == false when no one writes
  std::vector<details::HoldRow> readers;   // live read holds
};

// Groups live write holds and read holds per name.
std::vector<RwView> group_rw(const std::vector<details::HoldRow>& rows);
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
