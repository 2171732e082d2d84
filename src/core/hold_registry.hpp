// This client's local view of its holds, keyed by (name, owner).
//
// The database row is the truth; this registry remembers what the client
// needs without asking it: the hold's random id (which every statement of
// the hold matches), the hold count the next statement will write, the mode
// (watchdog or fixed lease), the fence once known, and the local lease
// deadline, measured on steady_clock from when the acquiring or renewing
// statement was sent (so it always ends no later than the server's expiry).
//
// A hold found lost stays registered, marked lost, until its owner has
// called unlock() as many times as it called lock(): unlock() must not throw
// NotHeldError just because the database took the lock away, and an acquire
// meanwhile throws LockLostError instead of silently starting a new hold. A
// lost hold is never revived. Each acquisition from free gets a new
// generation, so the watchdog never confuses a hold with a later one on the
// same key.
//
// Thread safety: every member is safe to call concurrently.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "containers/string_map.hpp"
#include "sql/lock_table.hpp"

namespace dlock::details {

using SteadyTime = std::chrono::steady_clock::time_point;

struct Hold {
  std::uint64_t hold_id = 0;
  unsigned count = 0;
  std::uint64_t fence = 0;  // 0 until known
  bool watchdog = false;
  bool lost = false;
  std::uint64_t generation = 0;
  // Session key of the pooled session whose bell rings for this hold (see
  // doorbell.hpp): for a lock, the session bell its row records; for a read
  // or write hold or a permit, the session holding its doorbell. 0: none.
  std::uint64_t doorbell_session = 0;
  SteadyTime deadline{};
  // A read hold of a read-write lock: the client's reader slot it is in.
  std::uint32_t slot = 0;
  // For a hold handed over from a local hold (Client::release): when the
  // chain of handoffs it continues began (the first handoff since the row
  // was taken from free), so that chains, which keep other clients out, can
  // be bounded. Unset ({}) for a hold taken from free.
  SteadyTime chain_started{};
};

// A hold as the watchdog sees it.
struct HoldRef {
  std::string name;
  std::uint64_t owner = 0;
  std::uint64_t hold_id = 0;
  std::uint64_t generation = 0;
  std::uint64_t fence = 0;
  SteadyTime deadline{};
};

class HoldRegistry {
 public:
  std::optional<Hold> find(std::string_view name, std::uint64_t owner) const;
  // What an acquire of `name` by `owner` needs to know, in one look: the
  // owner's own hold (find) and, for the other owners, live_deadline.
  struct NameView {
    std::optional<Hold> own;
    std::optional<SteadyTime> live_until;
  };
  NameView view(std::string_view name, std::uint64_t owner) const;
  // The local lease deadline of a live hold on `name` by any owner of this
  // client, if there is one and that deadline has not passed: the row is
  // then held, by this client, at least until then (its unlock or handoff
  // wakes local waiters). For lock names (at most one live hold each).
  std::optional<SteadyTime> live_deadline(std::string_view name) const;
  // True if some owner of this client has a live hold with this id (hold ids
  // are random 64-bit values, so the id alone names the hold).
  bool is_ours(std::uint64_t hold_id) const;

  // Records a new hold of `owner` on `name`, count `count` (1), as a new
  // generation: one just taken from free, or one handed over by a local
  // release (Client::hand_over), which passes when the chain of handoffs it
  // continues began. Replaces nothing: the caller checked there was no entry.
  void record_fresh(std::string_view name, std::uint64_t owner, std::uint64_t hold_id, unsigned count, bool watchdog,
                    SteadyTime deadline, std::uint64_t fence, std::uint64_t doorbell_session,
                    std::uint32_t slot = 0, SteadyTime chain_started = {});
  // Records a reentrant acquire of the hold of `generation`: count, mode and
  // deadline. False, changing nothing, if that hold is gone or was marked
  // lost meanwhile (a lost hold is never revived).
  bool record_reentrant(std::string_view name, std::uint64_t owner, std::uint64_t generation, unsigned count,
                        bool watchdog, SteadyTime deadline);
  // Consumes one hold for unlock(): returns the hold as it was before, and
  // leaves count - 1 registered (nothing at 0). nullopt: no hold (misuse).
  std::optional<Hold> take_one(std::string_view name, std::uint64_t owner);
  // Marks the hold of `generation` lost. Returns it if it was live until now
  // (so the caller reports each loss exactly once), with the doorbell session
  // it had; the registry forgets that session, since the caller gives the
  // doorbell back at once (a lost hold keeps none).
  std::optional<Hold> mark_lost(std::string_view name, std::uint64_t owner, std::uint64_t generation);
  void set_fence(std::string_view name, std::uint64_t owner, std::uint64_t generation, std::uint64_t fence);

  // Live watchdog-mode holds, for one renewal round.
  std::vector<HoldRef> watchdog_holds() const;
  // Moves the deadline of each still-current hold in `refs` to `deadline`.
  void extend(const std::vector<HoldRef>& refs, SteadyTime deadline);
  // Every live hold (shutdown).
  std::vector<NamedHold> live() const;
  // The live holds whose doorbell session is `session` (after that
  // session's bell advanced, their rows need the new one).
  std::vector<NamedHold> on_session(std::uint64_t session) const;
  std::size_t size() const;

 private:
  struct OwnerHold {
    std::uint64_t owner;
    Hold hold;
  };
  // The holds on one name (usually one).
  struct NameHolds {
    std::vector<OwnerHold> owners;
    // The owner whose live hold was recorded last (live_deadline).
    bool has_live = false;
    std::uint64_t live_owner = 0;
  };
  using Names = StringMap<NameHolds>;
  // A name's entry stays when its last hold ends (kept, with its vector's
  // capacity, so taking the name again allocates nothing), until idle
  // entries are both over kIdleNamesKept and over half of all: then they go.
  static constexpr std::size_t kIdleNamesKept = 1024;

  static OwnerHold* owner_in(NameHolds& holds, std::uint64_t owner);
  static const OwnerHold* owner_in(const NameHolds& holds, std::uint64_t owner);
  // The hold of `owner` on `name`, or null.
  OwnerHold* find_locked(std::string_view name, std::uint64_t owner);
  static std::optional<SteadyTime> live_deadline_locked(const NameHolds& holds);
  static void forget_live(NameHolds& holds, std::uint64_t owner);
  void note_idle(NameHolds& holds);

  // A hold in by_session_: its name's entry (stable: a node of names_,
  // which stays while the name has holds) and its owner.
  struct HoldKey {
    Names::value_type* name;
    std::uint64_t owner;
    bool operator==(const HoldKey&) const = default;
  };
  struct HoldKeyHash {
    std::size_t operator()(const HoldKey& k) const noexcept {
      return std::hash<const void*>{}(k.name) ^ (k.owner * 0x9e3779b97f4a7c15ULL);
    }
  };
  void add_session(std::uint64_t session, const HoldKey& key);
  void forget_session(std::uint64_t session, const HoldKey& key);
  // Sessions whose set of holds is kept when it empties (a session takes
  // one hold after another): beyond this many sessions, empty sets go.
  static constexpr std::size_t kSessionsKept = 64;

  mutable std::mutex mutex_;
  Names names_;
  std::size_t holds_ = 0;       // holds in names_ (size())
  std::size_t idle_names_ = 0;  // entries of names_ with no hold
  // Hold ids of the live (not lost) holds, for is_ours() without a scan.
  std::unordered_set<std::uint64_t> live_ids_;
  // The live holds of each doorbell session, for on_session() without a
  // scan (it runs at every release that rings).
  std::unordered_map<std::uint64_t, std::unordered_set<HoldKey, HoldKeyHash>> by_session_;
  std::uint64_t next_generation_ = 1;
};

}  // namespace dlock::details
