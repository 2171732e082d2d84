// Keys this client waits for only as a watcher that must not keep them from
// anyone (a multi-lock's names: a holder elsewhere that wants one of them
// before it lets go of another would wait for ever): the poller marks none
// of them for it. Part of the engine (engine.hpp).
#pragma once

#include <mutex>
#include <vector>

#include "base/keys.hpp"

namespace dlock::details {

class WatchOnlyKeys {
 public:
  // While it lives, `keys` are watched only.
  class WatchOnly {
   public:
    WatchOnly(WatchOnlyKeys& keys, std::vector<NameKey> watched);
    ~WatchOnly();
    WatchOnly(const WatchOnly&) = delete;
    WatchOnly& operator=(const WatchOnly&) = delete;

   private:
    WatchOnlyKeys& keys_;
    const std::vector<NameKey> watched_;
  };

  bool watched_only(NameKeyView key) const {
    std::lock_guard<std::mutex> guard(mutex_);
    return counts_.find(key) != counts_.end();
  }

 private:
  mutable std::mutex mutex_;
  NameKeyMap<unsigned> counts_;  // each key watched only, and by how many
};

inline WatchOnlyKeys::WatchOnly::WatchOnly(WatchOnlyKeys& keys, std::vector<NameKey> watched)
    : keys_(keys), watched_(std::move(watched)) {
  std::lock_guard<std::mutex> guard(keys_.mutex_);
  for (const auto& key : watched_) ++keys_.counts_[key];
}

inline WatchOnlyKeys::WatchOnly::~WatchOnly() {
  std::lock_guard<std::mutex> guard(keys_.mutex_);
  for (const auto& key : watched_) {
    const auto it = keys_.counts_.find(key);
    if (it != keys_.counts_.end() && --it->second == 0) keys_.counts_.erase(it);
  }
}

}  // namespace dlock::details
