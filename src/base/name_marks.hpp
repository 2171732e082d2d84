// (kind, name) keys marked for a while, or until the mark is taken: the
// client's short-lived notes about a name that change how its next attempt
// goes (the hold-back after a chain of handoffs, the "seen free" hint that
// makes an attempt ask the database despite a local holder).
//
// Checked on every waiting attempt, so the common case, no mark at all, is
// one atomic load. Marks are removed when taken or found expired, so the
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

class NameMarks {
 public:
  using Clock = std::chrono::steady_clock;

  // Marks `name` until `until` (replacing an earlier mark);
  // Clock::time_point::max(): until taken.
  void mark(NameKeyView name, Clock::time_point until) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (const auto it = marks_.find(name); it != marks_.end()) {
      it->second = until;
    } else {
      marks_.emplace(NameKey(name), until);
    }
    if (marks_.size() >= sweep_at_) {
      // Names marked once and never looked at again: drop the expired ones
      // now and then, so the map stays as small as the names in play.
      const auto now = Clock::now();
      for (auto it = marks_.begin(); it != marks_.end();) it = it->second <= now ? marks_.erase(it) : std::next(it);
      sweep_at_ = std::max<std::size_t>(kFirstSweep, 2 * marks_.size());
    }
    size_.store(marks_.size(), std::memory_order_relaxed);
  }
  std::size_t size() const { return size_.load(std::memory_order_relaxed); }
  static constexpr std::size_t kFirstSweep = 1024;
  // How long `name` stays marked (zero when it is not).
  std::chrono::microseconds left(NameKeyView name) {
    if (size_.load(std::memory_order_relaxed) == 0) return std::chrono::microseconds::zero();
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = marks_.find(name);
    if (it == marks_.end()) return std::chrono::microseconds::zero();
    const auto now = Clock::now();
    // Rounded up: a live mark never reads as none (take() would still
    // find it live).
    if (it->second > now) return std::chrono::ceil<std::chrono::microseconds>(it->second - now);
    erase(it);
    return std::chrono::microseconds::zero();
  }
  // True if `name` was marked (and the mark had not expired); removes it.
  bool take(NameKeyView name) {
    if (size_.load(std::memory_order_relaxed) == 0) return false;
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = marks_.find(name);
    if (it == marks_.end()) return false;
    const bool live = it->second > Clock::now();
    erase(it);
    return live;
  }

 private:
  using Map = NameKeyMap<Clock::time_point>;
  void erase(Map::iterator it) {
    marks_.erase(it);
    size_.store(marks_.size(), std::memory_order_relaxed);
  }

  std::mutex mutex_;
  Map marks_;
  std::atomic<std::size_t> size_{0};
  std::size_t sweep_at_ = kFirstSweep;
};

}  // namespace dlock::details
