// The reentrant lock: row (1, name, 0). A fresh take is one conditional
// UPDATE of a row known to exist (an upsert on a name's first use here);
// it succeeds while the row is free or expired and no other client's
// intent is live (intent_id: a waiter that cannot be rung goes next).
// A release, a re-entry and a renewal are the engine's generic statements.
// Several names are taken together by the multi-lock (primitives/multi_lock/);
// the election's kind is this one on its own rows, with columns of its own
// (primitives/election/election_kind.cpp).
#include <cppconn/prepared_statement.h>

#include <spdlog/spdlog.h>

#include <utility>

#include "base/micros.hpp"
#include "base/printable.hpp"
#include "base/known_rows.hpp"
#include "base/string_map.hpp"
#include "engine/kind_context.hpp"
#include "primitives/kinds.hpp"
#include "primitives/lock/lock_kind.hpp"
#include "sql/bells.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

HoldKind::Traits LockKind::lock_traits(Kind kind) {
  HoldKind::Traits t;
  t.kind = kind;
  t.serial = kind;
  t.intents = HoldKind::Traits::Intent::kWhenNotRung;
  t.blocked_by = {kind};
  t.wake = WakePolicy::kLine;  // waiting clients take turns (one line per name)
  return t;
}

LockKind::LockKind(const HoldRows& rows, Traits kind_traits, Columns columns)
    : HoldKind(std::move(kind_traits)), columns_(std::move(columns)) {
  const std::string& q = rows.quoted();
  const std::string k = kind_sql(this->traits.kind);
  const std::string where = " WHERE kind = " + k + " AND lock_name = ? AND slot = 0";
  const std::string extra_take = columns_.take.empty() ? "" : ", " + columns_.take;
  // Taken while free or expired. A run after an unknown outcome (the
  // second run of run_reconciled) also takes the row carrying its own fresh
  // hold id: its earlier run, landed where the reconciling read missed it.
  // A fresh hold id matches no live row, so no live hold is ever taken
  // over. Only a client with an intent on the row clears it, so the usual
  // take leaves intent_id alone.
  for (const bool clears : {false, true})
    for (const bool rerun : {false, true})
      take_sql_[take_variant(clears, rerun)] =
          "UPDATE " + q + " SET " + fragments::take_assignments("", "fence + 1") +
          (clears ? ", intent_id = IF(intent_id = ?, 0, intent_id)" : "") + extra_take + where +
          (rerun ? " AND (expire_time <= NOW(6) OR hold_id = ?)" : " AND expire_time <= NOW(6)") + " AND " +
          fragments::no_foreign_intent();
  // ON DUPLICATE KEY UPDATE assigns left to right and later expressions
  // see earlier assignments. So every column `takeable` reads is assigned
  // after its last use; once hold_id is assigned, "the hold id is ours"
  // decides the rest. A refused attempt changes no column, so the server
  // reports 0 affected rows; 1 = inserted, 2 = taken.
  const std::string takeable =
      "((expire_time <= NOW(6) OR hold_id = ?) AND (intent_id = 0 OR intent_id = ? OR intent_expire <= NOW(6)))";
  const auto if_takeable = [&](const std::string& column, const std::string& value) {
    return column + " = IF(" + takeable + ", " + value + ", " + column + ")";
  };
  const std::string mine = "(hold_id = ?)";
  std::string extra_names;
  std::string extra_values;
  std::string extra_updates;
  for (const auto& column : columns_.upsert) {
    extra_names += ", " + column.name;
    extra_values += ", " + column.insert;
    extra_updates += if_takeable(column.name, column.update) + ", ";
  }
  upsert_sql_ = "INSERT INTO " + q +
                " (kind, lock_name, slot, fence, state, watchdog, owner_id, hold_id, machine_id, holder_host,"
                " holder_pid, acquired_at, expire_time, bell, waiters" + extra_names +
                ") VALUES (" + k + ", ?, 0, 1, ?, ?, ?, ?, ?, ?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND, ?, 0" +
                extra_values + ") ON DUPLICATE KEY UPDATE " +
                if_takeable("fence", "fence + 1") + ", " + if_takeable("state", "?") + ", " +
                if_takeable("watchdog", "?") + ", " + if_takeable("owner_id", "?") + ", " +
                if_takeable("machine_id", "?") + ", " + if_takeable("holder_host", "?") + ", " +
                if_takeable("holder_pid", "?") + ", " + if_takeable("acquired_at", "NOW(6)") + ", " +
                extra_updates +
                if_takeable("hold_id", "?") + ", bell = IF(" + mine + ", ?, bell), waiters = IF(" + mine +
                ", 0, waiters), intent_id = IF(" + mine + " AND intent_id = ?, 0, intent_id), expire_time = IF(" +
                mine + ", NOW(6) + INTERVAL ? MICROSECOND, expire_time)";
  // The fence is assigned before hold_id, so its IF still sees the hold
  // the row had: a re-run that finds its own earlier run applied adds
  // nothing. The bell and the waiters mark stay: the new hold is rung
  // from the old one's session.
  hand_over_sql_ = "UPDATE " + q + " SET " + fragments::hand_over_assignments("", 1) +
                   ", intent_id = IF(intent_id = ?, 0, intent_id)" + where + " AND hold_id IN (?, ?) AND " +
                   fragments::live() + " AND " + fragments::no_foreign_intent();
  poll_sql_ = "SELECT lock_name, " + fragments::live() + ", IF(intent_expire > NOW(6), intent_id, 0), hold_id, revision FROM " +
              q + " WHERE kind = " + k + " AND slot = 0 AND lock_name IN (";
}

HoldKind::Taken LockKind::take(KindContext& e, const AcquireRequest& r, const Holder& holder) {
  Taken t;
  const std::string_view name = r.key.name;
  const bool known = known_.contains(name);
  const std::int64_t lease_us = micros(r.lease);
  std::int64_t changed = 0;  // 0 after an unknown outcome
  const bool clears = known && e.intends(NameKeyView{traits.kind, name});
  t.cleared_intent = clears || !known;  // the upsert clears it always
  bool ran = false;
  t.taken = e.take_reconciled(t, r.key, holder.hold_id, KindContext::TakeLearns::kSlotAndFence,
                              [&](Connection& c, const std::string* bell) {
    const bool rerun = std::exchange(ran, true);
    changed = e.rows().update(c, "taking a lock", known ? take_sql_[take_variant(clears, rerun)] : upsert_sql_,
                              [&](Binder& b) {
                                if (known) {
                                  bind_hold(b, holder, 1, lease_us, r.watchdog, bell);
                                  if (clears) b.u64(e.client_key());
                                  if (columns_.take.find('?') != std::string::npos) b.text(r.value);
                                  b.text(name);
                                  if (rerun) b.u64(holder.hold_id);
                                  b.u64(e.client_key());
                                } else {
                                  bind_upsert(b, e, name, holder, lease_us, r.watchdog, bell, r.value);
                                }
                              });
    return changed > 0;
  });
  if (!known) {
    known_.add(name);  // the upsert leaves a row either way
    if (changed == 1) t.fence = 1;
  } else if (!t.taken) {
    // Refused, or the row is gone (deleted behind the client's back): look.
    HoldRow row =
        e.read([&](Connection& c) { return e.rows().read_state(c, RowKey{traits.kind, std::string(name), 0}); });
    if (!row.exists) {
      known_.forget(name);
      return take(e, r, holder);
    }
    t.seen = std::move(row);
  }
  if (t.taken) taken(e, name, holder.hold_id, t);
  return t;
}

HoldKind::Refusal LockKind::refused(KindContext& e, const AcquireRequest& r, const Taken& t) {
  const HoldRow row = t.seen ? *t.seen : e.read([&](Connection& c) {
    return e.rows().read_state(c, RowKey{traits.kind, r.key.name, 0});
  });
  if (!row.live) {
    // Free, but another client's waiter goes next: its take comes within
    // its poll interval.
    if (row.intent_id != 0 && row.intent_id != e.client_key()) return Refusal{row.intent_ttl_us, false};
    return Refusal{0, false};  // freed since: try again at once
  }
  return Refusal{row.ttl_us.value_or(0), !e.is_this_clients(row.hold_id)};
}

bool LockKind::hand_over(KindContext& e, Connection& c, const RowKey& row, std::uint64_t from, std::uint64_t to,
                         const AcquireRequest& request) {
  return e.rows().update(c, "handing a lock over", hand_over_sql_, [&](Binder& b) {
    bind_hand_over(b, to, request.watchdog, request.owner, micros(request.lease));
    b.u64(e.client_key()).text(row.name).u64(from).u64(to).u64(e.client_key());
  }) > 0;
}

// Returns the names held by another client's hold other than the one the
// previous poll saw: a release came and went between two polls, and the
// waiters here lost the race for it (so they set their intent on the row,
// see Traits::intents). A name held by one long hold costs no intent, nor
// one retaken by this client's threads (their releases wake the waiters
// here, and an intent would keep other clients out).
std::vector<std::string> LockKind::poll(KindContext& e, Connection& c, const std::vector<std::string>& names) {
  std::vector<std::string> retaken;
  StringMap<std::uint64_t> seen;
  for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
    e.rows().query(
        c, "polling waited-for locks", poll_sql_ + placeholders(bucket) + ")",
        [&](Binder& b) { bind_texts(b, names, first, count, bucket); },
        [&](sql::ResultSet& rs) {
          while (rs.next()) {
            const std::string name = rs.getString(1);
            const bool live = rs.getInt(2) == 1;
            polled(e, name, live, rs.getUInt64(5));
            if (live) {
              const std::uint64_t hold_id = rs.getUInt64(4);
              const auto before = polled_holds_.find(name);
              if (before != polled_holds_.end() && before->second != hold_id && !e.is_this_clients(hold_id))
                retaken.push_back(name);
              seen.emplace(name, hold_id);
              continue;
            }
            const NameKeyView key{traits.kind, name};
            e.hint_free_if_held_here(key);  // that local hold is lost
            const std::uint64_t intent = rs.getUInt64(3);
            if (intent == 0 || intent == e.client_key()) e.waiters().wake_one(key);
            seen.emplace(name, 0);  // held at the next poll: the woken waiter lost the race
          }
        });
  });
  polled_holds_ = std::move(seen);  // only the names waited for now
  poll_ended();
  return retaken;
}

bool LockKind::is_locked(KindContext& e, std::string_view name) { return row(e, traits.kind, name).live; }

std::optional<std::int64_t> LockKind::ttl_us(KindContext& e, std::string_view name) {
  const HoldRow r = row(e, traits.kind, name);
  return r.live ? r.ttl_us : std::nullopt;
}

HoldRow LockKind::row(KindContext& e, Kind kind, std::string_view name) {
  return e.read([&](Connection& c) { return e.rows().read(c, RowKey{kind, std::string(name), 0}); });
}

void LockKind::bind_upsert(Binder& b, KindContext& e, std::string_view name, const Holder& h, std::int64_t lease_us,
                           bool watchdog, const std::string* bell, const std::string& value) const {
  static const std::string kNoBell;
  const std::string& bell_text = bell != nullptr ? *bell : kNoBell;
  b.text(name).u64(1).flag(watchdog).u64(h.owner).u64(h.hold_id).text(h.label).text(h.host).u64(h.pid);
  b.i64(written_lease_us(lease_us)).text(bell_text);
  for (const auto& column : columns_.upsert)  // the kind's own columns' insert values
    if (column.insert.find('?') != std::string::npos) b.text(value);
  const auto takeable = [&] { b.u64(h.hold_id).u64(e.client_key()); };
  takeable();                                  // fence
  takeable(), b.u64(1);                        // state
  takeable(), b.flag(watchdog);                // watchdog
  takeable(), b.u64(h.owner);                  // owner_id
  takeable(), b.text(h.label);                 // machine_id
  takeable(), b.text(h.host);                  // holder_host
  takeable(), b.u64(h.pid);                    // holder_pid
  takeable();                                  // acquired_at
  for (const auto& column : columns_.upsert) {  // the kind's own columns
    takeable();
    if (column.update.find('?') != std::string::npos) b.text(value);
  }
  takeable(), b.u64(h.hold_id);                // hold_id
  b.u64(h.hold_id).text(bell_text);            // bell
  b.u64(h.hold_id);                            // waiters
  b.u64(h.hold_id).u64(e.client_key());        // intent_id
  b.u64(h.hold_id).i64(written_lease_us(lease_us));  // expire_time
}


std::unique_ptr<HoldKind> make_lock_kind(const HoldRows& rows) {
  return std::make_unique<LockKind>(rows, LockKind::lock_traits(Kind::kLock));
}

}  // namespace dlock::details
