// Names whose rows this client has seen in the table (of one kind).
//
// Rows are never deleted, so a fresh acquire of a known name can use a plain
// conditional UPDATE instead of the upsert, which costs the server an insert
// attempt and a duplicate-key lookup on every acquire. If someone deletes
// rows anyway, the refused UPDATE's follow-up read finds no row, the name is
// forgotten, and the upsert runs. Bounded: when full it starts over, and
// names are relearned at the price of one upsert each.
//
// Thread safety: every member is safe to call concurrently.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

#include "base/string_map.hpp"

namespace dlock::details {

class KnownRows {
 public:
  static constexpr std::size_t kCapacity = 1 << 16;

  bool contains(std::string_view name) const {
    std::lock_guard<std::mutex> guard(mutex_);
    return names_.contains(name);
  }
  void add(std::string_view name) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (names_.size() >= kCapacity) names_.clear();
    names_.emplace(name);
  }
  void forget(std::string_view name) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (const auto it = names_.find(name); it != names_.end()) names_.erase(it);
  }

 private:
  mutable std::mutex mutex_;
  StringSet names_;
};

}  // namespace dlock::details
