// The read-write lock: the head row (3, name, 0) carries the write hold;
// each read hold is a slot row (4, name, slot) of the reading client (slot
// = its 48-bit key, then the slot's 16-bit number), reused from hold to
// hold; each client with a waiting writer keeps a intent row (3, name, its
// key) live while it waits.
//
// The rule, decided under the head row's lock: a write is taken only while
// no write is live and no read is live; a read only while no write is live
// and no writer's intent row is live (or the live write is the same owner's:
// a downgrade). So once a writer waits, new readers wait behind it,
// whichever client's writers wait and in whichever order they stop (the
// head's intent_expire mirrors the latest live intent, so a read take looks
// at the head alone). A read take locks the head, sets its read_taken and
// gives the hold to its slot row; a read's release is the generic release of its slot row. A write
// take is one single-row statement while read_taken is 0 (no read since
// the last write); else it looks at the live reads themselves (a join,
// dearer) and clears read_taken. There is no count to go stale: a read
// whose lease ran out is simply not live.
//
// Fencing: write tokens are even (fence + 2 per take); a read hold's token
// is the head's fence + 1, so it is above every write that ended before it
// and below every write taken after it, without the read writing the fence.
//
// Slot and intent rows do not accumulate: a client that ends cleanly deletes
// its own; any client deletes a name's rows that have been free or expired
// for ReadWriteRows::kept() when it first reads the name, and sweeps
// such rows (a bounded DELETE) every so often.
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <stdexcept>

#include "base/kinds_table.hpp"
#include "base/micros.hpp"
#include "base/printable.hpp"
#include "engine/kind_context.hpp"
#include "primitives/kinds.hpp"
#include "primitives/read_write_lock/read_write_rows.hpp"
#include "base/name_slots.hpp"
#include "sql/bells.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

namespace {

using Micros = std::chrono::microseconds;

// A reader is held back by a writer that is taking the write side right
// now (its intent live, no read ahead of it): it looks again this soon.
constexpr std::int64_t kWriterTakingUs = 20'000;

HoldKind::Traits rw_traits(Kind kind) {
  HoldKind::Traits t;
  t.kind = kind;
  t.serial = Kind::kWrite;
  t.single_holder = kind == Kind::kWrite;
  t.hands_over = kind == Kind::kWrite;
  t.fence_step = 2;
  t.shared = kind == Kind::kRead;
  t.other_side = kind == Kind::kWrite ? Kind::kRead : Kind::kWrite;
  t.frees_alone = kind == Kind::kRead;
  t.intents = kind == Kind::kWrite ? HoldKind::Traits::Intent::kWhenRefused : HoldKind::Traits::Intent::kNone;
  t.blocked_by = kind == Kind::kWrite ? std::vector<Kind>{Kind::kWrite, Kind::kRead} : std::vector<Kind>{Kind::kWrite};
  return t;
}

// A release of either side lets in every reader waiting here and one writer.
void wake_both(WaiterRegistry& waiters, std::string_view name) {
  waiters.wake_all(NameKeyView{Kind::kRead, name});
  waiters.wake_one(NameKeyView{Kind::kWrite, name});
}

class WriteKind final : public HoldKind {
 public:
  explicit WriteKind(std::shared_ptr<ReadWriteRows> shared) : HoldKind(rw_traits(Kind::kWrite)), s_(std::move(shared)) {}

  void check(KindContext& e, const AcquireRequest& r) override {
    if (e.local_hold(NameKeyView{Kind::kRead, r.key.name}, r.owner)) {
      throw std::logic_error("dlock: the owner holds only the read side of read-write lock \"" +
                             printable(r.key.name) +
                             "\" and asks for the write side: upgrading is not supported (two readers upgrading at "
                             "once would wait for each other forever); release the read side first");
    }
  }

  Taken take(KindContext& e, const AcquireRequest& r, const Holder& holder) override {
    Taken t;
    const std::int64_t lease_us = micros(r.lease);
    for (int round = 0; round < 2; ++round) {
      t.taken = e.take_reconciled(t, r.key, holder.hold_id, KindContext::TakeLearns::kNothing,
                                  [&](Connection& c, const std::string* bell) {
                                    s_->ensure_head(e, c, r.key.name);
                                    const auto take = [&](const std::string& statement) {
                                      return e.rows().update(c, "taking a write lock", statement, [&](Binder& b) {
                                        bind_hold(b, holder, 1, lease_us, r.watchdog, bell);
                                        b.text(r.key.name).u64(holder.hold_id);
                                      }) > 0;
                                    };
                                    return take(s_->take_write) || take(s_->take_write_past_reads);
                                  });
      if (t.taken) return t;
      // Why: a writer, or live reads.
      const ReadWriteRows::Head head = s_->read_head(e, r.key.name);
      const HoldRow& w = head.row;
      if (!w.exists) {
        s_->heads.forget(r.key.name);  // deleted behind the client's back: made again
        continue;
      }
      if (w.live) {
        t.refusal = Refusal{w.ttl_us.value_or(0), !e.is_this_clients(w.hold_id)};
      } else if (head.live_reads > 0) {
        t.refusal = Refusal{head.read_ttl_us, head.foreign_reads > 0};
      } else {
        t.refusal = Refusal{0, false};  // the reads ended since: try again at once
      }
      return t;
    }
    return t;
  }

  Refusal refused(KindContext&, const AcquireRequest&, const Taken& t) override { return t.refusal.value_or(Refusal{}); }

  bool hand_over(KindContext& e, Connection& c, const RowKey& row, std::uint64_t from, std::uint64_t to,
                 const AcquireRequest& request) override {
    return e.rows().update(c, "handing a write lock over", s_->hand_over_write, [&](Binder& b) {
      bind_hand_over(b, to, request.watchdog, request.owner, micros(request.lease));
      b.text(row.name).u64(from).u64(to);
    }) > 0;
  }

  std::vector<std::string> set_intents(KindContext& e, Connection& c, const std::vector<std::string>& names,
                                std::int64_t lease_us) override {
    for (const auto& name : names) {
      // The head first: once the intent row is there, readers are held back.
      e.rows().update(c, "setting a waiting writer's intent", s_->intend_head,
                      [&](Binder& b) { b.i64(lease_us).text(name); });
      e.rows().update(c, "setting a waiting writer's intent", s_->intend, [&](Binder& b) {
        b.text(name).u64(e.client_key()).text(e.machine_id()).text(e.host()).u64(e.pid()).i64(lease_us).i64(lease_us);
      });
      std::lock_guard<std::mutex> guard(intents_mutex_);
      intents_.emplace(name);
    }
    return names;  // a client's own intent row is always its own
  }

  void clear_intent(KindContext& e, Connection& c, std::string_view name) override {
    e.rows().update(c, "clearing a waiting writer's intent", s_->withdraw,
                    [&](Binder& b) { b.text(name).u64(e.client_key()); });
    e.rows().update(c, "clearing a waiting writer's intent", s_->withdraw_head,
                    [&](Binder& b) { b.text(name).text(name); });
  }

  void shutdown(KindContext& e, Connection& c) override {
    // This client's intent rows (its intents were cleared just before).
    std::vector<std::string> names;
    {
      std::lock_guard<std::mutex> guard(intents_mutex_);
      names.assign(intents_.begin(), intents_.end());
    }
    for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
      e.rows().update(c, "deleting this client's writer intents",
                      "DELETE FROM " + s_->q + " WHERE kind = " + kind_sql(Kind::kWrite) +
                          " AND slot = ? AND lock_name IN (" + placeholders(bucket) + ")",
                      [&](Binder& b) {
                        b.u64(e.client_key());
                        bind_texts(b, names, first, count, bucket);
                      });
    });
  }

  void wake(WaiterRegistry& waiters, std::string_view name) override { wake_both(waiters, name); }

  std::vector<std::string> poll(KindContext& e, Connection& c, const std::vector<std::string>& names) override {
    std::vector<std::string> held;
    poll_heads(e, c, names, [&](const std::string& name, bool write_live, std::uint64_t live_reads, bool) {
      if (!write_live && live_reads == 0) {
        e.waiters().wake_one(NameKeyView{Kind::kWrite, name});
      } else {
        held.push_back(name);
      }
    });
    return held;
  }

  bool is_locked(KindContext& e, std::string_view name) override { return s_->read_head(e, name).row.live; }
  std::optional<std::int64_t> ttl_us(KindContext& e, std::string_view name) override {
    const auto head = s_->read_head(e, name);
    return head.row.live ? head.row.ttl_us : std::nullopt;
  }

  // The head row: the write hold only (read holds are the read side's, and
  // a waiting writer's intent row is no hold: clearing it would let new
  // readers overtake that writer).
  std::size_t force(KindContext& e, Connection& c, std::string_view name) override {
    return e.rows().force(c, Kind::kWrite, name, true);
  }

  template <class Each>
  void poll_heads(KindContext& e, Connection& c, const std::vector<std::string>& names, Each&& each) {
    for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
      e.rows().query(
          c, "polling waited-for read-write locks", s_->poll + placeholders(bucket) + ")",
          [&](Binder& b) { bind_texts(b, names, first, count, bucket); },
          [&](sql::ResultSet& rs) {
            while (rs.next()) each(std::string(rs.getString(1)), rs.getInt(2) == 1, rs.getUInt64(3), rs.getInt(4) == 1);
          });
    });
  }

 private:
  std::shared_ptr<ReadWriteRows> s_;
  std::mutex intents_mutex_;
  StringSet intents_;  // names this client has made a intent row for
};

class ReadKind final : public HoldKind {
 public:
  ReadKind(std::shared_ptr<ReadWriteRows> shared, WriteKind& write)
      : HoldKind(rw_traits(Kind::kRead)), s_(std::move(shared)), write_(write) {}

  Taken take(KindContext& e, const AcquireRequest& r, const Holder& holder) override {
    // The owner's own live write lets the read past it and past any intent
    // (a downgrade).
    const auto write = e.local_hold(NameKeyView{Kind::kWrite, r.key.name}, r.owner);
    const std::uint64_t write_hold_id = write ? write->hold_id : 0;
    Taken t;
    for (int round = 0; round < 2 && !t.taken; ++round) {
      const NameSlots::Slot slot = slots_.allocate(r.key.name);
      t.slot = reader_slot(e.client_key(), slot.index);
      bool missing = false;
      try {
        // Not the row's fence: a read's token is the head's.
        t.taken = e.take_reconciled(t, r.key, holder.hold_id, KindContext::TakeLearns::kNothing,
                                    [&](Connection& c, const std::string* bell) {
                                      if (!slot.known) {
                                        s_->ensure_head(e, c, r.key.name);
                                        ensure_slot(e, c, r.key.name, t.slot);
                                        slots_.mark_known(r.key.name, slot.index);
                                      }
                                      return take_read(e, c, r, holder, bell, t.slot, write_hold_id, missing);
                                    });
      } catch (...) {
        slots_.release(r.key.name, slot.index);
        throw;
      }
      if (t.taken) break;
      slots_.release(r.key.name, slot.index);
      if (!missing) break;
      slots_.forget(r.key.name, slot.index);
      s_->heads.forget(r.key.name);
    }
    return t;
  }

  Refusal refused(KindContext& e, const AcquireRequest& r, const Taken&) override {
    const ReadWriteRows::Head head = s_->read_head(e, r.key.name);
    const HoldRow& w = head.row;
    // Wait for the writer: at its release (its bell), or its lease end.
    if (w.live) return Refusal{w.ttl_us.value_or(0), !e.is_this_clients(w.hold_id)};
    if (head.intents_ttl_us) {
      // Held back by a waiting writer, which takes the lock when the reads
      // ahead end, then releases it (its bell): look again when those reads
      // end, or very soon when none is ahead (the writer is taking it now).
      const std::int64_t reads = head.live_reads > 0 ? head.read_ttl_us : kWriterTakingUs;
      return Refusal{std::min(*head.intents_ttl_us, reads), false};
    }
    return Refusal{0, false};
  }

  // The generic release of the slot row; the slot is this client's to
  // reuse once the row is free.
  bool free(KindContext& e, Connection& c, const RowKey& row, std::uint64_t hold_id, std::int64_t at_least_us,
            HoldRows::Marks marks, bool ring) override {
    const bool changed = e.rows().free(c, row, hold_id, at_least_us, marks, ring);
    // A row kept taken (unlock_at_least) is not reused before its time;
    // measured from now, which is later than the grant it counts from.
    if (changed || marks == HoldRows::Marks::kAny)
      slots_.release(row.name, static_cast<std::uint32_t>(row.slot & 0xffff), std::chrono::microseconds(at_least_us));
    return changed;
  }

  void dropped(std::string_view name, std::uint64_t slot) override {
    slots_.release(name, static_cast<std::uint32_t>(slot & 0xffff));
  }

  void wake(WaiterRegistry& waiters, std::string_view name) override { wake_both(waiters, name); }

  std::vector<std::string> poll(KindContext& e, Connection& c, const std::vector<std::string>& names) override {
    std::vector<std::string> held;
    write_.poll_heads(e, c, names, [&](const std::string& name, bool write_live, std::uint64_t, bool intent) {
      if (!write_live && !intent) {
        e.waiters().wake_all(NameKeyView{Kind::kRead, name});
      } else {
        held.push_back(name);
      }
    });
    return held;
  }

  bool is_locked(KindContext& e, std::string_view name) override {
    return e.read([&](Connection& c) { return e.rows().count_live(c, Kind::kRead, name); }) > 0;
  }
  std::optional<std::int64_t> ttl_us(KindContext& e, std::string_view name) override {
    const auto head = s_->read_head(e, name);
    if (head.live_reads == 0) return std::nullopt;
    return head.read_ttl_us;
  }

  // Every read hold of `name`.
  std::size_t force(KindContext& e, Connection& c, std::string_view name) override {
    return e.rows().force(c, Kind::kRead, name);
  }

  std::size_t names_kept() const override { return slots_.names(); }
  void keep_rows_for(Millis kept) { s_->kept_ms.store(kept.count(), std::memory_order_relaxed); }

  void maintain(KindContext& e, const std::function<Connection&()>& connection) override {
    // The slot rows of clients that died, everywhere, now and then.
    const auto now = std::chrono::steady_clock::now();
    const Millis kept = s_->kept();
    const Millis every = std::min<Millis>(kept, std::chrono::minutes(10));
    if (next_sweep_ == std::chrono::steady_clock::time_point{}) next_sweep_ = now + every;
    if (now < next_sweep_) return;
    next_sweep_ = now + every;
    try {
      // Within a second: never at the cost of the watchdog's next tick.
      CallBudget budget(std::chrono::seconds(1));
      s_->sweep(e, connection(), nullptr, kept);
    } catch (const BackendError& err) {
      e.logger()->debug("dlock: could not sweep stale reader slot rows: {}", err.what());
    }
  }

  void shutdown(KindContext& e, Connection& c) override {
    // This client's own slot rows (its read holds were freed just before).
    const auto names = slots_.all_names();
    for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
      e.rows().update(c, "deleting this client's reader slots",
                      "DELETE FROM " + s_->q + " WHERE kind = " + kind_sql(Kind::kRead) + " AND lock_name IN (" +
                          placeholders(bucket) + ") AND slot BETWEEN ? AND ? AND expire_time <= NOW(6)",
                      [&](Binder& b) {
                        bind_texts(b, names, first, count, bucket);
                        b.u64(reader_slot(e.client_key(), 0)).u64(reader_slot(e.client_key(), 0xffff));
                      });
    });
  }

 private:
  // The read's take on reader slot `slot`; `missing` when refused because
  // the rows are gone (deleted behind the client's back, or a slot row
  // swept after a long idle).
  bool take_read(KindContext& e, Connection& c, const AcquireRequest& r, const Holder& holder, const std::string* bell,
                 std::uint64_t slot, std::uint64_t write_hold_id, bool& missing) {
    const bool taken = e.rows().update(c, "taking a read lock", s_->take_read, [&](Binder& b) {
      b.u64(slot);
      bind_hold(b, holder, 1, micros(r.lease), r.watchdog, bell);
      b.text(r.key.name).u64(holder.hold_id).u64(write_hold_id);
    }) > 0;
    if (!taken) {
      missing = !e.rows().read(c, RowKey{Kind::kRead, r.key.name, slot}).exists ||
                !e.rows().read(c, RowKey{Kind::kWrite, r.key.name, 0}).exists;
    }
    return taken;
  }

  void ensure_slot(KindContext& e, Connection& c, std::string_view name, std::uint64_t slot) {
    // The first time this client reads the name: other clients' rows of it
    // left long ago go, then this one's is made.
    s_->sweep(e, c, &name, s_->kept());
    e.rows().update(c, "making a reader slot row",
                    "INSERT INTO " + s_->q + " (kind, lock_name, slot) VALUES (" + kind_sql(Kind::kRead) +
                        ", ?, ?) ON DUPLICATE KEY UPDATE slot = slot",
                    [&](Binder& b) { b.text(name).u64(slot); });
  }


  std::shared_ptr<ReadWriteRows> s_;
  WriteKind& write_;
  NameSlots slots_;
  std::chrono::steady_clock::time_point next_sweep_{};  // io thread only
};

}  // namespace

void keep_reader_rows_for(KindContext& engine, Millis kept) {
  dynamic_cast<ReadKind&>(engine.kind(Kind::kRead)).keep_rows_for(kept);
}

ReadWriteKinds make_read_write_kinds(const HoldRows& rows) {
  auto shared = std::make_shared<ReadWriteRows>(rows);
  auto write = std::make_unique<WriteKind>(shared);
  auto read = std::make_unique<ReadKind>(shared, *write);
  return ReadWriteKinds{std::move(write), std::move(read)};
}

}  // namespace dlock::details
