// dlock/lock.hpp
//
// `dlock::Lock` is a Redisson-style handle: one client plus one name. It is
// cheap to copy, and it meets the standard Lockable and TimedLockable
// requirements, so the standard guards work with it:
//
//   dlock::Lock job = client.get_lock("nightly-report");
//   {
//     std::lock_guard<dlock::Lock> guard(job);     // blocks, watchdog mode
//     write_report(job.fencing_token());
//   }                                              // unlock(); never throws
//                                                  // for database trouble
//   std::unique_lock<dlock::Lock> maybe(job, std::defer_lock);
//   if (maybe.try_lock_for(std::chrono::seconds(2))) { ... }
//
//   std::scoped_lock both(lock_a, lock_b);         // deadlock-free pair
//
// Every member forwards to the client with the handle's name; see
// dlock/distributed_lock.hpp for behaviour, errors and timeout rules. The
// handle holds a plain pointer to its client: it must not outlive it.
// Handles are as thread-safe as the client: copies may be used from
// different threads. A handle from get_lock(name) acts for the calling
// thread; one from get_lock(name, owner) acts for that Owner from any thread
// (and its is_held_by_current_thread() and hold_count() report that owner).
//
// The same class is each side of a read-write lock (dlock/read_write_lock.hpp):
// ReadWriteLock::read_lock() and write_lock() return Lock handles whose
// every member (and every asynchronous operation of dlock/asio.hpp) acts on
// that side.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "dlock/export.hpp"
#include "dlock/options.hpp"

namespace dlock {

class DatabaseDistributedLock;
class ReadWriteLock;
namespace details {
struct AsyncAccess;
}

namespace details {
// A wait of any duration type as whole milliseconds, rounded up so a wait is
// never shorter than asked. A wait too long to represent (Millis::max(),
// seconds::max(), a far time_point) saturates to Millis::max(), which the
// client treats as "forever"; zero, negative and NaN waits become zero (a
// single attempt).
template <class Rep, class Period>
Millis saturating_wait(const std::chrono::duration<Rep, Period>& wait) {
  const long double ms = std::chrono::duration<long double, std::milli>(wait).count();
  if (!(ms > 0)) return Millis::zero();
  if (ms >= 1e15L) return Millis::max();  // about 31,700 years
  return Millis(static_cast<Millis::rep>(std::ceil(ms)));
}
// The wait left until `deadline` on `Clock`, as saturating_wait gives it.
// The difference is taken in floating point, so no deadline overflows.
template <class Clock, class Duration>
Millis saturating_wait_until(const std::chrono::time_point<Clock, Duration>& deadline) {
  using Ms = std::chrono::duration<long double, std::milli>;
  return saturating_wait(Ms(deadline.time_since_epoch()) - Ms(Clock::now().time_since_epoch()));
}
}  // namespace details

class DLOCK_API Lock {
 public:
  // Which lock a handle names: a mutex (get_lock), one side of a
  // read-write lock (ReadWriteLock::read_lock(), write_lock()), or a fair
  // lock (get_fair_lock). Each is a namespace of its own.
  enum class Side : unsigned char { kMutex, kRead, kWrite, kFair };

  void lock();
  void lock(Millis lease);
  [[nodiscard]] bool try_lock();
  // Waits up to `wait` (first), then holds with a fixed `lease` (second).
  [[nodiscard]] bool try_lock(Millis wait, Millis lease);
  template <class WaitRep, class WaitPeriod, class LeaseRep, class LeasePeriod>
  [[nodiscard]] bool try_lock(const std::chrono::duration<WaitRep, WaitPeriod>& wait,
                              const std::chrono::duration<LeaseRep, LeasePeriod>& lease) {
    return try_lock(details::saturating_wait(wait), details::saturating_wait(lease));
  }
  // Waits up to `wait`, watchdog mode. Never returns false early: the wait is
  // rounded up to whole milliseconds. A wait too long to represent (such as
  // duration::max()) waits forever.
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return try_lock_waiting(details::saturating_wait(wait));
  }
  // Waits until `deadline` on `Clock`, watchdog mode. A deadline in the past
  // is a single attempt; time_point::max() waits forever. The difference is
  // taken in floating point, so no deadline overflows.
  template <class Clock, class Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return try_lock_waiting(details::saturating_wait_until(deadline));
  }
  void unlock();
  // Releases one hold like unlock(). When that ends the owner's last hold,
  // the name stays taken (by no one: no owner, no watchdog, no fencing
  // token) until `held_for` has passed since the hold was granted, by the
  // server's clock, set in the release's one statement; waiters get it then
  // (they wake at that moment, not at the poll). A hold older than
  // `held_for` is freed at once, as by unlock(). For a nested hold it is
  // unlock(). Use: a job run from cron on several hosts whose clocks differ
  // a little runs once per slot however fast it finishes (ShedLock's
  // lockAtLeastFor). Zero is unlock(); negative or over 365 days throws
  // std::invalid_argument before any SQL (and releases nothing). Otherwise
  // as unlock(): NotHeldError when the owner holds nothing here, never
  // throws for database trouble.
  void unlock_at_least(Millis held_for);
  bool force_unlock();
  [[nodiscard]] bool is_locked() const;
  [[nodiscard]] bool is_held_by_current_thread() const;
  [[nodiscard]] int hold_count() const;
  [[nodiscard]] std::optional<Millis> remaining_ttl() const;
  [[nodiscard]] std::uint64_t fencing_token() const;
  // The guard statement of this owner's hold (docs/guarded-transactions.md):
  // one complete SQL statement, every value written in, to run last before
  // COMMIT in a transaction of the caller's own on the same database (any
  // connector, or the mysql client; <dlock/connector.hpp>: dlock::guard).
  // While the hold is live it succeeds and keeps every other owner from
  // taking it until that transaction ends (on Galera, the two cannot both
  // commit); once it is not (lease ran out, taken over, forced, released)
  // the statement fails with MySQL error 1242, so the transaction cannot
  // commit. It names this one hold: after the hold ends it fails, even if
  // the owner holds the name again. NotHeldError when the owner holds
  // nothing here; LockLostError when its hold was counted lost (it still
  // owes unlocks). No SQL (but one read the first time for a permit's slot).
  [[nodiscard]] std::string guard_sql() const;
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  friend class DatabaseDistributedLock;
  friend class ReadWriteLock;
  friend struct details::AsyncAccess;
  Lock(DatabaseDistributedLock* client, std::string name, std::uint64_t owner, Side side = Side::kMutex)
      : client_(client), name_(std::move(name)), owner_(owner), side_(side) {}
  bool try_lock_waiting(Millis wait);

  DatabaseDistributedLock* client_;
  std::string name_;
  std::uint64_t owner_;  // 0: whichever thread calls
  Side side_;
};

namespace details {
using LockSide = Lock::Side;
}  // namespace details

}  // namespace dlock
