// The waiter's side of fast wake-up (Options::fast_wakeup): a few dedicated
// connections that block in GET_LOCK on the session bells of the holds
// local waiters wait behind (sql/bells.hpp), one connection per (waited
// kind and name, bell).
//
// A round of a watch: read the live rows that block the waiter (the kinds
// its kind is blocked by, e.g. a writer by the head row and the read
// holds), keep those of other clients (this client's own releases wake its
// waiters locally), mark them as waited for (so their releases ring), and
// block on a bell. Holds of several sessions (a semaphore's permits, a
// read-write lock's readers) ring several bells: the first connection of a
// name takes the bell of the hold that expires first and hands the others
// (up to kBellsPerName) to free connections. When a bell rings, the local
// waiters of the name are woken and try the row again; a refused waiter
// arms the watch again. No foreign hold left when the watch looks: the
// waiters are woken at once (the hold ended before the mark could land). A
// foreign hold without a bell (fast wake-up off there): woken once, then the
// name is left to the poller until a ring or a timeout shows a bell again,
// so a holder without one never causes a busy loop. Right after a real ring
// a free bell means the release rang before its commit was visible: the
// waiters are woken again a few times with a growing pause.
//
// Waiting in turn (WakePolicy, per kind). Where every waiting client
// watches the holder's bell (kEveryone), a release wakes them all, and each
// reads and marks the row again: a release costs the server work in
// proportion to the waiting clients. So for the lock (kLine) the clients
// that wait for a name first queue on the name's line, a user lock
// (sql/bells.hpp, line_lock_name) whose GET_LOCK waiters the server grants
// first come, first served: only the client at the front watches the
// holder's bell; once its waiter has the name (or is refused by a hold of
// its own client, or stops waiting) it gives the line back, and the next
// client in line watches the new holder. For the fair lock (kChain), whose
// release grants the first queue entry, each client holds a lock named
// after its first entry (entry_lock_name) and waits on the one of the entry
// before it (in a long queue, one a power of 8 ahead: chain_target); the
// client whose entry is first watches the holder's bell.
// When the entry before it is granted (or leaves), its client gives its
// lock back and the next client looks again. A release thus wakes one
// client, whatever the number waiting. After a ring such a connection keeps
// its place (rests) until the woken waiter's attempt ends: settled() or
// disarm() give the place back; arm() (refused again by another client)
// watches again; a rest that lasts kRestFor watches again too. Waits in
// line or on an entry last turn_wait_seconds, one statement each.
//
// A name with no live blocker rings no bell when it is taken. When only
// watchers wait for it (no taker), the round may park instead, as its
// kind says (Hooks::park): an election's observers, whose kind parks the
// connection until its next take interrupts it with a KILL QUERY
// (primitives/election/election_rows.hpp), which wakes them at once.
//
// The row stays the only truth. A spurious ring costs one refused
// attempt; a missed one (a holder with no bell, a bell whose session died,
// a release on a bell other than the one watched, no free connection, a
// client at the front of a line that was paused) costs at most one poll
// interval, because the poller keeps running.
//
// Thread safety: every public member is safe to call concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/keys.hpp"
#include "sql/bells.hpp"
#include "sql/connection.hpp"
#include "sql/hold_rows.hpp"
#include "wakeup/wake_policy.hpp"

namespace spdlog {
class logger;
}

namespace dlock::details {

class BellWatcher {
 public:
  struct Hooks {
    // Wakes the local waiters of `key` (called from a watcher thread).
    std::function<void(const NameKey& key)> ring;
    // True while some local waiter waits for `key`.
    std::function<bool(const NameKey& key)> waited;
    // Interrupts the statement running on `session` (KILL QUERY) from some
    // other connection, only if `still_waiting()` is true when the KILL is
    // about to be sent (it may run later, on another thread).
    std::function<void(SessionAddress session, std::function<bool()> still_waiting)> interrupt;
    // The kinds of rows whose holds keep a waiter of `kind` out.
    std::function<std::vector<Kind>(Kind kind)> blockers;
    // True while some local waiter of `key` would take it (not only watch).
    std::function<bool(const NameKey& key)> subscribed;
    // How the waiting clients of a kind take turns (unset: kEveryone).
    std::function<WakePolicy(Kind kind)> policy = nullptr;
    // kLine: the line of `key` (sql/bells.hpp, line_lock_name).
    std::function<std::string(const NameKey& key)> line = nullptr;
    // kChain: this client's place in the queue of `key`, read on `c`.
    std::function<QueuePlace(Connection& c, const NameKey& key)> queue_place = nullptr;
    // A round of `key` that found no live blocker and no taker waiting:
    // parks `c` as its kind does (HoldKind::park), at most `seconds`;
    // nullopt: its kind does not park.
    std::function<std::optional<Parked>(Connection& c, const NameKey& key, int seconds,
                                        const std::function<bool()>& still_free)>
        park = nullptr;
  };

  // A dedicated connection unused this long is closed (and opened again
  // when next needed).
  static constexpr std::chrono::milliseconds kCloseIdleAfter{60'000};
  // Most bells watched for one waited name at once.
  static constexpr std::size_t kBellsPerName = 3;
  // Longest rest after a ring before a connection with a place watches
  // again on its own (the woken waiter's attempt normally ends it first).
  static constexpr std::chrono::milliseconds kRestFor{1'000};

  // `slots`: most dedicated connections. `wait_seconds`: longest single
  // GET_LOCK wait on a bell; `turn_wait_seconds`: in a line or on an entry
  // (0: wait_seconds; both below the connections' read timeout,
  // `settings.io_timeout`). `own_tag`: the top 16 bits of this client's
  // hold ids (base/identity.hpp).
  BellWatcher(ConnectionSettings settings, const HoldRows& rows, std::uint64_t own_tag, std::size_t slots, int wait_seconds, std::shared_ptr<spdlog::logger> logger, Hooks hooks,
              std::chrono::milliseconds close_idle_after = kCloseIdleAfter, int turn_wait_seconds = 0);
  // Interrupts every waiting session and joins the threads (stop()).
  ~BellWatcher();
  // The same, ahead of destruction: afterwards arm() does nothing and the
  // queries (watching()) still answer. Needs the interrupt hook's runner
  // (the client's io thread) alive. Idempotent.
  void stop();
  BellWatcher(const BellWatcher&) = delete;
  BellWatcher& operator=(const BellWatcher&) = delete;

  // A local waiter of `key` was just refused by a hold of another client:
  // watch if a connection is free and none watches `key` yet; otherwise
  // queue it for the next connection that frees up (the poller covers it
  // meanwhile). Never blocks on the database.
  void arm(const NameKey& key);
  // No local waiter waits for `key` any more: stop watching it (and give
  // its place in line back).
  void disarm(const NameKey& key);
  // A local waiter of `key` acquired it, or was refused by a hold of this
  // client: a connection that keeps a place for `key` (kLine, kChain) gives
  // it back. Cheap when none does.
  void settled(const NameKey& key);
  // True while a connection waits on a bell for `key` (a release rings it).
  bool watching(const NameKey& key) const;

 private:
  struct Slot {
    std::thread thread;
    std::unique_ptr<Connection> connection;  // touched by the slot's thread only
    std::uint64_t server_id = 0;             // of `connection`, readable under mutex_
    std::size_t server_index = 0;
    std::optional<NameKey> key;              // empty: idle
    std::string bell;                        // empty: not chosen yet (the name's scout)
    bool blocked = false;                    // inside a round
    bool cancelled = false;                  // disarm() interrupted it
    // Number of the wait in progress, 0 between waits; shared with
    // interrupt jobs so a late one can tell its wait has ended.
    std::shared_ptr<std::atomic<std::uint64_t>> waiting = std::make_shared<std::atomic<std::uint64_t>>(0);
    std::uint64_t waits = 0;
    // Its place (kLine, kChain): the line or entry lock its session holds
    // for `key` (touched by the slot's thread only; empty: none).
    std::string place;
    bool resting = false;  // after a ring, keeping its place (mutex_)
    std::chrono::steady_clock::time_point rest_until;
    bool leave = false;  // settled() or disarm() while resting: give the place back (mutex_)
    bool rearmed = false;  // arm() between two rounds (mutex_)
  };
  // What a round found.
  enum class Round { kRung, kReleased, kNoBell, kTimedOut, kInterrupted, kCovered, kMoved };
  WakePolicy policy(Kind kind) const { return hooks_.policy ? hooks_.policy(kind) : WakePolicy::kEveryone; }
  // One round by the kind's policy.
  Round round(Connection& c, Slot& slot, const NameKey& key);
  Round watch(Connection& c, Slot& slot, const NameKey& key);
  // kChain: wait on the entry before this client's, or watch the head.
  Round follow(Connection& c, Slot& slot, const NameKey& key);
  // Gives the slot's place back on its own connection (the slot's thread).
  void give_place_back(Slot& slot);
  // The round of a park (Hooks::park) that ended so.
  Round parked(Slot& slot, Parked how);
  // Under no lock: takes the bell `slot` watches among `bells` (foreign,
  // the soonest to expire first), and hands others to free connections.
  // Empty: every one is watched by another connection already.
  std::string choose_bell(Slot& slot, const NameKey& key, const std::vector<std::string>& bells);
  static std::function<bool()> still_waiting(const Slot& slot);
  // A slot's thread: waits for work, watches, settles, again.
  void run(Slot& slot);
  // Under mutex_: waits until the slot has work (or closes its idle
  // connection: false, look again).
  bool wait_for_work(std::unique_lock<std::mutex>& lock, Slot& slot);
  // Under mutex_: the slot's waiters left; gives its place back.
  void leave(std::unique_lock<std::mutex>& lock, Slot& slot);
  // Under no lock: one round on the slot's connection (opened if needed);
  // `failed` when the connection failed.
  Round watch_once(Slot& slot, const NameKey& key, bool& failed);
  // Under mutex_: settles the round, rings the waiters if it says so.
  void after_round(std::unique_lock<std::mutex>& lock, Slot& slot, const NameKey& key, Round round, bool failed);
  // The result of a round, under mutex_. True: keep watching.
  bool settle(Slot& slot, Round round, bool& ring_now, std::chrono::milliseconds& ring_delay);
  void assign(Slot& slot, const NameKey& key, const std::string& bell);  // under mutex_
  void unassign(Slot& slot);                                             // under mutex_
  void adopt_queued(Slot& slot);               // under mutex_

  const ConnectionSettings settings_;
  const HoldRows& rows_;
  const std::uint64_t own_tag_;
  const int wait_seconds_;
  const int turn_wait_seconds_;
  const std::chrono::milliseconds close_idle_after_;
  const std::shared_ptr<spdlog::logger> logger_;
  const Hooks hooks_;

  mutable std::mutex mutex_;
  std::condition_variable work_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Slot>> slots_;
  // Keys whose blockers were last found without a bell: not woken again
  // until a ring or a timeout shows a bell.
  NameKeyMap<bool> silent_;
  // Keys whose bell rang a moment ago (see the header comment).
  struct AfterRing {
    std::chrono::steady_clock::time_point at;
    int free_seen = 0;
  };
  NameKeyMap<AfterRing> after_ring_;
  static constexpr int kReleaseInFlightRetries = 6;
  NameKeyMap<std::vector<Slot*>> watching_;
  std::vector<NameKey> queued_;  // armed while every connection was busy, oldest first
  // Slots that keep a place (kLine, kChain): settled() asks nothing when 0.
  std::atomic<std::size_t> places_{0};
};

}  // namespace dlock::details
