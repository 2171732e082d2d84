// dlock/distributed_lock.hpp
//
// `DatabaseDistributedLock` is a client of a MySQL/MariaDB lock table: a
// reentrant, lease-based mutual-exclusion lock shared by every process that
// points at the same table. Create one per process (or per logical server)
// and share it between threads.
//
// Model
//   * An owner is (client instance, Owner). The name-based members act for
//     the calling thread (Owner::this_thread()); a handle from
//     get_lock(name, owner) acts for `owner` from any thread. Two clients in
//     one process are two owners, exactly like two processes, also when both
//     are configured with the same machine_id (a label shown to operators).
//   * A hold is reentrant: the owning thread may acquire again; each acquire
//     needs one unlock(). The count lives in the database row (`state`).
//   * A hold has a lease decided by the database server's clock. Without an
//     explicit lease it is `Options::watchdog_timeout`, renewed by a watchdog
//     every third of that until the count reaches 0. With a lease it is not
//     renewed and expires unless released.
//   * Every transition of a name from free (or expired) to held gets a
//     fencing token strictly greater than any earlier one for that name. Pass
//     it to the resource you protect so it can refuse a late writer whose
//     lease was lost.
//
// Cost
//   An uncontended lock()+unlock() is two statements, one round trip each; a
//   reentrant acquire or release is one. The watchdog renews all of this
//   client's holds in one statement per tick, and the poller checks every
//   name local threads wait for in one statement per tick.
//
// Waiting
//   A thread that cannot acquire sleeps until (a) a thread of this client
//   releases the name, (b) the poller sees the row released or expired, or
//   (c) the holder's remaining lease runs out, whichever is first, and then
//   tries again in the database. Wakes are hints; the row is the only truth.
//
// Thread safety
//   All member functions may be called concurrently from any threads. The
//   destructor must not run while other threads still call into the object.
//
// Exception safety
//   Bad arguments throw std::invalid_argument before any SQL. Database
//   failures throw BackendError (strong guarantee: the local state is as if
//   the call had not been made, except that an acquire whose outcome cannot
//   be established may leave a hold in the table that expires after its
//   lease). unlock() never throws for database trouble.
//
// Time limits
//   Every call's statements, their retries (deadlocks, lock wait timeouts)
//   and its wait for a pooled connection share one budget of about
//   io_timeout: a row locked by a foreign transaction fails the call with
//   BackendError in about that time (unlock() logs and returns). Only the
//   wait for another owner's release lasts longer, as long as asked.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/election.hpp"
#include "dlock/errors.hpp"
#include "dlock/export.hpp"
#include "dlock/introspection.hpp"
#include "dlock/lock.hpp"
#include "dlock/metrics.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/options.hpp"
#include "dlock/owner.hpp"
#include "dlock/read_write_lock.hpp"
#include "dlock/semaphore.hpp"

namespace dlock {

namespace details {
class Engine;
struct Primitives;
struct SemaphoreAccess;
struct EngineAccess;  // the library's own tools (src/api/tools.hpp)
struct AsyncAccess;   // the asynchronous entry points (src/api/async.cpp)
}

class DLOCK_API DatabaseDistributedLock {
 public:
  // Validates `options` (std::invalid_argument on a bad field), connects,
  // and creates the table when `options.create_table`. Throws BackendError
  // if the database cannot be reached within connect_timeout / io_timeout,
  // or when the table was made by another dlock version (the message names
  // both; `dlock init` migrates an older one).
  explicit DatabaseDistributedLock(Options options);
  // Releases this client's remaining holds (best effort, one statement),
  // then stops the io thread and closes every connection. Never throws.
  ~DatabaseDistributedLock();
  DatabaseDistributedLock(const DatabaseDistributedLock&) = delete;
  DatabaseDistributedLock& operator=(const DatabaseDistributedLock&) = delete;

  // Blocks until the calling thread holds `name`, in watchdog mode. If it
  // already holds it, increments the hold count. Throws BackendError when the
  // database fails (the wait itself never times out), LockLostError when the
  // calling thread's hold on `name` was lost (lease ran out, taken over,
  // force-unlocked) and it still owes unlock() calls for it: a lost hold is
  // never silently replaced by a new one. Those unlock() calls return
  // normally; after them, lock() works again with a new fencing token.
  void lock(std::string_view name);
  // As above with a fixed `lease` (no watchdog). A reentrant acquire with a
  // lease resets the expiry to now + lease and turns renewal off.
  void lock(std::string_view name, Millis lease);
  // One attempt, watchdog mode. Returns false if another owner holds `name`.
  // Throws (never returns false) for a lost hold (LockLostError) or a
  // database failure (BackendError).
  [[nodiscard]] bool try_lock(std::string_view name);
  // Waits up to `wait` (watchdog mode). Never returns false before `wait`
  // has passed; a wait <= 0 is a single attempt; a wait of about a century
  // or more (Millis::max()) waits forever. Throws LockLostError if the
  // calling thread's earlier hold on `name` was lost and it still owes
  // unlock() for it (see lock()).
  [[nodiscard]] bool try_lock(std::string_view name, Millis wait);
  // The same for any duration type (5s, 1500us, duration<double>(0.5)):
  // rounded up to whole milliseconds, saturating to "forever".
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock(std::string_view name, const std::chrono::duration<Rep, Period>& wait) {
    return try_lock(name, details::saturating_wait(wait));
  }
  // Waits up to `wait`, then holds with a fixed `lease`: the wait comes
  // first, the lease second, as in Redisson's tryLock(waitTime, leaseTime):
  //   client.try_lock("report", /*wait=*/2s, /*lease=*/10min)
  [[nodiscard]] bool try_lock(std::string_view name, Millis wait, Millis lease);
  // The same for any duration types.
  template <class WaitRep, class WaitPeriod, class LeaseRep, class LeasePeriod>
  [[nodiscard]] bool try_lock(std::string_view name, const std::chrono::duration<WaitRep, WaitPeriod>& wait,
                              const std::chrono::duration<LeaseRep, LeasePeriod>& lease) {
    return try_lock(name, details::saturating_wait(wait), details::saturating_wait(lease));
  }
  // Releases one hold of the calling thread. Throws NotHeldError, before any
  // SQL, if this thread holds no hold on `name` in this client. If the
  // database shows the hold was already lost, logs a warning, calls
  // on_lock_lost once, and returns. Never throws for database errors (the
  // lease will expire), so it is safe in a guard's destructor. When the count
  // reaches 0 the watchdog stops renewing before this returns, and one local
  // waiter is woken.
  void unlock(std::string_view name);
  // Clears whoever holds `name` (any client) and wakes waiters. Returns true
  // if an unexpired hold was cleared. The next acquisition gets a new fence.
  bool force_unlock(std::string_view name);

  // True if any owner holds an unexpired hold on `name` (one read).
  [[nodiscard]] bool is_locked(std::string_view name);
  // True if the calling thread holds `name` in this client. No SQL when it
  // holds nothing locally; otherwise one read confirms the row.
  [[nodiscard]] bool is_held_by_current_thread(std::string_view name);
  // The calling thread's hold count; 0 if it holds none or its hold is lost.
  [[nodiscard]] int hold_count(std::string_view name);
  // Time left on the current holder's lease (any owner), by the server's
  // clock; nullopt when `name` is not locked.
  [[nodiscard]] std::optional<Millis> remaining_ttl(std::string_view name);
  // The fencing token of the calling thread's hold; 0 if it holds none or
  // its lease has run out. Costs one read the first time per hold (the token
  // is fixed for the life of a hold), none after.
  [[nodiscard]] std::uint64_t fencing_token(std::string_view name);

  // A copyable handle bound to this client and `name` (validated now; throws
  // std::invalid_argument). It acts for whichever thread calls it. The
  // handle must not outlive this client.
  [[nodiscard]] Lock get_lock(std::string name);
  // A handle that acts for `owner` from any thread: lock on one thread,
  // unlock on another. Its is_held_by_current_thread() and hold_count()
  // report `owner`'s hold. Operations of one owner on one name are
  // serialized, so the count stays exact even if several threads use the
  // owner at once (each acquire still needs its unlock).
  [[nodiscard]] Lock get_lock(std::string name, Owner owner);
  // A handle on fair lock `name` (a namespace of its own), with every Lock
  // operation. Grants follow arrival: among owners waiting on the name,
  // across all clients and processes, the one that began waiting first is
  // granted first, by the release itself (in the same commit, with a new
  // fencing token; the waiter runs no statement to take it). try_lock()
  // and a zero wait succeed only when the name is free and nobody waits;
  // reentrant acquires always go through. A waiter that stops waiting
  // (timed out, cancelled, its client destroyed) leaves the queue at once;
  // one whose process died delays the ones behind it by at most
  // 3 * poll_interval. Throws std::invalid_argument (no SQL) for a bad
  // name. The handle must not outlive this client.
  [[nodiscard]] Lock get_fair_lock(std::string name);
  // The same, acting for `owner` from any thread.
  [[nodiscard]] Lock get_fair_lock(std::string name, Owner owner);
  // A copyable handle on plain lock names `names` held together, all or
  // nothing (see <dlock/multi_lock.hpp>), acting for whichever thread
  // calls it. Throws std::invalid_argument (no SQL) for an empty list, more
  // than 64 distinct names, or a bad name. The handle must not outlive
  // this client.
  [[nodiscard]] MultiLock get_multi_lock(std::vector<std::string> names);
  // The same, acting for `owner` from any thread.
  [[nodiscard]] MultiLock get_multi_lock(std::vector<std::string> names, Owner owner);
  // A copyable handle on election `name` (see <dlock/election.hpp>),
  // campaigning for whichever thread calls it. Throws
  // std::invalid_argument (no SQL) for a bad name. The handle must not
  // outlive this client.
  [[nodiscard]] Election get_election(std::string name);
  // The same, campaigning for `owner` from any thread.
  [[nodiscard]] Election get_election(std::string name, Owner owner);
  // A copyable handle on semaphore `name` with bound `permits` (see
  // <dlock/semaphore.hpp>). Throws std::invalid_argument (no SQL) for a bad
  // name or a bound outside 1..100,000. The handle must not outlive this
  // client.
  [[nodiscard]] Semaphore get_semaphore(std::string name, std::uint32_t permits);
  // A copyable handle on read-write lock `name` (see
  // <dlock/read_write_lock.hpp>) acting for whichever thread calls it.
  // Throws std::invalid_argument (no SQL) for a bad name. The handle must
  // not outlive this client.
  [[nodiscard]] ReadWriteLock get_read_write_lock(std::string name);
  // The same, both sides acting for `owner` from any thread.
  [[nodiscard]] ReadWriteLock get_read_write_lock(std::string name, Owner owner);
  // What the database shows of the holds and waiters of every kind (see
  // <dlock/introspection.hpp>), read on one pooled connection. Throws
  // std::invalid_argument (no SQL) for a bad name in `query`, BackendError
  // when the read fails within io_timeout.
  [[nodiscard]] Activity inspect(const ActivityQuery& query = {});
  // What this client has counted since it was made, and its gauges now
  // (see <dlock/metrics.hpp>). No SQL; any thread. All zero when
  // Options::metrics is false.
  [[nodiscard]] Metrics metrics() const;
  // Ends `owner`'s pending asynchronous lock waits in this client (see
  // <dlock/asio.hpp>): each completes with Cancelled and holds nothing.
  // Waits that start later are not affected; neither are synchronous waits
  // nor holds the owner already has. Thread-safe; no SQL.
  void cancel(Owner owner);
  // This client's identity in the table.
  [[nodiscard]] const std::string& machine_id() const noexcept;

 private:
  friend struct details::EngineAccess;
  friend struct details::AsyncAccess;
  friend class Lock;
  friend class ReadWriteLock;
  friend class MultiLock;
  friend class Election;
  friend struct details::SemaphoreAccess;
  // For Lock: the same operations for an explicit owner id (0: the calling
  // thread) on a mutex or one side of a read-write lock.
  using Side = details::LockSide;
  bool acquire_for(std::string_view name, std::uint64_t owner, std::optional<Millis> lease,
                   std::optional<Millis> wait, Side side = Side::kMutex);
  void release_for(std::string_view name, std::uint64_t owner, Side side = Side::kMutex,
                   Millis at_least = Millis::zero());
  bool is_held_by(std::string_view name, std::uint64_t owner, Side side = Side::kMutex);
  int hold_count_for(std::string_view name, std::uint64_t owner, Side side = Side::kMutex);
  std::uint64_t fencing_token_for(std::string_view name, std::uint64_t owner, Side side = Side::kMutex);
  std::string guard_sql_for(const std::vector<std::string>& names, std::uint64_t owner, Side side = Side::kMutex);
  bool force_unlock_side(std::string_view name, Side side);
  bool acquire_set_for(const std::vector<std::string>& names, std::uint64_t owner, std::optional<Millis> lease,
                       std::optional<Millis> wait);
  void release_set_for(const std::vector<std::string>& names, std::uint64_t owner);
  bool is_locked_side(std::string_view name, Side side);
  std::optional<Millis> remaining_ttl_side(std::string_view name, Side side);

  std::unique_ptr<details::Engine> engine_;
  std::unique_ptr<details::Primitives> primitives_;  // over engine_, which outlives them
};

}  // namespace dlock
