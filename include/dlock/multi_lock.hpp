// dlock/multi_lock.hpp
//
// `MultiLock` holds several plain lock names (the names of get_lock) at
// once, all or nothing: one wait and one lease for the whole set. It is
// Lockable and TimedLockable, so the standard guards work with it:
//
//   dlock::MultiLock both = client.get_multi_lock({"account:17", "account:42"});
//   {
//     std::lock_guard<dlock::MultiLock> guard(both);   // both, or wait
//     transfer(both.fencing_token("account:17"), both.fencing_token("account:42"));
//   }                                                  // unlock(): both
//
// Model
//   * The names are 1 to 64 plain lock names, each validated as for
//     get_lock; duplicates count once and names() lists them sorted. Bad
//     input throws std::invalid_argument from get_multi_lock, before any SQL.
//   * All or nothing: at no moment does the owner hold some of the names
//     because of this MultiLock and not the others. An acquire takes every
//     name in one transaction or none; a wait that ends without them holds
//     none of them, and while it waits it keeps none of them from anyone.
//   * Any order: callers may list the names in any order, and two
//     MultiLocks over overlapping sets never deadlock (rows are locked in
//     the database's key order).
//   * Owners are as for Lock (the calling thread, or the Owner given to
//     get_multi_lock). A name the owner already holds (by a Lock, or another
//     MultiLock) is counted reentrantly; unlock() releases one hold of every
//     name. Each name's hold is an ordinary lock hold: it has its own fencing
//     token, the watchdog renews it with the client's other holds, and a hold
//     of one name lost while the others are held is reported like any lost
//     hold (on_lock_lost for that name; LockLostError from the next acquire
//     until its unlock() has been made).
//
// Cost
//   An uncontended lock() of up to 64 names (after their first use in the
//   client, which makes missing rows in one statement) is one transaction:
//   START TRANSACTION, one UPDATE of every row, COMMIT: three statements and
//   one commit whatever the number of names. unlock() is one statement.
//
// Waiting
//   A refused acquire waits for a release of any of its names: in this
//   client at once, in another client at the release (Options::fast_wakeup),
//   else at the poll or at the first blocking lease's end, and then tries
//   the whole set again.
//
// ThreadSanitizer: an operation on a set holds the client's per-owner
// mutex of each of its names for the statement's duration, so a set of 64
// names holds up to 64 mutexes in one thread, past what TSan's deadlock
// detector tracks; run such programs with TSAN_OPTIONS=detect_deadlocks=0.
//
// Asynchronous: async_lock, async_try_lock and async_unlock of
// <dlock/asio.hpp> take a MultiLock too, with the same rules.
//
// Errors and time limits are those of Lock. The handle holds a plain pointer
// to its client: it must not outlive it. Copies may be used from different
// threads.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/export.hpp"
#include "dlock/lock.hpp"
#include "dlock/options.hpp"

namespace dlock {

class DatabaseDistributedLock;
namespace details {
struct AsyncAccess;
}

class DLOCK_API MultiLock {
 public:
  // Blocks until every name is held; watchdog mode.
  void lock();
  // The same, each name held with a fixed `lease` (no renewal).
  void lock(Millis lease);
  // One attempt, watchdog mode.
  [[nodiscard]] bool try_lock();
  // Waits up to `wait` (first), then holds with a fixed `lease` (second).
  [[nodiscard]] bool try_lock(Millis wait, Millis lease);
  // Waits up to `wait`, watchdog mode (the Lock rules: never false early;
  // a wait too long to represent waits forever).
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return try_lock_waiting(details::saturating_wait(wait));
  }
  template <class Clock, class Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return try_lock_waiting(details::saturating_wait_until(deadline));
  }
  // Releases one hold of every name. NotHeldError, before any SQL and
  // releasing nothing, when the owner lacks a hold on one of them. Never
  // throws for database trouble (a hold that could not be freed ends with
  // its lease), so it is safe in a guard's destructor.
  void unlock();
  // The owner's fencing token for `name`; 0 if it holds none (or `name` is
  // not one of the set's). One read the first time per hold.
  [[nodiscard]] std::uint64_t fencing_token(std::string_view name) const;
  // The guard statement of every name's hold, in one statement (see
  // Lock::guard_sql): it fails unless every one is live. NotHeldError when
  // the owner lacks one; LockLostError when one was counted lost.
  [[nodiscard]] std::string guard_sql() const;
  // The names, sorted, without duplicates.
  [[nodiscard]] const std::vector<std::string>& names() const noexcept { return names_; }

 private:
  friend class DatabaseDistributedLock;
  friend struct details::AsyncAccess;
  MultiLock(DatabaseDistributedLock* client, std::vector<std::string> names, std::uint64_t owner)
      : client_(client), names_(std::move(names)), owner_(owner) {}
  bool try_lock_waiting(Millis wait);

  DatabaseDistributedLock* client_;
  std::vector<std::string> names_;
  std::uint64_t owner_;  // 0: whichever thread calls
};

}  // namespace dlock
