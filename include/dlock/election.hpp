// dlock/election.hpp
//
// `Election` elects one leader per name among candidates in any number of
// processes (etcd's Campaign / Proclaim / Resign / Leader / Observe):
//
//   dlock::Election election = client.get_election("billing/scheduler", dlock::Owner::create());
//   const std::uint64_t term = election.campaign("10.0.0.7:8080");  // blocks until leader
//   run_leader_work(term);           // pass `term` to the resource as a fencing token
//   election.resign();               // the next candidate takes over at once
//
//   // Anyone, leader or not, follows who leads:
//   std::uint64_t seen = 0;
//   while (auto view = election.observe(seen, std::chrono::seconds(30))) {
//     seen = view->revision;
//     if (view->leader) route_to(view->leader->value);
//   }
//
// Model
//   * At most one leader per name at a time. Leadership is a hold like a
//     Lock's, in watchdog mode: the watchdog renews it while the process
//     lives; a leader that dies (or hangs, or loses the database) is
//     replaced once its lease (Options::watchdog_timeout) ends.
//   * The term is the leadership's fencing token: strictly greater than
//     every earlier term of the name. Hand it to whatever the leader writes
//     to, which refuses a smaller one.
//   * Leadership lost while held (its lease ran out, a force-unlock) is
//     reported as a lost lock is: on_lock_lost(name, term), and
//     LockLostError from this owner's next campaign() or proclaim() until
//     it has called resign().
//   * Owners are as for Lock: the calling thread, or the Owner given to
//     get_election (use one for a leader whose work spans threads or
//     coroutines). A campaign by the owner that leads already returns its
//     term (it counts nothing up; one resign() ends the leadership).
//   * The value is what the leader proclaims about itself (an address, a
//     shard map): bytes, up to 64 KiB; more is std::invalid_argument before
//     any SQL.
//   * Names follow the lock rules; elections are their own namespace.
//
// Revisions
//   LeaderView::revision grows with every change of the election's state: a
//   new leader, a proclaim, the end of a leadership (a resign, a lease that
//   ran out). observe(after, wait) returns as soon as the revision is past
//   `after`: at once for a change made in this client; at the change itself
//   for a resign, a proclaim or a new leader in another client
//   (Options::fast_wakeup; a new leader after a time without one is told
//   by interrupting a session this client parks meanwhile, which needs the
//   taker to reach the same server under the same account); at the lease's
//   end for a leader that died; at the next poll otherwise (fast wake-up
//   off, or no connection free to park).
//   Observers that keep passing the last revision they saw see every leader
//   that held office for longer than a poll interval, in term order.
//
// Errors and time limits are those of Lock: BackendError after
// Options::io_timeout, std::invalid_argument for bad input before any SQL.
// The handle holds a plain pointer to its client: it must not outlive it.
// Copies may be used from different threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/export.hpp"
#include "dlock/options.hpp"

namespace dlock {

class DatabaseDistributedLock;
namespace details {
struct AsyncAccess;
}

// The leader of an election, as the database shows it.
struct Leader {
  std::string value;        // what the leader proclaimed (up to 64 KiB of bytes)
  std::uint64_t term = 0;   // the leadership's fencing token
  std::string host;         // holder_host of the leader's client
  std::uint32_t pid = 0;
};

// An election's state.
struct LeaderView {
  std::uint64_t revision = 0;    // grows with every change of the election's state (0: never campaigned for)
  std::optional<Leader> leader;  // nullopt: no leader now
};

class DLOCK_API Election {
 public:
  // Blocks until this owner leads, with `value` proclaimed; returns the
  // term. Already the leader: returns the current term at once (the value
  // stays as it is: use proclaim). Throws LockLostError while a lost
  // leadership of this owner awaits its resign(), BackendError,
  // std::invalid_argument (a value over 64 KiB).
  std::uint64_t campaign(std::string_view value);
  // The same, waiting up to `wait` (<= 0: one attempt): the term, or
  // nullopt when `wait` passed first. Never nullopt early.
  [[nodiscard]] std::optional<std::uint64_t> try_campaign(std::string_view value, Millis wait);
  // The leader changes its value (the revision grows, the term does not).
  // NotHeldError (before any SQL) when this owner does not lead here;
  // LockLostError when its leadership was lost; BackendError.
  void proclaim(std::string_view value);
  // Ends this owner's leadership, if any, and wakes waiting candidates
  // (one in another process takes over at the release with fast wake-up).
  // Idempotent; never throws for database trouble (the lease ends a
  // leadership it could not release), so it is safe in destructors.
  void resign();
  // Whether this owner leads now (one read to confirm a leadership held
  // here; none when it holds none). A lost leadership found here is
  // reported.
  [[nodiscard]] bool is_leader() const;
  // The guard statement of this owner's leadership (see Lock::guard_sql):
  // a transaction that runs it last commits only while it leads.
  // NotHeldError when it does not lead here; LockLostError when its
  // leadership was counted lost.
  [[nodiscard]] std::string guard_sql() const;
  // The election's state now (one read).
  [[nodiscard]] LeaderView leader() const;
  // The state as soon as its revision is greater than `after_revision`
  // (at once if it already is), or nullopt when `wait` passes first (<= 0:
  // one look). See "Revisions" above.
  [[nodiscard]] std::optional<LeaderView> observe(std::uint64_t after_revision, Millis wait) const;
  template <class Rep, class Period>
  [[nodiscard]] std::optional<LeaderView> observe(std::uint64_t after_revision,
                                                  const std::chrono::duration<Rep, Period>& wait) const {
    return observe(after_revision, std::chrono::ceil<Millis>(wait));
  }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  friend class DatabaseDistributedLock;
  friend struct details::AsyncAccess;
  Election(DatabaseDistributedLock* client, std::string name, std::uint64_t owner)
      : client_(client), name_(std::move(name)), owner_(owner) {}
  std::uint64_t owner() const;

  DatabaseDistributedLock* client_;
  std::string name_;
  std::uint64_t owner_;  // 0: whichever thread calls
};

}  // namespace dlock
