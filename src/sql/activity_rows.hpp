// The reads behind introspection (dlock/introspection.hpp): live holds of
// every kind, counted per kind and listed longest held first, and the
// entries of fair lock queues, each statement's text beside its bindings.
// A fair lock's queue entries (kind 5, slot > 0) are waiters, not holds:
// they are live while their intent runs (src/primitives/fair_lock/fair.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/keys.hpp"
#include "sql/hold_rows.hpp"

namespace dlock::details {

// Which rows: names (empty: all) and kinds (empty: all).
struct ActivityFilter {
  std::vector<std::string> names;
  std::vector<Kind> kinds;
  std::size_t limit = 0;  // 0: no limit
};

// A queue entry of a fair lock.
struct QueueEntry {
  std::string name;
  std::string machine;
  std::string host;
  std::uint32_t pid = 0;
  std::uint64_t owner = 0;
  std::string since;  // "YYYY-MM-DDThh:mm:ss.ffffff", server time (UTC)
  std::int64_t waited_us = 0;
};

class ActivityRows {
 public:
  explicit ActivityRows(const HoldRows& rows) : rows_(rows) {}

  // Live holds per kind.
  std::vector<std::pair<Kind, std::size_t>> count_holds(Connection& c, const ActivityFilter& f) const;
  // Live holds, the earliest granted first (then kind, name, slot); at most
  // f.limit when it is set.
  std::vector<HoldRow> holds(Connection& c, const ActivityFilter& f) const;
  // Live queue entries per fair lock name.
  std::vector<std::pair<std::string, std::size_t>> queue_lengths(Connection& c, const ActivityFilter& f) const;
  // Live queue entries by name, then in line; at most f.limit when set.
  std::vector<QueueEntry> queue_entries(Connection& c, const ActivityFilter& f) const;

 private:
  // " AND kind IN (...)" / " AND lock_name IN (...)" for the filter (names
  // of one chunk, padded to `bucket`).
  static std::string where(const ActivityFilter& f, std::size_t bucket);
  static void bind(Binder& b, const ActivityFilter& f, std::size_t first, std::size_t count, std::size_t bucket);
  // Calls `each(first, count, bucket)` once per chunk of names (once with
  // bucket 0 when no names are asked for).
  template <class Each>
  static void per_chunk(const ActivityFilter& f, Each&& each);

  const HoldRows& rows_;
};

}  // namespace dlock::details
