// The engine's fixed timings and the knobs tests and benchmarks turn. Part
// of the engine (engine.hpp); every knob is safe to set from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "dlock/options.hpp"

namespace dlock::details {

class EngineTuning {
 public:
  // How long a chain of local handoffs may keep a name from other clients,
  // and how long this client then holds back its own fresh takes.
  static constexpr Millis kHandoffChain{50};
  static constexpr Millis kYieldAfterChain{5};
  // How long a name stays marked as waited for elsewhere after a ring.
  static constexpr Millis kRingAtOnceFor{1000};
  // How soon a failed renewal is tried again (never later than the next
  // tick either).
  static constexpr Millis kRenewRetry{250};
  // Longest wait in line or on a fair queue entry (one statement; see
  // wakeup/bell_watcher.hpp, "Waiting in turn").
  static constexpr int kTurnWaitSeconds = 30;

  // Direct handoffs made so far; whether a release may make one (default
  // on); the chain's bound (default kHandoffChain).
  std::uint64_t handoffs() const noexcept { return handoffs_.load(std::memory_order_relaxed); }
  void enable_handoffs(bool on) noexcept { handoffs_enabled_.store(on, std::memory_order_relaxed); }
  void set_handoff_chain_for_tests(Millis bound) noexcept {
    handoff_chain_ms_.store(bound.count(), std::memory_order_relaxed);
  }
  // Runs on the acquiring thread when a blocking acquire's first attempt
  // was refused, before it subscribes (tests; set while no acquire runs).
  std::function<void()> refused_before_subscribing;

 protected:
  std::atomic<std::uint64_t> handoffs_{0};
  std::atomic<bool> handoffs_enabled_{true};
  std::atomic<Millis::rep> handoff_chain_ms_{kHandoffChain.count()};
};

}  // namespace dlock::details
