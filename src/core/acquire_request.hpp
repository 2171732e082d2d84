// One acquire call as the engine sees it, whichever driver waits for it.
//
// The engine is split like a sans-I/O algorithm: Client::attempt_step makes
// one attempt in the database and says what to do next (done, or wait until
// woken or for so long); a driver does the waiting. The synchronous driver
// (Client::acquire) blocks its thread on the name's WaiterRegistry entry;
// the asynchronous one (AsyncAcquire) parks a continuation there and arms a
// timer. So there is one attempt logic, one deadline rule and one place
// that wakes waiters, and two ways to wait.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "dlock/lock.hpp"
#include "dlock/options.hpp"

namespace dlock::details {

struct AcquireRequest {
  std::string name;
  std::uint64_t owner = 0;  // an Owner id, never 0 (0 for a semaphore permit: permits have no owner)
  // > 0: a permit of semaphore `name` under this bound, not a lock hold.
  std::uint32_t permits = 0;
  // For a lock hold: the mutex `name`, or a side of read-write lock `name`.
  LockSide side = LockSide::kMutex;
  // The WaiterRegistry entry its waits use: the name for a mutex; for a
  // semaphore or a side of a read-write lock the name behind NUL and a
  // letter (Client::semaphore_key, Client::rw_key): no name contains NUL,
  // so the namespaces never meet.
  std::string waiter_key;
  Millis lease{0};          // watchdog_timeout in watchdog mode
  bool watchdog = true;
  bool single_attempt = false;  // a wait <= 0
  bool forever = false;         // no wait given, or one of about a century or more
  std::chrono::steady_clock::time_point deadline{};  // unless forever

  // Whether a local release may hand its hold straight to this request's
  // waiter (Client::hand_over, hand_over_write, hand_over_permit): a mutex,
  // a write side or a permit; never a read side.
  bool accepts_handoff() const { return permits != 0 || side == LockSide::kMutex || side == LockSide::kWrite; }
};

struct AcquireStep {
  enum class Next {
    kAcquired,  // the owner holds the name
    kGaveUp,    // refused, and the deadline has passed (or a single attempt)
    kWait,      // refused: wait until woken, or `wait` at most, then step again
  };
  Next next = Next::kGaveUp;
  std::chrono::microseconds wait{0};
  std::uint64_t permit = 0;  // kAcquired for a semaphore: the permit's id
};

}  // namespace dlock::details
