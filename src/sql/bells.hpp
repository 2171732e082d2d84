// Every user-level lock statement dlock sends: the session bells that wake
// waiters in other clients (Options::fast_wakeup). The protocol around them
// is in docs/design.md ("Waking waiters elsewhere"); in short:
//
// - Each pooled session holds one bell of its own, for its whole life
//   (sql/session_bell.hpp), taken before its first take (take_session_bell).
// - A take writes the taking session's bell into the row (a plain value).
// - A waiter elsewhere marks the row (`waiters = 1`) and blocks in GET_LOCK
//   on the bell the row records (wait_for_bell), on a connection of its own.
// - A release of a marked row rings: in the same statement, on the session
//   that holds the bell, it takes the session's next bell and gives back the
//   current one (ring_assignment), which wakes every session blocked on it.
//
// A bell is only a hint to try again; the row is the only truth.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "sql/connection.hpp"

namespace spdlog {
class logger;
}

namespace dlock::details {

class Binder;

// `c`'s session bell, taken first if this session has not tried yet (one
// GET_LOCK per session, ever). Null when the session has none (taking it
// failed: its takes then record no bell, and their waiters poll). Throws
// OutcomeUnknown only if the connection died meanwhile.
const std::string* take_session_bell(Connection& c, const std::shared_ptr<spdlog::logger>& logger);

// A term that rings `c`'s bell when the statement around it evaluates it
// (only for a row it changes): "0 * COALESCE(<take next> + <give back
// current>, 0)", worth 0, to be added to an assignment. It takes the next
// bell only if the session does not hold it yet: GET_LOCK nests, and on
// Galera a statement that failed certification is run again after its
// user-lock calls took effect. Bind with bind_ring, in the term's place.
extern const char* const kRingTerm;
void bind_ring(Binder& b, const Connection& c);
// After a statement with kRingTerm: true if it rang (it changed a row), so
// the session's bell moved on; false leaves it as it was. A statement that
// failed leaves the bell unknown: the caller marks `c` broken, and closing
// the session gives back whatever it holds.
void rang(Connection& c, bool changed);

// Rings `c`'s bell on its own (a release that ran on another session, a
// lost hold). Nothing if `c` has no bell.
void ring(Connection& c, const std::shared_ptr<spdlog::logger>& logger);

enum class BellWait {
  kRung,         // given back while we waited (or just before)
  kFree,         // nothing to block on: the bell is free (its session rang
                 // meanwhile, or is gone)
  kTimedOut,     // still held after the wait
  kInterrupted,  // KILL QUERY (or an error the server reports as such)
};
// How the wait statement begins, as PROCESSLIST shows it
// (interrupt_bell_wait recognises our waits by it).
extern const char* const kBellWaitPrefix;
// Blocks until `bell` is given back, at most `wait_seconds`, and gives it
// back at once so every waiting client hears the same release. One
// statement.
BellWait wait_for_bell(Connection& c, const std::string& bell, int wait_seconds,
                       const std::shared_ptr<spdlog::logger>& logger);

// ---- parked observers (primitives/election/election_rows.hpp): a wait that only a KILL
// QUERY ends early, found by the user lock its session holds.
// The lock of a parked wait with `token`.
std::string observer_lock_name(std::uint64_t token);
enum class ParkedWait { kTimedOut, kInterrupted };
// Waits `wait_seconds` on `c`, which holds `lock`, unless a KILL QUERY
// ends it first. The statement begins with kBellWaitPrefix, so
// interrupt_bell_wait ends it too. One statement.
ParkedWait park_until_interrupted(Connection& c, const std::string& lock, int wait_seconds,
                                  const std::shared_ptr<spdlog::logger>& logger);
// Ends the parked wait whose session holds `lock`, if that session is on
// `killer`'s server, of the same account, and waiting. True if a KILL was
// sent. Throws BackendError.
bool interrupt_parked_wait(Connection& killer, const std::string& lock);

// ---- waiting in turn (wakeup/bell_watcher.hpp, "Waiting in turn"): the
// clients that wait for one name queue on a user lock of their own, the
// server's queue of GET_LOCK waiters, which grants it first come, first
// served; only the client at its front watches the holder's bell.
// The line of `table`'s `kind` and `name` (the same in every client of one
// table): "dlock-l:" and 16 hex digits of a hash (names are long and any
// bytes; a user lock's name is at most 64 characters).
std::string line_lock_name(std::string_view database, std::string_view table, int kind, std::string_view name);
// The lock a fair lock's queue entry `hold_id` is followed by: held by the
// waiting client while the entry waits, so the entry behind it waits on it.
std::string entry_lock_name(std::uint64_t hold_id);
enum class LineWait { kFront, kTimedOut, kInterrupted };
// Blocks until `c` holds `line` (the clients before it gave it back), at
// most `wait_seconds`. The statement begins with kBellWaitPrefix, so
// interrupt_bell_wait ends it too. One statement.
LineWait wait_in_line(Connection& c, const std::string& line, int wait_seconds,
                      const std::shared_ptr<spdlog::logger>& logger);
// Takes `lock` on `c` without waiting. False if another session has it.
bool take_lock_now(Connection& c, const std::string& lock, const std::shared_ptr<spdlog::logger>& logger);
// Gives `lock` back (the connection is marked broken if that fails:
// closing it gives the lock back). Throws BackendError.
void give_back_lock(Connection& c, const std::string& lock, const std::shared_ptr<spdlog::logger>& logger);

// Sends KILL QUERY for `session` from `killer`, only if `killer` talks to
// the session's server and that session belongs to the same account and is
// in a bell wait (connection ids restart with the server, so an id
// remembered from before a restart may name a stranger's session by now).
// Returns true if a KILL was sent. Throws BackendError.
bool interrupt_bell_wait(Connection& killer, SessionAddress session);

}  // namespace dlock::details
