// The semaphore: rows (2, name, slot) for slots 0 .. bound-1, made on
// demand and never deleted; a permit is a slot row carrying the permit's
// hold and an unexpired lease, so "at most bound permits at once" is the
// primary key's doing. A permit has no owner but one of its own (each
// acquire is a separate permit), and is not reentrant.
//
// A take is one UPDATE of the lowest free slot below the bound (ORDER BY
// slot LIMIT 1); only when every existing slot is held and fewer than the
// bound exist, one INSERT adds the next slot, held. The statement does not
// say which slot it took, so the permit's later statements find its row
// among the name's slots by its hold id (kAnySlot): a release reads the
// semaphore's slot rows by primary key, at most `bound` of them.
#include <cppconn/prepared_statement.h>

#include <mutex>

#include "base/kinds_table.hpp"
#include "base/micros.hpp"
#include "engine/kind_context.hpp"
#include "primitives/kinds.hpp"
#include "sql/bells.hpp"
#include "sql/statement.hpp"

namespace dlock::details {

namespace {

// Rounds of take/add when other clients keep adding the same slot first.
constexpr int kMaxTakeRounds = 4;

HoldKind::Traits semaphore_traits() {
  HoldKind::Traits t;
  t.kind = Kind::kSemaphore;
  t.serial = Kind::kSemaphore;
  t.reentrant = false;
  t.single_holder = false;
  t.reports_fence = false;
  t.blocked_by = {Kind::kSemaphore};
  return t;
}

class SemaphoreKind final : public HoldKind {
 public:
  explicit SemaphoreKind(const HoldRows& rows) : HoldKind(semaphore_traits()) {
    const std::string& q = rows.quoted();
    take_sql_ = "UPDATE " + q + " SET " + fragments::take_assignments("", "fence + 1") +
                ", bound = ? WHERE kind = " + kind_sql(Kind::kSemaphore) + " AND lock_name = ? AND slot < ? AND expire_time <= NOW(6)"
                " ORDER BY slot LIMIT 1";
    // Slots are numbered 0, 1, ... as they are added; two clients adding
    // the same one meet at the primary key (a duplicate-key error: take
    // again). MySQL and MariaDB read the table into a temporary one first
    // when an INSERT ... SELECT reads the table it inserts into.
    grow_sql_ = "INSERT INTO " + q +
                " (kind, lock_name, slot, fence, state, watchdog, owner_id, hold_id, machine_id, holder_host,"
                " holder_pid, acquired_at, expire_time, bell, waiters, bound) SELECT 2, ?, COALESCE(MAX(slot) + 1, 0),"
                " 1, ?, ?, ?, ?, ?, ?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND, ?, 0, ? FROM " + q +
                " WHERE kind = " + kind_sql(Kind::kSemaphore) + " AND lock_name = ? HAVING COALESCE(MAX(slot) + 1, 0) < ?";
    // Same slot: the waiter's permit under a new hold, fence moved on.
    hand_over_sql_ = "UPDATE " + q + " SET " + fragments::hand_over_assignments("", 1) + ", bound = ?"
                     " WHERE kind = " + kind_sql(Kind::kSemaphore) + " AND lock_name = ? AND hold_id IN (?, ?) AND " + fragments::live();
    use_sql_ = "SELECT COUNT(*), MIN(TIMESTAMPDIFF(MICROSECOND, NOW(6), expire_time)),"
               " SUM(hold_id >> 48 <> ? AND bell <> '') FROM " + q + " WHERE kind = " + kind_sql(Kind::kSemaphore) + " AND lock_name = ? AND " +
               fragments::live();
    poll_sql_ = "SELECT lock_name, SUM(" + fragments::live() + ") FROM " + q +
                " WHERE kind = " + kind_sql(Kind::kSemaphore) + " AND lock_name IN (";
  }

  Taken take(KindContext& e, const AcquireRequest& r, const Holder& holder) override {
    Taken t;
    t.slot = kAnySlot;
    const std::string_view name = r.key.name;
    const std::int64_t lease_us = micros(r.lease);
    for (int round = 0; round < kMaxTakeRounds; ++round) {
      bool raced = false;
      const auto statement = [&](Connection& c, const std::string* bell) {
        raced = false;
        bool taken = e.rows().update(c, "taking a semaphore permit", take_sql_, [&](Binder& b) {
          bind_hold(b, holder, 1, lease_us, r.watchdog, bell);
          b.u64(r.bound).text(name).u64(r.bound);
        }) == 1;
        if (!taken) {
          try {
            taken = e.rows().update(c, "adding a semaphore slot", grow_sql_, [&](Binder& b) {
              b.text(name);
              bind_hold(b, holder, 1, lease_us, r.watchdog, bell);
              b.u64(r.bound).text(name).u64(r.bound);
            }) == 1;
          } catch (const BackendError& err) {
            if (err.code() != mysql_error::kDuplicateKey || dynamic_cast<const OutcomeUnknown*>(&err)) throw;
            raced = true;  // another client added that slot first
          }
        }
        return taken;
      };
      t.taken = e.take_reconciled(t, r.key, holder.hold_id, KindContext::TakeLearns::kSlotAndFence, statement);
      if (t.taken || !raced) return t;
    }
    return t;
  }

  Refusal refused(KindContext& e, const AcquireRequest& r, const Taken&) override {
    struct Use {
      std::uint64_t live = 0;
      std::int64_t next_expiry_us = 0;
      std::uint64_t foreign = 0;
    };
    const Use use = e.read([&](Connection& c) {
      return e.rows().query(
          c, "reading a semaphore", use_sql_, [&](Binder& b) { b.u64(e.hold_tag()).text(r.key.name); },
          [&](sql::ResultSet& rs) {
            Use u;
            if (rs.next()) {
              u.live = rs.getUInt64(1);
              if (!rs.isNull(2)) u.next_expiry_us = rs.getInt64(2);
              if (!rs.isNull(3)) u.foreign = rs.getUInt64(3);
            }
            return u;
          });
    });
    // Fewer live permits than the bound: one was freed since the take.
    if (use.live < r.bound) return Refusal{0, false};
    return Refusal{use.next_expiry_us, use.foreign > 0};
  }

  bool hand_over(KindContext& e, Connection& c, const RowKey& row, std::uint64_t from, std::uint64_t to,
                 const AcquireRequest& request) override {
    return e.rows().update(c, "handing a permit over", hand_over_sql_, [&](Binder& b) {
      bind_hand_over(b, to, request.watchdog, request.owner, micros(request.lease));
      b.u64(request.bound).text(row.name).u64(from).u64(to);
    }) > 0;
  }

  // The permit's slot is below the bound it was taken under; a waiter with
  // a lower bound might not fit in it.
  bool fits(const Hold& held, const AcquireRequest& request) const override { return request.bound >= held.bound; }

  std::vector<std::string> poll(KindContext& e, Connection& c, const std::vector<std::string>& names) override {
    std::vector<std::string> held;
    for_each_chunk(names, [&](std::size_t first, std::size_t count, std::size_t bucket) {
      e.rows().query(
          c, "polling waited-for semaphores", poll_sql_ + placeholders(bucket) + ") GROUP BY lock_name",
          [&](Binder& b) { bind_texts(b, names, first, count, bucket); },
          [&](sql::ResultSet& rs) {
            while (rs.next()) {
              const std::string name = rs.getString(1);
              const std::uint64_t live = rs.isNull(2) ? 0 : rs.getUInt64(2);
              if (live < bound_of(name)) {
                e.waiters().wake_one(NameKeyView{Kind::kSemaphore, name});
              } else {
                held.push_back(name);
              }
            }
          });
    });
    return held;
  }

  // The bound each waited-for semaphore was last asked with (the poller's
  // "a permit is free" test): noted after a waiter subscribes, dropped when
  // the last one leaves (both under the mutex, so a drop never undoes a
  // newer waiter's note), so a client that waits on ever new names does
  // not grow for ever.
  void waiting_started(KindContext&, const AcquireRequest& request) override {
    std::lock_guard<std::mutex> guard(bounds_mutex_);
    bounds_[request.key.name] = request.bound;
  }
  void waiting_ended(KindContext& e, const NameKey& key) override {
    std::lock_guard<std::mutex> guard(bounds_mutex_);
    if (e.waiters().has(key)) return;  // one subscribed since
    if (const auto it = bounds_.find(key.name); it != bounds_.end()) bounds_.erase(it);
  }

  std::size_t names_kept() const override {
    std::lock_guard<std::mutex> guard(bounds_mutex_);
    return bounds_.size();
  }

  bool is_locked(KindContext& e, std::string_view name) override { return live(e, name) > 0; }
  std::optional<std::int64_t> ttl_us(KindContext&, std::string_view) override { return std::nullopt; }

 private:
  static std::size_t live(KindContext& e, std::string_view name) {
    return e.read([&](Connection& c) { return e.rows().count_live(c, Kind::kSemaphore, name); });
  }
  std::uint32_t bound_of(const std::string& name) {
    std::lock_guard<std::mutex> guard(bounds_mutex_);
    const auto it = bounds_.find(name);
    return it == bounds_.end() ? 0 : it->second;
  }

  mutable std::mutex bounds_mutex_;
  StringMap<std::uint32_t> bounds_;
  std::string take_sql_;
  std::string grow_sql_;
  std::string hand_over_sql_;
  std::string use_sql_;
  std::string poll_sql_;
};

}  // namespace

std::unique_ptr<HoldKind> make_semaphore_kind(const HoldRows& rows) { return std::make_unique<SemaphoreKind>(rows); }

}  // namespace dlock::details
