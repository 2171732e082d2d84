// An election's row (kind 6, name, slot 0), beyond what it shares with a
// lock row: what the leader proclaimed (`value`) and the election's
// `revision`, which every take and every proclaim adds one to.
//
// The leadership itself is an ordinary lock-like hold of the row (taken by
// primitives/lock/lock.cpp with these columns set in the same statement, renewed,
// released and lost like any hold). What observers compare is the view's
// revision: 2 * revision while a leader's lease runs, 2 * revision + 1 once
// it does not. So the end of a leadership (a release, a lease running out
// with no statement at all, a force-unlock) is a change too, and the view
// only ever grows: a release leaves `revision` as it is and turns the view
// odd; the next take adds one and makes it even again, higher.
//
// Parked observers. While an election has no leader, nothing rings when a
// candidate takes it, so an observer's bell watcher (fast wake-up) parks
// one session per observing client in a wait a KILL QUERY can end, and
// says so in a row of kind 7 (never a hold; introspection skips it) under
// the election's name: slot = the observing client's key, `bell` = the user
// lock its parked session holds (the KILL finds the session by it, on the
// taker's server), hold_id = the wait's token, expire_time = the wait's
// end. An election take reads the rows beside its term and interrupts the
// waits (primitives/election/election_kind.cpp). The observer re-reads the election
// after its row lands, so a take either sees the row or is seen.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/election.hpp"
#include "sql/hold_rows.hpp"

namespace dlock::details {

// An election's state as one read sees it.
struct ElectionRow {
  bool exists = false;
  bool live = false;               // a leader's lease runs
  std::uint64_t revision = 0;      // the row's column
  std::uint64_t fence = 0;         // the current (or last) leadership's term
  std::uint64_t hold_id = 0;       // while live
  std::string value;               // while live
  std::string machine;             // while live
  std::string host;                // while live
  std::uint32_t pid = 0;           // while live
  std::string acquired_at;         // while live: "YYYY-MM-DDThh:mm:ss.ffffff", server time (UTC)
  std::optional<std::int64_t> ttl_us;  // while live: the lease left
  std::string bell;                // while live: the leader's session bell (empty: none)

  // What observers compare (see the header comment); 0 for a name never campaigned for.
  std::uint64_t view_revision() const { return exists ? 2 * revision + (live ? 0 : 1) : 0; }
};

// The row as the public LeaderView.
inline LeaderView to_leader_view(const ElectionRow& row) {
  LeaderView view;
  view.revision = row.view_revision();
  if (row.live) view.leader = Leader{row.value, row.fence, row.host, row.pid};
  return view;
}

// An observer parked on an election with no leader (see the header).
struct ParkedObserver {
  std::uint64_t slot = 0;   // the observing client's key
  std::uint64_t token = 0;  // the wait's
  std::string lock;         // the user lock its session holds while it waits
  bool live = false;        // the wait has not ended by its own clock
};

// What an election take reads right after it took.
struct AfterElectionTake {
  bool held = false;         // the row carries the take's hold id, live
  std::uint64_t fence = 0;   // the term, when held
  std::vector<ParkedObserver> observers;
};

// The largest value a leader may proclaim.
inline constexpr std::size_t kMaxElectionValue = 64 * 1024;

class ElectionRows {
 public:
  explicit ElectionRows(const HoldRows& rows);

  // The assignments a take of an election row adds (binds the value once).
  static std::string take_assignments() { return "value = ?, revision = revision + 1"; }

  // The election's row (exists == false when there is none).
  ElectionRow read(Connection& c, std::string_view name) const;
  // The live hold `hold_id` proclaims `value` (revision + 1). False: that
  // hold is not live.
  bool proclaim(Connection& c, std::string_view name, std::uint64_t hold_id, std::string_view value) const;

  // ---- parked observers (see the header)
  // The term of take `hold_id` and the observers parked on the election.
  AfterElectionTake read_after_take(Connection& c, std::string_view name, std::uint64_t hold_id) const;
  // Says that `lock`'s session waits on `name` until `seconds` from now.
  void park_observer(Connection& c, std::string_view name, const ParkedObserver& observer, int seconds) const;
  // Removes the rows of `parked` (those still carrying their tokens).
  void unpark_observers(Connection& c, std::string_view name, const std::vector<ParkedObserver>& parked) const;

 private:
  const HoldRows& rows_;
  std::string read_sql_;
  std::string proclaim_sql_;
  std::string after_take_sql_;
  std::string park_sql_;
  std::string unpark_sql_;
};

}  // namespace dlock::details
