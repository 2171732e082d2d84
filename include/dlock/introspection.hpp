// dlock/introspection.hpp
//
// What the database shows of the holds of every kind and of their waiters:
// who holds which name (client label, host, pid, owner), since when, until
// when, how many times (reentrancy), under which fencing token, and who
// waits. For "who holds this lock?" answers, dashboards and health pages;
// the `dlock status` and `dlock top` commands are built on it.
//
//   dlock::ActivityQuery query;
//   query.names = {"billing/invoice-42"};
//   for (const dlock::HoldInfo& h : client.inspect(query).holds)
//     std::cout << h.name << " held by " << h.machine << " pid " << h.pid << "\n";
//
// What a snapshot is
//   The rows as the server shows them at one read (a few statements, one
//   round trip each); durations are by the server's clock, so the clocks of
//   the holders and of the reader play no part. A snapshot is for people and
//   dashboards, never a lock decision: a hold can end the moment after.
//
// Holds
//   One HoldInfo per live hold: a lock (a multi-lock's names are plain
//   locks), a fair lock's hold, each semaphore permit, the write side of a
//   read-write lock, each owner's read hold, and an election's leadership.
//   A lock released with Lock::unlock_at_least while its minimum time runs
//   is shown too, with count 0 (nobody holds it, nobody can take it).
//
// Waiters
//   The database knows only some waiters, so `HoldInfo::waiters` is a lower
//   bound:
//   * a fair lock's queue: every waiting owner, in order (also listed one
//     by one in Activity::waiters);
//   * any other hold: 1 when a client other than the holder's waits for it
//     and has said so in the row (fast wake-up marks the holds it waits
//     behind; a waiting client whose turn is next records its intent),
//     else 0. Waiters that only poll, and the holder's own client's waiters,
//     leave no trace. An election's observers in other clients count as
//     waiting while they wait on the leader's bell.
//
// Thread safety and cost
//   inspect() may be called from any thread. The member runs on one pooled
//   connection of the client; the free function opens one connection of its
//   own and closes it (no watchdog, no poller), for tools that hold nothing.
//   Both read only: a few indexed or whole-table reads, never a lock.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/export.hpp"
#include "dlock/options.hpp"

namespace dlock {

// The kinds of hold, one per primitive side.
enum class HoldType : std::uint8_t {
  kLock,       // get_lock, the name-based members, each name of a MultiLock
  kFairLock,   // get_fair_lock
  kSemaphore,  // one permit of get_semaphore
  kWrite,      // the write side of get_read_write_lock
  kRead,       // one owner's read hold on get_read_write_lock
  kElection,   // the leadership of get_election
};
inline constexpr std::size_t kHoldTypeCount = 6;

// "lock", "fair", "semaphore", "write", "read", "election".
DLOCK_API std::string_view to_string(HoldType type) noexcept;
// The inverse of to_string; nullopt for any other text (case matters).
DLOCK_API std::optional<HoldType> parse_hold_type(std::string_view text) noexcept;

// One live hold.
struct HoldInfo {
  std::string name;                  // the name as given to the API (bytes)
  HoldType type = HoldType::kLock;
  std::uint64_t slot = 0;            // a semaphore permit's slot (0 .. bound-1); 0 for the others
  std::string machine;               // the holding client's Options::machine_id
  std::string host;                  // the holding client's host name
  std::uint32_t pid = 0;             // the holding client's process id
  std::uint64_t owner = 0;           // the holding Owner's id within its client
  unsigned count = 0;                // hold count (reentrancy); 0: kept by unlock_at_least
  std::uint64_t fence = 0;           // fencing token (an election's term)
  std::string acquired_at;           // grant time, server clock, UTC: "YYYY-MM-DDThh:mm:ss.ffffff"
  std::chrono::microseconds held_for{0};    // since the grant, by the server's clock
  std::chrono::microseconds expires_in{0};  // lease left, by the server's clock (> 0)
  bool watchdog = false;             // the holder's watchdog renews it (else a fixed lease)
  std::uint32_t bound = 0;           // a semaphore permit: the bound it was taken under; else 0
  std::uint32_t waiters = 0;         // waiters the database shows (see "Waiters" above)
};

// One waiter the database can name: an owner in a fair lock's queue.
struct WaiterInfo {
  std::string name;
  HoldType type = HoldType::kFairLock;
  std::size_t position = 0;          // 1: granted next
  std::string machine;               // the waiting client's Options::machine_id
  std::string host;
  std::uint32_t pid = 0;
  std::uint64_t owner = 0;
  std::string waiting_since;         // server clock, UTC: "YYYY-MM-DDThh:mm:ss.ffffff"
  std::chrono::microseconds waited_for{0};
};

// What to look at. The default: everything.
struct ActivityQuery {
  // Only holds and waiters of these names (exact bytes; each must be a
  // valid name: 1..255 bytes). Empty (default): every name.
  std::vector<std::string> names;
  // Only these kinds of hold. Empty (default): every kind.
  std::vector<HoldType> types;
  // At most this many holds and this many waiters are returned: the longest
  // held, the first in line. 0 (default): no limit. Activity::held counts
  // every hold either way.
  std::size_t limit = 0;
};

// A snapshot (see "What a snapshot is").
struct Activity {
  // Longest held first (then by type, name and slot).
  std::vector<HoldInfo> holds;
  // By name, then position in line.
  std::vector<WaiterInfo> waiters;
  // Live holds per type matching the query, before the limit:
  // held[static_cast<std::size_t>(HoldType::kSemaphore)] permits, ...
  std::array<std::size_t, kHoldTypeCount> held{};
  // Waiters matching the query, before the limit.
  std::size_t waiting = 0;
  // The connection the snapshot was read on: the server ("host:port") and
  // the TLS cipher of its session (empty: not encrypted; Options::ssl_mode).
  std::string server;
  std::string tls_cipher;

  std::size_t held_total() const noexcept {
    std::size_t n = 0;
    for (std::size_t h : held) n += h;
    return n;
  }
};

// The snapshot of the table `options` names, read on one connection opened
// for it (see "Thread safety and cost"). Throws std::invalid_argument,
// before any SQL, for bad options or a bad name in the query; BackendError
// when the database cannot be reached or read within connect_timeout and
// io_timeout, or the table does not exist or belongs to another dlock
// version.
[[nodiscard]] DLOCK_API Activity inspect(const Options& options, const ActivityQuery& query = {});

}  // namespace dlock
