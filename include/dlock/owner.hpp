// dlock/owner.hpp
//
// `dlock::Owner` names who holds a hold within one client. By default the
// synchronous API acts for the calling thread's owner, `Owner::this_thread()`.
// Work that moves between threads (coroutines, thread pools, callbacks)
// creates an owner of its own with `Owner::create()` and binds a handle to it
// with `DatabaseDistributedLock::get_lock(name, owner)`: such a handle may
// lock on one thread and unlock on another.
//
//   dlock::Owner request = dlock::Owner::create();
//   dlock::Lock lock = client.get_lock("order:42", request);
//   lock.lock();                 // on one thread
//   ...                          // the work hops to another thread
//   lock.unlock();               // fine: the hold belongs to `request`
//
// An owner is a value: cheap to copy, compared by id. Owners are unique in
// the process and never reused; the same owner in two clients is two owners
// (an owner in the database is always (client instance, Owner)).
#pragma once

#include <cstdint>

#include "dlock/export.hpp"

namespace dlock {

class DLOCK_API Owner {
 public:
  // The owner the calling thread acts as: assigned on the thread's first use,
  // unique for the life of the process (never an OS thread id, which is
  // reused).
  static Owner this_thread() noexcept;
  // A new owner, unique in this process, tied to no thread.
  static Owner create() noexcept;
  // Never 0.
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  friend bool operator==(const Owner&, const Owner&) noexcept = default;

 private:
  explicit Owner(std::uint64_t id) noexcept : id_(id) {}
  std::uint64_t id_;
};

}  // namespace dlock
