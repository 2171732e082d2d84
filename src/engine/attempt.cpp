// Acquire: one attempt (attempt_step) and its Wait (AcquireWait).
#include <spdlog/spdlog.h>

#include "base/micros.hpp"
#include "base/printable.hpp"
#include "base/validation.hpp"
#include "engine/engine.hpp"

namespace dlock::details {

namespace {

using Clock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;

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
  static_cast<WaitRule&>(r) = WaitRule::of(wait);
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
  return r.after_refusal(refused->ttl_us);
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
    // The take cleared this client's intent on the row, if it had one there.
    if (k.traits.intents == HoldKind::Traits::Intent::kWhenNotRung && taken.cleared_intent) intent_taken(r.key);
    if (k.traits.takes_are_news) waiters_.tell_watchers(r.key);
    if (logger_->should_log(spdlog::level::debug))
      logger_->debug("dlock: {} {} acquired by {}/{} ({})", kind_name(r.key.kind), printable(r.key.name), machine_id_,
                     r.owner, r.watchdog ? "watchdog" : "fixed lease");
    return std::nullopt;
  }
  if (r.single_attempt) return HoldKind::Refusal{};
  // A kind whose waiters go first once they wait (the write side) sets its
  // intent on the row now; the poller keeps it alive.
  if (k.traits.intents == HoldKind::Traits::Intent::kWhenRefused && !has_intent(r.key)) set_intent(r.key);
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
  if (k.traits.intents != HoldKind::Traits::Intent::kNone) drop_intent(key, acquired);
  k.waiting_ended(*this, key);
  if (bells_) bells_->disarm(key);
}

AcquireStep Engine::drive(const AcquireRequest& request, const std::atomic<bool>* interrupted) {
  AcquireWait w(*this, request);
  return wait(w, interrupted);
}

AcquireWait::AcquireWait(Engine& engine, const AcquireRequest& request)
    : Wait(Listen::kTake, request, request.owner, metric_kind(request.key.kind),
           "dlock: the wait was cancelled before the lock was acquired"),
      engine_(engine),
      request_(request) {}

AcquireStep AcquireWait::step() {
  const AcquireStep step = engine_.attempt_step(request_);
  if (step.next != AcquireStep::Next::kAcquired && !request_.single_attempt) waited_ = true;
  return step;
}

void AcquireWait::started() {
  waited_ = true;
  engine_.waiting_started(request_);
}

void AcquireWait::ended(bool done) {
  if (waited_) engine_.waiting_ended(request_.key, done);
  engine_.kind(request_.key.kind).request_ended(engine_, request_, done);
}

const void* AcquireWait::handoff_request() const {
  return engine_.kind(request_.key.kind).traits.hands_over ? &request_ : nullptr;
}

}  // namespace dlock::details
