// Every statement dlock issues against the semaphore table, and nothing else.
//
// A semaphore of name N and bound P is up to P slot rows (N, 0..P-1), made
// on demand and never deleted; a held permit is a slot row carrying the
// permit's random id (hold_id, unique across the table) and an unexpired
// lease. So "at most P permits at once" is the primary key's doing: there
// are no more than P slots below the bound, and one slot holds one permit.
//
// Acquire: take the lowest free or expired slot below the bound (one
// UPDATE ... ORDER BY slot LIMIT 1); only when every existing slot is held
// and fewer than P exist, add the next slot, held (one INSERT ... SELECT).
// Uncontended, after a name's first use, an acquire and a release are one
// statement each. Each take of a slot bumps its fence.
//
// Handoff: a release with a local waiter can hand its permit straight to
// it (one UPDATE matching the id while the lease runs: the new holder's
// bound, mode and lease, fence + 1; the slot is never free in between).
// The permit keeps its id, so its doorbell stays held on the session that
// took it and waiters elsewhere keep watching it.
//
// Every later statement of a permit (release, renew, reconciling read)
// matches its id. A statement re-run after an unknown outcome cannot take a
// second slot: the id is unique, so the re-run fails with a duplicate key
// if the first run landed.
//
// Fast wake-up (doorbell.hpp): each permit may have a doorbell of its own,
// a user-level lock named after the permit's id, taken by the statement
// that takes the slot and given back by the one that frees it, on the same
// session. A waiter learns the ids of a few live permits from use() and
// watches their doorbells.
//
// Expiry is decided by the server's clock (NOW(6)). Each method runs one
// statement (IN-list methods one per chunk) through run_statement's retry
// rule and throws BackendError, or OutcomeUnknown for a lost connection.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sql/connection.hpp"

namespace spdlog {
class logger;
}

namespace dlock::details {

// Who writes a permit into a slot row.
struct PermitHolder {
  std::string_view label;  // machine_id column (operators)
  std::uint64_t hold_id;   // the permit's id: random, unique
  std::string_view host;   // holder_host column (operators)
  std::uint32_t pid = 0;   // holder_pid column (operators)
};

// A held slot as seen by one read.
struct PermitRow {
  std::string name;
  std::uint32_t slot = 0;
  std::uint32_t permits = 0;  // the bound its holder acquired it under
  std::uint64_t hold_id = 0;
  std::string machine;
  std::string host;
  std::uint32_t pid = 0;
  std::string acquired_at;  // server time (UTC), "YYYY-MM-DDThh:mm:ss.ffffff"
  std::optional<std::int64_t> held_for_us;
  std::int64_t ttl_us = 0;  // lease left
  bool watchdog = false;
  std::uint64_t fence = 0;  // the slot's token: bumped by every take
};

// How a semaphore's permits are used now.
struct SemaphoreUse {
  std::string name;
  std::uint32_t live = 0;                    // unexpired permits (any bound)
  std::optional<std::int64_t> next_expiry_us;  // the soonest lease end among them
  std::vector<std::uint64_t> first_ids;        // ids of the first few to expire (use())
};

class SemaphoreTable {
 public:
  // The table beside lock table `lock_table`: "<lock_table>_sem". Throws
  // std::invalid_argument when that is longer than MySQL's 64 characters.
  static std::string name_for(const std::string& lock_table);
  static bool name_for_fits(const std::string& lock_table) { return lock_table.size() + 4 <= 64; }

  SemaphoreTable(std::string lock_table, std::shared_ptr<spdlog::logger> logger = nullptr);

  const std::string& table() const { return table_; }
  std::string create_table_sql() const;
  void create_table(Connection& c) const;
  // Throws BackendError naming `dlock init` when the table does not exist.
  void check_schema(Connection& c) const;

  // Takes the lowest free or expired slot of `name` below `permits` for
  // `holder`. False: every existing slot below the bound is held.
  // `doorbell` (may be null): taken in the same statement, only if a slot
  // is taken, never waiting (see lock_table.hpp).
  bool take(Connection& c, std::string_view name, std::uint32_t permits, const PermitHolder& holder,
            std::int64_t lease_us, bool watchdog, const std::string* doorbell = nullptr) const;
  enum class Grow {
    kGrown,  // a new slot was added, held by the holder
    kFull,   // the name already has `permits` slots (or more)
    kRaced,  // another client added the same slot first: take again
  };
  // Adds slot number <slots the name has> held by `holder`, if that is below
  // `permits`. Takes no doorbell (LockTable::take_doorbell afterwards).
  Grow grow(Connection& c, std::string_view name, std::uint32_t permits, const PermitHolder& holder,
            std::int64_t lease_us, bool watchdog) const;
  // Frees permit `hold_id` while its lease runs. False: it was lost.
  // `doorbell` (may be null): given back in the same statement when the
  // permit is freed.
  bool release(Connection& c, std::uint64_t hold_id, const std::string* doorbell = nullptr) const;
  // Makes live permit `hold_id` a new holder's under the same id: bound
  // `permits` (at least the one it was taken under), a new lease from now
  // in mode `watchdog`, fence + 1, acquired now. False: the permit was
  // lost. Running it twice only restarts the lease again and bumps the
  // fence once more, so after an unknown outcome it may be run again while
  // the permit is live.
  bool hand_over(Connection& c, std::uint64_t hold_id, std::uint32_t permits, std::int64_t lease_us,
                 bool watchdog) const;
  // Restarts the leases of these live permits. Returns how many were renewed.
  std::size_t renew(Connection& c, const std::vector<std::uint64_t>& hold_ids, std::int64_t lease_us) const;
  // The ids among `hold_ids` whose permits are live.
  std::vector<std::uint64_t> live_among(Connection& c, const std::vector<std::uint64_t>& hold_ids) const;
  // The slot row carrying permit `hold_id` while live (reconciliation).
  std::optional<PermitRow> read_permit(Connection& c, std::uint64_t hold_id) const;
  // How `name`'s permits are used now, with the ids of the (at most)
  // kFirstIds live permits whose leases end first.
  static constexpr std::size_t kFirstIds = 3;
  SemaphoreUse use(Connection& c, std::string_view name) const;
  // The same for several names (the poller); names with no live permit are
  // listed with live == 0.
  std::vector<SemaphoreUse> use_many(Connection& c, const std::vector<std::string>& names) const;
  // Every live permit, ordered by name and slot (operator tools).
  std::vector<PermitRow> read_held(Connection& c) const;
  // Frees every live permit of `name`; returns how many.
  std::size_t force_release(Connection& c, std::string_view name) const;
  // Frees these permits (shutdown); returns how many.
  std::size_t release_all(Connection& c, const std::vector<std::uint64_t>& hold_ids) const;

 private:
  // Gives back `doorbell` on this session, swallowing errors.
  void give_back(Connection& c, const std::string& doorbell) const;

  std::string table_;
  std::shared_ptr<spdlog::logger> logger_;
  std::string quoted_;
  std::string take_sql_;
  std::string take_doorbell_sql_;
  std::string release_doorbell_sql_;
  std::string grow_sql_;
  std::string release_sql_;
  std::string hand_over_sql_;
  std::string read_permit_sql_;
  std::string use_sql_;
  std::string force_sql_;
};

}  // namespace dlock::details
