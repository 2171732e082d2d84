// This client's local view of its holds, of every kind, keyed by (kind,
// name, owner). A semaphore permit is the hold of an owner of its own.
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
// Deadlines: the local lease deadlines of the live holds are kept in order
// (due(), next_deadline()), so the client's clock counts each hold lost at
// its deadline whatever else runs; a deadline that comes before every other
// is told to the clock (on_earlier_deadline). A hold past its deadline is
// never extended: once the deadline has passed, only losing it is left.
//
// Thread safety: every member is safe to call concurrently.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/keys.hpp"
#include "sql/hold_rows.hpp"

namespace dlock::details {

using SteadyTime = std::chrono::steady_clock::time_point;

struct Hold {
  std::uint64_t hold_id = 0;
  unsigned count = 0;
  std::uint64_t fence = 0;  // 0 until known
  bool watchdog = false;
  bool lost = false;
  std::uint64_t generation = 0;
  // Session key of the pooled session whose bell its row records (see
  // sql/bells.hpp); 0: none.
  std::uint64_t bell_session = 0;
  SteadyTime deadline{};
  // Its row's slot (base/keys.hpp): a semaphore slot, a read hold's slot.
  std::uint64_t slot = 0;
  // A permit: the bound it was taken under (its slot is below it).
  std::uint32_t bound = 0;
  // For a hold handed over from a local hold (Engine::release): when the
  // chain of handoffs it continues began (the first handoff since the row
  // was taken from free), so that chains, which keep other clients out, can
  // be bounded. Unset ({}) for a hold taken from free.
  SteadyTime chain_started{};
  // When this owner got it (taken or handed over): its hold time's start.
  SteadyTime acquired{};
};

// A hold as the watchdog sees it.
struct HoldRef {
  NameKey key;
  std::uint64_t slot = 0;
  std::uint64_t owner = 0;
  std::uint64_t hold_id = 0;
  std::uint64_t generation = 0;
  std::uint64_t fence = 0;
  SteadyTime deadline{};
};

class HoldRegistry {
 public:
  std::optional<Hold> find(NameKeyView key, std::uint64_t owner) const;
  // What an acquire of `name` by `owner` needs to know, in one look: the
  // owner's own hold (find) and, for the other owners, live_deadline.
  struct NameView {
    std::optional<Hold> own;
    std::optional<SteadyTime> live_until;
  };
  NameView view(NameKeyView key, std::uint64_t owner) const;
  // The local lease deadline of a live hold on `key` by any owner of this
  // client, if there is one and that deadline has not passed: the row is
  // then held, by this client, at least until then (its unlock or handoff
  // wakes local waiters). For kinds with one holder at a time.
  std::optional<SteadyTime> live_deadline(NameKeyView key) const;

  // Records `hold` (its generation is assigned here) as `owner`'s on `key`:
  // one just taken from free, or one handed over by a local release, which
  // carries when the chain of handoffs it continues began. Replaces an entry
  // only of a lost hold that its owner still owed unlock() calls for.
  void record_fresh(NameKeyView key, std::uint64_t owner, const Hold& hold);
  // Records a reentrant acquire of the hold of `generation`: count, mode and
  // deadline. False, changing nothing, if that hold is gone, was marked
  // lost meanwhile or is past its deadline (a lost hold is never revived).
  bool record_reentrant(NameKeyView key, std::uint64_t owner, std::uint64_t generation, unsigned count,
                        bool watchdog, SteadyTime deadline);
  // Consumes one hold for unlock(): returns the hold as it was before, and
  // leaves count - 1 registered (nothing at 0). nullopt: no hold (misuse).
  std::optional<Hold> take_one(NameKeyView key, std::uint64_t owner);
  // Marks the hold of `generation` lost. Returns it if it was live until now
  // (so the caller reports each loss exactly once), with the bell session
  // it had; the registry forgets that session, since the caller rings its
  // bell at once (a lost hold keeps none).
  std::optional<Hold> mark_lost(NameKeyView key, std::uint64_t owner, std::uint64_t generation);
  // What a read of the hold's row showed: its fence and slot. False (and
  // nothing learned) if the hold of `generation` is gone or was counted
  // lost while the read ran: its loss was told with what was known then,
  // and nobody may be given a token for it afterwards.
  bool learn(NameKeyView key, std::uint64_t owner, std::uint64_t generation, std::uint64_t fence, std::uint64_t slot);

  // Live watchdog-mode holds, for one renewal round.
  std::vector<HoldRef> watchdog_holds() const;
  // Moves the deadline of each still-current hold in `refs` to `deadline`
  // (later only), unless its deadline has already passed: a renewal whose
  // answer came after the deadline does not bring the hold back.
  void extend(const std::vector<HoldRef>& refs, SteadyTime deadline);
  // The live holds whose deadline is at or before `now`.
  std::vector<HoldRef> due(SteadyTime now) const;
  // The earliest deadline of a live hold; time_point::max() if none.
  SteadyTime next_deadline() const;
  // Called (outside the registry's lock) with a deadline just recorded that
  // may be the earliest: the clock re-arms for it. Set before any hold.
  void on_earlier_deadline(std::function<void(SteadyTime)> hook) { earlier_deadline_ = std::move(hook); }
  // Every live hold (shutdown).
  std::vector<HeldRow> live() const;
  // The live holds whose bell session is `session` (after that session's
  // bell advanced, their rows need the new one).
  std::vector<HeldRow> on_session(std::uint64_t session) const;
  std::size_t size() const;
  // Live holds, by Kind (index: the Kind's value), for the metrics' gauges.
  std::array<std::size_t, 8> live_by_kind() const;

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
  using Names = NameKeyMap<NameHolds>;
  // A name's entry stays when its last hold ends (kept, with its vector's
  // capacity, so taking the name again allocates nothing), until idle
  // entries are both over kIdleNamesKept and over half of all: then they go.
  static constexpr std::size_t kIdleNamesKept = 1024;

  static OwnerHold* owner_in(NameHolds& holds, std::uint64_t owner);
  static const OwnerHold* owner_in(const NameHolds& holds, std::uint64_t owner);
  // The hold of `owner` on `name`, or null.
  OwnerHold* find_locked(NameKeyView key, std::uint64_t owner);
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
  // The deadline index (under mutex_): a live `hold` of `key` enters it (at
  // its deadline, which may have moved), or leaves it. `earliest`: the
  // earliest deadline entered, for tell_earlier once the lock is let go.
  void index_deadline(const HoldKey& key, const Hold& hold, SteadyTime& earliest);
  void unindex_deadline(const Hold& hold);
  void tell_earlier(SteadyTime earliest) const;
  // Sessions whose set of holds is kept when it empties (a session takes
  // one hold after another): beyond this many sessions, empty sets go.
  static constexpr std::size_t kSessionsKept = 64;

  mutable std::mutex mutex_;
  Names names_;
  std::size_t holds_ = 0;       // holds in names_ (size())
  std::size_t idle_names_ = 0;  // entries of names_ with no hold
  // The live holds of each bell session, for on_session() without a
  // scan (it runs at every release that rings).
  std::unordered_map<std::uint64_t, std::unordered_set<HoldKey, HoldKeyHash>> by_session_;
  // The live holds' deadlines, in order, and where each generation is.
  std::set<std::pair<SteadyTime, std::uint64_t>> deadlines_;
  std::unordered_map<std::uint64_t, HoldKey> by_generation_;
  std::function<void(SteadyTime)> earlier_deadline_;
  std::uint64_t next_generation_ = 1;
};

}  // namespace dlock::details
