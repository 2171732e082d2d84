// The semaphore permits this client holds, keyed by permit id.
//
// Permits belong to the client, not to an owner: a Permit object may be
// released from any thread. The database row is the truth; this registry
// remembers what the watchdog and the release need without asking it: the
// semaphore's name, the mode (watchdog or fixed lease) and the local lease
// deadline (steady_clock, from when the acquiring or renewing statement was
// sent, so it never ends after the server's expiry). A permit found lost by
// the watchdog stays registered, marked lost, until its Permit is released,
// so that release does not report the loss a second time.
//
// Thread safety: every member is safe to call concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace dlock::details {

struct HeldPermit {
  std::string name;
  bool watchdog = false;
  bool lost = false;
  std::chrono::steady_clock::time_point deadline{};
  // Server id of the pooled session that took the permit's doorbell (see
  // doorbell.hpp); 0 when none was taken.
  std::uint64_t doorbell_session = 0;
};

class PermitRegistry {
 public:
  void add(std::uint64_t id, HeldPermit permit) {
    std::lock_guard<std::mutex> guard(mutex_);
    permits_[id] = std::move(permit);
  }
  // Forgets the permit and returns what was known of it (nullopt: unknown).
  std::optional<HeldPermit> remove(std::uint64_t id) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = permits_.find(id);
    if (it == permits_.end()) return std::nullopt;
    HeldPermit permit = std::move(it->second);
    permits_.erase(it);
    return permit;
  }
  // Live watchdog-mode permits: (id, deadline) pairs.
  std::vector<std::pair<std::uint64_t, std::chrono::steady_clock::time_point>> watchdog_permits() const {
    std::lock_guard<std::mutex> guard(mutex_);
    std::vector<std::pair<std::uint64_t, std::chrono::steady_clock::time_point>> out;
    for (const auto& [id, p] : permits_)
      if (p.watchdog && !p.lost) out.emplace_back(id, p.deadline);
    return out;
  }
  // Moves the deadline of each still-live permit among `ids`.
  void extend(const std::vector<std::uint64_t>& ids, std::chrono::steady_clock::time_point deadline) {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto id : ids) {
      auto it = permits_.find(id);
      if (it != permits_.end() && !it->second.lost) it->second.deadline = deadline;
    }
  }
  // Marks a permit lost and forgets its doorbell session; returns what it
  // was if it was live (the caller reports the loss once and gives the
  // doorbell back).
  std::optional<HeldPermit> mark_lost(std::uint64_t id) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = permits_.find(id);
    if (it == permits_.end() || it->second.lost) return std::nullopt;
    HeldPermit was = it->second;
    it->second.lost = true;
    it->second.doorbell_session = 0;
    return was;
  }
  bool contains(std::uint64_t id) const {
    std::lock_guard<std::mutex> guard(mutex_);
    return permits_.count(id) != 0;
  }
  // Every registered permit id that is not lost (shutdown).
  std::vector<std::uint64_t> live_ids() const {
    std::lock_guard<std::mutex> guard(mutex_);
    std::vector<std::uint64_t> out;
    for (const auto& [id, p] : permits_)
      if (!p.lost) out.push_back(id);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, HeldPermit> permits_;
};

}  // namespace dlock::details
