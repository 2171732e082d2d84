// dlock/semaphore.hpp
//
// `Semaphore` is a counting semaphore shared by every client of one
// database: at most `permits()` permits of one name are held at once,
// across all processes. `Permit` is one held permit: move-only, released by
// its destructor, so a scope bounds the work it admits.
//
//   dlock::Semaphore exports = client.get_semaphore("exports", 4);
//   {
//     dlock::Permit permit = exports.acquire();   // waits for one of 4
//     run_export();
//   }                                             // released here
//
// Model
//   * A permit belongs to the client that acquired it, not to a thread or an
//     Owner: release it from any thread. Semaphore names are their own
//     namespace: a semaphore, a lock and a read-write lock may share a name
//     without meeting.
//   * The bound travels with each acquire; every client of one name is
//     expected to use the same bound. (A client with a smaller bound only
//     ever takes slots below it, so it never admits more than its bound.)
//   * A permit has a lease decided by the database server's clock, exactly
//     like a lock hold: Options::watchdog_timeout, renewed by the client's
//     watchdog, when no lease is given; else the lease given, not renewed. A
//     crashed client's permits come back when their leases end (a plain
//     counter in a row, Redisson's RSemaphore, would leak them).
//
// Cost
//   An uncontended acquire and release are one statement each (after a
//   name's first use, which adds its slot rows as they are needed). The
//   watchdog renews all of a client's permits in one statement per tick.
//
// Waiting
//   A waiting acquire sleeps until a permit is released in this client (at
//   once), a permit of another client or process is released (at the
//   release, with Options::fast_wakeup: each permit has a bell, and a
//   refused waiter watches those of the first three permits to expire), the
//   poller sees one free (each poll_interval, one statement for every
//   waited-for semaphore: the safety net, and the way for releases of
//   permits beyond those three), or the first lease among the holders' runs
//   out, and then tries again. A release in this client with a waiter here
//   hands its permit straight to that waiter in the statement that would
//   have freed it (same slot, the waiter's lease, the slot's next fencing
//   token), so the waiter does not have to take it; such chains end after
//   50 ms, so waiters in other clients are not kept out.
//
// Errors
//   Bad input (an empty, over-long or NUL-containing name; a bound outside
//   1..100,000; a lease <= 0 or over 365 days) throws std::invalid_argument
//   before any SQL; database failures throw BackendError within about
//   io_timeout. try_acquire throws rather than returning empty.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "dlock/export.hpp"
#include "dlock/options.hpp"

namespace dlock {

class DatabaseDistributedLock;
class Semaphore;
namespace asio_impl {
struct PermitAccess;
}
namespace details {
struct AsyncAccess;
}

// One held permit. Move-only; destroying a held permit releases it.
class DLOCK_API Permit {
 public:
  // A permit that holds nothing (held() is false), as a moved-from one.
  Permit() noexcept = default;
  Permit(Permit&& other) noexcept;
  // Releases the permit this one held first, then takes over `other`'s.
  Permit& operator=(Permit&& other) noexcept;
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  ~Permit();  // release()

  // Frees the permit, from any thread (one statement). Idempotent: a
  // released or moved-from permit does nothing. Never throws for database
  // trouble (it is logged; the lease will end). A permit whose lease was
  // lost (expired, force-released) is logged and reported to
  // Options::on_lock_lost with the semaphore's name and fence 0. The client
  // must still exist.
  void release() noexcept;
  // False after release(), a move, or for a default-constructed permit.
  [[nodiscard]] bool held() const noexcept { return id_ != 0; }
  // A semaphore of N permits is N slots, each taken by one permit at a
  // time. The slot this permit occupies (0 .. bound-1), and its fencing
  // token: every take of a slot gets a token greater than any earlier take
  // of that slot, so a resource guarded per slot can refuse a late writer
  // whose lease was lost. One read the first time either is asked, then
  // kept for the life of the permit (they never change while it is held).
  // A permit not held, or whose lease had run out at that read: slot 0,
  // token 0 (not kept). Throws BackendError.
  [[nodiscard]] std::uint32_t slot();
  [[nodiscard]] std::uint64_t fencing_token();
  // The guard statement of this permit (see Lock::guard_sql): NotHeldError
  // for a permit not held (released, moved from); LockLostError when it was
  // counted lost. One read the first time (its slot), then none.
  [[nodiscard]] std::string guard_sql() const;
  // The semaphore's name (empty for a default-constructed permit).
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  friend class Semaphore;
  friend struct asio_impl::PermitAccess;
  Permit(DatabaseDistributedLock* client, std::string name, std::uint64_t id) noexcept
      : client_(client), name_(std::move(name)), id_(id) {}
  // Reads the slot and token once.
  void read_slot();

  DatabaseDistributedLock* client_ = nullptr;
  std::string name_;
  std::uint64_t id_ = 0;  // 0: holds nothing
  std::uint32_t slot_ = 0;
  std::uint64_t fence_ = 0;  // 0 until read
};

// Cheap copyable handle bound to one client, one name and one bound. Must
// not outlive its client. Thread-safe like the client.
class DLOCK_API Semaphore {
 public:
  // Waits as long as it takes for a permit; watchdog-renewed lease.
  [[nodiscard]] Permit acquire();
  // The same with a fixed `lease` (no watchdog).
  [[nodiscard]] Permit acquire(Millis lease);
  // One attempt; empty if every permit is held.
  [[nodiscard]] std::optional<Permit> try_acquire();
  // Waits up to `wait`: never empty before `wait` has passed; a wait <= 0 is
  // one attempt; a wait of about a century or more waits forever.
  [[nodiscard]] std::optional<Permit> try_acquire(Millis wait);
  // The same, then a fixed `lease` (no watchdog).
  [[nodiscard]] std::optional<Permit> try_acquire(Millis wait, Millis lease);
  // permits() minus the permits held now (any client, any bound), never
  // below 0. One read.
  [[nodiscard]] std::uint32_t available_permits();
  [[nodiscard]] std::uint32_t permits() const noexcept { return permits_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  friend class DatabaseDistributedLock;
  friend struct asio_impl::PermitAccess;
  friend struct details::AsyncAccess;
  Semaphore(DatabaseDistributedLock* client, std::string name, std::uint32_t permits)
      : client_(client), name_(std::move(name)), permits_(permits) {}
  std::optional<Permit> acquire_for(std::optional<Millis> lease, std::optional<Millis> wait);

  DatabaseDistributedLock* client_;
  std::string name_;
  std::uint32_t permits_;
};

}  // namespace dlock
