// Sets of plain lock names held together (a MultiLock): one attempt takes
// all of them or none (HoldKind::take_set, one transaction), a refused set
// waits for a wake of any of its names, and a release frees the set's last
// holds in one statement. The holds themselves are ordinary lock holds of
// the owner: the watchdog renews them, losses are reported per name, and
// a name the owner holds already is counted up.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "base/micros.hpp"
#include "base/printable.hpp"
#include "base/validation.hpp"
#include "engine/engine.hpp"
#include "sql/bells.hpp"
#include "wakeup/sticky_wake.hpp"

namespace dlock::details {

namespace {

using Clock = std::chrono::steady_clock;
using Micros = std::chrono::microseconds;


}  // namespace

std::vector<std::unique_lock<std::mutex>> Engine::lock_set_stripes(const std::vector<std::string>& names,
                                                                   std::uint64_t owner) {
  // In one order (by address), so two sets of one owner never deadlock.
  std::vector<std::mutex*> stripes;
  stripes.reserve(names.size());
  for (const auto& n : names) stripes.push_back(&owner_mutex(Kind::kLock, n, owner));
  std::sort(stripes.begin(), stripes.end());
  stripes.erase(std::unique(stripes.begin(), stripes.end()), stripes.end());
  std::vector<std::unique_lock<std::mutex>> locked;
  locked.reserve(stripes.size());
  for (std::mutex* m : stripes) locked.emplace_back(*m);
  return locked;
}

Engine::SetAttempt Engine::attempt_set(const std::vector<std::string>& names, std::uint64_t owner, bool watchdog,
                                       Millis lease) {
  HoldKind& k = kind(Kind::kLock);
  const auto serial = lock_set_stripes(names, owner);
  CallBudget budget(options_.io_timeout);
  std::vector<HoldKind::SetMember> members;
  std::vector<std::optional<Hold>> own;
  members.reserve(names.size());
  for (const auto& name : names) {
    const NameKeyView key{Kind::kLock, name};
    std::optional<Hold> local = holds_.find(key, owner);
    if (local && local->lost) throw_lost(key, local->fence);
    members.push_back(local ? HoldKind::SetMember{name, local->hold_id, local->count + 1} : HoldKind::SetMember{name});
    own.push_back(std::move(local));
  }
  const Holder holder{machine_id_, owner, tagged_hold_id(), host_, pid_};
  const std::int64_t lease_us = micros(lease);
  const auto sent = Clock::now();
  const HoldKind::SetTaken taken = k.take_set(*this, members, holder, lease_us, watchdog);
  if (taken.lost) {
    const auto at = static_cast<std::size_t>(std::find(names.begin(), names.end(), *taken.lost) - names.begin());
    const NameKeyView key{Kind::kLock, names[at]};
    note_lost(key, owner, own[at]->generation, "its lease ran out or it was force-unlocked");
    throw_lost(key, own[at]->fence);
  }
  if (!taken.taken) return SetAttempt{false, taken.ttl_us, taken.foreign};
  for (std::size_t i = 0; i < names.size(); ++i) {
    const NameKeyView key{Kind::kLock, names[i]};
    if (own[i]) {
      holds_.record_reentrant(key, owner, own[i]->generation, members[i].count, watchdog, sent + lease);
      continue;
    }
    Hold h;
    h.hold_id = holder.hold_id;
    h.count = 1;
    h.watchdog = watchdog;
    h.deadline = sent + lease;
    h.bell_session = taken.bell_session;
    holds_.record_fresh(key, owner, h);
    intent_taken(key);  // the take cleared this client's mark on the row, if any
  }
  if (logger_->should_log(spdlog::level::debug))
    logger_->debug("dlock: {} locks acquired together by {}/{} ({})", names.size(), machine_id_, owner,
                   watchdog ? "watchdog" : "fixed lease");
  return SetAttempt{true, 0, {}};
}

SetRequest Engine::make_set_request(const std::vector<std::string>& names, std::uint64_t owner,
                                    std::optional<Millis> lease, std::optional<Millis> wait) const {
  if (lease) validate_lease(*lease);
  SetRequest r;
  r.names = names;
  r.owner = owner;
  r.watchdog = !lease.has_value();
  r.lease = lease.value_or(options_.watchdog_timeout);
  set_wait(wait, r.forever, r.single_attempt, r.deadline);
  return r;
}

AcquireStep Engine::set_step(const SetRequest& r) {
  const SetAttempt a = attempt_set(r.names, r.owner, r.watchdog, r.lease);
  AcquireStep step;  // kGaveUp
  if (a.acquired) {
    if (metrics_) metrics_->sets_held(1);
    if (bells_ && !r.single_attempt)
      for (const auto& n : r.names) bells_->settled(NameKey(Kind::kLock, n));
    step.next = AcquireStep::Next::kAcquired;
    return step;
  }
  if (r.single_attempt) return step;
  // Releases elsewhere ring the bells of the holds that block the set;
  // places in line kept for the names no other client blocks go on.
  if (bells_) {
    for (const auto& n : r.names) {
      const NameKey key(Kind::kLock, n);
      if (std::find(a.foreign.begin(), a.foreign.end(), n) != a.foreign.end()) {
        bells_->arm(key);
      } else {
        bells_->settled(key);
      }
    }
  }
  return wait_step(r.forever, r.deadline, a.ttl_us);  // until the first blocking lease ends
}

bool Engine::acquire_set(const SetRequest& r, const std::atomic<bool>* interrupted) {
  return counted(MetricKind::kMultiLock, r.single_attempt, interrupted,
                 [&] { return acquire_set_uncounted(r, interrupted); });
}

bool Engine::acquire_set_uncounted(const SetRequest& r, const std::atomic<bool>* interrupted) {
  if (r.single_attempt) return set_step(r).next == AcquireStep::Next::kAcquired;
  // Watching from before the first attempt: a release here between a
  // refused attempt and the wait leaves the wake set, so none is lost. A
  // watcher takes no wake from the names' other waiters.
  const auto wake = std::make_shared<StickyWake>();
  bool acquired = false;
  struct Ended {  // also when an attempt throws; after the watches are gone
    Engine& engine;
    const SetRequest& request;
    const bool& acquired;
    ~Ended() { engine.set_waiting_ended(request, acquired); }
  } ended{*this, r, acquired};
  {
    std::vector<std::unique_ptr<WaiterRegistry::Watch>> watches;
    watches.reserve(r.names.size());
    for (const auto& n : r.names)
      watches.push_back(std::make_unique<WaiterRegistry::Watch>(waiters_, NameKey(Kind::kLock, n), wake));
    SetWaiting waiting(*this, r.names);
    std::optional<CountedWait> counted;  // from the first refusal
    for (;;) {
      if (interrupted != nullptr && interrupted->load()) break;
      wake->clear();
      const AcquireStep step = set_step(r);
      if (step.next != AcquireStep::Next::kWait) {
        acquired = step.next == AcquireStep::Next::kAcquired;
        break;
      }
      if (!counted) counted.emplace(metrics_.get(), MetricKind::kMultiLock);
      if (!wake->wait_for(step.wait)) timed_wait_ended(r.forever, r.deadline);
    }
  }
  return acquired;
}

void Engine::set_waiting_ended(const SetRequest& r, bool acquired) {
  for (const auto& n : r.names) waiting_ended(NameKey(Kind::kLock, n), acquired);
}

Engine::SetWaiting::SetWaiting(Engine& engine, const std::vector<std::string>& names)
    : engine_(engine), names_(names) {
  std::lock_guard<std::mutex> guard(engine_.set_waits_mutex_);
  for (const auto& n : names_) ++engine_.set_waits_[n];
}

Engine::SetWaiting::~SetWaiting() {
  std::lock_guard<std::mutex> guard(engine_.set_waits_mutex_);
  for (const auto& n : names_) {
    const auto it = engine_.set_waits_.find(n);
    if (it != engine_.set_waits_.end() && --it->second == 0) engine_.set_waits_.erase(it);
  }
}

bool Engine::waited_by_a_set(std::string_view name) const {
  std::lock_guard<std::mutex> guard(set_waits_mutex_);
  return set_waits_.find(name) != set_waits_.end();
}

void Engine::release_set(const std::vector<std::string>& names, std::uint64_t owner) {
  HoldKind& k = kind(Kind::kLock);
  const auto serial = lock_set_stripes(names, owner);
  for (const auto& name : names) {
    if (!holds_.find(NameKeyView{Kind::kLock, name}, owner)) {
      throw NotHeldError("dlock: unlock of a set of locks by an owner (" + std::to_string(owner) +
                         ") that holds no hold on \"" + printable(name) + "\" in this client; nothing was released");
    }
  }
  CallBudget budget(options_.io_timeout);
  std::vector<std::pair<std::string, Hold>> last;
  for (const auto& name : names) {
    const NameKeyView key{Kind::kLock, name};
    const Hold before = *holds_.take_one(key, owner);
    if (before.lost) {
      if (before.count == 1) k.dropped(name, before.slot);
      continue;
    }
    if (before.count > 1) {
      count_down(key, owner, before);
      continue;
    }
    clear_mark_before_release(key);
    last.emplace_back(name, before);
  }
  if (metrics_) {
    metrics_->sets_held(-1);
    // The set's hold ends when every name's does (a name held on by
    // another acquire of the owner keeps it going).
    if (last.size() == names.size())
      metrics_->hold_ended(MetricKind::kMultiLock, Clock::now() - last.front().second.acquired);
  }
  free_set(last);
}

void Engine::free_set(const std::vector<std::pair<std::string, Hold>>& last) {
  HoldKind& k = kind(Kind::kLock);
  // One statement per bell session (the set's fresh holds share one).
  std::map<std::uint64_t, std::vector<std::size_t>> by_session;
  for (std::size_t i = 0; i < last.size(); ++i) by_session[last[i].second.bell_session].push_back(i);
  for (const auto& [session, members] : by_session) {
    std::vector<HeldRow> rows;
    for (std::size_t i : members) rows.push_back(HeldRow{RowKey{Kind::kLock, last[i].first, 0}, last[i].second.hold_id});
    const std::string& first = rows.front().key.name;
    // Whether the release applied, when its connection died: no hold of
    // the set still counted.
    const auto gone = [&](Connection& c) {
      for (const auto& row : rows_.read_holds(c, rows))
        if (row.state > 0) return Verdict::kRunAgain;
      return Verdict::kApplied;
    };
    std::size_t freed = 0;
    bool rang = false;
    const auto sent = Clock::now();
    try {
      bool done = false;
      if (session != 0) {
        // Ringing the bell the rows record wakes their waiters elsewhere, in
        // the same statement; never wait for that session.
        if (auto c = pool_.try_acquire_session(session); c && !(*c)->bell.current().empty()) {
          const std::string rung = (*c)->bell.current();
          done = true;
          try {
            freed = rows_.free_all(**c, rows, true);
            rang = freed > 0;  // rung, or the session closes (some rows were lost): its bell is given back
            if (freed == rows.size()) restamp_after_ring(**c, rung);
          } catch (const OutcomeUnknown& lost) {
            // The session and its bell are gone (a bell rings as its session
            // ends); whether the rows were freed, a read says. Not all: they
            // are freed anywhere below.
            c.reset();  // broken: back to the pool, which closes it and may lend the read a connection
            if (reconcile(first, lost, gone) == Verdict::kApplied) {
              freed = rows.size();
            } else {
              done = false;
            }
          }
        }
      }
      if (!done) {
        run_reconciled(first, [&](Connection& c) {
          freed = rows_.free_all(c, rows);
          return freed > 0;
        }, gone);
        if (session != 0 && freed > 0) {
          ring_when_idle(session);
          rang = true;
        }
      }
    } catch (const BackendError& e) {
      logger_->error("dlock: could not release {} lock(s) held together (first {}); they stay taken until their leases "
                     "end: {}", rows.size(), printable(first), e.what());
      continue;
    }
    if (freed < rows.size()) {
      std::vector<Hold> holds;
      for (std::size_t i : members) holds.push_back(last[i].second);
      report_set_losses(rows, holds, sent);
    }
    for (const auto& row : rows) {
      const NameKeyView key{Kind::kLock, row.key.name};
      if (rang) rang_for_waiters_elsewhere(key);
      k.wake(waiters_, row.key.name);
    }
  }
}

void Engine::report_set_losses(const std::vector<HeldRow>& rows, const std::vector<Hold>& holds, SteadyTime sent) {
  // Some of the holds were no longer live when the release ran: those whose
  // row another hold took *before* it are reported, told by the new hold's
  // age, which then exceeds the time since the release was sent (a row the
  // release freed may have been taken again since, by a hold younger than
  // that). One freed by a force-unlock looks like one freed here; the
  // watchdog reports those at its next renewal.
  try {
    read([&](Connection& c) {
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const HoldRow now = rows_.read(c, rows[i].key);
        const auto since_sent = std::chrono::duration_cast<Micros>(Clock::now() - sent).count();
        if (now.live && now.hold_id != rows[i].hold_id && now.held_for_us && *now.held_for_us > since_sent)
          note_lost(NameKeyView{Kind::kLock, rows[i].key.name}, holds[i], "found already lost at unlock", true);
      }
      return 0;
    });
  } catch (const BackendError& e) {
    logger_->warn("dlock: could not tell which of a set's holds were lost: {}", e.what());
  }
}

}  // namespace dlock::details
