// Which of this client's slot rows of a name are in use: the read-write
// lock's reader slots (primitives/read_write_lock/) and the fair lock's
// queue entries (primitives/fair_lock/).
//
// A client keeps one slot row per hold (or queue entry) it has on a name
// at once, numbered 0, 1, ..., and reuses them from hold to hold: a
// read acquire takes the lowest slot not in use here, so a name read by one
// owner at a time needs one row for the client's whole life. A slot's row
// is made once (known() tells whether this client has made it); if it was
// deleted behind the client's back, forget() makes the next acquire make it
// again.
//
// Bounded: once more than `capacity` names have entries, a release that
// leaves its name with no slot in use drops that name's entries, so a
// client that reads ever new names (one per entity) does not grow for
// ever; a dropped name's next acquire makes sure of its row again (one
// idempotent statement).
//
// Thread safety: every member is safe to call concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dlock::details {

class NameSlots {
 public:
  static constexpr std::size_t kCapacity = 1 << 16;
  explicit NameSlots(std::size_t capacity = kCapacity) : capacity_(capacity) {}

  struct Slot {
    std::uint32_t index = 0;
    bool known = false;  // its row exists (made by this client)
  };

  // The lowest slot of `name` not in use, now in use.
  Slot allocate(std::string_view name) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto& slots = names_[std::string(name)];
    const auto now = std::chrono::steady_clock::now();
    std::uint32_t i = 0;
    while (i < slots.size() && (slots[i].used || slots[i].busy_until > now)) ++i;
    if (i == slots.size()) slots.push_back(Entry{});
    slots[i].used = true;
    return Slot{i, slots[i].known};
  }
  void mark_known(std::string_view name, std::uint32_t index) { set(name, index, [](Entry& e) { e.known = true; }); }
  void forget(std::string_view name, std::uint32_t index) { set(name, index, [](Entry& e) { e.known = false; }); }
  // The slot is no longer in use; with `busy_for`, its row stays taken that
  // long (unlock_at_least), so no acquire here reuses it before. A name with
  // no slot in use keeps its entries (the rows exist and will be reused)
  // while the names are within capacity.
  void release(std::string_view name, std::uint32_t index,
               std::chrono::microseconds busy_for = std::chrono::microseconds::zero()) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = names_.find(std::string(name));
    if (it == names_.end() || index >= it->second.size()) return;
    const auto now = std::chrono::steady_clock::now();
    it->second[index].used = false;
    if (busy_for > std::chrono::microseconds::zero()) it->second[index].busy_until = now + busy_for;
    if (names_.size() <= capacity_) return;
    for (const auto& e : it->second)
      if (e.used || e.busy_until > now) return;
    names_.erase(it);
  }
  // Names with entries (tests).
  std::size_t names() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return names_.size();
  }
  // Every name with entries (shutdown: this client's rows to delete).
  std::vector<std::string> all_names() const {
    std::lock_guard<std::mutex> guard(mutex_);
    std::vector<std::string> out;
    out.reserve(names_.size());
    for (const auto& [name, slots] : names_) out.push_back(name);
    return out;
  }
  std::size_t in_use() const {
    std::lock_guard<std::mutex> guard(mutex_);
    std::size_t n = 0;
    for (const auto& [name, slots] : names_)
      for (const auto& e : slots) n += e.used ? 1 : 0;
    return n;
  }

 private:
  struct Entry {
    bool used = false;
    bool known = false;
    // Not reused before (its row kept taken by unlock_at_least).
    std::chrono::steady_clock::time_point busy_until{};
  };
  template <class Fn>
  void set(std::string_view name, std::uint32_t index, Fn&& fn) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = names_.find(std::string(name));
    if (it != names_.end() && index < it->second.size()) fn(it->second[index]);
  }

  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::vector<Entry>> names_;
};

}  // namespace dlock::details
