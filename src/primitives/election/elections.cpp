// Elections: the leadership is an ordinary hold of Kind::kElection (taken,
// renewed, released, lost and reconciled by the engine like any other), so
// this file only adds what an election has beyond a lock: the term read
// after a campaign, proclaim, resign, and observers, who wait for the
// election's view revision (primitives/election/election_rows.hpp) to pass the one they
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
// session that the next take interrupts (election_kind.cpp; the
// protocol is in primitives/election/election_rows.hpp). The common take follows a release
// at once (a candidate elsewhere woke at the resign's ring, or at the dead
// leader's lease end), before the parked session can be in place, so for
// a short while after an election is first seen without a leader, an
// observer also looks again at a growing pause (about ten reads).
#include <spdlog/spdlog.h>

#include "base/printable.hpp"
#include "base/validation.hpp"
#include "primitives/election/elections.hpp"

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

std::optional<std::uint64_t> Elections::leading_term(std::string_view name, std::uint64_t owner) {
  const NameKeyView key{Kind::kElection, name};
  const std::optional<Hold> held = engine_.holds().find(key, owner);
  if (!held) return std::nullopt;
  if (held->lost) engine_.throw_lost(key, held->fence);
  const std::uint64_t term = engine_.fencing_token(key, owner);
  if (term != 0) return term;
  // Found lost just now (reported): the owner still owes its resign().
  const std::optional<Hold> now = engine_.holds().find(key, owner);
  if (now && now->lost) engine_.throw_lost(key, now->fence);
  return std::nullopt;
}

std::uint64_t Elections::term_after_campaign(std::string_view name, std::uint64_t owner) {
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

std::optional<std::uint64_t> Elections::campaign(const AcquireRequest& r, const std::atomic<bool>* interrupted) {
  validate_value(r.value);
  if (const auto term = leading_term(r.key.name, r.owner)) return term;
  if (engine_.drive(r, interrupted).next != AcquireStep::Next::kAcquired) return std::nullopt;
  return term_after_campaign(r.key.name, r.owner);
}

void Elections::proclaim(std::string_view name, std::uint64_t owner, std::string_view value) {
  validate_name(name);
  validate_value(value);
  const NameKeyView key{Kind::kElection, name};
  std::optional<Hold> held;
  {
    std::lock_guard<std::mutex> serial(engine_.owner_mutex(engine_.kind(Kind::kElection).traits.serial, name, owner));
    held = engine_.holds().find(key, owner);
    if (!held)
      throw NotHeldError("dlock: proclaim on election \"" + printable(name) + "\" by an owner (" +
                         std::to_string(owner) + ") that is not its leader in this client");
    if (held->lost) engine_.throw_lost(key, held->fence);
    CallBudget budget(engine_.options().io_timeout);
    const bool applied = engine_.run_reconciled(
        name, [&](Connection& c) { return rows_.proclaim(c, name, held->hold_id, value); },
        [&](Connection& c) {
          const ElectionRow row = rows_.read(c, name);
          if (!row.live || row.hold_id != held->hold_id) return Engine::Verdict::kNotApplied;
          return row.value == value ? Engine::Verdict::kApplied : Engine::Verdict::kRunAgain;
        });
    if (!applied) {
      engine_.note_lost(key, owner, held->generation, "its lease ran out or it was force-unlocked");
      engine_.throw_lost(key, held->fence);
    }
  }
  engine_.waiters().tell_watchers(key);
  // Observers elsewhere block on the leader's session bell.
  if (engine_.bells() != nullptr && held->bell_session != 0) engine_.ring_when_idle(held->bell_session);
}

void Elections::resign(std::string_view name, std::uint64_t owner) {
  validate_name(name);
  const NameKeyView key{Kind::kElection, name};
  // Every count (a campaign never counts up, but an owner's concurrent
  // campaigns may both have taken a count); a release removes one count
  // whatever the database says, so this ends.
  while (engine_.holds().find(key, owner)) {
    try {
      engine_.release(key, owner);
    } catch (const NotHeldError&) {
      return;  // resigned meanwhile by another thread of the owner
    }
  }
}

ElectionRow Elections::row(std::string_view name) {
  validate_name(name);
  CallBudget budget(engine_.options().io_timeout);
  return engine_.read([&](Connection& c) { return rows_.read(c, name); });
}

ObserveRequest Elections::make_observe_request(std::string_view name, std::uint64_t owner, std::uint64_t after,
                                                    std::optional<Millis> wait) const {
  validate_name(name);
  ObserveRequest r;
  r.name = std::string(name);
  r.owner = owner;
  r.after = after;
  static_cast<WaitRule&>(r) = WaitRule::of(wait);
  return r;
}

ObserveStep Elections::observe_step(const ObserveRequest& r) {
  ObserveStep s;
  ElectionRow row = this->row(r.name);
  if (row.view_revision() > r.after) {
    s.row = std::move(row);
    s.step.next = AcquireStep::Next::kAcquired;
    return s;
  }
  if (r.single_attempt) return s;  // kGaveUp
  const NameKey key = Elections::key(r.name);
  std::int64_t ttl_us = kLeaderlessRecheckUs;
  BellWatcher* bells = engine_.bells();
  if (!row.live && bells != nullptr) {  // also an election never used yet: its first campaign may be on its way
    // Pauses of half the time since it was first seen leaderless: about ten
    // looks within kHandoverWatch (after_refusal adds a millisecond to each).
    const Micros age = leaderless_for(r.name, row.view_revision());
    if (age < kHandoverWatch) ttl_us = std::max<std::int64_t>(0, (age / 2).count() - 1000);
  }
  if (row.live) {
    // The lease's end is a change no statement makes: look again then.
    ttl_us = row.ttl_us.value_or(0);
    if (bells != nullptr && !engine_.is_this_clients(row.hold_id)) bells->arm(key);
  } else if (bells != nullptr) {
    bells->arm(key);  // parks an observer, which the next take interrupts
  }
  s.step = r.after_refusal(ttl_us);
  return s;
}

Micros Elections::leaderless_for(std::string_view name, std::uint64_t revision) {
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

std::optional<ElectionRow> Elections::observe(const ObserveRequest& r, const std::atomic<bool>* interrupted) {
  ObserveWait w(*this, r);
  engine_.wait(w, interrupted);
  return std::move(w.row());
}

AcquireStep ObserveWait::step() {
  ObserveStep s = elections_.observe_step(request_);
  if (s.row) row_ = std::move(s.row);
  return s.step;
}

std::uint64_t ObserveWait::deliver(asio_impl::AsyncCompletion& completion) {
  completion.set_view(to_leader_view(*row_));
  return 1;
}

}  // namespace dlock::details
