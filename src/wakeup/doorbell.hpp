// Fast wake-up of waiters in other clients (Options::fast_wakeup).
//
// MySQL has no LISTEN/NOTIFY, but a session blocked in GET_LOCK wakes the
// moment the session holding that user-level lock gives it back. So a
// release that someone elsewhere waits for gives back a user-level lock the
// waiter blocks on: a "doorbell". Two kinds:
//
// Session bells (lock rows). Each pooled session holds one user-level lock
// of its own for as long as it lives (sql/session_bell.hpp), taken before
// its first lock take. A take writes that bell's name into the row (`bell`)
// and clears the row's `waiters` mark: plain values, so an uncontended
// lock/unlock has no user-lock call at all (inside a writing statement such
// calls cost the server 12-18 us of CPU a cycle, 3-6 % of one on a 2-core
// VM, 2026-11-25).
//   Waiter: after a refused attempt, a client blocks one of a few dedicated
//   connections (DoorbellWatcher below) in LockTable::wait_for_release: it
//   reads the row, marks that live hold (`waiters = 1`, committed; never a
//   hold of its own client, whose release wakes it locally), and blocks in
//   GET_LOCK on the bell the row records (a statement that reads no table,
//   so no read view stays open through the wait); it gives the bell
//   straight back when it gets it (so every waiting client hears the
//   release in turn). A bell found free is told apart by reading the row
//   again: rung meanwhile (the hold ended, or moved to its session's next
//   bell: try now) or gone with its session (as "no doorbell" below).
//   Release: frees only an unmarked row (`AND waiters = 0`): the
//   uncontended cycle's second and last statement. A marked row is freed by
//   a second statement on the hold's session that rings: it takes the
//   session's next bell and gives back the current one. The mark and the
//   release serialize on the row lock, so a waiter either marked before the
//   release (which then rings) or finds the hold gone and tries at once: a
//   release wakes its waiters also the first time a name is contended.
//   Other rows of live holds that recorded the rung bell (several holds on
//   one session) are re-stamped with the new one right after.
//
// Per-name doorbells (semaphore permits, read-write locks): a user-level
// lock named after the key (doorbell_name), taken by the statement that
// takes the slot or head row (GET_LOCK(bell, 0), never waiting) and given
// back by the statement that frees it, on the same pooled session.
//
// For both, the client wakes one local waiter when the wait ends, which
// tries the row again. The row stays the only truth. A ring is only a hint:
// a spurious one (a holder's session dropped, a lost hold's bell given back)
// costs one refused attempt; a missed one (a holder with no bell: fast_wakeup
// off, an older client; a bell whose session died; no free dedicated
// connection) costs at most one poll interval, because the poller keeps
// running. A bell found free while the row is held means "this holder has
// none": the watcher wakes the waiter once (the row may have just been
// freed) and then leaves that name to the poller until a ring or a timeout
// shows a bell again, so a holder without one never causes a busy loop.
// Right after a real ring a free bell means something else: the release
// rang before its commit was visible, and the waiter is woken again a few
// times with a growing pause (see after_ring_).
//
// Thread safety: every public member of DoorbellWatcher is safe to call
// concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "sql/connection.hpp"
#include "sql/lock_table.hpp"

namespace spdlog {
class logger;
}

namespace dlock::details {

// The doorbell of `name` in `database`.`table`: "dlock:" and 32 hex digits of
// a fixed 128-bit hash, so every client computes the same one and it fits
// MySQL's 64-character limit on user-level lock names. Two names that
// collide share a doorbell, which only costs spurious or missed rings.
std::string doorbell_name(std::string_view database, std::string_view table, std::string_view name);

// True if a DoorbellWatcher key is a lock name, watched through its row's
// session bell. The client's other keys (semaphores, read-write locks, a
// hold's own doorbell) begin with a NUL byte, which lock names never do.
inline bool is_lock_name_key(std::string_view key) { return !key.empty() && key[0] != '\0'; }

// A session on one server of the client's list (Connection::server_id and
// Connection::server_index): connection ids are unique on one server only.
struct SessionAddress {
  std::uint64_t server_id = 0;
  std::size_t server_index = 0;
};

// Sends KILL QUERY for `session` from `killer`, only if `killer` talks to
// the session's server and that session belongs to the same account and is
// running a doorbell wait. Connection ids restart with the server, so an id
// remembered from before a restart may name a stranger's session by now:
// this checks before it kills. Returns true if a KILL was sent (false, and
// no statement, for a session on another server: after a failover, the
// wait ends at its own timeout or with its server). Throws BackendError.
bool interrupt_doorbell_wait(Connection& killer, SessionAddress session);

class DoorbellWatcher {
 public:
  struct Hooks {
    // Wakes one local waiter of the name (called from a watcher thread).
    std::function<void(const std::string& name)> ring;
    // True while some local thread waits for the name.
    std::function<bool(const std::string& name)> waited;
    // Interrupts the statement running on this session
    // (KILL QUERY), using some other connection, but only if
    // `still_waiting()` is true when the KILL is about to be sent (the hook
    // may run later, on another thread; the function stays valid).
    std::function<void(SessionAddress session, std::function<bool()> still_waiting)> interrupt;
    // True if a lock hold with this id is the client's own (may be empty).
    std::function<bool(std::uint64_t hold_id)> ours;
  };

  // A dedicated connection unused this long is closed (and opened again when
  // next needed): a client that waited once does not keep its doorbell
  // sessions for good.
  static constexpr std::chrono::milliseconds kCloseIdleAfter{60'000};

  // `slots`: most dedicated connections. `wait_seconds`: longest single
  // GET_LOCK wait (must stay below the connections' read timeout).
  // `close_idle_after`: see kCloseIdleAfter (tests shorten it).
  DoorbellWatcher(ConnectionSettings settings, const LockTable& table, std::string database, std::size_t slots,
                  int wait_seconds, std::shared_ptr<spdlog::logger> logger, Hooks hooks,
                  std::chrono::milliseconds close_idle_after = kCloseIdleAfter);
  // Interrupts every waiting session and joins the threads.
  ~DoorbellWatcher();
  DoorbellWatcher(const DoorbellWatcher&) = delete;
  DoorbellWatcher& operator=(const DoorbellWatcher&) = delete;

  // A local waiter of `name` was just refused: watch its doorbell if a
  // dedicated connection is free and none watches it yet; otherwise queue the
  // name for the next connection that frees up (the poller covers it
  // meanwhile). Never blocks on the database.
  void arm(const std::string& name);
  // No local thread waits for `name` any more: stop watching it (interrupts
  // the blocked session, so the connection can serve a queued name).
  void disarm(const std::string& name);

 private:
  struct Slot {
    std::thread thread;
    std::unique_ptr<Connection> connection;  // touched by the slot's thread only
    std::uint64_t server_id = 0;             // of `connection`, readable under mutex_
    std::size_t server_index = 0;            // of `connection`, readable under mutex_
    std::string name;                        // empty: idle
    bool blocked = false;                    // inside wait_for_doorbell
    bool cancelled = false;                  // disarm() interrupted it
    // Sequence number of the wait in progress, 0 between waits; shared with
    // interrupt jobs so a late one can tell its wait has ended.
    std::shared_ptr<std::atomic<std::uint64_t>> waiting = std::make_shared<std::atomic<std::uint64_t>>(0);
    std::uint64_t waits = 0;
  };
  // The interrupt hook's still_waiting() for the slot's current wait.
  static std::function<bool()> still_waiting(const Slot& slot);
  void run(Slot& slot);
  // Result of one wait, handled under mutex_. True: keep watching the name.
  // `ring_delay`: how long to wait before ringing (a release in flight).
  bool settle(Slot& slot, LockTable::Ring ring, bool& ring_now, std::chrono::milliseconds& ring_delay);
  // Under mutex_: `slot` watches `name` from now on.
  void assign(Slot& slot, const std::string& name);
  // Under mutex_: the freed `slot` takes the oldest queued name still waited for.
  void adopt_queued(Slot& slot);

  const ConnectionSettings settings_;
  const LockTable& table_;
  const std::string database_;
  const int wait_seconds_;
  const std::chrono::milliseconds close_idle_after_;
  const std::shared_ptr<spdlog::logger> logger_;
  const Hooks hooks_;

  mutable std::mutex mutex_;
  std::condition_variable work_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Slot>> slots_;
  // Names whose doorbell was last found free while the row was held: not
  // rung again until a real ring or a timeout shows a doorbell in place.
  std::unordered_map<std::string, bool> silent_;
  // Names whose doorbell rang a moment ago. The release gives its doorbell
  // back inside its statement, before its commit, so the waiter it woke can
  // be refused by the row as it was (a range scan such as the semaphore's
  // take skips a row locked by an uncommitted change), re-arm, and find the
  // doorbell free. On one server the commit is usually visible by then; on
  // Galera it waits for certification. So a free doorbell right after a ring
  // wakes the waiter again, after 1, 2, 4 ... ms, up to kReleaseInFlightRetries
  // times, before the name is left to the poller.
  struct AfterRing {
    std::chrono::steady_clock::time_point at;
    int free_seen = 0;
  };
  std::unordered_map<std::string, AfterRing> after_ring_;
  static constexpr int kReleaseInFlightRetries = 6;
  std::unordered_map<std::string, Slot*> watching_;
  // Names armed while every connection was busy, oldest first.
  std::vector<std::string> queued_;
};

}  // namespace dlock::details
