#include "primitives/multi_lock/multi_locks.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/micros.hpp"
#include "base/printable.hpp"
#include "base/validation.hpp"
#include "metrics/metric_counters.hpp"
#include "wakeup/bell_watcher.hpp"

namespace dlock::details {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

std::vector<NameKey> MultiLocks::keys(const std::vector<std::string>& names) {
  std::vector<NameKey> out;
  out.reserve(names.size());
  for (const auto& n : names) out.emplace_back(Kind::kLock, n);
  return out;
}

SetRequest MultiLocks::make_request(const std::vector<std::string>& names, std::uint64_t owner,
                                    std::optional<Millis> lease, std::optional<Millis> wait) const {
  if (lease) validate_lease(*lease);
  SetRequest r;
  r.names = names;
  r.owner = owner;
  r.watchdog = !lease.has_value();
  r.lease = lease.value_or(engine_.options().watchdog_timeout);
  static_cast<WaitRule&>(r) = WaitRule::of(wait);
  return r;
}

std::vector<std::optional<Hold>> MultiLocks::own_holds(const SetRequest& r, std::vector<LockSet::Member>& members) {
  std::vector<std::optional<Hold>> own;
  members.reserve(r.names.size());
  for (const auto& name : r.names) {
    const NameKeyView key{Kind::kLock, name};
    std::optional<Hold> local = engine_.holds().find(key, r.owner);
    if (local && local->lost) engine_.throw_lost(key, local->fence);
    members.push_back(local ? LockSet::Member{name, local->hold_id, local->count + 1} : LockSet::Member{name});
    own.push_back(std::move(local));
  }
  return own;
}

MultiLocks::Attempt MultiLocks::attempt(const SetRequest& r) {
  const auto serial = engine_.lock_stripes(keys(r.names), r.owner);
  CallBudget budget(engine_.options().io_timeout);
  std::vector<LockSet::Member> members;
  const std::vector<std::optional<Hold>> own = own_holds(r, members);
  const Holder holder{engine_.machine_id(), r.owner, engine_.tagged_hold_id(), engine_.host(), engine_.pid()};
  const auto sent = Clock::now();
  const LockSet::Taken taken = set_.take(engine_, members, holder, micros(r.lease), r.watchdog);
  if (taken.lost) {
    const auto at = static_cast<std::size_t>(std::find(r.names.begin(), r.names.end(), *taken.lost) - r.names.begin());
    const NameKeyView key{Kind::kLock, r.names[at]};
    engine_.note_lost(key, r.owner, own[at]->generation, "its lease ran out or it was force-unlocked");
    engine_.throw_lost(key, own[at]->fence);
  }
  if (!taken.taken) return Attempt{false, taken.ttl_us, taken.foreign};
  record(r, taken, own, members, holder.hold_id, sent);
  const auto& logger = engine_.logger();
  if (logger->should_log(spdlog::level::debug))
    logger->debug("dlock: {} locks acquired together by {}/{} ({})", r.names.size(), engine_.machine_id(), r.owner,
                  r.watchdog ? "watchdog" : "fixed lease");
  return Attempt{true, 0, {}};
}

void MultiLocks::record(const SetRequest& r, const LockSet::Taken& taken, const std::vector<std::optional<Hold>>& own,
                        const std::vector<LockSet::Member>& members, std::uint64_t hold_id, SteadyTime sent) {
  for (std::size_t i = 0; i < r.names.size(); ++i) {
    const NameKeyView key{Kind::kLock, r.names[i]};
    if (own[i]) {
      engine_.holds().record_reentrant(key, r.owner, own[i]->generation, members[i].count, r.watchdog,
                                       sent + r.lease);
      continue;
    }
    Hold h;
    h.hold_id = hold_id;
    h.count = 1;
    h.watchdog = r.watchdog;
    h.deadline = sent + r.lease;
    h.bell_session = taken.bell_session;
    engine_.holds().record_fresh(key, r.owner, h);
    engine_.intent_taken(key);  // the take cleared this client's mark on the row, if any
  }
}

AcquireStep MultiLocks::step(const SetRequest& r) {
  const Attempt a = attempt(r);
  BellWatcher* bells = engine_.bells();
  AcquireStep step;  // kGaveUp
  if (a.acquired) {
    if (MetricCounters* m = engine_.counters()) m->sets_held(1);
    if (bells != nullptr && !r.single_attempt)
      for (const auto& n : r.names) bells->settled(NameKey(Kind::kLock, n));
    step.next = AcquireStep::Next::kAcquired;
    return step;
  }
  if (r.single_attempt) return step;
  // Releases elsewhere ring the bells of the holds that block the set;
  // places in line kept for the names no other client blocks go on.
  if (bells != nullptr) {
    for (const auto& n : r.names) {
      const NameKey key(Kind::kLock, n);
      if (std::find(a.foreign.begin(), a.foreign.end(), n) != a.foreign.end()) {
        bells->arm(key);
      } else {
        bells->settled(key);
      }
    }
  }
  return r.after_refusal(a.ttl_us);  // until the first blocking lease ends
}

bool MultiLocks::acquire(const SetRequest& r, const std::atomic<bool>* interrupted) {
  SetWait w(*this, r);
  return engine_.wait(w, interrupted).next == AcquireStep::Next::kAcquired;
}

void SetWait::ended(bool done) {
  if (started_) locks_.waiting_ended(request_, done);
}

void MultiLocks::waiting_ended(const SetRequest& r, bool acquired) {
  for (const auto& n : r.names) engine_.waiting_ended(NameKey(Kind::kLock, n), acquired);
}

void MultiLocks::release(const std::vector<std::string>& names, std::uint64_t owner) {
  HoldKind& k = engine_.kind(Kind::kLock);
  const auto serial = engine_.lock_stripes(keys(names), owner);
  for (const auto& name : names) {
    if (!engine_.holds().find(NameKeyView{Kind::kLock, name}, owner)) {
      throw NotHeldError("dlock: unlock of a set of locks by an owner (" + std::to_string(owner) +
                         ") that holds no hold on \"" + printable(name) + "\" in this client; nothing was released");
    }
  }
  CallBudget budget(engine_.options().io_timeout);
  std::vector<std::pair<NameKey, Hold>> last;
  for (const auto& name : names) {
    const NameKeyView key{Kind::kLock, name};
    const Hold before = *engine_.holds().take_one(key, owner);
    if (engine_.ends_hold(k, key, owner, before)) last.emplace_back(NameKey(key), before);
  }
  if (MetricCounters* m = engine_.counters()) {
    m->sets_held(-1);
    // The set's hold ends when every name's does (a name held on by
    // another acquire of the owner keeps it going).
    if (last.size() == names.size()) m->hold_ended(MetricKind::kMultiLock, Clock::now() - last.front().second.acquired);
  }
  engine_.free_rows(last);
}

}  // namespace dlock::details
