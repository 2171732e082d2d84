// Owner stripes: one owner's operations on one name are serialized. A
// stripe is held across the operation's statement; with 4,096 of them,
// unrelated (name, owner) pairs rarely share one. Part of the engine
// (engine.hpp). Thread safety: safe to call concurrently.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>
#include <vector>

#include "base/keys.hpp"

namespace dlock::details {

class OwnerStripes {
 public:
  // The stripe of `owner` on `name`; `serial` is the kind whose stripes
  // every kind of the name's primitive shares (HoldKind::Traits::serial).
  std::mutex& owner_mutex(Kind serial, std::string_view name, std::uint64_t owner) {
    const std::size_t h = std::hash<std::string_view>{}(name) ^ (owner * 0x9e3779b97f4a7c15ULL) ^
                          (static_cast<std::size_t>(serial) << 7);
    return mutexes_[h % mutexes_.size()];
  }
  // `stripes`, locked in one order (by address, once each), so two callers
  // locking overlapping sets never deadlock.
  static std::vector<std::unique_lock<std::mutex>> lock_in_order(std::vector<std::mutex*> stripes) {
    std::sort(stripes.begin(), stripes.end());
    stripes.erase(std::unique(stripes.begin(), stripes.end()), stripes.end());
    std::vector<std::unique_lock<std::mutex>> locked;
    locked.reserve(stripes.size());
    for (std::mutex* m : stripes) locked.emplace_back(*m);
    return locked;
  }

 private:
  std::array<std::mutex, 4096> mutexes_;
};

}  // namespace dlock::details
