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
// A permit handed straight to a local waiter at its release (Client::
// hand_over_permit) keeps its id: its entry is removed by the release and
// added again for the new holder. Each add() gets a new generation, so the
// watchdog, which works from a snapshot, never marks the new holder's
// permit lost for what it saw of the old one.
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
  // The bound it was acquired under (its slot is below it).
  std::uint32_t permits = 0;
  // When the chain of local handoffs this permit is part of began (the
  // first handoff's statement); zero if it was taken, not handed over.
  std::chrono::steady_clock::time_point chain_started{};
  std::uint64_t generation = 0;  // set by PermitRegistry::add
};

// A live watchdog-mode permit as the watchdog's snapshot saw it.
struct WatchedPermit {
  std::uint64_t id = 0;
  std::chrono::steady_clock::time_point deadline{};
  std::uint64_t generation = 0;
};

class PermitRegistry {
 public:
  void add(std::uint64_t id, HeldPermit permit) {
    std::lock_guard<std::mutex> guard(mutex_);
    permit.generation = ++generations_;
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
  // Live watchdog-mode permits.
  std::vector<WatchedPermit> watchdog_permits() const {
    std::lock_guard<std::mutex> guard(mutex_);
    std::vector<WatchedPermit> out;
    for (const auto& [id, p] : permits_)
      if (p.watchdog && !p.lost) out.push_back(WatchedPermit{id, p.deadline, p.generation});
    return out;
  }
  // Moves the deadline of each still-live watchdog-mode permit among `ids`
  // (a fixed lease is never renewed; the renewing statement skips it too).
  void extend(const std::vector<std::uint64_t>& ids, std::chrono::steady_clock::time_point deadline) {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto id : ids) {
      auto it = permits_.find(id);
      if (it != permits_.end() && !it->second.lost && it->second.watchdog) it->second.deadline = deadline;
    }
  }
  // Marks permit `id` lost and forgets its doorbell session, if it is still
  // the one of `generation` (0: whichever); returns what it was if it was
  // live (the caller reports the loss once and gives the doorbell back).
  std::optional<HeldPermit> mark_lost(std::uint64_t id, std::uint64_t generation = 0) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = permits_.find(id);
    if (it == permits_.end() || it->second.lost) return std::nullopt;
    if (generation != 0 && it->second.generation != generation) return std::nullopt;
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
  std::uint64_t generations_ = 0;
};

}  // namespace dlock::details
