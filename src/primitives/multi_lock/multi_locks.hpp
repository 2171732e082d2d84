// The multi-lock (MultiLock): several plain lock names held together, built
// over the lock's holds as Curator builds its multi-lock over the mutex.
//
// One attempt takes all of the names or none (LockSet, one transaction). A
// refused request holds none of them and waits for a wake of any name:
// a local release, a ring of the bell of a hold elsewhere that blocks it,
// the poll, or the first blocking lease's end. It watches the names only
// (a watcher, never a taker): it never marks a row to go next, since a set
// must not keep a name it cannot take. Once taken, each name is an ordinary
// lock hold of the owner: the watchdog renews it, a loss is reported per
// name, and a name the owner holds already is counted up. A release counts
// each name down and frees the set's last holds in one statement per bell
// session (Engine::free_rows). Engine::wait and AsyncWait drive its
// SetWait.
//
// Thread safety: every member is safe to call concurrently; one owner's
// operations on overlapping sets are serialized by its owner stripes.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "engine/request.hpp"
#include "primitives/lock/lock_kind.hpp"
#include "primitives/multi_lock/lock_set.hpp"

namespace dlock::details {

// One acquire call of a set: one attempt takes all or none (MultiLocks::step).
struct SetRequest : WaitRule {
  std::vector<std::string> names;  // sorted, without duplicates, validated, 1..64
  std::uint64_t owner = 0;
  Millis lease{0};
  bool watchdog = true;
};

class MultiLocks {
 public:
  // After the lock's kind is registered (it shares its known rows).
  MultiLocks(Engine& engine, const HoldRows& rows)
      : engine_(engine), set_(rows, static_cast<LockKind&>(engine.kind(Kind::kLock)).known_rows()) {}
  MultiLocks(const MultiLocks&) = delete;
  MultiLocks& operator=(const MultiLocks&) = delete;

  Engine& engine() { return engine_; }
  // `names`: validated, sorted, without duplicates (the public MultiLock
  // makes them so). `lease` and `wait` as for Engine::make_request.
  // Throws std::invalid_argument for a bad lease.
  SetRequest make_request(const std::vector<std::string>& names, std::uint64_t owner, std::optional<Millis> lease,
                          std::optional<Millis> wait) const;
  // One attempt at the whole set (arming the bells of the holds elsewhere
  // that block it), and what to do next. Throws LockLostError (a hold of
  // the owner on one of the names was lost and is still owed unlock()),
  // BackendError.
  AcquireStep step(const SetRequest& request);
  // Waits for the set (Engine::wait, counted as one acquire call): true
  // once every name is held. `interrupted` as for Engine::wait.
  bool acquire(const SetRequest& request, const std::atomic<bool>* interrupted = nullptr);
  // A wait stopped watching the names.
  void waiting_ended(const SetRequest& request, bool acquired);
  // The keys of the names (the lock's).
  static std::vector<NameKey> keys(const std::vector<std::string>& names);
  // Releases one hold of each name; the holds that end are freed together.
  // NotHeldError, before any SQL and releasing nothing, when `owner` lacks
  // one; never throws for database trouble.
  void release(const std::vector<std::string>& names, std::uint64_t owner);

 private:
  struct Attempt {
    bool acquired = false;
    std::int64_t ttl_us = 0;
    std::vector<std::string> foreign;
  };
  Attempt attempt(const SetRequest& request);
  // The owner's live holds on the names (nullopt: none), as members of the
  // take. Throws LockLostError for a lost one.
  std::vector<std::optional<Hold>> own_holds(const SetRequest& request, std::vector<LockSet::Member>& members);
  void record(const SetRequest& request, const LockSet::Taken& taken, const std::vector<std::optional<Hold>>& own,
              const std::vector<LockSet::Member>& members, std::uint64_t hold_id, SteadyTime sent);

  Engine& engine_;
  LockSet set_;
};

// A set's Wait: it watches every name (a watcher marks no row to go next:
// a set must not keep a name it cannot take).
class SetWait final : public Wait {
 public:
  SetWait(MultiLocks& locks, SetRequest request)
      : Wait(Listen::kWatch, request_, request.owner, MetricKind::kMultiLock,
             "dlock: the wait was cancelled before the locks were acquired"),
        locks_(locks),
        request_(std::move(request)) {}
  AcquireStep step() override { return locks_.step(request_); }
  std::vector<NameKey> keys() const override { return MultiLocks::keys(request_.names); }
  void started() override { started_ = true; }
  void ended(bool done) override;

 private:
  MultiLocks& locks_;
  const SetRequest request_;
  bool started_ = false;
};

}  // namespace dlock::details
