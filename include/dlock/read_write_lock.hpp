// dlock/read_write_lock.hpp
//
// `ReadWriteLock` is a many-readers-or-one-writer lock shared by every
// client of one database. It has the std::shared_mutex shape, so the
// standard guards work with it, and gives a full `Lock` handle for each side
// (Redisson's readLock()/writeLock()), which also works with the
// asynchronous operations of <dlock/asio.hpp>:
//
//   dlock::ReadWriteLock catalog = client.get_read_write_lock("catalog");
//   {
//     std::shared_lock<dlock::ReadWriteLock> reading(catalog);  // lock_shared()
//     serve(read_catalog());
//   }
//   {
//     std::unique_lock<dlock::ReadWriteLock> writing(catalog);  // lock()
//     rebuild_catalog(catalog.write_lock().fencing_token());
//   }
//   dlock::Lock reader = catalog.read_lock();                   // a Lock like any other
//
// Model
//   * A write hold excludes every other owner's read and write holds; read
//     holds of different owners coexist. Owners are as for Lock: the calling
//     thread, or the Owner the lock was obtained for
//     (get_read_write_lock(name, owner)), which both sides act for. Read-write
//     lock names are their own namespace: a lock, a semaphore and a
//     read-write lock may share a name without meeting.
//   * Both sides are reentrant per owner (each acquire needs one unlock) and
//     have leases and watchdog renewal exactly like Lock.
//   * Downgrade is allowed: an owner holding the write side may acquire the
//     read side, then release the write side and keep reading. Upgrade is
//     not: an owner holding only the read side that asks for the write side
//     gets std::logic_error, before any SQL (two readers upgrading at once
//     would wait for each other forever).
//   * Writers are not starved: once a writer waits, owners that do not
//     already read wait behind it (reentrant reads still go through), so a
//     stream of overlapping readers keeps a writer out no longer than the
//     read holds already granted. When the writer stops waiting (acquired,
//     timed out, cancelled), new readers are no longer held back by it.
//     (The waiting writer's intent has a lease of 3 * poll_interval, renewed
//     by its client's poller, so a crashed writer holds readers back no
//     longer than that.)
//   * Fencing: a write hold's token follows the Lock rules. A read hold's
//     fencing_token() is nonzero, greater than the token of every write hold
//     that ended before it was granted, and less than the token of every
//     write hold granted after it ended (concurrent readers share a token).
//   * On the read side, is_locked() means some owner reads and
//     remaining_ttl() is the longest read lease left; on the write side they
//     are the writer's. force_unlock() on either side clears every hold of
//     that side.
//
// Cost
//   An uncontended read acquire+release is two statements, like a mutex; so
//   is a write acquire+release when no one reads (after a name's first use
//   in a client, which makes its rows: one or two statements once). The
//   watchdog renews all of a client's read holds in one statement per tick,
//   and all its write holds in another.
//
// Waiting
//   As for Lock: a waiter wakes when a holder in this client releases (at
//   once), when a holder in another client or process releases (at the
//   release, with Options::fast_wakeup: a write hold and each read hold have
//   a bell; a waiting writer watches those of the first three readers to
//   expire), when the poller sees the way clear (each poll_interval, one
//   statement for every waited-for read-write lock), or at the blocking
//   holder's lease end, and then tries again.
//
// Errors
//   As for Lock (std::invalid_argument for bad input before any SQL,
//   BackendError, LockLostError, NotHeldError), plus std::logic_error for an
//   upgrade. The handle holds a plain pointer to its client: it must not
//   outlive it. Copies may be used from different threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "dlock/export.hpp"
#include "dlock/lock.hpp"
#include "dlock/options.hpp"

namespace dlock {

class DatabaseDistributedLock;

class DLOCK_API ReadWriteLock {
 public:
  // The read side as a Lock handle (every Lock operation, sync and async).
  [[nodiscard]] Lock read_lock() const;
  // The write side as a Lock handle.
  [[nodiscard]] Lock write_lock() const;

  // The write side for the lock's owner (std::unique_lock, std::lock_guard):
  // write_lock().lock(), try_lock(), unlock(). lock() throws
  // std::logic_error when the owner holds only the read side.
  void lock();
  [[nodiscard]] bool try_lock();
  void unlock();
  // Waits up to `wait` / until `deadline` for the write side, watchdog mode;
  // the Lock rules for waits (never false early; "forever" saturates).
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return write_lock().try_lock_for(wait);
  }
  template <class Clock, class Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return write_lock().try_lock_until(deadline);
  }

  // The read side for the lock's owner (std::shared_lock).
  void lock_shared();
  [[nodiscard]] bool try_lock_shared();
  void unlock_shared();
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& wait) {
    return read_lock().try_lock_for(wait);
  }
  template <class Clock, class Duration>
  [[nodiscard]] bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return read_lock().try_lock_until(deadline);
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  friend class DatabaseDistributedLock;
  ReadWriteLock(DatabaseDistributedLock* client, std::string name, std::uint64_t owner)
      : client_(client), name_(std::move(name)), owner_(owner) {}

  DatabaseDistributedLock* client_;
  std::string name_;
  std::uint64_t owner_;  // 0: whichever thread calls
};

}  // namespace dlock
