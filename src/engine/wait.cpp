// The wait rule and the blocking driver of every wait (engine/wait.hpp).
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <mutex>

#include "engine/engine.hpp"

namespace dlock::details {

namespace {

using Clock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;

// A wait longer than this (about a century) means "forever": it cannot be
// added to a steady_clock time without overflow, and nobody means it.
constexpr Millis kForever = std::chrono::hours(24 * 365 * 100);

using Woken = WaiterRegistry::Subscription::Woken;

// What a blocked watcher waits on: told of every wake of its keys, and
// sticky, so a wake between a step and the wait is not lost (clear()
// before the step, wait_for() after it).
class StickyWake final : public WaiterRegistry::Watcher {
 public:
  void woken() override {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      woken_ = true;
    }
    cv_.notify_all();
  }
  void clear() {
    std::lock_guard<std::mutex> guard(mutex_);
    woken_ = false;
  }
  bool wait_for(Micros timeout) {  // false: `timeout` passed first
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return woken_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool woken_ = false;
};

// How a blocked thread listens, from the first step (kWatch) or from the
// first refusal (kTake) to the end of its wait.
class Listener {
 public:
  Listener(WaiterRegistry& waiters, Wait& wait) : wait_(wait) {
    std::vector<NameKey> keys = wait.keys();
    if (wait.listen == Wait::Listen::kTake) {
      subscription_.emplace(waiters, std::move(keys.front()));
    } else {
      sticky_ = std::make_shared<StickyWake>();
      watches_.reserve(keys.size());
      for (auto& key : keys) watches_.push_back(std::make_unique<WaiterRegistry::Watch>(waiters, key, sticky_));
    }
    wait.started();
  }
  // Before each step: a wake from here on ends the next wait at once.
  void before_step() {
    if (sticky_) sticky_->clear();
  }
  Woken wait_for(Micros wait, const std::atomic<bool>* interrupted) {
    if (sticky_) return sticky_->wait_for(wait) ? Woken::kWoken : Woken::kTimedOut;
    if (const void* request = wait_.handoff_request())
      return subscription_->wait_claimable(wait, request, interrupted);
    return subscription_->wait_for(wait) ? Woken::kWoken : Woken::kTimedOut;
  }

 private:
  Wait& wait_;
  std::optional<WaiterRegistry::Subscription> subscription_;
  std::shared_ptr<StickyWake> sticky_;
  std::vector<std::unique_ptr<WaiterRegistry::Watch>> watches_;
};

bool interrupted_now(const std::atomic<bool>* interrupted) { return interrupted != nullptr && interrupted->load(); }

}  // namespace

WaitRule WaitRule::of(std::optional<Millis> wait) {
  WaitRule rule;
  rule.forever = !wait.has_value() || *wait >= kForever;
  rule.single_attempt = !rule.forever && *wait <= Millis::zero();
  if (!rule.forever) rule.deadline = Clock::now() + *wait;
  return rule;
}

AcquireStep WaitRule::after_refusal(std::int64_t ttl_us) const {
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

AcquireStep Engine::wait(Wait& w, const std::atomic<bool>* interrupted) {
  if (!w.metric) return wait_uncounted(w, interrupted);
  return counted(*w.metric, w.rule.single_attempt, interrupted, [&] { return wait_uncounted(w, interrupted); });
}

void Engine::wait_ended(Wait& w, bool done) noexcept {
  try {
    w.ended(done);
  } catch (const std::exception& e) {
    logger_->debug("dlock: ending a wait: {}", e.what());
  }
}

AcquireStep Engine::wait_uncounted(Wait& w, const std::atomic<bool>* interrupted) {
  AcquireStep step;
  struct Ended {  // after the listener is gone, also when a step throws
    Engine& engine;
    Wait& wait;
    const AcquireStep& step;
    ~Ended() { engine.wait_ended(wait, step.next == AcquireStep::Next::kAcquired); }
  } ended{*this, w, step};
  if (w.rule.single_attempt) return step = w.step();
  if (interrupted_now(interrupted)) return step;
  // A taker's first step runs before it subscribes, so an uncontended
  // acquire (the usual case) never touches the waiter registry. A wake that
  // lands between its refusal and the subscription would be lost, but it
  // shows as a change of the registry's wake count: then the next step
  // comes at once.
  const std::uint64_t wakes_before = waiters_.wakes();
  std::optional<Listener> listener;
  if (w.listen == Wait::Listen::kWatch) listener.emplace(waiters_, w);
  step = w.step();
  if (step.next != AcquireStep::Next::kWait) return step;
  bool try_now = false;
  if (!listener) {
    if (refused_before_subscribing) refused_before_subscribing();
    listener.emplace(waiters_, w);
    try_now = waiters_.wakes() != wakes_before;
  }
  std::optional<CountedWait> counted;
  if (w.metric) counted.emplace(metrics_.get(), *w.metric);
  for (;;) {
    if (try_now) {
      if (interrupted_now(interrupted)) return step = AcquireStep{};
      listener->before_step();
      step = w.step();
      if (step.next != AcquireStep::Next::kWait) return step;
    }
    try_now = true;
    switch (listener->wait_for(step.wait, interrupted)) {
      case Woken::kGranted:
        step.next = AcquireStep::Next::kAcquired;
        return step;
      case Woken::kTimedOut:
        if (w.metric) timed_wait_ended(w.rule.forever, w.rule.deadline);
        break;
      case Woken::kWoken:
        break;
    }
  }
}

}  // namespace dlock::details
