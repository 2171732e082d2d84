// The fair lock: its hold is row (5, name, 0), taken and released like the
// lock's; its waiters queue in rows (5, name, slot > 0), one per waiting
// request (slot: the client's 48-bit key, then a number of its own), in the
// order they joined (acquired_at, then slot). A queue entry is live while
// its mark (intent_expire) is ahead: the client's poller renews it, so the
// entry of a dead process is passed over within 3 poll intervals. An entry
// carries the hold its waiter will get (hold id, owner, mode, lease, the
// bell of the session that joined), and its expire_time never moves: no
// generic statement (renewal, force, listings) ever sees it as a hold.
//
// The head's intent_expire says "the queue may be non-empty until then"
// (the latest mark of any entry), so the uncontended take and release stay
// single-row statements: a take is refused while it is ahead (no barging),
// a release frees quietly only while it is past. Otherwise the release
// grants: in the same statement the first live entry's hold becomes the
// head's (new fence, the entry's mode and lease), the entry leaves the
// queue, and the releasing session's bell rings. The woken waiter reads the
// head (a locking read, so it waits for that commit) and holds the lock:
// no statement of its own takes it.
//
// A waiter that stops waiting leaves the queue (its mark moved into the
// past); if a release granted it the hold meanwhile, it releases that hold
// at once, which grants the next one.
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "base/known_rows.hpp"
#include "base/micros.hpp"
#include "base/printable.hpp"
#include "base/string_map.hpp"
#include "engine/engine.hpp"
#include "kinds/kinds.hpp"
#include "kinds/reader_slots.hpp"
#include "sql/bells.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

namespace {

constexpr const char* kPast = "'1970-01-02 00:00:00'";
// How soon a waiter asks again while the head is free and another waiter
// is first (its take, which rings nobody, is due at once).
constexpr std::int64_t kFirstWaiterRetryUs = 2000;

HoldKind::Traits fair_traits() {
  HoldKind::Traits t;
  t.kind = Kind::kFair;
  t.serial = Kind::kFair;
  t.hands_over = false;  // the release grants in SQL, to whoever is first
  t.queues = true;
  t.blocked_by = {Kind::kFair};
  return t;
}

std::uint64_t entry_slot(std::uint64_t client_key, std::uint32_t index) { return client_key << 16 | index; }

class FairKind final : public HoldKind {
 public:
  explicit FairKind(const HoldRows& rows) : HoldKind(fair_traits()) {
    const std::string& q = rows.quoted();
    const std::string head = " kind = 5 AND lock_name = ? AND slot = 0";
    make_head_sql_ = "INSERT INTO " + q + " (kind, lock_name, slot) VALUES (5, ?, 0) ON DUPLICATE KEY UPDATE slot = slot";
    // Free (or its own earlier run) and nobody queued.
    take_sql_ = "UPDATE " + q + " SET " + fragments::take_assignments("", "fence + 1") + " WHERE" + head +
                " AND (expire_time <= NOW(6) OR hold_id = ?) AND intent_expire <= NOW(6)";
    // The same while the head's queue mark is ahead but no entry is live:
    // the mark is stale, and goes.
    const std::string first_live = "(SELECT slot FROM " + q +
                                   " WHERE kind = 5 AND lock_name = ? AND slot > 0 AND intent_expire > NOW(6)"
                                   " ORDER BY acquired_at, slot LIMIT 1)";
    checked_take_sql_ = "UPDATE " + q + " h LEFT JOIN " + first_live + " w ON 1 = 1 SET " +
                        fragments::take_assignments("h.", "h.fence + 1") + ", h.intent_expire = " + kPast +
                        " WHERE h.kind = 5 AND h.lock_name = ? AND h.slot = 0 AND (h.expire_time <= NOW(6) OR"
                        " h.hold_id = ?) AND w.slot IS NULL";
    // Joining: the head's queue mark raised and the entry written, in one
    // statement (a two-row upsert whose update keeps the head's hold
    // columns). An entry joins anew at the back.
    const auto keep_head = [](const std::string& column, const std::string& value) {
      return column + " = IF(slot = 0, " + column + ", " + value + ")";
    };
    join_sql_ = "INSERT INTO " + q +
                " (kind, lock_name, slot, hold_id, owner_id, machine_id, holder_host, holder_pid, watchdog, lease_us,"
                " bell, acquired_at, intent_id, intent_expire) VALUES (5, ?, 0, 0, 0, '', '', 0, 0, 0, '', " +
                kPast + ", 0, NOW(6) + INTERVAL ? MICROSECOND), (5, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NOW(6), ?, NOW(6) +"
                " INTERVAL ? MICROSECOND) ON DUPLICATE KEY UPDATE " +
                keep_head("hold_id", "?") + ", " + keep_head("owner_id", "?") + ", " + keep_head("machine_id", "?") +
                ", " + keep_head("holder_host", "?") + ", " + keep_head("holder_pid", "?") + ", " +
                keep_head("watchdog", "?") + ", " + keep_head("lease_us", "?") + ", " + keep_head("bell", "?") + ", " +
                keep_head("acquired_at", "NOW(6)") + ", " + keep_head("intent_id", "?") +
                ", intent_expire = IF(slot = 0, GREATEST(intent_expire, NOW(6) + INTERVAL ? MICROSECOND), NOW(6) +"
                " INTERVAL ? MICROSECOND)";
    // A queued waiter looks: the head (waiting for a release's commit) and
    // whether its own entry is still queued.
    look_sql_ = "SELECT " + fragments::live("h.") +
                ", h.hold_id, h.fence, TIMESTAMPDIFF(MICROSECOND, NOW(6), h.expire_time), IF(e.intent_expire >"
                " NOW(6), 1, 0) FROM " + q + " h LEFT JOIN " + q +
                " e ON e.kind = 5 AND e.lock_name = h.lock_name AND e.slot = ? AND e.hold_id = ? WHERE h.kind = 5"
                " AND h.lock_name = ? AND h.slot = 0 LOCK IN SHARE MODE";
    // The hold goes to entry e: the head takes e's hold, e leaves the queue.
    const auto grant = [](const std::string& when, const std::string& ring) {
      const auto pick = [&](const std::string& column, const std::string& granted) {
        return "h." + column + " = IF(" + when + ", " + granted + ", h." + column + ")";
      };
      return "h.state = IF(" + when + ", 1, 0)" + ring + ", " + pick("fence", "h.fence + 1") + ", " +
             "h.watchdog = IF(" + when + ", e.watchdog, 0), " + pick("owner_id", "e.owner_id") + ", " +
             pick("hold_id", "e.hold_id") + ", " + pick("machine_id", "e.machine_id") + ", " +
             pick("holder_host", "e.holder_host") + ", " + pick("holder_pid", "e.holder_pid") + ", " +
             // Waiters elsewhere that marked the row wait on its bell: a
             // grant that keeps the bell keeps their mark (its release
             // rings them); a free row or a new bell has none. Assigned
             // before the bell, which it compares.
             "h.waiters = IF(" + when + " AND e.bell = h.bell, h.waiters, 0), " + pick("bell", "e.bell") + ", " +
             pick("acquired_at", "NOW(6)") +
             ", h.expire_time = IF(" + when + ", NOW(6) + INTERVAL e.lease_us MICROSECOND, h.acquired_at), "
             "e.intent_expire = " + kPast;
    };
    const std::string queue = "UPDATE " + q + " h LEFT JOIN " + first_live + " f ON 1 = 1 LEFT JOIN " + q +
                              " e ON e.kind = 5 AND e.lock_name = h.lock_name AND e.slot = f.slot SET ";
    // The release with a queue: granted to the first live entry, else freed
    // (and the stale queue mark cleared).
    for (int ring = 0; ring < 2; ++ring) {
      grant_sql_[ring] = queue + grant("e.slot IS NOT NULL", ring != 0 ? std::string(" + ") + kRingTerm : "") +
                         ", h.intent_expire = IF(e.slot IS NULL, " + kPast + ", h.intent_expire) WHERE h.kind = 5"
                         " AND h.lock_name = ? AND h.slot = 0 AND h.hold_id = ? AND " + fragments::live("h.");
    }
    // The first waiter takes a free head itself (it was freed, or its
    // holder's lease ran out, with nobody granted).
    take_first_sql_ = queue + grant("e.slot IS NOT NULL", "") + " WHERE h.kind = 5 AND h.lock_name = ? AND h.slot = 0"
                      " AND h.expire_time <= NOW(6) AND e.slot = ? AND e.hold_id = ?";
    quiet_free_sql_[0] = "UPDATE " + q + " SET " + fragments::free_assignments() + " WHERE" + head +
                         " AND hold_id = ? AND " + fragments::live() + " AND intent_expire <= NOW(6)";
    quiet_free_sql_[1] = "UPDATE " + q + " SET state = " + kRingTerm + ", " + fragments::free_assignments() +
                         " WHERE" + head + " AND hold_id = ? AND " + fragments::live() + " AND intent_expire <= NOW(6)";
    leave_sql_ = "UPDATE " + q + " SET intent_expire = " + kPast +
                 " WHERE kind = 5 AND lock_name = ? AND slot = ? AND hold_id = ? AND intent_expire > NOW(6)";
    renew_entries_sql_ = "UPDATE " + q +
                         " SET intent_expire = NOW(6) + INTERVAL ? MICROSECOND WHERE kind = 5 AND slot BETWEEN ? AND ?"
                         " AND intent_id = ? AND intent_expire > NOW(6) AND lock_name IN (";
    renew_heads_sql_ = "UPDATE " + q +
                       " SET intent_expire = GREATEST(intent_expire, NOW(6) + INTERVAL ? MICROSECOND) WHERE kind = 5"
                       " AND slot = 0 AND lock_name IN (";
    poll_sql_ = "SELECT lock_name, " + fragments::live() + ", hold_id FROM " + q +
                " WHERE kind = 5 AND slot = 0 AND lock_name IN (";
  }

  Taken take(Engine& e, const AcquireRequest& r, const Holder& holder) override {
    std::optional<Entry> entry = find(r);
    if (!entry) {
      Taken t = take_fresh(e, r, holder);
      if (t.taken || r.single_attempt) return t;
      entry = join(e, r, holder);
    }
    return take_queued(e, r, *entry);
  }

  Refusal refused(Engine&, const AcquireRequest&, const Taken& t) override { return t.refusal.value_or(Refusal{}); }

  // A release may have granted any local waiter: all of them look.
  void wake(WaiterRegistry& waiters, std::string_view name) override { waiters.wake_all(NameKeyView{Kind::kFair, name}); }

  bool free(Engine& e, Connection& c, const RowKey& row, std::uint64_t hold_id, std::int64_t at_least_us,
            HoldRows::Marks marks, bool ring) override {
    // Kept taken after the release (unlock_at_least): nobody is granted
    // before that time; the waiters take it when it has passed.
    if (at_least_us > 0) return e.rows().free(c, row, hold_id, at_least_us, marks, ring);
    const char* marked = marks == HoldRows::Marks::kMarked     ? " AND waiters = 1"
                         : marks == HoldRows::Marks::kUnmarked ? " AND waiters = 0"
                                                               : "";
    const auto with_queue = [&] {
      return e.rows().run_free(c, "releasing a fair lock", ring, [&] {
        auto& ps = c.prepared(grant_sql_[ring ? 1 : 0] + (marked[0] != '\0' ? " AND h." + std::string(marked + 5) : ""));
        Binder b(ps);
        b.text(row.name);
        if (ring) bind_ring(b, c);
        b.text(row.name).u64(hold_id);
        return execute_update(ps);
      });
    };
    // A grant rings the releasing session's bell (the waiter granted may
    // be blocked on it elsewhere): without a ring, only the quiet release,
    // unless the row records no bell at all (kAny).
    const bool may_grant = ring || marks == HoldRows::Marks::kAny;
    // A name queued at its last release here most likely is again.
    if (may_grant && queued_at_release_.contains(row.name)) {
      if (with_queue()) return true;
    }
    const bool quiet = e.rows().run_free(c, "releasing a fair lock", ring, [&] {
      auto& ps = c.prepared(quiet_free_sql_[ring ? 1 : 0] + marked);
      Binder b(ps);
      if (ring) bind_ring(b, c);
      b.i64(0).text(row.name).u64(hold_id);
      return execute_update(ps);
    });
    if (quiet) {
      queued_at_release_.forget(row.name);
      return true;
    }
    if (!may_grant || !with_queue()) return false;
    queued_at_release_.add(row.name);
    return true;
  }

  std::vector<std::string> poll(Engine& e, Connection& c, const std::vector<std::string>& names) override {
    const auto waiting_ids = pending_hold_ids();
    for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
      e.rows().run(c, "polling waited-for fair locks", [&] {
        auto& ps = c.prepared(poll_sql_ + placeholders(bucket) + ")");
        Binder b(ps);
        bind_texts(b, names, first, count, bucket);
        std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
        while (rs->next()) {
          const std::string name = rs->getString(1);
          const bool live = rs->getInt(2) == 1;
          const std::uint64_t hold_id = rs->getUInt64(3);
          const NameKeyView key{Kind::kFair, name};
          if (!live) e.hint_free_if_held_here(key);
          // Free (the first waiter takes it), or granted to a waiter here
          // that missed its wake.
          if (!live || std::find(waiting_ids.begin(), waiting_ids.end(), hold_id) != waiting_ids.end())
            e.waiters().wake_all(key);
        }
        return 0;
      });
    });
    return {};
  }

  void request_ended(Engine& e, const AcquireRequest& r, bool /*acquired*/) override {
    if (queued_count_.load(std::memory_order_acquire) == 0) return;
    std::optional<Entry> entry = take_entry(r);
    if (!entry) return;
    try {
      leave(e, r, *entry);
    } catch (const std::exception& err) {
      // The entry's mark runs out within 3 poll intervals; until then the
      // poller renews nothing for it (it is no longer listed here).
      e.logger()->warn("dlock: could not leave the queue of fair lock {}: {}", printable(r.key.name), err.what());
    }
    slots_.release(r.key.name, entry->index);
  }

  void maintain(Engine& e, const std::function<Connection&()>& connection) override {
    renew_marks(e, connection);
    bool renew = false;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      renew = short_grants_;
      short_grants_ = false;
    }
    // A hold granted with the short lease of a queue entry (so a dead
    // waiter's grant runs out soon) gets the whole watchdog lease now.
    if (renew) e.renew_now(connection);
  }

  bool is_locked(Engine& e, std::string_view name) override { return head(e, name).live; }

  std::optional<std::int64_t> ttl_us(Engine& e, std::string_view name) override {
    const HoldRow r = head(e, name);
    return r.live ? r.ttl_us : std::nullopt;
  }

  std::size_t names_kept() const override { return slots_.names(); }

  void shutdown(Engine& e, Connection& c) override {
    // This client's queue entries (its waits have ended).
    const auto names = slots_.all_names();
    for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
      e.rows().run(c, "deleting this client's queue entries", [&] {
        auto& ps = c.prepared("DELETE FROM " + e.rows().quoted() + " WHERE kind = 5 AND lock_name IN (" +
                              placeholders(bucket) + ") AND slot BETWEEN ? AND ? AND intent_expire <= NOW(6)");
        Binder b(ps);
        bind_texts(b, names, first, count, bucket);
        b.u64(entry_slot(e.client_key(), 0)).u64(entry_slot(e.client_key(), 0xffff));
        return execute_update(ps);
      });
    });
  }

 private:
  struct Entry {
    std::uint32_t index = 0;
    std::uint64_t slot = 0;
    std::uint64_t hold_id = 0;   // the hold it is granted as
    std::uint64_t session = 0;   // the session whose bell it records (0: none)
    std::int64_t lease_us = 0;   // the lease it is granted with
  };

  std::optional<Entry> find(const AcquireRequest& r) {
    if (queued_count_.load(std::memory_order_acquire) == 0) return std::nullopt;
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = entries_.find(&r);
    if (it == entries_.end()) return std::nullopt;
    return it->second.entry;
  }

  std::optional<Entry> take_entry(const AcquireRequest& r) {
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = entries_.find(&r);
    if (it == entries_.end()) return std::nullopt;
    Entry entry = it->second.entry;
    entries_.erase(it);
    queued_count_.store(entries_.size(), std::memory_order_release);
    return entry;
  }

  void store(const AcquireRequest& r, const Entry& entry) {
    std::lock_guard<std::mutex> guard(mutex_);
    entries_[&r] = Queued{r.key.name, entry};
    queued_count_.store(entries_.size(), std::memory_order_release);
  }

  std::vector<std::uint64_t> pending_hold_ids() {
    std::lock_guard<std::mutex> guard(mutex_);
    std::vector<std::uint64_t> ids;
    ids.reserve(entries_.size());
    for (const auto& [request, queued] : entries_) ids.push_back(queued.entry.hold_id);
    return ids;
  }

  // A take with nobody queued (a try_lock, or a waiter's first attempt).
  Taken take_fresh(Engine& e, const AcquireRequest& r, const Holder& holder) {
    Taken t;
    const std::string_view name = r.key.name;
    const std::int64_t lease_us = micros(r.lease);
    const auto attempt = [&](const std::string& sql) {
      return e.run_reconciled(
          name,
          [&](Connection& c) {
            const std::string* bell = e.fast_wakeup() ? take_session_bell(c, e.logger()) : nullptr;
            const bool changed = e.rows().run(c, "taking a fair lock", [&] {
              auto& ps = c.prepared(sql);
              Binder b(ps);
              if (&sql == &checked_take_sql_) b.text(name);
              bind_hold(b, holder, 1, lease_us, r.watchdog, bell);
              b.text(name).u64(holder.hold_id);
              return execute_update(ps);
            }) > 0;
            t.bell_session = bell != nullptr && changed ? c.session_key() : 0;
            return changed;
          },
          [&](Connection& c) {
            t.bell_session = 0;
            return e.rows().find(c, Kind::kFair, name, holder.hold_id) ? Engine::Verdict::kApplied
                                                                       : Engine::Verdict::kRunAgain;
          });
    };
    if (!known_.contains(name)) {
      e.read([&](Connection& c) {
        return e.rows().run(c, "making a fair lock's row", [&] {
          auto& ps = c.prepared(make_head_sql_);
          Binder(ps).text(name);
          return execute_update(ps);
        });
      });
      known_.add(name);
    }
    t.taken = attempt(take_sql_);
    // Refused: held, or the queue mark is ahead. A try (nobody to queue
    // behind it) asks whether anyone is queued at all.
    if (!t.taken && r.single_attempt) t.taken = attempt(checked_take_sql_);
    if (!t.taken) t.refusal = Refusal{0, false};
    return t;
  }

  Entry join(Engine& e, const AcquireRequest& r, const Holder& holder) {
    const ReaderSlots::Slot slot = slots_.allocate(r.key.name);
    Entry entry;
    entry.index = slot.index;
    entry.slot = entry_slot(e.client_key(), slot.index);
    entry.hold_id = holder.hold_id;
    const std::int64_t mark_us = micros(e.intent_lease());
    // A watchdog hold is granted for one mark's lease (a waiter that died
    // still queued holds it that long at most); the watchdog then renews it.
    entry.lease_us = r.watchdog ? std::min(micros(r.lease), mark_us) : micros(r.lease);
    try {
      e.with_connection([&](Connection& c) {
        const std::string* bell = e.fast_wakeup() ? take_session_bell(c, e.logger()) : nullptr;
        static const std::string kNoBell;
        const std::string& bell_text = bell != nullptr ? *bell : kNoBell;
        // Running it again re-joins at the back: harmless, so an unknown
        // outcome is simply repeated.
        const auto statement = [&](Connection& on) {
          return e.rows().run(on, "joining a fair lock's queue", [&] {
            auto& ps = on.prepared(join_sql_);
            Binder b(ps);
            b.text(r.key.name).i64(mark_us);
            b.text(r.key.name).u64(entry.slot).u64(entry.hold_id).u64(r.owner).text(holder.label).text(holder.host);
            b.u64(holder.pid).flag(r.watchdog).i64(entry.lease_us).text(bell_text).u64(e.client_key()).i64(mark_us);
            b.u64(entry.hold_id).u64(r.owner).text(holder.label).text(holder.host).u64(holder.pid).flag(r.watchdog);
            b.i64(entry.lease_us).text(bell_text).u64(e.client_key()).i64(mark_us).i64(mark_us);
            return execute_update(ps);
          });
        };
        try {
          statement(c);
          entry.session = bell != nullptr ? c.session_key() : 0;
        } catch (const OutcomeUnknown&) {
          e.with_connection(statement);
          entry.session = 0;
        }
        return 0;
      });
    } catch (...) {
      slots_.release(r.key.name, slot.index);
      throw;
    }
    store(r, entry);
    return entry;
  }

  // A queued waiter's attempt: granted already, first at a free head, or
  // still waiting.
  Taken take_queued(Engine& e, const AcquireRequest& r, Entry entry) {
    Taken t;
    const std::string_view name = r.key.name;
    struct Look {
      bool live = false;
      std::uint64_t hold_id = 0;
      std::uint64_t fence = 0;
      std::int64_t ttl_us = 0;
      bool queued = false;
    };
    const auto look = [&] {
      return e.read([&](Connection& c) {
        return e.rows().run(c, "looking at a fair lock", [&] {
          auto& ps = c.prepared(look_sql_);
          Binder(ps).u64(entry.slot).u64(entry.hold_id).text(name);
          std::unique_ptr<sql::ResultSet> rs(ps.executeQuery());
          Look l;
          if (!rs->next()) return l;
          l.live = rs->getInt(1) == 1;
          l.hold_id = rs->getUInt64(2);
          l.fence = rs->getUInt64(3);
          l.ttl_us = rs->getInt64(4);
          l.queued = rs->getInt(5) == 1;
          return l;
        });
      });
    };
    Look l = look();
    if (l.live && l.hold_id == entry.hold_id) {
      granted(r, entry, t);
      t.fence = l.fence;
      t.ttl_us = l.ttl_us;
      return t;
    }
    if (!l.live && l.queued) {
      if (take_first(e, r, entry)) {
        granted(r, entry, t);
        t.ttl_us = entry.lease_us;
        return t;
      }
      // Another waiter is first: it holds the head by now, or is about to
      // (its take does not ring): look again.
      l = look();
      if (l.live && l.hold_id == entry.hold_id) {
        granted(r, entry, t);
        t.fence = l.fence;
        t.ttl_us = l.ttl_us;
        return t;
      }
    }
    if (!l.queued) {
      // Passed over (its mark ran out while this client could not renew
      // it) or never written: queue again, at the back.
      take_entry(r);
      slots_.release(name, entry.index);
      const Holder holder{e.machine_id(), r.owner, e.tagged_hold_id(), e.host(), e.pid()};
      entry = join(e, r, holder);
    }
    if (!l.live) {
      if (!l.queued) {
        // Re-joined just now: the head is free; the first waiter takes it.
        if (take_first(e, r, entry)) {
          granted(r, entry, t);
          t.ttl_us = entry.lease_us;
          return t;
        }
      }
      // Free, and another waiter is first: its take comes at once (or, if
      // its process died, its entry is passed over within 3 polls). Ask
      // again soon, since that take rings nobody.
      t.refusal = Refusal{kFirstWaiterRetryUs, false};
      return t;
    }
    t.refusal = Refusal{l.ttl_us, !e.is_this_clients(l.hold_id)};
    return t;
  }

  // The head while it is free, if `entry` is the first live one.
  bool take_first(Engine& e, const AcquireRequest& r, const Entry& entry) {
    const std::string_view name = r.key.name;
    return e.run_reconciled(
        name,
        [&](Connection& c) {
          return e.rows().run(c, "taking a fair lock as its first waiter", [&] {
            auto& ps = c.prepared(take_first_sql_);
            Binder(ps).text(name).text(name).u64(entry.slot).u64(entry.hold_id);
            return execute_update(ps);
          }) > 0;
        },
        [&](Connection& c) {
          return e.rows().find(c, Kind::kFair, name, entry.hold_id) ? Engine::Verdict::kApplied
                                                                    : Engine::Verdict::kNotApplied;
        });
  }

  void granted(const AcquireRequest& r, const Entry& entry, Taken& t) {
    take_entry(r);
    slots_.release(r.key.name, entry.index);
    t.taken = true;
    t.hold_id = entry.hold_id;
    t.bell_session = entry.session;
    if (r.watchdog) {
      std::lock_guard<std::mutex> guard(mutex_);
      short_grants_ = true;
    }
  }

  void leave(Engine& e, const AcquireRequest& r, const Entry& entry) {
    const std::string_view name = r.key.name;
    CallBudget budget(e.options().io_timeout);
    const bool left = e.read([&](Connection& c) {
      return e.rows().run(c, "leaving a fair lock's queue", [&] {
        auto& ps = c.prepared(leave_sql_);
        Binder(ps).text(name).u64(entry.slot).u64(entry.hold_id);
        return execute_update(ps);
      }) > 0;
    });
    if (left) return;
    // Granted meanwhile (or passed over): a hold nobody here will use
    // goes to the next waiter at once. (A request that acquired through
    // its entry no longer has one.)
    e.with_connection([&](Connection& c) {
      if (!e.rows().find(c, Kind::kFair, name, entry.hold_id)) return false;
      free(e, c, RowKey{Kind::kFair, std::string(name), 0}, entry.hold_id, 0, HoldRows::Marks::kAny, false);
      return true;
    });
    e.waiters().wake_all(NameKeyView{Kind::kFair, name});
  }

  void renew_marks(Engine& e, const std::function<Connection&()>& connection) {
    std::vector<std::string> names;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      for (const auto& [request, queued] : entries_) names.push_back(queued.name);
    }
    if (names.empty()) return;
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    const std::int64_t mark_us = micros(e.intent_lease());
    try {
      CallBudget budget(e.options().io_timeout);
      Connection& c = connection();
      for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
        e.rows().run(c, "renewing queue entries", [&] {
          auto& ps = c.prepared(renew_entries_sql_ + placeholders(bucket) + ")");
          Binder b(ps);
          b.i64(mark_us).u64(entry_slot(e.client_key(), 0)).u64(entry_slot(e.client_key(), 0xffff));
          b.u64(e.client_key());
          bind_texts(b, names, first, count, bucket);
          return execute_update(ps);
        });
        e.rows().run(c, "renewing queue marks", [&] {
          auto& ps = c.prepared(renew_heads_sql_ + placeholders(bucket) + ")");
          Binder b(ps);
          b.i64(mark_us);
          bind_texts(b, names, first, count, bucket);
          return execute_update(ps);
        });
      });
    } catch (const BackendError& err) {
      e.logger()->debug("dlock: could not renew this client's queue entries: {}", err.what());
    }
  }

  static HoldRow head(Engine& e, std::string_view name) {
    return e.read([&](Connection& c) { return e.rows().read(c, RowKey{Kind::kFair, std::string(name), 0}); });
  }

  struct Queued {
    std::string name;
    Entry entry;
  };
  std::mutex mutex_;
  std::unordered_map<const AcquireRequest*, Queued> entries_;  // under mutex_
  std::atomic<std::size_t> queued_count_{0};                   // entries_.size()
  bool short_grants_ = false;                                  // under mutex_
  ReaderSlots slots_;
  KnownRows known_;
  KnownRows queued_at_release_;
  std::string make_head_sql_;
  std::string take_sql_;
  std::string checked_take_sql_;
  std::string join_sql_;
  std::string look_sql_;
  std::string grant_sql_[2];
  std::string take_first_sql_;
  std::string quiet_free_sql_[2];
  std::string leave_sql_;
  std::string renew_entries_sql_;
  std::string renew_heads_sql_;
  std::string poll_sql_;
};

}  // namespace

std::unique_ptr<HoldKind> make_fair_kind(const HoldRows& rows) { return std::make_unique<FairKind>(rows); }

}  // namespace dlock::details
