// The reentrant lock: row (1, name, 0). A fresh take is one conditional
// UPDATE of a row known to exist (an upsert on a name's first use here);
// it succeeds while the row is free or expired and no other client's
// waiting mark is live (intent_id: a waiter that cannot be rung goes next).
// A release, a re-entry and a renewal are the engine's generic statements.
// Several names are taken together by the multi-lock (primitives/multi_lock/).
//
// The election (get_election) is the same hold on its own row (6, name, 0):
// its take also writes the candidate's value and adds one to the
// election's revision (sql/election_rows.hpp), in the same statement. A
// release never hands leadership straight to a local candidate (the
// candidate's own take writes its value), and the poller tells observers
// when the election's view changed.
#include <cppconn/prepared_statement.h>

#include <spdlog/spdlog.h>

#include "base/micros.hpp"
#include "base/printable.hpp"
#include "base/known_rows.hpp"
#include "base/string_map.hpp"
#include "engine/engine.hpp"
#include "primitives/kinds.hpp"
#include "sql/bells.hpp"
#include "sql/election_rows.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

namespace {

HoldKind::Traits lock_traits(Kind kind) {
  HoldKind::Traits t;
  t.kind = kind;
  t.serial = kind;
  t.intents = HoldKind::Traits::Intent::kWhenNotRung;
  t.blocked_by = {kind};
  // Waiting clients take turns (one line per name); an election's
  // observers must all hear each take and release.
  t.wake = WakePolicy::kLine;
  if (kind == Kind::kElection) {
    t.hands_over = false;
    t.takes_are_news = true;
    t.wake = WakePolicy::kEveryone;
  }
  return t;
}

class LockKind final : public HoldKind {
 public:
  LockKind(const HoldRows& rows, Kind kind)
      : HoldKind(lock_traits(kind)), election_(kind == Kind::kElection), elections_(rows) {
    const std::string& q = rows.quoted();
    const std::string k = std::to_string(static_cast<int>(kind));
    const std::string where = " WHERE kind = " + k + " AND lock_name = ? AND slot = 0";
    const std::string election_take = election_ ? ", " + ElectionRows::take_assignments() : "";
    // Taken while free or expired, or carrying the take's own fresh hold id:
    // its own earlier run, met only when a statement whose outcome was
    // unknown runs again. A fresh hold id matches no live row, so no live
    // hold is ever taken over.
    take_sql_ = "UPDATE " + q + " SET " + fragments::take_assignments("", "fence + 1") +
                ", intent_id = IF(intent_id = ?, 0, intent_id)" + election_take + where +
                " AND (expire_time <= NOW(6) OR hold_id = ?) AND " + fragments::no_foreign_intent();
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
    upsert_sql_ = "INSERT INTO " + q +
                  " (kind, lock_name, slot, fence, state, watchdog, owner_id, hold_id, machine_id, holder_host,"
                  " holder_pid, acquired_at, expire_time, bell, waiters" + std::string(election_ ? ", revision, value" : "") +
                  ") VALUES (" + k + ", ?, 0, 1, ?, ?, ?, ?, ?, ?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND, ?, 0" +
                  std::string(election_ ? ", 1, ?" : "") + ") ON DUPLICATE KEY UPDATE " +
                  if_takeable("fence", "fence + 1") + ", " + if_takeable("state", "?") + ", " +
                  if_takeable("watchdog", "?") + ", " + if_takeable("owner_id", "?") + ", " +
                  if_takeable("machine_id", "?") + ", " + if_takeable("holder_host", "?") + ", " +
                  if_takeable("holder_pid", "?") + ", " + if_takeable("acquired_at", "NOW(6)") + ", " +
                  (election_ ? if_takeable("revision", "revision + 1") + ", " + if_takeable("value", "?") + ", " : "") +
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

  Taken take(Engine& e, const AcquireRequest& r, const Holder& holder) override {
    Taken t;
    const std::string_view name = r.key.name;
    const bool known = known_.contains(name);
    const std::int64_t lease_us = micros(r.lease);
    std::int64_t changed = 0;  // 0 after an unknown outcome
    t.taken = e.take_reconciled(t, r.key, holder.hold_id, Engine::TakeLearns::kSlotAndFence,
                                [&](Connection& c, const std::string* bell) {
      changed = e.rows().run(c, "taking a lock", [&] {
        auto& ps = c.prepared(known ? take_sql_ : upsert_sql_);
        Binder b(ps);
        if (known) {
          bind_hold(b, holder, 1, lease_us, r.watchdog, bell);
          b.u64(e.client_key());
          if (election_) b.text(r.value);
          b.text(name).u64(holder.hold_id).u64(e.client_key());
        } else {
          bind_upsert(b, e, name, holder, lease_us, r.watchdog, bell, election_ ? &r.value : nullptr);
        }
        return execute_update(ps);
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
    if (election_ && t.taken) after_election_take(e, name, holder.hold_id, t);
    return t;
  }

  // The read every campaign makes anyway for its term, which also finds the
  // observers parked on the election while it had no leader: they are
  // woken off this thread. The take stands whatever this read meets.
  void after_election_take(Engine& e, std::string_view name, std::uint64_t hold_id, Taken& t) {
    try {
      AfterElectionTake after =
          e.read([&](Connection& c) { return elections_.read_after_take(c, name, hold_id); });
      if (after.held && t.fence == 0) t.fence = after.fence;
      if (!after.observers.empty()) e.wake_parked_observers(std::string(name), std::move(after.observers));
    } catch (const std::exception& ex) {
      e.logger()->debug("dlock: election {}: reading its observers after a take failed: {}", printable(name),
                        ex.what());
    }
  }

  Refusal refused(Engine& e, const AcquireRequest& r, const Taken& t) override {
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

  bool hand_over(Engine& e, Connection& c, const RowKey& row, std::uint64_t from, std::uint64_t to,
                 const AcquireRequest& request) override {
    return e.rows().run(c, "handing a lock over", [&] {
             auto& ps = c.prepared(hand_over_sql_);
             Binder b(ps);
             bind_hand_over(b, to, request.watchdog, request.owner, micros(request.lease));
             b.u64(e.client_key()).text(row.name).u64(from).u64(to).u64(e.client_key());
             return execute_update(ps);
           }) > 0;
  }

  // Returns the names held by another hold than the one the previous poll
  // saw: a release came and went between two polls, and the waiters here
  // lost the race for it (so they mark the row, see Traits::intents). A
  // name held by one long hold costs no mark.
  std::vector<std::string> poll(Engine& e, Connection& c, const std::vector<std::string>& names) override {
    std::vector<std::string> retaken;
    StringMap<std::uint64_t> seen;
    StringMap<std::uint64_t> views;
    for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
      e.rows().run(c, "polling waited-for locks", [&] {
        auto& ps = c.prepared(poll_sql_ + placeholders(bucket) + ")");
        Binder b(ps);
        bind_texts(b, names, first, count, bucket);
        std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
        while (rs->next()) {
          const std::string name = rs->getString(1);
          const bool live = rs->getInt(2) == 1;
          if (election_) {
            // Observers hear of every change of the view (a proclaim, a new
            // leader, a lease that ran out) at the poll at the latest; of a
            // row not seen at the previous poll too (an observer looks
            // again: the row may have changed since it looked).
            const std::uint64_t view = 2 * rs->getUInt64(5) + (live ? 0 : 1);
            const auto before = polled_views_.find(name);
            if (before == polled_views_.end() || before->second != view)
              e.waiters().tell_watchers(NameKeyView{traits.kind, name});
            views.emplace(name, view);
          }
          if (live) {
            const std::uint64_t hold_id = rs->getUInt64(4);
            const auto before = polled_holds_.find(name);
            if (before != polled_holds_.end() && before->second != hold_id) retaken.push_back(name);
            seen.emplace(name, hold_id);
            continue;
          }
          const NameKeyView key{traits.kind, name};
          e.hint_free_if_held_here(key);  // that local hold is lost
          const std::uint64_t intent = rs->getUInt64(3);
          if (intent == 0 || intent == e.client_key()) e.waiters().wake_one(key);
          seen.emplace(name, 0);  // held at the next poll: the woken waiter lost the race
        }
        return 0;
      });
    });
    polled_holds_ = std::move(seen);  // only the names waited for now
    polled_views_ = std::move(views);
    return retaken;
  }

  bool is_locked(Engine& e, std::string_view name) override { return row(e, traits.kind, name).live; }

  std::optional<std::int64_t> ttl_us(Engine& e, std::string_view name) override {
    const HoldRow r = row(e, traits.kind, name);
    return r.live ? r.ttl_us : std::nullopt;
  }

 private:
  StringMap<std::uint64_t> polled_holds_;  // the hold each waited-for name had at the last poll (io thread)
  StringMap<std::uint64_t> polled_views_;  // an election's view revision at the last poll (io thread)

  static HoldRow row(Engine& e, Kind kind, std::string_view name) {
    return e.read([&](Connection& c) { return e.rows().read(c, RowKey{kind, std::string(name), 0}); });
  }

  static void bind_upsert(Binder& b, Engine& e, std::string_view name, const Holder& h, std::int64_t lease_us,
                          bool watchdog, const std::string* bell, const std::string* value) {
    static const std::string kNoBell;
    const std::string& bell_text = bell != nullptr ? *bell : kNoBell;
    b.text(name).u64(1).flag(watchdog).u64(h.owner).u64(h.hold_id).text(h.label).text(h.host).u64(h.pid);
    b.i64(written_lease_us(lease_us)).text(bell_text);
    if (value != nullptr) b.text(*value);
    const auto takeable = [&] { b.u64(h.hold_id).u64(e.client_key()); };
    takeable();                                  // fence
    takeable(), b.u64(1);                        // state
    takeable(), b.flag(watchdog);                // watchdog
    takeable(), b.u64(h.owner);                  // owner_id
    takeable(), b.text(h.label);                 // machine_id
    takeable(), b.text(h.host);                  // holder_host
    takeable(), b.u64(h.pid);                    // holder_pid
    takeable();                                  // acquired_at
    if (value != nullptr) {
      takeable();                                // revision
      takeable(), b.text(*value);                // value
    }
    takeable(), b.u64(h.hold_id);                // hold_id
    b.u64(h.hold_id).text(bell_text);            // bell
    b.u64(h.hold_id);                            // waiters
    b.u64(h.hold_id).u64(e.client_key());        // intent_id
    b.u64(h.hold_id).i64(written_lease_us(lease_us));  // expire_time
  }

  const bool election_;
  KnownRows known_;
  const ElectionRows elections_;
  std::string take_sql_;
  std::string upsert_sql_;
  std::string hand_over_sql_;
  std::string poll_sql_;
};

}  // namespace

std::unique_ptr<HoldKind> make_lock_kind(const HoldRows& rows) { return std::make_unique<LockKind>(rows, Kind::kLock); }

std::unique_ptr<HoldKind> make_election_kind(const HoldRows& rows) {
  return std::make_unique<LockKind>(rows, Kind::kElection);
}

}  // namespace dlock::details
