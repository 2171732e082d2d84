// Which intents (HoldKind::Traits::intents: a waiting client's claim on a
// row to go next, its intent_id) this client holds, and which a waiter that
// acquired left to be cleared: the record only, no SQL (the engine runs
// the intent statements). Part of the engine
// (engine.hpp). Thread safety: every member is safe to call concurrently.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

#include "base/keys.hpp"

namespace dlock::details {

class Intents {
 public:
  // Whether this client's intent is on `key` now.
  bool has_intent(NameKeyView key) const {
    if (intent_count_.load(std::memory_order_relaxed) == 0) return false;  // the usual case: no lock
    std::lock_guard<std::mutex> guard(intents_mutex_);
    return intents_.find(key) != intents_.end();
  }
  // The take that cleared this client's intent on `key` ran.
  void intent_taken(NameKeyView key) {
    if (intent_count_.load(std::memory_order_relaxed) == 0) return;  // the usual case: no lock
    forget_intent(key);
  }

 protected:
  // Marks statements and the look at the record that decided them run
  // under this (taken before the record's own lock): the poller's renewal
  // of an intent cannot land after the clear of a waiter that stopped waiting
  // meanwhile.
  std::mutex intent_statements_mutex_;

  void record_intent(const NameKey& key) {
    std::lock_guard<std::mutex> guard(intents_mutex_);
    intents_.emplace(key, true);
    intent_count_.store(intents_.size(), std::memory_order_relaxed);
  }
  // True when the record had it.
  bool forget_intent(NameKeyView key) {
    std::lock_guard<std::mutex> guard(intents_mutex_);
    const auto it = intents_.find(key);
    const bool had = it != intents_.end();
    if (had) intents_.erase(it);
    intent_count_.store(intents_.size(), std::memory_order_relaxed);
    return had;
  }
  // Every intent, forgotten (shutdown).
  std::vector<NameKey> take_all_intents() {
    std::lock_guard<std::mutex> guard(intents_mutex_);
    std::vector<NameKey> all;
    for (const auto& [key, held] : intents_) all.push_back(key);
    intents_.clear();
    intent_count_.store(0, std::memory_order_relaxed);
    return all;
  }
  // Intents left by a waiter that acquired, cleared by the io thread or at
  // the latest by the release of that name.
  void clear_later(const NameKey& key) {
    std::lock_guard<std::mutex> guard(intents_mutex_);
    to_clear_.emplace(key, true);
    to_clear_count_.store(to_clear_.size(), std::memory_order_relaxed);
  }
  bool intent_pending(NameKeyView key) const {
    if (to_clear_count_.load(std::memory_order_relaxed) == 0) return false;  // the usual case: no lock
    std::lock_guard<std::mutex> guard(intents_mutex_);
    return to_clear_.find(key) != to_clear_.end();
  }
  void cleared(NameKeyView key) {
    std::lock_guard<std::mutex> guard(intents_mutex_);
    if (const auto it = to_clear_.find(key); it != to_clear_.end()) to_clear_.erase(it);
    to_clear_count_.store(to_clear_.size(), std::memory_order_relaxed);
  }

 private:
  mutable std::mutex intents_mutex_;
  NameKeyMap<bool> intents_;                   // keys this client holds an intent on
  std::atomic<std::size_t> intent_count_{0};   // intents_.size(), read without the lock
  NameKeyMap<bool> to_clear_;                // see clear_later
  std::atomic<std::size_t> to_clear_count_{0};
};

}  // namespace dlock::details
