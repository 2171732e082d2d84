#include "sql/hold_rows.hpp"

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <algorithm>
#include <iterator>

#include "sql/bells.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

namespace fragments {

std::string live(const std::string& a) { return a + "expire_time > NOW(6)"; }

std::string row_columns(const std::string& a) {
  return a + "kind, " + a + "lock_name, " + a + "slot, " + a + "expire_time > NOW(6), " + a + "hold_id, " + a +
         "owner_id, " + a + "state, " + a + "watchdog, TIMESTAMPDIFF(MICROSECOND, NOW(6), " + a + "expire_time), " + a +
         "bell, " + a + "waiters, " + a + "machine_id, " + a + "holder_host, " + a + "holder_pid, DATE_FORMAT(" + a +
         "acquired_at, '%Y-%m-%dT%H:%i:%s.%f'), TIMESTAMPDIFF(MICROSECOND, " + a + "acquired_at, NOW(6)), " + a +
         "fence, " + a + "bound, IF(" + a + "intent_expire > NOW(6), " + a +
         "intent_id, 0), TIMESTAMPDIFF(MICROSECOND, NOW(6), " + a + "intent_expire)";
}

std::string take_assignments(const std::string& a, const std::string& fence) {
  return a + "fence = " + fence + ", " + a + "state = ?, " + a +
         "watchdog = ?, " + a + "owner_id = ?, " + a + "hold_id = ?, " + a + "machine_id = ?, " + a +
         "holder_host = ?, " + a + "holder_pid = ?, " + a + "acquired_at = NOW(6), " + a +
         "expire_time = NOW(6) + INTERVAL ? MICROSECOND, " + a + "bell = ?, " + a + "waiters = 0";
}

std::string no_foreign_intent(const std::string& a) {
  return "(" + a + "intent_id = 0 OR " + a + "intent_id = ? OR " + a + "intent_expire <= NOW(6))";
}

std::string free_assignments(const std::string& a) {
  return a + "state = 0, " + a + "watchdog = 0, " + a + "waiters = 0, " + a + "expire_time = " + a +
         "acquired_at + INTERVAL ? MICROSECOND";
}

std::string hand_over_assignments(const std::string& a, int fence_step) {
  // The fence is assigned before hold_id, so it still sees the hold the row had.
  return a + "fence = IF(" + a + "hold_id = ?, " + a + "fence, " + a + "fence + " + std::to_string(fence_step) + "), " +
         a + "state = 1, " + a + "watchdog = ?, " + a + "owner_id = ?, " + a + "hold_id = ?, " + a +
         "acquired_at = NOW(6), " + a + "expire_time = NOW(6) + INTERVAL ? MICROSECOND";
}

}  // namespace fragments

namespace {

const std::string kNoBell;

// A row by its key; with kAnySlot, the row of (kind, name) that the
// statement's hold id condition picks.
std::string key_match(bool any_slot) {
  return any_slot ? "kind = ? AND lock_name = ?" : "kind = ? AND lock_name = ? AND slot = ?";
}
std::string key_match(const RowKey& key) { return key_match(key.slot == kAnySlot); }

void bind_key(Binder& b, const RowKey& key) {
  b.u64(static_cast<std::uint64_t>(key.kind)).text(key.name);
  if (key.slot != kAnySlot) b.u64(key.slot);
}

std::string tuples(std::size_t n, const char* tuple) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) (out += i == 0 ? "" : ",") += tuple;
  return out;
}

// Some holds matched by key and hold id in one statement: "(keys) AND
// hold_id IN (...)". Rows with known slots go in a (kind, lock_name, slot)
// list, the others in a (kind, lock_name) list; both use the primary key's
// range access. Hold ids are random 64-bit values, so matching the lists
// independently never pairs one hold's key with another's id. Each list is
// padded to its bucket by repeating its last entry, so a connection caches
// few variants.
class HoldList {
 public:
  HoldList(const std::vector<HeldRow>& holds, std::size_t first, std::size_t count) {
    for (std::size_t i = first; i < first + count; ++i) (holds[i].key.slot == kAnySlot ? any_ : keyed_).push_back(&holds[i]);
    all_.reserve(count);
    for (std::size_t i = first; i < first + count; ++i) all_.push_back(&holds[i]);
  }
  std::string sql() const {
    std::string keys;
    if (!keyed_.empty()) keys = "(kind, lock_name, slot) IN (" + tuples(in_list_bucket(keyed_.size()), "(?,?,?)") + ")";
    if (!any_.empty())
      keys += (keys.empty() ? "" : " OR ") + std::string("(kind, lock_name) IN (") +
              tuples(in_list_bucket(any_.size()), "(?,?)") + ")";
    return "(" + keys + ") AND hold_id IN (" + placeholders(in_list_bucket(all_.size())) + ")";
  }
  void bind(Binder& b) const {
    const auto each = [](const std::vector<const HeldRow*>& list, auto&& fn) {
      if (list.empty()) return;
      for (std::size_t i = 0; i < in_list_bucket(list.size()); ++i) fn(*list[std::min(i, list.size() - 1)]);
    };
    each(keyed_, [&](const HeldRow& h) { bind_key(b, h.key); });
    each(any_, [&](const HeldRow& h) { bind_key(b, h.key); });
    each(all_, [&](const HeldRow& h) { b.u64(h.hold_id); });
  }

 private:
  std::vector<const HeldRow*> keyed_;
  std::vector<const HeldRow*> any_;
  std::vector<const HeldRow*> all_;
};

template <class Each>
void for_each_hold_chunk(const std::vector<HeldRow>& holds, Each&& each) {
  for (std::size_t first = 0; first < holds.size(); first += kInListChunk)
    each(HoldList(holds, first, std::min(kInListChunk, holds.size() - first)));
}

std::string kinds_in(std::size_t n) { return "kind IN (" + placeholders(n) + ")"; }

void bind_kinds(Binder& b, const std::vector<Kind>& kinds) {
  for (Kind k : kinds) b.u64(static_cast<std::uint64_t>(k));
}

}  // namespace

void bind_hold(Binder& b, const Holder& holder, unsigned state, std::int64_t lease_us, bool watchdog,
               const std::string* bell) {
  b.u64(state).flag(watchdog).u64(holder.owner).u64(holder.hold_id).text(holder.label).text(holder.host);
  b.u64(holder.pid).i64(written_lease_us(lease_us)).text(bell != nullptr ? *bell : kNoBell);
}

void bind_hand_over(Binder& b, std::uint64_t to, bool watchdog, std::uint64_t owner, std::int64_t lease_us) {
  b.u64(to).flag(watchdog).u64(owner).u64(to).i64(written_lease_us(lease_us));
}

HoldRow to_hold_row(sql::ResultSet& rs, int first) {
  const auto col = [first](int i) { return static_cast<std::uint32_t>(first + i - 1); };
  HoldRow row;
  row.exists = true;
  row.key.kind = static_cast<Kind>(rs.getUInt(col(1)));
  row.key.name = rs.getString(col(2));
  row.key.slot = rs.getUInt64(col(3));
  row.live = rs.getInt(col(4)) == 1;
  row.fence = rs.getUInt64(col(17));
  row.bound = rs.getUInt(col(18));
  row.intent_id = rs.getUInt64(col(19));
  const std::int64_t intent_left_us = rs.isNull(col(20)) ? 0 : rs.getInt64(col(20));
  row.intent_live = intent_left_us > 0;
  if (row.intent_id != 0) row.intent_ttl_us = intent_left_us;
  if (!row.live) return row;
  row.hold_id = rs.getUInt64(col(5));
  row.owner = rs.getUInt64(col(6));
  row.state = rs.getUInt(col(7));
  row.watchdog = rs.getInt(col(8)) == 1;
  row.ttl_us = rs.getInt64(col(9));
  row.bell = rs.getString(col(10));
  row.marked = rs.getInt(col(11)) == 1;
  row.machine = rs.getString(col(12));
  row.host = rs.getString(col(13));
  row.pid = rs.getUInt(col(14));
  row.acquired_at = rs.getString(col(15));
  row.held_for_us = rs.getInt64(col(16));
  return row;
}

HoldRows::HoldRows(std::string table, std::shared_ptr<spdlog::logger> logger)
    : table_(std::move(table)), logger_(std::move(logger)), quoted_("`" + table_ + "`") {
  // The ring is the first assignment ("0 * ..." keeps state at 0): the bell
  // is given back while the statement still holds the row lock, so a woken
  // waiter's attempt waits for that lock and then reads the freed row.
  for (const bool ring : {false, true})
    for (const Marks marks : {Marks::kAny, Marks::kUnmarked, Marks::kMarked})
      for (const bool any_slot : {false, true}) {
        const char* marked =
            marks == Marks::kMarked ? " AND waiters = 1" : marks == Marks::kUnmarked ? " AND waiters = 0" : "";
        free_sql_[free_variant(ring, marks, any_slot)] =
            "UPDATE " + quoted_ + " SET " + (ring ? std::string("state = ") + kRingTerm + ", " : "") +
            fragments::free_assignments() + " WHERE " + key_match(any_slot) +
            " AND hold_id = ? AND " + fragments::live() + marked;
      }
}

HoldRow HoldRows::read(Connection& c, const RowKey& key) const {
  auto rows = select(c, "reading a row", key_match(key), [&](Binder& b) { bind_key(b, key); });
  if (!rows.empty()) return std::move(rows.front());
  HoldRow none;
  none.key = key;
  return none;
}

HoldRow HoldRows::read_state(Connection& c, const RowKey& key) const {
  return query(
      c, "reading a row",
      "SELECT " + fragments::live() +
          ", hold_id, TIMESTAMPDIFF(MICROSECOND, NOW(6), expire_time), IF("
          "intent_expire > NOW(6), intent_id, 0), TIMESTAMPDIFF(MICROSECOND, NOW(6), intent_expire) FROM " +
          quoted_ + " WHERE " + key_match(key),
      [&](Binder& b) { bind_key(b, key); },
      [&](sql::ResultSet& rs) {
        HoldRow row;
        row.key = key;
        if (!rs.next()) return row;
        row.exists = true;
        row.live = rs.getInt(1) == 1;
        row.intent_id = rs.getUInt64(4);
        if (row.intent_id != 0) row.intent_ttl_us = rs.getInt64(5);
        if (!row.live) return row;
        row.hold_id = rs.getUInt64(2);
        row.ttl_us = rs.getInt64(3);
        return row;
      });
}

std::optional<HoldRow> HoldRows::find(Connection& c, Kind kind, std::string_view name, std::uint64_t hold_id) const {
  auto rows = select(c, "reading a hold", "kind = ? AND lock_name = ? AND hold_id = ? AND " + fragments::live(),
                     [&](Binder& b) { b.u64(static_cast<std::uint64_t>(kind)).text(name).u64(hold_id); });
  if (rows.empty()) return std::nullopt;
  return std::move(rows.front());
}

std::vector<HoldRow> HoldRows::read_name(Connection& c, Kind kind, std::string_view name) const {
  return select(c, "reading rows", "kind = ? AND lock_name = ?",
                [&](Binder& b) { b.u64(static_cast<std::uint64_t>(kind)).text(name); });
}

std::vector<HoldRow> HoldRows::read_holds(Connection& c, const std::vector<HeldRow>& holds) const {
  std::vector<HoldRow> rows;
  for_each_hold_chunk(holds, [&](const HoldList& list) {
    auto chunk = select(c, "reading rows", list.sql() + " AND " + fragments::live(), [&](Binder& b) { list.bind(b); });
    std::move(chunk.begin(), chunk.end(), std::back_inserter(rows));
  });
  return rows;
}

std::size_t HoldRows::count_live(Connection& c, Kind kind, std::string_view name) const {
  return query(
      c, "counting holds",
      "SELECT COUNT(*) FROM " + quoted_ + " WHERE kind = ? AND lock_name = ? AND " + fragments::live(),
      [&](Binder& b) { b.u64(static_cast<std::uint64_t>(kind)).text(name); },
      [&](sql::ResultSet& rs) { return rs.next() ? static_cast<std::size_t>(rs.getUInt64(1)) : std::size_t{0}; });
}

std::vector<HoldRow> HoldRows::read_live(Connection& c, const std::vector<Kind>& kinds) const {
  return select(c, "listing holds",
                (kinds.empty() ? std::string() : kinds_in(kinds.size()) + " AND ") + fragments::live() +
                    " ORDER BY kind, lock_name, slot",
                [&](Binder& b) { bind_kinds(b, kinds); });
}

template <class Bind>
std::vector<HoldRow> HoldRows::select(Connection& c, const char* what, const std::string& where, Bind&& bind) const {
  return query(c, what, "SELECT " + fragments::row_columns() + " FROM " + quoted_ + " WHERE " + where, bind,
               [](sql::ResultSet& rs) {
                 std::vector<HoldRow> rows;
                 while (rs.next()) rows.push_back(to_hold_row(rs));
                 return rows;
               });
}

bool HoldRows::retake(Connection& c, const RowKey& key, std::uint64_t hold_id, unsigned state, std::int64_t lease_us,
                      bool watchdog) const {
  return run(c, "re-entering a hold", [&] { return retake_once(c, key, hold_id, state, lease_us, watchdog) ? 1 : 0; }) > 0;
}

bool HoldRows::retake_once(Connection& c, const RowKey& key, std::uint64_t hold_id, unsigned state,
                           std::int64_t lease_us, bool watchdog) const {
  auto& ps = c.prepared("UPDATE " + quoted_ + " SET state = ?, watchdog = ?, expire_time = NOW(6) + INTERVAL ? MICROSECOND WHERE " +
                        key_match(key) + " AND hold_id = ? AND " + fragments::live());
  Binder b(ps);
  b.u64(state).flag(watchdog).i64(written_lease_us(lease_us));
  bind_key(b, key);
  b.u64(hold_id);
  return execute_update(ps) > 0;
}

bool HoldRows::release_to(Connection& c, const RowKey& key, std::uint64_t hold_id, unsigned state) const {
  return update(c, "releasing a hold",
                "UPDATE " + quoted_ + " SET state = ? WHERE " + key_match(key) + " AND hold_id = ? AND " +
                    fragments::live(),
                [&](Binder& b) {
                  bind_key(b.u64(state), key);
                  b.u64(hold_id);
                }) > 0;
}

bool HoldRows::free(Connection& c, const RowKey& key, std::uint64_t hold_id, std::int64_t at_least_us, Marks marks,
                    bool ring) const {
  return run_free(c, "releasing a hold", ring, [&] {
    auto& ps = c.prepared(free_sql_[free_variant(ring, marks, key.slot == kAnySlot)]);
    Binder b(ps);
    if (ring) bind_ring(b, c);
    b.i64(at_least_us);
    bind_key(b, key);
    b.u64(hold_id);
    return execute_update(ps);
  });
}

std::size_t HoldRows::renew(Connection& c, const std::vector<HeldRow>& holds, std::int64_t lease_us) const {
  std::size_t renewed = 0;
  for_each_hold_chunk(holds, [&](const HoldList& list) {
    renewed += static_cast<std::size_t>(update(c, "renewing leases",
                                               "UPDATE " + quoted_ +
                                                   " SET expire_time = NOW(6) + INTERVAL ? MICROSECOND WHERE " +
                                                   list.sql() + " AND watchdog = 1 AND " + fragments::live(),
                                               [&](Binder& b) { list.bind(b.i64(written_lease_us(lease_us))); }));
  });
  return renewed;
}

std::size_t HoldRows::renew_skipping_locked(Connection& c, const std::vector<HeldRow>& holds,
                                            std::int64_t lease_us) const {
  return update_skipping_locked(
      c, holds, "renewing leases around locked rows", "expire_time = NOW(6) + INTERVAL ? MICROSECOND",
      [&](Binder& b) { b.i64(written_lease_us(lease_us)); }, "watchdog = 1 AND " + fragments::live(), [](Binder&) {});
}

std::size_t HoldRows::free_all(Connection& c, const std::vector<HeldRow>& holds, bool ring) const {
  std::size_t freed = 0;
  std::size_t first = 0;
  for_each_hold_chunk(holds, [&](const HoldList& list) {
    // The ring is evaluated for one row only, the chunk's first hold (once
    // is enough, and it costs two user-lock calls per row it runs on). So
    // whether it rang is known only when every row changed, or none did;
    // otherwise the session's bell is unknown and the session is closed
    // (which gives back whatever it holds).
    const bool rings = ring && first == 0;
    const std::size_t size = std::min(kInListChunk, holds.size() - first);
    std::int64_t n = 0;
    try {
      n = run(c, "releasing holds", [&] {
        auto& ps = c.prepared("UPDATE " + quoted_ + " SET " +
                              (rings ? std::string("state = IF(") + key_match(holds[first].key) + " AND hold_id = ?, " +
                                           kRingTerm + ", 0), "
                                     : "") +
                              fragments::free_assignments() + " WHERE " + list.sql() + " AND " + fragments::live());
        Binder b(ps);
        if (rings) {
          bind_key(b, holds[first].key);
          b.u64(holds[first].hold_id);
          bind_ring(b, c);
        }
        b.i64(0);
        list.bind(b);
        return execute_update(ps);
      });
    } catch (const BackendError&) {
      if (rings) c.mark_broken();
      throw;
    }
    if (rings) {
      if (n == 0 || static_cast<std::size_t>(n) == size) {
        rang(c, n > 0);
      } else {
        c.mark_broken();
      }
    }
    freed += static_cast<std::size_t>(n);
    first += size;
  });
  return freed;
}

std::size_t HoldRows::restamp(Connection& c, const std::vector<HeldRow>& holds, const std::string& from,
                              const std::string* to) const {
  // Rows another transaction has locked are skipped, not waited for (their
  // waiters fall back to the poll): this runs after a ring, often on the io
  // thread, which must not wait out a lock.
  return update_skipping_locked(
      c, holds, "re-stamping a session bell", "bell = ?", [&](Binder& b) { b.text(to != nullptr ? *to : kNoBell); },
      "bell = ?", [&](Binder& b) { b.text(from); });
}

template <class BindSet, class BindCondition>
std::size_t HoldRows::update_skipping_locked(Connection& c, const std::vector<HeldRow>& holds, const char* what,
                                             const std::string& set, BindSet&& bind_set, const std::string& condition,
                                             BindCondition&& bind_condition) const {
  std::size_t changed = 0;
  for_each_hold_chunk(holds, [&](const HoldList& list) {
    changed += static_cast<std::size_t>(run(c, what, [&] {
      c.execute_plain("START TRANSACTION");
      try {
        std::vector<HeldRow> unlocked;
        {
          auto& ps = c.prepared("SELECT kind, lock_name, slot, hold_id FROM " + quoted_ + " WHERE " + list.sql() +
                                " AND " + condition + " FOR UPDATE SKIP LOCKED");
          Binder b(ps);
          list.bind(b);
          bind_condition(b);
          std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
          while (rs->next())
            unlocked.push_back(
                HeldRow{RowKey{static_cast<Kind>(rs->getUInt(1)), rs->getString(2), rs->getUInt64(3)}, rs->getUInt64(4)});
        }
        std::int64_t n = 0;
        if (!unlocked.empty()) {
          const HoldList rows(unlocked, 0, unlocked.size());
          auto& ps = c.prepared("UPDATE " + quoted_ + " SET " + set + " WHERE " + rows.sql() + " AND " + condition);
          Binder b(ps);
          bind_set(b);
          rows.bind(b);
          bind_condition(b);
          n = execute_update(ps);
        }
        c.execute_plain("COMMIT");
        return n;
      } catch (...) {
        try {
          c.execute_plain("ROLLBACK");
        } catch (const sql::SQLException&) {
          c.mark_broken();
        }
        throw;
      }
    }));
  });
  return changed;
}

std::vector<HoldRows::Watched> HoldRows::watched(Connection& c, const std::vector<Kind>& kinds,
                                                 std::string_view name) const {
  return query(
      c, "reading a waited-for row",
      "SELECT kind, slot, hold_id, bell, waiters FROM " + quoted_ + " WHERE " + kinds_in(kinds.size()) +
          " AND lock_name = ? AND " + fragments::live() + " ORDER BY expire_time",
      [&](Binder& b) {
        bind_kinds(b, kinds);
        b.text(name);
      },
      [&](sql::ResultSet& rs) {
        std::vector<Watched> out;
        while (rs.next()) {
          out.push_back(Watched{static_cast<Kind>(rs.getUInt(1)), rs.getUInt64(2), rs.getUInt64(3), rs.getString(4),
                                rs.getInt(5) == 1});
        }
        return out;
      });
}

std::size_t HoldRows::mark(Connection& c, const std::vector<Kind>& kinds, std::string_view name,
                           std::uint64_t own_tag) const {
  // Matched by the row, not the hold id: a local handoff makes a new hold
  // but keeps the bell and the mark, so on a hot lock the mark still lands,
  // and the release that ends the chain rings.
  return static_cast<std::size_t>(update(c, "marking rows as waited for",
                                         "UPDATE " + quoted_ + " SET waiters = 1 WHERE " + kinds_in(kinds.size()) +
                                             " AND lock_name = ? AND waiters = 0 AND bell <> '' AND hold_id >> 48 <> ?"
                                             " AND expire_time > acquired_at"
                                             " AND " +
                                             fragments::live(),
                                         [&](Binder& b) {
                                           bind_kinds(b, kinds);
                                           b.text(name).u64(own_tag);
                                         }));
}

std::vector<std::string> HoldRows::set_intent(Connection& c, Kind kind, const std::vector<std::string>& names,
                                              std::uint64_t client_key, std::int64_t lease_us) const {
  std::vector<std::string> held;
  for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    const auto changed = update(c, "marking a waiting client",
                                "UPDATE " + quoted_ +
                                    " SET intent_id = ?, intent_expire = NOW(6) + INTERVAL ? MICROSECOND WHERE kind = ?"
                                    " AND slot = 0 AND lock_name IN (" +
                                    placeholders(bucket) + ") AND " + fragments::no_foreign_intent(),
                                [&](Binder& b) {
                                  bind_texts(b.u64(client_key).i64(lease_us).u64(static_cast<std::uint64_t>(kind)),
                                             names, first, count, bucket);
                                  b.u64(client_key);
                                });
    if (static_cast<std::size_t>(changed) == count) {
      held.insert(held.end(), names.begin() + static_cast<std::ptrdiff_t>(first),
                  names.begin() + static_cast<std::ptrdiff_t>(first + count));
      return;
    }
    if (changed == 0 && count == 1) return;
    query(
        c, "reading waiting clients",
        "SELECT lock_name FROM " + quoted_ + " WHERE kind = ? AND slot = 0 AND lock_name IN (" + placeholders(bucket) +
            ") AND intent_id = ? AND intent_expire > NOW(6)",
        [&](Binder& b) {
          b.u64(static_cast<std::uint64_t>(kind));
          bind_texts(b, names, first, count, bucket);
          b.u64(client_key);
        },
        [&](sql::ResultSet& rs) {
          while (rs.next()) held.push_back(rs.getString(1));
        });
  });
  return held;
}

void HoldRows::clear_intent(Connection& c, Kind kind, std::string_view name, std::uint64_t client_key) const {
  update(c, "unmarking a waiting client",
         "UPDATE " + quoted_ + " SET intent_id = 0 WHERE kind = ? AND lock_name = ? AND slot = 0 AND intent_id = ?",
         [&](Binder& b) { b.u64(static_cast<std::uint64_t>(kind)).text(name).u64(client_key); });
}

std::size_t HoldRows::force(Connection& c, Kind kind, std::string_view name, bool slot_zero_only) const {
  return static_cast<std::size_t>(
      update(c, "force-unlocking",
             "UPDATE " + quoted_ + " SET " + fragments::free_assignments() + " WHERE kind = ? AND lock_name = ? AND " +
                 fragments::live() + (slot_zero_only ? " AND slot = 0" : ""),
             [&](Binder& b) { b.i64(0).u64(static_cast<std::uint64_t>(kind)).text(name); }));
}

}  // namespace dlock::details
