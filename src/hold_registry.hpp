// This client's local view of its holds, keyed by (name, thread).
//
// The database row is the truth; this registry remembers what the client
// needs without asking it: the hold count the next statement will write, the
// mode (watchdog or fixed lease), the fence once known, and the local lease
// deadline, measured on steady_clock from when the acquiring or renewing
// statement was sent (so it always ends no later than the server's expiry).
//
// A hold found lost stays registered, marked lost, until its owner has
// called unlock() as many times as it called lock(): unlock() must not throw
// NotHeldError just because the database took the lock away. Each acquisition
// from free gets a new generation, so the watchdog never confuses a hold with
// a later one on the same key.
//
// Thread safety: every member is safe to call concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dlock::details {

using SteadyTime = std::chrono::steady_clock::time_point;

struct Hold {
  unsigned count = 0;
  std::uint64_t fence = 0;  // 0 until known
  bool watchdog = false;
  bool lost = false;
  std::uint64_t generation = 0;
  // Server id of the pooled session that may hold the name's doorbell (see
  // doorbell.hpp); 0 when none was taken.
  std::uint64_t doorbell_session = 0;
  SteadyTime deadline{};
};

// A hold as the watchdog sees it.
struct HoldRef {
  std::string name;
  std::uint64_t thread = 0;
  std::uint64_t generation = 0;
  std::uint64_t fence = 0;
  SteadyTime deadline{};
};

class HoldRegistry {
 public:
  std::optional<Hold> find(std::string_view name, std::uint64_t thread) const;

  // Records a successful acquire that leaves the count at `count`. `fresh`:
  // the row was taken from free (new generation, not lost, fence = `fence`);
  // otherwise a reentrant acquire of the live hold (generation kept).
  // `doorbell_session` is recorded for a fresh hold only.
  void record_acquire(std::string_view name, std::uint64_t thread, unsigned count, bool watchdog, SteadyTime deadline,
                      std::uint64_t fence, bool fresh, std::uint64_t doorbell_session = 0);
  // Consumes one hold for unlock(): returns the hold as it was before, and
  // leaves count - 1 registered (nothing at 0). nullopt: no hold (misuse).
  std::optional<Hold> take_one(std::string_view name, std::uint64_t thread);
  // Marks the hold of `generation` lost. Returns it if it was live until now
  // (so the caller reports each loss exactly once), with the doorbell session
  // it had; the registry forgets that session, since the caller gives the
  // doorbell back at once (a lost hold keeps none).
  std::optional<Hold> mark_lost(std::string_view name, std::uint64_t thread, std::uint64_t generation);
  void set_fence(std::string_view name, std::uint64_t thread, std::uint64_t generation, std::uint64_t fence);

  // Live watchdog-mode holds, for one renewal round.
  std::vector<HoldRef> watchdog_holds() const;
  // Moves the deadline of each still-current hold in `refs` to `deadline`.
  void extend(const std::vector<HoldRef>& refs, SteadyTime deadline);
  // Distinct names of every registered hold (shutdown).
  std::vector<std::string> names() const;
  std::size_t size() const;

 private:
  static std::string key(std::string_view name, std::uint64_t thread);
  struct Entry {
    std::string name;
    std::uint64_t thread;
    Hold hold;
  };

  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> holds_;
  std::uint64_t next_generation_ = 1;
};

}  // namespace dlock::details
