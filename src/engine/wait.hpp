// One wait of any primitive, as the engine's one pair of drivers sees it
// (Curator's one lock loop under every recipe, each giving one predicate).
//
// A primitive gives a Wait: its step (one attempt or one look in the
// database, and what next: done, gave up, or wait until woken or for so
// long) and whom it listens to. The drivers do everything else, once for
// every primitive: listening between steps, handoffs, deadlines,
// interrupts, cancellation and counting. Engine::wait is the blocking
// driver (engine/wait.cpp), AsyncWait the asynchronous one
// (engine/async_wait.hpp).
//
// Two ways to listen:
//  - kTake: one key, as a subscriber of its WaiterRegistry entry. A wake
//    goes to one taker, and a release may hand the hold to it
//    (handoff_request). The blocking driver subscribes only once its first
//    step was refused, so an uncontended acquire never touches the
//    registry. A lock, a side of a read-write lock, a permit, a leadership.
//  - kWatch: any number of keys, as a watcher, from before the first step:
//    told of every wake of its keys, taking none away from their takers.
//    A multi-lock (it must not keep a name it cannot take), an election's
//    observer.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/keys.hpp"
#include "base/kinds_table.hpp"
#include "dlock/options.hpp"

namespace dlock {
namespace asio_impl {
class AsyncCompletion;
}

namespace details {

// What one step says to do next.
struct AcquireStep {
  enum class Next {
    kAcquired,  // done: the owner holds it (an observer: it saw a change)
    kGaveUp,    // refused, and the deadline has passed (or a single attempt)
    kWait,      // refused: wait until woken, or `wait` at most, then step again
  };
  Next next = Next::kGaveUp;
  std::chrono::microseconds wait{0};
};

// How long a request may wait, fixed when it is made.
struct WaitRule {
  bool single_attempt = false;  // a wait <= 0
  bool forever = false;         // no wait given, or one of about a century or more
  std::chrono::steady_clock::time_point deadline{};  // unless forever

  // The rule of `wait` as a caller gives it (nullopt or about a century:
  // forever; <= 0: one attempt), from now.
  static WaitRule of(std::optional<Millis> wait);
  // The step after a refusal whose blocking holds end within `ttl_us`
  // (a millisecond past it); kGaveUp once the deadline has passed.
  AcquireStep after_refusal(std::int64_t ttl_us) const;
};

class Wait {
 public:
  enum class Listen { kTake, kWatch };

  Wait(Listen how, const WaitRule& its_rule, std::uint64_t its_owner, std::optional<MetricKind> counted_as,
       const char* cancelled_message)
      : listen(how), rule(its_rule), owner(its_owner), metric(counted_as), cancelled(cancelled_message) {}
  virtual ~Wait() = default;
  Wait(const Wait&) = delete;
  Wait& operator=(const Wait&) = delete;

  // One step. May throw: the wait ends with that error.
  virtual AcquireStep step() = 0;
  // The keys it listens to (kTake: one); asked once, as listening begins.
  virtual std::vector<NameKey> keys() const = 0;
  // Once, as listening begins (for kTake in the blocking driver: after the
  // first refusal).
  virtual void started() {}
  // Once, as the wait ends, after listening stopped; `done`: its last step
  // was kAcquired (or a hold was handed to it). May throw (logged).
  virtual void ended(bool /*done*/) {}
  // kTake: non-null while it accepts a hold handed straight to it: what
  // the hold is handed over for (opaque to the registry). Any thread.
  virtual const void* handoff_request() const { return nullptr; }
  // Once done, in the asynchronous driver: the completion's value (never
  // 0), having given the completion what else it takes.
  virtual std::uint64_t deliver(asio_impl::AsyncCompletion& /*completion*/) { return owner; }

  const Listen listen;
  const WaitRule& rule;                    // the request's, which the Wait keeps
  const std::uint64_t owner;               // for cancel(owner); never 0
  const std::optional<MetricKind> metric;  // counted as an acquire call of this kind; none: not counted
  const char* const cancelled;             // the message of the Cancelled error a cancellation ends it with
};

}  // namespace details
}  // namespace dlock
