// The fair lock: its hold is row (5, name, 0), taken and released like the
// lock's; its waiters queue in rows (5, name, slot > 0), one per waiting
// request (slot: the client's 48-bit key, then a number of its own), in the
// order they joined (acquired_at, then slot). A queue entry is live while
// its intent (intent_expire) is ahead: the client's poller renews it (one
// statement per poll interval for all of a client's entries), so the
// entry of a dead process is passed over within 3 poll intervals. An entry
// carries the hold its waiter will get (hold id, owner, mode, lease, the
// bell of the session that joined), and its expire_time never moves: no
// generic statement (renewal, force, listings) ever sees it as a hold.
//
// The head's intent_expire says "the queue may be non-empty": a join sets
// it far ahead, and the release (or force-unlock, or checked take) that
// finds no live entry clears it, so the uncontended take and release stay
// single-row statements: a take is refused while it is ahead (no barging),
// a release frees quietly only while it is past. Otherwise the release
// grants: in the same statement the first live entry's hold becomes the
// head's (new fence, the entry's mode and lease), the entry leaves the
// queue, and the releasing session's bell rings. The woken waiter reads the
// head (a locking read, so it waits for that commit) and holds the lock:
// no statement of its own takes it.
//
// A waiter that stops waiting leaves the queue (its intent moved into the
// past); if a release granted it the hold meanwhile, it releases that hold
// at once, which grants the next one. Force-unlock grants as a release
// does.
//
// A grant is found by the waiter's client when the release's ring wakes it
// (its bell connection waits behind the entry before its own, or on the
// holder's bell when first: WakePolicy::kChain), or at its next poll: the
// renewal of its entries, which skips the entries of a free head, changes
// fewer rows than it has entries.
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "base/kinds_table.hpp"
#include "base/known_rows.hpp"
#include "base/micros.hpp"
#include "base/printable.hpp"
#include "base/string_map.hpp"
#include "engine/kind_context.hpp"
#include "primitives/fair_lock/fair_statements.hpp"
#include "primitives/kinds.hpp"
#include "base/name_slots.hpp"
#include "sql/bells.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

namespace {

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
  t.wake = WakePolicy::kChain;
  return t;
}

std::uint64_t entry_slot(std::uint64_t client_key, std::uint32_t index) { return client_key << 16 | index; }

class FairKind final : public HoldKind {
 public:
  explicit FairKind(const HoldRows& rows) : HoldKind(fair_traits()), sql_(rows) {}

  Taken take(KindContext& e, const AcquireRequest& r, const Holder& holder) override {
    std::optional<Entry> entry = find(r);
    if (!entry) {
      Taken t = take_fresh(e, r, holder);
      if (t.taken || r.single_attempt) return t;
      entry = join(e, r, holder);
    }
    return take_queued(e, r, *entry);
  }

  Refusal refused(KindContext&, const AcquireRequest&, const Taken& t) override { return t.refusal.value_or(Refusal{}); }

  // A release may have granted any local waiter: all of them look.
  void wake(WaiterRegistry& waiters, std::string_view name) override { waiters.wake_all(NameKeyView{Kind::kFair, name}); }

  bool free(KindContext& e, Connection& c, const RowKey& row, std::uint64_t hold_id, std::int64_t at_least_us,
            HoldRows::Marks marks, bool ring) override {
    // Kept taken after the release (unlock_at_least): nobody is granted
    // before that time; the waiters take it when it has passed.
    if (at_least_us > 0) return e.rows().free(c, row, hold_id, at_least_us, marks, ring);
    // The release with a queue: granted to the first live entry (or freed
    // if none is live). It rings whenever the engine offers a ring: the
    // waiter granted may be blocked on this bell elsewhere, marked or not.
    std::int64_t rows_changed = 0;  // 2: granted (the head and the entry); 1: freed, nobody queued
    const auto with_queue = [&] {
      return e.rows().run_free(c, "releasing a fair lock", ring, [&] {
        auto& ps = c.prepared(sql_.grant[ring ? 1 : 0]);
        Binder b(ps);
        b.text(row.name);
        if (ring) {
          bind_ring(b, c);
          b.text(c.bell.current()).text(c.bell.next());
        }
        b.text(row.name).u64(hold_id);
        rows_changed = execute_update(ps);
        return rows_changed;
      });
    };
    const auto quiet = [&](const char* marked) {
      return e.rows().run_free(c, "releasing a fair lock", ring, [&] {
        auto& ps = c.prepared(sql_.quiet_free[ring ? 1 : 0] + marked);
        Binder b(ps);
        if (ring) bind_ring(b, c);
        b.i64(0).text(row.name).u64(hold_id);
        return execute_update(ps);
      });
    };
    // A name queued at its last release here most likely is again.
    const bool expect_queue = queued_at_release_.contains(row.name);
    if (!ring && marks != HoldRows::Marks::kAny) {
      // The engine's quiet first try: only while nobody queues; a grant
      // comes back with a ring (or, with the bell's session busy, as kAny
      // with the ring to follow).
      if (expect_queue) return false;
      if (quiet(marks == HoldRows::Marks::kMarked ? " AND waiters = 1" : " AND waiters = 0")) return true;
      queued_at_release_.add(row.name);  // most likely refused by the queue intent
      return false;
    }
    if (!expect_queue && quiet("")) return true;
    if (!with_queue()) return false;
    if (rows_changed >= 2) {
      queued_at_release_.add(row.name);
    } else {
      queued_at_release_.forget(row.name);
    }
    return true;
  }

  // The poll's work is done by maintain(): one renewal of this client's
  // entries, which also finds grants made to them.
  std::vector<std::string> poll(KindContext&, Connection&, const std::vector<std::string>&) override { return {}; }

  QueuePlace queue_place(KindContext& e, Connection& c, std::string_view name) override {
    return e.rows().query(
        c, "reading a fair lock's queue", sql_.place, [&](Binder& b) { b.text(name); },
        [&](sql::ResultSet& rs) {
          QueuePlace place;
          std::vector<std::uint64_t> ahead;
          while (rs.next()) {
            const std::uint64_t hold_id = rs.getUInt64(2);
            if (rs.getUInt64(1) >> 16 == e.client_key()) {
              place.mine = hold_id;
              if (!ahead.empty()) place.before = ahead[chain_target(ahead.size())];
              break;
            }
            ahead.push_back(hold_id);
          }
          return place;
        });
  }

  std::size_t force(KindContext& e, Connection& c, std::string_view name) override {
    // Granted to the first live entry, as a release would (its client finds
    // it at its next poll).
    const std::int64_t changed = e.rows().update(c, "force-unlocking a fair lock", sql_.force_grant,
                                                 [&](Binder& b) { b.text(name).text(name); });
    return changed > 0 ? 1 : 0;
  }

  void request_ended(KindContext& e, const AcquireRequest& r, bool /*acquired*/) override {
    if (queued_count_.load(std::memory_order_acquire) == 0) return;
    std::optional<Entry> entry = take_entry(r);
    if (!entry) return;
    try {
      leave(e, r, *entry);
    } catch (const std::exception& err) {
      // The entry's intent runs out within 3 poll intervals; until then the
      // poller renews nothing for it (it is no longer listed here).
      e.logger()->warn("dlock: could not leave the queue of fair lock {}: {}", printable(r.key.name), err.what());
    }
    slots_.release(r.key.name, entry->index);
  }

  void maintain(KindContext& e, const std::function<Connection&()>& connection) override {
    renew_intents(e, connection);
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

  // A queued entry recorded the bell its session had when it joined; a
  // ring on that session since would leave the entry, and the hold a grant
  // makes from it, with a bell nobody holds (waiters elsewhere would find it
  // free and fall back to the poll). The head is listed too, under the
  // entry's hold id: a grant that copied the old bell before this ring.
  void rows_with_bell_of(std::uint64_t session, std::vector<HeldRow>& out) override {
    if (queued_count_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> guard(mutex_);
    for (const auto& [request, queued] : entries_) {
      if (queued.entry.session != session) continue;
      out.push_back(HeldRow{RowKey{Kind::kFair, queued.name, queued.entry.slot}, queued.entry.hold_id});
      out.push_back(HeldRow{RowKey{Kind::kFair, queued.name, 0}, queued.entry.hold_id});
    }
  }

  bool is_locked(KindContext& e, std::string_view name) override { return head(e, name).live; }

  std::optional<std::int64_t> ttl_us(KindContext& e, std::string_view name) override {
    const HoldRow r = head(e, name);
    return r.live ? r.ttl_us : std::nullopt;
  }

  std::size_t names_kept() const override { return slots_.names(); }

  void shutdown(KindContext& e, Connection& c) override {
    // This client's queue entries (its waits have ended).
    const auto names = slots_.all_names();
    for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
      e.rows().update(c, "deleting this client's queue entries",
                      "DELETE FROM " + e.rows().quoted() + " WHERE kind = " + kind_sql(Kind::kFair) +
                          " AND lock_name IN (" + placeholders(bucket) +
                          ") AND slot BETWEEN ? AND ? AND intent_expire <= NOW(6)",
                      [&](Binder& b) {
                        bind_texts(b, names, first, count, bucket);
                        b.u64(entry_slot(e.client_key(), 0)).u64(entry_slot(e.client_key(), 0xffff));
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

  // A take with nobody queued (a try_lock, or a waiter's first attempt).
  Taken take_fresh(KindContext& e, const AcquireRequest& r, const Holder& holder) {
    Taken t;
    const std::string_view name = r.key.name;
    const std::int64_t lease_us = micros(r.lease);
    const auto attempt = [&](const std::string& sql) {
      return e.take_reconciled(t, r.key, holder.hold_id, KindContext::TakeLearns::kNothing,
                               [&](Connection& c, const std::string* bell) {
                                 return e.rows().update(c, "taking a fair lock", sql, [&](Binder& b) {
                                   if (&sql == &sql_.checked_take) b.text(name);
                                   bind_hold(b, holder, 1, lease_us, r.watchdog, bell);
                                   b.text(name).u64(holder.hold_id);
                                 }) > 0;
                               });
    };
    if (!known_.contains(name)) {
      e.read([&](Connection& c) {
        return e.rows().update(c, "making a fair lock's row", sql_.make_head, [&](Binder& b) { b.text(name); });
      });
      known_.add(name);
    }
    t.taken = attempt(sql_.take);
    // Refused: held, or the queue intent is ahead. A try (nobody to queue
    // behind it) asks whether anyone is queued at all.
    if (!t.taken && r.single_attempt) t.taken = attempt(sql_.checked_take);
    if (!t.taken) t.refusal = Refusal{0, false};
    return t;
  }

  Entry join(KindContext& e, const AcquireRequest& r, const Holder& holder) {
    const NameSlots::Slot slot = slots_.allocate(r.key.name);
    Entry entry;
    entry.index = slot.index;
    entry.slot = entry_slot(e.client_key(), slot.index);
    entry.hold_id = holder.hold_id;
    const std::int64_t intent_us = micros(e.intent_lease());
    // A watchdog hold is granted for one intent's lease (a waiter that died
    // still queued holds it that long at most); the watchdog then renews it.
    entry.lease_us = r.watchdog ? std::min(micros(r.lease), intent_us) : micros(r.lease);
    try {
      e.with_connection([&](Connection& c) {
        const std::string* bell = e.options().fast_wakeup ? take_session_bell(c, e.logger()) : nullptr;
        static const std::string kNoBell;
        const std::string& bell_text = bell != nullptr ? *bell : kNoBell;
        // Running it again re-joins at the back (one entry, upserted):
        // harmless, so an unknown outcome is repeated (run_idempotent).
        const auto statement = [&](Connection& on) {
          return e.rows().update(on, "joining a fair lock's queue", sql_.join, [&](Binder& b) {
            b.text(r.key.name).i64(kFairHeadIntentUs);
            b.text(r.key.name).u64(entry.slot).u64(entry.hold_id).u64(r.owner).text(holder.label).text(holder.host);
            // The grant writes the entry's lease as a hold's (written_lease_us).
            const std::int64_t written = written_lease_us(entry.lease_us);
            b.u64(holder.pid).flag(r.watchdog).i64(written).text(bell_text).u64(e.client_key()).i64(intent_us);
            b.u64(entry.hold_id).u64(r.owner).text(holder.label).text(holder.host).u64(holder.pid).flag(r.watchdog);
            b.i64(written).text(bell_text).u64(e.client_key()).i64(kFairHeadIntentUs).i64(intent_us);
          });
        };
        return e.run_idempotent(c, [&](Connection& on) {
          statement(on);
          // The bell is c's session's: an entry that joined on another
          // connection has no session to be rung on.
          entry.session = bell != nullptr && &on == &c ? c.session_key() : 0;
          return 0;
        });
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
  Taken take_queued(KindContext& e, const AcquireRequest& r, Entry entry) {
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
        return e.rows().query(
            c, "looking at a fair lock", sql_.look, [&](Binder& b) { b.u64(entry.slot).u64(entry.hold_id).text(name); },
            [&](sql::ResultSet& rs) {
              Look l;
              if (!rs.next()) return l;
              l.live = rs.getInt(1) == 1;
              l.hold_id = rs.getUInt64(2);
              l.fence = rs.getUInt64(3);
              l.ttl_us = rs.getInt64(4);
              l.queued = rs.getInt(5) == 1;
              return l;
            });
      });
    };
    Look l = look();
    if (l.live && l.hold_id == entry.hold_id) {
      granted(r, entry, t);
      t.fence = l.fence;
      t.ttl_us = owner_ttl_us(l.ttl_us);
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
        t.ttl_us = owner_ttl_us(l.ttl_us);
        return t;
      }
    }
    if (!l.queued) {
      // Passed over (its intent ran out while this client could not renew
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
  bool take_first(KindContext& e, const AcquireRequest& r, const Entry& entry) {
    const std::string_view name = r.key.name;
    return e.run_reconciled(
        name,
        [&](Connection& c) {
          return e.rows().update(c, "taking a fair lock as its first waiter", sql_.take_first,
                                 [&](Binder& b) { b.text(name).text(name).u64(entry.slot).u64(entry.hold_id); }) > 0;
        },
        [&](Connection& c) {
          return e.rows().find(c, Kind::kFair, name, entry.hold_id) ? KindContext::Verdict::kApplied
                                                                    : KindContext::Verdict::kNotApplied;
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

  void leave(KindContext& e, const AcquireRequest& r, const Entry& entry) {
    const std::string_view name = r.key.name;
    CallBudget budget(e.options().io_timeout);
    const bool left = e.read([&](Connection& c) {
      return e.rows().update(c, "leaving a fair lock's queue", sql_.leave,
                             [&](Binder& b) { b.text(name).u64(entry.slot).u64(entry.hold_id); }) > 0;
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

  // Renews this client's queue entries in one statement per chunk of
  // names. An entry it does not renew was granted (or passed over, or
  // left), or its head is free (a lease ran out, a grant went to a waiter
  // that died): fewer rows than entries wakes the waiters of those names,
  // and each looks (a lost wake costs at most a poll interval).
  void renew_intents(KindContext& e, const std::function<Connection&()>& connection) {
    std::vector<std::string> names;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      for (const auto& [request, queued] : entries_) names.push_back(queued.name);
    }
    if (names.empty()) return;
    std::sort(names.begin(), names.end());
    const auto entries_of = [&](const std::string& name) {
      return static_cast<std::int64_t>(std::upper_bound(names.begin(), names.end(), name) -
                                       std::lower_bound(names.begin(), names.end(), name));
    };
    std::vector<std::string> distinct = names;
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    const std::int64_t intent_us = micros(e.intent_lease());
    try {
      CallBudget budget(e.options().io_timeout);
      Connection& c = connection();
      for_each_chunk(distinct, [&](std::size_t first, std::size_t count, std::size_t bucket) {
        std::int64_t expected = 0;
        for (std::size_t i = first; i < first + count; ++i) expected += entries_of(distinct[i]);
        const std::int64_t renewed = e.rows().update(
            c, "renewing queue entries", sql_.renew_entries + placeholders(bucket) + ")", [&](Binder& b) {
              b.i64(intent_us).u64(entry_slot(e.client_key(), 0)).u64(entry_slot(e.client_key(), 0xffff));
              b.u64(e.client_key()).i64(intent_us / 2);
              bind_texts(b, distinct, first, count, bucket);
            });
        if (renewed >= expected) return;
        for (std::size_t i = first; i < first + count; ++i) e.waiters().wake_all(NameKeyView{Kind::kFair, distinct[i]});
      });
    } catch (const BackendError& err) {
      e.logger()->debug("dlock: could not renew this client's queue entries: {}", err.what());
    }
  }

  static HoldRow head(KindContext& e, std::string_view name) {
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
  NameSlots slots_;
  KnownRows known_;
  KnownRows queued_at_release_;
  const FairStatements sql_;
};

}  // namespace

std::unique_ptr<HoldKind> make_fair_kind(const HoldRows& rows) { return std::make_unique<FairKind>(rows); }

}  // namespace dlock::details
