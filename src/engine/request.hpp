// One acquire call as the engine sees it, whichever driver waits for it.
//
// The engine is split like a sans-I/O algorithm: Engine::attempt_step makes
// one attempt in the database and says what to do next (done, or wait until
// woken or for so long); a driver does the waiting. The synchronous driver
// (Engine::drive) blocks its thread on the key's WaiterRegistry entry; the
// asynchronous one (AsyncAcquire) parks a continuation there and arms a
// timer. So there is one attempt logic, one deadline rule and one place
// that wakes waiters, and two ways to wait.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/keys.hpp"
#include "dlock/options.hpp"

namespace dlock::details {

struct AcquireRequest {
  NameKey key;              // the kind and name of the hold (and of its waiters)
  std::uint64_t owner = 0;  // an Owner id, never 0 (a permit gets an owner of its own)
  std::uint32_t bound = 0;  // a semaphore's bound
  Millis lease{0};          // watchdog_timeout in watchdog mode
  bool watchdog = true;
  bool single_attempt = false;  // a wait <= 0
  bool forever = false;         // no wait given, or one of about a century or more
  std::chrono::steady_clock::time_point deadline{};  // unless forever
  std::string value;  // an election's: what its take proclaims
};

struct AcquireStep {
  enum class Next {
    kAcquired,  // the owner holds it
    kGaveUp,    // refused, and the deadline has passed (or a single attempt)
    kWait,      // refused: wait until woken, or `wait` at most, then step again
  };
  Next next = Next::kGaveUp;
  std::chrono::microseconds wait{0};
};

// The wait rule of every request: `wait` as given (nullopt or about a
// century: forever; <= 0: one attempt), and the step after a refusal whose
// blocking holds end within `ttl_us` (kGaveUp past the deadline).
void set_wait(std::optional<Millis> wait, bool& forever, bool& single_attempt,
              std::chrono::steady_clock::time_point& deadline);
AcquireStep wait_step(bool forever, std::chrono::steady_clock::time_point deadline, std::int64_t ttl_us);

}  // namespace dlock::details
