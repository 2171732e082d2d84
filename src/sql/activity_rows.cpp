#include "sql/activity_rows.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <algorithm>
#include <map>

#include "base/kinds_table.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

namespace {
// Holds: the live rows of the kinds that have holds, less their waiters'
// rows (a fair lock's queue entries, waiting writers' marks); parked
// election observers are never holds (base/kinds_table.hpp).
const std::string kLiveHold = " WHERE " + hold_rows_sql() + " AND expire_time > NOW(6)";
// A fair lock's queue entries, live while their intent runs.
const std::string kLiveQueueEntry = " WHERE kind = " + kind_sql(Kind::kFair) + " AND slot > 0 AND intent_expire > NOW(6)";
}  // namespace

std::string ActivityRows::where(const ActivityFilter& f, std::size_t bucket) {
  std::string s;
  if (!f.kinds.empty()) s += " AND kind IN (" + placeholders(f.kinds.size()) + ")";
  if (bucket > 0) s += " AND lock_name IN (" + placeholders(bucket) + ")";
  return s;
}

void ActivityRows::bind(Binder& b, const ActivityFilter& f, std::size_t first, std::size_t count, std::size_t bucket) {
  for (Kind k : f.kinds) b.u64(static_cast<std::uint64_t>(k));
  if (bucket > 0) bind_texts(b, f.names, first, count, bucket);
}

template <class Each>
void ActivityRows::per_chunk(const ActivityFilter& f, Each&& each) {
  if (f.names.empty()) {
    each(std::size_t{0}, std::size_t{0}, std::size_t{0});
  } else {
    for_each_chunk(f.names, each);
  }
}

std::vector<std::pair<Kind, std::size_t>> ActivityRows::count_holds(Connection& c, const ActivityFilter& f) const {
  std::map<Kind, std::size_t> counts;
  per_chunk(f, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    rows_.query(
        c, "counting holds",
        "SELECT kind, COUNT(*) FROM " + rows_.quoted() + kLiveHold + where(f, bucket) + " GROUP BY kind",
        [&](Binder& b) { bind(b, f, first, count, bucket); },
        [&](sql::ResultSet& rs) {
          while (rs.next()) counts[static_cast<Kind>(rs.getUInt(1))] += static_cast<std::size_t>(rs.getUInt64(2));
        });
  });
  return {counts.begin(), counts.end()};
}

std::vector<HoldRow> ActivityRows::holds(Connection& c, const ActivityFilter& f) const {
  std::vector<HoldRow> out;
  per_chunk(f, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    rows_.run(c, "listing holds", [&] {
      // The grant time is read as text by row_columns; the order is the
      // column's own, so ties and sub-second grants sort right.
      auto& ps = c.prepared("SELECT " + fragments::row_columns() + " FROM " + rows_.quoted() + kLiveHold +
                            where(f, bucket) + " ORDER BY acquired_at, kind, lock_name, slot" +
                            (f.limit > 0 ? " LIMIT ?" : ""));
      Binder b(ps);
      bind(b, f, first, count, bucket);
      if (f.limit > 0) b.u64(f.limit);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      while (rs->next()) out.push_back(to_hold_row(*rs));
      return 0;
    });
  });
  if (f.names.size() > kInListChunk) {
    // Chunks read apart: one order, one limit.
    std::stable_sort(out.begin(), out.end(), [](const HoldRow& a, const HoldRow& b) {
      return std::tie(a.acquired_at, a.key.kind, a.key.name, a.key.slot) <
             std::tie(b.acquired_at, b.key.kind, b.key.name, b.key.slot);
    });
    if (f.limit > 0 && out.size() > f.limit) out.resize(f.limit);
  }
  return out;
}

std::vector<std::pair<std::string, std::size_t>> ActivityRows::queue_lengths(Connection& c,
                                                                              const ActivityFilter& f) const {
  std::map<std::string, std::size_t> lengths;
  per_chunk(f, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    rows_.query(
        c, "counting fair lock queues",
        "SELECT lock_name, COUNT(*) FROM " + rows_.quoted() + kLiveQueueEntry +
            where(ActivityFilter{f.names, {}, 0}, bucket) + " GROUP BY lock_name",
        [&](Binder& b) {
          bind(b, ActivityFilter{f.names, {}, 0}, first, count, bucket);
        },
        [&](sql::ResultSet& rs) {
          while (rs.next()) lengths[rs.getString(1)] += static_cast<std::size_t>(rs.getUInt64(2));
        });
  });
  return {lengths.begin(), lengths.end()};
}

std::vector<QueueEntry> ActivityRows::queue_entries(Connection& c, const ActivityFilter& f) const {
  std::vector<QueueEntry> out;
  const ActivityFilter names_only{f.names, {}, f.limit};
  per_chunk(f, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    rows_.run(c, "reading fair lock queues", [&] {
      // In line: by arrival (the entry's acquired_at), then slot.
      auto& ps = c.prepared("SELECT lock_name, machine_id, holder_host, holder_pid, owner_id, DATE_FORMAT(acquired_at,"
                            " '%Y-%m-%dT%H:%i:%s.%f'), TIMESTAMPDIFF(MICROSECOND, acquired_at, NOW(6)) FROM " +
                            rows_.quoted() + kLiveQueueEntry + where(names_only, bucket) +
                            " ORDER BY lock_name, acquired_at, slot" + (f.limit > 0 ? " LIMIT ?" : ""));
      Binder b(ps);
      bind(b, names_only, first, count, bucket);
      if (f.limit > 0) b.u64(f.limit);
      std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
      while (rs->next())
        out.push_back(QueueEntry{rs->getString(1), rs->getString(2), rs->getString(3), rs->getUInt(4),
                                 rs->getUInt64(5), rs->getString(6), rs->getInt64(7)});
      return 0;
    });
  });
  if (f.names.size() > kInListChunk) {
    std::stable_sort(out.begin(), out.end(), [](const QueueEntry& a, const QueueEntry& b) { return a.name < b.name; });
    if (f.limit > 0 && out.size() > f.limit) out.resize(f.limit);
  }
  return out;
}

}  // namespace dlock::details
