// Acquire: one attempt (attempt_step) and the blocking driver (drive).
#include <spdlog/spdlog.h>

#include "base/micros.hpp"
#include "base/printable.hpp"
#include "base/validation.hpp"
#include "engine/engine.hpp"

namespace dlock::details {

namespace {

using Clock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;


// A wait longer than this (about a century) means "forever": it cannot be
// added to a steady_clock time without overflow, and nobody means it.
constexpr Millis kForever = std::chrono::hours(24 * 365 * 100);

}  // namespace

AcquireRequest Engine::make_request(NameKeyView key, std::uint64_t owner, std::optional<Millis> lease,
                                    std::optional<Millis> wait, std::uint32_t bound) {
  validate_name(key.name);
  if (lease) validate_lease(*lease);
  AcquireRequest r;
  r.key = NameKey(key);
  r.owner = owner;
  r.bound = bound;
  r.watchdog = !lease.has_value();
  r.lease = lease.value_or(options_.watchdog_timeout);
  set_wait(wait, r.forever, r.single_attempt, r.deadline);
  HoldKind& k = kind(key.kind);
  if (!holds_.find(key, owner)) k.check(*this, r);
  return r;
}

void Engine::throw_lost(NameKeyView key, std::uint64_t fence) const {
  throw LockLostError(std::string("dlock: the ") + kind_name(key.kind) + " hold on \"" + printable(key.name) +
                      "\" (fence " + std::to_string(fence) +
                      ") was lost (its lease ran out, it was taken over or force-unlocked) while its owner still "
                      "owes unlock() for it; make those unlock() calls before acquiring it again");
}

AcquireStep Engine::attempt_step(const AcquireRequest& r) {
  HoldKind& k = kind(r.key.kind);
  const std::optional<HoldKind::Refusal> refused = attempt(k, r);
  AcquireStep step;
  if (!refused) {
    // A place in line kept for this name goes to the next client.
    if (bells_ && !r.single_attempt) bells_->settled(r.key);
    step.next = AcquireStep::Next::kAcquired;
    return step;
  }
  if (r.single_attempt) return step;  // kGaveUp
  // Holds of this client wake their waiters here when they end; the bell
  // watcher is for holds elsewhere.
  if (bells_) {
    if (refused->foreign) {
      bells_->arm(r.key);
    } else {
      bells_->settled(r.key);
    }
  }
  return wait_step(r.forever, r.deadline, refused->ttl_us);
}

void set_wait(std::optional<Millis> wait, bool& forever, bool& single_attempt, SteadyTime& deadline) {
  forever = !wait.has_value() || *wait >= kForever;
  single_attempt = !forever && *wait <= Millis::zero();
  if (!forever) deadline = Clock::now() + *wait;
}

AcquireStep wait_step(bool forever, SteadyTime deadline, std::int64_t ttl_us) {
  AcquireStep step;  // kGaveUp
  // One millisecond past the blocking lease's end, so the retry finds it over.
  Micros wait = Micros(std::max<std::int64_t>(0, ttl_us) + 1000);
  if (!forever) {
    const auto left = std::chrono::duration_cast<Micros>(deadline - Clock::now());
    if (left <= Micros::zero()) return step;
    wait = std::min(wait, left);
  }
  step.next = AcquireStep::Next::kWait;
  step.wait = wait;
  return step;
}

std::optional<HoldKind::Refusal> Engine::attempt(HoldKind& k, const AcquireRequest& r) {
  std::lock_guard<std::mutex> serial(owner_mutex(k.traits.serial, r.key.name, r.owner));
  CallBudget budget(options_.io_timeout);
  const HoldRegistry::NameView here = holds_.view(r.key, r.owner);
  if (here.own) {
    if (!k.traits.reentrant) throw std::logic_error("dlock: an owner of a permit acquired again");
    reenter(k, r, *here.own);
    if (metrics_) metrics_->reentered(metric_kind(r.key.kind));
    return std::nullopt;
  }
  k.check(*this, r);
  if (!r.single_attempt) {
    // A chain of handoffs to local waiters just ended: hold back, so a
    // waiter in another client gets in (no SQL; the wait ends with it).
    if (const Micros left = yields_.left(r.key); left > Micros::zero() && !k.traits.queues)
      return HoldKind::Refusal{left.count(), false};
    // Held by another owner of this client (the usual case on a hot lock):
    // refused without SQL, since its release wakes us or hands us the hold,
    // and its local lease deadline is never later than the server's expiry.
    // Unless something saw the row free meanwhile: then the database decides.
    if (k.traits.single_holder && !k.traits.queues && here.live_until && !free_hints_.take(r.key)) {
      const auto left = std::chrono::duration_cast<Micros>(*here.live_until - Clock::now()).count();
      return HoldKind::Refusal{std::max<std::int64_t>(0, left), false};
    }
  }
  const Holder holder{machine_id_, r.owner, tagged_hold_id(), host_, pid_};
  const auto sent = Clock::now();
  const HoldKind::Taken taken = k.take(*this, r, holder);
  if (taken.taken) {
    Hold h;
    h.hold_id = taken.hold_id != 0 ? taken.hold_id : holder.hold_id;
    h.count = 1;
    h.fence = taken.fence;
    h.watchdog = r.watchdog;
    h.deadline = taken.ttl_us ? sent + Micros(std::max<std::int64_t>(0, *taken.ttl_us)) : sent + r.lease;
    h.bell_session = taken.bell_session;
    h.slot = taken.slot;
    h.bound = r.bound;
    holds_.record_fresh(r.key, r.owner, h);
    // The take cleared this client's mark on the row, if it had one there.
    if (k.traits.intents == HoldKind::Traits::Intent::kWhenNotRung) intent_taken(r.key);
    if (k.traits.takes_are_news) waiters_.tell_watchers(r.key);
    if (logger_->should_log(spdlog::level::debug))
      logger_->debug("dlock: {} {} acquired by {}/{} ({})", kind_name(r.key.kind), printable(r.key.name), machine_id_,
                     r.owner, r.watchdog ? "watchdog" : "fixed lease");
    return std::nullopt;
  }
  if (r.single_attempt) return HoldKind::Refusal{};
  // A kind whose waiters go first once they wait (the write side) marks
  // the row now; the poller keeps the mark alive.
  if (k.traits.intents == HoldKind::Traits::Intent::kWhenRefused && !has_intent(r.key)) mark_intent(r.key);
  return k.refused(*this, r, taken);
}

bool Engine::reenter(HoldKind& k, const AcquireRequest& r, const Hold& local) {
  // Only the live hold itself, never a new one in its place.
  if (local.lost) throw_lost(r.key, local.fence);
  const unsigned next = local.count + 1;
  const RowKey row{r.key.kind, r.key.name, local.slot};
  const std::int64_t lease_us = micros(r.lease);
  const auto sent = Clock::now();
  const bool live = run_reconciled(
      r.key.name, [&](Connection& c) { return k.retake(*this, c, row, local.hold_id, next, lease_us, r.watchdog); },
      [&](Connection& c) {
        // Absolute count: a late first run writes the same values.
        const auto found = rows_.find(c, row.kind, row.name, local.hold_id);
        if (!found) return Verdict::kNotApplied;
        return found->state == next ? Verdict::kApplied : Verdict::kRunAgain;
      });
  if (!live) {
    note_lost(r.key, r.owner, local.generation, "its lease ran out or it was force-unlocked");
    throw_lost(r.key, local.fence);
  }
  if (!holds_.record_reentrant(r.key, r.owner, local.generation, next, r.watchdog, sent + r.lease)) {
    // Its local deadline passed while the statement ran (the clock counts
    // it lost, if it has not yet). A lost hold stays lost: the caller is
    // told, so free the row rather than leave it held for nobody.
    note_lost(r.key, r.owner, local.generation, "its local lease deadline passed");
    free_quietly(k, row, local.hold_id);
    throw_lost(r.key, local.fence);
  }
  if (logger_->should_log(spdlog::level::debug))
    logger_->debug("dlock: {} {} re-acquired by {}/{} (count {})", kind_name(r.key.kind), printable(r.key.name),
                   machine_id_, r.owner, next);
  return true;
}

void Engine::waiting_started(const AcquireRequest& request) { kind(request.key.kind).waiting_started(*this, request); }

void Engine::waiting_ended(const NameKey& key, bool acquired) {
  if (waiters_.has(key)) return;
  HoldKind& k = kind(key.kind);
  if (k.traits.intents != HoldKind::Traits::Intent::kNone) unmark_intent(key, acquired);
  k.waiting_ended(*this, key);
  if (bells_) bells_->disarm(key);
}

AcquireStep Engine::drive(const AcquireRequest& request, const std::atomic<bool>* interrupted) {
  return counted(metric_kind(request.key.kind), request.single_attempt, interrupted,
                 [&] { return drive_uncounted(request, interrupted); });
}

AcquireStep Engine::drive_uncounted(const AcquireRequest& request, const std::atomic<bool>* interrupted) {
  if (request.single_attempt) return attempt_step(request);
  if (interrupted != nullptr && interrupted->load()) return AcquireStep{};
  // The first attempt runs unsubscribed, so an uncontended acquire (the
  // usual case) never touches the waiter registry. A wake that lands
  // between its refusal and the subscription would be lost, but it shows
  // as a change of the registry's wake count: then the next attempt comes
  // at once.
  const std::uint64_t wakes_before = waiters_.wakes();
  AcquireStep step;
  struct RequestEnded {
    Engine& engine;
    const AcquireRequest& request;
    const AcquireStep& step;
    ~RequestEnded() {
      engine.kind(request.key.kind).request_ended(engine, request, step.next == AcquireStep::Next::kAcquired);
    }
  } request_ended{*this, request, step};
  step = attempt_step(request);
  if (step.next == AcquireStep::Next::kAcquired) return step;
  struct WaitingEnded {
    Engine& engine;
    const NameKey& key;
    const AcquireStep& step;
    ~WaitingEnded() { engine.waiting_ended(key, step.next == AcquireStep::Next::kAcquired); }
  } waiting_ended{*this, request.key, step};  // also disarms what a refused attempt armed
  if (step.next != AcquireStep::Next::kWait) return step;
  if (refused_before_subscribing) refused_before_subscribing();
  // From here on, a release that lands between a refused attempt and the
  // wait leaves a permit, so no wake is lost.
  WaiterRegistry::Subscription subscription(waiters_, request.key);
  const CountedWait counted(metrics_.get(), metric_kind(request.key.kind));
  waiting_started(request);
  bool try_now = waiters_.wakes() != wakes_before;
  const bool claimable = kind(request.key.kind).traits.hands_over;
  for (;;) {
    if (try_now) {
      try_now = false;
      if (interrupted != nullptr && interrupted->load()) return AcquireStep{};
      step = attempt_step(request);
      if (step.next != AcquireStep::Next::kWait) return step;
    }
    try_now = true;
    if (!claimable) {
      if (!subscription.wait_for(step.wait)) timed_wait_ended(request.forever, request.deadline);
    } else {
      switch (subscription.wait_claimable(step.wait, &request, interrupted)) {
        case WaiterRegistry::Subscription::Woken::kGranted:
          step.next = AcquireStep::Next::kAcquired;
          return step;
        case WaiterRegistry::Subscription::Woken::kTimedOut:
          timed_wait_ended(request.forever, request.deadline);
          break;
        case WaiterRegistry::Subscription::Woken::kWoken:
          break;
      }
    }
  }
}

}  // namespace dlock::details
