// (kind, name) keys noted for a while, or until the note is taken: the
// client's short-lived notes about a name that change how its next attempt
// goes (the hold-back after a chain of handoffs, the "seen free" hint that
// makes an attempt ask the database despite a local holder).
//
// Checked on every waiting attempt, so the common case, no note at all, is
// one atomic load. Notes are removed when taken or found expired, so the
// map stays as small as the names in play.
//
// Thread safety: every member is safe to call concurrently.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <iterator>
#include <mutex>
#include <string>
#include <string_view>

#include "base/keys.hpp"

namespace dlock::details {

class NameNotes {
 public:
  using Clock = std::chrono::steady_clock;

  // Notes `name` until `until` (replacing an earlier note);
  // Clock::time_point::max(): until taken.
  void note(NameKeyView name, Clock::time_point until) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (const auto it = notes_.find(name); it != notes_.end()) {
      it->second = until;
    } else {
      notes_.emplace(NameKey(name), until);
    }
    if (notes_.size() >= sweep_at_) {
      // Names noted once and never looked at again: drop the expired ones
      // now and then, so the map stays as small as the names in play.
      const auto now = Clock::now();
      for (auto it = notes_.begin(); it != notes_.end();) it = it->second <= now ? notes_.erase(it) : std::next(it);
      sweep_at_ = std::max<std::size_t>(kFirstSweep, 2 * notes_.size());
    }
    size_.store(notes_.size(), std::memory_order_relaxed);
  }
  std::size_t size() const { return size_.load(std::memory_order_relaxed); }
  static constexpr std::size_t kFirstSweep = 1024;
  // How long `name` stays noted (zero when it is not).
  std::chrono::microseconds left(NameKeyView name) {
    if (size_.load(std::memory_order_relaxed) == 0) return std::chrono::microseconds::zero();
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = notes_.find(name);
    if (it == notes_.end()) return std::chrono::microseconds::zero();
    const auto now = Clock::now();
    // Rounded up: a live note never reads as none (take() would still
    // find it live).
    if (it->second > now) return std::chrono::ceil<std::chrono::microseconds>(it->second - now);
    erase(it);
    return std::chrono::microseconds::zero();
  }
  // True if `name` was noted (and the note had not expired); removes it.
  bool take(NameKeyView name) {
    if (size_.load(std::memory_order_relaxed) == 0) return false;
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = notes_.find(name);
    if (it == notes_.end()) return false;
    const bool live = it->second > Clock::now();
    erase(it);
    return live;
  }

 private:
  using Map = NameKeyMap<Clock::time_point>;
  void erase(Map::iterator it) {
    notes_.erase(it);
    size_.store(notes_.size(), std::memory_order_relaxed);
  }

  std::mutex mutex_;
  Map notes_;
  std::atomic<std::size_t> size_{0};
  std::size_t sweep_at_ = kFirstSweep;
};

}  // namespace dlock::details
