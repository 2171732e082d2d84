// Elections: the leadership is an ordinary hold of Kind::kElection (taken,
// renewed, released, lost and reconciled by the engine like any other), so
// this file only adds what an election has beyond a lock: the term read
// after a campaign, proclaim, resign, and observers, who wait for the
// election's view revision (sql/election_rows.hpp) to pass the one they
// saw.
//
// An observer watches the name in the waiter registry (a watcher, never a
// taker: it keeps nobody out and takes no wake from candidates). It hears
// a release, a loss or a take in this client at once (takes_are_news), a
// proclaim here at once, a release or proclaim in another client at its
// bell (fast wake-up: the leader's session bell, armed while a foreign
// leader's lease runs), a lease that runs out at its end, and anything else
// at the poll (the election kind's poll tells watchers of every change).
//
// No bell can be watched for a take in another client before its taker is
// known. So while an election has no leader, the bell watcher parks a
// session that the next take interrupts (wake_parked_observers; the
// protocol is in sql/election_rows.hpp). The common take follows a release
// at once (a candidate elsewhere woke at the resign's ring, or at the dead
// leader's lease end), before the parked session can be in place, so for
// a short while after an election is first seen without a leader, an
// observer also looks again at a growing pause (about ten reads).
#include <spdlog/spdlog.h>

#include "base/printable.hpp"
#include "base/validation.hpp"
#include "engine/engine.hpp"
#include "wakeup/sticky_wake.hpp"

namespace dlock::details {

namespace {
using Clock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;

// How long an observer of an election without a leader waits before it
// looks again on its own: the poller tells it of any change before that.
constexpr std::int64_t kLeaderlessRecheckUs = 3'600'000'000;
// How long after a leadership is first seen ended observers look again on
// their own (see the header comment).
constexpr Micros kHandoverWatch{250'000};

void validate_value(std::string_view value) {
  if (value.size() > kMaxElectionValue)
    throw std::invalid_argument("dlock: an election's value is at most 64 KiB (" + std::to_string(value.size()) +
                                " bytes given)");
}
}  // namespace

std::optional<std::uint64_t> Engine::leading_term(std::string_view name, std::uint64_t owner) {
  const NameKeyView key{Kind::kElection, name};
  const std::optional<Hold> held = holds_.find(key, owner);
  if (!held) return std::nullopt;
  if (held->lost) throw_lost(key, held->fence);
  const std::uint64_t term = fencing_token(key, owner);
  if (term != 0) return term;
  // Found lost just now (reported): the owner still owes its resign().
  const std::optional<Hold> now = holds_.find(key, owner);
  if (now && now->lost) throw_lost(key, now->fence);
  return std::nullopt;
}

std::uint64_t Engine::term_after_campaign(std::string_view name, std::uint64_t owner) {
  try {
    if (const auto term = leading_term(name, owner)) return *term;
  } catch (const LockLostError&) {
    throw;
  } catch (...) {
    resign(name, owner);  // a leader that cannot tell its term must not act
    throw;
  }
  throw LockLostError("dlock: the leadership of election \"" + printable(name) +
                      "\" was lost right after it was won; resign() before campaigning again");
}

std::optional<std::uint64_t> Engine::campaign(const AcquireRequest& r, const std::atomic<bool>* interrupted) {
  validate_value(r.value);
  if (const auto term = leading_term(r.key.name, r.owner)) return term;
  if (drive(r, interrupted).next != AcquireStep::Next::kAcquired) return std::nullopt;
  return term_after_campaign(r.key.name, r.owner);
}

void Engine::proclaim(std::string_view name, std::uint64_t owner, std::string_view value) {
  validate_name(name);
  validate_value(value);
  const NameKeyView key{Kind::kElection, name};
  std::optional<Hold> held;
  {
    std::lock_guard<std::mutex> serial(owner_mutex(Kind::kElection, name, owner));
    held = holds_.find(key, owner);
    if (!held)
      throw NotHeldError("dlock: proclaim on election \"" + printable(name) + "\" by an owner (" +
                         std::to_string(owner) + ") that is not its leader in this client");
    if (held->lost) throw_lost(key, held->fence);
    CallBudget budget(options_.io_timeout);
    const bool applied = run_reconciled(
        name, [&](Connection& c) { return elections_.proclaim(c, name, held->hold_id, value); },
        [&](Connection& c) {
          const ElectionRow row = elections_.read(c, name);
          if (!row.live || row.hold_id != held->hold_id) return Verdict::kNotApplied;
          return row.value == value ? Verdict::kApplied : Verdict::kRunAgain;
        });
    if (!applied) {
      note_lost(key, owner, held->generation, "its lease ran out or it was force-unlocked");
      throw_lost(key, held->fence);
    }
  }
  waiters_.tell_watchers(key);
  // Observers elsewhere block on the leader's session bell.
  if (bells_ && held->bell_session != 0) ring_when_idle(held->bell_session);
}

void Engine::resign(std::string_view name, std::uint64_t owner) {
  validate_name(name);
  const NameKeyView key{Kind::kElection, name};
  // Every count (a campaign never counts up, but an owner's concurrent
  // campaigns may both have taken a count); a release removes one count
  // whatever the database says, so this ends.
  while (holds_.find(key, owner)) {
    try {
      release(key, owner);
    } catch (const NotHeldError&) {
      return;  // resigned meanwhile by another thread of the owner
    }
  }
}

ElectionRow Engine::election(std::string_view name) {
  validate_name(name);
  CallBudget budget(options_.io_timeout);
  return read([&](Connection& c) { return elections_.read(c, name); });
}

Engine::ObserveRequest Engine::make_observe_request(std::string_view name, std::uint64_t owner, std::uint64_t after,
                                                    std::optional<Millis> wait) const {
  validate_name(name);
  ObserveRequest r;
  r.name = std::string(name);
  r.owner = owner;
  r.after = after;
  set_wait(wait, r.forever, r.single_attempt, r.deadline);
  return r;
}

Engine::ObserveStep Engine::observe_step(const ObserveRequest& r) {
  ObserveStep s;
  ElectionRow row = election(r.name);
  if (row.view_revision() > r.after) {
    s.row = std::move(row);
    s.step.next = AcquireStep::Next::kAcquired;
    return s;
  }
  if (r.single_attempt) return s;  // kGaveUp
  const NameKey key(Kind::kElection, r.name);
  std::int64_t ttl_us = kLeaderlessRecheckUs;
  if (!row.live && bells_) {  // also an election never used yet: its first campaign may be on its way
    // Pauses of half the time since it was first seen leaderless: about ten
    // looks within kHandoverWatch (wait_step adds a millisecond to each).
    const Micros age = leaderless_for(r.name, row.view_revision());
    if (age < kHandoverWatch) ttl_us = std::max<std::int64_t>(0, (age / 2).count() - 1000);
  }
  if (row.live) {
    // The lease's end is a change no statement makes: look again then.
    ttl_us = row.ttl_us.value_or(0);
    if (bells_ && !is_this_clients(row.hold_id)) bells_->arm(key);
  } else if (bells_) {
    bells_->arm(key);  // parks an observer, which the next take interrupts
  }
  s.step = wait_step(r.forever, r.deadline, ttl_us);
  return s;
}

void Engine::wake_parked_observers(std::string name, std::vector<ParkedObserver> parked) {
  io_.post("waking parked observers",
           [this, name = std::move(name), parked = std::move(parked)](const IoThread::ConnectionSource& connection) {
             for (const auto& p : parked) {
               if (!p.live) continue;
               try {
                 interrupt_parked_wait(connection(), p.lock);
               } catch (const BackendError& e) {
                 // That observer hears it at its poll; the others still get theirs.
                 logger_->debug("dlock: election {}: waking a parked observer failed: {}", printable(name), e.what());
               }
             }
             // Live ones were woken; the others' clients died waiting.
             elections_.unpark_observers(connection(), name, parked);
           });
}

Micros Engine::leaderless_for(std::string_view name, std::uint64_t revision) {
  const auto now = Clock::now();
  std::lock_guard<std::mutex> guard(leaderless_mutex_);
  const auto it = leaderless_seen_.find(name);
  if (it != leaderless_seen_.end() && it->second.first == revision)
    return std::chrono::duration_cast<Micros>(now - it->second.second);
  if (leaderless_seen_.size() >= 1024) {
    // Elections observed once and never again: drop those seen long ago.
    for (auto e = leaderless_seen_.begin(); e != leaderless_seen_.end();)
      e = now - e->second.second > kHandoverWatch ? leaderless_seen_.erase(e) : std::next(e);
  }
  leaderless_seen_.insert_or_assign(std::string(name), std::make_pair(revision, now));
  return Micros::zero();
}

std::optional<ElectionRow> Engine::observe(const ObserveRequest& r, const std::atomic<bool>* interrupted) {
  if (r.single_attempt) return observe_step(r).row;
  // Watching from before the first look: a change between a look and the
  // wait leaves the wake set.
  const auto wake = std::make_shared<StickyWake>();
  const WaiterRegistry::Watch watch(waiters_, NameKey(Kind::kElection, r.name), wake);
  for (;;) {
    if (interrupted != nullptr && interrupted->load()) return std::nullopt;
    wake->clear();
    ObserveStep s = observe_step(r);
    if (s.row) return s.row;
    if (s.step.next != AcquireStep::Next::kWait) return std::nullopt;
    wake->wait_for(s.step.wait);
  }
}

}  // namespace dlock::details
