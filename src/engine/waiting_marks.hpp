// Which waiting marks (HoldKind::Traits::intents) this client holds, and
// which a waiter that acquired left to be cleared: the record only, no SQL
// (the engine runs the marking statements). Part of the engine
// (engine.hpp). Thread safety: every member is safe to call concurrently.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

#include "base/keys.hpp"

namespace dlock::details {

class WaitingMarks {
 public:
  // Whether this client's mark is on `key` now.
  bool has_intent(NameKeyView key) const {
    std::lock_guard<std::mutex> guard(marks_mutex_);
    return marks_.find(key) != marks_.end();
  }
  // The take that cleared this client's mark on `key` ran.
  void intent_taken(NameKeyView key) {
    if (mark_count_.load(std::memory_order_relaxed) == 0) return;  // the usual case: no lock
    forget_mark(key);
  }

 protected:
  // Marks statements and the look at the record that decided them run
  // under this (taken before the record's own lock): the poller's renewal
  // of a mark cannot land after the unmark of a waiter that stopped waiting
  // meanwhile.
  std::mutex intent_statements_mutex_;

  void record_mark(const NameKey& key) {
    std::lock_guard<std::mutex> guard(marks_mutex_);
    marks_.emplace(key, true);
    mark_count_.store(marks_.size(), std::memory_order_relaxed);
  }
  // True when the record had it.
  bool forget_mark(NameKeyView key) {
    std::lock_guard<std::mutex> guard(marks_mutex_);
    const auto it = marks_.find(key);
    const bool had = it != marks_.end();
    if (had) marks_.erase(it);
    mark_count_.store(marks_.size(), std::memory_order_relaxed);
    return had;
  }
  // Every mark, forgotten (shutdown).
  std::vector<NameKey> take_all_marks() {
    std::lock_guard<std::mutex> guard(marks_mutex_);
    std::vector<NameKey> all;
    for (const auto& [key, marked] : marks_) all.push_back(key);
    marks_.clear();
    mark_count_.store(0, std::memory_order_relaxed);
    return all;
  }
  // Marks left by a waiter that acquired, cleared by the io thread or at
  // the latest by the release of that name.
  void clear_later(const NameKey& key) {
    std::lock_guard<std::mutex> guard(marks_mutex_);
    to_clear_.emplace(key, true);
    to_clear_count_.store(to_clear_.size(), std::memory_order_relaxed);
  }
  bool mark_pending(NameKeyView key) const {
    if (to_clear_count_.load(std::memory_order_relaxed) == 0) return false;  // the usual case: no lock
    std::lock_guard<std::mutex> guard(marks_mutex_);
    return to_clear_.find(key) != to_clear_.end();
  }
  void cleared(NameKeyView key) {
    std::lock_guard<std::mutex> guard(marks_mutex_);
    if (const auto it = to_clear_.find(key); it != to_clear_.end()) to_clear_.erase(it);
    to_clear_count_.store(to_clear_.size(), std::memory_order_relaxed);
  }

 private:
  mutable std::mutex marks_mutex_;
  NameKeyMap<bool> marks_;                   // keys this client holds a mark on
  std::atomic<std::size_t> mark_count_{0};   // marks_.size(), read without the lock
  NameKeyMap<bool> to_clear_;                // see clear_later
  std::atomic<std::size_t> to_clear_count_{0};
};

}  // namespace dlock::details
